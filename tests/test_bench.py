"""The regularizer's cost benchmark (lsa/bench.py)."""

import json

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
