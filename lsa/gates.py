"""Premise gates: does the testbed show the phenomenon the paper is about?

A verdict on the paper's claims means something only where its premise holds: models that use
their context, fail beyond their window, and are fixed by the context-extension methods. Each
gate is a number with its 95 % interval, against a threshold of ``config/`` (``gates:``) fixed
before any result is read; it passes when the whole interval clears the threshold. The numbers
come from the copy probes (``lsa.evaluate.longrange``; every model on the same probes):

- **G1** *the model uses its context*: the base model at its own window ``L0``, the NLL drop on
  a span whose earlier occurrence lies in the far half of the window, against the same span
  with that occurrence replaced (paired by probe);
- **G2** *it fails beyond its window*: the base model's copy NLL at ``4 L0`` (the longest probe
  up to it) minus at ``L0`` (far half of the window both times);
- **G3** *the methods fix it*: for each method the paper uses (``gates.methods``), CE-only
  fine-tuning at ``l_train`` recovers at least ``g3_min_recovery`` of the base model's loss at
  ``l_train`` (``(base(l) - run(l)) / (base(l) - base(L0))``), and beats raw fine-tuning
  without a positional method (``none``) at ``2 l_train`` (paired by probe, seeds averaged);
- **G4** *room to align* (descriptive, no threshold): the Jeffreys part of the misalignment of
  the base model and of the CE-only runs, beside its standard error.

``REQUIRED`` names the gates each section's verdicts need; ``apply_premise`` turns a section's
verdicts into "premise not met" when one fails.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from lsa.config import PipelineConfig
from lsa.summary import mean_se

Z95 = 1.959963984540054

#: the gates each section's verdicts rest on
REQUIRED: dict[str, tuple[str, ...]] = {
    "02_misalignment_correlation": ("G1", "G2"),
    "03_regularized_finetuning": ("G1", "G2", "G3"),
    "04_ablations": ("G1", "G2", "G3"),
    "05_babilong": ("G1", "G2"),
}
PREMISE_NOT_MET = "premise not met"


@dataclass
class Gate:
    """One gate: its estimate with the 95 % interval, the threshold and the outcome (None:
    descriptive or not computable; ``detail`` says which)."""

    gate: str
    question: str
    value: float
    low: float
    high: float
    threshold: float | None
    passed: bool | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _mean_interval(values: np.ndarray) -> tuple[float, float, float]:
    mean, se = mean_se(values)
    se = se if len(values) > 1 else float("nan")
    return mean, mean - Z95 * se, mean + Z95 * se


def _diff_interval(a: dict, b: dict) -> tuple[float, float, float]:
    """Difference of two independent probe means (a - b) with its normal interval."""
    va, vb = np.asarray(a["per_probe"]), np.asarray(b["per_probe"])
    diff = float(va.mean() - vb.mean())
    se = float(np.sqrt(va.var(ddof=1) / len(va) + vb.var(ddof=1) / len(vb)))
    return diff, diff - Z95 * se, diff + Z95 * se


def _missing(gate: str, question: str, why: str) -> Gate:
    nan = float("nan")
    return Gate(gate, question, nan, nan, nan, None, None, f"not computable: {why}")


def _probes(metrics: dict, length: int) -> dict | None:
    """The copy probes at ``length`` (keys are strings once read back from JSON)."""
    rows = metrics.get("long_range") or {}
    return rows.get(str(length), rows.get(length))


def gate_g1(base: dict, l0: int, threshold: float) -> Gate:
    question = "the model uses its context"
    row = _probes(base, l0)
    if not row or "control_nll" not in row:
        return _missing("G1", question, f"the base model has no copy probes at {l0}")
    value, se = row["gain"], row["gain_stderr"]
    low, high = value - Z95 * se, value + Z95 * se
    return Gate("G1", question, value, low, high, threshold, low >= threshold,
                f"base model at its window {l0}: copy NLL {row['copy_nll']:.3f} vs "
                f"{row['control_nll']:.3f} without the far occurrence (nats; {row['n']} probes, "
                f"distance {row['distance'][0]}-{row['distance'][1]})")


def gate_g2(base: dict, l0: int, threshold: float) -> Gate:
    question = "it fails beyond its window"
    lengths = sorted(int(k) for k in (base.get("long_range") or {}))
    beyond = [n for n in lengths if 2 * l0 <= n <= 4 * l0]
    if l0 not in lengths or not beyond:
        return _missing("G2", question, f"the base model has no copy probes at {l0} and 2-4x")
    far = max(beyond)
    value, low, high = _diff_interval(_probes(base, far), _probes(base, l0))
    return Gate("G2", question, value, low, high, threshold, low >= threshold,
                f"base model copy NLL at {far} ({far // l0}x its window) "
                f"{_probes(base, far)['copy_nll']:.3f} vs {_probes(base, l0)['copy_nll']:.3f} "
                f"at {l0}")


def _seed_mean(runs: list[dict], length: int) -> np.ndarray | None:
    rows = [_probes(m, length) for m in runs]
    if not rows or any(r is None for r in rows):
        return None
    return np.mean([np.asarray(r["per_probe"]) for r in rows], axis=0)


def gate_g3(base: dict, ce_runs: dict[str, list[dict]], raw: list[dict], l0: int,
            l_train: int, threshold: float, bootstrap: int, seed: int,
            require_raw: bool = True, methods: list[str] | None = None) -> Gate:
    """``ce_runs``: method -> the metrics of its CE-only runs (seeds); ``raw``: the CE-only
    runs without a positional method (``require_raw`` False: the recovery alone decides);
    ``methods``: the methods the gate is about (each must have runs)."""
    question = "the methods fix it"
    lacking = sorted(set(methods or []) - set(ce_runs))
    if lacking or not ce_runs:
        return _missing("G3", question, "no finished CE-only gate run of "
                        + (", ".join(lacking) if lacking else "the paper's methods"))
    base_l, base_0 = _probes(base, l_train), _probes(base, l0)
    if base_l is None or base_0 is None:
        return _missing("G3", question, f"the base model has no copy probes at {l_train}")
    failure, f_low, f_high = _diff_interval(base_l, base_0)
    if not f_low > 0:  # nothing to recover at l_train: a share would be noise over noise
        return Gate("G3", question, float("nan"), float("nan"), float("nan"), threshold, False,
                    f"the base model does not fail at l_train = {l_train}: its copy NLL rises "
                    f"by {failure:+.3f} [{f_low:+.3f}, {f_high:+.3f}] nats from {l0}, so there "
                    "is no failure for the methods to recover")
    rng = np.random.default_rng(seed)
    b_l, b_0 = np.asarray(base_l["per_probe"]), np.asarray(base_0["per_probe"])
    worst: tuple[float, float, float] | None = None
    parts, passed = [], True
    for method, runs in sorted(ce_runs.items()):
        r_l = _seed_mean(runs, l_train)
        if r_l is None:
            return _missing("G3", question, f"{method} runs lack copy probes at {l_train}")
        share = (b_l.mean() - r_l.mean()) / (b_l.mean() - b_0.mean())
        boots = []
        for _ in range(bootstrap):  # probes at l_train paired (base, run); L0 probes apart
            i = rng.integers(len(b_l), size=len(b_l))
            j = rng.integers(len(b_0), size=len(b_0))
            boots.append((b_l[i].mean() - r_l[i].mean()) / (b_l[i].mean() - b_0[j].mean()))
        low, high = (float(q) for q in np.quantile(boots, [0.025, 0.975]))
        ok = low >= threshold
        text = f"{method}: recovers {share:.2f} [{low:.2f}, {high:.2f}] at {l_train}"
        raw_2x = _seed_mean(raw, 2 * l_train) if raw else None
        run_2x = _seed_mean(runs, 2 * l_train)
        if not require_raw and not raw:
            text += " (no raw fine-tuning configured: gates.raw_finetune is off)"
        elif raw_2x is None or run_2x is None:
            text += f"; no raw fine-tuning (none) to compare at {2 * l_train}"
            ok = False
        else:
            d, d_low, d_high = _mean_interval(run_2x - raw_2x)
            beats = d_high < 0
            ok = ok and beats
            text += (f", {'beats' if beats else 'does not beat'} raw fine-tuning at "
                     f"{2 * l_train}: {d:+.3f} [{d_low:+.3f}, {d_high:+.3f}] nats")
        parts.append(text)
        passed = passed and ok
        if worst is None or share < worst[0]:
            worst = (float(share), low, high)
    assert worst is not None
    return Gate("G3", question, worst[0], worst[1], worst[2], threshold, passed,
                "; ".join(parts) + " (value: the smallest recovery)")


def gate_g4(base_probe: dict | None, ce_runs: list[dict]) -> Gate:
    question = "room to align (descriptive)"
    parts, values = [], []
    if base_probe and "jeffreys" in base_probe:
        j = base_probe["jeffreys"]
        parts.append(f"base model {j['mean']:.2g} ± {j['stderr']:.2g}")
    for m in ce_runs:
        if "jeffreys" in m:
            values.append(m["jeffreys"]["mean"])
    if values:
        v = np.asarray(values)
        se = [m["jeffreys"]["stderr"] for m in ce_runs if "jeffreys" in m]
        parts.append(f"CE-only runs {v.mean():.2g} (range {v.min():.2g}-{v.max():.2g}; "
                     f"sampling s.e. about {float(np.mean(se)):.2g})")
        mean, low, high = _mean_interval(v) if len(v) > 1 else (float(v[0]),) * 3
    elif parts:
        j = base_probe["jeffreys"]  # type: ignore[index]
        mean, low, high = j["mean"], j["mean"] - Z95 * j["stderr"], j["mean"] + Z95 * j["stderr"]
    else:
        return _missing("G4", question, "no measured model has the misalignment's parts")
    return Gate("G4", question, mean, low, high, None, None,
                "Jeffreys part of the misalignment (nats): " + "; ".join(parts))


def compute_gates(pipe: PipelineConfig) -> list[Gate]:
    """G1-G4 from the finished runs of ``pipe`` (a gate whose runs are not finished says so)."""
    from lsa.runs import runs_of

    rs, g = runs_of(pipe), pipe.gates
    l0, l_train = pipe.pretrain.model.base_window, pipe.finetune.l_train
    base = rs.base.metrics() if rs.base.finished else {}
    ce_runs: dict[str, list[dict]] = {}
    all_ce: list[dict] = []
    for name in rs.gate_runs:
        run = rs.finetune[name]
        if not run.finished:
            continue
        m = run.metrics()
        all_ce.append(m)
        if run.spec.method in g.methods:
            ce_runs.setdefault(run.spec.method, []).append(m)
    raw = [m for m in all_ce if m.get("method") == "none"]
    probe = rs.probes.get("base")
    base_probe = probe.metrics() if probe is not None and probe.finished else None
    return [gate_g1(base, l0, g.g1_min_gain), gate_g2(base, l0, g.g2_min_loss),
            gate_g3(base, ce_runs, raw, l0, l_train, g.g3_min_recovery, g.bootstrap,
                    pipe.seed, require_raw=g.raw_finetune,
                    methods=[m for m in g.methods if m in pipe.finetune.methods]),
            gate_g4(base_probe, [m for m in all_ce if m.get("method") != "none"])]


def premise(gates: list[Gate], section: str) -> tuple[bool, str]:
    """Whether ``section``'s premise holds, and a sentence that says why."""
    needed = REQUIRED.get(section, ())
    failed = [g.gate for g in gates if g.gate in needed and g.passed is not True]
    if not needed:
        return True, "no premise gate applies to this section"
    if failed:
        return False, (f"premise not met: {', '.join(failed)} did not pass (needed: "
                       f"{', '.join(needed)}); the verdicts below read 'premise not met'")
    return True, f"premise met: {', '.join(needed)} passed"


def apply_premise(claims: list[dict[str, Any]], gates: list[Gate], section: str
                  ) -> list[dict[str, Any]]:
    """``claims`` with every verdict (other than "not run") replaced by "premise not met" when
    ``section``'s premise fails; the verdict the numbers would give is kept in the evidence."""
    ok, _ = premise(gates, section)
    if ok:
        return claims
    out = []
    for claim in claims:
        claim = dict(claim)
        if claim["verdict"] != "not run":
            claim["evidence"] = (f"{claim.get('evidence', '')} [verdict if the premise held: "
                                 f"{claim['verdict']}]").strip()
            claim["verdict"] = PREMISE_NOT_MET
        out.append(claim)
    return out


def gates_table(gates: list[Gate]):
    """The gates as a table (the notebooks', the report's and the results page's first)."""
    import pandas as pd

    from lsa.report import fmt

    rows = []
    for g in gates:
        outcome = ("descriptive" if g.threshold is None and g.passed is None
                   and not g.detail.startswith("not computable")
                   else "not computable" if g.passed is None
                   else "pass" if g.passed else "fail")
        rows.append({"gate": g.gate, "question": g.question,
                     "value [95% interval]": f"{fmt(g.value)} [{fmt(g.low)}, {fmt(g.high)}]",
                     "threshold": "-" if g.threshold is None else f">= {g.threshold:g}",
                     "outcome": outcome, "detail": g.detail})
    return pd.DataFrame(rows)
