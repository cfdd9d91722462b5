"""Section 5.3 (notebook ``04_ablations``): the regularizer taken apart. Every run is a
fine-tuning run of the one trainer from the pipeline's base model, paired by seed (further
base models, ``ablation.base_seeds``: the core comparisons and the paper's items l_extra,
compute and parts again, paired by base and seed); every effect is the mean paired difference
over seeds with its Student t interval, or over base models where a comparison ran on two or
more (a t over the base means: ``tables.effects``), a verdict only outside it (``claims``,
``lsa.stats``). The items (``ITEMS``, one ``Item`` each): 1 alignment or sharpening
(``divergence``), 2 the alpha sweep, 3 the l_extra range (the rebuttal's three conclusions),
4 the longer-exposure control, 5 equal compute (the paper's step fractions, fixed in the
configuration, with the arms' measured time per step beside; and the review's reading,
counted work), 6 each part alone. A profile that does not run an item says so. Its figures and
item 1's tidy table (which the notebook plots): ``figures``; the prose of its numbers: below
``analyse``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from lsa import runtable
from lsa.config import AblationConfig, AblationItem, PipelineConfig
from lsa.gates import Gate
from lsa.notebook import Setup
from lsa.runtable import RunTables
from lsa.sections import Result
from lsa.sections.ablations import claims, tables
from lsa.sections.ablations.figures import (
    alpha_axis,
    divergence_effects,
    figure_alpha_sweep,
    figure_exposure,
    figure_l_extra,
    figure_parts,
)
from lsa.sections.ablations.tables import ItemInputs
from lsa.stats import EXCLUDES_ZERO, MOVES, control_outcome

__all__ = ["ITEMS", "AblationsResult", "Item", "ItemInputs", "alpha_axis", "analyse",
           "bases_text", "best_of_item1", "closing_text", "compute_text", "counts", "describe",
           "divergence_effects", "effects", "far_context_by_method", "far_context_text",
           "figure_alpha_sweep", "figure_exposure", "figure_l_extra", "figure_parts",
           "multiplicity_text", "summary"]


@dataclass(frozen=True)
class Item:
    """One item of the section: its ``key`` (``AblationConfig.items``), its ``label`` (its
    heading; the claim of an item not run), the comparisons it makes (``pairs``, from the
    settings), the columns of the runs it compares (``columns``) and its ``claims`` (they add
    to the section's ``claims.Claims`` from the item's effects)."""

    key: AblationItem
    label: str
    pairs: Callable[[AblationConfig], list[tables.Pair]]
    columns: Callable[[pd.DataFrame], list[str]]
    claims: Callable[[claims.Claims, pd.DataFrame, ItemInputs], None]


#: the section's items, in the paper's order (item n is ``ITEMS[n - 1]``; its claims ``An.*``)
ITEMS: tuple[Item, ...] = (
    Item(key="divergence", label="1. Alignment or sharpening", pairs=tables.divergence_pairs,
         columns=tables.metric_columns, claims=claims.divergence_claims),
    Item(key="alpha_sweep", label="2. The alpha sweep (Table 4)", pairs=tables.sweep_pairs,
         columns=tables.judged_columns, claims=claims.sweep_claims),
    Item(key="l_extra", label="3. The l_extra range (Table 5)", pairs=tables.l_extra_pairs,
         columns=tables.judged_columns, claims=claims.l_extra_claims),
    Item(key="exposure", label="4. The longer-exposure control", pairs=tables.exposure_pairs,
         columns=tables.metric_columns, claims=claims.exposure_claims),
    Item(key="compute", label="5. Equal compute", pairs=tables.compute_pairs,
         columns=tables.judged_columns, claims=claims.compute_claims),
    Item(key="parts", label="6. Each part alone", pairs=tables.parts_pairs,
         columns=tables.judged_columns, claims=claims.parts_claims),
)

#: what the closing, far-context and bases texts say first where the premise fails
PREMISE_NOT_MET = ("**Premise not met** (the gates above): what follows is what the numbers "
                   "would say on this testbed, not a verdict on the paper.\n\n")


@dataclass
class AblationsResult(Result):
    """Section 5.3's tables: the runs, each item's paired effects (``effects``, by item key:
    saved as ``effects_<item>`` after the runs, only the items run), the far-context question
    per method, the core comparisons on every base model, the claims split by kind;
    ``long`` / ``long_nll``: the longest window's perplexity and NLL columns, ``columns``: the
    summary's, ``compute``: item 5's accounting, ``compute_paper``: its paper budgets with the
    arms' measured time per step (``tables.paper_compute_table``); ``settings``, ``l_train``,
    ``steps``: the section's settings, the training window and the regularized runs' steps."""

    runs: pd.DataFrame | None = None
    effects_far_context: pd.DataFrame | None = None
    bases: pd.DataFrame | None = None
    runs_every_base: pd.DataFrame | None = None
    compute_paper: pd.DataFrame | None = None
    claims_paper: pd.DataFrame | None = None
    claims_controls: pd.DataFrame | None = None
    effects: dict[str, pd.DataFrame] = field(default_factory=dict)
    long: str = ""
    long_nll: str = ""
    columns: list[str] = field(default_factory=list)
    compute: dict[str, Any] | None = None
    settings: AblationConfig | None = None
    l_train: int = 0
    steps: int = 0

    def saved_tables(self) -> dict[str, pd.DataFrame]:
        """``Result.saved_tables`` with each item's effects (``effects_<item>``, in the items'
        order) after the gates and the runs."""
        saved = super().saved_tables()
        first = {name: saved.pop(name) for name in ("gates", "runs") if name in saved}
        items = {f"effects_{item.key}": self.effects[item.key] for item in ITEMS
                 if item.key in self.effects}
        return {**first, **items, **saved}

    def after_premise(self) -> None:
        """Where the premise fails, the closing, far-context and bases texts say first that
        they are what the numbers would say, not a verdict; then the claims split by kind, the
        paper's with Holm's p over this section's paper claims (``_claims_of``)."""
        if not self.metrics["premise_met"]:
            for key in ("closing", "far_context", "bases"):
                self.metrics[key] = PREMISE_NOT_MET + self.metrics[key]
        self.claims_paper = _claims_of(self.claims, "paper")
        self.claims_controls = _claims_of(self.claims, "control")


def analyse(pipe: PipelineConfig, runs: RunTables, gates: list[Gate]) -> AblationsResult:
    """The runs of every configured item (``runs.ablation``; items 1-6: those from the
    pipeline's base model), their paired effects and claims, item by item (``ITEMS``); each
    distinct comparison is claimed once (``claims.Claims``); the core comparisons on every base
    model beside each one's far-copy gain (``runs.base_gains``)."""
    runs.need("ablation", "base_gains")
    cfg, ft = pipe.ablation, pipe.finetune
    every = tables.with_entropy(runs.ablation)
    own = every[every["base_seed"] == pipe.pretrain.seed]  # items 1-6: the pipeline's base
    long, long_ppl = tables.longest_column(own), tables.longest_column(own, "ppl")
    columns = runtable.window_columns(own) + ["ppl_growth", "misalignment", "jeffreys",
                                              "mean_entropy"]
    accounting = tables.equal_compute_steps(ft.optim.steps, ft.l_train)  # item 5's
    timed = tables.paper_compute_table(every, cfg) if "compute" in cfg.items else None
    given = ItemInputs(cfg=cfg, column=long, runs=own, steps=ft.optim.steps,
                       equal_steps=accounting["equal forward and backward tokens"],
                       compute_paper=timed)
    result = AblationsResult(runs=own, long=long_ppl, long_nll=long, columns=columns,
                             compute=accounting if "compute" in cfg.items else None,
                             compute_paper=timed,
                             settings=cfg, l_train=ft.l_train, steps=ft.optim.steps,
                             premise_method=cfg.method)  # its items are about one method
    # CE + alpha SCE vs CE-only per method: Section 5's claims already
    out = claims.Claims({(m, a) for m in ft.methods for a in ft.alphas if a > 0})
    for number, item in enumerate(ITEMS, start=1):
        if item.key not in cfg.items:
            result.claims.append(claims.not_run(number, item.label))
            continue
        # on every base model where a comparison ran on two or more (ablation.base_seeds):
        # the core comparisons and the paper's items l_extra, compute and parts
        eff = tables.effects(every, item.pairs(cfg), item.columns(own))
        result.effects[item.key] = eff
        item.claims(out, eff, given)
    far = None
    if "exposure" in cfg.items:  # item 4's question per method, against the same-cost control
        far = tables.effects(every, tables.far_context_pairs(cfg), tables.far_columns(own))
        result.effects_far_context = far
        if len(far):
            claims.far_context_claims(out, far, cfg)
    result.claims += [c.to_dict() for c in out.claims]
    if cfg.base_seeds:  # the core comparisons on every base model (no further claims)
        result.bases = tables.base_effects(every, cfg, [c for c in dict.fromkeys(
            ("nll_2x", long)) if c in every.columns])
        result.runs_every_base = every
    divergence = result.effects.get("divergence")
    result.metrics = {"items": list(cfg.items), "runs": own.to_dict(orient="records"),
                      "closing": closing_text(divergence, long),
                      "far_context": far_context_text(divergence, far),
                      "bases": bases_text(result.bases, runs.base_gains),
                      "multiplicity": multiplicity_text(result.claims)}
    return result


def describe(setup: Setup, result: AblationsResult) -> str:
    cfg, ft = setup.settings, setup.pipe.finetune
    return (f"profile {setup.profile}: items {cfg.items}, {len(setup.plan.ablation)} runs "
            f"({cfg.method}, seeds {cfg.seeds}), l_train {ft.l_train}, {ft.optim.steps} steps "
            "each")


def _claims_of(found: list[dict[str, Any]], kind: str) -> pd.DataFrame:
    """The claims of ``kind``; the paper's with ``p_holm_section``, Holm's adjustment over this
    section's paper claims (``lsa.claims.with_holm``: a lower bound of the report's
    ``p_holm``, whose family is every section's paper claims; an objection is in neither)."""
    from lsa.claims import claims_table, with_holm

    table = with_holm(claims_table(found)).rename(columns={"p_holm": "p_holm_section"})
    table = table[table["kind"] == kind].drop(columns=["section", "kind"])
    return table if kind == "paper" else table.drop(columns=["p_holm_section"])


def counts(result: AblationsResult) -> str:
    """The section's claims counted apart: the paper's by verdict, the controls by outcome."""
    from lsa.claims import claims_table, counts_sentence, verdict_counts

    return counts_sentence(*verdict_counts(claims_table(result.claims))) + "."


def effects(result: AblationsResult, item: str, columns: list[str] | None = None
            ) -> pd.DataFrame | None:
    """Item ``item``'s paired effects (the rows of ``columns``), or None when not run."""
    eff = result.effects.get(item)
    if eff is None or columns is None:
        return eff
    return eff[eff["column"].isin(columns)]


def summary(result: AblationsResult) -> pd.DataFrame:
    """Item 1's runs: mean and spread by setting of every column."""
    runs = result.runs
    return tables.summary(runs[runs["method"] == result.settings.method], result.columns)


def best_of_item1(result: AblationsResult) -> str | None:
    """Item 1's lowest longest-window perplexity, beside item 3's fixed alphas."""
    eff, long = result.effects.get("divergence"), result.long_nll
    if eff is None or "l_extra" not in result.effects:
        return None
    best = eff[(eff["column"] == long) & (eff["baseline"].str.endswith(" CE"))].sort_values(
        "delta").iloc[0]
    return f"item 1's lowest {long}: {best.setting} (paired change {best.delta:+.3g})"


def compute_text(result: AblationsResult) -> str | None:
    """Item 5 in words: the paper's budgets with the arms' measured time per step, then the
    review's accounting (CE-only steps of equal cost, by what is counted)."""
    accounting, steps, timed = result.compute, result.steps, result.compute_paper
    if accounting is None:
        return None
    paper = [f"- CE-only {r.ce_steps} steps against the regularized run at {r.regularized_steps} "
             f"({r.fraction}): measured time per step, regularized / CE, "
             + (f"{r.time_ratio:.3g} ({r.time_ratio_low:.3g}-{r.time_ratio_high:.3g} over "
                f"{r.pairs} paired runs)" if r.pairs else "no paired runs")
             for r in (timed if timed is not None else pd.DataFrame()).itertuples()]
    return "\n".join(
        ["**The paper's claim** (the rebuttal: CE-only at 50/100/200 steps against the "
         "regularized run at 47/95/190, its measured 3-5 % overhead; budgets scaled to this "
         "testbed, claims A5.P1-A5.P3):", "", *paper, "",
         "The fractions are fixed in `config/`; the times are the runs' own "
         "(`train_summary.json`), measured on a machine shared with other jobs.", "",
         "**The review's reading** (claim A5.1, an objection): CE-only steps of equal cost, by "
         "what is counted:", ""]
        + [f"- {k}: {v:.3g} CE-only steps" for k, v in accounting.items()] + [
        "", f"A regularized step runs two windows of l_train tokens, forward and backward: at "
        f"equal counted work {steps} regularized steps cost "
        f"{accounting['equal forward and backward tokens']:.0f} CE-only steps on window A. "
        "Measured cost of each step variant: `python -m lsa bench misalign` (README)."])


# ---------------------------------------------------------------------------------------------
# the section's prose, computed from its effects and claims


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
                     f"({claims.effect_text(row)})")
    answer = (f"Against the same-cost control, {row.setting} raises the copy NLL at l_train for "
              f"{', '.join(up)}: there it teaches the model to use the far context less."
              if up else f"Against the same-cost control, {row.setting} raises the copy NLL "
              "at l_train for no method beyond the paired seed noise.")
    return (f"Per method, against the same-cost control (copy NLL at l_train; {claims.OVER} "
            "interval):\n\n" + "\n".join(lines) + "\n\n" + answer)


def far_context_text(eff: pd.DataFrame | None, by_method: pd.DataFrame | None = None) -> str:
    """Does a regularizer teach the model to ignore far context? Per arm of item 1 (``eff``), its
    effect on the copy NLL against CE-only and the same-cost control, whether Jeffreys and SCE
    differ there; then the question per method (``far_context_by_method``)."""
    per_method = far_context_by_method(by_method)
    sel = eff[eff["column"].isin(tables.FAR_COLUMNS)] if eff is not None else pd.DataFrame()
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
            parts.append(f"{row.column} against {row.baseline}: {word} "
                         f"({claims.effect_text(row)})")
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
    text = (f"Copy NLL (lower: the far occurrence is used), {claims.OVER} interval:\n\n"
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
            parts.append(f"against {row.baseline}: {word} ({claims.effect_text(row)})")
        method = rows.iloc[0]["method"]
        metric = tables.effect_row(eff, method, setting, f"{method} CE", "misalignment")
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
    return (f"Effect on {column} ({claims.OVER} interval), the same-cost control first:\n\n"
            + "\n".join(lines) + "\n\n" + answer)
