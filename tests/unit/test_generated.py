"""No result typed by hand (issue 74, item 4; lsa/generated.py): the prose docs hold no
result-like number outside generated blocks and code, every generated block is as publishing
would write it, and the rule tells a typed result from a setting, a paper value or a label."""

import shutil

from support import ROOT

from lsa import files, generated


def test_no_result_number_is_typed_in_the_prose_docs():
    found = [str(t) for path in generated.doc_files()
             for t in generated.typed_numbers(path.read_text(), str(path.relative_to(ROOT)))]
    assert not found, ("numbers about the results typed by hand (put them in a generated "
                       "block, or link the page that has them):\n" + "\n".join(found))
    held = {p.relative_to(ROOT).as_posix() for p in generated.doc_files()}
    assert {"README.md", "CONTRIBUTING.md", "docs/methods.md", "docs/bench/pins-mini.md"} <= held
    assert not held & set(generated.EXEMPT)


def test_a_result_typed_into_a_copy_of_the_readme_fails(tmp_path):
    copy = tmp_path / "README.md"
    shutil.copy2(ROOT / "README.md", copy)
    text = copy.read_text()
    assert generated.typed_numbers(text) == []
    for typed in ("0.0821", "341 runs", "+0.08 ± 0.01 nats", "1.41x", "37 %"):
        found = generated.typed_numbers(text + f"\nThe effect was {typed} here.\n")
        assert found and found[0].line == text.count("\n") + 2, typed


def test_settings_paper_values_labels_and_quotes_are_not_results():
    for quoted in ("Section 5.3 and Sec. 4.1, Tables 2-3", "torch 2.13 and Python 3.11",
                   "on 2026-12-07 at 17:00", "alpha 0.1 (a setting of config/config.yaml)",
                   "a 95 % interval, 80 % power, one-sided at 2.5 %",
                   "the paper's perplexity 5.82", "`python -m lsa bench jobs --seconds 15.5`",
                   "a scratch Llama of 1.32M params", "[a link](docs/v0.0821/page.md)",
                   "```\n0.0821 in a fenced block\n```",
                   "<!-- generated: compare-mini -->\n0.0821 and 341 runs\n<!-- /generated -->"):
        assert generated.typed_numbers(quoted) == [], quoted
    # a value that merely equals a setting passes: the rule's known weakness, written down
    assert generated.typed_numbers("the difference was 0.1 nats") == []


def test_every_generated_block_is_as_publishing_writes_it():
    for path in generated.doc_files():
        text = path.read_text()
        assert generated.render(text, path.parent) == text, \
            f"{path.relative_to(ROOT)}: a generated block is stale (python -m lsa publish " \
            "--results-only rewrites it)"


def test_a_bench_page_keeps_its_prose_when_its_command_writes_it_again(tmp_path):
    page = tmp_path / "x.md"
    files.write_page(page, "bench-x", "# Title\n\n| a |\n|---|\n| 1.5 |\n")
    assert page.read_text() == ("# Title\n\n<!-- generated: bench-x -->\n| a |\n|---|\n| 1.5 |\n"
                                "<!-- /generated -->\n")
    page.write_text(page.read_text().replace("# Title", "# My title") + "\nWhat it says.\n")
    files.write_page(page, "bench-x", "# Title\n\n| a |\n|---|\n| 2.5 |\n")
    assert page.read_text() == ("# My title\n\n<!-- generated: bench-x -->\n| a |\n|---|\n"
                                "| 2.5 |\n<!-- /generated -->\n\nWhat it says.\n")
    assert generated.typed_numbers(page.read_text()) == []
