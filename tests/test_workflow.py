"""The Snakemake workflow: dry runs per profile, lint, configuration errors."""

import pytest

from lsa.config import PROFILES, load_config

from conftest import run, tool


@pytest.mark.parametrize("profile", PROFILES)
def test_dry_run_plans_every_section(profile):
    out = run([tool("snakemake"), "-n", "--forceall", "--config", f"profile={profile}"])
    assert out.returncode == 0, out.stderr + out.stdout
    for key in load_config(profile=profile).sections:
        assert f"section_{key}" in out.stdout
        assert f"results/{profile}/{key}/metrics.json" in out.stdout


def test_lint_is_clean():
    out = run([tool("snakemake"), "--lint"])
    assert out.returncode == 0
    assert "Congratulations" in out.stdout + out.stderr, out.stdout + out.stderr


def test_bad_config_fails_with_a_clear_message():
    out = run([tool("snakemake"), "-n", "--config", "profile=huge"])
    assert out.returncode != 0
    assert "profile = 'huge'" in out.stdout + out.stderr
    out = run([tool("snakemake"), "-n", "--config", "seed=-x"])
    assert out.returncode != 0
    assert "seed" in out.stdout + out.stderr
