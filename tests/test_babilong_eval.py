"""BABILong, evaluate design (gpu-small, paper): the benchmark's prompts read from a local
prompts.py.

The fixture prompts.py has the benchmark file's shape (string constants, an f-string template
built from them, a dictionary of per-task parts, functions) with made-up strings only."""

import pytest

from lsa import paths
from lsa.data.babilong import BabilongSample
from lsa.data.books import DataMissingError
from lsa.evaluate import babilong_prompts as bp

FIXTURE_PROMPTS = '''
PART_TEMPLATE = '{instruction}\\n\\n{examples}\\n\\n{post_prompt}'
ASK_TEMPLATE = '<ctx>\\n{context}\\n</ctx>\\n\\nQ: {question}'
DEFAULT_TEMPLATE = f'{PART_TEMPLATE}\\n\\n{ASK_TEMPLATE}'

OTHER = {'NOT_USED': 'zebra ' 'yak'}


def get_formatted_input(context, question, examples, instruction, post_prompt,
                        template=DEFAULT_TEMPLATE):
    return template.format(instruction=instruction, examples=examples,
                           post_prompt=post_prompt, context=context.strip(),
                           question=question).strip()


MARKER = __file__ + '.executed'
open(MARKER, 'w').write('ran')  # executing leaves a file

DEFAULT_PROMPTS = {
    'qa1': {
        'instruction':
            'INSTR-ONE: find the place. '
            'Second sentence.',
        'examples':
            '<example>\\nEX-ONE alpha.\\n</example>',
        'post_prompt':
            'POST-ONE ' + 'reply briefly.'
    },
    'qa2': {'instruction': 'INSTR-TWO', 'examples': 'EX-TWO', 'post_prompt': 'POST-TWO'},
}
'''


@pytest.fixture
def prompts_file(tmp_path):
    path = tmp_path / "babilong" / "prompts.py"
    path.parent.mkdir()
    path.write_text(FIXTURE_PROMPTS)
    return path


def sample(context=" Mary went to the garden.  Some text. ") -> BabilongSample:
    return BabilongSample("qa1", context, "Where is Mary?", "garden", 64, 20)


def test_prompts_are_parsed_not_executed(prompts_file, tmp_path):
    prompts = bp.read_prompts(prompts_file, ["qa1", "qa2"])
    assert not list(prompts_file.parent.glob("*.executed"))
    assert prompts.template == ("{instruction}\n\n{examples}\n\n{post_prompt}\n\n"
                                "<ctx>\n{context}\n</ctx>\n\nQ: {question}")
    assert prompts.prompts["qa1"] == {
        "instruction": "INSTR-ONE: find the place. Second sentence.",
        "examples": "<example>\nEX-ONE alpha.\n</example>",
        "post_prompt": "POST-ONE reply briefly."}
    assert set(prompts.prompts) == {"qa1", "qa2"}
    assert len(prompts.sha256) == 64


def test_rendering_follows_the_benchmark_template_order(prompts_file):
    prompts = bp.read_prompts(prompts_file)
    text = prompts.template_for("qa1").render(sample())
    assert text == ("INSTR-ONE: find the place. Second sentence.\n\n"
                    "<example>\nEX-ONE alpha.\n</example>\n\n"
                    "POST-ONE reply briefly.\n\n"
                    "<ctx>\nMary went to the garden.  Some text.\n</ctx>\n\n"
                    "Q: Where is Mary?")
    # parts left out are empty and leave no leading blank lines (the benchmark strips)
    bare = prompts.template_for("qa1", []).render(sample())
    assert bare == "<ctx>\nMary went to the garden.  Some text.\n</ctx>\n\nQ: Where is Mary?"
    only_examples = prompts.template_for("qa1", ["examples"]).render(sample())
    assert only_examples.startswith("<example>") and "INSTR-ONE" not in only_examples
    assert "POST-ONE" not in only_examples


def test_rendering_equals_the_benchmark_function_of_the_same_file(prompts_file, tmp_path):
    """Cross-check against the fixture's own formatting function, run here on purpose."""
    namespace = {"__file__": str(tmp_path / "copy.py")}
    exec(compile(prompts_file.read_text(), str(prompts_file), "exec"), namespace)
    prompts = bp.read_prompts(prompts_file)
    for task in ("qa1", "qa2"):
        for parts in (bp.PROMPT_PARTS, ("instruction",), ()):
            d = namespace["DEFAULT_PROMPTS"][task]
            want = namespace["get_formatted_input"](
                sample().context, sample().question,
                *(d[p] if p in parts else "" for p in ("examples", "instruction", "post_prompt")))
            assert prompts.template_for(task, parts).render(sample()) == want


def test_missing_prompts_file_names_the_paths_and_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("LSA_DATA_DIR", str(tmp_path / "mine"))
    monkeypatch.setattr(paths, "CACHE", tmp_path / "cache")
    with pytest.raises(DataMissingError) as err:
        bp.locate_prompts()
    message = str(err.value)
    for word in (str(tmp_path / "mine" / "babilong" / "prompts.py"),
                 str(tmp_path / "cache" / "babilong" / "prompts.py"), "booydar/babilong",
                 "curl", "babilong.prompts_file"):
        assert word in message
    with pytest.raises(DataMissingError, match="nowhere.py"):
        bp.locate_prompts(str(tmp_path / "nowhere.py"))
    (tmp_path / "mine" / "babilong").mkdir(parents=True)
    (tmp_path / "mine" / "babilong" / "prompts.py").write_text(FIXTURE_PROMPTS)
    assert bp.locate_prompts() == tmp_path / "mine" / "babilong" / "prompts.py"


def test_a_file_of_another_shape_is_refused(tmp_path):
    path = tmp_path / "prompts.py"
    path.write_text("DEFAULT_TEMPLATE = '{context} {answer}'\nDEFAULT_PROMPTS = {}\n")
    with pytest.raises(bp.PromptsFormatError, match="answer"):
        bp.read_prompts(path)
    path.write_text("DEFAULT_TEMPLATE = '{context} {question}'\n"
                    "DEFAULT_PROMPTS = {'qa1': {'instruction': 'x'}}\n")
    with pytest.raises(bp.PromptsFormatError, match="qa1"):
        bp.read_prompts(path)
    path.write_text("DEFAULT_TEMPLATE = make()\nDEFAULT_PROMPTS = {}\n")
    with pytest.raises(bp.PromptsFormatError, match="DEFAULT_TEMPLATE"):
        bp.read_prompts(path)
