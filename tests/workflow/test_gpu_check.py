"""scripts/gpu_check.py (run by scripts/gpu_check.sh on a lent GPU): its CPU path."""

import json

from support import ROOT
from support.gpu_check import load_script


def test_gpu_check_runs_its_cpu_path(tmp_path):
    report = load_script().run(tiny=True, out=tmp_path)
    cost = report["longqlora_cost"]
    assert cost["ce"]["tokens_per_s"] > 0 and cost["ce+0.1sce"]["tokens_per_s"] > 0
    assert set(report["perplexity_after_regularized_steps"]) == {256, 512}
    assert "not checked" in report["nf4"] or report["nf4"]["logits_finite"]
    # bf16 autocast moves CE by well under a percent and stays a finite, non-negative SCE
    close = report["bf16_vs_fp32"]
    assert close["ce"]["relative"] < 0.02
    assert close["misalign"]["fp32"] >= 0 and close["misalign"]["bf16"] >= 0


def test_a_failing_part_is_reported_and_the_other_still_runs(tmp_path, monkeypatch):
    script = load_script()

    def broken(*args, **kwargs):
        raise RuntimeError("no such kernel")

    monkeypatch.setattr(script, "run", broken)
    monkeypatch.setattr(script, "misalign_cost", lambda *args: {"gpu-small": {}})
    monkeypatch.setattr(script, "job_kinds", lambda out, profile, steps: {"jobs": {"ok": 1}})
    assert script.main(["--jobs", "--out", str(tmp_path)]) == 1
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert "RuntimeError: no such kernel" in report["quick"]["failed"]
    assert report["job_kinds"] == {"jobs": {"ok": 1}}
    assert report["misalign_cost"] == {"gpu-small": {}}
    assert len(report["date"]) == 10


def test_the_regularizers_cost_has_both_ratios_and_each_arms_tokens(tmp_path, monkeypatch):
    """misalign_cost (the bench's toy shape on the CPU): equal tokens and equal sequences, the
    tokens each arm runs through the model, and a profiler trace named relative to the
    repository."""
    monkeypatch.chdir(tmp_path)
    script = load_script()
    (result,) = script.misalign_cost(repeats=1, traces=tmp_path / "traces", tiny=True).values()
    assert set(result["ratios"]) == {"equal_tokens_time", "equal_tokens_memory",
                                     "equal_sequences_time", "equal_sequences_memory"}
    n_a = result["shape"]["batch"] * result["shape"]["l_train"]
    assert result["tokens"] == {"ce_a": n_a, "ce_ab": 2 * n_a, "ce_ab+sce": 2 * n_a,
                                "ce_a+sce": 2 * n_a}
    assert all(rate > 0 for rate in result["tokens_per_s"].values())
    trace = result["trace"]
    assert not trace.startswith("/") and (ROOT / trace).resolve().exists()
    events = json.loads((ROOT / trace).read_text())["traceEvents"]
    assert {"ce_a", "ce_ab", "ce_ab+sce", "ce_a+sce"} <= {e.get("name") for e in events}


