"""BABILong, evaluate design (gpu-small, paper): the benchmark's prompts read from a local
prompts.py, the configuration, the workflow jobs, and the job end to end on a tiny model.

The fixture prompts.py has the benchmark file's shape (string constants, an f-string template
built from them, a dictionary of per-task parts, functions) with made-up strings only."""

import json
import os
import random

import pytest
import torch
from support import ROOT, run, tool

from lsa import paths
from lsa.config import PROFILES, ConfigError, from_mapping, load_config
from lsa.data.babilong import BabilongSample
from lsa.data.books import DataMissingError
from lsa.evaluate import babilong_prompts as bp
from lsa.runs import runs_of

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


# ---------------------------------------------------------------------------------------------
# configuration


@pytest.mark.parametrize("profile", [p for p in PROFILES if not p.startswith("study")])
def test_designs_per_profile(profile):  # the study's profiles plan no BABILong run
    pipe = load_config(profile=profile)
    bl = pipe.babilong
    if profile in ("smoke", "mini", "mini-full"):
        assert bl.design == "train" and runs_of(pipe).babilong and not runs_of(pipe).babilong_eval
        with pytest.raises(ConfigError, match="design"):
            runs_of(pipe).get("babilong-eval", "pi_a0_s0")
    else:  # the paper's experiment: CE and CE + SCE fine-tuning runs, no BABILong training
        assert bl.design == "evaluate" and not runs_of(pipe).babilong
        runs = list(runs_of(pipe).babilong_eval.values())
        assert {r.spec.alpha for r in runs} == {0.0, 0.1}
        assert {r.name for r in runs} <= set(runs_of(pipe).finetune)
        assert all([n.id for n in r.needs] == [runs_of(pipe).finetune[r.name].id] for r in runs)
        ids = {r.id for r in runs}
        assert len(ids) == len(runs) and all(i.startswith("babilong-eval_") for i in ids)
    if profile == "paper":  # Tables 6-7: 4K/8K/16K; QA1 at depths 0-75 % of 16K
        assert bl.eval_lengths == [4096, 8192, 16384] and bl.eval_depth_length == 16384
        assert bl.eval_depths == [0.0, 0.25, 0.5, 0.75] and bl.depth_task == "qa1"
        assert bl.eval_max_new_tokens == 20


def mapping(babilong=None, finetune=None):
    return {"profile": "smoke", "defaults": {
        "finetune": {"methods": ["pi"], "alphas": [0.0, 0.1], **(finetune or {})},
        "babilong": {"design": "evaluate", **(babilong or {})}}}


@pytest.mark.parametrize("babilong, words", [
    ({"finetune_runs": []}, ["babilong.finetune_runs", "at least one fine-tuning run"]),
    ({"finetune_runs": ["clex_a0_s0"]}, ["finetune_runs", "'clex_a0_s0'", "pi_a0_s0"]),
    ({"finetune_runs": ["pi_a0_s0", "pi_a0_s0"]}, ["finetune_runs", "repeat"]),
    ({"design": "evaluation"}, ["babilong.design", "'evaluation'", "'evaluate'"]),
    ({"eval_depths": [0.5, 1.5]}, ["babilong.eval_depths", "[0, 1]"]),
    ({"eval_lengths": []}, ["babilong.eval_lengths", "not be empty"]),
    ({"prompt_parts": ["instruction", "preamble"]}, ["prompt_parts[1]", "'preamble'"]),
    ({"eval_max_new_tokens": 0}, ["eval_max_new_tokens", ">= 1"]),
])
def test_invalid_evaluate_settings_fail_clearly(babilong, words):
    """Settings fail as they load; a run name that does not exist, as the runs are planned
    (``runs_of``, which every job, notebook and the Snakefile calls before any compute)."""
    with pytest.raises(ConfigError) as err:
        runs_of(from_mapping(mapping(babilong)))
    for word in words:
        assert word in str(err.value)


def test_evaluate_design_identity_follows_its_settings():
    def eval_id(pipe, name):
        return runs_of(pipe).get("babilong-eval", name).id

    pipe = from_mapping(mapping())
    assert list(runs_of(pipe).babilong_eval) == ["pi_a0_s0", "pi_a0.1_s0"]
    one = from_mapping(mapping({"finetune_runs": ["pi_a0.1_s0"]}))
    assert list(runs_of(one).babilong_eval) == ["pi_a0.1_s0"]
    assert eval_id(one, "pi_a0.1_s0") == eval_id(pipe, "pi_a0.1_s0")
    other = from_mapping(mapping({"eval_lengths": [128]}))
    assert eval_id(other, "pi_a0_s0") != eval_id(pipe, "pi_a0_s0")
    retrained = from_mapping(mapping(finetune={"l_train": 256}))
    assert eval_id(retrained, "pi_a0_s0") != eval_id(pipe, "pi_a0_s0")
    with pytest.raises(ConfigError, match="no run named 'yarn_a0_s0'"):
        runs_of(pipe).get("babilong-eval", "yarn_a0_s0")


def test_cli_refuses_evaluation_in_the_train_design(capsys):
    from lsa.__main__ import main

    assert main(["babilong-eval", "--profile", "mini", "--run", "pi_a0_s0"]) == 2
    assert "babilong.design = 'train'" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# the workflow


@pytest.mark.parametrize("profile", ["gpu-small", "paper", "mini"])
def test_dry_run_lists_the_jobs_of_the_profile_design(profile, out_root, gpu_data):
    """(``gpu_data``: the benchmark files the GPU profiles' jobs declare as inputs.)"""
    out = run([tool("snakemake"), "-n", "--forceall", "--config", f"profile={profile}"])
    assert out.returncode == 0, out.stderr + out.stdout
    pipe = load_config(profile=profile)
    evals = {f"babilong_eval_{name.replace('.', '_')}" for name in runs_of(pipe).babilong_eval}
    trains = {f"babilong_{name.replace('.', '_')}" for name in runs_of(pipe).babilong}
    jobs = {line[len("rule "):].rstrip(":") for line in out.stdout.splitlines()
            if line.startswith("rule ")}
    listed = {j for j in jobs if j.startswith("babilong")}
    if profile == "mini":
        assert trains and listed == trains
    else:
        assert evals and listed == evals  # and no BABILong training job
        for r in runs_of(pipe).babilong_eval.values():  # each waits for its fine-tuning run
            assert f"runs/{r.needs[0].id}/train_summary.json" in out.stdout
            assert f"runs/{r.id}/train_summary.json" in out.stdout
    # outputs went to the temporary root (Snakemake prints them relative to the repository)
    assert os.path.relpath(out_root, ROOT) + "/" in out.stdout


# ---------------------------------------------------------------------------------------------
# the job end to end on a tiny model from fixture run folders

WORDS = ("the old man walked slowly along the road and looked at the quiet river while a small "
         "bird sang in the green tree near the house").split()


def write_books(folder, n=3):
    rng = random.Random(0)
    folder.mkdir()
    for b in range(n):
        sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))).capitalize()
                     + "." for _ in range(300)]
        (folder / f"book{b}.txt").write_text(" ".join(sentences))


@pytest.fixture
def tiny_pipe(tmp_path, out_root, prompts_file, monkeypatch):
    """A configuration of tiny models and a finished base run folder (scratch Llama)."""
    from lsa.data.tokens import train_tokenizer
    from lsa.files import write_json
    from lsa.models import scratch_llama

    write_books(tmp_path / "books")
    pipe = from_mapping({"profile": "smoke", "defaults": {
        "pretrain": {"data": {"books_dir": str(tmp_path / "books")},
                     "model": {"hidden_size": 16, "n_layers": 1, "n_heads": 2,
                               "intermediate_size": 32, "base_window": 64}},
        "finetune": {"l_train": 128, "methods": ["pi", "longqlora", "clex"], "alphas": [0.0],
                     "lora_r": 4, "clex_hidden": 8},
        "babilong": {"design": "evaluate", "tasks": ["qa1"], "test_samples": 2,
                     "eval_lengths": [160, 256], "eval_depths": [0.0, 1.0],
                     "eval_depth_length": 192, "eval_max_new_tokens": 3,
                     "prompts_file": str(prompts_file)}}})
    base = runs_of(pipe).base.folder
    tok = train_tokenizer([(tmp_path / "books" / "book1.txt").read_text(),
                           "Mary John Sandra Daniel bathroom hallway garden office kitchen"],
                          400, tmp_path / "tok")
    scratch_llama(len(tok), 16, 1, 2, 32, 64, eos_token_id=tok.eos_token_id, seed=0
                  ).save_pretrained(base / "model")
    tok.save_pretrained(base / "tokenizer")
    write_json(base / "train_summary.json", {"steps": 0})
    return pipe


def fake_finetune(pipe, name):
    """A finished fine-tuning run folder: the rebuilt model with changed trainable weights,
    saved as the trainer saves it; returns its logits on a fixed input."""
    from lsa.files import write_json
    from lsa.models import build_for_run

    run = runs_of(pipe).finetune[name]
    folder = run.folder
    model, _ = build_for_run(pipe, run.spec, 128)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(0.5 * torch.randn(p.shape, generator=gen))
    model.save_pretrained(folder / "model")
    write_json(folder / "train_summary.json", {"steps": 1})
    model.eval()
    ids = torch.arange(100).remainder(model.config.vocab_size)[None]
    with torch.no_grad():
        return model(input_ids=ids).logits


@pytest.mark.parametrize("name", ["pi_a0_s0", "longqlora_a0_s0", "clex_a0_s0"])
def test_a_finished_run_is_loaded_with_its_trained_weights(tiny_pipe, name):
    from lsa.jobs import load_finetuned

    want = fake_finetune(tiny_pipe, name)
    model, tokenizer = load_finetuned(tiny_pipe, runs_of(tiny_pipe).finetune[name])
    assert not model.training
    ids = torch.arange(100).remainder(model.config.vocab_size)[None]
    with torch.no_grad():
        got = model(input_ids=ids).logits
    assert torch.allclose(got, want, atol=1e-5)
    assert tokenizer("Mary")["input_ids"]


def test_evaluation_job_end_to_end(tiny_pipe, monkeypatch):
    import lsa.evaluate.babilong as ev
    from lsa.jobs import babilong_evaluate

    evaluation = runs_of(tiny_pipe).babilong_eval["pi_a0_s0"]
    with pytest.raises(FileNotFoundError, match="python -m lsa finetune --run pi_a0_s0"):
        babilong_evaluate(tiny_pipe, evaluation)
    fake_finetune(tiny_pipe, "pi_a0_s0")
    seen = []
    real = ev.generate_answers

    def spy(model, tokenizer, prompts, max_new_tokens=4, batch_size=1):
        seen.extend(prompts)
        assert max_new_tokens == 3
        return real(model, tokenizer, prompts, max_new_tokens, batch_size)

    monkeypatch.setattr(ev, "generate_answers", spy)
    folder = babilong_evaluate(tiny_pipe, evaluation, progress=False)
    assert folder.name == evaluation.id and evaluation.finished
    m = json.loads((folder / "metrics.json").read_text())
    assert (folder / "train_summary.json").exists() and (folder / "run_info.json").exists()
    assert m["design"] == "evaluate" and m["alpha"] == 0.0 and m["l_train"] == 128
    assert m["finetune_run"] == runs_of(tiny_pipe).finetune["pi_a0_s0"].id
    assert m["prompts"]["sha256"] == bp.read_prompts(tiny_pipe.babilong.prompts_file).sha256
    acc, depth = m["accuracy"], m["depth"]
    assert sorted((r["task"], r["length"]) for r in acc) == [("qa1", 160)] * 2 + [("qa1", 256)] * 2
    assert sorted(r["depth"] for r in depth) == [0.0, 0.0, 1.0, 1.0]
    assert {r["length"] for r in depth} == {192}
    for row in acc + depth:  # filled to the length (BPE merges at joins may add a token)
        assert isinstance(row["correct"], bool)
        assert row["length"] - 25 <= row["tokens"] <= row["length"] + 2
    # every prompt is the benchmark's template with qa1's parts, in order
    assert len(seen) == len(acc) + len(depth)
    for prompt in seen:
        order = [prompt.index(s) for s in ("INSTR-ONE", "EX-ONE", "POST-ONE", "<ctx>\n",
                                           "\n</ctx>\n\nQ: ")]
        assert order == sorted(order) and prompt.startswith("INSTR-ONE")
        assert prompt.endswith("?")
    # the same samples for every evaluated run: the answers asked do not depend on the run
    fake_finetune(tiny_pipe, "clex_a0_s0")
    other = babilong_evaluate(tiny_pipe, runs_of(tiny_pipe).babilong_eval["clex_a0_s0"],
                              progress=False)
    other = json.loads((other / "metrics.json").read_text())
    assert [r["answer"] for r in other["accuracy"]] == [r["answer"] for r in acc]
    # a finished evaluation is reused, not redone
    seen.clear()
    assert babilong_evaluate(tiny_pipe, evaluation) == folder and not seen
