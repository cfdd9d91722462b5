"""Section 4.1, Table 1: does the misalignment predict long-context ability better than the
training loss? The population of models, its Table 1 rows and the audits the paper did not do.

Every finished model of the profile is measured by one protocol (``lsa.jobs.lm_metrics``, one
metric seed, the same test samples for all): the fine-tuning runs (the Section 5.1-5.2 grid,
the premise gates' CE-only runs, the Section 5.3 ablations) and the probes (the base model, the
base model under RoPE settings without fine-tuning, the BABILong runs, hub models). Per model:

- predictors at the training window ``l = finetune.l_train``: ``misalignment`` (the paper's
  L_misalign: SCE where both contexts are >= l/2 tokens), its parts ``jeffreys`` (KL both
  ways, the alignment) and ``entropy`` (H(p) + H(q), the sharpness; SCE = jeffreys + entropy),
  ``l2`` (the theory's distance), and ``train_loss``: the CE at ``l`` on the *training* books
  (the loss the models are trained on, measured alike for models not trained here);
- scores, higher is better as LongBench-E's: ``score_beyond_Mx`` (the main one): minus the NLL
  of the targets whose context is longer than ``l`` inside the windows of ``M l`` tokens of the
  test books, so no (token, context) pair is shared with the training loss; ``score_copy_Mx``:
  minus the NLL of the copy probes at ``M l`` (the long-range measure); ``score_Mx``: minus the
  NLL of every token of those windows (it shares tokens with the 1x window: shown, never the
  main score); ``babilong`` (mean accuracy, where the model has one).

**Populations** (``views``), fixed in ``config/`` (``population:``) before results are read:
the *primary* one has one unit per configuration (seeds averaged, their spread kept) of the
models never trained on the misalignment or a part of it, without the models excluded by the
rule (perplexity at ``l`` above ``exclude_ppl_ratio`` times the base model's; listed); the
secondary views add the models trained on the predictor at small alpha, then every model.
Correlations, intervals and permutations resample units, not seeds
(``lsa.stats``; the p-value floor of ``B`` permutations is printed as "< 1/(B+1)").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from lsa import stats
from lsa.claims import Claim, paper
from lsa.config import PipelineConfig
from lsa.runs import runs_of
from lsa.runtable import final_ce, measured_row, setting_label
from lsa.stats import (
    UNDERPOWERED,
    audit_outcome,
    p_text,
    resolution_text,
    resolve_verdict,
    sign_verdict,
    wilson_interval,
)

PREDICTORS = {"misalignment": "L_misalign (SCE, paper)", "train_loss": "CE at l_train",
              "train_loss_logged": "the run's logged CE at its end (probes: CE at l_train)",
              "jeffreys": "Jeffreys (alignment part)", "entropy": "H(p) + H(q) (sharpness part)",
              "l2": "L2 distance (the theory's)"}


TRAINED_ON = ("none", "sce", "jeffreys", "entropy")
#: the units whose rows are averaged: the configuration, seeds apart
UNIT_KEYS = ["unit", "kind", "trained_on", "method", "setting", "alpha"]


def _trained_on(spec) -> str:
    return "none" if spec is None or spec.alpha == 0 else spec.divergence


def population_table(pipe: PipelineConfig) -> pd.DataFrame:
    """One row per finished model: ``model``, ``unit`` (its configuration: method and setting
    without the seed), ``kind``, ``group`` (fine-tuning, ablation, probe), method, alpha,
    seed, setting, ``trained_on`` (none / sce / jeffreys / entropy), ``excluded`` (the rule of
    ``population.exclude_ppl_ratio``), the predictors and the scores (module docstring)."""
    runs, ft = runs_of(pipe), pipe.finetune
    grid = set(runs.grid)
    babilong_acc = _babilong_accuracy(pipe)
    rows: list[dict[str, Any]] = []
    for name, run in runs.finetune.items():
        spec = run.spec
        if not run.finished or ft.l_train_of(spec) != ft.l_train:
            continue  # another training window: another protocol
        setting = setting_label(spec)
        rows.append({"model": name, "unit": f"{spec.method} {setting}",
                     "group": "fine-tuning" if name in grid else "ablation",
                     "kind": "fine-tuning run", "method": spec.method, "alpha": spec.alpha,
                     "seed": spec.seed, "setting": setting, "trained_on": _trained_on(spec),
                     "babilong": babilong_acc.get(("babilong-eval", name), math.nan),
                     **measured_row(run.metrics(), ft.l_train),
                     "train_loss_logged": final_ce(run.log())})
    for name, run in runs.probes.items():
        if not run.finished or "reference" in run.identity:
            continue  # a reference model is measured on its own tokens: not in Table 1
        rope = run.identity["rope"]
        source = run.needs[0]
        kind = ("base + RoPE, no fine-tuning" if rope else "base model" if source is runs.base
                and run.identity["model"] == runs.base.id else
                "BABILong run" if source is not runs.base else "hub model")
        spec = source.spec if source.kind == "babilong" else None
        setting = (f"{rope['method']} x{rope['factor']}" if rope else
                   setting_label(spec) if spec else "-")
        unit = ("base" if kind == "base model" else f"base {setting}" if rope else
                f"babilong {spec.method} {setting}" if spec else name)
        rows.append({"model": name, "unit": unit, "group": "probe", "kind": kind,
                     "method": rope["method"] if rope else (spec.method if spec else "none"),
                     "alpha": spec.alpha if spec else 0.0,
                     "seed": spec.seed if spec else math.nan, "setting": setting,
                     "trained_on": _trained_on(spec),
                     "babilong": babilong_acc.get(("babilong", source.name), math.nan),
                     **measured_row(run.metrics(), ft.l_train)})
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    # a probe has no fine-tuning log: its training loss is the CE at l_train it was measured at
    table["train_loss_logged"] = table.get("train_loss_logged", pd.Series(
        math.nan, index=table.index)).fillna(table["train_loss"])
    for col in [c for c in table.columns if c.startswith("nll_") and c != "nll_1x"]:
        table["score_" + col[4:]] = -table[col]
    base = table.loc[table["kind"] == "base model", "ppl_1x"]
    limit = pipe.population.exclude_ppl_ratio * float(base.iloc[0]) if len(base) else math.inf
    table["excluded"] = table["ppl_1x"] > limit
    return table


def units(models: pd.DataFrame, scores_: list[str]) -> pd.DataFrame:
    """One row per unit (configuration): the mean over its models (seeds) of every numeric
    column, ``seeds`` (how many) and ``<score>_seed_sd`` for each score (the spread the mean
    hides)."""
    if models.empty:
        return models
    numeric = [c for c in models.columns if c not in UNIT_KEYS and c != "model"
               and pd.api.types.is_numeric_dtype(models[c]) and c not in ("seed", "excluded")]
    grouped = models.groupby(UNIT_KEYS, dropna=False, sort=False)
    out = grouped[numeric].mean()
    out["seeds"] = grouped.size()
    for score in scores_:
        out[f"{score}_seed_sd"] = grouped[score].std(ddof=1)
    out["models"] = grouped["model"].agg(lambda m: ", ".join(m))
    return out.reset_index()


VIEWS = {"primary": "primary: one unit per configuration, never trained on the misalignment, "
                    "exclusion rule applied",
         "with_regularized": "secondary: + the models trained on the predictor (small alpha)",
         "all": "secondary: every model (today's view before the fix; exploded runs included)"}


def views(table: pd.DataFrame, max_alpha: float, scores_: list[str]) -> dict[str, pd.DataFrame]:
    """The populations Table 1 is computed on, by name (``VIEWS``), each as units."""
    if table.empty:
        return {name: table for name in VIEWS}
    clean = ~table["excluded"]
    untrained = table["trained_on"] == "none"
    small = table["alpha"] <= max_alpha + 1e-12
    return {"primary": units(table[clean & untrained], scores_),
            "with_regularized": units(table[clean & (untrained | small)], scores_),
            "all": units(table, scores_)}


def composition(table: pd.DataFrame) -> pd.DataFrame:
    """Models and units by kind and what they were trained on, and how many are excluded."""
    if table.empty:
        return table
    return (table.groupby(["kind", "trained_on"])
            .agg(models=("model", "count"), units=("unit", "nunique"),
                 excluded=("excluded", "sum"))
            .reset_index())


def main_score(score_cols: list[str]) -> str:
    """The Table 1 score: NLL beyond the training window at the longest multiple."""
    beyond = [s for s in score_cols if s.startswith("score_beyond_")]
    if beyond:
        return beyond[-1]
    plain = [s for s in score_cols if s.startswith("score_")]
    return plain[-1] if plain else score_cols[-1]


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
    """The score columns present, each family by M (``score_Mx``, ``score_beyond_Mx``,
    ``score_copy_Mx``), then ``babilong`` when >= 4 models have it."""
    cols = sorted((c for c in table.columns if c.startswith("score_")
                   and not c.endswith("_seed_sd")),
                  key=lambda c: (c.count("_"), c.rsplit("_", 1)[0], int(c.rsplit("_", 1)[1][:-1])))
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
    """For each (a, b) and score: the signed difference ``-(r(a) - r(b))`` (the paper expects
    negative correlations) with its bootstrap interval over the rows (units); ``holds``: a
    points the paper's way and predicts better (the interval lies above 0)."""
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


def _corr_text(row: dict[str, Any], n_permutations: int = 2000) -> str:
    return (f"r = {row['r']:+.2f} [{row['low']:+.2f}, {row['high']:+.2f}], "
            f"permutation p {p_text(row['p_permutation'], n_permutations)}, n = {row['n']} "
            "units")


def decomposition(pipe: PipelineConfig, primary: pd.DataFrame) -> pd.DataFrame:
    """The misalignment taken apart: SCE, its Jeffreys (alignment) and entropy (sharpness)
    parts, their share and the top-1 change, for the base model, the mean of the primary
    units that are CE-only fine-tuning runs, and each reference model (a model trained as the
    paper's were, on its own tokens; ``population.reference_models``)."""
    rows = []
    names = {"misalignment": "SCE", "jeffreys": "Jeffreys", "entropy": "entropy",
             "top1_change": "top1_change"}

    def add(name: str, what: str, values: dict[str, float], se: dict[str, float]) -> None:
        """``se``: each part's sampling standard error (a mean of units: their mean s.e.)."""
        sce = values["misalignment"]
        rows.append({"model": name, "what": what,
                     **{label: values[c] for c, label in names.items()},
                     "Jeffreys share": values["jeffreys"] / sce if sce else math.nan,
                     **{f"{label} s.e.": se.get(c, math.nan) for c, label in names.items()}})

    cols = list(names)

    def errors(frame: pd.DataFrame) -> dict[str, float]:
        return {c: float(frame[f"{c}_se"].mean()) for c in cols if f"{c}_se" in frame}

    base = primary[primary["kind"] == "base model"] if len(primary) else primary
    if len(base):
        add("base model", f"scratch, l = {pipe.finetune.l_train}",
            base.iloc[0][cols].to_dict(), errors(base.iloc[:1]))
    tuned = primary[primary["kind"] == "fine-tuning run"] if len(primary) else primary
    if len(tuned):
        add("CE-only fine-tuning runs", f"mean of {len(tuned)} units",
            tuned[cols].mean().to_dict(), errors(tuned))
    for run in runs_of(pipe).probes.values():
        if "reference" in run.identity and run.finished:
            m = run.metrics()
            add(run.identity["model"], f"pretrained, l = {m['window']}, its own tokens",
                {c: m[c]["mean"] for c in cols}, {c: m[c]["stderr"] for c in cols})
    return pd.DataFrame(rows)


def leave_one_out(table: pd.DataFrame, score: str, predictor: str = "misalignment", *,
                  n_resamples: int = 2000, seed: int = 0,
                  by: tuple[str, ...] = ("method", "kind")) -> pd.DataFrame:
    """Held-out audit: Pearson of ``predictor`` with ``score`` with one group of units left out
    at a time, for each grouping in ``by``: one method (its probes and fine-tuning runs alike),
    then one kind of unit (base model, probes, fine-tuning runs, ...). A grouping with a single
    group would leave nothing to fit and is skipped."""
    rows = []
    for column in (c for c in by if c in table):
        groups = sorted(table[column].dropna().unique())
        for group in groups if len(groups) > 1 else []:
            rest = table[table[column] != group]
            if len(rest[[predictor, score]].dropna()) < 4:
                continue
            c = stats.correlation(rest[predictor], rest[score], "pearson",
                                  n_resamples=n_resamples, n_permutations=n_resamples,
                                  seed=seed, predictor=predictor, score=score)
            rows.append({"by": column, "left_out": group, **c.to_dict()})
    return pd.DataFrame(rows)


def unit_influence(table: pd.DataFrame, score: str, *, n_resamples: int = 2000, seed: int = 0
                   ) -> pd.DataFrame:
    """Audit 5: each primary unit left out in turn, the two results one unit far from the rest
    could make alone (the untouched base model, say): the Pearson r of the misalignment with
    ``score`` (T1.1) and the signed difference of the Jeffreys part's and the entropy's
    correlations (T1.4), each with its bootstrap interval on the rest and its shift from the
    fit on every unit (``shift``). Empty below 6 units."""
    cols = ["unit", "kind", "statistic", "value", "low", "high", "shift", "n"]
    if len(table) < 6:
        return pd.DataFrame(columns=cols)
    full = {"r(misalignment)": stats.correlation_value(table["misalignment"], table[score]),
            "jeffreys - entropy": stats.predictor_difference(table, "jeffreys", "entropy",
                                                             score)}
    rows = []
    for i in range(len(table)):
        rest = table.drop(index=table.index[i])
        r, low, high = stats.correlation_interval(rest["misalignment"], rest[score],
                                                  n_resamples=n_resamples, seed=seed)
        c = stats.compare_predictors(rest, "jeffreys", "entropy", score,
                                     n_resamples=n_resamples, seed=seed)
        unit, kind = table["unit"].iloc[i], table["kind"].iloc[i]
        for name, value, lo, hi in (("r(misalignment)", r, low, high),
                                    ("jeffreys - entropy", c.difference, c.low, c.high)):
            rows.append({"unit": unit, "kind": kind, "statistic": name, "value": value,
                         "low": lo, "high": hi, "shift": value - full[name], "n": len(rest)})
    return pd.DataFrame(rows, columns=cols)


def within_method(table: pd.DataFrame, score: str,
                  predictors: tuple[str, ...] = ("misalignment", "train_loss")) -> pd.DataFrame:
    """Within each method that has three or more units: the least-squares slope of ``score``
    on each predictor and their Pearson r (no interval: three to five points). Between-method
    differences cannot make these; a slope of the paper's sign inside methods is the stronger
    evidence."""
    rows = []
    for method, sub in table.groupby("method"):
        for pred in predictors:
            cols = sub[[pred, score]].dropna()
            if len(cols) < 3 or cols[pred].nunique() < 2:
                continue
            slope, _ = np.polyfit(cols[pred], cols[score], 1)
            rows.append({"method": method, "predictor": pred, "units": len(cols),
                         "slope": float(slope),
                         "r": float(np.corrcoef(cols[pred], cols[score])[0, 1])})
    return pd.DataFrame(rows)


def noise_text(table: pd.DataFrame) -> str:
    """Is the spread of the Jeffreys part between units more than its sampling noise?"""
    if table.empty or "jeffreys_se" not in table:
        return "no units"
    se, spread = float(table["jeffreys_se"].mean()), float(table["jeffreys"].std(ddof=1))
    verdict = ("within the sampling noise of one measurement: a correlation with it is not "
               "evidence" if spread <= 2 * se else "larger than the sampling noise")
    return (f"Jeffreys part: spread between units (sd) {spread:.2g} nats, standard error of one "
            f"unit's measurement about {se:.2g} nats: the spread is {verdict}.")


def pearson_rows(rows: pd.DataFrame, score: str) -> pd.DataFrame:
    """The Pearson rows of ``table1`` on ``score``, indexed by predictor (empty if none)."""
    if rows.empty:
        return pd.DataFrame(columns=["r", "low", "high"])
    return rows[(rows["method"] == "pearson") & (rows["score"] == score)].set_index("predictor")


def pearson(rows: pd.DataFrame, predictor: str, score: str) -> dict[str, Any] | None:
    """One predictor's Pearson row of ``table1`` on ``score`` (a dict), or None."""
    pear = pearson_rows(rows, score)
    return pear.loc[predictor].to_dict() if predictor in pear.index else None


def r_text(row: dict[str, Any] | None) -> str:
    """``+0.12 [-0.30, +0.50]``: r with its interval; ``n/a`` for no row."""
    return "n/a" if row is None else f"{row['r']:+.2f} [{row['low']:+.2f}, {row['high']:+.2f}]"


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
              f"{np.corrcoef(tuned['jeffreys'], tuned[score])[0, 1]:+.2f} ({len(tuned)} units)"
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


def claims(rows: pd.DataFrame, comp: pd.DataFrame, partial: pd.DataFrame,
           loo: pd.DataFrame, ranking: dict[str, Any] | None, score: str,
           n_permutations: int = 2000, influence: pd.DataFrame | None = None
           ) -> list[dict[str, Any]]:
    """The Section 4.1 claims on one score (Pearson, as the paper) over one population of
    units, with computed verdicts in ``lsa.stats.resolve_verdict``'s words: a correlation
    agrees when its bootstrap interval excludes 0 on the paper's side; one whose interval
    holds 0 is "smaller than the paper's effect" when it lies inside +-|the paper's r|, else
    underpowered. "Predicts better" is signed: the predictor must point the paper's way (else
    disagrees), and the interval of the signed difference is held against the paper's
    difference of the two correlations."""
    out: list[Claim] = []
    if rows.empty:
        return []
    pear = pearson_rows(rows, score)
    mis, ce = paper("table1/pearson_misalign"), paper("table1/pearson_train_loss")
    label = f"{score} (higher is better)"
    if "misalignment" in pear.index:
        row = pear.loc["misalignment"].to_dict()
        out.append(Claim("T1.1", "Sec. 4.1", "The misalignment correlates negatively with the "
                         "long-context score", f"r = {mis.value} (7 models, LongBench-E)",
                         mis.grade, _corr_text(row, n_permutations),
                         resolve_verdict(row["low"], row["high"], -1, mis.value),
                         f"score: {label}; 95 % bootstrap interval over units; "
                         + resolution_text(row["low"], row["high"], mis.value)))
    if "train_loss" in pear.index:
        row = pear.loc["train_loss"].to_dict()
        out.append(Claim("T1.2", "Sec. 4.1", "The training loss correlates negatively with the "
                         "score", f"r = {ce.value}", ce.grade, _corr_text(row, n_permutations),
                         resolve_verdict(row["low"], row["high"], -1, ce.value),
                         "training loss = CE at l_train on the training books; "
                         + resolution_text(row["low"], row["high"], ce.value)))

    def signed(c, effect: float | None = None) -> tuple[str, str]:
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
        if verdict == "agrees" and not c["right_sign"]:  # no credit for a wrong sign's size
            verdict = UNDERPOWERED if effect is not None else "inconclusive"
        return verdict, text

    c = _comparison(comp, score, "misalignment", "train_loss")
    if c is not None:  # the paper's difference of the two correlations: -0.55 - (-0.85)
        effect = ce.value - mis.value
        verdict, text = signed(c, effect)
        out.append(Claim("T1.3", "Sec. 4.1", "The misalignment predicts the score better than "
                         "the training loss", f"r {mis.value} vs {ce.value}", mis.grade, text,
                         verdict,  # type: ignore[arg-type]
                         "difference of the correlations in the paper's direction (negative); "
                         "bootstrap over units; " + resolution_text(c["low"], c["high"], effect)))
    # T1.4-T1.6 are the project's audits (the paper states no number for them): controls,
    # with outcome words, counted apart from the paper's claims
    c = _comparison(comp, score, "jeffreys", "entropy")
    if c is not None:
        verdict, text = signed(c)
        out.append(Claim("T1.4", "Sec. 4.1 (audit 1)", "The alignment part (Jeffreys), not the "
                         "sharpness part (entropy), carries the prediction",
                         "implied (the metric is read as alignment)", "?", text,
                         audit_outcome(verdict),  # type: ignore[arg-type]
                         "SCE = Jeffreys + H(p) + H(q); entropy tracks CE", kind="control"))
    sel = partial[(partial["score"] == score) & (partial["predictor"] == "misalignment")] \
        if not partial.empty else partial
    if len(sel):
        p = sel.iloc[0]
        out.append(Claim("T1.5", "Sec. 4.1 (audit 1)", "The misalignment predicts the score "
                         "beyond the training loss", "implied", "?",
                         f"partial r given CE = {p['r']:+.2f} [{p['low']:+.2f}, {p['high']:+.2f}]"
                         f", n = {p['n']}",
                         audit_outcome(sign_verdict(p["low"], p["high"], -1)),  # type: ignore
                         "residuals of both on the training loss", kind="control"))
    if ranking is not None:
        out.append(Claim("T1.6", "Sec. 4.1 (audit 2)", "SCE ranks the models as the theory's L2 "
                         "distance does", "assumed (theory in L2, experiments in SCE)", "?",
                         f"Spearman(L2, SCE) = {ranking['r']:+.2f} [{ranking['low']:+.2f}, "
                         f"{ranking['high']:+.2f}], n = {ranking['n']}",
                         audit_outcome(sign_verdict(ranking["low"], ranking["high"], +1)),
                         "passes when the interval excludes 0 on the positive side",
                         kind="control"))  # type: ignore[arg-type]
    if not loo.empty:
        below = (loo["high"] < 0).all()
        above = (loo["low"] > 0).any()
        outcome = "passes" if below else "fails" if above else "unclear"
        worst = loo.loc[loo["r"].idxmax()]
        fits = ", ".join(f"{n} leaving one {by} out" for by, n in loo.groupby("by", sort=False)
                         .size().items())
        out.append(Claim("T1.7", "Sec. 4.1 (audit 4)", "The correlation holds with any one "
                         "method, or any one kind of unit, left out", "not tested", "?",
                         f"{len(loo)} fits ({fits}); weakest without {worst['by']} "
                         f"{worst['left_out']}: r = {worst['r']:+.2f} [{worst['low']:+.2f}, "
                         f"{worst['high']:+.2f}]", outcome,  # type: ignore[arg-type]
                         "passes when every interval is below 0", kind="control"))
    if influence is not None and not influence.empty:
        out.append(_influence_claim(influence, pear, comp, score))
    return [c.to_dict() for c in out]


def _side(low: float, high: float) -> int:
    """-1 / +1: the interval lies below / above 0; 0: it holds 0 (or is undefined)."""
    return -1 if high < 0 else 1 if low > 0 else 0


def _influence_claim(influence: pd.DataFrame, pear: pd.DataFrame, comp: pd.DataFrame,
                     score: str) -> Claim:
    """T1.8 (audit 5): does one unit carry T1.1 or T1.4? It passes when no unit left out moves
    either interval to another side of 0 than the fit on every unit has."""
    full = {}
    if "misalignment" in pear.index:
        full["r(misalignment)"] = pear.loc["misalignment"]
    if (c := _comparison(comp, score, "jeffreys", "entropy")) is not None:
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
    outcome = "fails" if flips else "passes"
    if flips:
        parts.append("changed by: " + ", ".join(flips[:6]) + (" ..." if len(flips) > 6 else ""))
    return Claim("T1.8", "Sec. 4.1 (audit 5)", "No single unit carries the correlation (T1.1) "
                 "or the alignment part's lead (T1.4)", "not tested", "?", "; ".join(parts),
                 outcome,  # type: ignore[arg-type]
                 "each unit left out in turn; passes when no fit's interval changes its side "
                 "of 0 (below, across, above) from the fit on every unit", kind="control")


__all__ = ["PREDICTORS", "population_table", "units", "views", "composition", "main_score",
           "decomposition", "within_method", "narrative",
           "scores", "table1", "comparisons", "partial_rows", "top1_by_l_extra",
           "leave_one_out", "unit_influence", "noise_text", "claims", "pearson_rows", "pearson",
           "r_text"]
