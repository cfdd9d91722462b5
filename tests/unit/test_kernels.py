"""The kernel pin (issue 73, item 2; lsa/kernels.py): importing lsa pins torch's CPU kernels
at AVX2 in that process and the processes it starts, keeps a user's own setting, and
``LSA_KERNELS=native`` turns it off. Each case runs in a fresh interpreter: torch chooses its
kernels once per process."""

import json
import os
import subprocess
import sys

import pytest

from lsa import kernels

pinnable = pytest.mark.skipif(not kernels.pinnable(), reason="this CPU lacks AVX2 or FMA")

REPORT = ("import json, os, subprocess, sys\n{before}\nimport lsa, torch\n"
          "child = subprocess.run([sys.executable, '-c', 'import os, torch; "
          "print(torch.backends.cpu.get_cpu_capability(), os.environ.get(\"MKL_CBWR\"))'], "
          "capture_output=True, text=True, check=True).stdout.split()\n"
          "print(json.dumps({{'aten': torch.backends.cpu.get_cpu_capability(), "
          "'pins': lsa.kernels.pins(), 'child': child}}))")


def _report(before: str = "", **env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if k not in {*kernels.PIN, kernels.OPT_OUT}}
    out = subprocess.run([sys.executable, "-W", "error::RuntimeWarning" if not before else
                          "default", "-c", REPORT.format(before=before)],
                         env={**environ, **env}, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return {**json.loads(out.stdout), "stderr": out.stderr}


def _native() -> str:
    """torch's own capability here, in a process started as ``bench pins`` starts its
    machine's-own one (``kernels.environment({})``, from this pinned process), importing lsa."""
    assert os.environ.get("ATEN_CPU_CAPABILITY") == kernels.PIN["ATEN_CPU_CAPABILITY"] or \
        not kernels.pinnable()  # pytest's process imported lsa: pinned
    return subprocess.run([sys.executable, "-c", "import lsa, torch; "
                           "print(torch.backends.cpu.get_cpu_capability())"],
                          env=kernels.environment({}), capture_output=True, text=True,
                          check=True).stdout.strip()


@pinnable
def test_importing_lsa_pins_torch_at_avx2_here_and_in_the_processes_it_starts():
    got = _report()
    assert got["aten"] == "AVX2"
    assert got["pins"] == {"state": "pinned", "settings": kernels.PIN, "aten": "AVX2"}
    assert got["child"] == ["AVX2", kernels.PIN["MKL_CBWR"]]  # a job it starts, pinned too


@pinnable
def test_native_turns_the_pin_off_and_a_users_own_setting_is_kept():
    native = _native()
    assert native == json.loads(subprocess.run(  # the CPU's own, as torch alone finds it
        [sys.executable, "-c", "import json, torch; print(json.dumps("
         "torch.backends.cpu.get_cpu_capability()))"], capture_output=True, text=True,
        env={k: v for k, v in os.environ.items() if k not in kernels.PIN}).stdout)
    got = _report(LSA_KERNELS="native")
    assert (got["aten"], got["pins"]["state"]) == (native, "native")
    assert got["child"] == [native, "None"]
    got = _report(ATEN_CPU_CAPABILITY="default")
    assert got["aten"] == "DEFAULT" and got["pins"]["state"] == "user"
    assert got["pins"]["settings"]["MKL_CBWR"] == kernels.PIN["MKL_CBWR"]  # the rest pinned


@pinnable
def test_a_tensor_computed_before_import_lsa_leaves_the_pin_late_and_says_so():
    native = _native()
    if native == "AVX2":
        pytest.skip("this CPU's own kernels are the pinned ones: nothing can come late")
    got = _report(before="import torch; torch.ones(4).sum()")
    assert got["aten"] == native and got["pins"]["state"] == "late"
    assert "import lsa first" in got["stderr"]


def test_pin_sets_only_what_is_unset_and_refuses_an_unknown_choice(monkeypatch):
    monkeypatch.setattr(kernels, "pinnable", lambda: True)
    environ = {"MKL_CBWR": "COMPATIBLE"}
    added = kernels.pin(environ)
    assert added == {k: v for k, v in kernels.PIN.items() if k != "MKL_CBWR"}
    assert environ == {**kernels.PIN, "MKL_CBWR": "COMPATIBLE"}
    assert kernels.pin({"LSA_KERNELS": "native"}) == {}
    with pytest.raises(ValueError, match="LSA_KERNELS='avx512'"):
        kernels.pin({"LSA_KERNELS": "avx512"})
    monkeypatch.setattr(kernels, "pinnable", lambda: False)  # a CPU without AVX2: nothing
    assert kernels.pin({}) == {}
