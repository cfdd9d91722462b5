"""The article's site and PDF (issue 74, item 2; ``make article``): built from the published
files alone, opened in Chromium: every internal link of the article leads to a page that
exists, every figure loads, no page loads anything from the web, and the article's verdicts
are its claims table's. Long tier: Sphinx over ``docs/`` and a browser (about a minute).

Needs Debian's ``chromium`` and ``chromium-driver``; without them the test is skipped, unless
``LSA_REQUIRE_BROWSER`` is set (CI), where it fails."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import pandas as pd
import pytest
from support import ROOT, chrome, chromium

from lsa import article


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    found = chromium()
    page, pdf = article.build(tmp_path_factory.mktemp("article"))
    return page, pdf, found


def test_the_pdf_is_a_pdf_of_the_article(site):
    _, pdf, _ = site
    head = pdf.read_bytes()[:5]
    assert head == b"%PDF-" and pdf.stat().st_size > 100_000


def test_no_built_page_loads_anything_from_the_web(site):
    page, _, _ = site
    html = page.parent.parent
    remote = re.compile(r"""<(?:script|link|img)[^>]+(?:src|href)=["']((?:https?:)?//[^"']+)""")
    found = {str(p.relative_to(html)): remote.findall(p.read_text(errors="replace"))
             for p in html.rglob("*.html")}
    assert not {k: v for k, v in found.items() if v}


def test_the_article_in_a_browser_links_figures_and_verdicts(site):
    from selenium.webdriver.common.by import By

    page, _, found = site
    driver = chrome(found, "--allow-file-access-from-files")
    try:
        driver.get(page.as_uri())
        assert "Long-Short Alignment" in driver.title
        images = driver.find_elements(By.CSS_SELECTOR, "article img")
        assert images, "the article shows its figures"
        broken = [i.get_attribute("src") for i in images
                  if not driver.execute_script("return arguments[0].complete && "
                                               "arguments[0].naturalWidth > 0", i)]
        assert not broken
        # the article's verdicts, row by row, against its claims table
        claims = pd.read_csv(ROOT / "docs" / "results" / article.MAIN / "claims.csv",
                             keep_default_na=False).set_index("id")
        rows = 0
        for tr in driver.find_elements(By.CSS_SELECTOR, "article table tbody tr"):
            cells = [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            if len(cells) == 5 and cells[0] in claims.index:
                verdict = cells[4].split(" (edge)")[0].split(" (rests on")[0]
                assert verdict == claims.loc[cells[0], "verdict"], cells[0]
                rows += 1
        assert rows == (claims["origin"] == "paper").sum()
        # every internal link: a page of the site, opened in the browser
        links = {a.get_attribute("href") for a in driver.find_elements(By.CSS_SELECTOR,
                                                                        "article a[href]")}
        internal = sorted({h.split("#")[0] for h in links if h.startswith("file://")})
        assert len(internal) > 5
        for href in internal:
            path = Path(unquote(urlparse(href).path))
            assert path.exists(), href
            if path.suffix == ".html":
                driver.get(href)
                assert driver.find_elements(By.CSS_SELECTOR, "article"), href
    finally:
        driver.quit()
