"""Per-sample summaries shared by the run jobs and the analyses (no heavy imports): a run's
numbers depend on this module, so it is an input of every kind of run
(``workflow/settings.yaml``), kept apart from ``lsa.stats``, which the notebooks change."""

from __future__ import annotations

import math


def mean_se(values) -> tuple[float, float]:
    """Mean and standard error of the mean (sample variance, n - 1; 0 for one value): the
    summary of per-sample measurements (misalignment samples, copy probes)."""
    values = [float(v) for v in values]
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / max(1, len(values) - 1)
    return mean, math.sqrt(var / len(values))
