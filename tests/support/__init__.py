"""What the tests share that is not a fixture (fixtures: tests/conftest.py): the
repository root, commands in this environment, a Snakemake API script, the stand-in
BABILong prompts, a profile's outputs without timings, a copy of the working tree, the ways
a run's file is damaged.
pyproject.toml puts tests/ on the path: ``from support import ROOT``."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


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


_PARTS = '{"instruction": "Answer.", "examples": "", "post_prompt": "One word."}'
FAKE_PROMPTS = ('DEFAULT_TEMPLATE = "{instruction} {examples} {post_prompt} {context} Q: '
                '{question}"\nDEFAULT_PROMPTS = {\n'
                + "".join(f'    "qa{i}": {_PARTS},\n' for i in range(1, 6)) + "}\n")


VOLATILE = {"wall_time_s", "train_wall_s", "elapsed_s", "resumed_from", "finished_utc",
            "git_commit", "wall_time", "started_utc"}


def stable(value):
    """A result without the keys that measure time or provenance."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def outputs(profile="smoke", only=None):
    """Every run's metrics, summary and log, and every section's metrics, without timings;
    with ``only``, the runs (by their folder's name before its digest, ``pi_a0_s0``) and the
    sections (by key) it names."""
    from lsa import paths
    from lsa.pipeline import pipeline_config
    from lsa.runs import runs_of

    pipe = pipeline_config(profile)
    out = {}
    for run in runs_of(pipe):
        if only is not None and run.id.rsplit("-", 1)[0] not in only:
            continue
        out[run.id] = stable({"metrics": run.metrics(), "summary": run.summary(),
                              "log": run.log()})
    for key in pipe.sections:
        if only is not None and key not in only:
            continue
        out[key] = stable(json.loads(paths.metrics_file(profile, key).read_text()))
    return out


def copy_working_tree(target):
    """The files git tracks, and the untracked ones it does not ignore, as they are now."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True, check=True)
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def cut_file(path, keep: int) -> None:
    """``path`` cut to its first ``keep`` bytes, as a killed write leaves a file."""
    path.write_bytes(path.read_bytes()[:keep])


def change_byte(path) -> None:
    """One bit of the byte in the middle of ``path`` flipped: its size and every other byte
    kept (in a JSON file the text no longer parses or says something else)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))


def names(text: str, path: str) -> bool:
    """Whether ``text`` (a problem's line) names the run's file ``path`` (a path in its
    folder) as a path of its own: ``config.json`` is not ``model/config.json``, nor
    ``metrics.json`` ``metrics.jsonl``."""
    return re.search(rf"(?<![\w/.]){re.escape(path)}(?![\w.])", text) is not None


#: the ways a file of a finished run is damaged after its job (issue 73): cut to half its
#: bytes, emptied, deleted, one byte changed
DAMAGES = {"cut": lambda path: cut_file(path, path.stat().st_size // 2),
           "emptied": lambda path: path.write_bytes(b""),
           "deleted": lambda path: path.unlink(),
           "changed": change_byte}


def copy_made_runs(only=None, exclude=(), profile="smoke") -> list[str]:
    """Copy the runs the pipeline made in the repository's results/<profile>/runs (for smoke,
    the ``smoke_pipeline`` fixture's) into the output root the test has set, keeping their
    files' times, so that Snakemake finds them up to date; ``only`` / ``exclude`` select by
    the folder's name before its digest (``pi_a0_s0``). The resolved configuration comes
    with them (config.yaml and its digest in .resolved/): without it Snakemake makes it again,
    and a job whose input another job makes runs again, ``ancient`` or not, i.e. every run.
    Returns the names copied."""
    from lsa import paths

    source = ROOT / "results" / profile / "runs"
    target = paths.results_dir(profile) / "runs"
    assert target != source, "set LSA_OUTPUT_ROOT first: the runs would be copied onto themselves"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source.parent / "config.yaml", target.parent / "config.yaml")
    shutil.copytree(source.parent / ".resolved", target.parent / ".resolved")
    copied = []
    for folder in sorted(source.iterdir()):
        name = folder.name.rsplit("-", 1)[0]
        if (only is None or name in only) and name not in exclude:
            shutil.copytree(folder, target / folder.name)
            copied.append(folder.name)
    return copied


def chromium() -> tuple[str, str]:
    """Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them): their paths,
    else the calling test is skipped, or fails where ``LSA_REQUIRE_BROWSER`` is set (CI)."""
    import pytest

    found = shutil.which("chromium"), shutil.which("chromedriver")
    if all(found):
        return found
    if os.environ.get("LSA_REQUIRE_BROWSER"):
        pytest.fail("chromium and chromedriver are not on PATH (apt-get install chromium "
                    "chromium-driver)")
    pytest.skip("no chromium/chromedriver: apt-get install chromium chromium-driver")


def chrome(found: tuple[str, str], *arguments: str):
    """A headless Chromium driven by selenium (``found``: ``chromium()``), with ``arguments``
    besides the headless ones; the caller quits it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    browser, driver = found
    options = Options()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", *arguments):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(driver), options=options)
