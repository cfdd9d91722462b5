"""Section 4.1's claims: on one score (Pearson, as the paper) over the primary population of
units, T1.1-T1.3 are the paper's (the misalignment and the training loss correlate negatively
with the long-context score, the misalignment better), T1.4-T1.8 the project's audits
(controls, with outcome words); with the texts computed from the tables: the narrative of
what the population says and whether the Jeffreys part varies beyond its sampling noise.

A correlation's bootstrap interval is read against 0 and against the paper's r, on both
sides of each (``lsa.stats.resolve_verdict``, through ``lsa.claims.judged``). "Predicts
better" is signed: the predictor
must point the paper's way (else disagrees), and the interval of the signed difference is held
against the paper's difference of the two correlations.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from lsa.claims import Claim, Verdict, judged, paper
from lsa.gates import Gate
from lsa.sections.correlation.tables import comparison, pearson, pearson_rows
from lsa.stats import (
    EXCLUDES_ZERO,
    UNDERPOWERED,
    audit_outcome,
    correlation_value,
    p_text,
    resolution_text,
    resolve_verdict,
    sign_verdict,
)


def r_text(row: dict[str, Any] | None) -> str:
    """``+0.12 [-0.30, +0.50]``: r with its interval; ``n/a`` for no row."""
    return "n/a" if row is None else f"{row['r']:+.2f} [{row['low']:+.2f}, {row['high']:+.2f}]"


def _corr_text(row: dict[str, Any], n_permutations: int = 2000) -> str:
    return (f"r = {row['r']:+.2f} [{row['low']:+.2f}, {row['high']:+.2f}], "
            f"permutation p {p_text(row['p_permutation'], n_permutations)}, n = {row['n']} "
            "units")


def noise_text(table: pd.DataFrame) -> str:
    """Is the spread of the Jeffreys part between units more than its sampling noise?"""
    if table.empty or "jeffreys_se" not in table:
        return "no units"
    se, spread = float(table["jeffreys_se"].mean()), float(table["jeffreys"].std(ddof=1))
    verdict = ("within the sampling noise of one measurement: a correlation with it is not "
               "evidence" if spread <= 2 * se else "larger than the sampling noise")
    return (f"Jeffreys part: spread between units (sd) {spread:.2g} nats, standard error of one "
            f"unit's measurement about {se:.2g} nats: the spread is {verdict}.")


def narrative(primary: pd.DataFrame, rows: pd.DataFrame, score: str) -> str:
    """What Table 1 says on this population, computed from it (markdown): the direction of
    the misalignment's correlation, which part (Jeffreys or entropy) carries it, where the
    spread of the Jeffreys part comes from (the kinds of units), and what a test of this many
    units can and cannot say. ``rows``: ``table1`` rows of every predictor on ``score``."""
    n = len(primary)
    if n < 3:
        return f"{n} units: too few for a correlation."
    mis, loss = pearson(rows, "misalignment", score), pearson(rows, "train_loss", score)
    jef, ent = pearson(rows, "jeffreys", score), pearson(rows, "entropy", score)

    def side(row: dict[str, Any] | None) -> str:
        if row is None or not math.isfinite(row["low"]):
            return "not measured"
        return ("the paper's sign (negative), its interval clear of 0" if row["high"] < 0 else
                "the opposite of the paper's sign, its interval clear of 0" if row["low"] > 0
                else "an interval across 0: no direction at this size")

    out = [f"- **Direction.** Pearson r of the misalignment with `{score}`: {r_text(mis)}, "
           f"{side(mis)}; of the training loss: {r_text(loss)}, {side(loss)}."]
    if jef is not None and ent is not None:
        carrier = "the entropy (sharpness)" if abs(ent["r"]) > abs(jef["r"]) else \
            "the Jeffreys part (alignment)"
        share = (primary["jeffreys"] / primary["misalignment"]).dropna()
        out.append(f"- **Which part carries it.** Jeffreys (alignment): r = {r_text(jef)}; entropy "
                   f"(sharpness, H(p) + H(q)): r = {r_text(ent)}. The larger |r| is {carrier}'s. "
                   f"The Jeffreys part is {100 * share.min():.2g}-{100 * share.max():.2g} % of "
                   "SCE across the units" + (
                       "; the two parts correlate with the score in opposite directions, so "
                       "SCE's correlation is what is left of their sum." if jef["r"] * ent["r"]
                       < 0 else "."))
    by_kind = primary.groupby("kind")["jeffreys"].agg(["mean", "min", "max", "count"])
    parts = [f"{kind} ({int(r['count'])} units) {r['mean']:.3g} ({r['min']:.2g}-{r['max']:.2g})"
             for kind, r in by_kind.iterrows()]
    tuned = primary[primary["kind"] == "fine-tuning run"][["jeffreys", score]].dropna()
    within = (f"; among the fine-tuning runs alone r(Jeffreys, score) = "
              f"{correlation_value(tuned['jeffreys'], tuned[score]):+.2f} ({len(tuned)} units)"
              if len(tuned) >= 3 and tuned["jeffreys"].nunique() > 1 else "")
    out.append("- **Where the Jeffreys part varies.** Its mean (range) by kind of unit: "
               + "; ".join(parts) + within + ". A correlation over all units that comes from "
               "the difference between kinds (models never fine-tuned at `l_train` against "
               "fine-tuned ones) says how the kinds differ, not that alignment predicts the "
               "score within a kind.")
    if mis is not None and math.isfinite(mis["low"]):
        half = (mis["high"] - mis["low"]) / 2
        out.append(f"- **What this test can say.** {n} units: the 95 % interval of r is about "
                   f"+-{half:.2f} wide here, so only a correlation of that size or more gets a "
                   "direction. The units share one base model and one corpus (their seeds vary "
                   "the data order only), and the score is the NLL of book text beyond "
                   "`l_train`, not LongBench-E: a verdict here is on this testbed, a check of "
                   "the paper's mechanism and not of its 7B numbers.")
    return "\n".join(out)


def table1_claims(rows: pd.DataFrame, comp: pd.DataFrame, partial: pd.DataFrame,
                  loo: pd.DataFrame, ranking: dict[str, Any] | None, score: str,
                  n_permutations: int = 2000, influence: pd.DataFrame | None = None
                  ) -> list[dict[str, Any]]:
    """The Section 4.1 claims on ``score`` (module docstring): from Table 1's rows, the
    comparisons, the partial correlations, the leave-one-out fits, the L2 ranking and the
    influence of each unit, in ``lsa.stats.resolve_verdict``'s words for the paper's claims
    and outcome words for the audits."""
    out: list[Claim] = []
    if rows.empty:
        return []
    pear = pearson_rows(rows, score)
    mis, ce = paper("table1/pearson_misalign"), paper("table1/pearson_train_loss")
    label = f"{score} (higher is better)"
    if "misalignment" in pear.index:
        row = pear.loc["misalignment"].to_dict()
        out.append(Claim(
            id="T1.1", section="Sec. 4.1",
            claim="The misalignment correlates negatively with the long-context score",
            paper=f"r = {mis.value} (7 models, LongBench-E)", grade=mis.grade,
            ours=_corr_text(row, n_permutations),
            **judged(row["low"], row["high"], -1, mis.value, estimate=row["r"],
                     p=row.get("p_bootstrap")),
            evidence=f"score: {label}; 95 % bootstrap interval over clusters of units (the "
                     "base model and its RoPE copies one cluster); "
                     + resolution_text(row["low"], row["high"], mis.value)))
    if "train_loss" in pear.index:
        row = pear.loc["train_loss"].to_dict()
        out.append(Claim(
            id="T1.2", section="Sec. 4.1",
            claim="The training loss correlates negatively with the score",
            paper=f"r = {ce.value}", grade=ce.grade, ours=_corr_text(row, n_permutations),
            **judged(row["low"], row["high"], -1, ce.value, estimate=row["r"],
                     p=row.get("p_bootstrap")),
            evidence="training loss = CE at l_train on the training books; "
                     + resolution_text(row["low"], row["high"], ce.value)))

    def signed(c, effect: float | None = None) -> tuple[Verdict, str]:
        text = (f"r {c['r_better']:+.2f} vs {c['r_worse']:+.2f}; signed difference "
                f"{c['difference']:+.2f} [{c['low']:+.2f}, {c['high']:+.2f}], n = {c['n']}")
        if not c["right_sign"]:  # a disagreement when its own interval is on the wrong side
            own = pear.loc[c["better"]] if c["better"] in pear.index else None
            clear = own is not None and own["low"] > 0
            text += (f" ({c['better']} points the wrong way"
                     + (", its interval clear of 0)" if clear else ", within its interval)"))
            if clear:
                return "disagrees", text
        verdict = (resolve_verdict(c["low"], c["high"], +1, effect) if effect is not None
                   else sign_verdict(c["low"], c["high"], +1))
        if verdict in EXCLUDES_ZERO and verdict != "disagrees" and not c["right_sign"]:
            # no credit for a wrong sign's size
            verdict = UNDERPOWERED if effect is not None else "inconclusive"
        return verdict, text

    c = comparison(comp, score, "misalignment", "train_loss")
    if c is not None:  # the paper's difference of the two correlations: -0.55 - (-0.85)
        effect = ce.value - mis.value
        verdict, text = signed(c, effect)
        out.append(Claim(
            id="T1.3", section="Sec. 4.1",
            claim="The misalignment predicts the score better than the training loss",
            paper=f"r {mis.value} vs {ce.value}", grade=mis.grade, ours=text,
            **{**judged(c["low"], c["high"], +1, effect, estimate=c["difference"],
                        p=c.get("p")),
               "verdict": verdict},
            evidence="difference of the correlations in the paper's direction (negative); "
                     "bootstrap over clusters of units; "
                     + resolution_text(c["low"], c["high"], effect)))
    # T1.4-T1.6 are the project's audits (the paper states no number for them): controls,
    # with outcome words, counted apart from the paper's claims
    c = comparison(comp, score, "jeffreys", "entropy")
    if c is not None:
        verdict, text = signed(c)
        out.append(Claim(
            id="T1.4", section="Sec. 4.1 (audit 1)",
            claim="The alignment part (Jeffreys), not the sharpness part (entropy), carries "
                  "the prediction",
            paper="implied (the metric is read as alignment)", grade="?", ours=text,
            verdict=audit_outcome(verdict),
            evidence="SCE = Jeffreys + H(p) + H(q); entropy tracks CE", kind="control"))
    sel = partial[(partial["score"] == score) & (partial["predictor"] == "misalignment")] \
        if not partial.empty else partial
    if len(sel):
        p = sel.iloc[0]
        out.append(Claim(
            id="T1.5", section="Sec. 4.1 (audit 1)",
            claim="The misalignment predicts the score beyond the training loss",
            paper="implied", grade="?",
            ours=f"partial r given CE = {p['r']:+.2f} [{p['low']:+.2f}, {p['high']:+.2f}]"
                 f", n = {p['n']}",
            verdict=audit_outcome(sign_verdict(p["low"], p["high"], -1)),
            evidence="residuals of both on the training loss", kind="control"))
    if ranking is not None:
        out.append(Claim(
            id="T1.6", section="Sec. 4.1 (audit 2)",
            claim="SCE ranks the models as the theory's L2 distance does",
            paper="assumed (theory in L2, experiments in SCE)", grade="?",
            ours=f"Spearman(L2, SCE) = {ranking['r']:+.2f} [{ranking['low']:+.2f}, "
                 f"{ranking['high']:+.2f}], n = {ranking['n']}",
            verdict=audit_outcome(sign_verdict(ranking["low"], ranking["high"], +1)),
            evidence="passes when the interval excludes 0 on the positive side",
            kind="control"))
    if not loo.empty:
        below = (loo["high"] < 0).all()
        above = (loo["low"] > 0).any()
        outcome: Verdict = "passes" if below else "fails" if above else "unclear"
        worst = loo.loc[loo["r"].idxmax()]
        fits = ", ".join(f"{n} leaving one {by} out" for by, n in loo.groupby("by", sort=False)
                         .size().items())
        out.append(Claim(
            id="T1.7", section="Sec. 4.1 (audit 4)",
            claim="The correlation holds with any one method, or any one kind of unit, left out",
            paper="not tested", grade="?",
            ours=f"{len(loo)} fits ({fits}); weakest without {worst['by']} "
                 f"{worst['left_out']}: r = {worst['r']:+.2f} [{worst['low']:+.2f}, "
                 f"{worst['high']:+.2f}]",
            verdict=outcome, evidence="passes when every interval is below 0", kind="control"))
    if influence is not None and not influence.empty:
        by_id = {c.id: c for c in out}
        verdicts = {"T1.1": ("r(misalignment)", lambda r: judged(r["low"], r["high"], -1,
                                                                 mis.value)["verdict"]),
                    "T1.2": ("r(train_loss)", lambda r: judged(r["low"], r["high"], -1,
                                                               ce.value)["verdict"]),
                    "T1.3": ("misalignment - train_loss", lambda r: signed(
                        {**r, "difference": r["value"], "better": "misalignment"},
                        ce.value - mis.value)[0])}
        for cid, (stat, verdict_of) in verdicts.items():
            if cid in by_id:
                _rest_on(by_id[cid], influence[influence["statistic"] == stat], verdict_of)
        out.append(_influence_claim(influence, pear, comp, score))
    return [c.to_dict() for c in out]


def _rest_on(claim: Claim, refits: pd.DataFrame, verdict_of) -> None:
    """Issue 45 (7): the clusters without any one of which ``claim``'s verdict changes, from
    the refits without each cluster (``tables.unit_influence``) judged by ``verdict_of``, as
    the claim's ``rests_on`` with the refits' numbers in its evidence."""
    if refits.empty:
        return
    moved = [(r, v) for r in refits.to_dict(orient="records")
             if (v := verdict_of(r)) != claim.verdict]
    if not moved:
        claim.evidence += (f"; no one cluster changes the verdict ({len(refits)} left out in "
                           "turn)")
        return
    claim.rests_on = ", ".join(str(r["unit"]) for r, _ in moved)
    claim.evidence += (f"; rests on {claim.rests_on} ({len(moved)} of {len(refits)} clusters "
                       "left out in turn change the verdict): " + "; ".join(
                           f"without {r['unit']} ({r['units']} units) {r['value']:+.2f} "
                           f"[{r['low']:+.2f}, {r['high']:+.2f}], {v}" for r, v in moved[:3])
                       + (" ..." if len(moved) > 3 else ""))


def _side(low: float, high: float) -> int:
    """-1 / +1: the interval lies below / above 0; 0: it holds 0 (or is undefined)."""
    return -1 if high < 0 else 1 if low > 0 else 0


def _influence_claim(influence: pd.DataFrame, pear: pd.DataFrame, comp: pd.DataFrame,
                     score: str) -> Claim:
    """T1.8 (audit 5): does one cluster of units (one trained model) carry T1.1 or T1.4? It
    passes when no cluster left out moves either interval to another side of 0 than the fit
    on every unit has."""
    full = {}
    if "misalignment" in pear.index:
        full["r(misalignment)"] = pear.loc["misalignment"]
    if (c := comparison(comp, score, "jeffreys", "entropy")) is not None:
        full["jeffreys - entropy"] = c
    parts, flips = [], []
    for name, row in full.items():
        sub = influence[influence["statistic"] == name]
        if sub.empty:
            continue
        side = _side(row["low"], row["high"])
        moved = sub[[_side(lo, hi) != side for lo, hi in zip(sub["low"], sub["high"])]]
        flips += [f"{name} without {u}" for u in moved["unit"]]
        top = sub.loc[sub["shift"].abs().idxmax()]
        parts.append(f"{name}: largest shift without {top['unit']} ({top['kind']}): "
                     f"{top['value']:+.2f} [{top['low']:+.2f}, {top['high']:+.2f}] "
                     f"({top['shift']:+.2f}); {len(moved)} of {len(sub)} fits change side")
    outcome: Verdict = "fails" if flips else "passes"
    if flips:
        parts.append("changed by: " + ", ".join(flips[:6]) + (" ..." if len(flips) > 6 else ""))
    return Claim(
        id="T1.8", section="Sec. 4.1 (audit 5)",
        claim="No single trained model carries the correlation (T1.1) or the alignment part's "
              "lead (T1.4)",
        paper="not tested", grade="?", ours="; ".join(parts), verdict=outcome,
        evidence="each cluster of units (a trained model and its RoPE copies) left out in "
                 "turn; passes when no fit's interval changes its side of 0 (below, across, "
                 "above) from the fit on every unit", kind="control")


def label_change_text(top1: pd.DataFrame, outside: frozenset[str] = frozenset(),
                      g1: Gate | None = None) -> str:
    """The headline's answer to "labels change under truncation", G1 first: whether the base
    model uses its far context at all (G1's far-copy gain), then audit 3 on the models inside
    their window (per model, at its largest ``l_extra`` bin, how often the most likely next
    token changes when the context is cut, with its Wilson interval, and the probability mass
    that moves), then, labelled as a control, the models measured ``outside`` their window."""
    parts = []
    if g1 is not None and math.isfinite(g1.value):
        parts.append(f"G1: the far occurrence lowers the copy NLL by {g1.value:.2f} "
                     f"[{g1.low:.2f}, {g1.high:.2f}] nats at the base window "
                     f"({'passes' if g1.passed else 'fails'} its bar of {g1.threshold:g})")

    def models(frame: pd.DataFrame) -> list[str]:
        out = []
        for model, sub in frame.groupby("model", sort=False):
            row = sub.loc[sub["l_extra_mid"].idxmax()]
            share, low, high = (100 * row[c] for c in ("top1_changed", "low", "high"))
            out.append(f"{model} {share:.0f}% [{low:.0f}, {high:.0f}] of "
                       f"{int(row['samples'])} positions ({row['l_extra']} tokens cut, total "
                       f"variation {row['tv']:.2f})")
        return out

    if top1 is not None and not top1.empty:
        inside = top1[~top1["model"].isin(outside)]
        if len(inside):
            parts.append("audit 3 (Section 4.1), models inside their window: the most likely "
                         "next token changes at " + "; ".join(models(inside)))
        beyond = top1[top1["model"].isin(outside)]
        if len(beyond):
            parts.append("control, a model measured beyond its window: "
                         + "; ".join(models(beyond)))
    return "; ".join(parts)
