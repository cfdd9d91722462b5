"""One seed helper: python, numpy and torch from one integer (same seed -> same numbers on CPU).

It determines a run's numbers, so it is an input of the run rules (``workflow/rules/common.smk``).
"""

from __future__ import annotations

import random


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and CUDA) from one integer."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
