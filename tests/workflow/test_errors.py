"""One rule for errors (CONTRIBUTING.md): each problem one line on stderr with the command that
fixes it, quoted for the shell; one exit status per kind; no traceback for what a user can
cause; a quiet end on a closed pipe; and the help: every command once, each with its
description, ``--version``."""

import json
import shlex
import subprocess
import sys

import pytest
from support import ROOT

from lsa import __main__ as cli
from lsa.config import load_config
from lsa.runs import runs_of


def test_the_exit_statuses_are_one_per_kind():
    assert sorted(cli.EXIT.values()) == [1, 2, 3, 4, 5]
    assert cli.EXIT["usage"] == 2  # argparse's own


def test_help_lists_every_command_once_each_with_its_description(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    listed = text.split("commands (")[1]
    names = [line.split()[0] for line in listed.splitlines()[2:] if line.startswith("    ")
             and not line.startswith("     ")]
    parser_names = ["config", "check", "pipeline", "plan", "fetch", "pretrain", "finetune",
                    "babilong", "babilong-eval", "probe", "longbench", "bench", "timings",
                    "power", "publish"]
    assert set(parser_names) <= set(names) and len(names) == len(set(names))
    assert "python -m lsa config " not in text  # the docstring's list is not repeated
    for name in names:
        with pytest.raises(SystemExit):
            cli.main([name, "--help"])
        usage, description = capsys.readouterr().out.split("\n\n")[:2]
        assert usage.startswith(f"usage: lsa {name}") and len(description.split()) >= 3, name


def test_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"lsa {version('lsa')}\n"


def test_check_on_a_fresh_clone_says_nothing_is_made_yet(out_root, capsys):
    assert cli.main(["check", "--profile", "smoke"]) == cli.EXIT["check"]
    out, err = capsys.readouterr()
    pipe = load_config(profile="smoke")
    outputs = len(list(runs_of(pipe))) + len(pipe.sections)
    assert out == (f"profile smoke: nothing made yet ({outputs} runs and sections); make them: "
                   "python -m lsa pipeline --profile smoke\n")
    assert err == ""


def test_check_counts_made_not_made_and_damaged(out_root, capsys):
    from lsa.files import write_json
    from lsa.markers import mark_finished

    pipe = load_config(profile="smoke")
    plan = runs_of(pipe)
    for run in (plan.base, plan.finetune["pi_a0_s0"]):
        write_json(run.folder / "metrics.json", {"validation_perplexity": {}})
        write_json(run.folder / "run_info.json", {"seed": 0})
        mark_finished(run.folder, {"steps": 1})
    (plan.finetune["pi_a0_s0"].folder / "metrics.json").write_text('{"cut')
    assert cli.main(["check", "--profile", "smoke"]) == cli.EXIT["check"]
    out, err = capsys.readouterr()
    total = len(list(plan)) + len(pipe.sections)
    assert out.splitlines()[-1] == (f"profile smoke: 1 made, {total - 2} not made, 1 damaged, "
                                    f"of {total} runs and sections; make the rest: python -m "
                                    "lsa pipeline --profile smoke")
    lines = err.splitlines()
    assert lines and all(line.startswith("lsa check: run pi_a0_s0: ") for line in lines)
    assert all(line.endswith("make it again: python -m lsa pipeline --profile smoke")
               for line in lines)


def test_timings_says_when_there_is_nothing_to_time(out_root, capsys):
    assert cli.main(["timings", "--profile", "smoke"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("profile smoke: nothing to time yet") and "|" not in out


def test_a_closed_pipe_ends_quietly():
    out = subprocess.run(f"{shlex.quote(sys.executable)} -m lsa config --profile smoke | head -1",
                         shell=True, cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.startswith("# ") and out.stderr == ""


def test_an_unknown_run_is_a_usage_error_in_one_line(capsys):
    assert cli.main(["finetune", "--profile", "smoke", "--run", "nope"]) == cli.EXIT["usage"]
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("lsa finetune: --run nope: ") and "python -m lsa config --runs" in line


def test_a_damaged_snapshot_names_the_fix_quoted_for_the_shell(tmp_path, monkeypatch, capsys):
    """Under a path with a space, the command the message gives restores the snapshot."""
    from lsa import files, published

    root = tmp_path / "my clone" / "docs" / "results" / "mini"
    (root / "runs").mkdir(parents=True)
    (root / "runs" / "m.json").write_text("{}")
    files.write_json(root / published.MANIFEST, {"profile": "mini", "files": {
        "runs/m.json": {"sha256": "0" * 64, "bytes": 2}}})
    monkeypatch.setattr(published, "folder", lambda profile: root)
    assert cli.main(["power", "--profile", "mini", "--published"]) == cli.EXIT["damaged"]
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("lsa power: ") and "changed against" in line
    command = line.split("restore the snapshot: ")[1]
    assert shlex.split(command) == ["git", "checkout", "--", str(root)]


def test_a_missing_input_is_one_line_without_a_traceback(out_root):
    """A job whose base model is not made: the command that makes it, exit status 4."""
    out = subprocess.run([sys.executable, "-m", "lsa", "finetune", "--profile", "smoke",
                          "--run", "pi_a0_s0", "--no-progress"], cwd=ROOT, capture_output=True,
                         text=True, env={**__import__("os").environ,
                                         "LSA_OUTPUT_ROOT": str(out_root)})
    assert out.returncode == cli.EXIT["missing"], out.stderr[-2000:]
    (line,) = out.stderr.splitlines()
    assert "Traceback" not in line and "python -m lsa pretrain --profile smoke" in line


def test_a_configuration_error_is_one_line(tmp_path, capsys):
    path = tmp_path / "mine.yaml"
    path.write_text(json.dumps({"seed": "one"}))
    assert cli.main(["config", "--config-file", str(path)]) == cli.EXIT["configuration"]
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("lsa config: configuration error: seed = 'one'")
