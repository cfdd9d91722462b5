"""Notebooks: committed clean, and each runs top to bottom with its own defaults."""

import json

import nbformat
import pytest

from lsa import paths
from lsa.config import load_config
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
