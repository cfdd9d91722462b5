"""bAbI parser and generator, BABILong assembly, the official scoring rule, LongBench-E."""

import json
import math
import re

import pytest
from support import ROOT

from lsa.data import babi
from lsa.data.babilong import FactsDoNotFit, assemble, fitting, split_sentences
from lsa.evaluate import longbench as lb
from lsa.evaluate.babilong import first_sentence, is_correct

SHARED = ROOT.parent / "shared" / "data"
REAL = SHARED / "babi" / "tasks_1-20_v1-2"
needs_real = pytest.mark.skipif(not REAL.is_dir(), reason="bAbI files not present")


def test_parser_on_a_hand_written_story():
    lines = ["1 Mary moved to the bathroom.", "2 John went to the hallway.",
             "3 Where is Mary? \tbathroom\t1", "4 Daniel went back to the garden.",
             "5 Where is Daniel? \tgarden\t4", "1 Sandra moved to the office.",
             "2 Where is Sandra? \toffice\t1"]
    samples = babi.parse_babi(lines, "qa1")
    assert [s.answer for s in samples] == ["bathroom", "garden", "office"]
    assert samples[1].facts == ["Mary moved to the bathroom.", "John went to the hallway.",
                                "Daniel went back to the garden."]
    assert samples[1].supporting == [2]  # line 4 is the third fact
    assert samples[2].facts == ["Sandra moved to the office."]  # a new story starts at 1


def oracle(sample: babi.BabiSample) -> str:
    """An independent reading of the facts that answers qa1, qa4 and qa5 questions."""
    q = sample.question
    if sample.task == "qa1":
        actor = q.split()[-1].rstrip("?")
        moves = [f for f in sample.facts if f.startswith(actor + " ")]
        return moves[-1].rstrip(".").split()[-1]
    if sample.task == "qa4":
        rel = [re.match(r"The (\w+) is (\w+) of the (\w+)\.", f).groups() for f in sample.facts]
        m = re.match(r"What is (\w+) of the (\w+)\?", q)
        if m:
            return next(a for a, d, b in rel if d == m[1] and b == m[2])
        m = re.match(r"What is the (\w+) (\w+) of\?", q)
        return next(b for a, d, b in rel if a == m[1] and d == m[2])
    if sample.task == "qa5":
        gives = [re.match(r"(\w+) (?:gave|handed|passed) the (\w+) to (\w+)\.", f)
                 for f in sample.facts]
        gives = [g.groups() for g in gives if g]
        if m := re.match(r"What did (\w+) give to (\w+)\?", q):
            return [o for a, o, b in gives if a == m[1] and b == m[2]][-1]
        if m := re.match(r"Who gave the (\w+) to (\w+)\?", q):
            return [a for a, o, b in gives if o == m[1] and b == m[2]][-1]
        if m := re.match(r"Who received the (\w+)\?", q):
            return [b for a, o, b in gives if o == m[1]][-1]
        m = re.match(r"Who did (\w+) give the (\w+) to\?", q)
        return [b for a, o, b in gives if a == m[1] and o == m[2]][-1]
    raise ValueError(sample.task)


@pytest.mark.parametrize("task", ["qa1", "qa4", "qa5"])
def test_generated_answers_are_correct(task):
    for sample in babi.generate(task, 200, seed=3):
        assert oracle(sample) == sample.answer
        assert all(0 <= i < len(sample.facts) for i in sample.supporting)


@pytest.mark.parametrize("task", ["qa2", "qa3"])
def test_generated_object_answers_are_rooms_the_supporting_facts_name(task):
    for sample in babi.generate(task, 100, seed=1):
        assert sample.answer in babi.ROOMS
        named = " ".join(sample.facts[i] for i in sample.supporting)
        obj = re.search(r"the (apple|football|milk)", sample.question)[1]
        assert obj in named


def test_generator_is_seeded():
    a = babi.generate("qa2", 20, seed=7)
    assert a == babi.generate("qa2", 20, seed=7)
    assert a != babi.generate("qa2", 20, seed=8)


def sentence_shapes(samples):
    """Sentence forms with the entities replaced: the vocabulary of the task."""
    words = babi.ROOMS + babi.OBJECTS + babi.ACTORS + babi.ACTORS5 + list(babi.DIRECTIONS)
    pattern = re.compile(r"\b(" + "|".join(words) + r")\b")
    return {pattern.sub("X", f) for s in samples for f in s.facts} | \
        {pattern.sub("X", s.question) for s in samples}


@needs_real
@pytest.mark.parametrize("task", ["qa1", "qa2", "qa3", "qa4", "qa5"])
def test_generator_speaks_like_the_real_files(task, monkeypatch):
    monkeypatch.setenv("LSA_DATA_DIR", str(SHARED))
    real, source = babi.load_babi(task, "train", 2000)
    assert source.startswith("bAbI files")
    fake = babi.generate(task, 300, seed=0)
    assert sentence_shapes(fake) <= sentence_shapes(real)
    assert {s.answer for s in fake} <= {s.answer for s in real}
    real_n = sum(len(s.facts) for s in real) / len(real)
    fake_n = sum(len(s.facts) for s in fake) / len(fake)
    assert real_n / 3 <= fake_n <= real_n * 3, (real_n, fake_n)


def test_without_files_the_generator_is_used(monkeypatch, tmp_path):
    monkeypatch.setenv("LSA_DATA_DIR", str(tmp_path))
    samples, source = babi.load_babi("qa1", "test", 5)
    assert source == "built-in generator" and len(samples) == 5
    with pytest.raises(ValueError, match="must be one of"):
        babi.load_babi("qa9")


def words(text):
    return len(text.split())


HAY = [f"Sentence number {i} is here." for i in range(200)]


def test_assembly_length_order_and_recoverability():
    sample = babi.generate("qa1", 10, seed=0)[-1]
    built = assemble(sample, HAY, 120, words, seed=1)
    assert built.tokens <= 120 and built.tokens > 120 - 6  # filled to within one sentence
    positions = [built.context.index(f) for f in sample.facts]
    assert positions == sorted(positions)  # facts keep their order
    assert oracle(babi.BabiSample("qa1", [f for f in sample.facts if f in built.context],
                                  sample.question, sample.answer)) == sample.answer
    assert assemble(sample, HAY, 120, words, seed=1) == built  # deterministic
    assert assemble(sample, HAY, 120, words, seed=2).context != built.context


@pytest.mark.parametrize("depth", [0.0, 0.25, 0.5, 0.75, 1.0])
def test_depth_places_every_fact_there(depth):
    sample = babi.generate("qa1", 4, seed=0)[-1]
    built = assemble(sample, HAY, 300, words, seed=0, depth=(depth, depth))
    assert all(abs(p - depth) < 0.03 for p in built.fact_positions)
    start = built.context.index(sample.facts[0])
    end = built.context.index(sample.facts[-1]) + len(sample.facts[-1])
    background = len(built.context) - (end - start)
    assert abs(start / background - depth) < 0.03  # the share of book text before the facts
    if depth == 0.0:
        assert built.context.startswith(sample.facts[0])
    if depth == 1.0:
        assert built.context.endswith(sample.facts[-1])


def test_facts_that_do_not_fit_fail_clearly():
    sample = babi.generate("qa1", 10, seed=0)[-1]
    with pytest.raises(FactsDoNotFit, match="more than the 10 requested"):
        assemble(sample, HAY, 10, words)
    assert fitting([sample], words, 10) == []


def test_split_sentences():
    assert split_sentences("It was. Then \"he\" said! Who? no split.\nNext line.") == [
        "It was.", "Then \"he\" said!", "Who? no split.", "Next line."]


# tokens: a word-level tokenizer, with and without a BOS post-processor (as Llama-2 adds one)
QA1_SHORT = [s for s in babi.generate("qa1", 100, seed=0) if len(s.facts) <= 2]


def word_tokenizer(bos: bool):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    texts = HAY + [f for s in QA1_SHORT for f in s.facts] + [s.question for s in QA1_SHORT]
    words = sorted({w for t in texts + ["Question: Answer:"] for w in
                    re.findall(r"\w+|[^\w\s]+", t)})
    vocab = {w: i for i, w in enumerate(["<unk>", "<s>", "</s>", *words])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    if bos:
        backend.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", vocab["<s>"])])
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>",
                                   pad_token="</s>", unk_token="<unk>")


def ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def stream_of(tok, samples, l_train):
    import numpy as np

    from lsa.data.babilong import BabilongStream
    from lsa.data.tokens import TokenStream

    filler = TokenStream(np.asarray(ids(tok, " ".join(HAY[::-1])), dtype=np.int64), "filler")
    return BabilongStream(samples, HAY, filler, tok, l_train=l_train)


def occurrences(row, piece):
    return [i for i in range(len(row) - len(piece) + 1) if row[i:i + len(piece)] == piece]


@pytest.mark.parametrize("bos", [False, True])
def test_training_rows_put_every_fact_in_window_b(bos):
    """The trainer's CE and answer CE are on window B = x[l_extra:]: every fact of the story
    (the supporting ones included), the question and the answer must lie there."""
    import torch

    tok, l_train = word_tokenizer(bos), 64
    for sample in QA1_SHORT[:12]:
        stream = stream_of(tok, [sample], l_train)
        for l_extra in (0, 1, 9, 32, 64):
            length = l_train + l_extra
            rows, masks = stream.sample_with_answers(4, length, torch.Generator().manual_seed(
                l_extra))
            assert rows.shape == masks.shape == (4, length)
            for row, mask in zip(rows.tolist(), masks.tolist()):
                for fact in sample.facts:
                    found = occurrences(row, ids(tok, fact))
                    assert found and min(found) >= l_extra, (fact, l_extra)
                question = ids(tok, "Question: " + sample.question)
                assert min(occurrences(row, question)) >= l_extra
                answer = ids(tok, " " + sample.answer)
                assert [t for t, m in zip(row, mask) if m] == answer == row[-len(answer):]


@pytest.mark.parametrize("bos", [False, True])
def test_special_tokens_are_counted_once_at_the_start_of_a_row(bos):
    import torch

    from lsa.data.babilong import special_prefix, token_counter

    tok = word_tokenizer(bos)
    assert token_counter(tok)("Mary moved to the bathroom.") == 6   # no BOS in a piece
    assert special_prefix(tok) == ([tok.bos_token_id] if bos else [])
    stream = stream_of(tok, QA1_SHORT, 64)
    for l_extra in (0, 1, 20):
        rows, masks = stream.sample_with_answers(16, 64 + l_extra, torch.Generator().manual_seed(3))
        starts_with_bos = rows[:, 0] == tok.bos_token_id
        assert bool(starts_with_bos.all()) is bos
        assert ((rows == tok.bos_token_id).sum(1) == int(bos)).all()  # exactly one, or none
        # the answers are the bare word, no BOS: one token each with this tokenizer
        assert (masks.sum(1) == 1).all()
        answers = {tok.convert_ids_to_tokens(int(t)) for t in rows[masks]}
        assert answers <= set(babi.ROOMS)


# the scoring rule: babilong/metrics.py (official) and the word-boundary variant (word)
QA1, QA5 = babi.TASK_LABELS["qa1"], babi.TASK_LABELS["qa5"]


@pytest.mark.parametrize("output, target, question, labels, official, word", [
    ("kitchen", "kitchen", "Where is Mary?", QA1, True, True),
    ("The kitchen. Then the garden.", "kitchen", "Where is Mary?", QA1, True, True),
    ("kitchen or garden", "kitchen", "Where is Mary?", QA1, False, False),     # two labels
    ("garden", "kitchen", "Where is Mary?", QA1, False, False),
    ("", "kitchen", "Where is John?", QA1, False, False),
    ("the garden, I think; bedroom", "bedroom", "What is north of the garden?", QA1, True, True),
    ("Fred gave it", "Fred", "Who gave the apple to Bill?", QA5, True, True),  # Bill set aside
    # cases that separate the two rules
    ("bedroom<context>hallway", "bedroom", "Where is Mary?", QA1, True, False),  # official cut
    (" officeroom is", "office", "Where is Mary?", QA1, True, False),       # substring match
    ("kitchenette", "kitchen", "Where is John?", QA1, True, False),
    ("Kitchen\ngarden.", "kitchen", "Where is John?", QA1, False, True),     # newline, then .
    ("Kitchen\nQuestion: where is the garden", "kitchen", "Where is John?", QA1, False, True),
    ("Bill", "Bill", "Who gave the apple to Billy?", QA5, False, True),       # label in a word
    ("Kitchen! Garden", "kitchen", "Where is John?", QA1, False, True),       # only . cuts
    # of the question
    ("apple, milk", "apple,milk", "What is Fred carrying?", ["apple", "milk", "nothing"],
     True, False),                                                            # qa8: all parts
    ("apple", "apple,milk", "What is Fred carrying?", ["apple", "milk", "nothing"],
     False, False),
    ("apple, milk", "apple, milk", "What is Fred carrying?", ["apple", "milk", "nothing"],
     False, False),                                           # official: " milk" is no label
])
def test_scoring_rules(output, target, question, labels, official, word):
    assert is_correct(output, target, question, labels, scorer="official") is official
    assert is_correct(output, target, question, labels, scorer="word") is word
    assert is_correct(output, target, question, labels) is official  # the default


def test_official_rule_equals_the_benchmark_code_on_random_outputs():
    """A line-by-line transcription of babilong/metrics.py's compare_answers (kept here, in the
    test, as the reference) against ours on outputs built from labels and separators."""
    import random

    def reference(target, output, question, task_labels):
        output = output.lower().split(".")[0].split("<context>")[0].split("<example>")[0]
        output = output.split("Question")[0]
        target = target.lower()
        task_labels = {label.lower() for label in task_labels}
        in_q = {label for label in task_labels if label in question.lower()}
        in_out = {label for label in task_labels if label in output} - in_q
        if "," in target and len(target) > 3:
            subs = target.split(",")
            return all(t in in_out for t in subs) and len(in_out) == len(subs)
        return target in in_out and len(in_out) == 1

    rng = random.Random(0)
    pieces = QA5 + ["Question", "<context>", "<example>", ".", "\n", " ", ",", "is", "Bil"]
    for _ in range(2000):
        output = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
        target = rng.choice(QA5)
        question = f"Who gave the {rng.choice(['apple', 'milk'])} to {rng.choice(QA5)}?"
        assert is_correct(output, target, question, QA5) == reference(target, output,
                                                                      question, QA5)


def test_unknown_scorer_fails():
    with pytest.raises(ValueError, match="official, word"):
        is_correct("x", "kitchen", "Where?", QA1, scorer="exact")


def test_first_sentence():
    assert first_sentence(" Office. More") == "office"
    assert first_sentence("\n") == ""


# evaluation: prompts, batched greedy decoding, the grid's rows
def tiny_model(tok, method=None, tmp_path=None):
    from lsa.models import scratch_llama

    model = scratch_llama(len(tok), 32, 2, 2, 64, 32, eos_token_id=tok.eos_token_id, seed=1)
    if method is None:
        return model
    from lsa.extend import load_for_method

    model.save_pretrained(tmp_path / "tiny")
    return load_for_method(str(tmp_path / "tiny"), method, 32, 64)


@pytest.mark.parametrize("method", [None, "pi", "eabf"])
def test_batched_decoding_equals_one_prompt_at_a_time(method, tmp_path):
    from lsa.evaluate.babilong import generate_answers, pads_safely

    tok = word_tokenizer(bos=True)
    model = tiny_model(tok, method, tmp_path)
    assert pads_safely(model) is (method != "eabf")  # EABF ignores the padding mask
    prompts = [" ".join(HAY[i:i + k]) + "\nQuestion: Where is Mary?\nAnswer:"
               for i, k in ((0, 1), (5, 4), (9, 2), (20, 7), (30, 3))]
    assert len({len(ids(tok, p)) for p in prompts}) == len(prompts)  # padding is needed
    one = generate_answers(model, tok, prompts, max_new_tokens=5, batch_size=1)
    assert generate_answers(model, tok, prompts, max_new_tokens=5, batch_size=3) == one
    assert generate_answers(model, tok, prompts, max_new_tokens=5, batch_size=8) == one
    assert any(one)


def test_prompts_start_with_one_bos_and_fit_the_length(monkeypatch):
    import lsa.evaluate.babilong as ev

    tok = word_tokenizer(bos=True)
    seen = []

    def fake_generate(model, tokenizer, prompts, max_new_tokens, batch_size):
        seen.extend(prompts)
        return [" kitchen."] * len(prompts)

    monkeypatch.setattr(ev, "generate_answers", fake_generate)
    samples = {"qa1": QA1_SHORT}
    rows = ev.evaluate_grid(None, tok, samples, HAY, [40, 80], 6, seed=2)
    assert len(rows) == 12 and len(seen) == 12
    assert all(row["tokens"] <= row["length"] and row["tokens"] > row["length"] - 8
               for row in rows)
    for prompt, row in zip(seen, rows):
        assert len(ids(tok, prompt)) + 1 == row["tokens"]          # prompt + BOS
        assert row["question"] in prompt and row["scorer"] == "official"
    assert [r["index"] for r in rows] == list(range(6)) * 2
    # the same seed gives the same prompts (CE and regularized runs are paired row for row)
    again = []
    monkeypatch.setattr(ev, "generate_answers", lambda m, t, p, k, b: again.extend(p) or
                        [""] * len(p))
    ev.evaluate_grid(None, tok, samples, HAY, [40, 80], 6, seed=2)
    assert again == seen


def test_decoding_sees_one_bos(monkeypatch):
    from lsa.evaluate.babilong import generate_answers

    tok = word_tokenizer(bos=True)
    model = tiny_model(tok)
    calls = []
    real = model.generate
    monkeypatch.setattr(model, "generate", lambda **kw: calls.append(kw) or real(**kw))
    generate_answers(model, tok, ["Mary moved to the bathroom.", "Where is Mary?"], 2, 2)
    (kw,) = calls
    mask, row_ids = kw["attention_mask"], kw["input_ids"]
    assert mask.tolist() == [[0, 0, 1, 1, 1, 1, 1], [1] * 7]      # left padding
    firsts = [r[m.bool()][0].item() for r, m in zip(row_ids, mask)]
    assert firsts == [tok.bos_token_id] * 2
    assert ((row_ids == tok.bos_token_id) & mask.bool()).sum().item() == 2


# Tables 6-7: binomial and paired intervals, verdicts only outside them
def answers(correct_by_run, multiple=1, task="qa1", depth=None):
    """Rows as the runs store them: {(alpha, seed): [0/1 per test sample index]}."""
    import pandas as pd

    from lsa.runtable import loss_label

    return pd.DataFrame([{"alpha": a, "loss": loss_label(a), "seed": s, "task": task,
                          "length": 256 * multiple, "multiple": multiple, "depth": depth,
                          "index": i, "correct": bool(c), "scorer": "official"}
                         for (a, s), cs in correct_by_run.items() for i, c in enumerate(cs)])


def test_wilson_interval_by_hand():
    from lsa.stats import wilson_interval

    k, n, z = 8, 10, 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert wilson_interval(k, n) == pytest.approx((centre - half, centre + half))
    assert wilson_interval(0, 20)[0] == 0.0 and wilson_interval(20, 20)[1] == 1.0


def test_accuracy_table_pools_seeds_with_a_wilson_interval():
    from lsa.sections.babilong.tables import accuracy_table
    from lsa.stats import wilson_interval

    rows = answers({(0.0, 0): [1, 1, 0, 0, 1], (0.0, 1): [1, 0, 0, 0, 1]})
    (row,) = accuracy_table(rows, ["multiple"]).to_dict(orient="records")
    assert (row["correct"], row["n"], row["seeds"]) == (5, 10, 2)
    assert row["accuracy"] == 50.0
    assert row["seed_std"] == pytest.approx(math.sqrt(200))     # 60 % and 40 %, ddof 1
    low, high = wilson_interval(5, 10)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((100 * low, 100 * high))


def test_paired_interval_by_hand():
    """Differences are paired per (seed, task, length, depth, index), pooled over seeds; the
    interval is Agresti-Min's: 1/2 added to each cell of the paired 2x2 table."""
    from lsa.sections.babilong.tables import paired_accuracy
    from lsa.stats import paired_proportion_interval as paired_interval

    rows = answers({(0.0, 0): [1, 0, 1, 0, 0], (0.1, 0): [1, 1, 1, 0, 1],
                    (0.0, 1): [0, 0, 1, 1, 0], (0.1, 1): [0, 1, 1, 1, 0]})
    rows = rows.sample(frac=1.0, random_state=0)          # pairing must not rely on order
    (row,) = paired_accuracy(rows, ["multiple"], 0.1).to_dict(orient="records")
    # 10 pairs: 3 won (only the regularized run right), 0 lost -> b* 3.5, c* 0.5, n* 12
    centre, se = 3 / 12, math.sqrt(4 - 3 ** 2 / 12) / 12
    z = 1.959963984540054
    assert (row["ce"], row["reg"], row["delta"]) == pytest.approx((40.0, 70.0, 30.0))
    assert (row["answers_low"], row["answers_high"]) == pytest.approx(
        (100 * (centre - z * se), 100 * (centre + z * se)))
    # the verdict's interval has the seed as its unit: Student t over the seed means, +40 and
    # +20 points:
    # 30 +- t(0.975, 1) 14.14 / sqrt(2) = 30 +- 127.06
    half = 12.706204736 * math.sqrt(200) / math.sqrt(2)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((30 - half, 30 + half))
    assert (row["n"], row["seeds"]) == (10, 2)
    assert row["seed_std"] == pytest.approx(math.sqrt(200))     # +40 and +20 points
    # no disagreement still leaves a width: +-z/10 on 8 pairs, about +-z/n on many
    assert paired_interval(0, 0, 8) == pytest.approx((-z / 10, z / 10))
    low, high = paired_interval(0, 0, 400)
    assert -0.005 < low < 0 < high < 0.005


def test_one_interval_rule_whatever_the_number_of_seeds():
    """Three seeds take the rule two take (``SEED_RULE``), no bootstrap: Student t over the seed
    means, by hand; equal seed means leave the answers' own interval; one seed gives none."""
    from lsa.sections.babilong.tables import paired_accuracy
    from lsa.stats import paired_proportion_interval

    ce = [0] * 10
    gains = {0: [1] * 4 + [0] * 6, 1: [1] * 2 + [0] * 8, 2: ce}       # +40, +20, 0 points
    rows = answers({**{(0.0, s): ce for s in gains}, **{(0.1, s): g for s, g in gains.items()}})
    (row,) = paired_accuracy(rows, ["multiple"], 0.1).to_dict(orient="records")
    half = 4.302652729911275 * 20 / math.sqrt(3)       # t(0.975, 2) x SD 20 / sqrt(3 seeds)
    assert (row["delta"], row["seeds"]) == (pytest.approx(20.0), 3)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((20 - half, 20 + half))
    # every seed +10 points (1 of 10 answers): t has no width, the answers' interval stands
    same = {s: [1] + [0] * 9 for s in range(3)}
    rows = answers({**{(0.0, s): ce for s in same}, **{(0.1, s): g for s, g in same.items()}})
    (row,) = paired_accuracy(rows, ["multiple"], 0.1).to_dict(orient="records")
    low, high = paired_proportion_interval(3, 0, 30)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((100 * low, 100 * high))
    rows = answers({(0.0, 0): ce, (0.1, 0): gains[0]})
    (row,) = paired_accuracy(rows, ["multiple"], 0.1).to_dict(orient="records")
    assert math.isnan(row["ci_low"]) and math.isnan(row["ci_high"])


@pytest.mark.parametrize("low, high, verdict", [
    (1.0, 9.0, "agrees"), (-9.0, -1.0, "disagrees"), (-1.0, 9.0, "inconclusive"),
    (float("nan"), float("nan"), "inconclusive"),
])
def test_sign_verdict_both_directions(low, high, verdict):
    from lsa.stats import sign_verdict

    assert sign_verdict(low, high, +1) == verdict
    flipped = {"agrees": "disagrees", "disagrees": "agrees"}.get(verdict, verdict)
    assert sign_verdict(low, high, -1) == flipped


def test_babilong_verdicts_only_outside_the_interval():
    from lsa.sections.babilong.claims import babilong_claims

    # +25 points on 4 samples x 2 seeds: the old per-seed rule said "agrees"; the paired
    # interval (-12 to +52 points) contains 0
    few = answers({(0.0, 0): [1, 1, 0, 0], (0.1, 0): [1, 1, 1, 0],
                   (0.0, 1): [1, 1, 0, 0], (0.1, 1): [1, 1, 1, 0]}, multiple=2)
    claims = {c["id"]: c for c in babilong_claims(few, few.iloc[:0])}
    assert claims["S5.4.len2x"]["verdict"] == "underpowered"
    assert "CI" in claims["S5.4.len2x"]["ours"] and "official" in claims["S5.4.len2x"]["evidence"]
    # the same +25 points over 100 samples per seed is resolved
    many = answers({(0.0, 0): [1, 1, 0, 0] * 25, (0.1, 0): [1, 1, 1, 0] * 25,
                    (0.0, 1): [1, 1, 0, 0] * 25, (0.1, 1): [1, 1, 1, 0] * 25}, multiple=2)
    claims = {c["id"]: c for c in babilong_claims(many, many.iloc[:0])}
    # +25 points against the paper's +2
    assert claims["S5.4.len2x"]["verdict"] == "agrees, larger than the paper's effect"
    worse = answers({(0.0, 0): [1, 1, 1, 0] * 25, (0.1, 0): [1, 1, 0, 0] * 25,
                     (0.0, 1): [1, 1, 1, 0] * 25, (0.1, 1): [1, 1, 0, 0] * 25}, multiple=2)
    claims = {c["id"]: c for c in babilong_claims(worse, worse.iloc[:0])}
    assert claims["S5.4.len2x"]["verdict"] == "disagrees"
    # one training seed: no seed-level interval, no verdict however many answers
    one = answers({(0.0, 0): [1, 1, 1, 0] * 25, (0.1, 0): [1, 1, 0, 0] * 25}, multiple=2)
    claims = {c["id"]: c for c in babilong_claims(one, one.iloc[:0])}
    assert claims["S5.4.len2x"]["verdict"] == "underpowered"
    # no difference over 400 paired answers, seeds alike: the interval rules out the
    # paper's +2.0 points at 2x (Table 6, 8K)
    same = answers({(a, s): [1, 1, 0, 0] * 100 for a in (0.0, 0.1) for s in (0, 1)},
                   multiple=2)
    claims = {c["id"]: c for c in babilong_claims(same, same.iloc[:0])}
    assert claims["S5.4.len2x"]["verdict"] == "smaller than the paper's effect"


def test_a_gain_only_one_seed_shows_is_not_a_verdict():
    """Seed 0: the regularized run answers 40 more of 100 prompts; seed 1: no difference. Over
    the 200 answers alone the gain is clear; with the seed as the unit it is not."""
    from lsa.sections.babilong.tables import paired_accuracy
    from lsa.stats import sign_verdict

    ce = [0] * 100
    rows = answers({(0.0, 0): ce, (0.1, 0): [1] * 40 + [0] * 60,
                    (0.0, 1): ce, (0.1, 1): ce})
    (row,) = paired_accuracy(rows, ["multiple"], 0.1).to_dict(orient="records")
    assert row["delta"] == pytest.approx(20.0)
    assert row["answers_low"] > 10                         # answers only: "agrees"
    assert row["ci_low"] <= 0 < 20 < row["ci_high"]        # seeds, then answers: no verdict
    assert sign_verdict(row["ci_low"], row["ci_high"], +1) == "inconclusive"


def test_a_cell_says_how_many_seeds_it_would_need():
    """The two components of the cell above (seed 0 gains 40 of 100 answers, seed 1 none): the
    answers' SD within a seed and the seeds' beyond it, each by hand; the seeds the paper's
    effect would need come from ``groups_for_power`` at the seed SD's 80 % upper bound, fewer
    with 4x the answers; one seed plans nothing."""
    import numpy as np

    from lsa.sections.babilong.tables import cell_needs, paired_accuracy
    from lsa.stats import groups_for_power

    ce = [0] * 100
    rows = answers({(0.0, 0): ce, (0.1, 0): [1] * 40 + [0] * 60,
                    (0.0, 1): ce, (0.1, 1): ce})
    (row,) = paired_accuracy(rows, ["multiple"], 0.1).to_dict(orient="records")
    within = np.var([100] * 40 + [0] * 60, ddof=1) / 2   # seed 1's variance is 0: pooled
    ms_between = 100 * ((40 - 20) ** 2 + (0 - 20) ** 2)  # 100 answers x the seed means' spread
    assert row["sd_answers"] == pytest.approx(np.sqrt(within))
    assert row["sd_seeds"] == pytest.approx(np.sqrt((ms_between - within) / 100))
    assert row["per_seed"] == 100 and row["df_seeds"] == 1
    text = cell_needs(row, 40.0)
    n1 = groups_for_power(40.0, row["sd_seeds_upper"], row["sd_answers"], 100)
    n4 = groups_for_power(40.0, row["sd_seeds_upper"], row["sd_answers"], 400)
    assert 2 < n4 <= n1 and text.startswith(f"80 % power against +40 points needs {n1} seeds "
                                            f"of 100 answers or {n4} seeds of 400 answers")
    one = answers({(0.0, 0): ce, (0.1, 0): [1] * 40 + [0] * 60})
    (row,) = paired_accuracy(one, ["multiple"], 0.1).to_dict(orient="records")
    assert cell_needs(row, 8.0) == "seeds needed: not computable (one seed)"


def test_gate_and_depth_zero_use_intervals():
    import pandas as pd

    from lsa.sections.babilong.claims import babilong_claims

    # gate: 50 % of 8 answers (Wilson 21.5-78.5 %) is not clearly above chance + 10 = 26.7 %
    small = answers({(0.0, 0): [1, 0] * 4})
    assert {c["id"]: c for c in babilong_claims(small, small.iloc[:0])}[
        "S5.4.gate.qa1"]["verdict"] == "unclear"
    big = answers({(0.0, 0): [1, 0] * 100})
    assert {c["id"]: c for c in babilong_claims(big, big.iloc[:0])}[
        "S5.4.gate.qa1"]["verdict"] == "passes"
    # depth 0: "comparable" = the paired interval within +-5 points
    same = [1, 0] * 200
    changed = [1, 0] * 190 + [1, 1] * 10          # +2.5 points, interval +0.9 to +4.1
    depth = pd.concat([answers({(0.0, s): same for s in (0, 1)}
                               | {(0.1, s): same for s in (0, 1)}, multiple=4, depth=0.0),
                       answers({(0.0, s): same for s in (0, 1)}
                               | {(0.1, s): changed for s in (0, 1)}, multiple=4, depth=0.5)])
    claims = {c["id"]: c for c in babilong_claims(big, depth)}
    assert claims["S5.4.depth0"]["verdict"] == "agrees"
    # +2.5 [+0.9, +4.1] against the paper's +8
    assert claims["S5.4.depth50"]["verdict"] == \
        "agrees in direction, smaller than the paper's effect"
    far = pd.concat([answers({(0.0, s): same for s in (0, 1)}
                             | {(0.1, s): [0, 0] * 200 for s in (0, 1)}, multiple=4, depth=0.0)])
    assert {c["id"]: c for c in babilong_claims(big, far)}["S5.4.depth0"][
        "verdict"] == "disagrees"


# LongBench-E metrics on hand-made fixtures
def test_qa_f1_by_hand():
    assert lb.qa_f1_score("The cat sat", "a cat sat down") == pytest.approx(2 * 1 * (2 / 3) /
                                                                             (1 + 2 / 3))
    assert lb.qa_f1_score("dog", "cat") == 0.0
    assert lb.normalize_answer("The  Cat, sat!") == "cat sat"


def test_rouge_l_by_hand():
    # LCS("a b c d", "a c d e") = 3 -> P = R = 3/4
    assert lb.rouge_score("a b c d", "a c d e") == pytest.approx(0.75)
    assert lb.rouge_score("", "a") == 0.0


def test_classification_retrieval_count_code():
    classes = ["Abbreviation", "Entity", "Entity Type", "Description"]
    assert lb.classification_score("Entity", "Entity", all_classes=classes) == 1.0
    assert lb.classification_score("Entity Type", "Entity Type", all_classes=classes) == 1.0
    assert lb.classification_score("Entity or Description", "Entity",
                                   all_classes=classes) == 0.5
    assert lb.retrieval_score("Paragraph 12", "Paragraph 12") == 1.0
    assert lb.retrieval_score("12 or 3", "Paragraph 12") == 0.5
    assert lb.count_score("There are 7 unique paragraphs", "7") == 1.0
    assert lb.count_score("none", "7") == 0.0
    assert lb.code_sim_score("# comment\nreturn x + 1\n", "return x + 1") == 1.0
    assert 0 < lb.code_sim_score("return y", "return x + 1") < 1


def test_first_line_only_datasets_and_best_answer():
    assert lb.sample_score("triviaqa", "\nParis\nberlin", ["paris", "rome"]) == 1.0
    assert lb.sample_score("qasper", "Paris", ["rome", "paris"]) == 1.0


def test_buckets_scores_and_averaging_rule():
    rows = [{"answers": ["apple"], "length": 100}, {"answers": ["bob"], "length": 5000},
            {"answers": ["cat"], "length": 9000}, {"answers": ["dog"], "length": 9500}]
    scores = lb.score_dataset("qasper", rows, ["apple", "x", "cat", "x"])
    assert scores == {"0-4k": 100.0, "4-8k": 0.0, "8k+": 50.0, "overall": 50.0}
    assert lb.longbench_e_score({"a": {"overall": 50.0}, "b": {"overall": 20.0}}) == 35.0
    assert lb.bucket_of(3999) == "0-4k" and lb.bucket_of(4000) == "4-8k"


def test_middle_truncation():
    assert lb.truncate_middle(list(range(10)), 4) == [0, 1, 8, 9]
    assert lb.truncate_middle(list(range(10)), 5) == [0, 1, 7, 8, 9]
    assert lb.truncate_middle([1, 2], 5) == [1, 2]


@pytest.mark.skipif(not (SHARED / "longbench").is_dir(), reason="LongBench tables not present")
def test_official_tables_cover_every_dataset():
    prompts, maxlen = lb.load_tables(SHARED / "longbench")
    for dataset in lb.DATASETS:
        assert "{context}" in prompts[dataset] and dataset in maxlen
        assert dataset in lb.METRICS


def test_missing_longbench_data_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="qasper_e.jsonl"):
        lb.load_dataset_file(tmp_path, "qasper")
    (tmp_path / "trec_e.jsonl").write_text(json.dumps({"input": "q", "context": "c",
                                                       "answers": ["x"], "length": 10,
                                                       "all_classes": ["x"]}) + "\n")
    assert lb.load_dataset_file(tmp_path, "trec")[0]["answers"] == ["x"]
