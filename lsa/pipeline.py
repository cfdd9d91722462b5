"""Checks on what a pipeline run wrote (used by ``python -m lsa check`` and the tests)."""

from __future__ import annotations

import json

from lsa import paths
from lsa.config import PipelineConfig

VERDICTS = {"agrees", "disagrees", "inconclusive", "not run"}
RUN_INFO_KEYS = {"config", "seed", "git_commit", "packages", "device", "wall_time_s"}


def check_runs(pipe: PipelineConfig) -> list[str]:
    """Problems in the base model's and the fine-tuning runs' folders."""
    import math

    problems: list[str] = []
    profile = pipe.profile
    folders = {"base": pipe.base_run_id()}
    folders.update({r.name: pipe.finetune_run_id(r.name)
                    for r in pipe.settings["finetune"].all_runs()})  # type: ignore[attr-defined]
    folders.update({r.name: pipe.babilong_run_id(r.name)
                    for r in pipe.settings["babilong"].all_runs()})  # type: ignore[attr-defined]
    folders.update({f"babilong-eval_{r.name}": pipe.babilong_eval_run_id(r.name)
                    for r in pipe.babilong_eval_runs()})
    ft = pipe.settings["finetune"]
    for name, run_id in folders.items():
        folder = paths.results_dir(profile) / "runs" / run_id
        try:
            metrics = json.loads((folder / "metrics.json").read_text())
            json.loads((folder / "train_summary.json").read_text())
        except (OSError, ValueError) as exc:
            problems.append(f"run {name}: unfinished or unreadable ({exc})")
            continue
        if name == "base":
            ppl = metrics.get("validation_perplexity", {})
        elif name.startswith(("babilong_", "babilong-eval_")):
            ppl = {}
            rows = metrics.get("accuracy", [])
            if not rows or not all(isinstance(r.get("correct"), bool) for r in rows):
                problems.append(f"run {name}: no BABILong accuracy rows")
        else:
            ppl = metrics.get("perplexity", {})
            wanted = {str(n) for n in ft.eval_lengths(ft.run(name))}  # type: ignore[attr-defined]
            if set(ppl) != wanted:
                problems.append(f"run {name}: perplexity at {sorted(ppl)}, expected "
                                f"{sorted(wanted)}")
            mis = metrics.get("misalignment", {}).get("mean")
            if not isinstance(mis, (int, float)) or not math.isfinite(mis) or mis < 0:
                problems.append(f"run {name}: misalignment metric {mis!r}")
        for length, value in ppl.items():
            if not (isinstance(value.get("ppl"), (int, float)) and math.isfinite(value["ppl"])
                    and value["ppl"] > 1):
                problems.append(f"run {name}: perplexity at {length} is {value.get('ppl')!r}")
        if not (folder / "run_info.json").exists():
            problems.append(f"run {name}: run_info.json missing")
    return problems


def check_outputs(pipe: PipelineConfig) -> list[str]:
    """Every problem found in the outputs of ``pipe.profile``; an empty list means all is well."""
    return check_runs(pipe) + check_sections(pipe)


def check_sections(pipe: PipelineConfig) -> list[str]:
    """Problems in the section notebooks' outputs (metrics, provenance, figures, tables)."""
    import nbformat

    problems: list[str] = []
    profile = pipe.profile
    for key in pipe.sections:
        folder = paths.section_dir(profile, key)
        try:
            metrics = json.loads(paths.metrics_file(profile, key).read_text())
            info = json.loads((folder / "run_info.json").read_text())
        except (OSError, ValueError) as exc:
            problems.append(f"{key}: metrics.json or run_info.json missing or unreadable ({exc})")
            continue
        if info.get("config") != pipe.notebook_parameters(key):
            problems.append(f"{key}: run_info.json config differs from the {profile} profile")
        missing = RUN_INFO_KEYS - set(info)
        if missing:
            problems.append(f"{key}: run_info.json lacks {sorted(missing)}")
        for claim in metrics.get("claims", []):
            if claim.get("verdict") not in VERDICTS:
                problems.append(f"{key}: claim {claim.get('id')} has verdict "
                                f"{claim.get('verdict')!r}")
        for name in metrics.get("figures", []):
            for ext in ("png", "pdf"):
                fig = paths.figures_dir(profile) / f"{name}.{ext}"
                if not fig.exists() or fig.stat().st_size < 1000:
                    problems.append(f"{key}: figure {fig} missing or empty")
        for name in metrics.get("tables", []):
            for ext in ("csv", "md"):
                if not (folder / f"{name}.{ext}").exists():
                    problems.append(f"{key}: table {name}.{ext} missing")
        nb_path = paths.executed_notebook(profile, key)
        try:
            nb = nbformat.read(nb_path, as_version=4)
        except OSError as exc:
            problems.append(f"{key}: executed notebook missing ({exc})")
            continue
        for cell in nb.cells:
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    problems.append(f"{key}: executed notebook has an error: {output.get('ename')}")
    return problems
