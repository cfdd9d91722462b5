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


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_a_written_file_has_the_mode_the_umask_gives(tmp_path, mask, mode):
    """An atomic write (metrics.json, config.json, a table) is readable by whom the umask
    says (a group sharing a results folder under 002), not mkstemp's 0600; the umask is left
    as it was."""
    import os
    import stat

    old = os.umask(mask)
    try:
        assert files.umask() == mask
        written = [files.write_json(tmp_path / "metrics.json", {"a": 1}),
                   files.atomic_write_bytes(tmp_path / "model" / "w.bin", b"\0" * 10),
                   files.write_packed(tmp_path / "log.jsonl", b"{}\n")]
        (tmp_path / "plain").write_text("x")  # what open() gives, for reference
        assert files.umask() == mask
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "plain").stat().st_mode) == mode
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == mode, path


def test_a_command_names_a_path_quoted_for_the_shell(tmp_path):
    import shlex

    inside = paths.ROOT / "docs" / "results" / "my snapshot"
    assert files.shell_path(inside) == "'docs/results/my snapshot'"
    assert shlex.split(files.shell_path(tmp_path / "a b" / "c'd")) == [str(tmp_path / "a b" /
                                                                            "c'd")]
    assert files.shell_path(paths.ROOT / "results") == "results"
