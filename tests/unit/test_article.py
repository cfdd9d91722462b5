"""The replication article (issue 74, item 1; lsa/article.py): generated whole from the
published snapshots, in the RC2020 form, every verdict its claims table's, and committed as
publishing last wrote it."""

import re

import pandas as pd
from support import ROOT

from lsa import article, generated

PARTS = ["Scope of reproducibility", "Methodology", "Results", "What was easy",
         "What was difficult", "Communication with original authors"]


def test_the_article_has_the_six_parts_of_the_summary_first():
    text = article.article_markdown()
    heads = re.findall(r"^### (.+)$", text, flags=re.M)
    assert heads[:6] == PARTS
    assert text.index("## Reproducibility summary") < text.index("## The report")


def test_every_paper_claim_is_in_its_scope_and_its_table_with_the_published_verdict():
    text = article.article_markdown()
    claims = pd.read_csv(ROOT / "docs" / "results" / article.MAIN / "claims.csv",
                         keep_default_na=False)
    paper = claims[claims["origin"] == "paper"]
    scope = text[text.index("### Scope"):text.index("### Methodology")]
    for row in paper.itertuples():
        assert f"({row.id}; the paper: " in scope, row.id
        found = re.search(rf"^\| {re.escape(row.id)} +\|.*\| ([^|]+?) +\|$", text, flags=re.M)
        assert found, row.id
        assert found.group(1).split(" (edge)")[0].split(" (rests on")[0] == row.verdict, row.id
    for objection in article.scope(claims)[-3:]:
        assert objection in scope


def test_the_summarys_prose_types_no_result_and_the_committed_article_is_current():
    for prose in (article.EASY, article.DIFFICULT, article.COMMUNICATION):
        assert generated.typed_numbers(prose) == []
    assert article.OUT.read_text() == article.article_markdown(), \
        "docs/article/index.md is stale: python -m lsa article writes it"
