"""Which CPU kernels the numerical libraries run, and how to ask for others.

NumPy, its OpenBLAS, torch (ATen and MKL) and glibc's libm each choose at run time among
kernels built for several instruction sets (SSE, AVX2, AVX512, with or without FMA), and the
kernels do not always round alike: a BLAS dot product sums in another order, a vectorised
``log`` rounds otherwise than the system libm. The same file of numbers can therefore give other
last bits on another CPU. This module names the settings that choose the kernels, read only at
a process's start (so a setting takes effect in a new process), and reports which kernels a
process really runs:

- ``LOWEST``: every library at the lowest level it accepts on an x86-64 CPU (NumPy's baseline,
  x86-64-v2; OpenBLAS's oldest core; torch's default, non-vectorised ATen kernels). The test
  of the analysis on "another machine" (tests/e2e/test_published_snapshots.py) re-analyses
  the published snapshots under it.
- ``NO_FMA``: glibc's libm without its FMA variants, which it selects on every CPU with FMA
  and AVX2 (x86-64-v3: every AVX2 and AVX512 CPU alike), so only a CPU older than that runs
  the others. SciPy's distribution functions call libm; under ``NO_FMA`` one published number
  moved in its last bit (a p of the study), no claim's text: measured once (docs/methods.md,
  "Any machine"), not held by a test.
- ``PIN_CANDIDATES``: torch's kernels pinned for training, measured (``python -m lsa bench
  pins``), not applied: the runs are one CPU family's draw until a pin is chosen.
- ``report()``: NumPy's dispatched SIMD targets, OpenBLAS's core, torch's ATen capability and
  the settings above as the process's environment has them: what ``stamp.json`` records of a
  machine's kernels.
"""

from __future__ import annotations

import os
import sys
from typing import Any

#: the lowest kernels each library accepts on x86-64 (see the module's docstring)
LOWEST: dict[str, str] = {
    # NumPy refuses to disable its baseline (x86-64-v2), so these are every dispatched target
    "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
    "OPENBLAS_CORETYPE": "Prescott",
    "ATEN_CPU_CAPABILITY": "default",
}
#: torch's kernels pinned at a level every AVX2 CPU has, the candidates ``python -m lsa bench
#: pins`` measures (lsa/pins.py): ATen's AVX2 kernels and oneDNN's AVX2 ISA cap, with MKL's
#: conditional numerical reproducibility at its AVX2 branch (honoured on Intel CPUs only) or at
#: ``COMPATIBLE`` (its generic code, which an AMD CPU also honours); and everything lowest
PIN_CANDIDATES: dict[str, dict[str, str]] = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2"},
    "avx2-compatible": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                        "MKL_CBWR": "COMPATIBLE"},
    "lowest": {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41",
               "MKL_CBWR": "COMPATIBLE"},
}
#: glibc's libm as a CPU without FMA runs it (see the module's docstring)
NO_FMA: dict[str, str] = {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA,-AVX512F,-AVX"}
#: every setting above, as ``report`` records them
SETTINGS = sorted({*LOWEST, *NO_FMA, *(k for pin in PIN_CANDIDATES.values() for k in pin)})


def numpy_targets() -> list[str]:
    """NumPy's dispatched SIMD targets found and not disabled in this process (``[]`` at its
    baseline)."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    return [target for target in __cpu_dispatch__ if __cpu_features__.get(target)]


def openblas_cores() -> list[str]:
    """The core each OpenBLAS loaded in this process runs (``threadpoolctl``'s report)."""
    from threadpoolctl import threadpool_info

    return sorted({str(pool.get("architecture")) for pool in threadpool_info()
                   if pool.get("internal_api") == "openblas"})


def report(torch: bool = True) -> dict[str, Any]:
    """The kernels this process runs: NumPy's SIMD targets, OpenBLAS's cores (after NumPy and
    SciPy's linear algebra are loaded), torch's ATen capability (``torch``: import it; it
    costs a few seconds) and every setting of ``SETTINGS`` as this process's environment has
    them."""
    import numpy  # noqa: F401  (loads its OpenBLAS)
    import scipy.linalg  # noqa: F401  (loads SciPy's)

    out: dict[str, Any] = {"numpy_targets": numpy_targets(), "openblas": openblas_cores(),
                           "settings": {k: os.environ.get(k) for k in SETTINGS}}
    if torch or "torch" in sys.modules:
        import torch as _torch

        out["aten"] = _torch.backends.cpu.get_cpu_capability()
    return out
