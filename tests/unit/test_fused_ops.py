"""The fused objective's cost in operations (lsa/fused.py): on a GPU every eager operation is a
kernel launch and every host sync drains the queue. Counted on the CPU with a dispatch mode at
``gpu-small``'s loss shape (its batch of sequences, windows A and B of ``l_train`` positions,
overlap 3/4 of the window, bf16 logits as under autocast).

The vocabulary is small here: the operations do not depend on it, only the number of chunks,
which ``chunk_bytes`` scaled by the vocabulary keeps at ``gpu-small``'s on a GPU (the same
positions per chunk as with its 16384 tokens and the GPU's default budget); the test checks
that two vocabularies give the same counts."""

from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from lsa import alignment as A
from lsa import fused as FU
from lsa.config import load_config


class CountOps(TorchDispatchMode):
    """Every aten operation dispatched inside the mode, views included."""

    def __init__(self):
        super().__init__()
        self.ops = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.ops.values())

    @property
    def launches(self) -> int:  # the operations that are not views of a tensor
        return sum(n for func, n in self.ops.items() if not func.is_view)

    @property
    def syncs(self) -> int:  # .item(), .tolist(), bool(tensor): the host waits for the device
        return self.ops[torch.ops.aten._local_scalar_dense.default]


class Logits(torch.nn.Module):
    """A 'model' whose logits are a parameter (the loss alone is counted)."""

    def __init__(self, logits):
        super().__init__()
        self.table = torch.nn.Parameter(logits)

    def forward(self, input_ids):
        return type("Out", (), {"logits": self.table})


@pytest.fixture(scope="module")
def shape():
    pipe = load_config(profile="gpu-small")
    l_train = pipe.finetune.l_train
    return {"n": pipe.finetune.optim.batch_size, "l_train": l_train, "l_extra": l_train // 4,
            "vocab": pipe.pretrain.data.vocab_size}


def count(shape, vocab, alpha, ce_on="both"):
    """The operations of one forward and backward of the loss at ``shape`` with ``vocab``."""
    n, l_train, l_extra = shape["n"], shape["l_train"], shape["l_extra"]
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, vocab, (n, l_train + l_extra), generator=g)
    model = Logits((torch.randn(2 * n, l_train, vocab, generator=g) * 3).bfloat16())
    chunk_bytes = FU.CHUNK_BYTES["cuda"] * vocab // shape["vocab"]
    with CountOps() as mode:
        out = A.misalignment_loss(model, tokens, l_train, l_extra, alpha=alpha, ce_on=ce_on,
                                  measure_misalign=bool(alpha), chunk_bytes=chunk_bytes)
        out.loss.backward()
    assert torch.isfinite(model.table.grad.float()).all() and out.loss.isfinite()
    return mode


@pytest.mark.parametrize("ce_on", ["both", "a"])
def test_the_regularized_loss_costs_at_most_half_again_the_operations_of_ce(shape, ce_on):
    """CE + 0.1 SCE (on both windows: equal tokens, or on window A) against CE on both windows,
    one forward and backward each: at most 1.5x the operations (views included, and without
    them), and no host sync in either."""
    assert (shape["n"], shape["l_train"], shape["l_train"] - shape["l_extra"]) == (8, 1024, 768)
    ce = count(shape, 64, alpha=0.0)
    sce = count(shape, 64, alpha=0.1, ce_on=ce_on)
    assert ce.syncs == sce.syncs == 0
    assert sce.total <= 1.5 * ce.total, (sce.total, ce.total)
    assert sce.launches <= 1.5 * ce.launches, (sce.launches, ce.launches)
    # the operations do not depend on the vocabulary at the same positions per chunk
    again = count(shape, 96, alpha=0.1, ce_on=ce_on)
    assert again.ops == sce.ops
