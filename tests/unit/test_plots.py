"""Every figure a section draws follows the rules of ``lsa.plots.figure_problems``: each axes
that shows data has x and y labels (a shared axis labelled once), at most one legend and none
over the data, no label that is a column's name (``value``, ``ppl_1x``), no text over another
panel. The figures are drawn by the sections' own functions, and each notebook's main figure
by its own cell (tagged ``main-figure``), from small tidy tables of the shapes their
``analyse`` returns (the smoke configuration); the smoke notebooks draw them from
real runs with ``LSA_STRICT_FIGURES`` set (tests/e2e/test_notebooks_run.py)."""

import dataclasses
import itertools
import json
import types

import matplotlib
import numpy as np
import pandas as pd
import pytest
from support import ROOT

from lsa import plots
from lsa.config import load_config
from lsa.sections import ablations, babilong, correlation, finetuning, synthetic

matplotlib.use("Agg")
RNG = np.random.default_rng(0)
PIPE = load_config(profile="smoke")


def main_figure(notebook: str, setup, result):
    """A notebook's main figure (its cell tagged ``main-figure``: a few seaborn lines a student
    edits), drawn from ``setup`` and ``result`` after the notebook's import cell."""
    cells = [c for c in json.loads((ROOT / "notebooks" / f"{notebook}.ipynb").read_text())[
        "cells"] if c["cell_type"] == "code"]
    tagged = [c for c in cells if "main-figure" in c["metadata"].get("tags", [])]
    assert len(tagged) == 1, notebook
    names: dict = {}
    exec(cells[0]["source"], names)
    names.update(setup=setup, result=result)
    exec(tagged[0]["source"], names)
    return names["fig"]


def setup_of(settings):
    return types.SimpleNamespace(pipe=PIPE, settings=settings, profile="smoke", snapshot=None)


def windows(row, kind="ppl", mults=(1, 2, 4)):
    return {f"{kind}_{m}x": float(RNG.uniform(50, 150) * m ** 0.3) for m in mults}


def synthetic_figures():
    cfg = PIPE.synthetic
    rows = []
    cells = [(t, e, "identity") for t in cfg.tasks for e in cfg.encodings]
    cells += [(t, e, r) for t in cfg.outrep_tasks for e in cfg.outrep_encodings
              for r in cfg.outrep_transforms]
    for (task, enc, rep), seed, length in itertools.product(cells, [0, 1],
                                                            range(1, cfg.test_max_len + 1)):
        rows.append({"task": task, "encoding": enc, "transform": rep, "seed": seed,
                     "length": length, "mse": float(RNG.uniform(0.01, 1) * length)})
    result = synthetic.SyntheticResult(per_length=pd.DataFrame(rows), settings=cfg)
    setup = setup_of(cfg)
    return [("fig1_tasks_by_encoding", main_figure("01_synthetic_study", setup, result)),
            ("fig1c_outrep", synthetic.figure_outrep(setup, result))]


def finetuning_figures():
    ft = PIPE.finetune
    runs = pd.DataFrame([{"method": m, "alpha": a, "loss": "CE" if a == 0 else f"CE+{a:g}*SCE",
                          "seed": s, "misalignment": float(RNG.uniform(0, 1)), **windows(None)}
                         for m in ft.methods for a in ft.alphas for s in [0, 1]])
    curves = pd.DataFrame([{"method": m, "loss": "CE" if a == 0 else f"CE+{a:g}*SCE",
                            "seed": s, "step": step, "ce": 5 - step / 10,
                            "misalign": (0.1 * step if a else np.nan)}
                           for m in ft.methods[:2] for a in ft.alphas for s in [0, 1]
                           for step in range(1, 11)])
    setup = setup_of(PIPE.view)
    result = finetuning.FinetuningResult(runs=runs, curves=curves, l_train=PIPE.finetune.l_train)
    return [("figure_ppl_by_window", main_figure("03_regularized_finetuning", setup, result)),
            *[(f.__name__, f(setup, result)) for f in (finetuning.figure_training_curves,
                                                       finetuning.figure_misalignment)]]


def correlation_figures():
    kinds = ["fine-tuning run", "base model", "base + RoPE, no fine-tuning", "BABILong run"]
    units = pd.DataFrame([{"unit": f"u{i}", "kind": kinds[i % 4],
                           **{c: float(RNG.uniform(0.1, 9)) for c in
                              ("misalignment", "train_loss", "jeffreys", "entropy", "l2")},
                           "score_beyond_4x": float(RNG.uniform(-6, -4.7))} for i in range(20)])
    table1 = pd.DataFrame([{"predictor": p, "method": "pearson", "score": "score_beyond_4x",
                            "r": 0.3, "low": -0.1, "high": 0.6}
                           for p in ("misalignment", "train_loss")])
    top1 = pd.DataFrame([{"model": m, "l_extra_mid": x, "top1_changed": v, "low": v - 0.02,
                          "high": v + 0.02}
                         for i, m in enumerate(["base", "pi_a0_s0"]) for x in (8, 16, 32)
                         for v in [0.1 * i + 0.01 * x]])
    result = correlation.CorrelationResult(units_primary=units, table1=table1, audit_top1=top1,
                                           metrics={"main_score": "score_beyond_4x"},
                                           l_train=PIPE.finetune.l_train)
    setup = setup_of(PIPE.population)
    return [("figure_table1", main_figure("02_misalignment_correlation", setup, result)),
            *[(f.__name__, f(setup, result)) for f in (
                correlation.figure_parts, correlation.figure_l2_sce, correlation.figure_top1)]]


def ablation_figures():
    cfg = dataclasses.replace(PIPE.ablation, items=[item.key for item in ablations.ITEMS])
    rows = []
    settings = [("pi", "CE", 0.0, "sce", 1, "a"), ("pi", "CE (both windows)", 0.0, "sce", 1,
                                                   "both"),
                ("pi", f"SCE {cfg.alpha:g}", cfg.alpha, "sce", 1, "a"),
                ("none", "CE", 0.0, "sce", 1, "a"),
                ("none", f"SCE {cfg.alpha:g}", cfg.alpha, "sce", 1, "a")]
    settings += [(m, f"SCE {a:g}", a, "sce", 1, "a") for m in cfg.sweep_methods
                 for a in cfg.sweep_alphas + [2500.0] if a > 0]
    settings += [("clex", "CE", 0.0, "sce", 1, "a")]
    settings += [(cfg.method, f"SCE {a:g}, l_extra {x}", a, "sce", x, "a")
                 for a in cfg.l_extra_alphas for x in cfg.l_extra_settings]
    for (method, setting, alpha, div, lx, ce_on), seed in itertools.product(settings, [0, 1]):
        rows.append({"method": method, "setting": setting, "alpha": alpha, "divergence": div,
                     "l_extra_setting": lx, "ce_on": ce_on, "steps": PIPE.finetune.optim.steps,
                     "seed": seed, "base_seed": PIPE.pretrain.seed, **windows(None),
                     **windows(None, "nll")})
    runs = pd.DataFrame(rows)
    divergence = pd.DataFrame([{"column": "nll_4x", "setting": f"{d} {a:g}", "baseline": b,
                                "delta": v, "low": v - 0.5, "high": v + 0.5, "seeds": 2}
                               for d in ("sce", "jeffreys") for a in (0.1, 1.0)
                               for b in ("pi CE", "pi CE (both windows)")
                               for v in [float(RNG.normal())]])
    effects = {"divergence": divergence,
               **{item.key: pd.DataFrame() for item in ablations.ITEMS[1:]}}
    result = ablations.AblationsResult(runs=runs, effects=effects, long="ppl_4x",
                                       long_nll="nll_4x", settings=cfg,
                                       l_train=PIPE.finetune.l_train,
                                       steps=PIPE.finetune.optim.steps)
    setup = setup_of(cfg)
    return [("figure_divergence", main_figure("04_ablations", setup, result)),
            *[(f.__name__, f(setup, result)) for f in (
                ablations.figure_alpha_sweep, ablations.figure_l_extra,
                ablations.figure_exposure, ablations.figure_parts)]]


def babilong_figures():
    def table(x, values, *first):
        return pd.DataFrame([{**dict(zip(first, f)), x: v, "loss": loss, "accuracy": acc,
                              "ci_low": acc - 10, "ci_high": acc + 10}
                             for f in itertools.product(*[["qa1", "qa2"]] * len(first))
                             for v in values for loss in ("CE", "CE+0.1*SCE")
                             for acc in [float(RNG.uniform(20, 80))]])

    mults = PIPE.babilong.eval_multiples
    result = babilong.BabilongResult(
        table6_accuracy_by_length=table("multiple", mults),
        accuracy_by_task_length=table("multiple", mults, "task"),
        table7_qa1_by_depth=table("depth", [0.0, 0.25, 0.5, 0.75]), metrics={"scorer": ["exact"]})
    setup = setup_of(PIPE.view)
    return [("figure_by_length", main_figure("05_babilong", setup, result)),
            ("figure_by_depth", babilong.figure_by_depth(setup, result))]


@pytest.fixture(scope="module")  # drawn once for the tests that read them (10 s)
def drawn(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LSA_OUTPUT_ROOT", str(tmp_path_factory.mktemp("out")))
        mp.setenv("LSA_STRICT_FIGURES", "")  # the rules are asserted here, one by one
        plots.set_theme()  # as a notebook draws them (lsa.notebook.open_section)
        figures = (synthetic_figures() + finetuning_figures() + correlation_figures()
                   + ablation_figures() + babilong_figures())
        yield figures
    plots.plt.close("all")


def test_every_section_figure_follows_the_rules(drawn):
    assert len(drawn) == 16 and all(fig is not None for _, fig in drawn)
    problems = {name: plots.figure_problems(fig) for name, fig in drawn}
    assert {name: p for name, p in problems.items() if p} == {}


def test_windows_are_labelled_with_their_tokens_and_alpha_0_shows(drawn):
    figs = dict(drawn)
    ax = figs["figure_ppl_by_window"].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1x\n128", "2x\n256", "4x\n512"]
    assert ax.get_xlabel() == "window (x l_train; tokens)"
    assert ax.get_ylabel().startswith("perplexity")
    sweep = figs["figure_alpha_sweep"].axes[0]
    assert sweep.get_xscale() == "symlog" and sweep.get_xlim()[0] < 0 < 0.1
    assert "(512 tokens)" in sweep.get_ylabel()


def test_the_rules_catch_what_the_published_figures_had():
    """A raw column name, a missing y label on an unshared panel, a legend per panel, a y
    label over the panel beside it, a legend over the points."""
    fig, axes = plots.plt.subplots(1, 2, figsize=(4, 2))
    for ax in axes:
        ax.plot([0, 1], [0, 1], "o", label="a")
        ax.legend()
    axes[0].set(xlabel="ppl_1x", ylabel="value")
    axes[1].set(xlabel="x", ylabel="a y label long enough to reach over the panel beside it")
    problems = " | ".join(plots.figure_problems(fig))
    for expected in ("axes 1", "'ppl_1x' names a column", "'value' names a column",
                     "2 legends", "overlaps axes 0"):
        assert expected in problems
    assert "axes 0 (untitled): no y label" not in problems
    fig, ax = plots.plt.subplots()
    ax.plot(np.linspace(0, 1, 50), np.linspace(0, 1, 50), "o", label="diagonal")
    ax.legend(loc="center")
    ax.set(xlabel="x", ylabel="y")
    assert any("hides" in p for p in plots.figure_problems(fig))
    fig, axes = plots.plt.subplots(1, 2, sharey=True)  # a shared y: labelled once is enough
    for ax in axes:
        ax.plot([0, 1], [0, 1])
        ax.set_xlabel("x")
    axes[0].set_ylabel("y")
    assert plots.figure_problems(fig) == []
    plots.plt.close("all")


def test_column_labels_say_what_and_how_long():
    assert plots.column_label("ppl_4x", 128) == "perplexity at 4x l_train (512 tokens)"
    assert plots.column_label("nll_beyond_2x") == "NLL beyond l_train, 2x l_train windows (nats)"
    assert plots.column_label("misalignment") == "misalignment L_misalign (SCE, nats)"
    assert not plots.RAW_LABEL.search(plots.column_label("score_beyond_4x", 128))


def test_tick_labels_of_one_axis_must_not_overlap():
    import matplotlib.pyplot as plt

    from lsa.plots import figure_problems

    fig, ax = plt.subplots(figsize=(1.6, 1.6))
    ax.plot([0, 1, 2], [1, 2, 3])
    ax.set(xlabel="window", ylabel="perplexity", xticks=[0, 1, 2])
    ax.set_xticklabels(["1x\n256 tokens", "2x\n512 tokens", "4x\n1024 tokens"])
    assert any("tick labels" in p and "overlap" in p for p in figure_problems(fig))
    ax.set_xticklabels(["1x", "2x", "4x"])
    assert not [p for p in figure_problems(fig) if "tick labels" in p]
    plt.close(fig)


def test_one_colour_means_one_loss_in_every_panel_of_table_6(out_root, monkeypatch):
    """Table 6's two panels (all tasks, by task): a loss keeps its colour in both, and the
    tasks differ by marker; the depth figure uses the same colours."""
    from matplotlib.colors import to_hex

    monkeypatch.setenv("LSA_STRICT_FIGURES", "")
    drawn = dict(babilong_figures())
    colours: dict[str, set[str]] = {}
    for ax in [*drawn["figure_by_length"].axes, *drawn["figure_by_depth"].axes]:
        for container in ax.containers:
            line = container.lines[0]
            loss = container.get_label().rsplit(", ", 1)[-1]
            colours.setdefault(loss, set()).add(to_hex(line.get_color()))
    assert set(colours) == {"CE", "CE+0.1*SCE"}
    assert all(len(c) == 1 for c in colours.values()) and colours["CE"] != colours["CE+0.1*SCE"]
    plots.plt.close("all")


def test_the_alpha_sweep_uses_a_log_axis_where_perplexity_spans_decades(out_root):
    """Section 5.3's alpha sweep: a perplexity that grows a hundredfold with alpha is drawn on a
    log axis, so the small alphas (where the paper's claim lives) stay apart."""
    from lsa.sections.ablations import figures as ab_figures

    cfg = dataclasses.replace(PIPE.ablation, items=["alpha_sweep"], sweep_methods=["pi"],
                              sweep_alphas=[0.0, 0.1, 1.0])
    runs = pd.DataFrame([{"method": "pi", "setting": s, "alpha": a, "seed": seed, "ppl_4x": v}
                         for (s, a, v) in [("CE", 0.0, 20.0), ("SCE 0.1", 0.1, 21.0),
                                           ("SCE 1", 1.0, 2000.0)] for seed in (0, 1)])
    result = ablations.AblationsResult(runs=runs, effects={"alpha_sweep": pd.DataFrame()},
                                       long="ppl_4x", settings=cfg, l_train=PIPE.finetune.l_train)
    fig = ab_figures.figure_alpha_sweep(setup_of(cfg), result)
    assert fig.axes[0].get_yscale() == "log" and "(log)" in fig.axes[0].get_ylabel()
    plots.plt.close(fig)
