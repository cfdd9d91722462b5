"""Section 5.3 (notebook ``04_ablations``): the regularizer taken apart. Every run is a
fine-tuning run of the one trainer from the pipeline's base model, paired by seed (further
base models, ``ablation.base_seeds``: the core comparisons and the paper's items compute and
parts again, paired by base and seed); every effect is the mean paired difference over seeds
with its Student t interval, or over base models where a comparison ran on two or more (a t
over the base means: ``tables.effects``), a verdict only outside it (``claims``,
``lsa.stats``). The items (``ITEMS``,
one ``Item`` each): 1 alignment or sharpening (``divergence``), 2 the alpha sweep, 3 the
l_extra range, 4 the longer-exposure control, 5 equal compute (counted work: the tokens a step
runs forward and backward, never a timing), 6 each part alone. A profile that does not run an
item says so. Its figures and item 1's tidy table (which the notebook plots): ``figures``."""

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

__all__ = ["ITEMS", "AblationsResult", "Item", "ItemInputs", "alpha_axis", "analyse",
           "best_of_item1", "compute_text", "counts", "describe", "divergence_effects",
           "effects", "figure_alpha_sweep", "figure_exposure", "figure_l_extra", "figure_parts",
           "summary"]


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
    summary's, ``compute``: item 5's accounting; ``settings``, ``l_train``, ``steps``: the
    section's settings, the training window and the regularized runs' steps."""

    runs: pd.DataFrame | None = None
    effects_far_context: pd.DataFrame | None = None
    bases: pd.DataFrame | None = None
    runs_every_base: pd.DataFrame | None = None
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
        they are what the numbers would say, not a verdict; then the claims split by kind."""
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
    given = ItemInputs(cfg=cfg, column=long, runs=own, steps=ft.optim.steps,
                       equal_steps=accounting["equal forward and backward tokens"])
    result = AblationsResult(runs=own, long=long_ppl, long_nll=long, columns=columns,
                             compute=accounting if "compute" in cfg.items else None,
                             settings=cfg, l_train=ft.l_train, steps=ft.optim.steps,
                             premise_method=cfg.method)  # its items are about one method
    # CE + alpha SCE vs CE-only per method: Section 5's claims already
    out = claims.Claims({(m, a) for m in ft.methods for a in ft.alphas if a > 0})
    for number, item in enumerate(ITEMS, start=1):
        if item.key not in cfg.items:
            result.claims.append(claims.not_run(number, item.label))
            continue
        # on every base model where a comparison ran on two or more (ablation.base_seeds):
        # the core comparisons and the paper's items compute and parts
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
                      "closing": claims.closing_text(divergence, long),
                      "far_context": claims.far_context_text(divergence, far),
                      "bases": claims.bases_text(result.bases, runs.base_gains),
                      "multiplicity": claims.multiplicity_text(result.claims)}
    return result


def describe(setup: Setup, result: AblationsResult) -> str:
    cfg, ft = setup.settings, setup.pipe.finetune
    return (f"profile {setup.profile}: items {cfg.items}, {len(setup.plan.ablation)} runs "
            f"({cfg.method}, seeds {cfg.seeds}), l_train {ft.l_train}, {ft.optim.steps} steps "
            "each")


def _claims_of(found: list[dict[str, Any]], kind: str) -> pd.DataFrame:
    from lsa.claims import claims_table

    table = claims_table(found)
    return table[table["kind"] == kind].drop(columns=["section", "kind"])


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
    """Item 5's accounting: CE-only steps of equal cost, by what is counted."""
    accounting, steps = result.compute, result.steps
    if accounting is None:
        return None
    return "\n".join([f"- {k}: {v:.3g} CE-only steps" for k, v in accounting.items()] + [
        "", f"A regularized step runs two windows of l_train tokens, forward and backward: at "
        f"equal counted work {steps} regularized steps cost "
        f"{accounting['equal forward and backward tokens']:.0f} CE-only steps on window A. "
        "The paper's 47/95/190 against 50/100/200 steps (a 3-5 % overhead) counts a baseline "
        "that also runs both windows. Measured times: `python -m lsa bench misalign` (README)."])
