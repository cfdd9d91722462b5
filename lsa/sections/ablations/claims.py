"""Section 5.3's claims, one per distinct comparison of the items' paired effects (``tables``):
the **paper's** (``lsa.stats.resolve_verdict``'s words; ``Claim.origin`` "paper" where the paper
ran it on that method, else "extension") and the project's **controls** (helps / hurts /
unclear; lowers / raises / unclear), ``Claim.kind``; and the prose of the numbers."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from lsa.claims import PAPER_METHODS, Claim, Grade, Kind, fmt, judged, paper
from lsa.config import AblationConfig
from lsa.runtable import DIVERGENCE_LABELS
from lsa.sections.ablations.tables import (
    FAR_COLUMNS,
    METRIC_COLUMNS,
    ItemInputs,
    arms,
    compute_arms,
    effect_row,
    effects,
    far_context_methods,
    l_extra_arms,
)
from lsa.stats import EXCLUDES_ZERO, HELPS, MOVES, Outcomes, control_outcome, resolution_text

SECTION = "Sec. 5.3"
PAIRED = "paired by seed, and by base model where it ran on several (a t over their means)"
OVER = "mean paired difference over seeds (over base models where it ran on several), 95 % t"


def _effect_text(row: Any, ppl: Any = None) -> str:
    interval = (f"[{row.low:+.3g}, {row.high:+.3g}]" if row.n > 1 and math.isfinite(row.low)
                else "(one seed: no interval)")
    kind = row.column.split("_")[0]
    unit = kind.upper() if kind in ("nll", "ppl") else row.column
    over = f"{row.bases} base models (t over their means) x " if row.bases > 1 else ""
    text = (f"{unit} {fmt(row.baseline_mean, 4)} -> {fmt(row.changed_mean, 4)}, paired diff "
            f"{row.delta:+.3g} {interval}, {over}{row.seeds} seeds")
    if ppl is not None:
        text += f" (PPL {fmt(ppl.baseline_mean, 4)} -> {fmt(ppl.changed_mean, 4)})"
    return text


class Claims:
    """The section's claims, one per distinct comparison (changed run, baseline, column), made
    by the first item that asks (its id in ``seen``). ``section5``: the (method, alpha) of CE +
    alpha SCE vs CE-only Section 5 claims as the paper's: here a control, counted once there."""

    def __init__(self, section5: set[tuple[str, float]] | None = None) -> None:
        self.claims: list[Claim] = []
        self.seen: dict[tuple[str, str, str, str], str] = {}
        self.section5 = {(m, round(a, 6)) for m, a in (section5 or set())}

    def in_section5(self, method: str, div: str, alpha: float) -> bool:
        return div == "sce" and (method, round(alpha, 6)) in self.section5

    def add(self, eff: pd.DataFrame, *, id: str, claim: str, paper: str, grade: Grade,
            method: str, setting: str, baseline: str, column: str, sign: int = -1,
            evidence: str = "", kind: Kind = "paper", words: Outcomes = HELPS,
            paper_ran: frozenset[str] | None = None) -> None:
        """``setting`` against ``baseline`` on ``column`` (a row of ``eff``): the paper's claim
        (its verdict against the paper's ``sign``) or a control (its outcome ``words``). A
        paper claim is the paper's as it ran it where ``method`` is one of ``paper_ran`` (the
        methods the paper ran it on; None: the paper names none), else an extension."""
        origin = "paper" if paper_ran is None or method in paper_ran else "extension"
        key = (method, setting, baseline, column)
        if key in self.seen:
            return
        self.seen[key] = id
        row = effect_row(eff, method, setting, baseline, column)
        if row is None or row.seeds == 0:
            self.claims.append(Claim(id=id, section=SECTION, claim=claim, paper=paper,
                                     grade=grade, ours="no finished runs", verdict="not run",
                                     evidence=evidence, kind=kind, method=method,
                                     origin=origin))
            return
        ppl = (effect_row(eff, method, setting, baseline, "ppl_" + column[4:])
               if column.startswith("nll_") else None)
        verdict: dict[str, Any] = (
            judged(row.low, row.high, sign, None, row.n, row.delta) if kind == "paper" else
            {"verdict": control_outcome(row.low, row.high, row.n, words)})
        if kind == "paper":
            evidence = f"{evidence}; {resolution_text(row.low, row.high, None)}".strip("; ")
        self.claims.append(Claim(id=id, section=SECTION, claim=claim, paper=paper, grade=grade,
                                 ours=_effect_text(row, ppl), **verdict,
                                 evidence=f"{column}; {evidence}".strip("; "), kind=kind,
                                 method=method, origin=origin))


def not_run(number: int, label: str) -> dict[str, Any]:
    """Item ``number`` (``label``), which this profile does not run."""
    return Claim(id=f"A{number}.0", section=SECTION, claim=label, paper="-", grade="?",
                 ours="not run in this profile (mini-full runs every item)",
                 verdict="not run").to_dict()


def sce_paper(alpha: float) -> tuple[str, Grade, int, frozenset[str]] | None:
    """The paper's direction for CE + alpha SCE vs CE-only (0.1 lowers, 1 raises; else None),
    and the methods it ran it on."""
    if math.isclose(alpha, 0.1):
        ref = paper("table3/longqlora/a0.1/ppl")
        return "lower (Tables 2-3, alpha 0.1)", ref.grade, -1, PAPER_METHODS["tables2-3"]
    if math.isclose(alpha, 1.0):
        ref = paper("table4/alpha1.0/ppl")
        return (f"higher (Table 4: PPL 6.12 -> {ref.value} at alpha 1, CLEX; a third-party "
                f"note: {ref.other}; higher against either, one verdict)", ref.grade, +1,
                PAPER_METHODS["table4"])
    return None


#: the evidence of a comparison Section 5 already claims as the paper's
SECTION5_NOTE = ("the same comparison as Section 5's claim for this method (notebook 03, 2x "
                 "and 4x perplexity), counted there as the paper's; here a check with this "
                 "section's seeds")
SAME_COST = "same cost: both windows forward and backward, no divergence"


def _arm_claim(out: Claims, eff: pd.DataFrame, *, id: str, method: str, div: str, alpha: float,
               baseline: str, column: str, evidence: str) -> None:
    """CE + alpha D against ``baseline``: the paper's claim for SCE at an alpha the paper
    states a direction for, against CE-only; the project's control otherwise."""
    stated = sce_paper(alpha) if div == "sce" and baseline == f"{method} CE" else None
    claim, text, grade, sign, kind = (f"CE + {alpha:g} x {DIVERGENCE_LABELS[div]} against "
                                      f"{baseline} (longest-window NLL)", "-", "?", -1, "control")
    ran: frozenset[str] | None = None
    if stated and out.in_section5(method, div, alpha):
        claim = (f"CE + {alpha:g} x SCE against {baseline} (longest-window NLL; the paper's "
                 "claim is Section 5's, Tables 2-3)")
        evidence = f"{evidence}; {SECTION5_NOTE}"
    elif stated:
        text, grade, sign, ran = stated
        claim = (f"CE + {alpha:g} x SCE {'lowers' if sign < 0 else 'raises'} the longest-window "
                 f"NLL ({method})")
        kind = "paper"
    out.add(eff, id=id, claim=claim, paper=text, grade=grade, method=method,
            setting=f"{DIVERGENCE_LABELS[div]} {alpha:g}", baseline=baseline, column=column,
            sign=sign, evidence=evidence, kind=kind, paper_ran=ran)


def divergence_claims(out: Claims, eff: pd.DataFrame, given: ItemInputs) -> None:
    cfg, column = given.cfg, given.column
    m, fair = cfg.method, "exposure" in cfg.items
    i = 0
    for d, a in arms(cfg):  # the fair comparison first: the same-cost control
        label = f"{DIVERGENCE_LABELS[d]} {a:g}"
        if fair:
            i += 1
            _arm_claim(out, eff, id=f"A1.{i}", method=m, div=d, alpha=a,
                       baseline=f"{m} CE (both windows)", column=column, evidence=SAME_COST)
        i += 1
        _arm_claim(out, eff, id=f"A1.{i}", method=m, div=d, alpha=a, baseline=f"{m} CE",
                   column=column,
                   evidence="vs CE-only on window A (half the forward and backward tokens)")
        for metric in METRIC_COLUMNS:
            i += 1
            again = metric == "misalignment" and out.in_section5(m, d, a)
            out.add(eff, id=f"A1.{i}", claim=f"CE + {a:g} x {DIVERGENCE_LABELS[d]}: its effect "
                    f"on {metric} ({m})", paper="-", grade="?", method=m, setting=label,
                    baseline=f"{m} CE", column=metric,
                    evidence="vs CE-only; the metric on the test books" + (
                        "; " + SECTION5_NOTE.replace("2x and 4x perplexity", "misalignment")
                        if again else ""), kind="control", words=MOVES)
    j = 0  # after every other claim of the item, so their ids do not depend on these
    for d, a in arms(cfg):
        for far in [c for c in FAR_COLUMNS if c in set(eff["column"])]:
            j += 1
            out.add(eff, id=f"A1.F{j}", claim=f"CE + {a:g} x {DIVERGENCE_LABELS[d]}: its effect "
                    f"on the copy NLL at {far[9:]} l_train (use of far context; {m})",
                    paper="-", grade="?", method=m, setting=f"{DIVERGENCE_LABELS[d]} {a:g}",
                    baseline=f"{m} CE", column=far,
                    evidence="vs CE-only; copy probes: the copied span's earlier occurrence "
                    "in the far half of the window", kind="control", words=MOVES)


def sweep_claims(out: Claims, eff: pd.DataFrame, given: ItemInputs) -> None:
    cfg, column = given.cfg, given.column
    i = 0
    for method in cfg.sweep_methods:
        for a in (a for a in cfg.sweep_alphas if a > 0):
            i += 1  # the same-cost control first, as in item 1
            _arm_claim(out, eff, id=f"A2.{i}", method=method, div="sce", alpha=a,
                       baseline=f"{method} CE (both windows)", column=column,
                       evidence=SAME_COST)
            i += 1
            _arm_claim(out, eff, id=f"A2.{i}", method=method, div="sce", alpha=a,
                       baseline=f"{method} CE", column=column, evidence="vs CE-only")
        if {0.1, 0.3} <= set(cfg.sweep_alphas):
            i += 1
            p1, p3 = paper("table4/alpha0.1/longbench"), paper("table4/alpha0.3/longbench")
            pair = effects(given.runs, [(method, "SCE 0.3", method, "SCE 0.1")],
                                  [column, "ppl_" + column[4:]])
            out.add(pair, id=f"A2.{i}", claim=f"alpha = 0.3 beats alpha = 0.1 ({method})",
                    paper=f"LongBench-E {p1.value} -> {p3.value}", grade=p3.grade,
                    method=method, setting="SCE 0.3", baseline=f"{method} SCE 0.1",
                    column=column, sign=-1, evidence="paired by seed; the paper's best alpha",
                    paper_ran=PAPER_METHODS["table4"])


def l_extra_claims(out: Claims, eff: pd.DataFrame, given: ItemInputs) -> None:
    cfg, column = given.cfg, given.column
    m = cfg.method
    ref = paper("table5/lextra_setting4/longbench")
    base = paper("table5/lextra_setting1/longbench")
    i = 0
    for d, a in l_extra_arms(cfg):
        label = f"{DIVERGENCE_LABELS[d]} {a:g}"
        for x in (x for x in cfg.l_extra_settings if x != 1):
            i += 1
            if x == 4 and d == "sce" and math.isclose(a, 0.1):
                out.add(eff, id=f"A3.{i}", claim=f"l_extra setting 4 (U[1, l]) is worse than "
                        f"setting 1 (U[1, l/2]) ({label}, {m})",
                        paper=f"LongBench-E {base.value} -> {ref.value} (LongQLoRA; a "
                              f"third-party note: {ref.other}; lower against either, one "
                              "verdict)",
                        grade=ref.grade, method=m, setting=f"{label}, l_extra 4",
                        baseline=f"{m} {label}", column=column, sign=+1,
                        evidence="paired by seed", paper_ran=PAPER_METHODS["table5"])
            else:
                out.add(eff, id=f"A3.{i}", claim=f"l_extra setting {x} against setting 1 "
                        f"({label}, {m})", paper="-", grade="?", method=m,
                        setting=f"{label}, l_extra {x}", baseline=f"{m} {label}",
                        column=column, evidence="paired by seed", kind="control")


def exposure_claims(out: Claims, eff: pd.DataFrame, given: ItemInputs) -> None:
    cfg, column = given.cfg, given.column
    m, a = cfg.method, cfg.alpha
    _arm_claim(out, eff, id="A4.1", method=m, div="sce", alpha=a,
               baseline=f"{m} CE (both windows)", column=column,
               evidence="same l_train + l_extra sequences, same two forwards, no divergence")
    out.add(eff, id="A4.2", claim=f"Seeing the longer sequences (CE on both windows) against "
            f"CE-only ({m})", paper="not tested", grade="?", method=m,
            setting="CE (both windows)", baseline=f"{m} CE", column=column,
            evidence="vs window A alone", kind="control")
    for metric in METRIC_COLUMNS:
        out.add(eff, id=f"A4.{3 + METRIC_COLUMNS.index(metric)}",
                claim=f"CE on both windows: its effect on {metric} ({m})", paper="-", grade="?",
                method=m, setting="CE (both windows)", baseline=f"{m} CE", column=metric,
                evidence="vs CE-only", kind="control", words=MOVES)


def far_context_claims(out: Claims, eff: pd.DataFrame, cfg: AblationConfig) -> None:
    """Item 4's question per method: does CE + alpha SCE raise the copy NLL against the
    same-cost control? Controls, after every other claim, so that no other id moves."""
    j = 0
    for m in far_context_methods(cfg):
        for far in [c for c in FAR_COLUMNS if c in set(eff["column"])]:
            j += 1
            out.add(eff, id=f"A4.F{j}", claim=f"CE + {cfg.alpha:g} x SCE against the same-cost "
                    f"control: its effect on the copy NLL at {far[9:]} l_train (use of far "
                    f"context; {m})", paper="-", grade="?", method=m,
                    setting=f"SCE {cfg.alpha:g}", baseline=f"{m} CE (both windows)",
                    column=far, evidence="vs CE on both windows (the same sequences and "
                    "forwards, no divergence); copy probes: the copied span's earlier "
                    "occurrence in the far half of the window", kind="control", words=MOVES)


def compute_claims(out: Claims, eff: pd.DataFrame, given: ItemInputs) -> None:
    """Item 5's claims, against the CE-only run nearest to equal counted work
    (``given.equal_steps``, from ``tables.equal_compute_steps``)."""
    cfg, column, steps, equal_steps = given.cfg, given.column, given.steps, given.equal_steps
    m, a = cfg.method, cfg.alpha
    if not cfg.compute_steps:
        return
    nearest = min(cfg.compute_steps, key=lambda n: abs(n - equal_steps))
    ref = paper("sec5.3/compute")
    out.add(eff, id="A5.1", claim=f"At equal compute the regularized run still wins ({m})",
            paper=ref.value, grade=ref.grade, method=m, setting=f"SCE {a:g}",
            baseline=f"{m} CE, {nearest} steps", column=column, sign=-1,
            evidence=f"{steps} regularized steps vs CE-only {nearest} steps, the run nearest to "
            f"equal counted work ({equal_steps:.0f} steps: forward and backward tokens)")
    out.add(eff, id="A5.2", claim=f"CE + {cfg.robust_jeffreys_alpha:g} x Jeffreys against "
            f"CE-only at equal counted work ({m})", paper="-", grade="?", method=m,
            setting=f"Jeffreys {cfg.robust_jeffreys_alpha:g}",
            baseline=f"{m} CE, {nearest} steps", column=column,
            evidence=f"{steps} steps of two windows vs CE-only {nearest} steps (the run nearest "
            f"to {equal_steps:.0f}: equal forward and backward tokens)", kind="control")
    for i, (d, alpha) in enumerate(compute_arms(cfg)[2:], start=3):  # item 1's other arms
        label = DIVERGENCE_LABELS[d]
        out.add(eff, id=f"A5.{i}", claim=f"CE + {alpha:g} x {label} against CE-only at equal "
                f"counted work ({m})", paper="-", grade="?", method=m,
                setting=f"{label} {alpha:g}", baseline=f"{m} CE, {nearest} steps",
                column=column, evidence=f"{steps} steps of two windows vs CE-only {nearest} "
                "steps", kind="control")


def parts_claims(out: Claims, eff: pd.DataFrame, given: ItemInputs) -> None:
    cfg, column = given.cfg, given.column
    m, a = cfg.method, f"SCE {cfg.alpha:g}"
    ref = paper("sec5.3/parts")
    # the same-cost control first; its id follows the paper's three so that theirs do not move
    _arm_claim(out, eff, id="A6.4", method="none", div="sce", alpha=cfg.alpha,
               baseline="none CE (both windows)", column=column,
               evidence="same cost: raw fine-tuning on both windows forward and backward, no "
                        "divergence")
    out.add(eff, id="A6.1", claim="The regularizer alone beats raw fine-tuning (no positional "
            "method)", paper=ref.value, grade=ref.grade, method="none", setting=a,
            baseline="none CE", column=column, sign=-1, evidence="method none at l_train")
    out.add(eff, id="A6.2", claim=f"The positional method alone ({m}) beats the regularizer "
            "alone", paper=ref.value, grade=ref.grade, method=m, setting="CE",
            baseline=f"none {a}", column=column, sign=-1, evidence=PAIRED)
    out.add(eff, id="A6.3", claim=f"Combining both beats the method alone ({m})",
            paper=ref.value, grade=ref.grade, method=m, setting=a, baseline=f"{m} CE",
            column=column, sign=-1, evidence=PAIRED)


def bases_text(eff: pd.DataFrame | None, gains: pd.DataFrame | None = None) -> str:
    """The core comparisons across base models in words (the sign on each, the outcome of the
    t over the base means), after each base model's far-copy gain (``gains``: G1's number)."""
    if eff is None or eff.empty:
        return ("One base model (ablation.base_seeds is empty in this profile): every effect "
                "above varies the fine-tuning seed only, not the pretrained model.")
    lines = []
    if gains is not None and len(gains):
        lines.append("Each base model's far-copy gain at its own window (G1's measure; the "
                     "comparisons below mean little on a base model that does not copy): "
                     + "; ".join(f"{g.base}: {g.value:.3g} [{g.low:.3g}, {g.high:.3g}] nats"
                                 for g in gains.itertuples()) + ".\n")
    for row in eff.itertuples():
        word = control_outcome(row.low, row.high, row.bases)
        signs = {v.split(": ")[1][0] for v in row.per_base.split(", ")} if row.per_base else set()
        agree = ("not run" if row.pairs == 0 else "one base model only" if row.bases < 2
                 else "the same sign on every base model" if len(signs) == 1
                 else "opposite signs between base models")
        lines.append(f"- **{row.setting} vs {row.baseline}**, {row.column}: {row.delta:+.3g} "
                     f"[{row.low:+.3g}, {row.high:+.3g}] over {row.bases} base models x seeds "
                     f"({row.pairs} pairs; {row.per_base}): {word}, {agree}.")
    return ("Paired by (base model, seed); the interval is the t interval over the base "
            "models' means (seeds nested in base models), so it holds the variance between "
            "independently pretrained base models:\n\n" + "\n".join(lines))


def multiplicity_text(claims: list[dict[str, Any]]) -> str:
    """How many interval tests the section makes and how many would come out clear by chance."""
    tested = [c for c in claims if c["verdict"] not in ("not run",)]
    paper_n = sum(c.get("kind", "paper") == "paper" for c in tested)
    clear = sum(c["verdict"] in (*EXCLUDES_ZERO, "helps", "hurts", "lowers", "raises")
                for c in tested)
    return (f"{len(tested)} comparisons tested ({paper_n} of the paper's claims, "
            f"{len(tested) - paper_n} controls), {clear} clear of 0. With 95 % intervals and no "
            f"true effect anywhere, about {0.05 * len(tested):.1f} would be clear by chance "
            "alone; the comparisons share runs (one CE baseline per seed), so they are not "
            "independent either. Read a single clear result with that in mind.")


def far_context_by_method(eff: pd.DataFrame | None) -> str:
    """The far-context question per method (``far_context_pairs``' effects, "" without): CE +
    alpha SCE against the same-cost control on the copy NLL at l_train, in words."""
    if eff is None or eff.empty:
        return ""
    sel = eff[(eff["column"] == "nll_copy_1x") & eff["baseline"].str.endswith("(both windows)")]
    if sel.empty:
        return ""
    lines, up = [], []
    for row in sel.itertuples():
        word = control_outcome(row.low, row.high, row.n, MOVES)
        up += [row.method] if word == "raises" else []
        lines.append(f"- **{row.method}**: {row.setting} against CE on both windows: {word} "
                     f"({_effect_text(row)})")
    answer = (f"Against the same-cost control, {row.setting} raises the copy NLL at l_train for "
              f"{', '.join(up)}: there it teaches the model to use the far context less."
              if up else f"Against the same-cost control, {row.setting} raises the copy NLL "
              "at l_train for no method beyond the paired seed noise.")
    return (f"Per method, against the same-cost control (copy NLL at l_train; {OVER} "
            "interval):\n\n" + "\n".join(lines) + "\n\n" + answer)


def far_context_text(eff: pd.DataFrame | None, by_method: pd.DataFrame | None = None) -> str:
    """Does a regularizer teach the model to ignore far context? Per arm of item 1 (``eff``), its
    effect on the copy NLL against CE-only and the same-cost control, whether Jeffreys and SCE
    differ there; then the question per method (``far_context_by_method``)."""
    per_method = far_context_by_method(by_method)
    sel = eff[eff["column"].isin(FAR_COLUMNS)] if eff is not None else pd.DataFrame()
    judged = sel[(sel["column"] == "nll_copy_1x") & (sel["n"] >= 2)] if len(sel) else sel
    if judged.empty:
        text = ("No copy probes at l_train in these runs' metrics with two or more seeds (or "
                "item 1 not run): the question is not answered here.")
        return f"{text}\n\n{per_method}" if per_method else text
    lines, raised = [], {}
    for setting in dict.fromkeys(sel["setting"]):
        parts = []
        for row in sel[sel["setting"] == setting].itertuples():
            word = control_outcome(row.low, row.high, row.n, MOVES)
            if row.baseline.endswith(" CE") and row.column == "nll_copy_1x":
                raised[setting] = word
            parts.append(f"{row.column} against {row.baseline}: {word} ({_effect_text(row)})")
        lines.append(f"- **{setting}**: " + "; ".join(parts) + ".")
    by_kind: dict[str, set[str]] = {}
    for setting, word in raised.items():
        by_kind.setdefault(setting.split(" ")[0], set()).add(word)
    up = [s for s, w in raised.items() if w == "raises"]
    answer = (f"At l_train, where the far text lies inside the training window, {', '.join(up)} "
              "raise the copy NLL against CE-only: the model uses the far context less." if up
              else "No arm raises the copy NLL at l_train against CE-only beyond the paired seed "
              "noise: at this scale no regularizer measurably teaches the model to ignore the "
              "far context.")
    if "SCE" in by_kind and "Jeffreys" in by_kind:
        same = by_kind["SCE"] == by_kind["Jeffreys"]
        answer += (" Jeffreys and SCE " + ("behave alike there" if same else "differ there")
                   + f" (SCE: {', '.join(sorted(by_kind['SCE']))}; Jeffreys: "
                   f"{', '.join(sorted(by_kind['Jeffreys']))}).")
    text = (f"Copy NLL (lower: the far occurrence is used), {OVER} interval:\n\n"
            + "\n".join(lines) + "\n\n" + answer)
    return f"{text}\n\n{per_method}" if per_method else text


def closing_text(eff: pd.DataFrame | None, column: str) -> str:
    """What item 1 supports (``eff``; None: not run): each arm against the same-cost control,
    then CE-only, then its effect on the paper's metric; whether alignment alone helps."""
    sel = eff[eff["column"] == column] if eff is not None else pd.DataFrame()
    if sel.empty:
        return "Item 1 was not run in this profile: nothing to conclude."
    lines, fair_words = [], {}
    for setting in dict.fromkeys(sel["setting"]):
        rows = sel[sel["setting"] == setting]
        parts = []
        for row in sorted(rows.itertuples(), key=lambda r: "both" not in r.baseline):
            word = control_outcome(row.low, row.high, row.n)
            if "both" in row.baseline:
                fair_words[setting] = word
            parts.append(f"against {row.baseline}: {word} ({_effect_text(row)})")
        method = rows.iloc[0]["method"]
        metric = effect_row(eff, method, setting, f"{method} CE", "misalignment")
        if metric is not None:
            moved = control_outcome(metric.low, metric.high, metric.n, MOVES)
            note = ""
            if moved != "lowers" and any(control_outcome(r.low, r.high, r.n) == "helps"
                                         for r in rows.itertuples()):
                note = " — it helps without lowering the paper's metric"
            parts.append(f"L_misalign {moved} ({metric.delta:+.3g} [{metric.low:+.3g}, "
                         f"{metric.high:+.3g}]){note}")
        lines.append(f"- **{setting}**: " + "; ".join(parts) + ".")
    jeff = [s for s in fair_words if s.startswith("Jeffreys")]
    moved = next((w for w in ("helps", "hurts") if any(fair_words[s] == w for s in jeff)), "")
    if not fair_words:
        answer = ("The same-cost control (CE on both windows) was not run: every effect above "
                  "is against a baseline with half the forward and backward tokens.")
    elif not jeff:
        answer = "Jeffreys was not run: the question stays open here."
    elif moved:
        answer = (f"Against the same-cost control, alignment without sharpening {moved} here: "
                  f"{', '.join(s for s in jeff if fair_words[s] == moved)}.")
    else:
        answer = ("Against the same-cost control, alignment without sharpening does not move "
                  f"the {column} beyond the paired seed noise at this scale.")
    return (f"Effect on {column} ({OVER} interval), the same-cost control first:\n\n"
            + "\n".join(lines) + "\n\n" + answer)
