"""Sphinx's configuration of the article's site (``make article``, ``lsa.article.build``): the
source is ``docs/`` (the article, the methods, the bench pages and the published snapshots
with their executed notebooks), the article its root page; notebooks are shown with the
outputs they were published with, never executed; nothing is loaded from the web."""

project = "lsa: Long-Short Alignment, replicated"
extensions = ["myst_nb"]
root_doc = "article/index"
nb_execution_mode = "off"
html_theme = "sphinx_book_theme"
html_title = "lsa: the replication"
html_theme_options = {"use_download_button": False, "home_page_in_toc": True}
exclude_patterns = ["exploration/**", "results/*/runs/**", "**/.ipynb_checkpoints",
                    "article/build/**"]
# pages reached by links, not by a table of contents; MyST's own headings and cross-references
suppress_warnings = ["toc.not_included", "myst.header", "myst.xref_missing",
                     "misc.highlighting_failure"]
myst_heading_anchors = 3
# the claims' words exactly as claims.csv has them (no typographic quotes)
smartquotes = False
# widget outputs (a progress bar) are shown as their text: no widget script from a CDN
nb_ipywidgets_js = {}
