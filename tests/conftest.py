import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.fixture
def out_root(tmp_path, monkeypatch):
    """Send results/ and figures/ to a temporary folder."""
    monkeypatch.setenv("LSA_OUTPUT_ROOT", str(tmp_path))
    return tmp_path


def tool(name: str) -> str:
    """An executable of this environment (snakemake, papermill), else from PATH."""
    path = BIN / name
    return str(path) if path.exists() else (shutil.which(name) or name)


#: a Python script that builds the workflow's DAG for the profile in sys.argv[1] through
#: Snakemake's API (``wf``: the workflow) and then runs ``print_rules``, a line that prints
#: what a test reads of the rules (``workflow_script``)
_WORKFLOW_SCRIPT = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings
with SnakemakeApi(OutputSettings()) as api:
    wapi = api.workflow(resource_settings=ResourceSettings(),
                        config_settings=ConfigSettings(config={"profile": sys.argv[1]}),
                        snakefile=Path("Snakefile"), workdir=Path("."))
    wapi.dag()
    wf = wapi._workflow
    %s
"""


def workflow_script(print_rules: str) -> str:
    """``_WORKFLOW_SCRIPT`` ending with ``print_rules`` (one line of Python, ``wf`` in scope)."""
    return _WORKFLOW_SCRIPT % print_rules


def run(cmd, **kw):
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           **kw.pop("env", {})}
    return subprocess.run(cmd, cwd=kw.pop("cwd", ROOT), env=env, capture_output=True, text=True,
                          **kw)


#: a SLURM configuration whose controller nobody runs (a closed port, the shortest timeout)
NO_CONTROLLER = ("# tests/conftest.py: no_slurm_controller\nClusterName=lsa-none\n"
                 "SlurmctldHost=localhost\nSlurmctldPort=1\nMessageTimeout=1\n")


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


_PARTS = '{"instruction": "Answer.", "examples": "", "post_prompt": "One word."}'
FAKE_PROMPTS = ('DEFAULT_TEMPLATE = "{instruction} {examples} {post_prompt} {context} Q: '
                '{question}"\nDEFAULT_PROMPTS = {\n'
                + "".join(f'    "qa{i}": {_PARTS},\n' for i in range(1, 6)) + "}\n")


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
