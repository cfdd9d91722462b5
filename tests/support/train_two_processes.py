"""A tiny CLEX training run for ``tests/e2e/test_train_processes.py``, started by
``accelerate launch`` with two CPU processes: ``python tests/support/train_two_processes.py OUT``.

Each process writes ``OUT/process<i>.json``: its summary, the CLEX scales it drew and a digest
of its final weights; the run folder is ``OUT/run``.
"""

import json
import sys
from pathlib import Path

import numpy as np
import torch

from lsa.config import OptimConfig
from lsa.data.tokens import TokenStream
from lsa.extend.clex import install_clex
from lsa.models import scratch_llama
from lsa.train import Objective, train

OPTIM = OptimConfig(steps=6, batch_size=2, grad_accum=2, lr=1e-2, warmup_steps=2,
                    schedule="cosine")


def main(out: Path) -> None:
    stream = TokenStream(np.random.default_rng(0).integers(0, 64, 2000).astype(np.uint16), "t")
    model = scratch_llama(vocab_size=64, hidden_size=16, n_layers=2, n_heads=2,
                          intermediate_size=32, base_window=8, seed=0)
    clex = install_clex(model, 8, 8, hidden=4, max_factor=2)  # t = 1 leaves the ODE unused
    draws = []
    clex.register_forward_hook(lambda m, args, output: draws.append(m.sampled_t))
    summary = train(model, stream, out / "run", OPTIM, Objective(l_train=8), seed=0,
                    progress=False)
    from accelerate import PartialState  # after train: its Accelerator(cpu=True) sets it up

    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    (out / f"process{PartialState().process_index}.json").write_text(json.dumps({
        "summary": summary, "draws": draws, "weights_sum": float(weights.double().sum()),
        "weights_abs_sum": float(weights.double().abs().sum())}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
