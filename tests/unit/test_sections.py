"""The section contract (``lsa.sections``): the driver reads each declared run table once,
computes the gates once and hands them to a pure ``analyse``; each section's ``analyse`` is a
function of hand-built tables (no runs, no files); a toy section built by CONTRIBUTING's
recipe runs through the driver."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import re
import sys

import numpy as np
import pandas as pd
import pytest
from support import ROOT

from lsa import runtable, sections
from lsa.config import SectionSpec, load_config, section_declarations
from lsa.gates import Gate
from lsa.runtable import RunTables
from lsa.sections import babilong, finetuning, report


def gate(name: str, passed: bool | None, method: str = "") -> Gate:
    return Gate(name, f"{name}?", 1.0, 0.5, 1.5, 0.2, passed, "by hand")


GATES = [gate("G1", True), gate("G2", True), gate("G3.eabf", False), gate("G3.pi", True)]


# --- Sections 5.1-5.2 on a hand-made grid -----------------------------------------------------

#: the paired NLL differences (alpha 0.1 minus CE) of three seeds, per method
RAISES = {"eabf": [0.05, 0.06, 0.07], "pi": [-0.05, -0.06, -0.07]}


def grid_rows() -> pd.DataFrame:
    rows = []
    for method, diffs in RAISES.items():
        for seed, d in enumerate(diffs):
            for alpha in (0.0, 0.1):
                nll = 2.0 + (d if alpha else 0.0)
                rows.append({"run": f"{method}_a{alpha:g}_s{seed}", "method": method,
                             "alpha": alpha, "loss": runtable.loss_label(alpha), "seed": seed,
                             "ppl_1x": 5.0, "ppl_2x": math.exp(nll), "ppl_4x": math.exp(nll),
                             "ppl_long": math.exp(nll), "nll_long": nll,
                             "ppl_growth": math.exp(nll) / 5.0,
                             "misalignment": 1.0 - alpha, "misalignment_all": 1.2 - alpha})
    return pd.DataFrame(rows)


def test_finetuning_analyse_is_a_function_of_its_tables():
    pipe = load_config(profile="smoke")
    runs = RunTables(grid=grid_rows(), base_factor=pd.DataFrame(), curves=pd.DataFrame(),
                     longbench=pd.DataFrame())
    result = finetuning.analyse(pipe, runs, GATES)
    claims = {c["id"]: c for c in result.claims}
    # S5.1 is eabf's long-window NLL: +0.06 nats, sd 0.01 over 3 seeds, t(2) = 4.303:
    # [0.06 - 0.0248, 0.06 + 0.0248] lies above 0, the side against the paper
    s51 = claims["S5.1"]
    assert "eabf" in s51["claim"] and s51["verdict"] == "disagrees"
    low, high = 0.06 - 4.302653 * 0.01 / math.sqrt(3), 0.06 + 4.302653 * 0.01 / math.sqrt(3)
    assert f"[{low:+.3g}, {high:+.3g}] nats" in s51["evidence"]
    assert claims["S5.2"]["verdict"] == "agrees"          # pi lowers it by as much
    effect = result.effect_ppl_long.set_index("method")
    assert effect.loc["eabf", "wins"] == 0 and effect.loc["pi", "wins"] == 3
    assert result.table_ppl["ppl_long_count"].tolist() == [3, 3, 3, 3]
    # analyse leaves the premise to the driver: no gate is read here
    assert result.gates is None and "premise_met" not in result.metrics
    # the figures' inputs are on the result, the training logs not saved as a table
    assert "curves" not in result.saved_tables() and result.l_train == pipe.finetune.l_train


def test_with_premise_turns_a_failed_methods_verdicts():
    pipe = load_config(profile="smoke")
    result = finetuning.analyse(pipe, RunTables(grid=grid_rows(), base_factor=pd.DataFrame(),
                                                curves=pd.DataFrame(),
                                                longbench=pd.DataFrame()), GATES)
    result = sections.with_premise(result, GATES, ["G1", "G2", "G3"])
    by_method = {(c["method"], c["verdict"]) for c in result.claims}
    assert ("eabf", "premise not met") in by_method and ("eabf", "disagrees") not in by_method
    assert ("pi", "agrees") in by_method                   # its own G3 passes
    assert result.metrics["premise_met"] is False and list(result.gates["gate"])[0] == "G1"


def test_an_undeclared_table_fails_by_name():
    with pytest.raises(ValueError, match=r"\['grid', .* were not read.*section.yaml"):
        finetuning.analyse(load_config(profile="smoke"), RunTables(), [])


# --- Section 5.4 on hand-made answers ---------------------------------------------------------

def babilong_rows() -> pd.DataFrame:
    """Train design, qa1, two seeds: CE answers half of 40 prompts at every length, the
    regularized run three quarters at 2x and 4x (the same half at 1x)."""
    rows = []
    for seed in (0, 1):
        for alpha in (0.0, 0.1):
            for multiple in (1, 2, 4):
                for i in range(40):
                    correct = i % 2 == 0 or (alpha > 0 and multiple > 1 and i % 4 == 1)
                    rows.append({"run": f"bl_a{alpha:g}_s{seed}", "method": "pi",
                                 "alpha": alpha, "loss": runtable.loss_label(alpha),
                                 "seed": seed, "task": "qa1", "length": 64 * multiple,
                                 "multiple": multiple, "depth": None, "index": i,
                                 "correct": correct, "scorer": "official"})
    return pd.DataFrame(rows)


def test_babilong_analyse_is_a_function_of_its_tables():
    pipe = load_config(profile="smoke")
    acc = babilong_rows()
    sources = {"babi_source": {"qa1": "built-in generator"}, "train_samples": {"qa1": 40}}
    result = babilong.analyse(pipe, RunTables(babilong_accuracy=acc,
                                              babilong_depth=pd.DataFrame(columns=acc.columns),
                                              babilong_sources=sources), [])
    diff = result.table6_paired_difference.set_index("multiple")
    assert diff.loc[1, "delta"] == 0 and diff.loc[2, "delta"] == diff.loc[4, "delta"] == 25.0
    assert set(diff["n"]) == {80} and set(diff["seeds"]) == {2}
    gate_row = result.sanity_gate.iloc[0]
    assert (gate_row["accuracy"], gate_row["n"]) == (50.0, 80)   # CE at the training window
    assert result.metrics["babi_source"] == {"qa1": "built-in generator"}
    assert result.metrics["scorer"] == ["official"]
    assert {c["id"] for c in result.claims} >= {"S5.4.gate.qa1", "S5.4.len2x", "S5.4.len4x"}


# --- the report on hand-made section results --------------------------------------------------

def test_report_analyse_counts_the_claims_it_is_given():
    pipe = load_config(profile="smoke")
    claim = {"id": "S5.1", "section": "Sec. 5.2", "claim": "c", "paper": "p", "grade": "A",
             "ours": "o", "verdict": "disagrees", "evidence": "", "kind": "paper",
             "method": "eabf"}
    control = {**claim, "id": "S5.9", "verdict": "passes", "kind": "control", "method": ""}
    info = {"git_commit": "abc", "wall_time_s": 1.0, "finished_utc": "now",
            "packages": {"torch": "2", "transformers": "4"}, "device": {"platform": "cpu"}}
    found = {"03_regularized_finetuning": {"metrics": {"claims": [claim, control],
                                                        "figures": ["fig_a"]},
                                           "run_info": info}}
    result = report.analyse(pipe, RunTables(sections=found), GATES)
    assert result.metrics["verdicts"]["disagrees"] == 1
    assert result.metrics["counted_apart"] == {"control": {"passes": 1}}
    assert "04_ablations" in result.metrics["sections_missing"]
    assert result.provenance.loc[0, "git_commit"] == "abc"
    assert list(result.gates["gate"]) == [g.gate for g in GATES]
    assert result.section_figures == {"03_regularized_finetuning": ["fig_a"]}


# --- the driver -------------------------------------------------------------------------------

def test_the_driver_reads_each_table_once_and_computes_the_gates_once(out_root, monkeypatch):
    from lsa import gates as gating
    from lsa.notebook import open_section

    read, computed, seen = [], [], {}
    monkeypatch.setitem(runtable.READERS, "grid", lambda pipe, plan: (
        read.append("grid"), {"grid": grid_rows()})[1])
    monkeypatch.setitem(runtable.READERS, "curves", lambda pipe, plan: (
        read.append("curves"), {"curves": pd.DataFrame()})[1])
    monkeypatch.setitem(runtable.READERS, "longbench", lambda pipe, plan: (
        read.append("longbench"), {"longbench": pd.DataFrame()})[1])
    monkeypatch.setattr(gating, "compute_gates", lambda pipe, plan: (
        computed.append(plan), GATES)[1])
    original = finetuning.analyse

    def spy(pipe, runs, gates):
        seen.update(runs=runs, gates=gates)
        return original(pipe, runs, gates)

    monkeypatch.setattr(finetuning, "analyse", spy)
    setup = open_section("03_regularized_finetuning", profile="smoke", train_missing=False)
    result = sections.drive(setup)
    assert sorted(read) == ["curves", "grid", "longbench"]    # each declared table once
    assert computed == [setup.plan] and seen["gates"] is GATES
    assert seen["runs"].names["grid"] == setup.plan.grid     # names from the plan
    assert result.metrics["premise_met"] is False            # eabf's G3 failed above


# --- a toy section by CONTRIBUTING's recipe ---------------------------------------------------

def recipe_files() -> list[str]:
    """The files CONTRIBUTING's "Adding a section" recipe names (between backquotes)."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    recipe = text.split("## Adding a section", 1)[1].split("\n## ", 1)[0]
    return sorted(set(re.findall(r"`((?:lsa|notebooks|docs|tests|config)/[\w/.<>-]+|README\.md)`",
                                 recipe)))


TOY = {
    "section.yaml": "key: 07_toy\nnotebook: 07_toy.ipynb\nconfig: view\ngates: [G1]\n"
                    "uses_runs: [finetune]\ntables: [grid]\nneeds: []\n",
    "tables.py": "def mean_ppl(grid):\n    return grid.groupby('method', as_index=False)"
                 "['ppl_long'].mean()\n",
    "claims.py": "from lsa.claims import Claim\n\n\ndef toy_claims(table):\n"
                 "    return [Claim(id='T.1', section='toy', claim='c', paper='p', grade='?',\n"
                 "                  ours=f\"{len(table)} methods\", verdict='agrees').to_dict()]\n",
    "figures.py": "",
    "__init__.py": (
        "from dataclasses import dataclass\n\nimport pandas as pd\n\n"
        "from lsa.sections import Result\n"
        "from toy_pkg import claims, tables\n\n\n"
        "@dataclass\nclass ToyResult(Result):\n    by_method: pd.DataFrame | None = None\n\n\n"
        "def analyse(pipe, runs, gates):\n    runs.need('grid')\n"
        "    table = tables.mean_ppl(runs.grid)\n"
        "    return ToyResult(by_method=table, claims=claims.toy_claims(table))\n\n\n"
        "def describe(setup, result):\n    return f'{len(result.by_method)} methods'\n"),
}


def test_a_toy_section_built_by_the_recipe_runs_through_the_driver(tmp_path, out_root,
                                                                    monkeypatch):
    files = recipe_files()
    # the recipe names every file a new section touches
    for needed in ("lsa/config.py", "lsa/claims.py", "docs/paper.md", "README.md",
                   "config/config.yaml", "lsa/sections/report/section.yaml"):
        assert needed in files, needed
    for room in ("__init__.py", "tables.py", "claims.py", "figures.py", "section.yaml"):
        assert any(f.endswith(room) and "<name>" in f for f in files), room
    folder = tmp_path / "toy_pkg"
    folder.mkdir()
    for name, text in TOY.items():
        (folder / name).write_text(text)
    spec_of = section_declarations(tmp_path)["07_toy"]
    assert spec_of.tables == ["grid"] and spec_of.gates == ["G1"]
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = importlib.util.spec_from_file_location("toy_pkg", folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    toy = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "toy_pkg", toy)
    spec.loader.exec_module(toy)
    monkeypatch.setattr(sections, "module", lambda key: toy)
    monkeypatch.setitem(runtable.READERS, "grid", lambda pipe, plan: {"grid": grid_rows()})
    from lsa import gates as gating
    from lsa.notebook import NotebookCall, Setup

    monkeypatch.setattr(gating, "compute_gates", lambda pipe, plan: GATES)
    pipe = load_config(profile="smoke")
    pipe = dataclasses.replace(pipe, sections={**pipe.sections,
                                               "07_toy": dataclasses.replace(spec_of)})
    setup = Setup("07_toy", pipe, pipe.view, NotebookCall(profile="smoke", train_missing=False))
    result = sections.drive(setup)
    assert isinstance(result, toy.ToyResult) and toy.describe(setup, result) == "2 methods"
    hand = np.mean([math.exp(2.0)] * 3 + [math.exp(2.0 + d) for d in RAISES["eabf"]])
    assert result.by_method.set_index("method").loc["eabf", "ppl_long"] == pytest.approx(hand)
    assert result.metrics["premise_met"] is True              # G1 alone, and it passed
    assert list(result.saved_tables()) == ["gates", "by_method"]
    assert SectionSpec.from_dict({"package": "toy_pkg", "notebook": "07_toy.ipynb",
                                  "config": "view", "tables": ["grid"]}, prefix="x").tables


def test_the_papers_claim_on_three_base_models_is_a_t_over_the_base_means():
    """finetune.bases: EABF's paired NLL difference at 1x l_train on three base models, three
    seeds each (base means +0.06, +0.02, +0.09): the verdict rests on the t interval over the
    three base means (2 df), not on the nine pairs; the pipeline's base alone is beside it. On
    one base the claim says its verdict is about that base."""
    from scipy import stats as st

    from lsa.sections.finetuning.claims import ONE_BASE, paper_length_claims
    from lsa.stats import resolve_verdict

    diffs = {0: [0.05, 0.07, 0.06], 1: [0.01, 0.03, 0.02], 2: [0.10, 0.08, 0.09]}
    rows = [{"method": "eabf", "alpha": alpha, "seed": seed, "base_seed": base,
             "setting": "CE" if alpha == 0 else "SCE 0.1",
             "nll_1x": 2.0 + (d if alpha else 0.0)}
            for base, ds in diffs.items() for seed, d in enumerate(ds) for alpha in (0.0, 0.1)]
    bases = pd.DataFrame(rows)
    grid = bases[bases["base_seed"] == 0]
    means = [0.06, 0.02, 0.09]
    half = st.t.ppf(0.975, 2) * np.std(means, ddof=1) / math.sqrt(3)
    low, high = np.mean(means) - half, np.mean(means) + half
    (claim,) = paper_length_claims(grid, 0.1, bases=bases)
    assert claim.id == "S5.eabf" and claim.origin == "paper"
    assert (claim.low, claim.high) == pytest.approx((low, high))
    effect = math.log(5.91 / 6.01)
    assert claim.verdict == resolve_verdict(low, high, -1, effect, 3)
    assert "over 3 base models x 3 seeds; lower in 0/9 pairs" in claim.ours
    assert f"t interval over the 3 base means (2 df) [{low:+.3g}, {high:+.3g}] nats" \
        in claim.evidence
    assert "base 0: +0.06, base 1: +0.02, base 2: +0.09" in claim.evidence
    assert "the pipeline's base alone: 3 seeds" in claim.evidence
    (alone,) = paper_length_claims(grid, 0.1, bases=pd.DataFrame())
    assert ONE_BASE in alone.evidence and "base models" not in alone.ours


def test_the_base_plan_pairs_only_ce_with_the_plain_regularized_run():
    """python -m lsa power's base plan reads the base factor's and the ablation's runs
    together: CE on both windows (alpha 0) and Jeffreys at 0.1 must not be paired in. EABF's
    differences 0.1, 0.2 (base 0) and 0.3, 0.4 (base 1): within mean square 0.005, between
    2 x (0.1^2 + 0.1^2) = 0.04, so between = sqrt((0.04 - 0.005) / 2); methods without a row
    in the paper's tables get no plan."""
    from lsa.sections.finetuning.tables import base_power_table

    rows = []
    for base, diffs in ((0, (0.1, 0.2)), (1, (0.3, 0.4))):
        for seed, d in enumerate(diffs):
            for setting, alpha, v in (("CE", 0.0, 2.0), ("SCE 0.1", 0.1, 2.0 + d),
                                      ("CE (both windows)", 0.0, 9.0),
                                      ("Jeffreys 0.1", 0.1, -5.0)):
                for method in ("eabf", "none"):
                    rows.append({"method": method, "setting": setting, "alpha": alpha,
                                 "seed": seed, "base_seed": base, "nll_1x": v})
    (row,) = base_power_table(pd.DataFrame(rows)).to_dict(orient="records")
    assert row["method"] == "eabf" and (row["bases"], row["seeds_per_base"]) == (2, 2.0)
    assert row["effect_here"] == pytest.approx(0.25)
    assert row["sd_seeds"] == pytest.approx(math.sqrt(0.005))
    assert row["sd_bases"] == pytest.approx(math.sqrt((0.04 - 0.005) / 2))
