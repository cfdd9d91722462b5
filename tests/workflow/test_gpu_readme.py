"""The GPU page (docs/gpu.md, linked from the README's GPU section), command by command, run
dry on this CPU machine: `make -n` for the make targets (and then what they run, with
Snakemake replaced), the lsa commands in process with stand-in benchmark files, hf with
--dry-run offline (its arguments accepted, the hub not reached). A command the page adds
without a check here fails the test."""

import re
import shlex
import subprocess
import sys

import pytest
from support import ROOT, run

PAGE = ROOT / "docs" / "gpu.md"


def gpu_commands() -> list[str]:
    blocks = re.findall(r"```\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert len(blocks) == 2, "the section's two command blocks (gpu-small, paper)"
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def make_dry(args: list[str], env: dict[str, str]) -> str:
    out = run(["make", "-n", *args], env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture
def faked(monkeypatch, out_root, gpu_data):
    """Snakemake and the network replaced; what they were asked recorded."""
    calls = {"pipeline": [], "fetch": []}

    def pipeline(profile, cores="all", config=None, extra=None, root=ROOT):
        calls["pipeline"].append((profile, list(extra or [])))
        return 0

    monkeypatch.setattr("lsa.launch.run_pipeline", pipeline)
    monkeypatch.setattr("lsa.fetch.fetch", lambda what, datasets, source=None: calls[
        "fetch"].append(what) or [f"{w}: fetched" for w in what])
    monkeypatch.setattr("lsa.data.books.locate_books", lambda *a, **k: (gpu_data, "stand-in"))
    monkeypatch.setenv("LSA_ALLOW_CPU", "1")  # this machine has no GPU
    return calls


def lsa_main(argv: list[str]) -> int:
    from lsa import __main__ as cli

    return cli.main(argv)


def test_every_gpu_command_of_the_readme_runs_dry(faked, tmp_path, monkeypatch, capsys):
    from lsa import paths

    commands = gpu_commands()
    assert commands[0].startswith("git clone ")  # needs the repository's URL: not run here
    env: dict[str, str] = {}
    checked = 1
    for line in commands[1:]:
        words = shlex.split(line)
        prefix = {}
        while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):  # VAR=value command
            key, _, value = words.pop(0).partition("=")
            prefix[key] = value
        if words[0] == "export":
            key, _, value = words[1].partition("=")
            env[key] = value
            checked += 1
            continue
        if words[0] == "make":
            stdout = make_dry(words[1:], {**env, **prefix})
            if words[1] == "install":  # the exported CUDA build is what pip installs
                assert f"pip install --quiet {env['TORCH']}" in stdout
            else:
                (lsa,) = [s for s in stdout.splitlines() if " -m lsa pipeline " in s]
                argv = shlex.split(lsa.strip().rstrip("\\").strip().rstrip(";"))[3:]
                for key, value in prefix.items():
                    monkeypatch.setenv(key, value)
                status = lsa_main(argv)
                err = capsys.readouterr().err
                profile = argv[argv.index("--profile") + 1]
                if "HF_HUB_OFFLINE" in prefix:  # paper offline: stops on the empty hub cache
                    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
                    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
                    status = lsa_main(argv)
                    err = capsys.readouterr().err
                    problems = [x for x in err.splitlines() if x.startswith("  - ")]
                    assert status == 1 and problems
                    assert all(x.startswith("  - hub: ") and "not in the hub's cache" in x
                               for x in problems), problems
                    for key in prefix:
                        monkeypatch.delenv(key)
                else:
                    assert status == 0, err
                    assert faked["pipeline"][-1] == (profile, words[-1].split("=", 1)[1]
                                                     .split())
                    assert paths.last_profile() == profile
            checked += 1
        elif words[:3] == [".venv/bin/python", "-m", "lsa"]:
            status = lsa_main(words[3:])
            out = capsys.readouterr().out
            assert status == 0, out
            if words[3] == "fetch":
                assert faked["fetch"][-1] == [w for w in words[4:] if w != "books"]
            checked += 1
        elif words[0] == "hf":
            out = subprocess.run([sys.executable, "-m", "huggingface_hub.cli.hf", *words[1:],
                                  "--dry-run"], capture_output=True, text=True,
                                 env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
                                      "PATH": "/usr/bin:/bin"})
            assert out.returncode != 2, out.stderr[-2000:]  # 2: the arguments were refused
            assert "DryRunError" in out.stderr or "offline" in out.stderr.lower()
            checked += 1
        elif words[:3] == [".venv/bin/pip", "install", "bitsandbytes"]:
            # pip's own parser accepts it (installing would need the index)
            from pip._internal.commands import create_command

            options, args = create_command("install").parse_args(words[2:])
            assert args == ["bitsandbytes"] and options.editables == [".[slurm]"]
            checked += 1
    assert checked == len(commands), "a command of docs/gpu.md this test does not know how to check"
