"""Synthetic study tables with known effects (tests of lsa.study and lsa.headline)."""

import numpy as np
import pandas as pd

from lsa.config import StudyConfig

ARM_EFFECTS = {"ce_a": 0.0, "ce_both": 0.02, "jeffreys1": -0.15, "entropy01": 0.1,
               "sce01": 0.08, "jeffreys01": -0.01, "ce_both_plain": 0.3,
               "jeffreys1_plain": 0.4}


def synthetic(cfg: StudyConfig, bases: list[int], sd: float = 0.03, seed: int = 0,
              shift: float = 0.0) -> pd.DataFrame:
    """Every arm of ``cfg`` on ``bases``: a base level, the arm's effect (``shift`` added to
    Jeffreys 1), seed noise; the copy NLL rises with Jeffreys 1."""
    rng = np.random.default_rng(seed)
    rows = []
    for b in bases:
        level = rng.normal(4.0, 0.2)
        for arm in cfg.arms:
            for method in arm.methods:
                for s in (b, *([b + 1000] if method in arm.second_seed else [])):
                    effect = ARM_EFFECTS[arm.name] + (shift if arm.name == "jeffreys1" else 0)
                    nll4 = level + effect + rng.normal(0, sd)
                    rows.append({"base": b, "method": method, "arm": arm.name, "seed": s,
                                 "nll4": nll4, "nll1": level - 0.5 + effect / 3
                                 + rng.normal(0, sd),
                                 "copy1": 2.0 + (1.0 if "jeffreys1" in arm.name else 0.0)
                                 + rng.normal(0, sd), "ppl1": 50.0, "finite": True})
    return pd.DataFrame(rows)


def base_table(seeds, failed=(), complete=True) -> pd.DataFrame:
    return pd.DataFrame([{"base": s, "complete": complete, "g1": s not in failed,
                          "g2": True, "g1_gain": 1.0 + 0.01 * i, "base_ppl1": 40.0,
                          "base_nll4": 4.0 + 0.02 * i} for i, s in enumerate(seeds)])


def small_config(**kw) -> StudyConfig:
    values = {"stage_seeds": [[1, 2, 3, 4], [5, 6, 7, 8]], "replacement_start": 9,
              "max_replacements": 2, "first_bases": 6, "max_failures": 2, **kw}
    return StudyConfig.from_dict(values)
