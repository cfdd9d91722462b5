"""The regularizer's cost benchmark (lsa/bench.py)."""

import json

import pytest
import torch


def test_peak_memory_sees_a_known_allocation():
    from lsa.bench import PeakMemory

    with PeakMemory(torch.device("cpu")) as mem:
        x = torch.ones(50 * 2**20 // 4)  # 50 MiB
        x.add_(1)
        del x
    assert 45 * 2**20 < mem.peak < 200 * 2**20


def test_bench_quick_writes_its_table(tmp_path):
    from argparse import Namespace

    from lsa.bench import VARIANTS, main

    out = tmp_path / "bench.json"
    assert main(Namespace(quick=True, repeats=1, out=str(out), memory_only=False)) == 0
    result = json.loads(out.read_text())["results"][0]
    assert set(result["time_s"]) == set(VARIANTS)
    assert result["ratios"]["equal_sequences_time"] > 0


def test_bench_jobs_ratios_and_the_choice_they_make():
    from lsa.throughput import best_threads, ratios

    r = ratios({"alone_1t": [2.0], "alone_2t": [3.0], "pair_1t": [1.9, 1.9]})
    assert r == {"speedup_2t": 1.5, "pair": pytest.approx(1.9)}
    assert best_threads(r) == 1  # two jobs at once do 1.9x the work of one, one at 2 threads 1.5x
    assert best_threads({"speedup_2t": 1.95, "pair": 1.9}) == 2


@pytest.mark.slow  # six processes
def test_bench_jobs_measures_every_setting_of_a_kind():
    from lsa.throughput import SETTINGS, bench, markdown

    result = bench("smoke", ("evaluation",), seconds=0.3, progress=False)["evaluation"]
    assert [len(result["units_per_s"][s]) for s in SETTINGS] == [1, 1, 2]  # the pair: 2 jobs
    assert all(rate > 0 for rates in result["units_per_s"].values() for rate in rates)
    assert result["best_threads"] == (1 if result["pair"] > result["speedup_2t"] else 2)
    assert "| evaluation |" in markdown("smoke", {"evaluation": result}, 0.3)
