"""scripts/gpu_check.py (run by scripts/gpu_check.sh on a lent GPU): its CPU path."""

import importlib.util

from conftest import ROOT


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_check_runs_its_cpu_path(tmp_path):
    report = load_script().run(tiny=True, out=tmp_path)
    cost = report["longqlora_cost"]
    assert cost["ce"]["tokens_per_s"] > 0 and cost["ce+0.1sce"]["tokens_per_s"] > 0
    assert set(report["perplexity_after_regularized_steps"]) == {256, 512}
    assert "not checked" in report["nf4"] or report["nf4"]["loaded"]
