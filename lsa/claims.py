"""The paper's reference values (the one place they live) and the claim records.

Every reference value carries the grade of ``docs/paper.md``:

- ``A``: the authors' own words (paper text, table image, rebuttal);
- ``B``: a third-party summary, plausible but unchecked (the seeds summary too, an
  AI-extracted page whose own notice says its numbers can be wrong: a value only it gives);
- ``?``: not stated by the paper; the direction tested is the project's reading.

A section computes its claims from its own metrics (``Claim`` records, verdict included) and
stores them in its ``metrics.json``; the replication report only gathers them
(``lsa.runtable.read_sections``). No value here is
ever used to tune a run.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

from lsa.stats import (
    AGREES,
    CONTROL_OUTCOMES,
    EDGE,
    EXCLUDES_ZERO,
    NOT_RUN,
    PAPER_VERDICTS,
    PREMISE_NOT_MET,
    SMALLER,
    UNDERPOWERED,
    Verdict,
    edge_distance,
    interval_p,
    resolve_verdict,
)

# ``Verdict`` (every word a claim's verdict can be) is defined beside the words in ``lsa.stats``;
# ``lsa.claims.Verdict`` stays for the callers that import it from here

Grade = Literal["A", "B", "?"]
#: ``paper``: a claim of the paper (``lsa.stats.PAPER_VERDICTS``); ``control``: one of the
#: project's own controls and audits, with its own outcome words (``CONTROL_OUTCOMES``)
Kind = Literal["paper", "control"]
#: where a claim comes from (``docs/methods.md``, "Verdicts"): ``paper``, a method and setting
#: the paper ran, at the length it measured; ``extension``, a method, length or task the paper
#: did not run; ``reading``, our reading of the paper; ``check``, a manipulation check (the
#: regularizer lowers the term it minimises: not a verdict on the paper); ``objection``, a
#: review's objection tested as the review read the paper's claim (not the paper's claim: not
#: in its Holm family); ``control``, the project's controls and audits (``kind`` "control");
#: ``study``, the project's confirmatory study (issue 62, section 07: its own families and
#: verdict words, ``lsa.study``; never counted with the paper's claims)
Origin = Literal["paper", "extension", "reading", "check", "objection", "control", "study"]

#: the methods the paper ran each of its fine-tuning claims on (a claim about another method is
#: an extension): Tables 2-3 (CLEX, LongQLoRA, EABF), Table 4's alpha sweep (CLEX), Table 5's
#: l_extra settings (LongQLoRA); the rebuttal's equal compute and parts name no method
PAPER_METHODS: dict[str, frozenset[str]] = {
    "tables2-3": frozenset({"clex", "longqlora", "eabf"}),
    "table4": frozenset({"clex"}),
    "table5": frozenset({"longqlora"}),
}
#: the length at which the paper measured each method's perplexity, as a multiple of its
#: training window (the authors' rebuttal: the 8K validation set; EABF and LongQLoRA trained at
#: 8K, CLEX at 4K)
PAPER_PPL_MULTIPLE: dict[str, int] = {"eabf": 1, "longqlora": 1, "clex": 2}


@dataclass(frozen=True)
class Reference:
    value: Any
    grade: Grade
    source: str
    #: another source's value for the same quantity, where two disagree: the claim is judged
    #: against both and says so
    other: Any = None


# Values are the paper's; keys are "<table or section>/<setting>/<quantity>".
PAPER: dict[str, Reference] = {
    # Section 3, Figure 1
    "sec3/mean/generalizes": Reference(True, "A", "Sec. 3, Fig. 1a"),
    "sec3/mean_nope/test_mse": Reference(1e-5, "A", "Sec. 3, Fig. 1a: NoPE mean prediction"),
    "sec3/length/generalizes": Reference(False, "A", "Sec. 3, Fig. 1b"),
    "sec3/outrep/improves": Reference(True, "A", "Sec. 3, Fig. 1c: sqrt, log, 1/sqrt all help"),
    "sec3/mean_uniform/generalizes": Reference(True, "A", "rebuttal: uniform #ones variant"),
    "sec3/sum/generalizes": Reference(False, "?", "appendix (rebuttal); direction inferred"),
    # Section 4.1, Table 1
    "table1/pearson_misalign": Reference(-0.85, "B", "Table 1 as the seeds summary quotes it"),
    "table1/pearson_train_loss": Reference(-0.55, "A", "Table 1 (a third-party note: |r| = 0.62)"),
    # Tables 2-3: LongBench-E and perplexity, Llama-2-7B, 200 steps
    "table2/clex_redpajama/ce/longbench": Reference(24.7, "A", "Table 2"),
    "table2/clex_redpajama/ce/ppl": Reference(6.12, "B", "Table 2 as the seeds summary gives it"),
    "table2/clex_redpajama/a0.1/longbench": Reference(26.6, "A", "Table 2"),
    "table2/clex_redpajama/a0.1/ppl": Reference(5.88, "B", "Table 2 as the seeds summary gives it"),
    "table2/clex_redpajama/a0.5/longbench": Reference(24.7, "B", "Table 2"),
    "table2/clex_redpajama/a0.5/ppl": Reference(6.54, "B", "Table 2"),
    "table2/clex_pg19/ce/longbench": Reference(22.5, "B", "Table 2"),
    "table2/clex_pg19/ce/ppl": Reference(7.45, "B", "Table 2"),
    "table2/clex_pg19/a0.1/longbench": Reference(25.3, "B", "Table 2"),
    "table2/clex_pg19/a0.1/ppl": Reference(7.35, "B", "Table 2"),
    "table3/longqlora/ce/longbench": Reference(23.4, "B", "Table 3"),
    "table3/longqlora/ce/ppl": Reference(5.82, "B", "Table 3"),
    "table3/longqlora/a0.1/longbench": Reference(25.8, "B", "Table 3"),
    "table3/longqlora/a0.1/ppl": Reference(5.77, "B", "Table 3"),
    "table3/eabf/ce/longbench": Reference(23.6, "B", "Table 3"),
    "table3/eabf/ce/ppl": Reference(6.01, "B", "Table 3"),
    "table3/eabf/a0.1/longbench": Reference(24.8, "B", "Table 3"),
    "table3/eabf/a0.1/ppl": Reference(5.91, "B", "Table 3"),
    # Section 5.3 ablations
    "table4/alpha0/longbench": Reference(24.7, "B", "alpha sweep, CLEX"),
    "table4/alpha0.1/longbench": Reference(26.6, "B", "alpha sweep, CLEX"),
    "table4/alpha0.3/longbench": Reference(27.1, "B", "alpha sweep, CLEX"),
    "table4/alpha0.5/longbench": Reference(24.7, "B", "alpha sweep, CLEX"),
    "table4/alpha1.0/longbench": Reference(19.9, "B", "alpha sweep, CLEX"),
    "table4/alpha1.0/ppl": Reference(16.21, "B", "seeds summary (a third-party note: 12.92)",
                                     other=12.92),
    "table5/lextra_setting4/longbench": Reference(18.2, "B", "seeds summary (third party: 19.1)",
                                                  other=19.1),
    "table5/lextra_setting1/longbench": Reference(25.8, "B", "third-party note"),
    # the rebuttal's words for settings 2-4 against 1 (both its descriptions: docs/paper.md)
    "table5/lextra_setting2/words": Reference("comparable", "A", "rebuttal"),
    "table5/lextra_setting3/words": Reference("slightly inferior", "A",
                                              "rebuttal (later: 'slightly worse')"),
    "table5/lextra_setting4/words": Reference("significantly worse", "A", "rebuttal"),
    "sec5.3/compute": Reference("yes: 47/95/190 regularized vs 50/100/200 baseline steps",
                                "A", "rebuttal: equal compute"),
    "sec5.3/compute/overhead": Reference("3-5 %", "A", "rebuttal: the regularizer's overhead"),
    "sec5.3/parts": Reference("raw < only-misalign < only-method < combined", "A",
                              "rebuttal: method alone"),
    # Section 5.4 BABILong, average accuracy (%)
    "table6/4k/ce": Reference(48.2, "B", "Table 6"),
    "table6/4k/a0.1": Reference(49.1, "B", "Table 6"),
    "table6/8k/ce": Reference(42.4, "B", "Table 6"),
    "table6/8k/a0.1": Reference(44.4, "B", "Table 6"),
    "table6/16k/ce": Reference(37.9, "B", "Table 6"),
    "table6/16k/a0.1": Reference(40.1, "B", "Table 6"),
    # QA1 by depth of the supporting fact, 16K input (%)
    "table7/ce/depth0": Reference(75, "A", "Table 7"),
    "table7/ce/depth25": Reference(64, "A", "Table 7"),
    "table7/ce/depth50": Reference(30, "A", "Table 7"),
    "table7/ce/depth75": Reference(69, "A", "Table 7"),
    "table7/a0.1/depth0": Reference(73, "A", "Table 7"),
    "table7/a0.1/depth25": Reference(64, "A", "Table 7"),
    "table7/a0.1/depth50": Reference(38, "A", "Table 7"),
    "table7/a0.1/depth75": Reference(74, "A", "Table 7"),
}


def paper(key: str) -> Reference:
    try:
        return PAPER[key]
    except KeyError:
        raise KeyError(f"no paper reference {key!r}; known: {', '.join(sorted(PAPER))}") from None


@dataclass
class Claim:
    """One claim of the paper set against this project's number, with a computed verdict."""

    id: str
    section: str
    claim: str
    paper: str
    grade: Grade
    ours: str
    verdict: Verdict
    evidence: str = ""
    kind: Kind = "paper"
    #: the fine-tuning method the claim is about ("" where none): its premise is its own G3
    method: str = ""
    #: where the claim comes from (``Origin``); a control's is "control"
    origin: Origin = "paper"
    #: a claim judged on an interval (``judged``): our point estimate, its interval, the
    #: interval's half-width and confidence level, the paper's direction (+1 or -1) and the
    #: paper's effect it is held against (signed; NaN: the paper gives no size), the distance
    #: of its verdict to the nearest boundary in half-widths (``lsa.stats.edge_distance``)
    #: and the p-value of 0 the interval implies (``lsa.stats.interval_p``): enough to
    #: recompute the verdict (``lsa.stats.resolve_verdict``) from ``claims.csv``; NaN where
    #: the claim has no interval
    estimate: float = math.nan
    low: float = math.nan
    high: float = math.nan
    half_width: float = math.nan
    confidence: float = math.nan
    direction: float = math.nan
    paper_effect: float = math.nan
    edge: float = math.nan
    p: float = math.nan
    #: what the verdict rests on: the clusters of units (trained models) without any one of
    #: which it changes ("" where none does, or where the claim was not refitted without them)
    rests_on: str = ""

    def __post_init__(self) -> None:
        if self.kind == "control":
            self.origin = "control"
        elif self.origin == "control":
            raise ValueError(f"claim {self.id}: origin 'control' needs kind 'control'")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: how a claim's evidence keeps the verdict a failed premise replaced (``held_note``:
#: ``lsa.gates.apply_premise``, BABILong's cells; read back by ``lsa.headline``)
HELD_NOTE = "[verdict if the premise held: {}]"


def held_note(verdict: str) -> str:
    """The words that keep ``verdict`` in a claim's evidence where a premise failed."""
    return HELD_NOTE.format(verdict)


def judged(low: float, high: float, paper_sign: int, effect: float | None = None,
           n: int | None = None, estimate: float | None = None,
           p: float | None = None) -> dict[str, Any]:
    """A claim's verdict (``lsa.stats.resolve_verdict``) with the numbers it rests on, as
    ``Claim`` keywords: ``Claim(..., **judged(low, high, -1, effect, n, estimate))``. Every
    interval judged here is a 95 % one (``CONFIDENCE``). ``p``: the p of 0 from the
    interval's own procedure (a bootstrap's, ``lsa.stats.Resampled``); else the one the
    interval implies (``interval_p``: exact for a t interval of ``n`` values)."""
    size = effect is not None and math.isfinite(effect) and effect != 0
    return {"verdict": resolve_verdict(low, high, paper_sign, effect, n),
            **interval_fields(low, high, estimate), "direction": paper_sign,
            "paper_effect": paper_sign * abs(effect) if size else math.nan,
            "edge": edge_distance(low, high, paper_sign, effect if size else None),
            "p": p if p is not None else interval_p(low, high, n) if n != 0 else math.nan}


#: the confidence level of every interval a verdict is given on
CONFIDENCE = 0.95


def interval_fields(low: float, high: float, estimate: float | None = None) -> dict[str, Any]:
    """A 95 % interval as ``Claim`` keywords: the estimate (NaN when not given), its ends,
    half-width and level."""
    return {"estimate": math.nan if estimate is None else float(estimate),
            "low": float(low), "high": float(high), "half_width": (float(high) - float(low)) / 2,
            "confidence": CONFIDENCE}


def fmt(value: float, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}g}"


def claims_table(claims: list[dict[str, Any]]):
    import pandas as pd

    table = pd.DataFrame(claims, columns=COLUMNS)
    table["kind"] = table["kind"].fillna("paper")
    table["method"] = table["method"].astype(object).fillna("")
    table["rests_on"] = table["rests_on"].astype(object).fillna("")  # older snapshots: none
    # an older snapshot's rows have no origin: a paper claim was counted as the paper's
    table["origin"] = table["origin"].astype(object).where(
        table["origin"].notna(), table["kind"].map({"paper": "paper", "control": "control"}))
    return table


#: the numbers a verdict is computed from (``judged``): columns of the file, not of the
#: tables a reader sees (``display``), where the evidence gives them in words
NUMBERS = ["estimate", "low", "high", "half_width", "confidence", "direction", "paper_effect",
           "edge"]
#: a claims table's columns (``claims.csv``): the record's fields, then ``p_holm``
#: (``with_holm``, over every section's claims: the report's table)
COLUMNS = ["id", "section", "kind", "origin", "method", "claim", "paper", "grade", "ours",
           "verdict", "evidence", "rests_on", *NUMBERS, "p", "p_holm"]
#: the family level of Holm's correction
ALPHA = 0.05


#: the declared Holm families (``docs/methods.md``, "One verdict rule"): each origin of
#: claims judged on an interval is one family, by its name; the project's controls, Section
#: 3's threshold checks and the study (its own families, ``lsa.study``) are outside them
FAMILIES: dict[str, str] = {"paper": "the paper's claims", "extension": "the extensions",
                            "reading": "our readings", "check": "the manipulation checks",
                            "objection": "the reviews' objections"}
#: how a claim's evidence keeps the verdict its family's correction replaced
FAMILY_NOTE = "[{verdict} before Holm's correction in {family} (Holm p {p_holm:.3g})]"


def in_families(table):
    """The rows of a declared family (``FAMILIES``) judged on an interval: a finite ``p``,
    neither "premise not met" nor "not run"."""
    return (table["origin"].isin(list(FAMILIES)) & table["p"].notna()
            & ~table["verdict"].isin([PREMISE_NOT_MET, NOT_RUN]))


def holm_family(table, origin: str = "paper"):
    """The rows of the family of ``origin`` (``in_families``): the paper's claims as it ran
    them by default."""
    return in_families(table) & (table["origin"] == origin)


def with_holm(table):
    """``table`` with ``p_holm``: Holm's step-down adjustment (statsmodels ``multipletests``)
    of the p-values of each declared family (``holm_family`` of each origin of ``FAMILIES``),
    NaN elsewhere."""
    from statsmodels.stats.multitest import multipletests

    table = table.copy()
    table["p_holm"] = math.nan
    for origin in FAMILIES:
        family = holm_family(table, origin)
        if family.any():
            table.loc[family, "p_holm"] = multipletests(table.loc[family, "p"].astype(float),
                                                        alpha=ALPHA, method="holm")[1]
    return table


def family_verdict(verdict: str, low: float, high: float, direction: float,
                   paper_effect: float) -> str:
    """What a claim of a family reads where its Holm p is ``ALPHA`` or more (``docs/methods.md``,
    "One verdict rule"). A verdict that rests on the interval excluding 0 (``EXCLUDES_ZERO``)
    does not stand: the claim reads as an interval that holds 0 does, "smaller than the
    paper's effect" where its end on the paper's side still lies below the paper's effect
    (that exclusion is a test of its own, at the interval's level) and "underpowered"
    otherwise; so an "agrees in direction, smaller" reads "smaller than the paper's effect".
    An equivalence claim (no direction: its p is the TOST p of lying inside the margin) that
    "agrees" reads "underpowered". Every other verdict stands."""
    if not math.isfinite(direction):
        return UNDERPOWERED if verdict == AGREES else verdict
    if verdict not in EXCLUDES_ZERO:
        return verdict
    hi = max(direction * low, direction * high)
    size = abs(paper_effect) if math.isfinite(paper_effect) and paper_effect != 0 else None
    return SMALLER if size is not None and hi < size else UNDERPOWERED


def with_family_rule(table):
    """``table`` (with ``p_holm``: ``with_holm``) under the one verdict rule: every claim of a
    declared family whose Holm p is ``ALPHA`` or more reads ``family_verdict``, its evidence
    keeping the verdict it replaced (``FAMILY_NOTE``)."""
    table = table.copy()
    failing = in_families(table) & (table["p_holm"].astype(float) >= ALPHA)
    for i in table.index[failing]:
        row = table.loc[i]
        new = family_verdict(row["verdict"], float(row["low"]), float(row["high"]),
                             float(row["direction"]), float(row["paper_effect"]))
        if new != row["verdict"]:
            note = FAMILY_NOTE.format(verdict=row["verdict"], family=FAMILIES[row["origin"]],
                                      p_holm=float(row["p_holm"]))
            evidence = row["evidence"] if isinstance(row["evidence"], str) else ""
            table.at[i, "evidence"] = f"{evidence} {note}".strip()
            table.at[i, "verdict"] = new
    return table


def moved_by_family_rule(table) -> list[str]:
    """The ids of the claims whose verdict the family rule replaced (their evidence says so)."""
    marker = FAMILY_NOTE.split("{")[0]
    evidence = table["evidence"].fillna("").astype(str)  # pandas keeps a missing one NaN
    return [str(i) for i, e in zip(table["id"], evidence) if marker in e
            and "before Holm's correction" in e]


def holm_sentence(table) -> str:
    """The one verdict rule's outcome in words: Holm's correction within each declared family,
    and the claims whose verdict it replaced (a table without ``p_holm``: "")."""
    if "p_holm" not in table or table["p_holm"].isna().all():
        return ""
    sizes = ", ".join(f"{FAMILIES[o]} {int(holm_family(table, o).sum())}" for o in FAMILIES
                      if holm_family(table, o).any())
    moved = moved_by_family_rule(table)
    return (f"Holm's correction within each declared family (family-wise {ALPHA:.0%}; claims "
            f"judged on an interval: {sizes}): a verdict that excludes 0 stands only at a Holm "
            f"p below {ALPHA}; "
            + (f"{len(moved)} did not and read otherwise: {', '.join(moved)}" if moved
               else "every one does"))


def display(table):
    """A claims table as a reader sees it: the verdict marked "(edge)" where an interval end
    lies within ``EDGE`` half-widths of its boundary and "(rests on <cluster>)" where leaving
    one cluster out changes it, the p-values in words, the raw interval columns (already in
    ``evidence``) left out."""
    table = table.copy()
    edge = (table["edge"].astype(float) < EDGE) & ~table["verdict"].isin([PREMISE_NOT_MET,
                                                                           NOT_RUN])
    table["verdict"] = table["verdict"].where(~edge, table["verdict"] + " (edge)")
    rests = table["rests_on"].astype(str).str.len() > 0
    table["verdict"] = table["verdict"].where(~rests, table["verdict"] + " (rests on "
                                              + table["rests_on"].astype(str) + ")")

    def p_words(value) -> str:
        return "" if value is None or (isinstance(value, float) and math.isnan(value)) else \
            "< 0.001" if value < 0.001 else f"{value:.3f}"

    table["p"] = table["p"].map(p_words)
    holm = table["p_holm"].map(p_words)
    table = table.drop(columns=[*NUMBERS, "p_holm", "rests_on"]
                       + ([] if table["p"].str.len().any() else ["p"]))
    if holm.str.len().any():
        table["p (Holm)"] = holm
    return table


#: the origins, in the order they are shown and counted, with their headings
ORIGIN_TITLES = {"paper": "The paper's claims, as it ran them",
                 "extension": "Extensions: methods, lengths or tasks the paper did not run",
                 "reading": "Our readings of the paper",
                 "check": "Manipulation checks (not verdicts on the paper)",
                 "objection": "The reviews' objections, as the reviews read the paper's claim "
                              "(not in the paper's Holm family)",
                 "control": "The project's controls and audits",
                 "study": "The confirmatory study (issue 62): its own families, never counted "
                          "with the paper's claims"}
#: the words ``counts_sentence`` counts each origin with
ORIGIN_WORDS = {"paper": "claims of the paper, as it ran them, judged on an interval",
                "threshold": "threshold checks of the paper's claims (Section 3's synthetic "
                             "tasks: no interval; not counted with the claims above)",
                "extension": "extensions (not run by the paper)",
                "reading": "readings of ours",
                "check": "manipulation checks (not verdicts)",
                "objection": "objections of the reviews (not the paper's claims)",
                "control": "of the project's controls and audits (not verdicts on the paper)",
                "study": "tests of the confirmatory study (its own families)"}


def by_kind(table) -> list[tuple[str, Any]]:
    """``[(heading, rows)]``: a claims table split by its ``origin`` column, the paper's claims
    as it ran them first (an origin without rows is left out), so that no table mixes them;
    each as a reader sees it (``display``), without the columns the split makes redundant."""
    return [(title, display(table[table["origin"] == origin]).drop(columns=["kind", "origin"]))
            for origin, title in ORIGIN_TITLES.items() if (table["origin"] == origin).any()]


#: the order the counts are shown in: the paper's verdicts, the project's controls' outcomes
VERDICT_ORDER = [*PAPER_VERDICTS, PREMISE_NOT_MET, NOT_RUN]
CONTROL_ORDER = [*CONTROL_OUTCOMES, PREMISE_NOT_MET, NOT_RUN]


def _in_order(verdicts) -> list[str]:
    order = VERDICT_ORDER + [v for v in CONTROL_ORDER if v not in VERDICT_ORDER]
    return sorted(set(verdicts), key=lambda v: (v not in order,
                                                 order.index(v) if v in order else 0, v))


def threshold_checks(table):
    """Which rows are the paper's claims judged by a threshold without an interval: Section
    3's synthetic tasks (a majority of seeds, or one seed), where judged at all (not "premise
    not met" or "not run")."""
    return ((table["origin"] == "paper") & table["section"].astype(str).str.startswith("Sec. 3")
            & ~table["verdict"].isin([PREMISE_NOT_MET, NOT_RUN]))


def verdict_counts(table) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """``(paper, apart)``: the paper's claims as it ran them (origin ``paper``) judged on an
    interval, by verdict (every verdict of ``VERDICT_ORDER``, zeros included), and, counted
    apart (``{kind: {verdict: n}}``), its threshold checks (``threshold_checks``) first, then
    every other origin's rows by verdict or outcome (those that occur)."""
    checks = threshold_checks(table)
    paper_rows = table[(table["origin"] == "paper") & ~checks]
    other = sorted(set(paper_rows["verdict"]) - set(VERDICT_ORDER))  # an older snapshot's words
    paper_counts = paper_rows["verdict"].value_counts().reindex(VERDICT_ORDER + other,
                                                                fill_value=0)
    apart = {}
    if checks.any():
        counts = table.loc[checks, "verdict"].value_counts()
        apart["threshold"] = {v: int(counts[v]) for v in _in_order(table.loc[checks, "verdict"])}
    for origin in ORIGIN_TITLES:
        rows = table[table["origin"] == origin]
        if origin != "paper" and len(rows):
            counts = rows["verdict"].value_counts()
            apart[origin] = {v: int(counts[v]) for v in _in_order(rows["verdict"])}
    return {k: int(v) for k, v in paper_counts.items()}, apart


def verdicts_by_method(table):
    """The paper's claims as it ran them about a fine-tuning method (``method`` set), counted by
    method and verdict: whose premise holds, and what the claims that rest on it say."""
    import pandas as pd

    rows = table[(table["origin"] == "paper") & (table["method"].fillna("") != "")]
    if rows.empty:
        return pd.DataFrame()
    counts = rows.groupby(["method", "verdict"]).size().unstack(fill_value=0)
    order = [v for v in VERDICT_ORDER if v in counts.columns]
    return counts[order + sorted(set(counts.columns) - set(order))].reset_index()


def counts_sentence(counts: dict[str, int], apart: dict[str, dict[str, int]]) -> str:
    """``verdict_counts``' tallies in one sentence (notebook 04, the report, the results page):
    the paper's claims as it ran them, then each other origin counted apart."""
    text = (f"**{sum(counts.values())} {ORIGIN_WORDS['paper']}**: "
            + ", ".join(f"{n} {v}" for v, n in counts.items()))
    for origin, tally in apart.items():
        text += (f"; **{sum(tally.values())} {ORIGIN_WORDS.get(origin, origin)}**: "
                 + ", ".join(f"{n} {v}" for v, n in tally.items()))
    return text
