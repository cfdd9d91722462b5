"""Notebooks: committed clean, their parameters, and what a notebook run alone reads (each run
top to bottom with its defaults: tests/e2e/test_notebooks_run.py)."""

import json

import nbformat
import pytest

from lsa import paths
from lsa.config import ConfigError, load_config
from lsa.runs import runs_of

NOTEBOOKS = sorted(paths.NOTEBOOKS.glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [] and cell.get("execution_count") is None, path.name
    nbformat.validate(nbformat.reads(path.read_text(), as_version=4))


def test_every_section_notebook_exists():
    from lsa.config import section_declarations

    assert {spec.notebook for spec in section_declarations().values()} == \
        {p.name for p in NOTEBOOKS}


def test_every_section_notebook_ends_with_something_to_try():
    """Each section notebook but the report ends with a "Try it" part: a markdown cell that says
    what to change and what to look for, then one cell (tagged ``try-it``) that reruns the
    section on smoke with that change, or re-analyses its own runs (``lsa.sections.try_it``);
    every notebook declares the ``lsa`` kernel."""
    pipe = load_config(profile="smoke")
    for key, spec in pipe.sections.items():
        nb = nbformat.read(paths.NOTEBOOKS / spec.notebook, as_version=4)
        assert nb.metadata.kernelspec.name == "lsa", key
        if spec.config == "report":
            continue
        last, before = nb.cells[-1], nb.cells[-2]
        assert last.metadata.get("tags") == ["try-it"] and "try_it(setup, " in last.source
        assert before.cell_type == "markdown" and before.source.startswith("## Try it"), key
        assert "Look at" in before.source or "look at" in before.source, key


def test_every_notebook_takes_what_the_pipeline_passes_by_name():
    """Each notebook's parameters cell (papermill's inspection) defines every name the pipeline
    passes, and the notebook hands them to open_section by name (an unknown one is papermill's
    warning, and a TypeError where a notebook passes it on)."""
    import papermill as pm

    from lsa.pipeline import notebook_parameters

    pipe = load_config(profile="smoke")
    for key, spec in pipe.sections.items():
        names = set(pm.inspect_notebook(str(paths.NOTEBOOKS / spec.notebook)))
        assert set(notebook_parameters(pipe, key)) <= names
        wanted = {"profile", "config_file", "overrides"} | (
            {"run_ids", "train_missing"} if spec.uses_runs else set())
        assert names == wanted, key
        source = (paths.NOTEBOOKS / spec.notebook).read_text()
        assert all(f"{n}={n}" in source for n in names) and "globals()" not in source


# --- what a notebook reads: the pipeline's resolved file, or config/config.yaml alone --------


def test_a_notebook_run_alone_reads_the_last_finished_profile(out_root, capsys):
    """profile = None: the profile of the last finished pipeline, else mini; a named profile
    wins over the marker."""
    from lsa.notebook import open_section

    assert paths.last_profile() is None
    assert open_section("06_replication_report").profile == "mini"
    assert "no pipeline has finished yet" in capsys.readouterr().out
    paths.write_last_profile("gpu-small")
    assert paths.last_profile_file() == out_root / "results" / "LAST_PROFILE"
    assert open_section("06_replication_report").profile == "gpu-small"
    assert "the last finished `python -m lsa pipeline`" in capsys.readouterr().out
    assert open_section("06_replication_report", profile="smoke").profile == "smoke"


@pytest.mark.parametrize("status,extra,marked", [(0, [], True), (1, [], False),
                                                 (0, ["-n"], False)])
def test_the_pipeline_command_records_the_profile_it_finished(out_root, monkeypatch, status,
                                                              extra, marked):
    import lsa.launch
    import lsa.preflight
    from lsa.__main__ import main

    monkeypatch.setattr(lsa.launch, "run_pipeline", lambda *a, **k: status)
    # this machine has no GPU: the pre-flight's stop is tests/unit/test_preflight.py's
    monkeypatch.setattr(lsa.preflight, "preflight", lambda *a, **k: lsa.preflight.Report())
    assert main(["pipeline", "--profile", "gpu-small", "--", *extra]) == status
    assert paths.last_profile() == ("gpu-small" if marked else None)


def test_missing_runs_of_a_notebook_run_alone(out_root, monkeypatch):
    """Run alone on mini with its runs not made: it stops before any compute and names the
    command; train_missing = False leaves them out; on smoke (train_missing = None) or with
    train_missing = True it trains them here, with a progress bar."""
    import lsa.jobs
    import lsa.published
    from lsa.notebook import RunsMissing, open_section

    # no published snapshot to fall back on (tests/unit/test_published.py covers that path)
    monkeypatch.setattr(lsa.published, "folder", lambda profile: out_root / "no-snapshot")
    trained = []
    monkeypatch.setattr(lsa.jobs, "ensure", lambda pipe, run, progress: trained.append(
        (pipe.profile, run.id, progress)))
    paths.write_last_profile("mini")
    setup = open_section("03_regularized_finetuning")
    with pytest.raises(RunsMissing, match=r"make reproduce PROFILE=mini.*train_missing = True"):
        setup.ensure_runs()
    open_section("03_regularized_finetuning", train_missing=False).ensure_runs()
    assert trained == []
    open_section("03_regularized_finetuning", train_missing=True).ensure_runs()
    n = len(setup.runs())
    assert len(trained) == n and {(p, bar) for p, _, bar in trained} == {("mini", True)}
    open_section("03_regularized_finetuning", profile="smoke").ensure_runs()
    assert {(p, bar) for p, _, bar in trained[n:]} == {("smoke", True)}


def test_a_notebook_run_alone_reads_config_yaml_with_its_overrides(out_root):
    from lsa.notebook import open_section

    paths.write_last_profile("smoke")
    setup = open_section("03_regularized_finetuning")
    assert setup.alone and setup.pipe == load_config(profile="smoke")
    changed = open_section("04_ablations", overrides={"seeds": [0, 1, 2]})
    assert changed.settings.seeds == [0, 1, 2] == changed.pipe.ablation.seeds
    assert len(runs_of(changed.pipe).ablation) > len(runs_of(setup.pipe).ablation)
    with pytest.raises(ConfigError, match="seedz"):
        open_section("04_ablations", overrides={"seedz": [0]})
    with pytest.raises(ConfigError, match=r"seeds"):
        open_section("04_ablations", overrides={"seeds": "many"})
    with pytest.raises(TypeError, match="stepz"):
        open_section("01_synthetic_study", stepz=3)  # type: ignore[call-arg]


def test_a_pipeline_notebook_checks_its_call_and_runs(out_root):
    from lsa.notebook import open_section
    from lsa.pipeline import notebook_parameters, write_resolved

    pipe = load_config(profile="smoke", overrides={"seed": 1})
    write_resolved(pipe)
    params = notebook_parameters(pipe, "03_regularized_finetuning")
    # the grid, the premise gates' runs (the base model, raw fine-tuning, the base probe), the
    # LongBench-E evaluations
    assert params["run_ids"] == [r.id for r in runs_of(pipe).used_by(["finetune", "gates",
                                                                      "longbench"])]
    assert params["run_ids"][:len(runs_of(pipe).grid)] == [
        runs_of(pipe).finetune[n].id for n in runs_of(pipe).grid]
    setup = open_section("03_regularized_finetuning", **params)
    assert setup.pipe == pipe and not setup.alone and setup.seed == 1
    with pytest.raises(ConfigError, match="overrides = .*a pipeline notebook takes"):
        open_section("03_regularized_finetuning", **{**params, "overrides": {"alpha": 0.2}})
    seed0 = [r.id for r in runs_of(load_config(profile="smoke")).used_by(["finetune"])]
    with pytest.raises(ConfigError, match="run_ids: the pipeline made run folders"):
        open_section("03_regularized_finetuning", **{**params, "run_ids": seed0})
    # in the pipeline a missing run is an error, never trained inside the notebook's job
    with pytest.raises(FileNotFoundError, match="should have made"):
        setup.ensure_runs()


