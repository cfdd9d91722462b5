import math

import numpy as np
import pandas as pd
import pytest
import torch

from lsa.config import SyntheticConfig
from lsa.sections.synthetic.claims import synthetic_claims
from lsa.sections.synthetic.tables import per_run_summary, relative_rmse, summarize
from lsa.synthetic import (
    BOS,
    OutRep,
    RunSpec,
    SyntheticTransformer,
    alibi_slopes,
    make_batch,
    rotate,
    run_grid,
    run_specs,
    sinusoidal_table,
)


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("task", ["mean", "mean_uniform", "length", "sum"])
def test_batch_layout_and_targets(task):
    lengths = torch.tensor([1, 3, 7, 10])
    tokens, target = make_batch(task, lengths, gen())
    assert tokens.shape == (4, 11)
    assert (tokens[:, 0] == BOS).all()
    bits = tokens[:, 1:]
    for i, length in enumerate(lengths.tolist()):
        row = bits[i]
        assert set(row[:length].tolist()) <= {0, 1}
        assert (row[length:] == 0).all(), "right padding is zeros"
        count = int(row[:length].sum())
        expected = {"mean": count / length, "mean_uniform": count / length,
                    "length": float(length), "sum": float(count)}[task]
        assert target[i].item() == pytest.approx(expected)


def test_mean_uniform_count_is_uniform():
    lengths = torch.full((20000,), 4)
    tokens, target = make_batch("mean_uniform", lengths, gen(1))
    counts = np.bincount(tokens[:, 1:].sum(1).numpy(), minlength=5)
    assert counts.shape == (5,)
    np.testing.assert_allclose(counts / counts.sum(), 0.2, atol=0.015)
    # while Bernoulli(0.5) bits give Binomial(4, 0.5): 1/16 at the ends
    tokens, _ = make_batch("mean", lengths, gen(1))
    counts = np.bincount(tokens[:, 1:].sum(1).numpy(), minlength=5) / 20000
    assert counts[0] == pytest.approx(1 / 16, abs=0.01)


@pytest.mark.parametrize("name", ["identity", "sqrt", "log", "inv_sqrt"])
@pytest.mark.parametrize("shift", [0.0, 1.0])
def test_outrep_inverse(name, shift):
    y = torch.tensor([1.0, 2.0, 5.0, 50.0], dtype=torch.float64)
    rep = OutRep(name, shift)
    torch.testing.assert_close(rep.inverse(rep.forward(y)), y)


def test_outrep_values():
    y = torch.tensor([4.0], dtype=torch.float64)
    assert OutRep("sqrt").forward(y).item() == 2.0
    assert OutRep("log", 1.0).forward(y).item() == pytest.approx(math.log(5))
    assert OutRep("inv_sqrt").forward(y).item() == 0.5
    assert math.isfinite(OutRep("inv_sqrt").inverse(torch.tensor([-3.0])).item())


def test_sinusoidal_table():
    table = sinusoidal_table(5, 4)
    assert table[0].tolist() == [0.0, 1.0, 0.0, 1.0]
    assert table[3, 0].item() == pytest.approx(math.sin(3))
    assert table[3, 3].item() == pytest.approx(math.cos(3 / 100))


def test_alibi_slopes():
    assert alibi_slopes(4).tolist() == [2**-2, 2**-4, 2**-6, 2**-8]


def test_rope_scores_depend_only_on_offset():
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)

    def score(i, j):
        qi = rotate(q, torch.tensor([i]))
        kj = rotate(k, torch.tensor([j]))
        return (qi * kj).sum().item()

    assert score(3, 1) == pytest.approx(score(10, 8), abs=1e-5)
    assert score(0, 0) == pytest.approx((q * k).sum().item(), abs=1e-6)
    assert rotate(q, torch.tensor([7])).norm().item() == pytest.approx(q.norm().item(), 1e-5)


@pytest.mark.parametrize("encoding", SyntheticTransformer.ENCODINGS)
def test_model_is_causal_and_reads_the_last_real_token(encoding):
    torch.manual_seed(0)
    model = SyntheticTransformer(encoding, d_model=16, n_layers=2, n_heads=2,
                                     max_positions=16).eval()
    tokens = torch.tensor([[2, 1, 0, 1, 1, 0, 1]])
    changed = tokens.clone()
    changed[0, 5:] = 1 - changed[0, 5:]  # change what comes after position 4
    lengths = torch.tensor([4])
    with torch.no_grad():
        a, b = model(tokens, lengths), model(changed, lengths)
        truncated = model(tokens[:, :5], lengths)
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(a, truncated)


def test_alibi_bias_matches_definition():
    model = SyntheticTransformer("alibi", d_model=8, n_heads=2)
    bias = model.attention_bias(3, "cpu")
    slopes = alibi_slopes(2)
    assert bias.shape == (2, 3, 3)
    assert bias[1, 2, 0].item() == pytest.approx(-2 * slopes[1].item())
    assert bias[0, 0, 1].item() == float("-inf")


def test_learned_positions_beyond_table_fail_clearly():
    model = SyntheticTransformer("learned", d_model=8, n_heads=2, max_positions=4)
    with pytest.raises(ValueError, match="max_positions=4"):
        model(torch.zeros(1, 6, dtype=torch.long), torch.tensor([5]))


TINY = dict(tasks=["mean", "length"], encodings=["nope", "rope"], outrep_tasks=["length"],
            outrep_transforms=["sqrt"], outrep_encodings=["nope"], steps=5, test_max_len=12,
            test_samples=4, d_model=8, n_heads=2)


def test_run_specs_cover_the_grid_once():
    cfg = SyntheticConfig(**TINY, seeds=2)
    specs = run_specs(cfg)
    # 2 tasks x 2 encodings + (length, nope, sqrt) -- (length, nope, identity) is not repeated
    assert len(specs) == 2 * (2 * 2 + 1)
    assert len(set(specs)) == len(specs)
    assert RunSpec("length", "nope", "sqrt", 1) in specs


def test_same_seed_same_numbers_and_workers_do_not_matter():
    cfg = SyntheticConfig(**TINY)
    a = run_grid(cfg, progress=False)
    b = run_grid(cfg, progress=False)
    pd.testing.assert_frame_equal(a, b)
    c = run_grid(SyntheticConfig(**{**TINY, "workers": 2}), progress=False)
    pd.testing.assert_frame_equal(a, c)
    d = run_grid(SyntheticConfig(**{**TINY, "seed": 1}), progress=False)
    assert not np.allclose(a["mse"], d["mse"])



def test_the_grid_is_a_run_whose_table_reads_back_exactly(tmp_path):
    """Section 3's grid is a run of kind ``synthetic``: its identity is every setting but the
    worker count; made into its folder (``make``), its table reads back (``read_synthetic``)
    equal to the grid's, float for float, and a finished run is reused, not retrained."""
    import dataclasses

    from lsa.config import load_config
    from lsa.runs import RunSet
    from lsa.runtable import read_synthetic
    from lsa.synthetic import make

    pipe = dataclasses.replace(load_config(profile="smoke"), synthetic=SyntheticConfig(**TINY))
    plan = RunSet(pipe, root=tmp_path)
    run = plan.get("synthetic", "synthetic")
    assert run.identity == {k: v for k, v in SyntheticConfig(**TINY).to_dict().items()
                            if k != "workers"}
    assert run.command == ["synthetic", "--run", "synthetic"]
    assert run in plan.used_by(["synthetic"]) and run in list(plan)
    two = dataclasses.replace(pipe, synthetic=SyntheticConfig(**{**TINY, "workers": 2}))
    assert RunSet(two).get("synthetic", "synthetic").id == run.id
    other = dataclasses.replace(pipe, synthetic=SyntheticConfig(**{**TINY, "steps": 6}))
    assert RunSet(other).get("synthetic", "synthetic").id != run.id
    folder = make(pipe.synthetic, run, progress=False)
    assert run.finished and run.problems() == []
    pd.testing.assert_frame_equal(read_synthetic(plan), run_grid(pipe.synthetic, progress=False))
    stamp = (folder / "train_summary.json").stat().st_mtime_ns
    assert make(pipe.synthetic, run, progress=False) == folder
    assert (folder / "train_summary.json").stat().st_mtime_ns == stamp


def test_no_run_of_the_grid_where_no_section_reads_it():
    import dataclasses

    from lsa.config import load_config
    from lsa.runs import RunSet

    pipe = load_config(profile="smoke")
    sections = {k: dataclasses.replace(v, uses_runs=[r for r in v.uses_runs if r != "synthetic"])
                for k, v in pipe.sections.items()}
    assert sections != pipe.sections
    plan = RunSet(dataclasses.replace(pipe, sections=sections))
    assert plan.synthetic == {} and not any(r.kind == "synthetic" for r in plan)

def fake_per_length(rows):
    return pd.DataFrame(rows, columns=["task", "encoding", "transform", "replicate", "length",
                                       "mse", "train_loss"])


def test_summaries_by_hand():
    cfg = SyntheticConfig(train_min_len=1, train_max_len=2, test_max_len=4)
    rows = []
    for rep, scale in [(0, 1.0), (1, 3.0)]:
        for length, mse in [(1, 1.0), (2, 3.0), (3, 10.0), (4, 30.0)]:
            rows.append(["length", "nope", "identity", rep, length, mse * scale, 0.0])
    df = fake_per_length(rows)
    runs = per_run_summary(df, cfg)
    assert runs["in_range"].tolist() == [2.0, 6.0]
    assert runs["out_of_range"].tolist() == [20.0, 60.0]
    summary = summarize(df, cfg).iloc[0]
    assert summary["out_of_range_mean"] == 40.0
    assert summary["out_of_range_std"] == pytest.approx(np.std([20, 60], ddof=1))
    rel = relative_rmse(df, cfg)
    # length task: sqrt(mse)/length averaged over lengths 3, 4 (replicate 0)
    assert rel["rel_rmse"].iloc[0] == pytest.approx((math.sqrt(10) / 3 + math.sqrt(30) / 4) / 2)


def test_claim_verdicts_follow_the_numbers():
    cfg = SyntheticConfig(tasks=["mean", "length"], encodings=["nope"], outrep_tasks=["length"],
                          outrep_transforms=["sqrt"], train_max_len=2, test_max_len=3, seeds=1)
    rows = []
    for length in (1, 2, 3):
        rows.append(["mean", "nope", "identity", 0, length, 2e-5, 0.0])  # tiny: generalizes
        rows.append(["length", "nope", "identity", 0, length, 0.01 if length < 3 else 9.0, 0.0])
        rows.append(["length", "nope", "sqrt", 0, length, 0.01 if length < 3 else 4.0, 0.0])
    got = {c["id"]: c for c in synthetic_claims(fake_per_length(rows), cfg)}
    assert got["S3.1"]["verdict"] == "agrees"       # sqrt(2e-5)/0.5 < 0.05
    assert got["S3.2"]["verdict"] == "agrees"       # 2e-5 within 10x of 1e-5
    assert got["S3.3"]["verdict"] == "agrees"       # sqrt(9)/3 = 1 >> 0.05
    assert got["S3.4"]["verdict"] == "not run"      # mean_uniform not in the config
    assert got["S3.6"]["verdict"] == "agrees"       # 4 < 9
    rows = [r if r[2] != "sqrt" else r[:5] + [20.0, 0.0] for r in rows]
    got = {c["id"]: c for c in synthetic_claims(fake_per_length(rows), cfg)}
    assert got["S3.6"]["verdict"] == "disagrees"



def test_analyse_on_a_hand_built_run_table():
    """``analyse`` reads the grid from ``runs.synthetic`` (trains nothing): two seeds of length
    prediction whose out-of-range MSE is 20 and 60 (mean 40), sqrt beating identity in one
    seed of two, the claims on those numbers and the figures' settings on the result."""
    import dataclasses
    import types

    from lsa.config import load_config
    from lsa.runtable import RunTables
    from lsa.sections import synthetic

    cfg = SyntheticConfig(tasks=["length"], encodings=["nope"], outrep_tasks=["length"],
                          outrep_transforms=["sqrt"], train_min_len=1, train_max_len=2,
                          test_max_len=4, seeds=2)
    rows = []
    for rep, scale, sqrt_scale in [(0, 1.0, 0.5), (1, 3.0, 4.0)]:
        for length, mse in [(1, 1.0), (2, 3.0), (3, 10.0), (4, 30.0)]:
            rows.append(["length", "nope", "identity", rep, length, mse * scale, 0.0])
            rows.append(["length", "nope", "sqrt", rep, length, mse * sqrt_scale, 0.0])
    pipe = dataclasses.replace(load_config(profile="smoke"), synthetic=cfg)
    result = synthetic.analyse(pipe, RunTables(synthetic=fake_per_length(rows)), [])
    summary = result.summary.set_index("transform")
    assert summary.loc["identity", "out_of_range_mean"] == 40.0
    assert summary.loc["sqrt", "out_of_range_mean"] == pytest.approx((10 + 80) / 2)
    assert (summary["seeds"] == 2).all()
    assert result.metrics == {"summary": result.summary.to_dict(orient="records")}
    got = {c["id"]: c for c in result.claims}
    assert got["S3.1"]["verdict"] == got["S3.2"]["verdict"] == "not run"  # no mean task
    assert got["S3.3"]["verdict"] == "agrees"       # sqrt(10)/3 >> 0.05: does not generalize
    assert got["S3.6"]["claim"] == "OutRep sqrt improves length prediction (nope)"
    assert "ratio sqrt/identity = 1.12; better in 1/2 seed(s)" in got["S3.6"]["ours"]  # 45/40
    assert got["S3.6"]["verdict"] == "inconclusive"  # a higher mean, one seed of two better
    assert list(result.saved_tables()) == ["per_length", "summary"]
    setup = types.SimpleNamespace(profile="smoke")
    assert synthetic.train_span(setup, result) == (0.5, 2.5)
    assert list(synthetic.loss_by_length(setup, result)["transform"].unique()) == ["identity"]
    assert "2 seed(s)" in synthetic.describe(setup, result)
    with pytest.raises(ValueError, match="synthetic"):
        synthetic.analyse(pipe, RunTables(), [])

# --- the pool's workers die with the process that started them (a killed kernel or job) -----

_KILLED_RUN = """
import sys
from lsa import synthetic as model
from lsa.config import SyntheticConfig

class Bar:  # says when the first run came back: the workers are past their initializer
    def __init__(self, **kw): self.n = 0
    def update(self):
        self.n += 1
        if self.n == 1: print("first run back", flush=True)
    def close(self): pass

if __name__ == "__main__":  # spawn imports this file again in each worker
    model.tqdm = Bar
    model.run_grid(SyntheticConfig(**{TINY!r}, seeds=400, workers=2))
    print("finished", flush=True)
"""


def _children(pid: int) -> list[int]:
    from pathlib import Path

    out = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines()
                          if ":\t" in line)
        except OSError:
            continue
        if fields.get("PPid", "").strip() == str(pid):
            out.append(int(status.parent.name))
    return out


def _alive(pid: int) -> bool:
    from pathlib import Path

    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")  # a zombie has ended (its reaper has not collected it yet)


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"),
                    reason="PR_SET_PDEATHSIG is Linux's")
def test_workers_die_when_their_parent_is_killed(tmp_path):
    """A synthetic-study run in workers, its parent SIGKILLed mid-grid (as a kernel whose job is
    killed): no process it started outlives it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from support import ROOT

    script = tmp_path / "run.py"
    script.write_text(_KILLED_RUN.replace("{TINY!r}", repr(TINY)))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        assert proc.stdout.readline().strip() == "first run back"
        workers = _children(proc.pid)
        assert len([w for w in workers if "spawn_main" in
                    open(f"/proc/{w}/cmdline").read()]) == 2, workers
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL  # killed mid-grid, not finished
        deadline = time.monotonic() + 60  # a bound on the wait, not a timing assertion
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [w for w in workers if _alive(w)] == []
    finally:
        if proc.poll() is None:
            proc.kill()


def test_an_outrep_claim_on_another_task_than_fig_1c_is_graded_b_at_most():
    """Fig. 1c shows OutRep on length prediction: the same reference read for another task
    (sum) is a weaker source (issue 61: grades follow their sources)."""
    cfg = SyntheticConfig(tasks=["length"], encodings=["nope"], outrep_tasks=["length", "sum"],
                          outrep_transforms=["sqrt"], train_max_len=2, test_max_len=3, seeds=1)
    rows = [[task, "nope", f, 0, length, 1.0, 0.0] for task in ("length", "sum")
            for f in ("identity", "sqrt") for length in (1, 2, 3)]
    grades = {c["claim"]: c["grade"] for c in synthetic_claims(fake_per_length(rows), cfg)}
    assert grades["OutRep sqrt improves length prediction (nope)"] == "A"
    assert grades["OutRep sqrt improves sum prediction (nope)"] == "B"
