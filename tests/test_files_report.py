import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from lsa import claims as report
from lsa import files, paths, seeding, stats


def draw():
    import random

    return random.random(), np.random.rand(), torch.rand(1).item()


def test_seed_everything_is_reproducible():
    seeding.seed_everything(3)
    a = draw()
    seeding.seed_everything(3)
    assert draw() == a
    seeding.seed_everything(4)
    assert draw() != a


def test_atomic_write_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "sub" / "x.json"
    files.write_json(target, {"a": np.float32(1.5), "b": float("nan"), "c": float("inf"),
                           "d": torch.tensor(2), "e": (1, 2), "p": paths.ROOT})
    assert json.loads(target.read_text()) == {"a": 1.5, "b": None, "c": "inf", "d": 2,
                                              "e": [1, 2], "p": str(paths.ROOT)}
    assert [p.name for p in target.parent.iterdir()] == ["x.json"]


def test_atomic_write_keeps_the_old_file_when_interrupted(tmp_path):
    target = tmp_path / "m.json"
    files.write_json(target, {"ok": 1})

    class Boom:
        pass

    with pytest.raises(TypeError):
        files.write_json(target, {"bad": Boom()})
    assert json.loads(target.read_text()) == {"ok": 1}
    assert len(list(tmp_path.iterdir())) == 1


def test_save_metrics_and_tables(tmp_path):
    from lsa.config import SyntheticConfig

    cfg = SyntheticConfig(steps=3)
    files.save_metrics(tmp_path, {"x": 1}, cfg, started=0.0)
    info = json.loads((tmp_path / "run_info.json").read_text())
    assert info["config"] == cfg.to_dict() and info["seed"] == 0
    assert info["packages"]["torch"] == torch.__version__.split("+")[0] or info["packages"]["torch"]
    assert info["wall_time_s"] > 0
    csv, md = files.save_table(pd.DataFrame({"a": [1.23456, 2.0], "b": ["x", "y"]}), tmp_path / "t")
    assert pd.read_csv(csv)["b"].tolist() == ["x", "y"]
    assert "1.235" in md.read_text()


@pytest.mark.parametrize("wins, total, better, verdict", [
    (3, 3, True, "agrees"), (2, 3, True, "agrees"), (1, 3, True, "inconclusive"),
    (0, 3, False, "disagrees"), (2, 3, False, "inconclusive"), (1, 2, True, "inconclusive"),
    (0, 0, True, "not run"),
])
def test_majority_verdict(wins, total, better, verdict):
    assert stats.majority_verdict(wins, total, better) == verdict


def test_reference_values_are_graded_and_found():
    assert all(ref.grade in ("A", "B", "?") for ref in report.PAPER.values())
    assert report.paper("table2/clex_redpajama/a0.1/longbench").value == 26.6
    with pytest.raises(KeyError, match="no paper reference"):
        report.paper("table99")


def test_fmt():
    assert report.fmt(float("nan")) == "n/a"
    assert report.fmt(0.000123456) == "0.000123"
    assert not math.isnan(float(report.fmt(1.5)))
