"""A job run by hand (``python -m lsa finetune --run NAME``) verifies its run as the pipeline
does (``lsa.launch.verify_job``; every file against the checksums its marker records:
``lsa.markers``): a finished run whose files no longer verify is made again, never taken as
done; a damaged run it reads, or a damaged cache, stops it before any compute with one line
that names the file and the command that remakes it. ``python -m lsa check`` names each
damaged file; a notebook run alone (``lsa.jobs.ensure``) verifies as the job does."""


import json

import pytest
from support import DAMAGES, ROOT, cut_file, names

from lsa.config import load_config
from lsa.files import write_json
from lsa.markers import FINISHED, mark_finished, output_problems
from lsa.runs import runs_of


def made_run(folder, tokenizer: bool = False) -> None:
    """A finished run folder whose files verify, with the files a job leaves: its identity,
    log, metrics and provenance, the model's weights (one tensor file) and configs, and a base
    model's tokenizer."""
    import torch
    from safetensors.torch import save_file

    write_json(folder / "config.json", {"lr": 0.001})
    write_json(folder / "metrics.json", {"ppl": 10.0})
    write_json(folder / "run_info.json", {"seed": 0})
    (folder / "metrics.jsonl").write_text('{"step": 1}\n')
    write_json(folder / "model" / "config.json", {"hidden_size": 64})
    write_json(folder / "model" / "generation_config.json", {"eos_token_id": 0})
    save_file({"w": torch.arange(4096, dtype=torch.float32)},
              folder / "model" / "model.safetensors")
    if tokenizer:
        write_json(folder / "tokenizer" / "tokenizer_config.json", {"eos_token": "<eos>"})
        write_json(folder / "tokenizer" / "tokenizer.json", {"model": {"vocab": {"a": 0}}})
    mark_finished(folder, {"steps": 1})


def recorded(run) -> list[str]:
    """The files a finished run's marker records (every file of its folder but the marker)."""
    return sorted(json.loads((run.folder / FINISHED).read_text())["files"])


@pytest.fixture
def smoke(out_root, monkeypatch, tmp_path):
    """The smoke profile's base model and run pi_a0_s0, made (fake folders that verify); the
    job of a run replaced by one that writes its folder again (``made``: the runs it made);
    the caches sent to an empty folder."""
    import lsa.jobs
    import lsa.paths

    monkeypatch.setattr(lsa.paths, "CACHE", tmp_path / "cache")
    pipe = load_config(profile="smoke")
    plan = runs_of(pipe)
    base, run = plan.base, plan.finetune["pi_a0_s0"]
    made_run(base.folder, tokenizer=True)
    made_run(run.folder)
    made = []

    def job(pipe, run, progress=True):  # as every job: a finished run is reused
        if run.finished:
            return run.folder
        made.append(run.id)
        made_run(run.folder)
        return run.folder

    monkeypatch.setitem(lsa.jobs.JOBS, "finetune", job)
    return base, run, made



def test_a_damaged_finished_run_is_made_again_by_its_job(smoke, capsys):
    from lsa.__main__ import main

    base, run, made = smoke
    assert main(["finetune", "--profile", "smoke", "--run", "pi_a0_s0"]) == 0
    assert made == []  # whole: reused, as before
    cut_file(run.folder / "metrics.json", 7)
    cut_file(run.folder / "model" / "model.safetensors", 3000)
    assert len(output_problems(run.folder)) == 2
    assert main(["finetune", "--profile", "smoke", "--run", "pi_a0_s0"]) == 0
    out = capsys.readouterr().out
    assert made == [run.id] and run.finished and output_problems(run.folder) == []
    assert f"finetune run pi_a0_s0 ({run.id}) is made again" in out
    assert "metrics.json unreadable" in out and "model/model.safetensors: " in out


@pytest.mark.parametrize("damage, named", [
    (lambda base: cut_file(base.folder / "model" / "model.safetensors", 3000),
     "model/model.safetensors: 3000 bytes, its header describes"),
    (lambda base: cut_file(base.folder / "tokenizer" / "tokenizer_config.json", 5),
     "tokenizer/tokenizer_config.json unreadable"),
])
def test_a_damaged_base_model_stops_the_job_in_one_line_with_its_remake(smoke, capsys, damage,
                                                                          named):
    from lsa.__main__ import EXIT, main

    base, run, made = smoke
    cut_file(run.folder / "metrics.json", 7)
    damage(base)
    assert main(["finetune", "--profile", "smoke", "--run", "pi_a0_s0"]) == EXIT["damaged"]
    err = capsys.readouterr().err
    (line,) = err.splitlines()
    assert line.startswith("lsa finetune: the base model ") and named in line
    assert str(base.folder.relative_to(ROOT) if base.folder.is_relative_to(ROOT)
               else base.folder) in line
    assert line.endswith("remake it: python -m lsa pretrain --profile smoke")
    assert made == [] and base.finished  # nothing computed, nothing unmarked


def test_a_damaged_token_cache_is_named_with_the_command_that_remakes_it(smoke, capsys):
    import numpy as np

    import lsa.paths
    from lsa.__main__ import EXIT, main

    _, run, made = smoke
    cache = lsa.paths.CACHE / "tokens" / "train-0123.npy"
    cache.parent.mkdir(parents=True)
    np.save(cache, np.arange(1000, dtype=np.uint16))
    cut_file(run.folder / "metrics.json", 7)
    assert main(["finetune", "--profile", "smoke", "--run", "pi_a0_s0"]) == 0  # whole: read
    cut_file(cache, 500)
    cut_file(run.folder / "metrics.json", 7)
    assert main(["finetune", "--profile", "smoke", "--run", "pi_a0_s0"]) == EXIT["damaged"]
    (line,) = capsys.readouterr().err.splitlines()
    assert f"{cache}: unreadable" in line
    assert line.endswith(f"rm -- {cache} && python -m lsa finetune --run pi_a0_s0 "
                         "--profile smoke")
    assert made == [run.id]


@pytest.mark.parametrize("damage", DAMAGES)
def test_no_damage_leaves_a_job_by_hand_reading_the_run_and_check_names_each_file(smoke, capsys,
                                                                                   damage):
    """Every file of the base model and of run pi_a0_s0 damaged one way (issue 73; each file
    alone: tests/unit/test_markers.py): ``lsa check`` names each file; the run's job by hand
    stops on the base model in one line that names each of its files; with the base model
    whole again it makes the run again, naming each file; a damaged marker too."""
    from lsa.__main__ import EXIT, main

    base, run, made = smoke
    job = ["finetune", "--profile", "smoke", "--run", "pi_a0_s0"]
    files = {"base": recorded(base), "pi_a0_s0": recorded(run)}
    assert len(files["base"]) == 9 and len(files["pi_a0_s0"]) == 7
    for r, label in ((base, "base"), (run, "pi_a0_s0")):
        for name in files[label]:
            DAMAGES[damage](r.folder / name)
    assert main(["check", "--profile", "smoke"]) == EXIT["check"]
    err = capsys.readouterr().err
    assert all(any(line.startswith(f"lsa check: run {label}: ") and names(line, name)
                   for line in err.splitlines()) for label in files for name in files[label])
    assert main(job) == EXIT["damaged"]
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("lsa finetune: the base model ") and made == []
    assert all(names(line, name) for name in files["base"])
    made_run(base.folder, tokenizer=True)
    assert main(job) == 0 and made == [run.id] and output_problems(run.folder) == []
    out = capsys.readouterr().out
    assert all(names(out, name) for name in files["pi_a0_s0"])
    DAMAGES[damage](run.folder / FINISHED)
    if damage != "deleted":  # else not made: check counts it so, the job makes it
        assert main(["check", "--profile", "smoke"]) == EXIT["check"]
        assert f"lsa check: run pi_a0_s0: {FINISHED}" in capsys.readouterr().err
    assert main(job) == 0 and made == [run.id] * 2 and output_problems(run.folder) == []


def test_a_notebook_run_alone_makes_a_damaged_run_again(smoke, capsys):
    """What a notebook run alone trains (``lsa.jobs.ensure``) is verified as a job by hand
    verifies it: a finished run whose weights changed is made again, never read."""
    from lsa.jobs import ensure

    _, run, made = smoke
    DAMAGES["changed"](run.folder / "model" / "model.safetensors")
    ensure(load_config(profile="smoke"), run)
    assert made == [run.id] and output_problems(run.folder) == []
    assert "model/model.safetensors: changed since the run was finished" in \
        capsys.readouterr().out

