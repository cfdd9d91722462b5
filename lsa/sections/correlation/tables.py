"""Section 4.1, Table 1, as tables (DataFrames in, DataFrames out): the population of models,
its units and views, Table 1's rows, the comparisons and the audits the paper did not do. Their
claims and texts: ``claims``; correlations: ``lsa.stats``.

Every finished model of the profile is measured by one protocol (``lsa.jobs.lm_metrics``, one
metric seed, the same test samples for all): the fine-tuning runs (the Section 5.1-5.2 grid,
the premise gates' CE-only runs, the Section 5.3 ablations) and the probes (the base model, the
base model under RoPE settings without fine-tuning, the BABILong runs, hub models); their raw
rows are ``lsa.runtable.read_models``'s. Per model:

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
Intervals resample clusters of units (``clusters``: the base model and its RoPE copies are one
trained model), permutations shuffle units; never seeds (``lsa.stats``; the p-value floor of
``B`` permutations is printed as "< 1/(B+1)").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from lsa import stats
from lsa.claims import paper
from lsa.stats import wilson_interval

#: what each predictor of Table 1 and its audits is, in words
PREDICTOR_LABELS = {
    "misalignment": "L_misalign (SCE, paper)", "train_loss": "CE at l_train",
    "train_loss_logged": "the run's logged CE at its end (probes: CE at l_train)",
    "jeffreys": "Jeffreys (alignment part)", "entropy": "H(p) + H(q) (sharpness part)",
    "l2": "L2 distance (the theory's)"}

#: the units whose rows are averaged: the configuration, seeds apart
UNIT_KEYS = ["unit", "kind", "trained_on", "method", "setting", "alpha"]
#: the columns population.csv starts with (one row per model); every predictor and score follow
POPULATION_FIRST = ["model", "unit", "kind", "trained_on", "excluded", "group", "method",
                    "setting", "alpha", "seed"]


def population(models: pd.DataFrame, exclude_ppl_ratio: float) -> pd.DataFrame:
    """Table 1's population from its raw rows (``lsa.runtable.read_models``): a probe's
    ``train_loss_logged`` filled with its CE at ``l_train`` (it has no fine-tuning log), the
    scores (``score_<window>``: minus each NLL but the 1x window's) and ``excluded`` (the
    perplexity at ``l_train`` above ``exclude_ppl_ratio`` times the base model's)."""
    if models.empty:
        return models
    table = models.copy()
    # a probe has no fine-tuning log: its training loss is the CE at l_train it was measured at
    table["train_loss_logged"] = table.get("train_loss_logged", pd.Series(
        math.nan, index=table.index)).fillna(table["train_loss"])
    # every window's NLL but l_train's (nll_long pools the long windows: not a window)
    for col in [c for c in table.columns if c.startswith("nll_")
                and c not in ("nll_1x", "nll_long")]:
        table["score_" + col[4:]] = -table[col]
    base = table.loc[table["kind"] == "base model", "ppl_1x"]
    limit = exclude_ppl_ratio * float(base.iloc[0]) if len(base) else math.inf
    table["excluded"] = table["ppl_1x"] > limit
    return table


def population_csv(table: pd.DataFrame) -> pd.DataFrame:
    """The population as ``population.csv`` has it: ``POPULATION_FIRST``, then the rest."""
    if not len(table):
        return table
    return table[[c for c in POPULATION_FIRST if c in table]
                 + [c for c in table.columns if c not in POPULATION_FIRST]]


def excluded_models(table: pd.DataFrame) -> list[str]:
    """The models the exclusion rule leaves out, by name."""
    return sorted(table.loc[table["excluded"], "model"]) if len(table) else []


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
    out = out.reset_index()
    out["cluster"] = clusters(out)
    return out


#: the units that are one trained model seen under several settings: the base model itself and
#: its RoPE-rescaled copies (no fine-tuning) form one cluster
BASE_KINDS = ("base model", "base + RoPE, no fine-tuning")


def clusters(units_: pd.DataFrame) -> pd.Series:
    """Each unit's cluster, the trained model it comes from: "base model" for the base model
    and its RoPE probes (``BASE_KINDS``), else the unit itself (its own fine-tuning runs). The
    bootstrap of Table 1 resamples clusters, not units."""
    return units_["unit"].where(~units_["kind"].isin(BASE_KINDS), "base model")


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
    bootstrap interval (resampling clusters of units, ``clusters``, where the table has them)
    and permutation p-value."""
    rows = []
    for score in score_cols:
        have = table[table[score].notna()]
        if len(have) < 3:
            continue
        rows += stats.correlation_rows(have, predictors, [score], n_resamples=n_resamples,
                                       n_permutations=n_resamples, seed=seed,
                                       group_col="cluster" if "cluster" in have else None)
    return pd.DataFrame(rows)


def paper_r(row) -> float | None:
    """The paper's Pearson r for a Table 1 row (misalignment or training loss), else None."""
    key = {("misalignment", "pearson"): "table1/pearson_misalign",
           ("train_loss", "pearson"): "table1/pearson_train_loss"}.get(
        (row["predictor"], row["method"]))
    return paper(key).value if key else None


def comparisons(table: pd.DataFrame, score_cols: list[str], pairs: list[tuple[str, str]], *,
                n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """For each (a, b) and score: the signed difference ``-(r(a) - r(b))`` (the paper expects
    negative correlations) with its bootstrap interval over the clusters of units; ``holds``: a
    points the paper's way and predicts better (the interval lies above 0)."""
    rows = []
    for score in score_cols:
        for a, b in pairs:
            for method in ("pearson", "spearman"):
                try:
                    rows.append(stats.compare_predictors(
                        table, a, b, score, method, n_resamples=n_resamples, seed=seed,
                        group_col="cluster" if "cluster" in table else None).to_dict())
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
            r, boot = stats.partial_correlation_ci(cols[pred], cols[score], cols[given],
                                                   n_resamples=n_resamples, seed=seed)
            rows.append({"predictor": pred, "score": score, "given": given, "r": r,
                         "low": boot.low, "high": boot.high, "p": boot.p, "n": len(cols)})
    return pd.DataFrame(rows)


def l2_ranking(primary: pd.DataFrame, n_resamples: int, seed: int) -> dict[str, Any] | None:
    """Audit 2: Spearman of the theory's L2 distance with SCE over the units (None below 3)."""
    if len(primary) < 3:
        return None
    return stats.correlation(primary["l2"], primary["misalignment"], "spearman",
                             n_resamples=n_resamples, n_permutations=n_resamples, seed=seed,
                             predictor="l2", score="misalignment").to_dict()


def top1_by_l_extra(samples: pd.DataFrame, models: list[str], bins: int = 4) -> pd.DataFrame:
    """Audit 3: per model of ``models`` (in that order) and bin of ``l_extra`` (equal-width
    bins over the drawn range of its samples: ``lsa.runtable.read_last_positions``), how often
    the most likely next token changes when the context of the last position is cut from
    ``l`` to ``l - l_extra`` (with its Wilson interval), and the mean probability mass that
    moves (total variation)."""
    rows = []
    for model in models:
        if samples.empty:
            break
        own = samples[samples["model"] == model].reset_index(drop=True)
        if own.empty:
            continue
        edges = np.linspace(own["l_extra"].min() - 0.5, own["l_extra"].max() + 0.5, bins + 1)
        own["bin"] = pd.cut(own["l_extra"], edges)
        for interval, sub in own.groupby("bin", observed=True):
            k, n = int(sub["top1_change"].sum()), len(sub)
            low, high = wilson_interval(k, n)
            rows.append({"model": model, "l_extra": f"{math.ceil(interval.left)}-"
                                                   f"{math.floor(interval.right)}",
                         "l_extra_mid": float(sub["l_extra"].mean()), "samples": n,
                         "top1_changed": k / n, "low": low, "high": high,
                         "tv": float(sub["tv"].mean()) if "tv" in sub else math.nan})
    return pd.DataFrame(rows)


#: the parts of the decomposition, by column, with their labels
DECOMPOSED = {"misalignment": "SCE", "jeffreys": "Jeffreys", "entropy": "entropy",
              "top1_change": "top1_change"}


def decomposition(primary: pd.DataFrame, references: pd.DataFrame, l_train: int
                  ) -> pd.DataFrame:
    """The misalignment taken apart: SCE, its Jeffreys (alignment) and entropy (sharpness)
    parts, their share and the top-1 change, for the base model, the mean of the primary
    units that are CE-only fine-tuning runs, and each reference model (a model trained as the
    paper's were, on its own tokens: ``references``, ``lsa.runtable.read_references``)."""
    rows = []

    def add(name: str, what: str, values: dict[str, float], se: dict[str, float]) -> None:
        """``se``: each part's sampling standard error (a mean of units: their mean s.e.)."""
        sce = values["misalignment"]
        rows.append({"model": name, "what": what,
                     **{label: values[c] for c, label in DECOMPOSED.items()},
                     "Jeffreys share": values["jeffreys"] / sce if sce else math.nan,
                     **{f"{label} s.e.": se.get(c, math.nan) for c, label in DECOMPOSED.items()}})

    cols = list(DECOMPOSED)

    def errors(frame: pd.DataFrame) -> dict[str, float]:
        return {c: float(frame[f"{c}_se"].mean()) for c in cols if f"{c}_se" in frame}

    base = primary[primary["kind"] == "base model"] if len(primary) else primary
    if len(base):
        add("base model", f"scratch, l = {l_train}", base.iloc[0][cols].to_dict(),
            errors(base.iloc[:1]))
    tuned = primary[primary["kind"] == "fine-tuning run"] if len(primary) else primary
    if len(tuned):
        add("CE-only fine-tuning runs", f"mean of {len(tuned)} units",
            tuned[cols].mean().to_dict(), errors(tuned))
    for ref in references.to_dict(orient="records"):
        add(ref["model"], f"pretrained, l = {ref['window']}, its own tokens",
            {c: ref[c] for c in cols}, {c: ref[f"{c}_se"] for c in cols})
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


#: the statistics ``unit_influence`` refits without each cluster: the paper's T1.1-T1.3 (their
#: "rests on") and T1.4 (audit 5, T1.8, with T1.1)
INFLUENCE = ("r(misalignment)", "r(train_loss)", "misalignment - train_loss",
             "jeffreys - entropy")


def unit_influence(table: pd.DataFrame, score: str, *, n_resamples: int = 2000, seed: int = 0
                   ) -> pd.DataFrame:
    """Audit 5 and the paper claims' "rests on": each cluster of primary units (``clusters``:
    the units that come from one trained model; a unit alone where the table has no clusters)
    left out in turn, the results one trained model far from the rest could make alone (the
    untouched base model and its RoPE copies, say): the Pearson r of the misalignment (T1.1)
    and of the training loss (T1.2) with ``score``, and the signed differences of the
    misalignment's and the training loss's correlations (T1.3) and of the Jeffreys part's and
    the entropy's (T1.4), each with its bootstrap interval over the remaining clusters and its
    shift from the fit on every unit (``shift``); ``r_better`` / ``r_worse`` / ``right_sign``:
    a difference's two correlations and whether the first points the paper's way. Column
    ``unit`` names the cluster left out, ``units`` how many units it held. Empty below 6
    units."""
    cols = ["unit", "kind", "units", "statistic", "value", "low", "high", "shift", "n",
            "r_better", "r_worse", "right_sign"]
    if len(table) < 6:
        return pd.DataFrame(columns=cols)
    cluster = table["cluster"] if "cluster" in table else table["unit"]
    pairs = {name: tuple(name.split(" - ")) for name in INFLUENCE if " - " in name}
    has = [c for c in ("misalignment", "train_loss") if c in table]
    full = {f"r({c})": stats.correlation_value(table[c], table[score]) for c in has}
    full.update({name: stats.predictor_difference(table, a, b, score)
                 for name, (a, b) in pairs.items() if {a, b} <= set(table)})
    rows = []
    for name in dict.fromkeys(cluster):
        rest = table[cluster != name]
        if len(rest) < 4:
            continue
        groups = rest["cluster"] if "cluster" in rest else None
        kinds = ", ".join(dict.fromkeys(table.loc[cluster == name, "kind"]))
        found = []
        for c in has:
            r, boot = stats.correlation_interval(rest[c], rest[score],
                                                 n_resamples=n_resamples, seed=seed,
                                                 groups=groups)
            found.append((f"r({c})", r, boot.low, boot.high, {}))
        for stat, (a, b) in pairs.items():
            if stat in full:
                d = stats.compare_predictors(rest, a, b, score, n_resamples=n_resamples,
                                             seed=seed, group_col="cluster" if groups is not
                                             None else None)
                found.append((stat, d.difference, d.low, d.high,
                              {"r_better": d.r_better, "r_worse": d.r_worse,
                               "right_sign": d.right_sign}))
        for stat, value, low, high, parts in found:
            rows.append({"unit": name, "kind": kinds, "units": int((cluster == name).sum()),
                         "statistic": stat, "value": value, "low": low, "high": high,
                         "shift": value - full[stat], "n": len(rest), "r_better": math.nan,
                         "r_worse": math.nan, "right_sign": None, **parts})
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
            x, y = cols[pred].to_numpy(float), cols[score].to_numpy(float)
            rows.append({"method": method, "predictor": pred, "units": len(cols),
                         "slope": stats.slope(x, y)[0], "r": stats.pearson(x, y)})
    return pd.DataFrame(rows)


def pearson_rows(rows: pd.DataFrame, score: str) -> pd.DataFrame:
    """The Pearson rows of ``table1`` on ``score``, indexed by predictor (empty if none)."""
    if rows.empty:
        return pd.DataFrame(columns=["r", "low", "high"])
    return rows[(rows["method"] == "pearson") & (rows["score"] == score)].set_index("predictor")


def pearson(rows: pd.DataFrame, predictor: str, score: str) -> dict[str, Any] | None:
    """One predictor's Pearson row of ``table1`` on ``score`` (a dict), or None."""
    pear = pearson_rows(rows, score)
    return pear.loc[predictor].to_dict() if predictor in pear.index else None


def comparison(comp: pd.DataFrame, score: str, better: str, worse: str) -> pd.Series | None:
    """The Pearson row of ``comparisons`` for ``better`` vs ``worse`` on ``score``, if any."""
    if comp.empty:
        return None
    sel = comp[(comp["score"] == score) & (comp["method"] == "pearson")
               & (comp["better"] == better) & (comp["worse"] == worse)]
    return sel.iloc[0] if len(sel) else None
