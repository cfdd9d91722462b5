"""A finished run's marker (lsa.markers) records the sha256 of every file of its folder and its
own: any file cut, emptied, deleted or changed by one byte after the job, the weights
included, is named by its path (issue 73); a run finished before markers recorded checksums is
not verified; a model read from outside the folder is recorded, not verified again. The job by
hand and ``lsa check`` on such folders: tests/workflow/test_job_by_hand.py; on a real smoke
run: tests/e2e/test_job_by_hand_real_run.py."""

import json

import numpy as np
import pytest
from safetensors.numpy import save_file
from support import DAMAGES

from lsa.files import sha256, write_json
from lsa.markers import FINISHED, is_finished, mark_finished, output_problems, read_summary

#: a base model's folder as its job leaves it (a fine-tuning run's: the same but tokenizer/)
FILES = ("config.json", "metrics.jsonl", "metrics.json", "run_info.json", "model/config.json",
         "model/generation_config.json", "model/model.safetensors", "tokenizer/tokenizer.json",
         "tokenizer/tokenizer_config.json", FINISHED)


def finished_run(folder, inputs=()):
    """A small finished base model's folder with every kind of file (``FILES``)."""
    for name in FILES:
        if name.endswith(".json") and name != FINISHED:
            write_json(folder / name, {"name": name, "value": 1.5})
    (folder / "metrics.jsonl").write_text('{"step": 1, "ce": 2.0}\n{"step": 2, "ce": 1.9}\n')
    save_file({"w": np.arange(1024, dtype=np.float32)}, str(folder / "model" / "model.safetensors"))
    (folder / "checkpoint").mkdir()  # removed once the run is marked, never recorded
    (folder / "checkpoint" / "step.json").write_text('{"step": 2}')
    mark_finished(folder, {"steps": 2}, inputs=inputs)
    assert output_problems(folder) == []


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("name", FILES)
def test_every_damage_to_every_file_of_a_finished_run_is_named_by_its_path(tmp_path, name,
                                                                             damage):
    finished_run(tmp_path)
    DAMAGES[damage](tmp_path / name)
    (problem,) = output_problems(tmp_path)
    assert problem.startswith(name), problem
    # a deleted marker: the run is not finished, made again like any run not made
    assert is_finished(tmp_path) == (name != FINISHED or damage != "deleted")


def test_the_marker_records_every_file_and_its_own_checksum_apart_from_the_summary(tmp_path):
    finished_run(tmp_path)
    marker = json.loads((tmp_path / FINISHED).read_text())
    assert sorted(marker["files"]) == sorted(set(FILES) - {FINISHED})
    assert marker["files"]["model/model.safetensors"] == sha256(
        tmp_path / "model" / "model.safetensors")
    assert not (tmp_path / "checkpoint").exists() and "inputs" not in marker
    assert read_summary(tmp_path) == {"steps": 2}  # the job's summary, as before
    (tmp_path / FINISHED).write_text(json.dumps(marker))  # another layout, the same content
    assert output_problems(tmp_path) == []
    for changed in ({**marker, "steps": 3},  # JSON that parses, saying something else
                    {**marker, "files": {**marker["files"], "metrics.json": "0" * 64}}):
        (tmp_path / FINISHED).write_text(json.dumps(changed))
        assert output_problems(tmp_path)[0] == (f"{FINISHED}: changed since the run was "
                                                "finished (its own checksum)")


def test_a_run_finished_before_markers_recorded_checksums_is_not_verified(tmp_path):
    finished_run(tmp_path)
    write_json(tmp_path / FINISHED, {"steps": 2})  # a marker as jobs wrote it before
    assert output_problems(tmp_path) == [
        f"{FINISHED} records no checksums of the run's files (the run was finished before "
        "runs recorded them): not verified"]


def test_a_model_read_from_outside_the_folder_is_recorded_not_verified_again(tmp_path):
    """The reference probe's SmolLM2 copy under data/ (``lsa.jobs.loaded_from``: the folder a
    model was loaded from; nothing for a model built here)."""
    from transformers import AutoModelForCausalLM

    from lsa.jobs import loaded_from
    from lsa.models import scratch_llama

    model = scratch_llama(32, 8, 1, 2, 16, 16)
    assert loaded_from(model) == []
    model.save_pretrained(tmp_path / "cache")
    read = loaded_from(AutoModelForCausalLM.from_pretrained(tmp_path / "cache"))
    assert sorted(p.name for p in read) == ["config.json", "generation_config.json",
                                            "model.safetensors"]
    finished_run(tmp_path / "run", inputs=read)
    marker = json.loads((tmp_path / "run" / FINISHED).read_text())
    assert marker["inputs"] == {str(p): sha256(p) for p in read}
    DAMAGES["changed"](read[-1])  # a cache damaged later does not damage the run
    assert output_problems(tmp_path / "run") == []
