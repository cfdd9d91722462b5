"""Section 5.4, Tables 6-7: BABILong accuracy by task x length and QA1 by fact depth, CE
against CE + alpha * SCE paired by test prompt, the claims and the axes of the figures."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from lsa.claims import PAPER, Claim, paper
from lsa.config import PipelineConfig
from lsa.data.babi import TASK_LABELS
from lsa.runs import runs_of
from lsa.runtable import loss_label
from lsa.stats import (
    equivalence_verdict,
    paired_proportion_interval,
    resolution_text,
    resolve_verdict,
    threshold_outcome,
    two_level_interval,
    wilson_interval,
)

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
