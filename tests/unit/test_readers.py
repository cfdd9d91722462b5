"""lsa.readers (`python -m lsa bench notebooks`): a notebook's time split at its Try it part."""

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from lsa import readers


def _cell(seconds: float, text: str = ""):
    cell = new_code_cell("x")
    cell.metadata["papermill"] = {"duration": seconds}
    if text:
        cell.outputs = [new_output("stream", name="stdout", text=text)]
    return cell


def test_the_times_split_at_the_try_it_heading():
    nb = new_notebook(cells=[
        new_markdown_cell("# 03"),
        _cell(4.0, "published results of `mini`, commit 465d62f ...\n"),
        _cell(2.5),
        new_markdown_cell("## Try it\n\nChange one setting"),
        _cell(20.3, "training 3 runs of profile smoke not made yet (train_missing)\n"),
    ])
    times = readers.split_times(nb, wall_s=30.0)
    # the published part is the wall time less the Try it cells': the kernel's start counts
    assert times == {"published_s": 9.7, "try_it_s": 20.3, "reads_published": True,
                     "trained": 0, "try_it_trained": 3}


def test_a_notebook_without_try_it_is_all_published_part_and_counts_what_it_trained():
    nb = new_notebook(cells=[_cell(1.0, "training 2 runs of profile mini not made yet\n"),
                             _cell(3.0, "training 5 runs of profile mini not made yet\n"),
                             new_markdown_cell("## Provenance")])
    times = readers.split_times(nb, wall_s=6.0)
    assert times == {"published_s": 6.0, "try_it_s": None, "reads_published": False,
                     "trained": 7, "try_it_trained": 0}


def test_the_notebooks_timed_are_the_default_profiles_sections_in_order():
    names = [p.name for p in readers.notebooks()]
    assert [n[:2] for n in names] == ["01", "02", "03", "04", "05", "06"]
    assert [p.name for p in readers.notebooks(["03", "01"])] == [names[0], names[2]]
    with pytest.raises(ValueError, match=r"--only 09: no such notebook; one of 01, 02"):
        readers.notebooks(["09"])


def test_the_table_has_a_row_per_notebook():
    row = {"notebook": "06_replication_report.ipynb", "published_s": 6.04, "try_it_s": None,
           "reads_published": True, "trained": 0, "try_it_trained": 0}
    lines = readers.table([row]).splitlines()
    assert lines[2] == "| 06_replication_report.ipynb | 6 | yes | 0 | - | 0 |"


def test_the_section_notebooks_have_the_heading_the_split_looks_for():
    for path in readers.notebooks()[:-1]:  # the report has no Try it part
        nb = nbformat.read(path, as_version=4)
        assert any(c.cell_type == "markdown" and c.source.startswith(readers.TRY_IT_HEADING)
                   for c in nb.cells), path.name


def test_the_page_says_how_it_was_measured():
    row = {"notebook": "03_regularized_finetuning.ipynb", "published_s": 7.2, "try_it_s": 24.8,
           "reads_published": True, "trained": 0, "try_it_trained": 9}
    page = readers.markdown([row], books=False, commit="0123456789abcdef")
    assert page.startswith("# How long a reader waits for each notebook")
    assert "`python -m lsa bench notebooks` at `0123456`" in page
    assert "fetched by the first notebook that reads it" in page
    assert page.rstrip().endswith("| 03_regularized_finetuning.ipynb | 7 | yes | 0 | 25 | 9 |")


def test_each_try_it_states_the_committed_measurement():
    """Every Try it text says how many runs it trains and about how long it takes, as the last
    ``bench notebooks`` measured it (docs/bench/notebooks.json, a fresh output root: the
    shared smoke runs included), and each measured Try it is under a minute on 2 cores
    (issue 59: a part a class can press)."""
    import json

    from lsa import paths

    bench = json.loads((paths.ROOT / "docs" / "bench" / "notebooks.json").read_text())
    measured = [r for r in bench["notebooks"] if r["try_it_s"] is not None]
    assert len(measured) == 5
    for row in measured:
        nb = nbformat.read(paths.NOTEBOOKS / row["notebook"], as_version=4)
        text = next(c.source for c in nb.cells if c.cell_type == "markdown"
                    and c.source.startswith(readers.TRY_IT_HEADING))
        stated = readers.STATED.findall(text)
        assert stated == [(str(row["try_it_trained"]), str(readers.about(row["try_it_s"])))], \
            row["notebook"]
        assert row["try_it_s"] < 60, row["notebook"]


@pytest.mark.parametrize("seconds, said", [(13.2, 15), (22.5, 20), (0.4, 5), (133.4, 135)])
def test_a_time_is_stated_to_the_nearest_five_seconds(seconds, said):
    assert readers.about(seconds) == said
