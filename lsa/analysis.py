"""Tables and verdicts for the fine-tuning sections (5.1-5.2, 5.4): runs -> DataFrames -> claims.

Runs are read through ``runs_of(pipe)`` (``lsa.runs``): reading results imports no torch.

Seed noise: the regularizer's effect on a quantity is the mean over seeds of the paired
difference (alpha run minus CE run, same seed, same data order), with the 95 % Student t
interval of that mean (``lsa.stats.paired_interval``). A direction *agrees* when the interval
lies on the paper's side of 0, *disagrees* when it lies on the other, and is *inconclusive*
when it contains 0 (always with one seed).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from lsa.config import PipelineConfig
from lsa.data.babi import TASK_LABELS
from lsa.report import PAPER, Claim, fmt, paper
from lsa.runs import runs_of
from lsa.stats import (
    equivalence_verdict,
    paired_interval,
    paired_proportion_interval,
    resolution_text,
    resolve_verdict,
    seeds_for_halfwidth,
    threshold_outcome,
    two_level_interval,
    wilson_interval,
)

# the paper's Tables 2-3 rows for the methods that have them: (table key, paper's alpha)
PAPER_ROWS = {"clex": "table2/clex_redpajama", "longqlora": "table3/longqlora",
              "eabf": "table3/eabf"}


def loss_label(alpha: float) -> str:
    return "CE" if alpha == 0 else f"CE+{alpha:g}*SCE"


DIVERGENCE_LABELS = {"sce": "SCE", "jeffreys": "Jeffreys", "entropy": "entropy"}
#: the parts of the misalignment every run and probe reports (``lsa.jobs.lm_metrics``)
PARTS = ("jeffreys", "entropy", "l2", "tv", "top1_change")


def setting_label(spec) -> str:
    """A run's training setting in words, without method and seed: ``CE``, ``SCE 0.1``,
    ``Jeffreys 1``, ``CE (both windows)``, ``SCE 0.1, l_extra 4``, ``CE, 75 steps``."""
    label = "CE" if spec.alpha == 0 else f"{DIVERGENCE_LABELS[spec.divergence]} {spec.alpha:g}"
    if spec.ce_on != "a":
        label += " (both windows)" if spec.ce_on == "both" else f" (CE on {spec.ce_on})"
    if spec.l_extra_setting != 1:
        label += f", l_extra {spec.l_extra_setting}"
    if spec.steps is not None:
        label += f", {spec.steps} steps"
    return label


def measured_row(metrics: dict[str, Any], l_train: int) -> dict[str, Any]:
    """The protocol's numbers of one model (a fine-tuning run or a probe): perplexity and NLL by
    multiple of ``l_train`` (``nll_beyond_Mx``: the targets whose context is longer than
    ``l_train``), the long-window perplexity (2x and longer, token-weighted), the misalignment
    and its parts (NaN where a run predates them), the CE on the training books
    (``train_loss``) and the copy probes (``nll_copy_Mx``, ``retrieval_Mx``)."""
    row: dict[str, Any] = {}
    long_nll, long_tokens = 0.0, 0
    for length, value in metrics["perplexity"].items():
        mult = int(length) // l_train
        row[f"ppl_{mult}x"] = value["ppl"]
        row[f"nll_{mult}x"] = value["nll"]
        if "nll_beyond" in value:  # targets whose context is longer than l_train
            row[f"nll_beyond_{mult}x"] = value["nll_beyond"]
        if mult > 1:
            long_nll += value["nll"] * value["tokens"]
            long_tokens += value["tokens"]
    row["ppl_long"] = math.exp(long_nll / long_tokens) if long_tokens else math.nan
    longest = max(int(k) for k in metrics["perplexity"]) // l_train
    row["ppl_growth"] = row[f"ppl_{longest}x"] / row["ppl_1x"]  # longest window / 1x
    # runs from before the paper's positions hold one value, over every overlap position
    paper_mis = metrics["misalignment"] if "misalignment_all" in metrics else {}
    all_mis = metrics.get("misalignment_all", metrics["misalignment"])
    row["misalignment"] = paper_mis.get("mean", math.nan)
    row["misalignment_se"] = paper_mis.get("stderr", math.nan)
    row["misalignment_all"] = all_mis["mean"]
    row["misalignment_all_se"] = all_mis["stderr"]
    for part in PARTS:  # each part with its sampling standard error
        row[part] = metrics.get(part, {}).get("mean", math.nan)
        row[f"{part}_se"] = metrics.get(part, {}).get("stderr", math.nan)
    row["train_loss"] = metrics.get("train_ce", {}).get("nll", math.nan)
    for length, value in (metrics.get("long_range") or {}).items():
        mult = int(length) // l_train
        row[f"nll_copy_{mult}x"] = value["copy_nll"]
        row[f"retrieval_{mult}x"] = value["retrieval"]
    return row


def final_ce(log: list[dict[str, Any]]) -> float:
    """The training loss at the end of a run as its log has it: the mean CE of the last fifth
    of its steps (NaN without a log)."""
    tail = log[-max(1, len(log) // 5):]
    return float(np.mean([r["ce"] for r in tail])) if tail else math.nan


def window_columns(frame: pd.DataFrame, kind: str = "ppl") -> list[str]:
    """The columns ``<kind>_<M>x`` of ``frame`` (perplexity or NLL at M x ``l_train``), in the
    order of M as a number (``ppl_2x`` before ``ppl_16x``): the one column order of every
    table and figure by window."""
    found = [c for c in frame.columns if c.startswith(f"{kind}_") and c[len(kind) + 1:-1].isdigit()
             and c.endswith("x")]
    return sorted(found, key=lambda c: int(c[len(kind) + 1:-1]))


def collect_runs(pipe: PipelineConfig, names: list[str] | None = None) -> pd.DataFrame:
    """One row per finished fine-tuning run (``names``: these runs; default the Section
    5.1-5.2 grid and explicit runs): method, alpha, seed, the base model's pretraining seed
    (``base_seed``), setting (``setting_label``),
    perplexities by multiple of the training window, long-window perplexity, misalignment
    metric (``misalignment``: the paper's positions, both contexts >= l_train / 2;
    ``misalignment_all``: every overlap position) and its parts, final training losses,
    training wall time."""
    rows = []
    for name in runs_of(pipe).grid if names is None else names:
        run = runs_of(pipe).finetune[name]
        if not run.finished:
            continue
        m, log, spec = run.metrics(), run.log(), run.spec
        row: dict[str, Any] = {"run": run.name, "method": spec.method, "alpha": spec.alpha,
                               "loss": loss_label(spec.alpha), "seed": spec.seed,
                               "setting": setting_label(spec), "divergence": spec.divergence,
                               "ce_on": spec.ce_on, "l_extra_setting": spec.l_extra_setting,
                               "steps": m.get("steps"), "l_train": m["l_train"],
                               "base_seed": pipe.pretrain.seed if spec.base_seed is None
                               else spec.base_seed}
        row.update(measured_row(m, m["l_train"]))
        row["final_ce"] = final_ce(log)
        row["trainable_parameters"] = m.get("trainable_parameters")
        row["train_wall_s"] = run.summary().get("wall_time_s", math.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def curves(pipe: PipelineConfig, names: list[str] | None = None) -> pd.DataFrame:
    """Training logs of every finished run (``names``; default the grid), long format (run,
    method, alpha, seed, setting, step, ...)."""
    frames = []
    for name in runs_of(pipe).grid if names is None else names:
        run = runs_of(pipe).finetune[name]
        if run.finished:
            spec = run.spec
            frames.append(pd.DataFrame(run.log()).assign(
                run=run.name, method=spec.method, alpha=spec.alpha, loss=loss_label(spec.alpha),
                seed=spec.seed, setting=setting_label(spec)))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def by_method(runs: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Mean and standard deviation over seeds per (method, alpha)."""
    agg = runs.groupby(["method", "alpha"])[columns].agg(["mean", "std", "count"])
    agg.columns = [f"{c}_{s}" for c, s in agg.columns]
    return agg.reset_index()


def paired_effect(runs: pd.DataFrame, column: str, alpha: float) -> pd.DataFrame:
    """Per method: mean over seeds of (value at ``alpha`` - value at alpha 0), its noise (std
    of the paired differences), its 95 % t interval (``lsa.stats.paired_interval``: ``low``,
    ``high``; NaN with one seed) and the number of seeds. Only the grid's plain settings
    (``CE`` and ``SCE alpha``) are compared."""

    rows = []
    plain = runs[runs["setting"].isin(["CE", f"SCE {alpha:g}"])] if "setting" in runs else runs
    for method, sub in plain.groupby("method"):
        base = sub[sub["alpha"] == 0].set_index("seed")[column]
        reg = sub[np.isclose(sub["alpha"], alpha)].set_index("seed")[column]
        seeds = base.index.intersection(reg.index)
        if len(seeds) == 0:
            continue
        diff = (reg[seeds] - base[seeds]).to_numpy(dtype=float)
        ci = paired_interval(reg[seeds].to_numpy(dtype=float), base[seeds].to_numpy(dtype=float))
        rows.append({"method": method, "column": column, "alpha": alpha,
                     "baseline": float(base[seeds].mean()), "regularized": float(reg[seeds].mean()),
                     "delta": float(diff.mean()),
                     "noise": float(diff.std(ddof=1)) if len(diff) > 1 else math.nan,
                     "low": ci.low, "high": ci.high,
                     "wins": int((diff < 0).sum()), "seeds": len(seeds),
                     "diffs": diff.tolist()})
    return pd.DataFrame(rows)


def paper_effect_nats(method: str) -> tuple[float, str]:
    """The paper's effect of CE + 0.1 SCE on perplexity for ``method`` in nats,
    ``log(PPL_reg / PPL_CE)``, and where it comes from; methods without a row in the paper's
    tables (pi, yarn) are held against CLEX's (issue 31)."""
    key = PAPER_ROWS.get(method, PAPER_ROWS["clex"])
    ce, reg = paper(f"{key}/ce/ppl").value, paper(f"{key}/a0.1/ppl").value
    source = key.split("/")[1] + ("" if method in PAPER_ROWS else ", CLEX's value")
    return math.log(reg / ce), source


def _verdict_words(row, effect: float | None, unit: str) -> tuple[str, str]:
    """(verdict, what the interval resolves) of a paired-effect row (``paired_effect``)."""
    verdict = resolve_verdict(row.low, row.high, -1, effect, row.seeds, row.diffs)
    return verdict, resolution_text(row.low, row.high, effect, unit)


def extension_claims(runs: pd.DataFrame, alpha: float = 0.1, section: str = "Sec. 5.2"
                     ) -> list[dict[str, Any]]:
    """Per method: does CE + alpha * misalign lower the long-window NLL (nats; perplexity
    beside), flatten perplexity's growth, lower the misalignment metric, and lower the copy NLL
    beyond ``l_train`` (2x and 4x: the long-context task, our analogue of the paper's
    LongBench-E). Verdicts in ``lsa.stats.resolve_verdict``'s words, against the paper's
    perplexity effect for the method in nats (``paper_effect_nats``) where the paper has one."""
    claims: list[Claim] = []
    if runs.empty:
        return []
    runs = runs.assign(nll_long=np.log(runs["ppl_long"]))
    nll = paired_effect(runs, "nll_long", alpha).set_index("method")
    ppl = paired_effect(runs, "ppl_long", alpha)
    mis = paired_effect(runs, "misalignment", alpha)
    mis_all = (paired_effect(runs, "misalignment_all", alpha).set_index("method")
               if "misalignment_all" in runs else pd.DataFrame())
    for i, row in enumerate(ppl.itertuples(), start=1):
        method = row.method
        effect, source = paper_effect_nats(method)
        key = PAPER_ROWS.get(method)
        if key:
            ce, reg = paper(f"{key}/ce/ppl"), paper(f"{key}/a0.1/ppl")
            paper_text, grade = (f"PPL {ce.value} -> {reg.value} "
                                 f"({reg.value - ce.value:+.2f}; {effect:+.3f} nats)", reg.grade)
        else:
            paper_text, grade = "not in the paper's tables (expected lower)", "?"
        n = nll.loc[method]
        verdict, resolves = _verdict_words(n, effect, " nats")
        note = ("1 seed: no interval, no verdict" if n.seeds < 2 else
                f"{n.seeds} seeds, 95 % t interval of the paired NLL difference "
                f"[{n.low:+.3g}, {n.high:+.3g}] nats; {resolves}, {source}")
        claims.append(Claim(
            f"S5.{i}", section,
            f"CE + {alpha:g} misalign lowers long-window perplexity ({method})",
            paper_text, grade,
            f"NLL {n.baseline:.4f} -> {n.regularized:.4f} nats ({n.delta:+.3g}); PPL "
            f"{fmt(row.baseline, 4)} -> {fmt(row.regularized, 4)} ({row.delta:+.3g}); lower "
            f"in {row.wins}/{row.seeds} seed(s)",
            verdict,  # type: ignore[arg-type]
            f"long window = 2x and 4x l_train, token-weighted; {note}", method=method))
    growth = paired_effect(runs, "ppl_growth", alpha)
    for row in growth.itertuples():
        verdict, resolves = _verdict_words(row, None, "")
        claims.append(Claim(
            f"S5.{len(claims) + 1}", section,
            f"The regularizer flattens the growth of perplexity with length ({row.method})",
            "not in the paper (a reading of ours)", "?",
            f"PPL(longest) / PPL(1x) {row.baseline:.3f} -> {row.regularized:.3f}; "
            f"lower in {row.wins}/{row.seeds} seed(s)",
            verdict,  # type: ignore[arg-type]
            "longest window = the largest evaluation multiple of l_train; 95 % t interval "
            f"of the paired difference [{row.low:+.3g}, {row.high:+.3g}]; {resolves}",
            method=row.method))
    n_before = len(claims)
    for j, row in enumerate(mis.itertuples(), start=n_before + 1):
        every = (f"; over every overlap position {fmt(mis_all.at[row.method, 'baseline'], 4)} "
                 f"-> {fmt(mis_all.at[row.method, 'regularized'], 4)}"
                 if row.method in mis_all.index else "")
        verdict, resolves = _verdict_words(row, None, " nats")
        claims.append(Claim(
            f"S5.{j}", section,
            f"The regularizer lowers the long-short misalignment ({row.method})",
            "implied (the term is minimised)", "?",
            f"L_misalign {fmt(row.baseline, 4)} -> {fmt(row.regularized, 4)}; "
            f"lower in {row.wins}/{row.seeds} seed(s)",
            verdict,  # type: ignore[arg-type]
            f"interval [{row.low:+.3g}, {row.high:+.3g}]; {resolves}; metric on the test books, "
            "l_extra from setting 1, over the overlap positions "
            f"where both contexts are >= l_train / 2 tokens (the paper's l1, l2){every}",
            method=row.method))
    for multiple in (2, 4):  # the long-context task: copying from far text beyond l_train
        column = f"nll_copy_{multiple}x"
        if column not in runs:
            continue
        for row in paired_effect(runs, column, alpha).itertuples():
            effect, source = paper_effect_nats(row.method)
            verdict, resolves = _verdict_words(row, effect, " nats")
            key = PAPER_ROWS.get(row.method)
            paper_text = (f"LongBench-E {paper(f'{key}/ce/longbench').value} -> "
                          f"{paper(f'{key}/a0.1/longbench').value} (our analogue)" if key
                          else "not in the paper's tables (expected lower)")
            claims.append(Claim(
                f"S5.{len(claims) + 1}", section,
                f"CE + {alpha:g} misalign improves the long-context task at {multiple}x "
                f"l_train: copy NLL ({row.method})",
                paper_text, paper(f"{key}/a0.1/longbench").grade if key else "?",
                f"copy NLL {row.baseline:.3f} -> {row.regularized:.3f} nats ({row.delta:+.3g}); "
                f"lower in {row.wins}/{row.seeds} seed(s)",
                verdict,  # type: ignore[arg-type]
                f"copy probes at {multiple}x l_train (the far half of each window); 95 % t "
                f"interval of the paired difference [{row.low:+.3g}, {row.high:+.3g}] nats; "
                f"{resolves} (margin: the paper's perplexity effect, {source})",
                method=row.method))
    return [c.to_dict() for c in claims]


def power_table(runs: pd.DataFrame, alpha: float = 0.1,
                columns: tuple[str, ...] = ("nll_long", "nll_2x", "nll_4x")) -> pd.DataFrame:
    """The power computation of the seeds (config/config.yaml, ``finetune.seeds`` and
    ``method_seeds``): per method and column, the seed-to-seed standard deviation of the
    paired differences (CE + alpha SCE - CE, nats), the paper's effect for the method
    (``paper_effect_nats``), the half-width the measured seeds resolve and the seeds whose
    95 % t interval reaches the paper's effect (``lsa.stats.seeds_for_halfwidth``)."""
    runs = runs.assign(nll_long=np.log(runs["ppl_long"]))
    rows = []
    for column in columns:
        if column not in runs:
            continue
        for row in paired_effect(runs, column, alpha).itertuples():
            effect, source = paper_effect_nats(row.method)
            enough = (seeds_for_halfwidth(row.noise, abs(effect))
                      if math.isfinite(row.noise) else None)
            rows.append({"method": row.method, "column": column, "seeds": row.seeds,
                         "sd": row.noise, "half_width": (row.high - row.low) / 2,
                         "paper_effect": effect, "effect_from": source,
                         "seeds_needed": enough})
    return pd.DataFrame(rows)


def paper_table(runs: pd.DataFrame, alpha: float = 0.1) -> pd.DataFrame:
    """Our perplexity change beside the paper's (and LongBench-E, which needs the GPU profiles)."""
    effect = paired_effect(runs, "ppl_long", alpha) if not runs.empty else pd.DataFrame()
    rows = []
    for method in sorted(set(runs["method"]) if not runs.empty else []):
        key = PAPER_ROWS.get(method)
        ours = effect[effect["method"] == method]
        row = {"method": method,
               "ours: PPL CE": ours["baseline"].iloc[0] if len(ours) else math.nan,
               f"ours: PPL +{alpha:g}": ours["regularized"].iloc[0] if len(ours) else math.nan}
        if key:
            row.update({"paper: PPL CE": paper(f"{key}/ce/ppl").value,
                        f"paper: PPL +{alpha:g}": paper(f"{key}/a0.1/ppl").value,
                        "paper: LongBench-E CE": paper(f"{key}/ce/longbench").value,
                        f"paper: LongBench-E +{alpha:g}": paper(f"{key}/a0.1/longbench").value,
                        "grade": paper(f"{key}/a0.1/ppl").grade})
        rows.append(row)
    return pd.DataFrame(rows)


def collect_longbench(pipe: PipelineConfig) -> pd.DataFrame:
    """One row per finished LongBench-E evaluation (``lsa.jobs.longbench_evaluate``): run,
    method, alpha, loss, seed, the score of each length bucket and ``LongBench-E`` (unweighted
    means over datasets)."""
    rows = []
    for name, run in runs_of(pipe).longbench.items():
        if not run.finished:
            continue
        m = run.metrics()
        rows.append({"run": name, "method": m["method"], "alpha": m["alpha"],
                     "loss": loss_label(m["alpha"]), "seed": m["seed"], **m["buckets"],
                     "LongBench-E": m["longbench_e"]})
    return pd.DataFrame(rows)


def longbench_table(rows: pd.DataFrame, alpha: float = 0.1) -> pd.DataFrame:
    """Tables 2-3's layout: per method and loss, the mean over seeds of each length bucket's
    score and of LongBench-E, with the paper's LongBench-E beside where it has the method."""
    if rows.empty:
        return rows
    cols = [c for c in ("0-4k", "4-8k", "8k+", "LongBench-E") if c in rows]
    table = rows.groupby(["method", "alpha", "loss"])[cols].mean()
    table["seeds"] = rows.groupby(["method", "alpha", "loss"]).size()
    table = table.reset_index()

    def reference(row) -> float:
        key = PAPER_ROWS.get(row["method"])
        which = "ce" if row["alpha"] == 0 else f"a{row['alpha']:g}"
        return (paper(f"{key}/{which}/longbench").value
                if key and f"{key}/{which}/longbench" in PAPER else math.nan)

    table["paper: LongBench-E"] = table.apply(reference, axis=1)
    return table


# ---------------------------------------------------------------------------------------------
# Section 5.4: BABILong
#
# Here the noise that matters is the test sample's: a cell holds a few hundred 0/1 answers, and
# the training seed's: a run trained once more can answer differently. Accuracies carry a
# Wilson interval; the regularizer's effect is the paired difference over the same test prompts
# (same seed, same index) with a two-level bootstrap interval (seeds, then answers). A verdict
# is given only when that interval is clear of 0 (of the +-5-point band for "comparable"); the
# interval over answers alone (Agresti-Min) is reported beside it.


# Table 6 of the paper (the CLEX model trained at 4K): its input lengths in tokens, keyed by
# absolute length in the evaluate design (where the evaluated runs may train at 4K or 8K), and
# by multiple of the training window in the train design (a small model at l_train)
TABLE6_LENGTHS = {4096: "4k", 8192: "8k", 16384: "16k"}
TABLE6_MULTIPLES = {1: "4k", 2: "8k", 4: "16k"}


def collect_babilong(pipe: PipelineConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-sample rows of every finished BABILong run of the configured design: (accuracy
    grid, depth grid). Train design: the BABILong fine-tuning runs (``multiple`` = length /
    l_train); evaluate design: the evaluations of ``runs_of(pipe).babilong_eval``, tagged with
    ``design``, ``finetune_run`` and the evaluated run's ``method`` and ``l_train``."""
    if pipe.babilong.design == "evaluate":
        return _collect_babilong_evaluate(pipe)
    acc, depth = [], []
    for run in runs_of(pipe).babilong.values():
        if not run.finished:
            continue
        m, spec = run.metrics(), run.spec
        tags = {"run": run.name, "method": spec.method, "alpha": spec.alpha,
                "loss": loss_label(spec.alpha), "seed": spec.seed, "multiple": None}
        for row in m["accuracy"]:
            acc.append({**tags, **row, "multiple": row["length"] // m["l_train"]})
        for row in m["depth"]:
            depth.append({**tags, **row, "multiple": row["length"] // m["l_train"]})
    return pd.DataFrame(acc), pd.DataFrame(depth)


def _collect_babilong_evaluate(pipe: PipelineConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    acc, depth, seen = [], [], {}
    for run in runs_of(pipe).babilong_eval.values():
        if not run.finished:
            continue
        m = run.metrics()
        tags = {"run": run.name, "design": "evaluate", "finetune_run": m["finetune_run"],
                "method": m["method"], "l_train": m["l_train"], "alpha": m["alpha"],
                "loss": loss_label(m["alpha"]), "seed": m["seed"]}
        model = (m["method"], m["l_train"], m["alpha"], m["seed"])
        if model in seen:  # their answers would be pooled and paired as one model's
            raise ValueError(f"BABILong runs {seen[model]} and {run.name} are both {m['method']} "
                             f"at l_train {m['l_train']}, alpha {m['alpha']:g}, seed "
                             f"{m['seed']}: list one of them in babilong.finetune_runs")
        seen[model] = run.name
        acc.extend({**tags, **row} for row in m["accuracy"])
        depth.extend({**tags, **row} for row in m["depth"])
    return pd.DataFrame(acc), pd.DataFrame(depth)


def babilong_design(rows: pd.DataFrame) -> str:
    """'evaluate' for rows of the evaluate design (tagged ``design``), else 'train'."""
    return ("evaluate" if "design" in rows and bool((rows["design"] == "evaluate").any())
            else "train")


def babilong_groups(rows: pd.DataFrame) -> list[str]:
    """The columns that tell the compared models apart besides the loss: the evaluate design
    may evaluate several fine-tuning methods and windows ("method", "l_train"); the train
    design has one method."""
    return ["method", "l_train"] if babilong_design(rows) == "evaluate" else []


def babilong_length(rows: pd.DataFrame) -> str:
    """The length axis: absolute tokens ("length") in the evaluate design, multiples of the
    training window ("multiple") in the train design."""
    return "length" if babilong_design(rows) == "evaluate" else "multiple"


def gate_rows(acc: pd.DataFrame) -> pd.DataFrame:
    """The CE-only answers of the sanity gate: at the training window (multiple 1) in the train
    design; in the evaluate design, per model, at the longest evaluated length within its
    training window (its shortest length when none is)."""
    ce = acc[acc["alpha"] == 0]
    if babilong_design(acc) == "train":
        return ce[ce["multiple"] == 1]
    keep = []
    for _, sub in ce.groupby(babilong_groups(acc)):
        lengths = sorted(set(sub["length"]))
        within = [n for n in lengths if n <= sub["l_train"].iloc[0]]
        keep.append(sub[sub["length"] == (within[-1] if within else lengths[0])])
    return pd.concat(keep) if keep else ce.iloc[:0]


def _gate_by(acc: pd.DataFrame) -> list[str]:
    return [*babilong_groups(acc), "length", "task"] if babilong_groups(acc) else ["task"]


def babilong_tables(acc: pd.DataFrame, depth: pd.DataFrame, alpha: float, level: float = 0.95
                    ) -> dict[str, pd.DataFrame]:
    """Section 5.4's tables, by the name they are saved under: the sanity gate, accuracy by
    length (Table 6) overall and by task, the paired difference by length, QA1 accuracy by
    depth (Table 7) and its paired difference; split by model in the evaluate design."""
    groups, x = babilong_groups(acc), babilong_length(acc)
    gate = accuracy_table(gate_rows(acc), _gate_by(acc), level)
    gate = gate.assign(chance_pct=[chance(t) for t in gate["task"]])
    tables = {"sanity_gate": gate,
              "table6_accuracy_by_length": accuracy_table(acc, [*groups, x], level),
              "accuracy_by_task_length": accuracy_table(acc, [*groups, "task", x], level),
              "table6_paired_difference": paired_accuracy(acc, [*groups, x], alpha, level)}
    if depth.empty:
        tables.update(table7_qa1_by_depth=pd.DataFrame(), table7_paired_difference=pd.DataFrame())
    else:
        tables.update(table7_qa1_by_depth=accuracy_table(depth, [*groups, "depth"], level),
                      table7_paired_difference=paired_accuracy(depth, [*groups, "depth"],
                                                               alpha, level))
    return tables


def curve_label(table: pd.DataFrame, *first: str) -> pd.Series:
    """One plotted curve per row's ``first`` columns, model (evaluate design) and loss:
    "qa1, CE" in the train design, "qa1, clex@1024, CE" in the evaluate design."""
    label = pd.Series("", index=table.index)
    for column in first:
        label = label + table[column].astype(str) + ", "
    if {"method", "l_train"} <= set(table.columns):
        label = label + table["method"].astype(str) + "@" + table["l_train"].astype(str) + ", "
    return label + table["loss"].astype(str)


def _tokens(n: int) -> str:
    return f"{n // 1024}K" if n % 1024 == 0 else str(n)


def babilong_axes(pipe: PipelineConfig) -> dict[str, Any]:
    """How the figures show the configured design: the length column, its ticks and labels,
    the x label, and the depth figure's title."""
    bl = pipe.babilong
    if bl.design == "evaluate":
        return {"x": "length", "ticks": list(bl.eval_lengths),
                "labels": [_tokens(n) for n in bl.eval_lengths],
                "xlabel": "input length (tokens)",
                "depth_title": f"{bl.depth_task} at {bl.eval_depth_length} tokens"}
    return {"x": "multiple", "ticks": list(bl.eval_multiples),
            "labels": [f"{m}x" for m in bl.eval_multiples],
            "xlabel": "input length / training window",
            "depth_title": f"{bl.depth_task} at {bl.depth_multiple}x the training window"}


def babilong_settings(pipe: PipelineConfig) -> str:
    """One line of what the section's runs are (the configured design's fields)."""
    bl = pipe.babilong
    if bl.design == "evaluate":
        return (f"profile {pipe.profile}: evaluate design, tasks {bl.tasks}, fine-tuning runs "
                f"{list(runs_of(pipe).babilong_eval)}, lengths {bl.eval_lengths} "
                f"tokens, {bl.depth_task} at depths {bl.eval_depths} of "
                f"{bl.eval_depth_length} tokens, {bl.test_samples} test samples per cell, "
                f"prompt parts {bl.prompt_parts}, {bl.eval_max_new_tokens} new tokens, "
                f"scorer {bl.scorer}")
    return (f"profile {pipe.profile}: tasks {bl.tasks}, l_train {bl.l_train}, "
            f"{bl.optim.steps} steps, alphas {bl.alphas}, seeds {bl.seeds}, evaluation at "
            f"{bl.eval_multiples} x l_train, {bl.test_samples} test samples per cell, "
            f"scorer {bl.scorer}")


# what babilong_sources' keys mean (the notebook prints them with these words)
SOURCE_LABELS = {"design": "design", "babi_source": "bAbI source",
                 "train_samples": "training samples that fit the window, per task",
                 "books_source": "haystack books", "prompts": "benchmark prompts",
                 "max_new_tokens": "greedy tokens per answer",
                 "evaluated": "fine-tuning runs evaluated (run: its folder)"}


def babilong_sources(pipe: PipelineConfig) -> dict[str, Any]:
    """Where the finished runs' data came from. Train design: the bAbI source and the
    training samples per task of the first run; evaluate design: the bAbI source, haystack
    books, prompts file (path, sha256, parts) and greedy tokens (one value when every run
    agrees, else per run) and the fine-tuning run each evaluation read."""
    if pipe.babilong.design != "evaluate":
        finished = [r for r in runs_of(pipe).babilong.values() if r.finished]
        if not finished:
            return {}
        first = finished[0].metrics()
        return {"babi_source": first["babi_source"], "train_samples": first["train_samples"]}
    metrics = {run.name: run.metrics() for run in runs_of(pipe).babilong_eval.values()
               if run.finished}
    out: dict[str, Any] = {"design": "evaluate"}
    for key in ("babi_source", "books_source", "prompts", "max_new_tokens"):
        values = {name: m.get(key) for name, m in metrics.items()}
        distinct = {repr(v) for v in values.values()}
        out[key] = next(iter(values.values())) if len(distinct) == 1 else values
    out["evaluated"] = {name: m.get("finetune_run") for name, m in metrics.items()}
    return out


def accuracy_table(rows: pd.DataFrame, by: list[str], level: float = 0.95) -> pd.DataFrame:
    """Accuracy (%) per alpha and ``by`` cell over the answers of every seed, with its Wilson
    interval (``ci_low``, ``ci_high``), ``correct`` of ``n`` answers, and the spread of the
    per-seed accuracies (``seed_std``, ``seeds``)."""
    cells = ["alpha", "loss", *by]
    per_run = rows.groupby([*cells, "seed"])["correct"].mean().mul(100)
    spread = per_run.groupby(cells).agg(seed_std="std", seeds="count")
    table = rows.groupby(cells)["correct"].agg(correct="sum", n="count").join(spread)
    table = table.reset_index()
    table["accuracy"] = 100 * table["correct"] / table["n"]
    bounds = [wilson_interval(k, n, level) for k, n in zip(table["correct"], table["n"])]
    table["ci_low"] = [100 * low for low, _ in bounds]
    table["ci_high"] = [100 * high for _, high in bounds]
    return table[[*cells, "accuracy", "ci_low", "ci_high", "correct", "n", "seed_std", "seeds"]]


# what identifies one test prompt: the CE and the regularized run of a seed answer the same ones
# (and, where rows carry it, of a method: the evaluate design may evaluate several)
SAMPLE_KEYS = ["seed", "task", "length", "depth", "index"]


def paired_accuracy(rows: pd.DataFrame, by: list[str], alpha: float, level: float = 0.95,
                    n_resamples: int = 2000) -> pd.DataFrame:
    """Per ``by`` cell, the accuracy (%) of the CE run (``ce``) and the alpha run (``reg``),
    and their difference ``delta`` (points): the runs of one seed answer the same test prompts
    (``SAMPLE_KEYS``), ``n`` pairs over every seed. The verdict's interval (``ci_low``,
    ``ci_high``) has the training seed as its unit: a two-level bootstrap, seeds then paired
    answers (``lsa.stats.two_level_interval``), so a difference one seed's training makes and
    another's does not is not read as an effect. ``answers_low`` / ``answers_high``: the
    interval over test answers alone (``paired_proportion_interval``), for comparison; the
    spread of the per-seed differences is ``seed_std`` (``seeds`` seeds). Answers pair by
    method too when the rows carry one; two answers of one model to the same prompt are an
    error."""
    method = ["method"] if "method" in rows else []
    keys = list(dict.fromkeys([*method, *SAMPLE_KEYS, *by]))
    base = rows[rows["alpha"] == 0][[*keys, "correct"]]
    reg = rows[np.isclose(rows["alpha"], alpha)][[*keys, "correct"]]
    both = base.merge(reg, on=keys, suffixes=("_ce", "_reg"), validate="one_to_one")
    both["diff"] = 100 * (both["correct_reg"].astype(float) - both["correct_ce"].astype(float))
    out = []
    for cell, sub in both.groupby(by):
        diff = sub["diff"]
        a_low, a_high = paired_proportion_interval(int((diff > 0).sum()), int((diff < 0).sum()),
                                                   len(diff), level)
        per_seed = sub.groupby("seed")["diff"].mean()
        low, high = two_level_interval([g.to_numpy() for _, g in sub.groupby("seed")["diff"]],
                                       n_resamples, seed=0, level=level)
        out.append({**dict(zip(by, cell if isinstance(cell, tuple) else (cell,))),
                    "ce": 100 * sub["correct_ce"].mean(), "reg": 100 * sub["correct_reg"].mean(),
                    "delta": diff.mean(), "ci_low": low, "ci_high": high,
                    "answers_low": 100 * a_low, "answers_high": 100 * a_high,
                    "n": len(diff), "seeds": len(per_seed), "seed_std": per_seed.std(ddof=1)})
    return pd.DataFrame(out)


def verdict_flips(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> list[str]:
    """The claims (by id) whose verdict is "agrees" in one list and "disagrees" in the other:
    what a change of data source (or of anything that should not matter) must not do."""
    opposite = {("agrees", "disagrees"), ("disagrees", "agrees")}
    other = {c["id"]: c["verdict"] for c in second}
    return [f"{c['id']}: {c['verdict']} -> {other[c['id']]}" for c in first
            if (c["verdict"], other.get(c["id"])) in opposite]


def chance(task: str) -> float:

    return 100.0 / len(TASK_LABELS[task])


def _model(row: dict[str, Any]) -> tuple[str, str]:
    """(claim id part, words) of a row's model in the evaluate design; ("", "") in the train
    design (one model per loss)."""
    if "method" not in row or "l_train" not in row:
        return "", ""
    return (f"{row['method']}-{int(row['l_train'])}.",
            f"{row['method']} trained at {int(row['l_train'])} tokens")


def babilong_claims(acc: pd.DataFrame, depth: pd.DataFrame, alpha: float = 0.1,
                    section: str = "Sec. 5.4", level: float = 0.95) -> list[dict[str, Any]]:
    """Sanity gate, Table 6 (gain at longer lengths) and Table 7 (depth) verdicts, each only
    when the ``level`` interval (Wilson for the gate, paired for the differences) is clear.
    Train design: lengths as multiples of l_train (the paper's 4K/8K/16K = 1x/2x/4x); evaluate
    design: one set of claims per evaluated model (method, l_train), lengths in tokens, the
    paper's 4K/8K/16K matched by absolute length."""
    claims: list[Claim] = []
    if acc.empty:
        return []
    evaluate = babilong_design(acc) == "evaluate"
    groups = babilong_groups(acc)
    pct = f"{100 * level:g}%"
    scorer = ", ".join(sorted(set(acc["scorer"]))) if "scorer" in acc else "unknown"
    gate = accuracy_table(gate_rows(acc), _gate_by(acc), level)
    for row in gate.to_dict(orient="records"):
        task = row["task"]
        bar = chance(task) + 10
        verdict = threshold_outcome(row["ci_low"], row["ci_high"], bar)
        ident, words = _model(row)
        where = (f"at {int(row['length'])} tokens ({words}, {task}" if evaluate
                 else f"at the training window ({task}")
        claims.append(Claim(
            f"S5.4.{ident}gate.{task}", section, f"CE-only model is above chance {where}; "
            f"sanity gate, not a paper claim)",
            f"chance {chance(task):.0f}%", "?", f"{row['accuracy']:.1f}% ({pct} CI "
            f"{row['ci_low']:.1f}-{row['ci_high']:.1f}) over {row['n']} answers",
            verdict,  # type: ignore[arg-type]
            f"clearly above = the Wilson interval above chance + 10 points; scorer {scorer}",
            kind="control"))

    def ours(row: dict[str, Any]) -> str:
        interval = (f"{pct} CI {row['ci_low']:+.1f} to {row['ci_high']:+.1f}"
                    if math.isfinite(row["ci_low"]) else
                    f"one seed: no seed-level interval; answers alone {row['answers_low']:+.1f} "
                    f"to {row['answers_high']:+.1f}")
        return (f"{row['ce']:.1f}% -> {row['reg']:.1f}% ({row['delta']:+.1f} points, "
                f"{interval}); {row['n']} paired answers, {row['seeds']} seed(s)")

    interval = (f"{pct} two-level bootstrap interval (training seeds, then paired answers); "
                f"scorer {scorer}")
    x = babilong_length(acc)
    by_len = paired_accuracy(acc, [*groups, x], alpha, level)
    for row in by_len.to_dict(orient="records"):
        ident, words = _model(row)
        if evaluate:
            length = int(row["length"])
            key = TABLE6_LENGTHS.get(length)
            at = f"{length} tokens ({words})"
            ident = f"{ident}len{length}"
            rule = (f"average over tasks; the paper's 4K/8K/16K matched by absolute length "
                    f"(4096/8192/16384 tokens); here {length / row['l_train']:g}x the "
                    "training window")
        else:
            multiple = int(row["multiple"])
            key = TABLE6_MULTIPLES.get(multiple)
            at = f"{multiple}x the training window"
            ident = f"len{multiple}x"
            rule = "average over tasks; paper 4K/8K/16K = 1x/2x/4x its training window"
        effect = None
        if key:
            ce, reg = paper(f"table6/{key}/ce"), paper(f"table6/{key}/a0.1")
            effect = reg.value - ce.value
            text, grade = f"{ce.value} -> {reg.value} ({effect:+.1f})", reg.grade
        elif evaluate:
            text, grade = "not one of the paper's lengths (expected gain)", "?"
        else:
            text, grade = "beyond the paper's lengths (expected gain)", "?"
        claims.append(Claim(
            f"S5.4.{ident}", section,
            f"CE + {alpha:g} misalign raises BABILong accuracy at {at}", text, grade,
            ours(row), resolve_verdict(row["ci_low"], row["ci_high"], +1, effect),
            f"{rule}; a verdict only when the {interval} excludes 0, else what it rules out: "
            f"{resolution_text(row['ci_low'], row['ci_high'], effect, ' points')}"))
    if not depth.empty:
        by_depth = paired_accuracy(depth, [*groups, "depth"], alpha, level)
        lengths = depth.groupby(groups)["length"].max() if groups else None
        for row in by_depth.to_dict(orient="records"):
            pct_depth = int(round(100 * row["depth"]))
            key = f"depth{pct_depth}"
            effect = None
            if f"table7/ce/{key}" in PAPER:
                ce, reg = paper(f"table7/ce/{key}"), paper(f"table7/a0.1/{key}")
                effect = reg.value - ce.value
                text, grade = f"{ce.value} -> {reg.value} ({effect:+d})", ce.grade
            else:
                text, grade = "not in the paper's table", "?"
            if pct_depth == 0:
                verdict = equivalence_verdict(row["ci_low"], row["ci_high"], 5.0)
                what = "comparable at depth 0 % (early context not ignored)"
                rule = ("comparable = the interval within +-5 points; beyond them: disagrees; "
                        "across a margin: underpowered")
                effect = 5.0
            else:
                verdict = resolve_verdict(row["ci_low"], row["ci_high"], +1, effect)
                what = f"better at depth {pct_depth} %"
                rule = ("agrees = the interval above 0; across 0, held against the paper's "
                        "difference")
            ident, words = _model(row)
            if evaluate:
                length = int(lengths[tuple(row[g] for g in groups)])  # type: ignore[index]
                what = f"{what} ({words}, {length} tokens)"
                rule = f"{rule}; the paper's Table 7 is at 16384 tokens"
            claims.append(Claim(
                f"S5.4.{ident}depth{pct_depth}", section,
                f"QA1 with CE + {alpha:g} misalign: {what}", text, grade, ours(row),
                verdict,  # type: ignore[arg-type]
                f"{rule}; {interval}; "
                f"{resolution_text(row['ci_low'], row['ci_high'], effect, ' points')}"))
    return [c.to_dict() for c in claims]
