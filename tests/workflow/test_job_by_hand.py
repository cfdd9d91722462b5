"""A job run by hand (``python -m lsa finetune --run NAME``) verifies its run as the pipeline
does (``lsa.launch.verify_job``): a finished run whose files no longer verify is made again,
never taken as done; a damaged run it reads, or a damaged cache, stops it before any compute
with one line that names the file and the command that remakes it."""


import pytest
from support import ROOT, cut_file

from lsa.config import load_config
from lsa.files import write_json
from lsa.markers import mark_finished, output_problems
from lsa.runs import runs_of


def made_run(folder, tokenizer: bool = False) -> None:
    """A finished run folder whose files verify (one tensor file, a tokenizer for a base)."""
    import torch
    from safetensors.torch import save_file

    write_json(folder / "metrics.json", {"ppl": 10.0})
    write_json(folder / "run_info.json", {"seed": 0})
    (folder / "metrics.jsonl").write_text('{"step": 1}\n')
    (folder / "model").mkdir(parents=True, exist_ok=True)
    save_file({"w": torch.arange(4096, dtype=torch.float32)},
              folder / "model" / "model.safetensors")
    if tokenizer:
        write_json(folder / "tokenizer" / "tokenizer_config.json", {"eos_token": "<eos>"})
    mark_finished(folder, {"steps": 1})


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


