import ast
import json

import pytest
import yaml

from lsa import paths
from lsa.config import (
    PROFILES,
    ConfigError,
    ReportConfig,
    SyntheticConfig,
    from_mapping,
    load_config,
)


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_validates(profile):
    from lsa.notebook import NotebookCall
    from lsa.pipeline import notebook_parameters

    pipe = load_config(profile=profile)
    assert pipe.profile == profile
    for key in pipe.sections:
        params = notebook_parameters(pipe, key)
        assert params["profile"] == profile and params["config_file"]
        # what papermill receives is how the notebook is called, never its settings
        assert set(params) <= {"profile", "config_file", "run_ids"}
        assert NotebookCall.from_dict(params).config_file == params["config_file"]


def test_default_profile_is_mini():
    assert load_config().profile == "mini"


def test_round_trip():
    cfg = SyntheticConfig(steps=7, encodings=["rope"], lr=0.5)
    assert SyntheticConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize("data, words", [
    ({"stepz": 3}, ["stepz", "allowed keys", "steps"]),
    ({"steps": "many"}, ["synthetic.steps", "'many'", "int"]),
    ({"steps": 0}, ["synthetic.steps", "0", ">= 1"]),
    ({"steps": True}, ["synthetic.steps", "True"]),
    ({"lr": -1.0}, ["synthetic.lr", "-1.0", "> 0"]),
    ({"encodings": ["nope", "xpos"]}, ["synthetic.encodings[1]", "'xpos'", "'rope'"]),
    ({"encodings": []}, ["synthetic.encodings", "not be empty"]),
    ({"train_max_len": 10, "test_max_len": 10}, ["test_max_len", "train_max_len"]),
    ({"d_model": 30, "n_heads": 4}, ["d_model", "divisible"]),
])
def test_invalid_values_name_key_value_and_rule(data, words):
    with pytest.raises(ConfigError) as err:
        SyntheticConfig.from_dict(data)
    for word in words:
        assert word in str(err.value)


def test_float_accepts_int_but_int_rejects_float():
    assert SyntheticConfig.from_dict({"lr": 1}).lr == 1.0
    with pytest.raises(ConfigError, match="synthetic.steps = 1.5"):
        SyntheticConfig.from_dict({"steps": 1.5})


def raw_config():
    return yaml.safe_load(paths.CONFIG_FILE.read_text())


def test_unknown_profile_and_section_keys_fail():
    raw = raw_config()
    with pytest.raises(ConfigError, match="profile = 'tiny'"):
        from_mapping(raw, profile="tiny")
    raw["profiles"]["mini"]["synthetic"]["stepz"] = 5
    with pytest.raises(ConfigError, match="profiles.mini.synthetic.*stepz"):
        from_mapping(raw, profile="mini")
    raw = raw_config()
    raw["profiles"]["gpu-small"]["finetune"]["gpu"] = True
    with pytest.raises(ConfigError, match="unknown key profiles.gpu-small.finetune.gpu"):
        from_mapping(raw, profile="gpu-small")
    raw = raw_config()
    raw["colour"] = "blue"
    with pytest.raises(ConfigError, match="unknown key colour"):
        from_mapping(raw)


def test_a_bad_section_declaration_fails_naming_its_file(tmp_path):
    from lsa.config import section_declarations

    def declare(text: str) -> None:
        (tmp_path / "x").mkdir(exist_ok=True)
        (tmp_path / "x" / "section.yaml").write_text(
            "key: 01_x\nnotebook: 01_x.ipynb\nconfig: view\n" + text)

    declare("threads: 2\n")  # Snakemake's: workflow/settings.yaml
    with pytest.raises(ConfigError, match="unknown key x/section.yaml.threads"):
        section_declarations(tmp_path)
    declare("gates: [G9]\n")
    with pytest.raises(ConfigError, match="x/section.yaml.gates"):
        section_declarations(tmp_path)
    declare("")
    assert section_declarations(tmp_path)["01_x"].package == "x"
    (tmp_path / "x" / "section.yaml").write_text("notebook: 01_x.ipynb\n")
    with pytest.raises(ConfigError, match="no `key`"):
        section_declarations(tmp_path)


def test_a_section_needing_an_unknown_one_fails():
    from dataclasses import replace

    from lsa.config import PipelineConfig, SectionSpec

    pipe = load_config(profile="smoke")
    bad = dict(pipe.sections)
    bad["06_replication_report"] = replace(bad["06_replication_report"], needs=["99_nothing"])
    with pytest.raises(ConfigError, match="99_nothing"):
        PipelineConfig(**{**{f: getattr(pipe, f) for f in pipe.__dataclass_fields__},
                          "sections": bad})
    assert isinstance(bad["01_synthetic_study"], SectionSpec)


def test_report_receives_the_sections_it_needs():
    pipe = load_config(profile="smoke")
    needs = pipe.sections["06_replication_report"].needs
    assert pipe.report.sections == needs
    assert set(needs) == set(pipe.sections) - {"06_replication_report"}
    raw = raw_config()
    raw["defaults"]["report"] = {"sections": ["01_synthetic_study"]}
    with pytest.raises(ConfigError, match="report.sections .*report section's needs"):
        from_mapping(raw)


def test_a_report_that_names_no_needs_gathers_every_other_section(tmp_path):
    """The report's list of sections is declared once: its section's ``needs``, which default
    to every other declared section (``ReportConfig.sections`` is what the loader reads)."""
    from lsa.config import report_needs, section_declarations

    for package, text in (("a", "key: 01_a\nnotebook: 01_a.ipynb\nconfig: view\n"),
                          ("b", "key: 02_b\nnotebook: 02_b.ipynb\nconfig: view\n"),
                          ("r", "key: 09_r\nnotebook: 09_r.ipynb\nconfig: report\n")):
        (tmp_path / package).mkdir()
        (tmp_path / package / "section.yaml").write_text(text)
    declared = section_declarations(tmp_path)
    assert declared["09_r"].needs == report_needs(declared) == ["01_a", "02_b"]
    (tmp_path / "r" / "section.yaml").write_text(
        "key: 09_r\nnotebook: 09_r.ipynb\nconfig: report\nneeds: [02_b]\n")
    assert report_needs(section_declarations(tmp_path)) == ["02_b"]
    assert ReportConfig().sections == report_needs(section_declarations())


def notebook_defaults(name: str) -> dict:
    nb = json.loads((paths.NOTEBOOKS / name).read_text())
    cells = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, "exactly one cell tagged 'parameters'"
    tree = ast.parse("".join(cells[0]["source"]))
    out = {}
    for node in tree.body:  # literals only
        assert isinstance(node, ast.Assign) and len(node.targets) == 1
        out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


@pytest.mark.parametrize("section", list(load_config().sections))
def test_a_notebook_is_called_with_its_setup_only(section):
    """A notebook's parameters cell holds how it is called (``lsa.notebook.NotebookCall``, at
    its defaults: run alone), never a copy of its section's settings; a notebook that reads no
    runs has no run parameters."""
    from lsa.notebook import NotebookCall

    spec = load_config(profile="smoke").sections[section]
    call = NotebookCall().to_dict()
    if not spec.uses_runs:
        call = {k: v for k, v in call.items() if k not in ("run_ids", "train_missing")}
    assert notebook_defaults(spec.notebook) == call


def test_config_module_imports_no_torch():
    import subprocess
    import sys

    code = "import sys, lsa.config, lsa.paths; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_report_config_rejects_duplicates():
    with pytest.raises(ConfigError, match="report.sections"):
        ReportConfig.from_dict({"sections": ["a", "a"]})


def test_training_term_positions_include_the_papers():
    from lsa.config import FinetuneConfig

    assert FinetuneConfig.from_dict({"positions": "paper"}).positions == "paper"
    with pytest.raises(ConfigError, match="finetune.positions = 'first'"):
        FinetuneConfig.from_dict({"positions": "first"})


def test_run_divergence_includes_the_entropy_term():
    from lsa.config import RunConfig

    assert RunConfig.from_dict({"name": "x", "divergence": "entropy"}).divergence == "entropy"
    with pytest.raises(ConfigError, match="run.divergence = 'kl'"):
        RunConfig.from_dict({"name": "x", "divergence": "kl"})


def test_every_setting_is_documented_with_its_bounds():
    from lsa.config import PipelineConfig

    def walk(cls):
        import dataclasses
        import typing

        hints = typing.get_type_hints(cls)
        for row in cls.describe():
            assert row["help"], f"{cls.__name__}.{row['name']} has no help text"
            if dataclasses.is_dataclass(hints[row["name"]]):
                yield from walk(hints[row["name"]])
            yield cls.__name__, row

    rows = {(cls, row["name"]): row for cls, row in walk(PipelineConfig)}
    assert rows[("SyntheticConfig", "steps")]["bounds"] == "must be >= 1"
    assert rows[("FinetuneConfig", "s2_group_ratio")]["bounds"] == "must be in (0, 1]"
    assert rows[("BabilongConfig", "eval_depths")]["bounds"] == (
        "non-empty, no repeats; every entry must be in [0, 1]")
    assert rows[("PipelineConfig", "profile")]["type"].startswith("one of 'smoke'")


def test_bounds_declared_next_to_the_fields_are_checked():
    from lsa.config import BabilongConfig, FinetuneConfig

    with pytest.raises(ConfigError, match=r"finetune.lora_dropout = 0.95: must be in \[0, 0.9\]"):
        FinetuneConfig.from_dict({"lora_dropout": 0.95})
    with pytest.raises(ConfigError, match="finetune.alphas = .*every entry must be >= 0"):
        FinetuneConfig.from_dict({"alphas": [0.0, -0.1]})
    with pytest.raises(ConfigError, match="babilong.max_facts = 0: must be >= 1"):
        BabilongConfig.from_dict({"max_facts": 0})
    assert BabilongConfig.from_dict({"max_facts": None}).max_facts is None


def test_typed_parts_replace_the_dict_of_sections():
    from lsa.config import FinetuneConfig, PipelineConfig, PretrainConfig

    pipe = load_config(profile="mini")
    assert isinstance(pipe, PipelineConfig) and not hasattr(pipe, "settings")
    assert isinstance(pipe.pretrain, PretrainConfig) and isinstance(pipe.finetune, FinetuneConfig)
    assert pipe.section_config("03_regularized_finetuning") is pipe.view
    with pytest.raises(ConfigError, match="missing key pretrain"):
        PipelineConfig.from_dict({k: v for k, v in pipe.to_dict().items() if k != "pretrain"},
                                 prefix="")


def test_cli_prints_the_documented_fields_and_the_resolved_configuration(capsys):
    from lsa.__main__ import main

    assert main(["config", "--fields"]) == 0
    out = capsys.readouterr().out
    assert "## finetune: Context-extension" in out and "- lora_dropout (float; default 0.05)" in out
    assert main(["config", "--profile", "smoke", "--resolved"]) == 0
    resolved = yaml.safe_load(capsys.readouterr().out)
    assert resolved["resolved"] is True and resolved["profile"] == "smoke"


NO_STRING_LOOKUPS = ("settings[", "type: ignore[attr-defined]", "type: ignore[assignment]",
                     "type: ignore[arg-type]  # unknown")


def test_no_string_lookup_of_config_sections_remains():
    """Typed fields (pipe.finetune, ...) replaced ``pipe.settings["finetune"]`` and the
    ``# type: ignore`` comments that came with it."""
    sources = [*paths.ROOT.glob("lsa/**/*.py"), *paths.ROOT.glob("notebooks/*.ipynb"),
               *paths.ROOT.glob("workflow/rules/*.smk"), paths.ROOT / "Snakefile",
               *paths.ROOT.glob("scripts/*.py"), *paths.ROOT.glob("tests/**/*.py")]
    found = [f"{path.relative_to(paths.ROOT)}: {needle}" for path in sources
             for needle in NO_STRING_LOOKUPS
             if needle in path.read_text() and path.name != "test_config.py"]
    assert found == []
