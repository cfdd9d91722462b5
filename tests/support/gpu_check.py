"""scripts/gpu_check.py loaded as a module (it is a script, not part of lsa)."""

import importlib.util

from . import ROOT


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
