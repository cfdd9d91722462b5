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
- **G3.<method>** *the method fixes it and leaves room*, one per fine-tuned method: its
  CE-only runs recover at least ``g3_min_recovery`` of the base model's loss at ``l_train``
  (``(base(l) - run(l)) / (base(l) - base(L0))``), and their copy NLL rises by at least
  ``g3_min_room`` nats from ``l_train`` to ``2 l_train`` (a failure for the regularizer to
  fix); two-level intervals over seeds and probes. Against raw fine-tuning without a
  positional method (``none``) at ``2 l_train`` is shown beside it, not gated. Raw fine-tuning
  has a G3 of its own (``G3.none``), the premise of the claims about it alone (Section 5.3's
  parts), never of a claim that names no method;
- **G4** *room to align* (descriptive, no threshold): the Jeffreys part of the misalignment of
  the base model and of the CE-only runs, beside its standard error.

A section declares the gates its verdicts need (``gates:`` in its ``section.yaml``; ``G3``: the
claim's own method's); ``apply_premise`` turns a verdict into "premise not met" when one of
them fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from lsa.config import PipelineConfig

if TYPE_CHECKING:
    from lsa.runs import RunSet
from lsa.stats import (
    NOT_RUN,
    PREMISE_NOT_MET,
    crossed_two_level_interval,
    difference_interval,
    mean_interval,
    normal_interval,
)


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
    #: every criterion of a gate of several (G3.<method>: recovery, room, and the descriptive
    #: comparison with raw fine-tuning), each with its interval and threshold
    criteria: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    value = row["gain"]
    low, high = normal_interval(value, row["gain_stderr"])
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
    value, low, high = difference_interval(_probes(base, far)["per_probe"],
                                           _probes(base, l0)["per_probe"])
    return Gate("G2", question, value, low, high, threshold, low >= threshold,
                f"base model copy NLL at {far} ({far // l0}x its window) "
                f"{_probes(base, far)['copy_nll']:.3f} vs {_probes(base, l0)['copy_nll']:.3f} "
                f"at {l0}")


def _seed_probes(runs: list[dict], length: int) -> list[np.ndarray] | None:
    """Each seed's per-probe copy NLL at ``length`` (None where a run lacks the length)."""
    rows = [_probes(m, length) for m in runs]
    if not rows or any(r is None for r in rows):
        return None
    return [np.asarray(r["per_probe"], dtype=float) for r in rows]


def gate_g3(method: str, base: dict, runs: list[dict], raw: list[dict], l0: int, l_train: int,
            min_recovery: float, min_room: float, bootstrap: int, seed: int) -> Gate:
    """``G3.<method>``: the method's CE-only runs (``runs``: one per seed) (a) recover at least
    ``min_recovery`` of the base model's copy loss at ``l_train``,
    ``(base(l) - run(l)) / (base(l) - base(L0))``, and (b) leave room for the regularizer: their
    copy NLL at ``2 l_train`` exceeds theirs at ``l_train`` by at least ``min_room`` nats. Both
    intervals are two-level (seeds, then probes); one seed gives no interval over seeds, so no
    premise. ``raw``: CE-only runs without a positional method (``none``), set beside the method
    at ``2 l_train`` (paired by seed and probe), descriptive: at this scale a fixed PI factor
    extrapolates at 2x as raw fine-tuning does (docs/testbed.md)."""
    gate, question = f"G3.{method}", f"{method} fixes it and leaves room"
    if not runs:
        return _missing(gate, question, f"no finished CE-only run of {method}")
    base_l, base_0 = _probes(base, l_train), _probes(base, l0)
    if base_l is None or base_0 is None:
        return _missing(gate, question, f"the base model has no copy probes at {l_train}")
    at_l, at_2l = _seed_probes(runs, l_train), _seed_probes(runs, 2 * l_train)
    if at_l is None or at_2l is None:
        return _missing(gate, question, f"{method} runs lack copy probes at {l_train} and "
                                        f"{2 * l_train}")
    failure, f_low, _ = difference_interval(base_l["per_probe"], base_0["per_probe"])
    if not f_low > 0:  # nothing to recover at l_train: a share would be noise over noise
        return Gate(gate, question, float("nan"), float("nan"), float("nan"), min_recovery,
                    False, f"the base model does not fail at l_train = {l_train}: its copy NLL "
                    f"rises by {failure:+.3f} nats from {l0}, so there is no failure to recover")
    b_l, b_0 = np.asarray(base_l["per_probe"]), np.asarray(base_0["per_probe"])
    r_l, r_2l = np.stack(at_l), np.stack(at_2l)  # seeds x probes
    n = len(runs)
    rng = np.random.default_rng(seed)

    def recovery(seeds, i, j):
        return (b_l[i].mean() - r_l[np.ix_(seeds, i)].mean()) / (b_l[i].mean() - b_0[j].mean())

    def room(seeds, i, k):
        return r_2l[np.ix_(seeds, k)].mean() - r_l[np.ix_(seeds, i)].mean()

    share = float(recovery(np.arange(n), np.arange(len(b_l)), np.arange(len(b_0))))
    rise = float(room(np.arange(n), np.arange(r_l.shape[1]), np.arange(r_2l.shape[1])))
    if n < 2:
        low = high = r_low = r_high = float("nan")
        ok, why = False, "; one training seed: no interval over seeds, so no premise"
    else:
        low, high = crossed_two_level_interval(recovery, n, [len(b_l), len(b_0)], bootstrap,
                                               rng)
        r_low, r_high = crossed_two_level_interval(room, n, [r_l.shape[1], r_2l.shape[1]],
                                                   bootstrap, rng)
        ok, why = low >= min_recovery and r_low >= min_room, ""
    text = (f"recovers {share:.2f} [{low:.2f}, {high:.2f}] of the base model's copy loss at "
            f"{l_train} (>= {min_recovery:g}); its copy NLL rises by {rise:+.3f} "
            f"[{r_low:+.3f}, {r_high:+.3f}] nats from {l_train} to {2 * l_train} "
            f"(>= {min_room:g}); {n} seed(s) x {r_l.shape[1]} probes, two-level interval{why}")
    criteria = [{"what": "recovery", "value": share, "low": low, "high": high,
                 "threshold": min_recovery},
                {"what": "room", "value": rise, "low": r_low, "high": r_high,
                 "threshold": min_room}]
    raw_2l = _seed_probes(raw, 2 * l_train) if raw else None
    seeds_raw = {m.get("seed"): i for i, m in enumerate(raw)}
    pairs = [(i, seeds_raw[m.get("seed")]) for i, m in enumerate(runs)
             if m.get("seed") in seeds_raw]
    if raw_2l is not None and len(pairs) >= 2:
        own = r_2l[[p for p, _ in pairs]]
        other = np.stack(raw_2l)[[q for _, q in pairs]]
        diff = own - other

        def versus(seeds, k):
            return diff[np.ix_(seeds, k)].mean()

        d = float(diff.mean())
        d_low, d_high = crossed_two_level_interval(versus, len(pairs), [diff.shape[1]],
                                                   bootstrap, rng)
        text += (f". Beside it (descriptive, not a gate): against raw fine-tuning at "
                 f"{2 * l_train} {d:+.3f} [{d_low:+.3f}, {d_high:+.3f}] nats "
                 f"({'lower' if d_high < 0 else 'higher' if d_low > 0 else 'no clear difference'})")
        criteria.append({"what": "versus raw at 2x (descriptive)", "value": d, "low": d_low,
                         "high": d_high, "threshold": None})
    return Gate(gate, question, share, low, high, min_recovery, ok, text, criteria)


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
        mean, low, high = mean_interval(v) if len(v) > 1 else (float(v[0]),) * 3
    elif parts:
        j = base_probe["jeffreys"]  # type: ignore[index]
        mean, (low, high) = j["mean"], normal_interval(j["mean"], j["stderr"])
    else:
        return _missing("G4", question, "no measured model has the misalignment's parts")
    return Gate("G4", question, mean, low, high, None, None,
                "Jeffreys part of the misalignment (nats): " + "; ".join(parts))


def compute_gates(pipe: PipelineConfig, plan: RunSet | None = None) -> list[Gate]:
    """G1-G4 from the finished runs of ``plan`` (default: ``pipe``'s, planned here; a gate
    whose runs are not finished says so)."""
    from lsa.runs import RunSet

    rs, g = plan if plan is not None else RunSet(pipe), pipe.gates
    l0, l_train = pipe.pretrain.model.base_window, pipe.finetune.l_train
    base = rs.base.metrics() if rs.base.finished else {}
    ce_runs: dict[str, list[dict]] = {m: [] for m in pipe.finetune.methods if m != "none"}
    all_ce: list[dict] = []
    for name in rs.gate_runs:
        run = rs.finetune[name]
        if not run.finished:
            continue
        m = run.metrics()
        all_ce.append(m)
        if run.spec.method in ce_runs:
            ce_runs[run.spec.method].append(m)
    raw = [m for m in all_ce if m.get("method") == "none"]
    probe = rs.probes.get("base")
    base_probe = probe.metrics() if probe is not None and probe.finished else None
    g3 = [gate_g3(method, base, runs, raw, l0, l_train, g.g3_min_recovery, g.g3_min_room,
                  g.bootstrap, pipe.seed) for method, runs in ce_runs.items()]
    if raw:  # raw fine-tuning's own premise (the claims about method none: Section 5.3's parts)
        g3.append(gate_g3(RAW, base, raw, [], l0, l_train, g.g3_min_recovery, g.g3_min_room,
                          g.bootstrap, pipe.seed))
    return [gate_g1(base, l0, g.g1_min_gain), gate_g2(base, l0, g.g2_min_loss), *g3,
            gate_g4(base_probe, [m for m in all_ce if m.get("method") != "none"])]


def needed_gates(gates: list[Gate], required: Sequence[str], method: str | None = None
                 ) -> list[str]:
    """The gates a verdict rests on: its section's ``required`` ones (its declaration's
    ``gates``), with ``G3`` read as the claim's own method's ``G3.<method>`` (raw fine-tuning's,
    ``G3.none``, for a claim about it), every positional method's G3 where the claim names no
    method."""
    out = []
    for name in required:
        if name != "G3":
            out.append(name)
        elif method:
            out.append(f"G3.{method}")
        else:
            out.extend(f"G3.{m}" for m in g3_methods(gates))
    return out


#: raw fine-tuning, the method without a positional extension: its G3 is the premise of the
#: claims about it, not of every claim (``needed_gates``)
RAW = "none"


def g3_methods(gates: list[Gate]) -> list[str]:
    """The positional methods that have a G3 (raw fine-tuning's left out)."""
    return [g.gate.removeprefix("G3.") for g in gates
            if g.gate.startswith("G3.") and g.gate != f"G3.{RAW}"]


def premise(gates: list[Gate], required: Sequence[str], method: str | None = None
            ) -> tuple[bool, str]:
    """Whether the premise of a section's verdicts (``required``: the gates it declares; of
    ``method``'s, where given) holds, and a sentence that says why; for a section gated per
    method without ``method``, the sentence names the methods whose premise holds."""
    needed = needed_gates(gates, required, method)
    if not needed:
        return True, "no premise gate applies to this section"
    known = {g.gate: g for g in gates}
    failed = [n for n in needed if n not in known or known[n].passed is not True]
    methods = g3_methods(gates)
    if "G3" in required and method is None and not methods:
        failed.append("G3 (no fine-tuned method)")
    elif "G3" in required and method is None:
        held = [m for m in methods if premise(gates, required, m)[0]]
        text = (f"premise met for {', '.join(held)}" if held else "premise met for no method")
        text += (f" ({', '.join(n for n in needed if not n.startswith('G3.'))} and each "
                 "method's own G3 passed)")
        others = sorted(set(methods) - set(held))
        if others:
            text += (f"; not for {', '.join(others)}: their verdicts below read 'premise not "
                     "met'")
        return bool(held) and not others, text
    if failed:
        return False, (f"premise not met: {', '.join(failed)} did not pass (needed: "
                       f"{', '.join(needed)}); the verdicts below read 'premise not met'")
    return True, f"premise met: {', '.join(needed)} passed"


def apply_premise(claims: list[dict[str, Any]], gates: list[Gate], required: Sequence[str]
                  ) -> list[dict[str, Any]]:
    """``claims`` with every verdict (other than "not run") replaced by "premise not met" where
    the premise of its section (of its ``method``, where the section is gated per method)
    fails; the verdict the numbers would give is kept in the evidence."""
    from lsa.claims import held_note

    out = []
    for claim in claims:
        claim = dict(claim)
        ok, _ = premise(gates, required, claim.get("method") or None)
        if not ok and claim["verdict"] != NOT_RUN:
            claim["evidence"] = (f"{claim.get('evidence', '')} "
                                 f"{held_note(claim['verdict'])}").strip()
            claim["verdict"] = PREMISE_NOT_MET
        out.append(claim)
    return out


def gates_table(gates: list[Gate]):
    """The gates as a table (the notebooks', the report's and the results page's first)."""
    import pandas as pd

    from lsa.claims import fmt

    rows = []
    for g in gates:
        outcome = ("descriptive" if g.threshold is None and g.passed is None
                   and not g.detail.startswith("not computable")
                   else "not computable" if g.passed is None
                   else "pass" if g.passed else "fail")
        gated = [c for c in g.criteria if c["threshold"] is not None] or [
            {"what": "", "value": g.value, "low": g.low, "high": g.high,
             "threshold": g.threshold}]
        rows.append({"gate": g.gate, "question": g.question,
                     "value [95% interval]": "; ".join(
                         f"{c['what']} {fmt(c['value'])} [{fmt(c['low'])}, {fmt(c['high'])}]"
                         .strip() for c in gated),
                     "threshold": "; ".join("-" if c["threshold"] is None
                                            else f">= {c['threshold']:g}" for c in gated),
                     "outcome": outcome, "detail": g.detail})
    return pd.DataFrame(rows)
