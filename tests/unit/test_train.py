"""The trainer: same data for CE and regularized runs, reproducibility, resuming, NaN stops,
LoRA, the CE-only step, fp32 master weights (several processes:
tests/e2e/test_train_processes.py)."""

import numpy as np
import pytest
import torch

from lsa.config import OptimConfig
from lsa.data.tokens import TokenStream
from lsa.markers import read_log
from lsa.models import scratch_llama
from lsa.train import Objective, lr_lambda, train


@pytest.fixture(scope="module")
def stream():
    return TokenStream(np.random.default_rng(0).integers(0, 64, 3000).astype(np.uint16), "t")


def tiny(seed=1):
    return scratch_llama(vocab_size=64, hidden_size=16, n_layers=2, n_heads=2,
                         intermediate_size=32, base_window=32, seed=seed)


def optim(**kw):
    return OptimConfig(**{"steps": 4, "batch_size": 2, "lr": 1e-3, "warmup_steps": 1, **kw})


@pytest.mark.parametrize("half", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_bf16_weights_keep_small_updates(stream, tmp_path, half):
    """paper: a bf16 base, full fine-tuning at lr 2e-5. AdamW on bf16 weights rounds most
    updates (~lr per step, below half a bf16 ulp of a weight of 0.02) away; fp32 master weights
    keep them, so the run moves its weights as the same run in fp32 does (from the same,
    bf16-representable start), up to bf16 compute. The model keeps the dtype it was loaded in.
    fp16 goes the same way, with loss scaling."""
    cfg = optim(steps=8, lr=2e-5, warmup_steps=0, schedule="constant")
    moved, ce = {}, {}
    for name, dtype in (("fp32", torch.float32), ("bf16", half)):
        model = tiny().to(half).to(dtype)
        before = {n: p.detach().float().clone() for n, p in model.named_parameters()
                  if n.endswith("proj.weight")}
        train(model, stream, tmp_path / name, cfg, Objective(l_train=16), seed=0,
              progress=False)
        assert {p.dtype for p in model.parameters()} == {dtype}
        moved[name] = torch.cat([(model.get_parameter(n).float() - w).flatten()
                                 for n, w in before.items()])
        ce[name] = [r["ce"] for r in read_log(tmp_path / name)]
    # today's bf16 AdamW: ratio 0.31, cosine 0.50; fp32 master weights: 0.88, 0.90
    assert moved["bf16"].abs().mean() / moved["fp32"].abs().mean() > 0.75
    assert torch.nn.functional.cosine_similarity(moved["bf16"], moved["fp32"], dim=0) > 0.8
    assert ce["bf16"] == pytest.approx(ce["fp32"], rel=0.02)


class Killed(Exception):
    pass


class DyingStream:
    """A stream that dies at its ``die_at``-th sample (the kill of a running job)."""

    def __init__(self, stream, die_at):
        self.stream, self.die_at, self.calls = stream, die_at, 0

    def sample(self, *args):
        self.calls += 1
        if self.calls == self.die_at:
            raise Killed
        return self.stream.sample(*args)


@pytest.mark.parametrize("alpha", [0.0, 0.1])
def test_resumed_run_logs_every_step_once(stream, tmp_path, alpha):
    objective = Objective(l_train=16, alpha=alpha)
    train(tiny(), stream, tmp_path / "full", optim(steps=6), objective, seed=2, progress=False)
    cut = optim(steps=6, save_every=2)
    with pytest.raises(Killed):  # dies during step 5: checkpoint at 2 and 4, steps 1-4 logged
        train(tiny(), DyingStream(stream, 5), tmp_path / "cut", cut, objective, seed=2,
              progress=False)
    with pytest.raises(Killed):  # resumed at 4, dies during step 6: step 5 logged
        train(tiny(), DyingStream(stream, 2), tmp_path / "cut", cut, objective, seed=2,
              progress=False)
    assert [r["step"] for r in read_log(tmp_path / "cut")] == [1, 2, 3, 4, 5]
    summary = train(tiny(), stream, tmp_path / "cut", cut, objective, seed=2, progress=False)
    assert summary["resumed_from"] == 4

    def strip(log):
        return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in log]

    full, resumed = strip(read_log(tmp_path / "full")), strip(read_log(tmp_path / "cut"))
    assert [r["step"] for r in resumed] == [1, 2, 3, 4, 5, 6]
    assert [r.keys() for r in resumed] == [r.keys() for r in full]
    for a, b in zip(resumed, full):
        assert a == pytest.approx(b, rel=1e-5)


def test_logged_lr_is_the_schedule_of_each_step(stream, tmp_path):
    cfg = optim(steps=6, warmup_steps=2, lr=1e-2, schedule="cosine")
    train(tiny(), stream, tmp_path / "run", cfg, Objective(l_train=16), seed=0, progress=False)
    fn = lr_lambda(cfg)
    assert [r["lr"] for r in read_log(tmp_path / "run")] == pytest.approx(
        [cfg.lr * fn(step) for step in range(6)])


def test_ce_and_regularized_runs_see_the_same_data(stream):
    from lsa.train import step_batch

    for step in range(3):
        ce_tokens, e1, _ = step_batch(stream, 5, step, 0, 2, Objective(l_train=16))
        reg_tokens, e2, _ = step_batch(stream, 5, step, 0, 2, Objective(l_train=16, alpha=0.1))
        assert e1 == e2 and torch.equal(ce_tokens, reg_tokens)
    other, _, _ = step_batch(stream, 5, 0, 1, 2, Objective(l_train=16))
    assert not torch.equal(other, step_batch(stream, 5, 0, 0, 2, Objective(l_train=16))[0])


def test_training_is_reproducible_and_logs_every_step(stream, tmp_path):
    objective = Objective(l_train=16, alpha=0.1)
    logs, weights = [], []
    for name in ("a", "b"):
        model = tiny()
        train(model, stream, tmp_path / name, optim(), objective, seed=3, progress=False)
        logs.append(read_log(tmp_path / name))
        weights.append(torch.cat([p.flatten() for p in model.parameters()]))
    assert [r["step"] for r in logs[0]] == [1, 2, 3, 4]
    assert {"ce", "ce_a", "ce_b", "misalign", "l_extra", "lr"} <= set(logs[0][0])
    assert [r["ce"] for r in logs[0]] == [r["ce"] for r in logs[1]]
    torch.testing.assert_close(weights[0], weights[1])
    assert (tmp_path / "a" / "model" / "config.json").exists()


def test_resume_continues_exactly(stream, tmp_path):
    objective = Objective(l_train=16, alpha=0.1)
    full = tiny()
    train(full, stream, tmp_path / "full", optim(steps=6), objective, seed=2,
          progress=False)

    class Stop(Exception):
        pass

    import lsa.train as T

    original, calls = T.compute_loss, {"n": 0}

    def failing(*args, **kw):
        calls["n"] += 1
        if calls["n"] == 5:  # die during step 5, after the checkpoint at step 4
            raise Stop
        return original(*args, **kw)

    T.compute_loss = failing
    try:
        with pytest.raises(Stop):
            train(tiny(), stream, tmp_path / "cut", optim(steps=6, save_every=2),
                  objective, seed=2, progress=False)
    finally:
        T.compute_loss = original
    resumed = tiny()
    summary = train(resumed, stream, tmp_path / "cut", optim(steps=6, save_every=2),
                    objective, seed=2, progress=False)
    assert summary["resumed_from"] == 4
    full_log, cut_log = read_log(tmp_path / "full"), read_log(tmp_path / "cut")
    assert [r["step"] for r in cut_log] == [1, 2, 3, 4, 5, 6]
    assert [r["ce"] for r in cut_log] == pytest.approx([r["ce"] for r in full_log], rel=1e-5)
    for a, b in zip(full.parameters(), resumed.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_nan_loss_stops_with_a_clear_error(stream, tmp_path):
    from lsa.train import NonFiniteLossError

    model = tiny()
    with torch.no_grad():
        model.model.embed_tokens.weight.fill_(float("nan"))
    with pytest.raises(NonFiniteLossError, match="non-finite loss at step 0"):
        train(model, stream, tmp_path / "nan", optim(), Objective(l_train=16), seed=0,
              progress=False)
    assert not (tmp_path / "nan" / "model").exists()


def test_lora_wraps_all_linear_layers_but_the_head():
    from lsa.train import LoraSettings, apply_lora

    model = apply_lora(tiny(), LoraSettings(r=4, alpha=8))
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)
    assert any("q_proj" in n for n in names) and any("down_proj" in n for n in names)
    assert not any("lm_head" in n for n in names)


@pytest.mark.parametrize("ce_on, answers", [("a", False), ("b", True)])
def test_ce_only_step_loss_and_gradients_as_model_labels_give(stream, ce_on, answers):
    """The CE-only step (one window, fused CE): model(labels=...)'s loss and gradients, plus
    the answers' CE when a mask comes with the batch."""
    import torch.nn.functional as F

    from lsa.train import compute_loss

    objective = Objective(l_train=12, ce_on=ce_on, chunk_size=5, answer_weight=0.5)
    tokens = stream.sample(2, 12 + 3, torch.Generator().manual_seed(0))
    mask = None
    if answers:
        mask = torch.zeros_like(tokens, dtype=torch.bool)
        mask[0, 13] = mask[1, 8] = True
    model = tiny()
    parts = compute_loss(model, tokens, 3, objective, mask)
    parts["loss"].backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    window = tokens[:, 3:] if ce_on == "b" else tokens[:, :12]
    out = model(input_ids=window, labels=window)
    loss = out.loss
    if answers:
        target = mask[:, 3:][:, 1:]
        ans = F.cross_entropy(out.logits[:, :-1][target], window[:, 1:][target])
        assert parts["answer_ce"] == pytest.approx(ans.item(), rel=1e-5)
        loss = loss + 0.5 * ans
    loss.backward()
    assert parts["ce_" + ce_on] == pytest.approx(out.loss.item(), rel=1e-5)
    assert parts["ce"] == pytest.approx(loss.item(), rel=1e-5)
    for g, p in zip(got, model.parameters()):
        torch.testing.assert_close(g, p.grad, rtol=1e-4, atol=1e-6)


# --- the progress line of a job (no bar): when, what it says, and that it changes nothing ----


def test_progress_line_format_and_interval():
    from lsa.train import ProgressLog

    log = ProgressLog(steps=200, every_s=30.0, every_fraction=0.1, t0=1000.0)
    assert log.every_steps == 20
    assert not log.due(1, 1001.0) and log.due(20, 1005.0) and log.due(3, 1030.0)
    assert log.due(200, 1000.5)  # the last step always
    line = log.line(40, 1010.0, 3.41234, 20_480, "ft_yarn_a0.1_s0")
    assert line == ("[ft_yarn_a0.1_s0] step 40/200 (20%) loss 3.4123 | 2.05e+03 tokens/s | "
                    "10 s, 40 s left")
    assert not log.due(41, 1011.0) and log.due(60, 1011.0)  # counted from the last line
    resumed = ProgressLog(steps=10, start=6, t0=0.0)  # time left from this process's steps
    assert resumed.line(8, 4.0, 1.0, 100).endswith("4 s, 4 s left")  # 2 s a step, 2 to go


def test_progress_lines_go_to_the_job_log_and_change_no_number(stream, tmp_path, capfd):
    """A job (no bar) prints its progress lines to stderr; the run's log is the same, number
    for number, as with the bar (only the wall times differ)."""
    logs = {}
    for name, progress in (("bar", True), ("lines", False)):
        train(tiny(), stream, tmp_path / name, optim(steps=10), Objective(l_train=16, alpha=0.1),
              seed=3, progress=progress)
        logs[name] = [{k: v for k, v in r.items() if k != "elapsed_s"}
                      for r in read_log(tmp_path / name)]
        err = capfd.readouterr().err
        lines = [x for x in err.splitlines() if x.startswith(f"[{name}] step ")]
        if progress:
            assert lines == []
        else:  # every 10 % of 10 steps: one line a step, the last "10/10 (100%)"
            assert len(lines) == 10 and lines[-1].startswith("[lines] step 10/10 (100%) loss ")
            assert all(" tokens/s | " in x and x.endswith(" s left") for x in lines)
    assert logs["bar"] == logs["lines"]


def test_a_runs_objective_is_built_from_its_settings_once():
    """``Objective.for_run``: every option of the run and of the fine-tuning part reaches the
    objective, with the configuration's types; BABILong's changes go on top."""
    from dataclasses import fields

    from lsa.config import FinetuneConfig, RunConfig

    spec = RunConfig(name="r", method="pi", alpha=0.3, seed=2, ce_on="both", l_extra_setting=3,
                     divergence="jeffreys")
    ft = FinetuneConfig(l_train=64, reduce_terms="mean", detach="long", positions="paper",
                        chunk_size=7)
    obj = Objective.for_run(spec, ft)
    assert (obj.l_train, obj.alpha, obj.ce_on, obj.l_extra_setting, obj.divergence) == (
        64, 0.3, "both", 3, "jeffreys")
    assert (obj.reduce_terms, obj.detach, obj.positions, obj.chunk_size) == (
        "mean", "long", "paper", 7)
    babilong = Objective.for_run(spec, ft, 32, ce_on="b", answer_weight=0.5)
    assert (babilong.l_train, babilong.ce_on, babilong.answer_weight) == (32, "b", 0.5)
    options = obj.loss_options()  # what misalignment_loss receives: every field but the window
    assert set(options) == {f.name for f in fields(Objective)} - {"l_train", "l_extra_setting"}
    assert options["divergence"] == "jeffreys" and options["chunk_size"] == 7


def test_the_tied_head_notice_is_dropped_and_nothing_else(caplog):
    """accelerate's "Removed shared tensor" notice at each checkpoint is silenced for a head
    tied to its embedding (one tensor: ``test_resume_continues_exactly`` resumes such a
    model exactly), and only for it."""
    import logging

    assert tiny().config.tie_word_embeddings  # the resume test covers a tied head
    logger = logging.getLogger("accelerate.utils.other")
    with caplog.at_level(logging.WARNING, logger="accelerate.utils.other"):
        logger.warning("Removed shared tensor {'lm_head.weight'} while saving. This should be OK")
        logger.warning("Removed shared tensor {'base_model.model.lm_head.weight'} while saving")
        logger.warning("Removed shared tensor {'lm_head.weight', 'mlp.w'} while saving")
        logger.warning("something else")
    assert [r.getMessage() for r in caplog.records] == [
        "Removed shared tensor {'lm_head.weight', 'mlp.w'} while saving", "something else"]
