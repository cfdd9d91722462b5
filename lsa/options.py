"""The names of the training objective's options, typed once (no torch, nothing from lsa).

What each option does is defined in lsa/misalign.py; the configuration (``lsa.config``: a
run's and the fine-tuning part's fields), the definition (``lsa.misalign``), the fused kernel
(``lsa.fused``), the losses (``lsa.alignment``) and the trainer (``lsa.train.Objective``) all
import these names from here, so that a configuration can name only what the objective
computes (tests/unit/test_misalign.py holds them together).
"""

from __future__ import annotations

from typing import Literal, get_args

#: the windows whose CE is trained: A (the long context), B (the short one), or both
CeOn = Literal["a", "b", "both"]
#: the divergence between the two windows' distributions
DivergenceName = Literal["sce", "jeffreys", "entropy"]
#: how the divergence's two terms are reduced
ReduceTerms = Literal["sum", "mean"]
#: the window whose distribution is detached in the divergence
Detach = Literal["none", "long", "short"]
#: the overlap positions the divergence compares
Positions = Literal["all", "last", "paper"]

CE_ON: tuple[str, ...] = get_args(CeOn)
DIVERGENCES: tuple[str, ...] = get_args(DivergenceName)
REDUCE_TERMS: tuple[str, ...] = get_args(ReduceTerms)
DETACH: tuple[str, ...] = get_args(Detach)
POSITIONS: tuple[str, ...] = get_args(Positions)

#: how ``l_extra`` is drawn for a step (``lsa.misalign.sample_l_extra``), by setting
L_EXTRA_SETTINGS = {
    1: "U{1..l/2} (default)",
    2: "U{1..l/4}",
    3: "U{l/4..l/2}",
    4: "U{1..l}",
}
