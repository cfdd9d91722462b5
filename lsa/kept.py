"""The study's kept blocks (issue 62): finished bases kept in the repository as a published
snapshot keeps its runs, read instead of remade.

``python -m lsa study keep`` copies every complete base of the study's profile that is not
kept yet (its base model and every arm, all finished) into
``docs/results/<profile>/`` (``lsa.published.folder``) with ``lsa.published.add_runs``: each
run's ``metrics.json`` and training log gzipped beside its marker, never weights, every file
with its sha256 in ``MANIFEST.json`` and the commits that made them among its ``run_commits``.
The manifest's ``bases`` record each kept base: its seed, whether G1 and G2 passed, whether
every run is finite, and its run ids. It prints the gates and finiteness only: no outcome is
read before a stage is in (the pre-registration, section 8).

``lsa.runs.RunSet`` reads that manifest (``lsa.runs.read_kept``, without checksums: a plan
must stay cheap):
a kept run's folder is the kept one, whose marker exists, and the pipeline makes no job for it;
the kept bases' gates decide the replacements (``lsa.config.base_plan``). The analysis checks
every kept file against its checksum first (``verify``): a changed one stops it with one line
naming the file.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from lsa import files, published
from lsa.runs import Kept, read_kept

if TYPE_CHECKING:
    from typing import Any

    from lsa.config import PipelineConfig
    from lsa.runs import Run, RunSet

#: the study's section (``lsa.sections.study``), whose published metrics hold its outcome
SECTION = "07_mechanism_study"


def verify(profile: str) -> Kept | None:
    """The kept blocks with every file checked against its checksum
    (``lsa.published.load``: ``SnapshotDamaged``, one line naming the first bad file)."""
    if published.load(profile, published.folder(profile)) is None:
        return None
    return read_kept(profile)


def base_runs(plan: RunSet) -> dict[str, list[Run]]:
    """Each base of the study's plan with its runs: the base model, its probe, then its
    arms."""
    out = {name: [base, *([plan.probes[name]] if name in plan.probes else [])]
           for name, base in plan.bases.items()}
    for row in plan.study:
        out[f"base_s{row['base']}"].append(plan.finetune[row["name"]])
    return out


def keep(pipe: PipelineConfig, plan: RunSet) -> list[str]:
    """Keep every complete base of the study's ``plan`` not kept yet (the module's docstring);
    one line per base: its gates and finiteness, nothing else."""
    from lsa import gates
    from lsa.study import finite_run

    if not pipe.study.enabled:
        raise ValueError(f"profile {pipe.profile} is not a study profile (study.enabled)")
    root = published.folder(pipe.profile)
    manifest_path = root / published.MANIFEST
    lines, records, made = [], {}, []
    for name, runs in base_runs(plan).items():
        if any(r.id in plan.kept for r in runs) or not all(r.finished for r in runs):
            continue
        base = runs[0].metrics()
        l0, g = pipe.pretrain.model.base_window, pipe.gates
        g1 = gates.gate_g1(base, l0, g.g1_min_gain).passed is True
        g2 = gates.gate_g2(base, l0, g.g2_min_loss).passed is True
        l_train = pipe.finetune.l_train
        broken = [r.name for r in runs[1:] if not finite_run(r.metrics(), r.log(),
                                                              pipe.study.outcomes, l_train)]
        records[name] = {"seed": int(name.removeprefix("base_s")), "G1": g1, "G2": g2,
                         "finite": not broken, "runs": [r.id for r in runs],
                         "commits": sorted({run_commit(r) for r in runs}),
                         "time": base_time(pipe, runs)}
        made += runs
        lines.append(f"{name}: G1 {'pass' if g1 else 'fail'}, G2 {'pass' if g2 else 'fail'}, "
                     f"{len(runs) - 1} runs, "
                     + ("every run finite" if not broken else f"not finite: {', '.join(broken)}"))
    if not made:
        return ["no complete base to keep (a base is kept once it and every run of it are "
                "finished)"]
    if not manifest_path.exists():
        for path, record in ((manifest_path, {"files": {}, "bytes": 0}), (root / "stamp.json",
                                                                          {})):
            files.write_json(path, {"profile": pipe.profile, "commit": None,
                                    "run_commits": [], **record})
    by_commit: dict[str, list[Run]] = {}
    for run in made:
        by_commit.setdefault(run_commit(run), []).append(run)
    for commit, runs in by_commit.items():
        published.add_runs(root, runs, {"commit": commit, "note": "study block: "
                                        + ", ".join(records)})
    manifest = files.read_json(manifest_path)
    manifest["bases"] = {**manifest.get("bases", {}), **records}
    files.write_json(manifest_path, manifest)
    files.atomic_write_text(root / PAGE, page(pipe, Kept(root, manifest)))
    return lines


def base_time(pipe: PipelineConfig, runs: list[Run]) -> dict[str, float] | None:
    """What one base took, from its runs' own ``run_info.json`` (each job's ``wall_time_s`` and
    ``finished_utc``): ``start`` and ``end`` (epoch seconds) of its first job's start and its
    last one's end, ``span_s`` between them, and ``core_s``, each job's wall time times the
    threads it holds (``workflow/settings.yaml``): over the cores, the floor of that span
    (``lsa.timings.floor``). None where a run has no such record (a run made before it was
    kept, by a version that wrote none)."""
    import datetime as _dt

    from lsa.pipeline import workflow_settings

    settings, spans, core_s = workflow_settings(), [], 0.0
    for run in runs:
        info = run.folder / "run_info.json"
        record = files.read_json(info) if info.exists() else {}
        wall, end = record.get("wall_time_s"), record.get("finished_utc")
        if wall is None or end is None:
            return None
        finished = _dt.datetime.fromisoformat(end).timestamp()
        spans.append((finished - float(wall), finished))
        core_s += float(wall) * settings.resources(pipe.profile, run.kind).threads
    start, end = min(s for s, _ in spans), max(e for _, e in spans)
    return {"start": round(start, 1), "end": round(end, 1), "span_s": round(end - start, 1),
            "core_s": round(core_s, 1)}


def covered_s(times: list[dict[str, float]]) -> float:
    """The seconds that at least one of ``times`` (``base_time``'s) covers: the bases' spans
    summed where they were made one after another, their union where they overlapped. A record
    without ``start`` counts its ``span_s`` alone."""
    spans = sorted((t["start"], t["end"]) for t in times if "start" in t)
    total, reach = sum(t["span_s"] for t in times if "start" not in t), None
    for start, end in spans:
        if reach is None or start >= reach:
            total, reach = total + end - start, end
        elif end > reach:
            total, reach = total + end - reach, end
    return total


def run_commit(run: Run) -> str:
    """The commit that made ``run`` (its ``run_info.json``), else 'unknown'."""
    info = run.folder / "run_info.json"
    return (files.read_json(info).get("git_commit") if info.exists() else None) or "unknown"


#: the kept blocks' page beside their manifest, rewritten by each ``study keep``
PAGE = "README.md"


def page(pipe: PipelineConfig, kept: Kept) -> str:
    """The kept blocks' page (``PAGE``): how far each stage is, the failed bases and the
    replacements (``lsa.config.base_plan``), and per kept base what ``keep`` prints (its gates,
    whether every run is finite) with the commits that made its runs. No outcome: nothing reads
    them before a stage is in (the pre-registration, section 8)."""
    from lsa.config import base_plan

    cfg, profile = pipe.study, pipe.profile
    done = kept.passed()
    plan = base_plan(cfg, done)

    def seeds(values: list[int]) -> str:
        return ", ".join(map(str, values)) or "none"

    done_judging = judged(status(profile))
    state = ("The study has **judged** its tests (its outcome: [`RESULTS.md`](RESULTS.md)); "
             "its plan is" if done_judging else "The study is **open**; its plan is")
    out = [f"# The confirmatory study: kept blocks (`{profile}`)", "",
           f"Generated by `python -m lsa study keep --profile {profile}` (rewritten at each "
           "keep, and by `make publish` once section 07 has run) from "
           "[`MANIFEST.json`](MANIFEST.json): each kept run's files with their sha256 (no "
           f"weights) and the commits that made them. {state} "
           "[`docs/preregistration.md`](../../preregistration.md), held by "
           "[`docs/study.lock`](../../study.lock).", ""]
    for number, members in enumerate(plan.stages, start=1):
        have = [s for s in members if s in done]
        out.append(f"- **Stage {number}: {len(have)} of {len(members)} bases kept** (seeds "
                   f"{seeds(have)}); to make: {seeds([s for s in members if s not in done])}.")
    out += [f"- Failed G1 or G2: {seeds(plan.failed)}; replacements planned: "
            f"{seeds(plan.replacements)} ({len(plan.replacements)} of at most "
            f"{cfg.max_replacements}, from seed {cfg.replacement_start})."
            + (f" **The study stops**: {plan.reason}." if plan.stopped else ""), "",
            ("" if done_judging else "No outcome is read here: until every base of a stage is in, "
             "nothing reads the study's outcomes (the pre-registration, section 8). ")
            + "Per kept base, what `study keep` printed: the premise gates G1 and G2 (a base "
            "failing either is replaced) and whether every run is finite.", "",
            "| base | seed | G1 | G2 | every run finite | runs | made by | time (min) | "
            "core time (min) |", "|---|---|---|---|---|---|---|---|---|"]
    timed = []
    for name, base in sorted(kept.bases.items(), key=lambda kv: int(kv[1]["seed"])):
        made_by = ", ".join(f"`{c[:7]}`" for c in base.get("commits", [])) or "?"
        record = base.get("time")
        timed += [record] if record else []
        took = (f"{record['span_s'] / 60:.1f} | {record['core_s'] / 60:.1f}" if record
                else "- | -")
        out.append(f"| {name} | {base['seed']} | {'pass' if base['G1'] else 'fail'} | "
                   f"{'pass' if base['G2'] else 'fail'} | {'yes' if base['finite'] else 'no'} "
                   f"| {len(base['runs']) - 1} | {made_by} | {took} |")
    if timed:
        out += ["", f"Time: {len(timed)} of the {len(kept.bases)} kept bases have a record "
                "(from their runs' `run_info.json`, kept in the manifest): they took "
                f"{covered_s(timed) / 60:.1f} min (overlaps counted once), their jobs held "
                f"{sum(t['core_s'] for t in timed) / 60:.1f} core-minutes. A base kept "
                "without a record was kept before `study keep` wrote one (its results folder "
                "is gone)."]
    if not done_judging:
        out += ["", f"The next block: `python -m lsa study run --profile {profile} --bases N` "
                "(the next N bases not kept, base by base), then `python -m lsa study keep "
                f"--profile {profile}`, and commit this folder."]
    return "\n".join([*out, ""])


def judged(found: dict[str, Any] | None) -> bool:
    """Whether the study's state (``status``) holds a published section 07 that has judged its
    tests (a look that stops, or the last stage's analysis)."""
    return bool(found and (found.get("section") or {}).get("judged"))


def status(profile: str = "study") -> dict[str, Any] | None:
    """Where the confirmatory study of ``profile`` stands, for the headline
    (``lsa.headline.study_lines``), from the repository's files and nothing else: ``section``,
    section 07's published metrics (its claims, its look, its bases) once its notebook has run
    on the kept blocks and been published beside them (``sections/<SECTION>/metrics.json``);
    else None for it (the study is open: no outcome is read; the kept blocks' page says how far
    it is, rewritten at each keep); None where nothing is kept."""
    root = published.folder(profile)
    metrics = root / "sections" / SECTION / "metrics.json"
    if files.exists(metrics):
        return {"profile": profile, "section": json.loads(files.read_text(metrics))}
    if not (root / published.MANIFEST).exists():
        return None
    return {"profile": profile, "section": None}
