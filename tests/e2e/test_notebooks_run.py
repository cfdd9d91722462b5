"""Every section notebook runs top to bottom with its own defaults and its Try it, on the smoke
pipeline's runs; a notebook run alone with an edited parameter changes its output."""

import json

import nbformat
from support import copy_made_runs

from lsa import paths
from lsa.config import load_config
from lsa.pipeline import check_sections


def test_notebooks_run_with_their_defaults(smoke_pipeline, out_root, monkeypatch):
    """As in JupyterLab: no parameters injected; outputs go to the (temporary) output root.
    Every figure they draw from the smoke runs must follow lsa.plots.figure_problems's rules
    (LSA_STRICT_FIGURES: a figure that breaks them fails its notebook). The smoke runs are the
    pipeline's (``smoke_pipeline``, copied into the output root): this test is about reading
    them, the pipeline's tests about making them; each "Try it" still trains its own new runs
    (and test_missing_runs_of_a_notebook_run_alone checks a notebook alone trains what is
    missing)."""
    import papermill as pm

    copy_made_runs()
    paths.write_last_profile("smoke")  # as after `make reproduce PROFILE=smoke`
    monkeypatch.setenv("LSA_STRICT_FIGURES", "1")  # the kernels inherit it
    pipe = load_config(profile="smoke")
    for key, spec in pipe.sections.items():  # config order: a report after what it reads
        pm.execute_notebook(str(paths.NOTEBOOKS / spec.notebook),
                            str(out_root / f"{key}.ipynb"), kernel_name="python3",
                            progress_bar=False, cwd=str(paths.NOTEBOOKS))
        assert paths.metrics_file("smoke", key).exists()
        # its "Try it" part (a section notebook's last cell) ran on smoke and shows a table
        tried = [c for c in nbformat.read(out_root / f"{key}.ipynb", as_version=4).cells
                 if "try-it" in c.metadata.get("tags", [])]
        for cell in tried:
            assert any("text/html" in o.get("data", {}) for o in cell.outputs), key
    # the defaults read the smoke profile, so the same checks as for a pipeline run hold;
    # the executed notebooks above live elsewhere, so put them where the checker looks
    for key in pipe.sections:
        target = paths.executed_notebook("smoke", key)
        target.parent.mkdir(parents=True, exist_ok=True)
        (out_root / f"{key}.ipynb").rename(target)
    assert check_sections(pipe) == []


# --- what a notebook reads: the pipeline's resolved file, or config/config.yaml alone --------


def test_editing_a_parameter_of_a_notebook_run_alone_changes_its_output(out_root):
    """A reader's edit reaches the notebook: the report run alone over one section instead of
    five gathers, and says, one section."""
    import papermill as pm

    nb = str(paths.NOTEBOOKS / "06_replication_report.ipynb")
    paths.write_last_profile("smoke")
    outputs = {}
    for name, params in (("default", {}),
                         ("edited", {"overrides": {"sections": ["01_synthetic_study"]}})):
        pm.execute_notebook(nb, str(out_root / f"{name}.ipynb"), parameters=params,
                            kernel_name="python3", progress_bar=False, cwd=str(paths.NOTEBOOKS))
        outputs[name] = json.loads(paths.metrics_file("smoke", "06_replication_report")
                                   .read_text())
    assert len(outputs["default"]["sections_missing"]) == 5
    assert outputs["edited"]["sections_missing"] == ["01_synthetic_study"]
    info = json.loads((paths.section_dir("smoke", "06_replication_report") / "run_info.json")
                      .read_text())
    assert info["config"]["sections"] == ["01_synthetic_study"]  # what it ran with


def test_each_notebook_the_smoke_run_lacks_opens_alone_on_published_results(out_root):
    """Every notebook of notebooks/ (the list is the folder's, not a profile's) that the smoke
    run above does not cover (section 07: the study's alone) runs top to bottom with its own
    defaults where no pipeline has finished (a fresh clone), reads the first published profile
    that has its section and says so in its first output."""
    import papermill as pm

    smoke = {spec.notebook for spec in load_config(profile="smoke").sections.values()}
    alone = sorted(p.name for p in paths.NOTEBOOKS.glob("*.ipynb") if p.name not in smoke)
    assert alone, "every notebook is a smoke section: nothing runs here"
    assert paths.last_profile() is None
    for name in alone:
        pm.execute_notebook(str(paths.NOTEBOOKS / name), str(out_root / name),
                            kernel_name="python3", progress_bar=False, cwd=str(paths.NOTEBOOKS))
        cells = nbformat.read(out_root / name, as_version=4).cells
        first = next(o.get("text", "") for c in cells if c.cell_type == "code"
                     for o in c.outputs if o.get("name") == "stdout")
        assert first.startswith("profile ") and "(published)" in first, (name, first)
