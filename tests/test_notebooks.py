"""Notebooks: committed clean, and each runs top to bottom with its own defaults."""

import json

import nbformat
import pytest

from lsa import paths
from lsa.config import ConfigError, load_config
from lsa.pipeline import check_sections

NOTEBOOKS = sorted(paths.NOTEBOOKS.glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [] and cell.get("execution_count") is None, path.name
    nbformat.validate(nbformat.reads(path.read_text(), as_version=4))


def test_every_section_notebook_exists():
    pipe = load_config()
    assert {spec.notebook for spec in pipe.sections.values()} == {p.name for p in NOTEBOOKS}


@pytest.mark.slow
def test_notebooks_run_with_their_defaults(out_root):
    """As in JupyterLab: no parameters injected; outputs go to the (temporary) output root."""
    import papermill as pm

    pipe = load_config(profile="smoke")
    for key, spec in pipe.sections.items():  # config order: a report after what it reads
        pm.execute_notebook(str(paths.NOTEBOOKS / spec.notebook),
                            str(out_root / f"{key}.ipynb"), kernel_name="python3",
                            progress_bar=False, cwd=str(paths.NOTEBOOKS))
        assert paths.metrics_file("smoke", key).exists()
    # the defaults are the smoke profile, so the same checks as for a pipeline run hold;
    # the executed notebooks above live elsewhere, so put them where the checker looks
    for key in pipe.sections:
        target = paths.executed_notebook("smoke", key)
        target.parent.mkdir(parents=True, exist_ok=True)
        (out_root / f"{key}.ipynb").rename(target)
    problems = [p for p in check_sections(pipe) if "config differs" not in p]
    assert problems == []


@pytest.mark.slow
def test_unknown_parameter_fails_before_compute(out_root):
    import papermill as pm

    with pytest.raises(pm.PapermillExecutionError, match="stepz"):
        pm.execute_notebook(str(paths.NOTEBOOKS / "01_synthetic_study.ipynb"),
                            str(out_root / "bad.ipynb"), parameters={"stepz": 3},
                            kernel_name="python3", progress_bar=False)
    assert not paths.metrics_file("smoke", "01_synthetic_study").exists()


# --- what a notebook reads: the pipeline's resolved file, or config/config.yaml alone --------


def view(**kw):
    from lsa.config import RunsViewConfig

    return RunsViewConfig.from_dict({"profile": "smoke", **kw})


def test_a_notebook_run_alone_reads_config_yaml():
    from lsa.notebook import open_config

    pipe = open_config(view(), "03_regularized_finetuning")
    assert pipe == load_config(profile="smoke")


def test_a_pipeline_notebook_checks_its_parameters_and_runs(out_root):
    from lsa.notebook import ensure_runs, open_config
    from lsa.pipeline import notebook_parameters, write_resolved

    pipe = load_config(profile="smoke", overrides={"seed": 1})
    write_resolved(pipe)
    params = notebook_parameters(pipe, "03_regularized_finetuning")
    assert params["run_ids"] == [pipe.runs.finetune[n].id for n in pipe.runs.grid]
    assert open_config(view(**params), "03_regularized_finetuning") == pipe
    with pytest.raises(ConfigError, match="view.alpha = 0.2: .* says 0.1"):
        open_config(view(**{**params, "alpha": 0.2}), "03_regularized_finetuning")
    seed0 = [r.id for r in load_config(profile="smoke").runs.used_by(["finetune"])]
    with pytest.raises(ConfigError, match="run_ids: the pipeline made run folders"):
        open_config(view(**{**params, "run_ids": seed0}), "03_regularized_finetuning")
    # in the pipeline a missing run is an error, never trained inside the notebook's job
    with pytest.raises(FileNotFoundError, match="should have made"):
        ensure_runs(view(**params), pipe, list(pipe.runs.finetune.values()))
