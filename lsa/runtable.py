"""What the runs wrote, as tables: the one place that reads run folders for the sections.

``RunTables`` is what the section driver (``lsa.sections.drive``) hands a section's pure
``analyse``: each table a section declares (``tables:`` in its ``section.yaml``) read once from
the finished runs of a plan (``lsa.runs.RunSet``) by the reader of that name (``READERS``), so a
section is a function of tables and a test builds them by hand. Beside the readers: the
protocol's numbers of one model (``measured_row``) and the labels and column order every
section's tables use. Reading results imports no torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from lsa.config import PipelineConfig

if TYPE_CHECKING:
    from lsa.runs import RunSet


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
    ``l_train``), the long-window NLL and perplexity (2x and longer, token-weighted), the
    misalignment and its parts (NaN where a run predates them), the CE on the training books
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
    # the stored NLL, token-weighted, read as it is: a logarithm of the perplexity taken again
    # would round differently where numpy's log is vectorised for the CPU (AVX512) or not
    row["nll_long"] = long_nll / long_tokens if long_tokens else math.nan
    row["ppl_long"] = math.exp(row["nll_long"])  # NaN without long windows
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


def collect_runs(pipe: PipelineConfig, plan: RunSet, names: list[str]) -> pd.DataFrame:
    """One row per finished fine-tuning run of ``names`` (in that order): method, alpha, seed,
    the base model's pretraining seed (``base_seed``), setting (``setting_label``),
    perplexities by multiple of the training window, long-window perplexity, misalignment
    metric (``misalignment``: the paper's positions, both contexts >= l_train / 2;
    ``misalignment_all``: every overlap position) and its parts, final training losses,
    training wall time."""
    rows = []
    for name in names:
        run = plan.finetune[name]
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


def curves(plan: RunSet, names: list[str]) -> pd.DataFrame:
    """Training logs of every finished run of ``names``, long format (run, method, alpha,
    seed, setting, step, ...)."""
    frames = []
    for name in names:
        run = plan.finetune[name]
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



# ---------------------------------------------------------------------------------------------
# the readers: one table each, from the finished runs of a plan


def read_longbench(plan: RunSet) -> pd.DataFrame:
    """One row per finished LongBench-E evaluation (``lsa.jobs.longbench_evaluate``): run,
    method, alpha, loss, seed, the score of each length bucket and ``LongBench-E`` (unweighted
    means over datasets)."""
    rows = []
    for name, run in plan.longbench.items():
        if not run.finished:
            continue
        m = run.metrics()
        rows.append({"run": name, "method": m["method"], "alpha": m["alpha"],
                     "loss": loss_label(m["alpha"]), "seed": m["seed"], **m["buckets"],
                     "LongBench-E": m["longbench_e"]})
    return pd.DataFrame(rows)


def read_babilong(plan: RunSet) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-sample rows of every finished BABILong run of the configured design: (accuracy
    grid, depth grid). Train design: the BABILong fine-tuning runs (``multiple`` = length /
    l_train); evaluate design: the evaluations (``plan.babilong_eval``), tagged with
    ``design``, ``finetune_run`` and the evaluated run's ``method`` and ``l_train``."""
    acc: list[dict[str, Any]] = []
    depth: list[dict[str, Any]] = []
    if plan.design == "evaluate":
        seen: dict[tuple, str] = {}
        for run in plan.babilong_eval.values():
            if not run.finished:
                continue
            m = run.metrics()
            tags = {"run": run.name, "design": "evaluate", "finetune_run": m["finetune_run"],
                    "method": m["method"], "l_train": m["l_train"], "alpha": m["alpha"],
                    "loss": loss_label(m["alpha"]), "seed": m["seed"]}
            model = (m["method"], m["l_train"], m["alpha"], m["seed"])
            if model in seen:  # their answers would be pooled and paired as one model's
                raise ValueError(f"BABILong runs {seen[model]} and {run.name} are both "
                                 f"{m['method']} at l_train {m['l_train']}, alpha "
                                 f"{m['alpha']:g}, seed {m['seed']}: list one of them in "
                                 "babilong.finetune_runs")
            seen[model] = run.name
            acc.extend({**tags, **row} for row in m["accuracy"])
            depth.extend({**tags, **row} for row in m["depth"])
        return pd.DataFrame(acc), pd.DataFrame(depth)
    for run in plan.babilong.values():
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


def read_babilong_sources(plan: RunSet) -> dict[str, Any]:
    """Where the finished BABILong runs' data came from. Train design: the bAbI source and
    the training samples per task of the first run; evaluate design: the bAbI source,
    haystack books, prompts file (path, sha256, parts) and greedy tokens (one value when
    every run agrees, else per run) and the fine-tuning run each evaluation read."""
    if plan.design != "evaluate":
        finished = [r for r in plan.babilong.values() if r.finished]
        if not finished:
            return {}
        first = finished[0].metrics()
        return {"babi_source": first["babi_source"], "train_samples": first["train_samples"]}
    metrics = {run.name: run.metrics() for run in plan.babilong_eval.values() if run.finished}
    out: dict[str, Any] = {"design": "evaluate"}
    for key in ("babi_source", "books_source", "prompts", "max_new_tokens"):
        values = {name: m.get(key) for name, m in metrics.items()}
        distinct = {repr(v) for v in values.values()}
        out[key] = next(iter(values.values())) if len(distinct) == 1 else values
    out["evaluated"] = {name: m.get("finetune_run") for name, m in metrics.items()}
    return out


def _trained_on(spec) -> str:
    return "none" if spec is None or spec.alpha == 0 else spec.divergence


def _babilong_accuracy(plan: RunSet) -> dict[tuple[str, str], float]:
    """Mean BABILong accuracy (all tasks and lengths) of each finished BABILong run (train
    design) or evaluation (evaluate design, keyed by the evaluated run)."""
    out = {}
    for kind, runs in (("babilong", plan.babilong), ("babilong-eval", plan.babilong_eval)):
        for name, run in runs.items():
            if run.finished:
                rows = run.metrics().get("accuracy", [])
                if rows:
                    out[(kind, name)] = float(np.mean([r["correct"] for r in rows]))
    return out


def read_models(pipe: PipelineConfig, plan: RunSet) -> pd.DataFrame:
    """Table 1's raw rows, one per finished model measured at ``finetune.l_train``: ``model``,
    ``unit`` (its configuration: method and setting without the seed), ``kind``, ``group``
    (fine-tuning, ablation, probe), method, alpha, seed, setting, ``trained_on`` (none / sce /
    jeffreys / entropy), ``babilong`` (mean accuracy, where it has one), the protocol's
    numbers (``measured_row``) and ``train_loss_logged`` (a run's logged CE at its end). The
    fine-tuning runs first, then the probes (reference models apart: ``read_references``)."""
    ft = pipe.finetune
    grid = set(plan.grid)
    babilong_acc = _babilong_accuracy(plan)
    rows: list[dict[str, Any]] = []
    for name, run in plan.finetune.items():
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
    for name, run in plan.probes.items():
        if not run.finished or "reference" in run.identity:
            continue  # a reference model is measured on its own tokens: not in Table 1
        rope = run.identity["rope"]
        source = run.needs[0]
        kind = ("base + RoPE, no fine-tuning" if rope else "base model" if source is plan.base
                and run.identity["model"] == plan.base.id else
                "BABILong run" if source is not plan.base else "hub model")
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
    return pd.DataFrame(rows)


def audit_models(method: str) -> list[str]:
    """The models whose last-position samples Table 1's audit 3 bins (the base model, the
    ablation method's CE-only and SCE 0.1 runs of seed 0, the base model under its RoPE x2)."""
    return ["base", f"{method}_a0_s0", f"{method}_a0.1_s0", f"base_{method}_x2"]


def beyond_window(pipe: PipelineConfig) -> frozenset[str]:
    """The models of ``audit_models`` measured beyond the window they were trained at: the base
    model without a RoPE setting, at ``l_train`` when that exceeds its ``base_window``."""
    over = pipe.finetune.l_train > pipe.pretrain.model.base_window
    return frozenset({"base"} if over else set())


def read_last_positions(pipe: PipelineConfig, plan: RunSet) -> pd.DataFrame:
    """The last-position samples (``l_extra``, ``top1_change``, ``tv``) of each finished model
    of ``audit_models``, tagged with ``model``, in that order."""
    by_name = {**plan.finetune, **{f"probe:{k}": v for k, v in plan.probes.items()}}
    frames = []
    for model in audit_models(pipe.ablation.method):
        run = by_name.get(model) or by_name.get(f"probe:{model}")
        if run is None or not run.finished:
            continue
        samples = pd.DataFrame(run.metrics().get("last_position", []))
        if len(samples):
            frames.append(samples.assign(model=model))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


#: the parts of the misalignment a reference model reports, with their standard errors
REFERENCE_PARTS = ("misalignment", "jeffreys", "entropy", "top1_change")


def read_references(plan: RunSet) -> pd.DataFrame:
    """One row per finished reference model (a model trained as the paper's were, measured on
    its own tokens): ``model``, ``window`` and each part of ``REFERENCE_PARTS`` with its
    standard error (``<part>_se``)."""
    rows = []
    for run in plan.probes.values():
        if "reference" in run.identity and run.finished:
            m = run.metrics()
            rows.append({"model": run.identity["model"], "window": m["window"],
                         **{c: m[c]["mean"] for c in REFERENCE_PARTS},
                         **{f"{c}_se": m[c]["stderr"] for c in REFERENCE_PARTS}})
    return pd.DataFrame(rows)


def read_base_gains(pipe: PipelineConfig, plan: RunSet) -> pd.DataFrame:
    """Each finished base model's far-copy gain at its window (gate G1's number, computed by
    ``lsa.gates.gate_g1``) with its 95 % interval: ``base``, ``value``, ``low``, ``high``."""
    from lsa.gates import gate_g1

    rows = []
    for name, base in plan.bases.items():
        if base.finished:
            g = gate_g1(base.metrics(), pipe.pretrain.model.base_window, pipe.gates.g1_min_gain)
            if g.passed is not None:
                rows.append({"base": name, "value": g.value, "low": g.low, "high": g.high})
    return pd.DataFrame(rows, columns=["base", "value", "low", "high"])


@dataclass
class RunTables:
    """The tables a section's ``analyse`` reads, each read once from the finished runs by the
    driver (``read_tables``) or built by hand in a test; a table the section does not declare
    stays None. ``names``: the plan's run names of each group (``grid``, ``ablation``,
    ``babilong_eval``, ``longbench``), so a section selects runs without the plan."""

    grid: pd.DataFrame | None = None          # collect_runs over the Section 5.1-5.2 grid
    base_factor: pd.DataFrame | None = None   # its paper comparisons on every base model
    curves: pd.DataFrame | None = None        # the grid's training logs
    longbench: pd.DataFrame | None = None     # read_longbench
    ablation: pd.DataFrame | None = None      # collect_runs over Section 5.3's runs
    base_gains: pd.DataFrame | None = None    # read_base_gains
    babilong_accuracy: pd.DataFrame | None = None  # read_babilong, the accuracy grid
    babilong_depth: pd.DataFrame | None = None     # read_babilong, the depth grid
    babilong_sources: dict[str, Any] | None = None  # read_babilong_sources
    models: pd.DataFrame | None = None        # read_models (Table 1's raw rows)
    last_positions: pd.DataFrame | None = None  # read_last_positions (audit 3)
    references: pd.DataFrame | None = None    # read_references
    synthetic: pd.DataFrame | None = None     # read_synthetic (Section 3's grid)
    sections: dict[str, dict[str, Any]] | None = None  # read_sections (the report's inputs)
    study: dict[str, Any] | None = None       # read_study (the confirmatory study)
    names: dict[str, list[str]] = field(default_factory=dict)

    def need(self, *tables: str) -> None:
        """Fail naming the tables a section reads that were not read for it."""
        missing = [t for t in tables if getattr(self, t) is None]
        if missing:
            raise ValueError(f"run tables {missing} were not read: declare them under "
                             "`tables:` in the section's section.yaml")


def read_synthetic(plan: RunSet) -> pd.DataFrame:
    """Section 3's grid (its run, ``lsa.synthetic.make``): one row per (model, test length)."""
    return pd.DataFrame.from_records(plan.get("synthetic", "synthetic").metrics()["per_length"])


def _babilong(pipe: PipelineConfig, plan: RunSet) -> dict[str, Any]:
    accuracy, depth = read_babilong(plan)
    return {"babilong_accuracy": accuracy, "babilong_depth": depth,
            "babilong_sources": read_babilong_sources(plan)}


#: what a section declares under ``tables:`` and how each is read: (pipe, plan) -> the
#: ``RunTables`` fields it fills
READERS: dict[str, Callable[[PipelineConfig, RunSet], dict[str, Any]]] = {
    "grid": lambda pipe, plan: {"grid": collect_runs(pipe, plan, plan.grid)},
    "base_factor": lambda pipe, plan: {"base_factor": collect_runs(pipe, plan,
                                                                   plan.base_factor)},
    "curves": lambda pipe, plan: {"curves": curves(plan, plan.grid)},
    "longbench": lambda pipe, plan: {"longbench": read_longbench(plan)},
    "ablation": lambda pipe, plan: {"ablation": collect_runs(pipe, plan, plan.ablation)},
    "base_gains": lambda pipe, plan: {"base_gains": read_base_gains(pipe, plan)},
    "babilong": _babilong,
    "models": lambda pipe, plan: {"models": read_models(pipe, plan)},
    "last_positions": lambda pipe, plan: {"last_positions": read_last_positions(pipe, plan)},
    "references": lambda pipe, plan: {"references": read_references(plan)},
    "synthetic": lambda pipe, plan: {"synthetic": read_synthetic(plan)},
    "sections": lambda pipe, plan: {"sections": read_sections(pipe, plan)},
    "study": lambda pipe, plan: {"study": read_study(pipe, plan)},
}


def _study_row(run, values: dict[str, Any], pipe: PipelineConfig) -> dict[str, Any]:
    """One finished study (or pilot) run as ``lsa.study``'s ``runs`` table has it."""
    from lsa.study import finite_run, outcome

    m, log, l_train = run.metrics(), run.log(), pipe.finetune.l_train
    outcomes = pipe.study.outcomes
    return {**values, **{k: outcome(m, where, l_train) for k, where in outcomes.items()},
            "ppl1": (m["perplexity"].get(str(l_train)) or {}).get("ppl", math.nan),
            "finite": finite_run(m, log, outcomes, l_train)}


def _pilot(pipe: PipelineConfig) -> pd.DataFrame | None:
    """The pilot's runs of the study's arms (``study.pilot_profile``'s published snapshot,
    checked against its manifest), as ``lsa.study``'s ``runs`` table: each finished run of
    its plan whose settings are an arm's on one of the study's methods."""
    from lsa import published
    from lsa.config import load_config
    from lsa.runs import RunSet

    st = pipe.study
    snapshot = published.load(st.pilot_profile) if st.pilot_profile else None
    if snapshot is None:
        return None
    other = load_config(profile=st.pilot_profile)
    plan = RunSet(other, root=snapshot.runs)
    arms = {(a.alpha, a.divergence if a.alpha else "sce", a.ce_on, a.stream): a for a in st.arms}
    rows = []
    for run in plan.finetune.values():
        s = run.spec
        arm = arms.get((s.alpha, s.divergence, s.ce_on, s.stream))
        if (arm is None or s.method not in arm.methods or s.steps is not None
                or s.l_extra_setting != 1 or not run.finished):
            continue
        base = other.pretrain.seed if s.base_seed is None else s.base_seed
        rows.append(_study_row(run, {"base": base, "method": s.method, "arm": arm.name,
                                     "seed": s.seed}, other))
    return pd.DataFrame(rows)


def read_study(pipe: PipelineConfig, plan: RunSet) -> dict[str, Any] | None:
    """The confirmatory study's tables (``lsa.study``'s module docstring): ``runs`` (each
    finished study run), ``bases`` (each planned base: its stage, whether it is complete, G1
    and G2, the far-copy gain, its perplexity at ``l_train`` as its own run measures it),
    ``g3`` (``lsa.gates.gate_g3`` per method pooled over the complete bases that pass G1 and
    G2: their copy probes averaged per probe, each base's CE-only run a unit), ``pilot`` (the
    pilot's runs, or None) and ``kept`` (how many runs are read from kept blocks). Every kept
    file is checked against its checksum first (``lsa.kept.verify``). None for a profile that
    is not the study's."""
    from lsa import gates, kept
    from lsa.config import base_plan
    from lsa.study import pooled_base

    st, g = pipe.study, pipe.gates
    if not st.enabled:
        return None
    l0, l_train = pipe.pretrain.model.base_window, pipe.finetune.l_train
    if plan.kept:
        kept.verify(pipe.profile)
    runs = pd.DataFrame([_study_row(plan.finetune[r["name"]],
                                    {k: r[k] for k in ("base", "method", "arm", "seed")}, pipe)
                         for r in plan.study if plan.finetune[r["name"]].finished],
                        columns=["base", "method", "arm", "seed", *st.outcomes, "ppl1",
                                 "finite"])
    finished = {r["name"]: plan.finetune[r["name"]].finished for r in plan.study}
    metrics: dict[int, dict[str, Any]] = {}
    rows = []
    for name, base in plan.bases.items():
        seed = int(name.removeprefix("base_s"))
        m = metrics[seed] = base.metrics() if base.finished else {}
        g1, g2 = gates.gate_g1(m, l0, g.g1_min_gain), gates.gate_g2(m, l0, g.g2_min_loss)
        probe = plan.probes.get(name)  # the base measured as the fine-tuning runs are
        ppl = (probe.metrics().get("perplexity", {}) if probe is not None and probe.finished
               else {})
        rows.append({"base": seed, "complete": base.finished and all(
                         finished[r["name"]] for r in plan.study if r["base"] == seed)
                     and (probe is None or probe.finished),
                     "g1": g1.passed if base.finished else None,
                     "g2": g2.passed if base.finished else None, "g1_gain": g1.value,
                     "base_ppl1": (ppl.get(str(l_train)) or {}).get("ppl", math.nan),
                     "base_nll4": (ppl.get(str(4 * l_train)) or {}).get("nll", math.nan)})
    bases = pd.DataFrame(rows)
    passed = {r["base"]: r["g1"] is True and r["g2"] is True for r in rows
              if r["g1"] is not None}
    stages = base_plan(st, passed).stages
    bases["stage"] = bases["base"].map({s: k for k, members in enumerate(stages, 1)
                                        for s in members})
    good = [r["base"] for r in rows if r["complete"] and passed.get(r["base"])]
    g3 = {}
    for method in st.methods:
        ce = [plan.finetune[r["name"]].metrics() for r in plan.study
              if r["base"] in good and r["method"] == method and r["arm"] == "ce_a"
              and r["seed"] == r["base"]]
        g3[method] = gates.gate_g3(method, pooled_base([metrics[b] for b in good]) if good
                                   else {}, ce, [], l0, l_train, g.g3_min_recovery,
                                   g.g3_min_room, g.bootstrap, pipe.seed)
    return {"runs": runs, "bases": bases, "g3": g3, "pilot": _pilot(pipe),
            "kept": len(plan.kept)}


def read_tables(pipe: PipelineConfig, plan: RunSet, tables: list[str]) -> RunTables:
    """The ``tables`` of ``pipe``'s finished runs (``READERS``), once each, with the plan's
    run names."""
    unknown = sorted(set(tables) - set(READERS))
    if unknown:
        raise ValueError(f"run tables {unknown}: known are {', '.join(READERS)}")
    read: dict[str, Any] = {}
    for name in tables:
        read.update(READERS[name](pipe, plan))
    names = {"grid": list(plan.grid), "base_factor": list(plan.base_factor),
             "ablation": list(plan.ablation),
             "babilong_eval": list(plan.babilong_eval), "longbench": list(plan.longbench)}
    return RunTables(**read, names=names)


def read_sections(pipe: PipelineConfig, plan: RunSet) -> dict[str, dict[str, Any]]:
    """The report's inputs: each section of ``report.sections`` that has results, by key, with
    its ``metrics.json`` (``metrics``) and ``run_info.json`` (``run_info``), in that order:
    the profile's, or a published snapshot's where the plan reads one (``lsa.published``) and
    the snapshot is not being rendered again (then the sections just rendered)."""
    import json

    from lsa import files, paths, published

    out = {}
    for key in pipe.report.sections:
        folder = (plan.root.parent / "sections" / key
                  if plan.root is not None and not published.rerendering()
                  else paths.section_dir(pipe.profile, key))
        if files.exists(folder / "metrics.json"):
            out[key] = {"metrics": json.loads(files.read_text(folder / "metrics.json")),
                        "run_info": files.read_json(folder / "run_info.json")}
    return out
