"""The report's words about the claims it gathers (it makes none of its own): the counts by
verdict, and the claims table split by kind."""

from __future__ import annotations

import pandas as pd

from lsa.claims import by_kind, counts_sentence, holm_sentence
from lsa.sections import Result


def claims_by_kind(result: Result) -> list[tuple[str, pd.DataFrame]]:
    """The claims table as one table per origin: the paper's claims as it ran them first."""
    return by_kind(result.claims_table)


def counts_text(result: Result) -> str:
    """The paper's claims as it ran them by verdict, then every other origin (extensions,
    readings, checks, the project's controls) counted apart;
    then the claims about each fine-tuning method by verdict (each rests on its own G3)."""
    text = counts_sentence(result.metrics["verdicts"], result.metrics["counted_apart"])
    if holm := holm_sentence(result.claims_table):
        text += f"\n\n{holm}."
    by_method = result.verdicts_by_method
    if by_method is not None and len(by_method):
        text += ("\n\nThe paper's claims about each fine-tuning method, by verdict (a method's "
                 "claims rest on G1, G2 and its own G3):\n\n" + by_method.to_markdown(index=False))
    return text
