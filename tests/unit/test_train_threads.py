"""Thread count does not change a result: workflow/settings.yaml runs most CPU jobs at 1 thread
and the base model at 2, and a run's id does not record its threads. The same training steps
(CE-only and CE + SCE, the fine-tuning objective) and an evaluation forward at mini's width,
in processes at 1 and at 2 threads, give the same weights and logits: bit-identical on the CPU
the schedule was measured on (docs/bench/jobs-mini.md), equal to float32 rounding on others
(on a 2-core Xeon of 2026-12-02 the bits differ: a reduction split over two threads adds in
another order), so the test holds the tolerance, not the bits."""

import subprocess
import sys

import numpy as np

from lsa.config import load_config
from lsa.pipeline import workflow_settings

SCRIPT = r"""
import sys, torch
from lsa.models import scratch_llama
from lsa.train import Objective, compute_loss
torch.set_num_threads(int(sys.argv[1]))
model = scratch_llama(1024, 128, 2, 4, 344, 128, seed=0)   # mini's width, fewer layers
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
gen = torch.Generator().manual_seed(0)
for objective, batch, l in [(Objective(l_train=128), 16, 128),
                            (Objective(l_train=256, alpha=0.1), 4, 256)]:
    for _ in range(2):
        tokens = torch.randint(0, 1024, (batch, l + l // 2), generator=gen)
        compute_loss(model, tokens, l // 2, objective)["loss"].backward()
        opt.step()
        opt.zero_grad()
with torch.no_grad():
    logits = model(input_ids=torch.randint(0, 1024, (1, 512), generator=gen)).logits
flat = torch.cat([p.detach().flatten() for p in model.parameters()] + [logits.flatten()])
torch.save(flat, sys.argv[2])
print(torch.get_num_threads())
"""


def fingerprint(threads: int, path) -> tuple[int, np.ndarray]:
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(threads), str(path)],
                         capture_output=True, text=True, check=True)
    import torch

    return int(out.stdout.split()[0]), torch.load(path).numpy()


def test_one_and_two_threads_give_the_same_numbers(tmp_path):
    (one, a), (two, b) = fingerprint(1, tmp_path / "1.pt"), fingerprint(2, tmp_path / "2.pt")
    assert (one, two) == (1, 2)  # the setting took effect
    # float32 rounding, grown by four AdamW steps: AdamW moves a weight by up to lr (1e-3) per
    # step whatever its gradient's size, so a rounding difference in a gradient near 0 can move
    # a weight by a fraction of lr (on the 2-core Xeon: 96 % of the values differ in their last
    # bits, by at most 3.0e-4)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-3)


def test_cpu_schedule_gives_the_base_model_both_cores_and_the_rest_one():
    """The schedule of the measurement (docs/bench/jobs-mini.md) as settings.yaml declares it."""
    settings = workflow_settings()
    for profile in ("smoke", "mini", "mini-full"):
        assert settings.resources(profile, "base").threads == 2
        for kind in ("finetune", "probe", "babilong", "babilong-eval", "longbench"):
            assert settings.resources(profile, kind).threads == 1, (profile, kind)
    assert settings.section("02_misalignment_correlation").threads == 1
    for profile in ("smoke", "mini"):  # Section 3's grid (a run): its workers fill its threads
        workers = load_config(profile=profile).synthetic.workers
        assert settings.resources(profile, "synthetic").threads == workers == 2
        assert settings.section("01_synthetic_study").threads == 1  # it reads the run
