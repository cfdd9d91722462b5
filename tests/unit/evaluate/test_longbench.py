"""LongBench-E metrics as the official ``LongBench/metrics.py`` computes them (``rouge``
package, fuzzywuzzy's ``fuzz.ratio`` through rapidfuzz, the classification loop), checked on
values worked out by hand from those packages' documented rules."""

import pytest

from lsa.evaluate import longbench as lb

pytest.importorskip("rouge")
pytest.importorskip("rapidfuzz")


def summary_f(p: float, r: float) -> float:
    """The ``rouge`` package's F: 2 P R / (P + R + 1e-8)."""
    return 2 * p * r / (p + r + 1e-8)


def test_rouge_l_is_summary_level_over_sentences_split_on_dots():
    # sentences: "the cat sat" | "the dog ran" against the same two in the other order.
    # Union LCS per reference sentence: {the, dog, ran} then {the, cat, sat}: 5 of 5 distinct
    # words on both sides, P = R = 1. A plain LCS on white-space tokens ("sat." != "sat")
    # would find 2 of 6 tokens and give 1/3.
    got = lb.rouge_score("the cat sat. the dog ran", "the dog ran. the cat sat")
    assert got == pytest.approx(summary_f(1.0, 1.0), abs=1e-12)
    assert got < 1.0  # the package's 1e-8 in the denominator is kept


def test_rouge_l_counts_distinct_words():
    # the package counts words as sets (exclusive=True): "the cat the cat" has 2 words
    assert lb.rouge_score("the cat the cat", "the cat") == pytest.approx(summary_f(1.0, 1.0),
                                                                         abs=1e-12)
    # two reference sentences, one hypothesis sentence: LCS("a b c", "a x") = {a},
    # LCS("a b c", "c y") = {c}; union 2, P = 2/3 (a b c), R = 2/4 (a x c y)
    assert lb.rouge_score("a b c", "a x. c y") == pytest.approx(summary_f(2 / 3, 2 / 4),
                                                                abs=1e-12)


def test_rouge_l_is_zero_where_the_package_raises():
    # no sentence left after splitting on "." -> the package raises -> the official 0
    assert lb.rouge_score("", "the cat sat") == 0.0
    assert lb.rouge_score("...", "the cat sat") == 0.0
    # samsum scores the first line only: "." alone raises, though the second line matches
    assert lb.sample_score("samsum", ".\nthe cat sat", ["the cat sat"]) == 0.0


def test_code_similarity_first_code_line_integer_percentage():
    fence = "```python\n# add one\n// not python either\nreturn 1 + x\n```"
    # first line without ` # //: "return 1 + x" against "return x - 1": LCS "return " plus two
    # spaces = 9 of 24 characters -> 2 * 9 / 24 = 75 %. difflib's greedy blocks give 66.7 %.
    assert lb.code_sim_score(fence, "return x - 1") == 0.75
    # LCS 10, lengths 10 + 12: 90.909 % -> the integer 91 -> 0.91 (not 0.90909)
    assert lb.code_sim_score("// c\nreturn x+1", "return x + 1") == 0.91
    # ties round half to even, as Python's round in fuzzywuzzy's intr: 62.5 -> 62, 37.5 -> 38
    assert lb.code_sim_score("abcdexyz", "abcdeuvw") == 0.62
    assert lb.code_sim_score("abcdefgh", "abcstuvw") == 0.38
    # no code line at all: "" against the truth scores 0
    assert lb.code_sim_score("# only\n```", "return x") == 0.0
    assert lb.sample_score("lcc", "\n# c\nreturn x", ["nothing", "return x"]) == 1.0


def test_code_similarity_matches_rapidfuzz_backed_levenshtein_at_ties():
    # 1 + 39 vs 1 + 39 characters, LCS 1: exactly 2.5 %. python-Levenshtein >= 0.14 (the
    # rapidfuzz InDel similarity, 1 - 78/80) lands a hair above 2.5 and rounds to 3; the old C
    # ratio (80 - 78) / 80 and difflib land on 2.5 and round to 2.
    assert lb.code_sim_score("x" + "b" * 39, "x" + "c" * 39) == 0.03


def test_classification_keeps_the_official_skip_after_a_removal():
    # the official loop removes proper substrings of the truth from the list it iterates
    # over, so the name right after a removed one is never checked: "Type" stays, 1/2
    classes = ["Entity", "Type", "Entity Type"]
    assert lb.classification_score("Entity Type", "Entity Type", all_classes=classes) == 0.5
    # "Type" is skipped, "Other" is checked (kept: not in the truth): 1/3, not 1/2
    classes = ["Entity", "Type", "Other", "Entity Type"]
    assert lb.classification_score("Entity Type or Other", "Entity Type",
                                   all_classes=classes) == pytest.approx(1 / 3)
