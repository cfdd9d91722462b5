"""lsa: the replication's library (README.md). Importing it pins the CPU kernels torch runs
(``lsa.kernels.pin``), so that runs give the same bytes on every CPU that has AVX2."""

import sys as _sys
import warnings as _warnings

from lsa.kernels import pin as _pin
from lsa.kernels import pins as _pins

if _pin() and "torch" in _sys.modules and _pins()["state"] == "late":
    _warnings.warn("torch computed on the CPU before `import lsa`, so its kernels are this "
                   "CPU's own, not lsa's pinned ones (lsa.kernels): import lsa first",
                   RuntimeWarning, stacklevel=2)
