"""Thread count does not change a number: workflow/settings.yaml runs most CPU jobs at 1 thread
and the base model at 2, and a run's id does not record its threads. The same training steps
(CE-only and CE + SCE, the fine-tuning objective) and an evaluation forward at mini's width,
in processes at 1 and at 2 threads, give bit-identical weights and logits."""

import subprocess
import sys

from lsa.config import load_config
from lsa.pipeline import workflow_settings

SCRIPT = r"""
import hashlib, sys, torch
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
digest = hashlib.sha256()
for p in model.parameters():
    digest.update(p.detach().numpy().tobytes())
digest.update(logits.numpy().tobytes())
print(torch.get_num_threads(), digest.hexdigest())
"""


def fingerprint(threads: int) -> tuple[int, str]:
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(threads)], capture_output=True,
                         text=True, check=True)
    used, digest = out.stdout.split()
    return int(used), digest


def test_one_and_two_threads_give_the_same_bits():
    (one, a), (two, b) = fingerprint(1), fingerprint(2)
    assert (one, two) == (1, 2)  # the setting took effect
    assert a == b


def test_cpu_schedule_gives_the_base_model_both_cores_and_the_rest_one():
    """The schedule of the measurement (docs/bench/jobs-mini.md) as settings.yaml declares it."""
    settings = workflow_settings()
    for profile in ("smoke", "mini", "mini-full"):
        assert settings.resources(profile, "base").threads == 2
        for kind in ("finetune", "probe", "babilong", "babilong-eval", "longbench"):
            assert settings.resources(profile, kind).threads == 1, (profile, kind)
    assert settings.section("02_misalignment_correlation").threads == 1
    for profile in ("smoke", "mini"):  # the synthetic study's workers fill what it asks for
        workers = load_config(profile=profile).synthetic.workers
        assert settings.section("01_synthetic_study").threads == workers == 2
