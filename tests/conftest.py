"""Fixtures every tier shares; the e2e tier is ``slow`` by its folder
(``pytest_collection_modifyitems``). Plain helpers: ``tests/support``."""

import os
import time
from pathlib import Path

import pytest
from support import FAKE_PROMPTS, NO_CONTROLLER, run, tool

E2E = Path(__file__).resolve().parent / "e2e"
LONG = E2E / "long"


@pytest.hookimpl(tryfirst=True)  # before -m reads the markers
def pytest_collection_modifyitems(config, items):
    """A test is ``slow`` exactly when it lives in tests/e2e/, and ``long`` exactly when it
    lives in tests/e2e/long/ (what make test leaves out for its time: make test-all runs it,
    and make publish): the folders set the markers, and either marker written anywhere else
    is an error, so folder and marker cannot drift. A test is ``smoke_runs`` exactly when it
    uses the fixture ``smoke_pipeline`` (itself or through another fixture): make test runs
    those in one process after the others, which it spreads over several (the Makefile)."""
    for item in items:
        for name, folder in (("slow", E2E), ("long", LONG)):
            inside = folder in item.path.parents
            if not inside and item.get_closest_marker(name):
                raise pytest.UsageError(f"{item.nodeid}: marked {name} outside "
                                        f"{folder.relative_to(E2E.parent.parent)}/ (move it "
                                        "there: the folder marks it)")
            if inside:
                item.add_marker(getattr(pytest.mark, name))
        if "smoke_pipeline" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.smoke_runs)


@pytest.fixture
def out_root(tmp_path, monkeypatch):
    """Send results/ and figures/ to a temporary folder."""
    monkeypatch.setenv("LSA_OUTPUT_ROOT", str(tmp_path))
    return tmp_path


@pytest.fixture(scope="session", autouse=True)
def no_slurm_controller(tmp_path_factory):
    """Every Snakemake start imports the SLURM executor plugin, which asks ``scontrol show
    config`` for the controller's MinJobAge once SLURM's client tools are installed; where
    they are and no controller runs (a machine where ``make test-cluster`` stopped its
    single-node cluster, CI's included) each start waits MessageTimeout - 1 = 9 s for it,
    dozens of starts in ``make test``. Only ``make test-cluster`` (``LSA_REQUIRE_SLURM``)
    talks to a controller: elsewhere the suite and its subprocesses read ``NO_CONTROLLER``,
    whose refusal is immediate."""
    if os.environ.get("LSA_REQUIRE_SLURM"):
        yield
        return
    conf = tmp_path_factory.mktemp("slurm") / "slurm.conf"
    conf.write_text(NO_CONTROLLER)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLURM_CONF", str(conf))
        yield conf


@pytest.fixture(scope="session")
def tokenizer(tmp_path_factory):
    """A small byte-level BPE tokenizer (lsa.data.tokens)."""
    from lsa.data.tokens import train_tokenizer

    text = ["the cat sat on the mat. " * 50, "a dog ran in the park! " * 50]
    return train_tokenizer(text, 300, tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="session")
def smoke_pipeline():
    """The whole smoke pipeline, uninterrupted, into the real results/smoke and figures/smoke
    (never another profile's outputs); its wall time in seconds. Shared by the end-to-end
    checks (test_pipeline.py) and the fault-injection test's reference (test_faults.py)."""
    saved = os.environ.pop("LSA_OUTPUT_ROOT", None)
    try:
        start = time.time()
        out = run([tool("snakemake"), "--cores", "all", "--config", "profile=smoke"])
        assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-5000:]
        return time.time() - start
    finally:
        if saved is not None:
            os.environ["LSA_OUTPUT_ROOT"] = saved


@pytest.fixture
def gpu_data(tmp_path, monkeypatch):
    """The benchmark files the GPU profiles read, as stand-ins in a temporary $LSA_DATA_DIR
    (LongBench-E's tables and *_e.jsonl files, BABILong's prompts.py written here, not the
    benchmarks' own), and data/ sent to an empty folder: what `python -m lsa fetch` would
    have put in place."""
    import json

    from lsa import paths
    from lsa.config import LONGBENCH_E_DATASETS

    data = tmp_path / "lsa_data"
    (data / "longbench").mkdir(parents=True)
    (data / "longbench" / "dataset2prompt.json").write_text(
        json.dumps({d: "{context} {input}" for d in LONGBENCH_E_DATASETS}))
    (data / "longbench" / "dataset2maxlen.json").write_text(
        json.dumps({d: 8 for d in LONGBENCH_E_DATASETS}))
    row = {"input": "q", "context": "c", "answers": ["a"], "length": 10, "all_classes": None}
    for d in LONGBENCH_E_DATASETS:
        (data / "longbench" / f"{d}_e.jsonl").write_text(json.dumps(row) + "\n")
    (data / "babilong").mkdir()
    (data / "babilong" / "prompts.py").write_text(FAKE_PROMPTS)
    (data / "books").mkdir()
    (data / "books" / "a.txt").write_text("A book of a few words. " * 20)
    monkeypatch.setenv("LSA_DATA_DIR", str(data))
    monkeypatch.setattr(paths, "CACHE", tmp_path / "cache")
    return data
