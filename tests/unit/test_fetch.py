"""python -m lsa fetch longbench babilong (lsa/fetch.py): the files land where the jobs look,
each checked against its pinned sha256 and recorded; --from DIR for machines without network;
a file that is not the pinned one is refused and nothing is written."""

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from lsa import fetch
from lsa.config import LONGBENCH_E_DATASETS

SHARED = Path("/work/shared/data/longbench")  # LongBench's tables at the pinned commit


def tables(folder: Path) -> None:
    """LongBench's two tables: the real ones when this machine has them, else stand-ins
    whose checksums the test pins itself."""
    for item in fetch.LONGBENCH_TABLES:
        source = SHARED / item.name
        (folder / item.name).write_bytes(source.read_bytes() if source.is_file()
                                         else b'{"qasper": 128}')


@pytest.fixture
def pinned_to_what_is_here(tmp_path, monkeypatch):
    """The pins, re-pointed at the stand-in tables when the real ones are not on this
    machine (the real checksums are tested where they are)."""
    if all((SHARED / t.name).is_file() for t in fetch.LONGBENCH_TABLES):
        return
    digest = hashlib.sha256(b'{"qasper": 128}').hexdigest()
    monkeypatch.setattr(fetch, "LONGBENCH_TABLES", [
        fetch.Pinned(t.name, t.repo, t.commit, t.path, digest) for t in fetch.LONGBENCH_TABLES])


def rows(dataset: str) -> str:
    return json.dumps({"input": dataset, "context": "c", "answers": ["a"], "length": 5}) + "\n"


def test_longbench_from_a_folder_of_jsonl_files(tmp_path, pinned_to_what_is_here):
    source, target = tmp_path / "src", tmp_path / "out"
    (source / "data").mkdir(parents=True)
    tables(source)
    for d in LONGBENCH_E_DATASETS:
        (source / "data" / f"{d}_e.jsonl").write_text(rows(d))
    log = fetch.fetch_longbench(list(LONGBENCH_E_DATASETS), source, target)
    assert all((target / f"{d}_e.jsonl").read_text() == rows(d) for d in LONGBENCH_E_DATASETS)
    record = json.loads((target / fetch.RECORD).read_text())
    assert record["tables"]["dataset2prompt.json"]["commit"] == fetch.LONGBENCH_COMMIT
    assert record["data"]["files"]["qasper_e.jsonl"] == \
        hashlib.sha256(rows("qasper").encode()).hexdigest()
    assert any("as pinned" in line for line in log)


def test_longbench_from_the_benchmarks_zip_says_it_is_not_pinned_yet(tmp_path,
                                                                     pinned_to_what_is_here):
    source, target = tmp_path / "src", tmp_path / "out"
    source.mkdir()
    tables(source)
    with zipfile.ZipFile(source / "data.zip", "w") as zf:
        for d in ("qasper", "trec", "lsht"):
            zf.writestr(f"data/{d}_e.jsonl", rows(d))
    log = fetch.fetch_longbench(["qasper", "trec"], source, target)
    assert sorted(p.name for p in target.glob("*_e.jsonl")) == ["qasper_e.jsonl",
                                                                "trec_e.jsonl"]
    record = json.loads((target / fetch.RECORD).read_text())
    assert record["data"]["sha256"] == fetch.sha256(source / "data.zip")
    assert "NOT pinned" in log[-1]
    with pytest.raises(fetch.FetchError, match="lacks 2wikimqa_e.jsonl"):
        fetch.fetch_longbench(["2wikimqa"], source, tmp_path / "other")


def test_a_file_that_is_not_the_pinned_one_is_refused(tmp_path):
    source, target = tmp_path / "src", tmp_path / "out"
    source.mkdir()
    (source / "prompts.py").write_text("DEFAULT_TEMPLATE = 'not the benchmark'\n")
    with pytest.raises(fetch.FetchError, match="not the pinned file"):
        fetch.fetch_babilong(source, target)
    assert not (target / "prompts.py").exists()
    with pytest.raises(fetch.FetchError, match="no prompts.py"):
        fetch.fetch_babilong(tmp_path / "empty", target)


def test_babilong_prompts_from_a_folder_when_the_checksum_matches(tmp_path, monkeypatch):
    from support import FAKE_PROMPTS

    source, target = tmp_path / "src", tmp_path / "out"
    (source / "babilong").mkdir(parents=True)
    (source / "babilong" / "prompts.py").write_text(FAKE_PROMPTS)
    digest = hashlib.sha256(FAKE_PROMPTS.encode()).hexdigest()
    item = fetch.BABILONG_PROMPTS
    monkeypatch.setattr(fetch, "BABILONG_PROMPTS",
                        fetch.Pinned(item.name, item.repo, item.commit, item.path, digest))
    log = fetch.fetch_babilong(source, target)
    assert (target / "prompts.py").read_text() == FAKE_PROMPTS
    assert json.loads((target / fetch.RECORD).read_text())["prompts.py"]["sha256"] == digest
    assert "babilong ->" in log[0]
    assert item.url == (f"https://raw.githubusercontent.com/booydar/babilong/"
                        f"{fetch.BABILONG_COMMIT}/babilong/prompts.py")


def test_the_fetch_command_says_what_failed(tmp_path, capsys):
    from lsa import __main__ as cli

    assert cli.main(["fetch", "babilong", "--from", str(tmp_path)]) == 1
    assert "fetch: --from" in capsys.readouterr().err
