"""lsa.timings (the pipeline's own measurements, summed) and lsa.publish (the snapshot)."""

import base64
import json
import os
import re
import time

import nbformat
import pytest
from support import ROOT

from lsa import files, paths, publish, published, timings

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _bench(profile, job, seconds, cpu=None):
    path = timings.logs_dir(profile) / "benchmarks" / f"{job}.tsv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + f"{seconds}\t0:00:00\t100.5\t0\t0\t0\t0\t0\t0\t{cpu or seconds}\n")
    return path


def _run_folder(profile, name, train_s, total_s):
    folder = paths.results_dir(profile) / "runs" / name
    files.write_json(folder / "train_summary.json", {"wall_time_s": train_s})
    files.write_json(folder / "run_info.json", {"wall_time_s": total_s})


def test_breakdown_sums_jobs_and_splits_training_from_evaluation(out_root):
    _bench("smoke", "base_model", 60)
    _bench("smoke", "finetune_pi_a0_s0", 90)
    _bench("smoke", "finetune_pi_a0.1_s0", 150)
    _bench("smoke", "section_03_regularized_finetuning", 12)
    _run_folder("smoke", "base-abc", 50, 58)
    _run_folder("smoke", "pi_a0_s0-123", 70, 88)
    _run_folder("smoke", "pi_a0.1_s0-456", 120, 148)
    rows = {r["kind"]: r for r in timings.breakdown("smoke")}
    ft = rows["fine-tuning run"]
    assert ft["jobs"] == 2 and ft["wall_s"] == 240 and ft["mean_wall_s"] == 120
    assert ft["train_s"] == 190 and ft["evaluation_s"] == pytest.approx(46)
    assert rows["base model"]["train_s"] == 50 and rows["base model"]["evaluation_s"] == 8
    assert rows["notebook"]["jobs"] == 1 and rows["notebook"]["train_s"] == 0
    table = timings.markdown("smoke")
    assert "| all jobs | 4 | 5.2 |" in table  # 312 s
    # a profile sharing the runs folder (mini-full beside mini) counts only its own runs
    _run_folder("smoke", "pi_a0.5_s0-789", 1000, 1200)
    assert timings.breakdown("smoke")[1]["train_s"] == 1190
    own = {r["kind"]: r for r in timings.breakdown("smoke", {"pi_a0_s0-123", "pi_a0.1_s0-456",
                                                             "base-abc"})}
    assert own["fine-tuning run"]["train_s"] == 190 and own["base model"]["train_s"] == 50


def test_further_base_models_and_the_reference_model_have_their_own_rows():
    assert timings.kind_of("base_model_base_s1") == "base model"
    assert timings.kind_of("base_s1-9f2e", folder=True) == "base model"  # not a fine-tuning run
    assert timings.kind_of("probe_ref_smollm2") == "reference model (decomposition)"
    assert timings.kind_of("probe_ref_smollm2-318a", folder=True) == \
        "reference model (decomposition)"
    assert timings.kind_of("probe_base_pi_x2") == "probe (Table 1 population)"
    assert timings.kind_of("pi_a0_s0_b1-77aa", folder=True) == "fine-tuning run"


def test_reproduce_is_recorded_only_when_jobs_ran(out_root):
    started = time.time()
    old = _bench("smoke", "base_model", 60)
    os.utime(old, (started - 100, started - 100))
    assert timings.record_reproduce("smoke", started, "2") is None  # a no-op rerun
    assert not timings.reproduce_file("smoke").exists()
    _bench("smoke", "finetune_pi_a0_s0", 90)
    timings.record_reproduce("smoke", started - 30, "2")
    rec = files.read_json(timings.reproduce_file("smoke"))
    assert rec["jobs_run"] == 1 and rec["cores"] == "2" and rec["wall_s"] >= 30
    # the floor: the core time the jobs held, base_model 60 s x 2 threads + 90 s x 1 (the
    # thread counts of workflow/settings.yaml), over the cores
    assert rec["jobs_core_s"] == 210 and rec["floor_s"] == 105
    assert rec["packages"]["torch"] == files.installed_versions()["torch"]


def test_floor_is_the_core_time_the_jobs_held_over_the_cores(out_root):
    assert timings.floor("smoke") is None  # nothing measured
    _bench("smoke", "base_model", 60, cpu=100)        # 2 threads
    _bench("smoke", "finetune_pi_a0_s0", 90, cpu=50)  # 1 thread
    _bench("smoke", "section_01_synthetic_study", 30, cpu=55)  # 1 thread
    _bench("smoke", "resolved_config", 1)             # a light job: 1
    assert timings.floor("smoke", "2") == {"core_s": 241, "cpu_s": 206, "cores": 2,
                                           "floor_s": 120.5}
    assert timings.floor("smoke", "1")["core_s"] == 181  # no job holds more cores than there are
    assert timings.floor("smoke", "all")["cores"] == os.cpu_count()
    files.write_json(timings.reproduce_file("smoke"), {"wall_s": 271.0, "cores": "2"})
    assert ("Floor of the makespan (the core time the jobs held, wall x threads, 4.0 min, over 2 "
            "cores): 2.0 min; makespan / floor: 2.25.") in timings.markdown("smoke")


def _fake_outputs(profile):
    report = paths.section_dir(profile, publish.REPORT)
    files.atomic_write_text(report / "claims.md", "| id | verdict |\n")
    files.atomic_write_text(report / "claims.csv",
                            "id,section,kind,claim,paper,grade,ours,verdict,evidence\n"
                            "T1.1,Sec. 4.1,paper,c,p,A,o,agrees,e\n"
                            "A1.1,Sec. 5.3,control,d,-,?,o,helps,e\n"
                            "A1.2,Sec. 5.3,control,f,-,?,o,helps,e\n")
    files.write_json(report / "run_info.json", {"git_commit": "abc123"})
    files.write_json(report / "metrics.json", {"gates": [
        {"gate": "G1", "question": "q", "value": 1.0, "low": 0.8, "high": 1.2,
         "threshold": 0.5, "passed": True, "detail": "d"}]})
    figs = paths.figures_dir(profile)
    figs.mkdir(parents=True)
    (figs / "fig_a.png").write_bytes(b"\x89PNG fake")
    (figs / "fig_a.pdf").write_bytes(b"%PDF fake")
    gallery = nbformat.v4.new_code_cell("gallery", metadata={
        "execution": {"iopub.execute_input": "2026-11-30T00:00:01"},
        "papermill": {"duration": 1.5}}, outputs=[
        nbformat.v4.new_output("display_data", {"image/png": base64.b64encode(
            b"\x89PNG fake").decode()}),   # a saved figure
        nbformat.v4.new_output("display_data", {"image/png": base64.b64encode(
            b"\x89PNG inline only").decode()})])
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Title here"),
                                         gallery])
    nbdir = paths.results_dir(profile) / "notebooks"
    nbdir.mkdir(parents=True)
    nbformat.write(nb, nbdir / f"{publish.REPORT}.ipynb")
    _bench(profile, "section_06_replication_report", 3)
    files.write_json(timings.reproduce_file(profile), {
        "wall_s": 1500.0, "cores": "2",
        "finished_utc": "2026-11-30T00:00:00", "packages": {"torch": "9.9.9", "zlib-x": "1"}})


def test_publish_refuses_outputs_that_fail_their_checks(out_root, tmp_path):
    with pytest.raises(publish.NotPublishable, match="fails its checks"):
        publish.publish("smoke", dest=tmp_path / "pub")


def test_publish_needs_the_record_of_make_reproduce(out_root, tmp_path, monkeypatch):
    monkeypatch.setattr("lsa.pipeline.check_outputs", lambda pipe: [])
    _fake_outputs("smoke")
    timings.reproduce_file("smoke").unlink()
    with pytest.raises(publish.NotPublishable, match="make reproduce"):
        publish.publish("smoke", dest=tmp_path / "pub")


def test_publish_copies_claims_pngs_and_notebooks_and_stamps_them(out_root, tmp_path, monkeypatch):
    monkeypatch.setattr("lsa.pipeline.check_outputs", lambda pipe: [])
    _fake_outputs("smoke")
    dest = tmp_path / "pub"
    dest.mkdir()
    (dest / "stale.png").write_text("from an older snapshot")
    (dest / "claims.csv").write_text("id,section,kind,claim,paper,grade,ours,verdict,evidence\n"
                                     "T1.1,Sec. 4.1,paper,c,p,A,o,disagrees,e\n"
                                     "A1.1,Sec. 5.3,paper,d,-,?,o,agrees,e\n"
                                     "T1.9,Sec. 4.1,paper,c,p,A,o,agrees,e\n"
                                     "A1.2,Sec. 5.3,paper,e,-,?,o,agrees,e\n")
    publish.publish("smoke", dest=dest)
    assert sorted(p.name for p in dest.iterdir()) == [
        "MANIFEST.json", "RESULTS.md", "STAMP.md", "claims.csv", "claims.md", "figures",
        "gates.json", "notebooks", "sections", "stamp.json"]
    # what a notebook run alone reads (no run finished here: the report's section files), each
    # file with its checksum; the index of every snapshot beside them
    manifest = json.loads((dest / "MANIFEST.json").read_text())
    assert sorted(manifest["files"]) == [f"sections/{publish.REPORT}/metrics.json.gz",
                                         f"sections/{publish.REPORT}/run_info.json"]
    assert published.load("smoke", dest).manifest == manifest
    index = (dest.parent / "README.md").read_text()
    assert "## `pub`" in index and \
        "**1 claims of the paper, as it ran them, judged on an interval**" in index
    results = (dest / "RESULTS.md").read_text()
    assert re.search(r"\| G1 +\| q +\| 1 \[0\.8, 1\.2\] +\| >= 0\.5 +\| pass +\|", results)
    counts = ("**1 claims of the paper, as it ran them, judged on an interval**: 1 agrees, "
              "0 agrees in direction, smaller than the paper's effect, "
              "0 agrees, larger than the paper's effect, "
              "0 agrees in direction; the paper gives no size, 0 disagrees, "
              "0 smaller than the paper's effect, 0 underpowered, 0 inconclusive, "
              "0 premise not met, 0 not run; "
              "**2 of the project's controls and audits (not verdicts on the paper)**: 2 helps")
    assert counts in results
    # what moved: against the claims.csv of the snapshot it replaced
    assert "verdicts changed (2): T1.1 disagrees -> agrees, A1.1 agrees -> helps" in results
    assert "kinds changed (1): A1.1 paper -> control" in results
    assert "claims added (0): none" in results and "claims gone (1): T1.9" in results
    # an id whose claim text changed names another comparison: listed apart, not compared
    assert "claims redefined (1; the same id, another claim, verdicts not compared): A1.2" \
        in results and "A1.2 agrees ->" not in results
    # the paper's claims and the project's controls in tables of their own, the paper's first
    paper_at, controls_at = (results.index("## The paper's claims"),
                             results.index("## The project's controls and audits"))
    assert paper_at < results.index("| T1.1") < controls_at < results.index("| A1.1")
    assert [p.name for p in (dest / "figures").iterdir()] == ["fig_a.png"]  # PNG only
    # the executed notebook as .ipynb (GitHub renders it), outputs kept, timing metadata gone
    (copied,) = (dest / "notebooks").iterdir()
    assert copied.name == f"{publish.REPORT}.ipynb"
    node = nbformat.read(copied, as_version=4)
    assert node.cells[0].source == "# Title here"
    saved, inline = node.cells[1].outputs  # a saved figure: linked, not embedded again
    assert "image/png" not in saved["data"]
    assert saved["data"]["text/markdown"] == "![fig_a.png](../figures/fig_a.png)"
    assert inline["data"]["image/png"] == base64.b64encode(b"\x89PNG inline only").decode()
    assert "execution" not in node.cells[1].metadata and "papermill" not in node.cells[1].metadata
    stamp = json.loads((dest / "stamp.json").read_text())
    assert stamp["commit"] == "abc123" and stamp["reproduce"]["wall_s"] == 1500.0
    assert stamp["machine"]["cpu_count"] == os.cpu_count()
    # the environment recorded by make reproduce, lifted out of its record
    assert stamp["packages"] == {"torch": "9.9.9", "zlib-x": "1"}
    assert stamp["packages_recorded_by"] == "make reproduce"
    assert "packages" not in stamp["reproduce"]
    text = (dest / "STAMP.md").read_text()
    # the floor from the benchmark files _fake_outputs wrote: the report notebook, 3 s x 1 thread
    assert "25.0 min" in text and "floor 0.0 min" in text and "makespan / floor 1000.00" in text
    assert "torch 9.9.9" in text and "transformers -" in text


def test_published_files_carry_no_path_of_the_machine_that_made_them(tmp_path, monkeypatch):
    """Paths under the clone or the output root become repository-relative, under the home
    ``~/...``; a snapshot's notebooks and the GPU check's records are scrubbed in place (valid
    JSON, every other byte the same; a file its MANIFEST lists gets its new checksum)."""
    monkeypatch.setattr(publish.Path, "home", classmethod(lambda cls: publish.Path("/home/ann")))
    text = ("wrote /work/run/results/mini/04_ablations/metrics.json\n"
            "File /srv/clone/lsa/jobs.py, /home/ann/cache/x, /work/run2/data/longbench, "
            "ratio 1/2, /usr/bin/env")
    assert publish.machine_roots(text) == {"/work/run", "/srv/clone", "/work/run2"}
    assert publish.portable_paths(text, ["/work/run", "/srv/clone/", "/work/run2"]) == (
        "wrote results/mini/04_ablations/metrics.json\n"
        "File lsa/jobs.py, ~/cache/x, data/longbench, ratio 1/2, /usr/bin/env")
    root = tmp_path / "results"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("save()", outputs=[nbformat.v4.new_output(
        "stream", name="stdout", text="ppl 12.25\nwrote /work/mini_run/results/mini/x.json\n")])]
    (root / "mini" / "notebooks").mkdir(parents=True)
    (root / "mini" / "notebooks" / "a.ipynb").write_text(nbformat.writes(nb))
    (root / "gpu_check").mkdir()
    record = {"error": 'File "/work/main/scripts/gpu_check.py", line 2', "tflops": 412.5}
    (root / "gpu_check" / "run1.json").write_text(json.dumps(record, indent=1))
    (root / "gpu_check" / "README.md").write_text("nothing here: /work/x/y\n")
    manifest = {"profile": "mini", "bytes": 0, "files": {"notebooks/a.ipynb": {}}}
    files.write_json(root / "mini" / published.MANIFEST, manifest)
    changed = publish.scrub_published(root)
    assert [p.name for p in changed] == ["run1.json", "a.ipynb"]
    out = nbformat.reads((root / "mini" / "notebooks" / "a.ipynb").read_text(), as_version=4)
    assert out.cells[0].outputs[0].text == "ppl 12.25\nwrote results/mini/x.json\n"
    assert json.loads((root / "gpu_check" / "run1.json").read_text()) == {
        "error": 'File "scripts/gpu_check.py", line 2', "tflops": 412.5}
    assert (root / "gpu_check" / "README.md").read_text() == "nothing here: /work/x/y\n"
    listed = files.read_json(root / "mini" / published.MANIFEST)
    entry = listed["files"]["notebooks/a.ipynb"]
    assert entry["sha256"] == published.sha256(root / "mini" / "notebooks" / "a.ipynb")
    assert listed["bytes"] == entry["bytes"] == (root / "mini" / "notebooks" / "a.ipynb"
                                                 ).stat().st_size
    assert publish.scrub_published(root) == []  # nothing left


def test_no_published_file_names_a_home_or_build_machine():
    folder = paths.ROOT / "docs" / "results"
    for path in folder.rglob("*"):
        if path.is_file() and path.suffix in (".ipynb", ".json", ".md", ".csv"):
            found = re.findall(r"(?:/work/|/root/|/home/|/tmp/|/Users/)\S*", path.read_text())
            assert not found, (path, found[:3])


def test_every_run_kind_has_its_jobs_threads():
    """Each kind of run's jobs are known by their name's prefix (the threads they asked for)."""
    from lsa.runs import KINDS
    from lsa.timings import RUN_JOBS

    assert {kind for _, kind in RUN_JOBS} == set(KINDS)


def test_a_snapshot_names_every_commit_that_made_its_runs(tmp_path):
    """Provenance (issue 61): the commits in the runs' run_info.json, counted, most first,
    beside the commit the notebooks ran at, in STAMP.md's, RESULTS.md's and the index's
    words and in the first line a notebook prints on a snapshot."""
    import types

    from lsa.files import write_json

    runs = []
    for i, commit in enumerate(["bbb2222", "aaa1111", "bbb2222", None]):
        folder = tmp_path / f"r{i}"
        folder.mkdir()
        if commit:
            write_json(folder / "run_info.json", {"git_commit": commit})
        runs.append(types.SimpleNamespace(folder=folder))
    made = published.run_commits(runs)
    assert made == [{"commit": "bbb2222", "runs": 2}, {"commit": "aaa1111", "runs": 1},
                    {"commit": "unknown", "runs": 1}]
    stamp = {"commit": "ccc3333dddd", "run_commits": made}
    assert publish.provenance(stamp) == ("runs made by `bbb2222` (2 runs), `aaa1111` (1 run), "
                                         "`unknown` (1 run); notebooks ran at `ccc3333`")
    snapshot = published.Snapshot(tmp_path, {"profile": "mini", "commit": "ccc3333dddd",
                                             "run_commits": made, "files": {}})
    assert "notebooks at `ccc3333`, runs made by `bbb2222`, `aaa1111`, `unknown`" \
        in snapshot.describe()
    # the published snapshots name theirs: each republished whole by one make reproduce in one
    # clean clone (mini-full's last segment after a commit that turned on its new runs)
    for profile, commits in (("mini", ["84eb727"]), ("mini-full", ["84eb727", "904e95c"])):
        root = ROOT / "docs" / "results" / profile
        stamp = json.loads((root / "stamp.json").read_text())
        assert [r["commit"][:7] for r in stamp["run_commits"]] == commits
        assert json.loads((root / "MANIFEST.json").read_text())["run_commits"] == \
            stamp["run_commits"]
        line = publish.provenance(stamp)
        assert line in (root / "STAMP.md").read_text() and line in (root / "RESULTS.md"
                                                                     ).read_text()
        assert line.capitalize() in (root.parent / "README.md").read_text()


def test_a_profile_that_holds_more_names_the_verdicts_it_reads_otherwise(tmp_path):
    """mini's page lists each claim that the published mini-full (mini's settings on more seeds
    and base models) judges otherwise, matched by its text and method (the ids differ); a claim
    alone in one profile, or with the same verdict, is not listed; no mini-full, no part."""
    import pandas as pd

    from lsa.claims import claims_table

    header = "id,section,kind,origin,method,claim,paper,grade,ours,verdict,evidence\n"
    mini, full = tmp_path / "mini", tmp_path / "mini-full"
    mini.mkdir()
    (mini / "claims.csv").write_text(header + "A1.11,s,control,control,eabf,Jeffreys 1 vs CE,"
                                     "-,?,o,helps,e\nA1.2,s,control,control,eabf,SCE 0.1 vs CE,"
                                     "-,?,o,unclear,e\nT1.1,s,paper,paper,,r < 0,p,A,o,agrees,e\n")
    claims = claims_table(pd.read_csv(mini / "claims.csv").to_dict(orient="records"))
    assert publish.superseded(mini, claims) == []
    full.mkdir()
    (full / "claims.csv").write_text(header + "A1.36,s,control,control,eabf,Jeffreys 1 vs CE,"
                                     "-,?,o,unclear,e\nA1.12,s,control,control,pi,SCE 0.1 vs CE,"
                                     "-,?,o,hurts,e\nT1.1,s,paper,paper,,r < 0,p,A,o,agrees,e\n")
    lines = publish.superseded(mini, claims)
    assert lines[0] == "## What `mini-full` reads otherwise"
    assert "Of the 2 claims both make" in lines[2] and "1 read otherwise there:" in lines[2]
    assert lines[4:] == ["- A1.11 Jeffreys 1 vs CE: **helps** here, **unclear** in `mini-full` "
                         "(A1.36)", ""]


def test_a_page_rendered_again_keeps_what_moved_as_it_was():
    """``lsa publish --results-only`` renders RESULTS.md again from the snapshot's files; the
    comparison with the previous snapshot (made at publishing, against files gone since) is
    kept word for word, everything else is the new rendering."""
    moved, claims = f"{publish.MOVED}\n\n", "\n## Claims\n"
    old = f"# R\n\nold headline\n\n{moved}- verdicts changed (2): x, y\n{claims}old\n"
    new = f"# R\n\nnew headline\n\n{moved}No previous snapshot.\n{claims}new\n"
    assert publish.keep_moved(old, new) == (
        f"# R\n\nnew headline\n\n{moved}- verdicts changed (2): x, y\n{claims}new\n")
    assert publish.keep_moved("no such part", new) == new


def test_a_snapshot_counts_the_kernels_its_runs_ran_on(tmp_path):
    """Issue 73, item 2: stamp.json records the runs' CPU kernels (each run_info.json's ATen
    capability and kernel pin) apart from the publishing machine; a run made before the pin
    was recorded counts as native, one without a record as unknown."""
    import types

    from lsa.files import write_json

    pinned = {"cpu_capability": "AVX2", "kernel_pin": {"state": "pinned"}}
    infos = [{"device": pinned}, {"device": {"cpu_capability": "AVX512"}}, {"device": pinned},
             None]
    runs = []
    for i, info in enumerate(infos):
        folder = tmp_path / f"r{i}"
        folder.mkdir()
        if info:
            write_json(folder / "run_info.json", info)
        runs.append(types.SimpleNamespace(folder=folder))
    assert published.run_kernels(runs) == [{"kernels": "AVX2 (pinned)", "runs": 2},
                                         {"kernels": "AVX512 (native)", "runs": 1},
                                         {"kernels": "unknown", "runs": 1}]


def test_publish_states_the_measured_tolerance_and_marks_what_it_could_change(
        out_root, tmp_path, monkeypatch):
    """Issue 73, items 2-3: with a measurement between two kernel configurations kept
    (``lsa compare --record``), stamp.json states each claim's move as its tolerance, STAMP.md
    links it, and RESULTS.md lists the verdicts a move that large could change."""
    from lsa import compare

    monkeypatch.setattr("lsa.pipeline.check_outputs", lambda pipe: [])
    _fake_outputs("smoke")
    measured = tmp_path / "kernels-smoke.csv"
    measured.write_text("id,published,here,move,tolerance,status\n"
                        "T1.1,agrees,agrees,0.5,,moved beyond tolerance\n"
                        "A1.1,helps,hurts,0.01,,verdict moved\n")
    monkeypatch.setattr(compare, "kernels_file", lambda profile: measured)
    dest = tmp_path / "pub"
    publish.publish("smoke", dest=dest)
    stamp = json.loads((dest / "stamp.json").read_text())
    assert stamp["tolerance"] == {"default": None, "claims": {"T1.1": 0.5, "A1.1": 0.01},
                                  "measured": "docs/bench/kernels-smoke.md",
                                  "verdicts_moved": ["A1.1"]}
    assert "[kernels-smoke.md](../../../docs/bench/kernels-smoke.md)" in \
        (dest / "STAMP.md").read_text()
    results = (dest / "RESULTS.md").read_text()
    sensitive = results[results.index("## Machine-sensitive verdicts"):
                        results.index(publish.MOVED)]
    assert "| A1.1 " in sensitive and "verdict moved" in sensitive


def test_rerender_refuses_the_study_and_stops_whole_when_a_notebook_stops(tmp_path,
                                                                           monkeypatch):
    """``lsa publish --rerender``: the study's snapshot is published from its kept blocks (a
    refusal, nothing run); a notebook that stops (a section whose runs the snapshot lacks here)
    stops it with one line naming the notebook, and the snapshot is as it was."""
    import shutil

    import papermill as pm

    with pytest.raises(publish.NotPublishable, match="kept blocks"):
        publish.rerender("study")
    dest = tmp_path / "mini"
    shutil.copytree(published.folder("mini"), dest)
    before = {p.relative_to(dest): p.read_bytes() for p in dest.rglob("*") if p.is_file()}

    def stops(notebook, out, **kwargs):
        raise pm.PapermillExecutionError(0, 1, "drive(setup)", "ConfigError",
                                         "runs lacking\nmore", [])

    monkeypatch.setattr(pm, "execute_notebook", stops)
    with pytest.raises(publish.NotPublishable, match=r"01_synthetic_study.ipynb stopped "
                                                      r"\(ConfigError: runs lacking\)"):
        publish.rerender("mini", dest=dest)
    assert {p.relative_to(dest): p.read_bytes() for p in dest.rglob("*") if p.is_file()} == \
        before
    assert os.environ.get(published.RERENDER) is None  # the scratch setting undone
