"""Section 4.1, Table 1: does the misalignment predict long-context ability better than the
training loss? The population of models, its Table 1 rows and the audits the paper did not do.

The population (``population_table``) is every finished model of the profile, each measured by
one protocol (``lsa.jobs.lm_metrics``) on the test books: the fine-tuning runs (the Section
5.1-5.2 grid and the Section 5.3 ablations) and the probes (the base model, the base model under
RoPE settings without fine-tuning, the BABILong runs, hub models). Per model:

- predictors at the training window ``l = finetune.l_train``: ``misalignment`` (the paper's
  L_misalign: SCE where both contexts are >= l/2 tokens), its parts ``jeffreys`` (KL both
  ways, the alignment) and ``entropy`` (H(p) + H(q), the sharpness; SCE = jeffreys + entropy),
  ``l2`` (the theory's distance), and ``train_loss``: the CE at the training window (on the
  test books, so that models trained on other data or not at all have one too);
- scores, higher is better as LongBench-E's: ``score_Mx = -NLL`` per token at ``M`` times the
  training window (M > 1; perplexity = exp(-score)), and ``babilong`` (mean accuracy, where
  the model was trained or evaluated on BABILong).

The paper correlates with a score where higher is better, so its r = -0.85 means "more
misaligned, worse"; ours keep that sign convention. Statistics come from ``lsa.stats``
(scipy's pearsonr, spearmanr, bootstrap, permutation_test).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from lsa import stats
from lsa.analysis import measured_row, setting_label
from lsa.config import PipelineConfig
from lsa.report import Claim, fmt, paper
from lsa.runs import runs_of
from lsa.stats import sign_verdict, wilson_interval

PREDICTORS = {"misalignment": "L_misalign (SCE, paper)", "train_loss": "CE at l_train",
              "jeffreys": "Jeffreys (alignment part)", "entropy": "H(p) + H(q) (sharpness part)",
              "l2": "L2 distance (the theory's)"}


def population_table(pipe: PipelineConfig) -> pd.DataFrame:
    """One row per finished model of the population: ``model``, ``group`` (fine-tuning,
    ablation, probe), ``kind``, method, alpha, seed, setting, ``held_out`` (a fine-tuning run of
    ``population.held_out_seeds``), the predictors and the scores (module docstring)."""
    runs, ft = runs_of(pipe), pipe.finetune
    grid = set(runs.grid)
    babilong_acc = _babilong_accuracy(pipe)
    rows: list[dict[str, Any]] = []
    for name, run in runs.finetune.items():
        spec = run.spec
        if not run.finished or ft.l_train_of(spec) != ft.l_train:
            continue  # another training window: another protocol
        rows.append({"model": name, "group": "fine-tuning" if name in grid else "ablation",
                     "kind": "fine-tuning run", "method": spec.method, "alpha": spec.alpha,
                     "seed": spec.seed, "setting": setting_label(spec),
                     "held_out": spec.seed in pipe.population.held_out_seeds,
                     "babilong": babilong_acc.get(("babilong-eval", name), math.nan),
                     **measured_row(run.metrics(), ft.l_train)})
    for name, run in runs.probes.items():
        if not run.finished:
            continue
        rope = run.identity["rope"]
        source = run.needs[0]
        kind = ("base + RoPE, no fine-tuning" if rope else "base model" if source is runs.base
                and run.identity["model"] == runs.base.id else
                "BABILong run" if source is not runs.base else "hub model")
        spec = source.spec if source.kind == "babilong" else None
        rows.append({"model": name, "group": "probe", "kind": kind,
                     "method": rope["method"] if rope else (spec.method if spec else "none"),
                     "alpha": spec.alpha if spec else math.nan,
                     "seed": spec.seed if spec else math.nan,
                     "setting": (f"{rope['method']} x{rope['factor']}" if rope else
                                 setting_label(spec) if spec else "-"),
                     "held_out": False,
                     "babilong": babilong_acc.get(("babilong", source.name), math.nan),
                     **measured_row(run.metrics(), ft.l_train)})
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    table["train_loss"] = table["nll_1x"]
    for col in [c for c in table.columns if c.startswith("nll_") and c != "nll_1x"]:
        table["score_" + col[4:]] = -table[col]
    return table


def _babilong_accuracy(pipe: PipelineConfig) -> dict[tuple[str, str], float]:
    """Mean BABILong accuracy (all tasks and lengths) of each finished BABILong run (train
    design) or evaluation (evaluate design, keyed by the evaluated run)."""
    out = {}
    for kind, runs in (("babilong", runs_of(pipe).babilong),
                       ("babilong-eval", runs_of(pipe).babilong_eval)):
        for name, run in runs.items():
            if run.finished:
                rows = run.metrics().get("accuracy", [])
                if rows:
                    out[(kind, name)] = float(np.mean([r["correct"] for r in rows]))
    return out


def scores(table: pd.DataFrame) -> list[str]:
    """The score columns present: ``score_Mx`` by M, then ``babilong`` when >= 4 models have it."""
    cols = sorted((c for c in table.columns if c.startswith("score_")),
                  key=lambda c: int(c[6:-1]))
    if "babilong" in table and table["babilong"].notna().sum() >= 4:
        cols.append("babilong")
    return cols


def table1(table: pd.DataFrame, predictors: list[str], score_cols: list[str], *,
           n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Table 1: Pearson and Spearman of each predictor with each score, each with its 95 %
    bootstrap interval (resampling models) and permutation p-value."""
    rows = []
    for score in score_cols:
        have = table[table[score].notna()]
        if len(have) < 3:
            continue
        rows += stats.correlation_rows(have, predictors, [score], n_resamples=n_resamples,
                                       n_permutations=n_resamples, seed=seed)
    return pd.DataFrame(rows)


def comparisons(table: pd.DataFrame, score_cols: list[str], pairs: list[tuple[str, str]], *,
                n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """For each (a, b) and score: ``|r(a)| - |r(b)|`` with its bootstrap interval; ``holds``:
    a predicts better (the interval lies above 0)."""
    rows = []
    for score in score_cols:
        for a, b in pairs:
            for method in ("pearson", "spearman"):
                try:
                    rows.append(stats.compare_predictors(table, a, b, score, method,
                                                         n_resamples=n_resamples,
                                                         seed=seed).to_dict())
                except ValueError:
                    continue  # fewer than 4 complete models
    return pd.DataFrame(rows)


def partial_rows(table: pd.DataFrame, score_cols: list[str], given: str = "train_loss", *,
                 n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Audit 1: the partial correlation of each predictor but ``given`` with each score, given
    ``given``, with its bootstrap interval."""
    rows = []
    for score in score_cols:
        for pred in ("misalignment", "jeffreys", "entropy"):
            cols = table[[pred, score, given]].dropna()
            if len(cols) < 5:
                continue
            r, low, high = stats.partial_correlation_ci(cols[pred], cols[score], cols[given],
                                                        n_resamples=n_resamples, seed=seed)
            rows.append({"predictor": pred, "score": score, "given": given, "r": r,
                         "low": low, "high": high, "n": len(cols)})
    return pd.DataFrame(rows)


def top1_by_l_extra(pipe: PipelineConfig, models: list[str], bins: int = 4) -> pd.DataFrame:
    """Audit 3: per model and bin of ``l_extra`` (equal-width bins over the drawn range), how
    often the most likely next token changes when the context of the last position is cut from
    ``l`` to ``l - l_extra`` (with its Wilson interval), and the mean probability mass that
    moves (total variation)."""
    rows = []
    runs = runs_of(pipe)
    by_name = {**runs.finetune, **{f"probe:{k}": v for k, v in runs.probes.items()}}
    for model in models:
        run = by_name.get(model) or by_name.get(f"probe:{model}")
        if run is None or not run.finished:
            continue
        samples = pd.DataFrame(run.metrics().get("last_position", []))
        if samples.empty:
            continue
        edges = np.linspace(samples["l_extra"].min() - 0.5, samples["l_extra"].max() + 0.5,
                            bins + 1)
        samples["bin"] = pd.cut(samples["l_extra"], edges)
        for interval, sub in samples.groupby("bin", observed=True):
            k, n = int(sub["top1_change"].sum()), len(sub)
            low, high = wilson_interval(k, n)
            rows.append({"model": model, "l_extra": f"{math.ceil(interval.left)}-"
                                                   f"{math.floor(interval.right)}",
                         "l_extra_mid": float(sub["l_extra"].mean()), "samples": n,
                         "top1_changed": k / n, "low": low, "high": high,
                         "tv": float(sub["tv"].mean()) if "tv" in sub else math.nan})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# claims


def _comparison(comp: pd.DataFrame, score: str, better: str, worse: str) -> pd.Series | None:
    """The Pearson row of ``comparisons`` for ``better`` vs ``worse`` on ``score``, if any."""
    if comp.empty:
        return None
    sel = comp[(comp["score"] == score) & (comp["method"] == "pearson")
               & (comp["better"] == better) & (comp["worse"] == worse)]
    return sel.iloc[0] if len(sel) else None


def _corr_text(row: dict[str, Any]) -> str:
    return (f"r = {row['r']:+.2f} [{row['low']:+.2f}, {row['high']:+.2f}], "
            f"permutation p = {fmt(row['p_permutation'], 2)}, n = {row['n']}")


def claims(rows: pd.DataFrame, comp: pd.DataFrame, partial: pd.DataFrame,
           held_out: pd.DataFrame, ranking: dict[str, Any] | None, score: str
           ) -> list[dict[str, Any]]:
    """The Section 4.1 claims on one score (Pearson, as the paper), with computed verdicts: a
    correlation agrees when its bootstrap interval excludes 0 on the paper's side; "predicts
    better" holds when the interval of the difference of absolute correlations excludes 0."""
    out: list[Claim] = []
    if rows.empty:
        return []
    pear = rows[(rows["method"] == "pearson") & (rows["score"] == score)].set_index("predictor")
    mis, ce = paper("table1/pearson_misalign"), paper("table1/pearson_train_loss")
    label = f"{score} (higher is better)"
    if "misalignment" in pear.index:
        row = pear.loc["misalignment"].to_dict()
        out.append(Claim("T1.1", "Sec. 4.1", "The misalignment correlates negatively with the "
                         "long-context score", f"r = {mis.value} (7 models, LongBench-E)",
                         mis.grade, _corr_text(row),
                         sign_verdict(row["low"], row["high"], -1),  # type: ignore[arg-type]
                         f"score: {label}; 95 % bootstrap interval over models"))
    if "train_loss" in pear.index:
        row = pear.loc["train_loss"].to_dict()
        out.append(Claim("T1.2", "Sec. 4.1", "The training loss correlates with the score",
                         f"r = {ce.value}", ce.grade, _corr_text(row),
                         sign_verdict(row["low"], row["high"], -1),  # type: ignore[arg-type]
                         "training loss = CE at the training window on the test books"))
    c = _comparison(comp, score, "misalignment", "train_loss")
    if c is not None:
        verdict = sign_verdict(c["low"], c["high"], +1)
        out.append(Claim("T1.3", "Sec. 4.1", "The misalignment predicts the score better than "
                         "the training loss", f"|r| {abs(mis.value)} vs {abs(ce.value)}",
                         mis.grade, f"|r(L_misalign)| - |r(CE)| = {c['difference']:+.2f} "
                         f"[{c['low']:+.2f}, {c['high']:+.2f}], n = {c['n']}",
                         verdict, "bootstrap interval of the difference, resampling models"))
    c = _comparison(comp, score, "jeffreys", "entropy")
    if c is not None:
        verdict = sign_verdict(c["low"], c["high"], +1)
        parts = "; ".join(f"{p}: r = {pear.loc[p, 'r']:+.2f}" for p in ("jeffreys", "entropy")
                          if p in pear.index)
        out.append(Claim("T1.4", "Sec. 4.1 (audit 1)", "The alignment part (Jeffreys), not the "
                         "sharpness part (entropy), carries the prediction",
                         "implied (the metric is read as alignment)", "?",
                         f"{parts}; |r(J)| - |r(H)| = {c['difference']:+.2f} "
                         f"[{c['low']:+.2f}, {c['high']:+.2f}]", verdict,
                         "SCE = Jeffreys + H(p) + H(q); entropy tracks CE"))
    sel = partial[(partial["score"] == score) & (partial["predictor"] == "misalignment")] \
        if not partial.empty else partial
    if len(sel):
        p = sel.iloc[0]
        out.append(Claim("T1.5", "Sec. 4.1 (audit 1)", "The misalignment predicts the score "
                         "beyond the training loss", "implied", "?",
                         f"partial r given CE = {p['r']:+.2f} [{p['low']:+.2f}, {p['high']:+.2f}]"
                         f", n = {p['n']}",
                         sign_verdict(p["low"], p["high"], -1),  # type: ignore[arg-type]
                         "residuals of both on the training loss"))
    if ranking is not None:
        out.append(Claim("T1.6", "Sec. 4.1 (audit 2)", "SCE ranks the models as the theory's L2 "
                         "distance does", "assumed (theory in L2, experiments in SCE)", "?",
                         f"Spearman(L2, SCE) = {ranking['r']:+.2f} [{ranking['low']:+.2f}, "
                         f"{ranking['high']:+.2f}], n = {ranking['n']}",
                         sign_verdict(ranking["low"], ranking["high"], +1),  # type: ignore
                         "agrees when the interval excludes 0 on the positive side"))
    if not held_out.empty:
        sel = held_out[(held_out["method"] == "pearson") & (held_out["score"] == score)
                       & (held_out["predictor"] == "misalignment")]
        if len(sel):
            row = sel.iloc[0].to_dict()
            out.append(Claim("T1.7", "Sec. 4.1 (audit 4)", "The correlation holds on held-out "
                             "models (not used to choose any setting)", "not tested", "?",
                             _corr_text(row),
                             sign_verdict(row["low"], row["high"], -1),  # type: ignore
                             "held-out: the fine-tuning runs of the held-out seeds"))
    return [c.to_dict() for c in out]


__all__ = ["PREDICTORS", "population_table", "scores", "table1", "comparisons",
           "partial_rows", "top1_by_l_extra", "claims"]
