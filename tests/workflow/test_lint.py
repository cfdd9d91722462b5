"""The habits of the repository: ruff clean, notebooks without outputs (the pre-commit hooks),
and Snakemake's own lint (tests/workflow/test_workflow.py)."""

import pytest
import yaml
from support import ROOT, run, tool


def test_pre_commit_hooks_pass_on_every_file(tmp_path):
    """`pre-commit run --all-files`, as `make lint` runs it: local hooks only, so it needs no
    network (pre-commit's cache goes to a temporary folder)."""
    if not (ROOT / ".git").exists():
        pytest.skip("pre-commit needs a git checkout")
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    assert [r["repo"] for r in config["repos"]] == ["local"]
    hooks = {h["id"] for r in config["repos"] for h in r["hooks"]}
    assert hooks == {"ruff", "nbstripout"}
    out = run([tool("pre-commit"), "run", "--all-files", "--show-diff-on-failure"],
              env={"PRE_COMMIT_HOME": str(tmp_path / "pre-commit")})
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_checks_the_notebooks_too():
    out = run([tool("ruff"), "check", "notebooks/"])
    assert out.returncode == 0, out.stdout + out.stderr
