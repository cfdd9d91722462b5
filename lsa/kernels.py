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
  pins``, docs/bench/pins-mini.md).
- ``PIN`` and ``pin()``: the candidate applied. Importing ``lsa`` pins every process (and the
  processes it starts, through the environment) to ``PIN`` on any x86-64 CPU with AVX2 and
  FMA, before torch has chosen its kernels: on the two AMD CPUs measured, an AVX512 machine
  then trains the AVX2 machine's runs bit for bit, at 0.96x-1.07x the time per unit. A
  setting the user made is kept; ``LSA_KERNELS=native`` pins nothing.
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
#: the pin every process of lsa runs under (``pin``)
PIN: dict[str, str] = PIN_CANDIDATES["avx2"]
#: the environment variable that turns the pin off (``LSA_KERNELS=native``)
OPT_OUT = "LSA_KERNELS"
#: glibc's libm as a CPU without FMA runs it (see the module's docstring)
NO_FMA: dict[str, str] = {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA,-AVX512F,-AVX"}
#: every setting above, as ``report`` records them
SETTINGS = sorted({*LOWEST, *NO_FMA, *(k for pin in PIN_CANDIDATES.values() for k in pin)})


def pinnable() -> bool:
    """Whether this CPU runs ``PIN``'s kernels: x86-64 with AVX2 and FMA (torch does not check
    a capability it is told to use, and would stop on an illegal instruction)."""
    from numpy._core._multiarray_umath import __cpu_features__

    return bool(__cpu_features__.get("AVX2") and __cpu_features__.get("FMA3"))


def pin(environ: Any = None) -> dict[str, str]:
    """Set ``PIN`` in ``environ`` (this process's environment by default) where nothing set it
    yet, on a CPU that runs it, unless ``LSA_KERNELS=native``; returns what it set. Torch reads
    ``ATEN_CPU_CAPABILITY`` at its first CPU kernel and oneDNN and MKL theirs at their first
    call, so the pin holds wherever ``lsa`` is imported before any tensor is computed (every
    ``python -m lsa``, notebook and test does), and in every process started from there."""
    environ = os.environ if environ is None else environ
    value = environ.get(OPT_OUT, "")
    if value not in ("", "native", "pinned"):
        raise ValueError(f"{OPT_OUT}={value!r}: expected 'pinned' (the default) or 'native'")
    if value == "native" or not pinnable():
        return {}
    added = {k: v for k, v in PIN.items() if k not in environ}
    environ.update(added)
    return added


def environment(settings: dict[str, str]) -> dict[str, str]:
    """This process's environment with exactly ``settings`` choosing torch's kernels: the
    pin's own settings taken out and ``LSA_KERNELS=native`` (what a measuring process started
    under another configuration, or the machine's own, needs: this process is pinned)."""
    return {**{k: v for k, v in os.environ.items() if k not in PIN}, OPT_OUT: "native",
            **settings}


def pins() -> dict[str, Any]:
    """The kernel pin this process runs under, as ``stamp.json`` and ``run_info.json`` record
    it apart from the machine: ``PIN``'s settings as the environment has them and whether
    they are ``PIN`` (``pinned``), the user's (``user``) or unset (``native``); ``late`` where
    torch chose other kernels before the pin was set (a tensor computed before ``import lsa``).
    With torch loaded, its ATen capability too."""
    settings = {k: os.environ.get(k) for k in PIN}
    state = ("pinned" if settings == PIN else "native" if not any(settings.values())
             else "user")
    out: dict[str, Any] = {"state": state, "settings": settings}
    if "torch" in sys.modules:
        out["aten"] = sys.modules["torch"].backends.cpu.get_cpu_capability()
        if state == "pinned" and out["aten"] != "AVX2":
            out["state"] = "late"
    return out


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
