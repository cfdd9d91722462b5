"""A dry run of the workflow changes nothing under results/ (the dry runs themselves:
tests/workflow/test_workflow.py)."""

import re

from support import run, tool
from support.dryrun import resolve

from lsa.config import load_config
from lsa.pipeline import resolved_file, write_resolved
from lsa.runs import runs_of


def snapshot(folder):
    """Every file under ``folder``: its bytes and modification time."""
    return {p.relative_to(folder): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_dry_run_leaves_the_results_folder_as_it_was(out_root):
    """Parsing the workflow writes nothing: with an outdated resolved file and a finished run
    whose files no longer verify (both fixed by a real run: rule resolved_config and
    `python -m lsa pipeline`), dry runs of smoke and mini-full (which also plans mini's
    resolved file) leave every file, and its timestamp, as it was."""
    from lsa.markers import FINISHED

    pipe = load_config(profile="smoke")
    write_resolved(load_config(profile="smoke", overrides={"seed": 5}))
    base = runs_of(pipe).base
    base.folder.mkdir(parents=True)
    (base.folder / FINISHED).write_text("{}")
    (base.folder / "metrics.json").write_text('{"cut')
    before = snapshot(out_root)
    for profile in ("smoke", "mini-full"):
        out = run([tool("snakemake"), "-n", "--config", f"profile={profile}"])
        assert out.returncode == 0, out.stderr + out.stdout
        # the default target asks for the resolved file's stamp: a file from another
        # configuration (or written before the rule existed) is rewritten
        assert re.search(r"^resolved_config\s+1$", out.stdout, re.M), out.stdout[-2000:]
    assert snapshot(out_root) == before
    assert not (out_root / "results" / "mini-full").exists()
    # the real thing: the resolved file is rewritten by its rule, and only when it changes
    resolve("--config", "profile=smoke")
    assert load_config(resolved_file("smoke")) == pipe
    stamp = resolved_file("smoke").stat().st_mtime_ns
    resolve("--config", "profile=smoke")
    assert resolved_file("smoke").stat().st_mtime_ns == stamp
    resolve("--config", "profile=smoke", "seed=1")  # and back: each time the file it should be
    resolve("--config", "profile=smoke")
    assert load_config(resolved_file("smoke")) == pipe
    assert len(list((resolved_file("smoke").parent / ".resolved").iterdir())) == 1






