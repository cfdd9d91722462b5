"""Section 07's claims: one row per test of H1-H7 and the family of three (origin ``study``,
never counted with the paper's claims), each sentence generated from its numbers."""

from __future__ import annotations

from typing import Any

from lsa import study
from lsa.claims import Claim, fmt

SECTION = "07_mechanism_study"


def outcome_sentence(row: study.Row) -> str:
    """A test's outcome in words, every number from the analysis."""
    e, t = row.est, row.test
    return (f"{fmt(e.mean)} [{fmt(e.low)}, {fmt(e.high)}] nats ({e.level:.2%} interval, "
            f"{e.n} bases, {e.on_side} on the predicted side, p {fmt(e.p)}"
            + (f", Holm p {fmt(row.p_holm)}" if t.family in ("secondary", "paper") else "")
            + ")")


def study_claims(analysis: study.Analysis, st: Any) -> list[dict[str, Any]]:
    """The claims of every confirmatory test (not the exploratory estimates)."""
    out = []
    for row in analysis.rows:
        t, e = row.test, row.est
        if t.family == "exploratory":
            continue
        claim = Claim(id=f"ST.{t.id}", section=SECTION, claim=t.text,
                      paper="predicted " + ("lower" if t.sign < 0 else "higher"), grade="?",
                      ours=outcome_sentence(row), verdict=row.verdict,  # type: ignore[arg-type]
                      evidence=(f"family {t.family}; excluded bases {row.excluded or 'none'}"
                                + (f"; verdict if the premise held: {row.held}"
                                   if row.held else "")),
                      method=t.method, origin="study", estimate=e.mean, low=e.low,
                      high=e.high, half_width=(e.high - e.low) / 2, confidence=e.level,
                      direction=t.sign, p=e.p)
        out.append({**claim.to_dict(), "p_holm": row.p_holm, "family": t.family,
                    "bases": e.n})
    return out
