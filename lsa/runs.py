"""Runs as pipeline jobs: the base model, the context-extension runs and BABILong (train
design: fine-tuning on BABILong, mini and smoke; evaluate design: a finished context-extension
run evaluated with the benchmark's prompts, gpu-small and paper).

A run is identified by its configuration (``lsa.config.run_id``); its folder
``results/<profile>/runs/<run_id>/`` holds ``config.json``, ``metrics.jsonl``, ``model/``,
``metrics.json`` (evaluations), ``run_info.json`` and, written last, ``train_summary.json``.
A folder with ``train_summary.json`` is finished and reused; anything else is (re)started.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lsa import paths
from lsa.config import FinetuneConfig, PipelineConfig, PretrainConfig, RunConfig
from lsa.files import read_json, save_metrics
from lsa.seeding import seed_everything


@dataclass
class Corpus:
    tokenizer: Any
    streams: dict[str, Any]   # split -> TokenStream
    source: str


def book_texts(cfg: PretrainConfig, splits: tuple[str, ...] = ("train", "validation", "test")
               ) -> tuple[dict[str, dict[str, str]], str]:
    """``{split: {book: text}}`` of the configured book source (a hub dataset is read for the
    asked ``splits`` only) and the source's name."""
    from lsa.data.books import SPLIT_NAMES, load_books, load_hub_books

    data = cfg.data
    if data.books_source == "hub":
        counts = dict(zip(SPLIT_NAMES, data.hub_books))
        texts = load_hub_books(data.hub_dataset,
                               {s: counts[s] if s in splits else 0 for s in SPLIT_NAMES})
        source = f"hub:{data.hub_dataset}"
    else:
        texts, source = load_books(data.books_dir)
    return {s: texts[s] for s in splits}, source


def prepare_corpus(cfg: PretrainConfig, tokenizer=None) -> Corpus:
    """Books -> tokenizer (trained on the training books, unless given) -> token streams."""
    from lsa.data.tokens import TokenStream, train_tokenizer

    texts, source = book_texts(cfg)
    if tokenizer is None:
        tokenizer = train_tokenizer([texts["train"][k] for k in sorted(texts["train"])],
                                    cfg.data.vocab_size, paths.CACHE / "tokenizers")
    streams = {split: TokenStream.build(tokenizer, books, paths.CACHE / "tokens", split)
               for split, books in texts.items()}
    return Corpus(tokenizer, streams, source)


def run_dir(profile: str, run_id: str) -> Path:
    return paths.results_dir(profile) / "runs" / run_id


def is_finished(folder: Path) -> bool:
    return (folder / "train_summary.json").exists()


def _base_model(pipe: PipelineConfig, corpus: Corpus):
    from lsa.models import load_pretrained, scratch_llama

    cfg: PretrainConfig = pipe.settings["pretrain"]  # type: ignore[assignment]
    m = cfg.model
    if m.source == "scratch":
        eos = corpus.tokenizer.convert_tokens_to_ids(corpus.tokenizer.eos_token)
        return scratch_llama(len(corpus.tokenizer), m.hidden_size, m.n_layers, m.n_heads,
                             m.intermediate_size, m.base_window, m.rope_theta, eos,
                             m.n_kv_heads, seed=cfg.seed)
    return load_pretrained(base_model_path(pipe), dtype=getattr(torch, m.dtype),
                           load_in_4bit=m.load_in_4bit)[0]


def _base_tokenizer(pipe: PipelineConfig):
    """The tokenizer of a downloaded base model (None for scratch: trained on the books)."""
    from transformers import AutoTokenizer

    if pipe.settings["pretrain"].model.source == "scratch":  # type: ignore[attr-defined]
        return None
    return AutoTokenizer.from_pretrained(base_model_path(pipe))


def pretrain(pipe: PipelineConfig, progress: bool = True) -> Path:
    """The base model of the profile: a scratch Llama pretrained at ``base_window`` on the
    training books (a downloaded base model is only evaluated). Reused when finished."""
    from lsa.evaluate.perplexity import perplexity
    from lsa.train import Objective, finish, train

    cfg: PretrainConfig = pipe.settings["pretrain"]  # type: ignore[assignment]
    folder = run_dir(cfg.profile, pipe.base_run_id())
    if is_finished(folder):
        return folder
    started = time.time()
    seed_everything(cfg.seed)
    corpus = prepare_corpus(cfg, _base_tokenizer(pipe))
    model = _base_model(pipe, corpus)
    folder.mkdir(parents=True, exist_ok=True)
    corpus.tokenizer.save_pretrained(folder / "tokenizer")
    if cfg.model.source == "scratch":
        summary = train(model, corpus.streams["train"], folder, cfg.optim,
                        Objective(l_train=cfg.model.base_window), cfg.seed,
                        run_config=cfg.to_dict(), progress=progress)
    else:  # a downloaded model is used where it lies (see base_model_path)
        summary = {"steps": 0, "note": f"base model from source {cfg.model.source}"}
    # both windows on the same tokens: eval_max_chunks chunks of 2 x base_window
    ppl = perplexity(model, corpus.streams["validation"],
                     [cfg.model.base_window, 2 * cfg.model.base_window],
                     max_chunks=cfg.eval_max_chunks)
    from lsa.models import count_parameters

    metrics = {"run": "base", "data_source": corpus.source,
               "parameters": count_parameters(model), "vocab_size": len(corpus.tokenizer),
               "tokens": {k: len(v) for k, v in corpus.streams.items()},
               "validation_perplexity": ppl, "train": summary}
    save_metrics(folder, metrics, cfg, started=started)
    finish(folder, summary)
    return folder


def finished_base(pipe: PipelineConfig) -> Path:
    """The base model's run folder; an error that says what to run when it is not finished."""
    profile = pipe.settings["pretrain"].profile  # type: ignore[attr-defined]
    base = run_dir(profile, pipe.base_run_id())
    if not is_finished(base):
        raise FileNotFoundError(f"the base model {base} is not finished: run "
                                f"`python -m lsa pretrain --profile {profile}` first")
    return base


def base_model_path(pipe: PipelineConfig) -> str:
    """Where the base model's weights are: the pretraining run's ``model/`` for scratch, the
    converted SmolLM2 cache, or the configured hub id / folder."""
    from lsa.models import smollm2_folder

    cfg: PretrainConfig = pipe.settings["pretrain"]  # type: ignore[assignment]
    if cfg.model.source == "scratch":
        return str(run_dir(cfg.profile, pipe.base_run_id()) / "model")
    if cfg.model.source == "smollm2":
        return str(smollm2_folder())
    return str(cfg.model.name_or_path)


def load_corpus_for(base_folder: Path, cfg: PretrainConfig) -> Corpus:
    """The corpus tokenized with the base model's own tokenizer (saved in its folder)."""
    from transformers import AutoTokenizer

    return prepare_corpus(cfg, AutoTokenizer.from_pretrained(base_folder / "tokenizer"))


def run_folder(pipe: PipelineConfig, kind: str, name: str) -> tuple[Path, RunConfig]:
    """The folder and configuration of run ``name`` of ``kind`` (finetune or babilong)."""
    cfg = pipe.settings[kind]
    run = cfg.run(name)  # type: ignore[attr-defined]
    run_id = pipe.finetune_run_id(name) if kind == "finetune" else pipe.babilong_run_id(name)
    return run_dir(cfg.profile, run_id), run  # type: ignore[attr-defined]


def start_run(pipe: PipelineConfig, run: RunConfig) -> tuple[Corpus, float]:
    """Seeded start of a run from the finished base model: its corpus and the start time."""
    base = finished_base(pipe)
    started = time.time()
    seed_everything(run.seed)
    return load_corpus_for(base, pipe.settings["pretrain"]), started  # type: ignore[arg-type]


def build_for_run(pipe: PipelineConfig, run: RunConfig, l_train: int):
    """The base model prepared for one run at window ``l_train``: the method's RoPE and
    attention, CLEX module, LoRA adapters (NF4 base weights when configured and a GPU is
    present), with the method settings of ``finetune``. Returns (model, spec)."""
    from lsa.extend import head_dim_of, load_for_method, method_spec
    from lsa.extend.clex import install_clex
    from lsa.train import LoraSettings, apply_lora
    from transformers import AutoConfig

    pcfg: PretrainConfig = pipe.settings["pretrain"]  # type: ignore[assignment]
    fcfg: FinetuneConfig = pipe.settings["finetune"]  # type: ignore[assignment]
    path = base_model_path(pipe)
    base_config = AutoConfig.from_pretrained(path)
    theta = (base_config.rope_parameters or {}).get("rope_theta", 10000.0)
    l0 = pcfg.model.base_window
    spec = method_spec(run.method, l0, l_train, theta, head_dim_of(base_config),
                       abf_theta=fcfg.abf_theta, eabf_skip_layers=fcfg.eabf_skip_layers,
                       s2_group_ratio=fcfg.s2_group_ratio,
                       use_4bit=fcfg.use_4bit and torch.cuda.is_available())
    kwargs: dict[str, Any] = {"dtype": getattr(torch, pcfg.model.dtype)}
    if spec.quantize_4bit:
        from lsa.models import nf4_kwargs

        kwargs.update(nf4_kwargs())
    model = load_for_method(path, run.method, l0, l_train, spec=spec, **kwargs)
    if spec.clex:
        install_clex(model, l0, l_train, hidden=fcfg.clex_hidden,
                     max_factor=fcfg.clex_max_factor, sampling=fcfg.clex_sampling)
    if spec.lora:
        model = apply_lora(model, LoraSettings(r=fcfg.lora_r, alpha=fcfg.lora_alpha,
                                               dropout=fcfg.lora_dropout),
                           quantized=spec.quantize_4bit,
                           gradient_checkpointing=fcfg.optim.gradient_checkpointing)
    return model, spec


def finetune(pipe: PipelineConfig, name: str, progress: bool = True) -> Path:
    """One context-extension run of ``finetune.runs``: base model + method at its ``l_train``,
    trained with CE + alpha * SCE, then perplexity at every evaluation length and the
    misalignment metric on the test books (``misalignment``: the paper's, both contexts at least
    l_train / 2 tokens; ``misalignment_all``: every overlap position; one forward pass per
    sample for both). Reused when finished."""
    from dataclasses import replace

    from lsa.evaluate.perplexity import perplexity
    from lsa.misalign import misalignment_metrics
    from lsa.models import count_parameters
    from lsa.train import Objective, finish, train

    pcfg: PretrainConfig = pipe.settings["pretrain"]  # type: ignore[assignment]
    fcfg: FinetuneConfig = pipe.settings["finetune"]  # type: ignore[assignment]
    folder, run = run_folder(pipe, "finetune", name)
    if is_finished(folder):
        return folder
    corpus, started = start_run(pipe, run)
    l_train = fcfg.l_train_of(run)
    model, spec = build_for_run(pipe, run, l_train)
    objective = Objective(l_train=l_train, alpha=run.alpha,
                          l_extra_setting=run.l_extra_setting, ce_on=run.ce_on,
                          divergence=run.divergence, reduce_terms=fcfg.reduce_terms,
                          detach=fcfg.detach, positions=fcfg.positions,
                          chunk_size=fcfg.chunk_size)
    optim = replace(fcfg.optim, lr=run.lr or (fcfg.lora_lr if spec.lora else fcfg.optim.lr),
                    steps=run.steps or fcfg.optim.steps)
    config = pipe.finetune_run_config(name)
    summary = train(model, corpus.streams["train"], folder, optim, objective, run.seed,
                    run_config=config, progress=progress)
    test = corpus.streams["test"]
    ppl = perplexity(model, test, fcfg.eval_lengths(run), max_chunks=fcfg.eval_max_chunks)
    metric = misalignment_metrics(model, test, l_train, fcfg.metric_samples,
                                  positions=("paper", "all"), seed=run.seed)
    metrics = {"run": name, "method": run.method, "alpha": run.alpha, "seed": run.seed,
               "l_train": l_train, "base_window": pcfg.model.base_window,
               "lr": optim.lr, "steps": optim.steps,
               "trainable_parameters": count_parameters(model, trainable_only=True),
               "data_source": corpus.source, "perplexity": ppl,
               **{key: {"mean": res.mean, "stderr": res.stderr, "n": res.n, "positions": pos}
                  for key, pos, res in (("misalignment", "paper", metric["paper"]),
                                        ("misalignment_all", "all", metric["all"]))},
               "train": summary}
    save_metrics(folder, metrics, config, started=started)
    finish(folder, summary)
    return folder


def load_run(folder: Path) -> dict[str, Any]:
    """A finished run's metrics, config and training log."""
    from lsa.train import read_log

    return {"metrics": read_json(folder / "metrics.json"),
            "config": read_json(folder / "config.json") if (folder / "config.json").exists()
            else None, "log": read_log(folder) if (folder / "metrics.jsonl").exists() else []}


def babilong_run(pipe: PipelineConfig, name: str, progress: bool = True) -> Path:
    """One BABILong run: the base model extended by the configured method to ``l_train``,
    fine-tuned on BABILong samples built from the training books (CE of window B + the answers'
    CE, + alpha * SCE), then accuracy by task x length and the depth grid, on samples built from
    the test books. Reused when finished."""
    from lsa.config import BabilongConfig
    from lsa.data.babi import load_babi
    from lsa.data.babilong import BabilongStream, split_sentences
    from lsa.data.books import load_books
    from lsa.evaluate.babilong import evaluate_grid
    from lsa.train import Objective, finish, train

    pcfg: PretrainConfig = pipe.settings["pretrain"]  # type: ignore[assignment]
    bcfg: BabilongConfig = pipe.settings["babilong"]  # type: ignore[assignment]
    folder, run = run_folder(pipe, "babilong", name)
    if is_finished(folder):
        return folder
    corpus, started = start_run(pipe, run)
    texts, _ = load_books(pcfg.data.books_dir)
    train_hay = [s for book in texts["train"].values() for s in split_sentences(book)]
    test_hay = [s for book in texts["test"].values() for s in split_sentences(book)]
    def short(samples):  # the stories the configuration keeps
        return [s for s in samples if bcfg.max_facts is None or len(s.facts) <= bcfg.max_facts]

    train_samples, sources = [], {}
    for task in bcfg.tasks:
        samples, sources[task] = load_babi(task, "train", None, seed=run.seed)
        train_samples.extend(short(samples)[:bcfg.train_samples])
    stream = BabilongStream(train_samples, train_hay, corpus.streams["train"], corpus.tokenizer,
                            l_train=bcfg.l_train).keep_fitting(int(0.8 * bcfg.l_train))
    model, _ = build_for_run(pipe, run, bcfg.l_train)
    objective = Objective(l_train=bcfg.l_train, alpha=run.alpha, ce_on="b",
                          answer_weight=bcfg.answer_weight)
    config = pipe.babilong_run_config(name)
    summary = train(model, stream, folder, bcfg.optim, objective, run.seed,
                    run_config=config, progress=progress)
    test = {task: short(load_babi(task, "test", None, seed=1000 + run.seed)[0])
            for task in bcfg.tasks}
    lengths = [m * bcfg.l_train for m in bcfg.eval_multiples]
    rows = evaluate_grid(model, corpus.tokenizer, test, test_hay, lengths, bcfg.test_samples,
                         seed=run.seed, max_new_tokens=bcfg.max_new_tokens, scorer=bcfg.scorer,
                         batch_size=bcfg.eval_batch_size)
    depth_rows = evaluate_grid(model, corpus.tokenizer, {bcfg.depth_task: test[bcfg.depth_task]},
                               test_hay, [bcfg.depth_multiple * bcfg.l_train],
                               bcfg.test_samples, seed=run.seed, depths=list(bcfg.depths),
                               max_new_tokens=bcfg.max_new_tokens, scorer=bcfg.scorer,
                               batch_size=bcfg.eval_batch_size)
    trained_on = {t: sum(s.task == t for s in stream.samples) for t in bcfg.tasks}
    metrics = {"run": name, "method": run.method, "alpha": run.alpha, "seed": run.seed,
               "l_train": bcfg.l_train, "babi_source": sources, "train_samples": trained_on,
               "scorer": bcfg.scorer,
               "accuracy": rows, "depth": depth_rows, "train": summary}
    save_metrics(folder, metrics, config, started=started)
    finish(folder, summary)
    return folder


def load_finetuned(pipe: PipelineConfig, name: str):
    """A finished fine-tuning run's model, rebuilt as it was trained (the method's RoPE and
    attention, CLEX module, LoRA adapters: ``build_for_run``) with the weights its ``model/``
    holds, in eval mode on the GPU when there is one; and the base model's tokenizer.
    Returns (model, tokenizer, run)."""
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    folder, run = run_folder(pipe, "finetune", name)
    if not is_finished(folder):
        raise FileNotFoundError(f"the fine-tuning run {folder} is not finished: run "
                                f"`python -m lsa finetune --run {name} --profile {pipe.profile}` "
                                "first")
    fcfg: FinetuneConfig = pipe.settings["finetune"]  # type: ignore[assignment]
    model, spec = build_for_run(pipe, run, fcfg.l_train_of(run))
    files = sorted((folder / "model").glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder / 'model'} holds no .safetensors weights")
    if spec.lora:  # peft saved the adapters (and any modules_to_save) only
        from peft import set_peft_model_state_dict

        lora_missing: set[str] | None = None
        for file in files:
            result = set_peft_model_state_dict(model, load_file(file))
            if result.unexpected_keys:
                raise ValueError(f"{file}: weights the rebuilt model lacks: "
                                 f"{result.unexpected_keys[:5]}")
            missing_here = {k for k in result.missing_keys if "lora_" in k}
            lora_missing = missing_here if lora_missing is None else lora_missing & missing_here
        if lora_missing:
            raise ValueError(f"{folder / 'model'} lacks LoRA weights: {sorted(lora_missing)[:5]}")
    else:
        expected = set(model.state_dict())
        loaded: set[str] = set()
        for file in files:  # shard by shard: one shard in memory at a time
            shard = load_file(file)
            unexpected = sorted(set(shard) - expected)
            if unexpected:
                raise ValueError(f"{file}: weights the rebuilt model lacks: {unexpected[:5]}")
            model.load_state_dict(shard, strict=False)
            loaded.update(shard)
        tied = {"lm_head.weight"} if model.config.tie_word_embeddings else set()
        missing = sorted(expected - loaded - tied)
        if missing:
            raise ValueError(f"{folder / 'model'} lacks weights of the model: {missing[:5]}")
    if torch.cuda.is_available() and not spec.quantize_4bit:  # NF4 weights are placed on load
        model = model.to("cuda")
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(finished_base(pipe) / "tokenizer")
    return model, tokenizer, run


def babilong_evaluate(pipe: PipelineConfig, name: str, progress: bool = True) -> Path:
    """BABILong, evaluate design (gpu-small, paper; the paper's Sec. 5.4): the finished
    fine-tuning run ``name`` answers BABILong samples built from the test books with the
    benchmark's own prompts (``lsa.evaluate.babilong_prompts``), greedy decoding: accuracy by
    task x ``eval_lengths``, and ``depth_task`` by ``eval_depths`` at ``eval_depth_length``.
    Lengths (context + question) are measured in the evaluated model's tokens; every evaluated
    run sees the same samples. Its folder ``babilong-eval_<name>-<digest>`` follows the run
    layout (``train_summary.json`` last, with no training); reused when finished."""
    from lsa.config import BabilongConfig
    from lsa.data.babi import load_babi
    from lsa.data.babilong import split_sentences
    from lsa.evaluate.babilong import evaluate_grid
    from lsa.evaluate.babilong_prompts import locate_prompts, read_prompts
    from lsa.files import write_json
    from lsa.train import finish

    pcfg: PretrainConfig = pipe.settings["pretrain"]  # type: ignore[assignment]
    bcfg: BabilongConfig = pipe.settings["babilong"]  # type: ignore[assignment]
    folder = run_dir(bcfg.profile, pipe.babilong_eval_run_id(name))
    if is_finished(folder):
        return folder
    prompts = read_prompts(locate_prompts(bcfg.prompts_file), bcfg.tasks)  # before any model
    started = time.time()
    seed_everything(pipe.seed)
    model, tokenizer, run = load_finetuned(pipe, name)
    texts, books_source = book_texts(pcfg, ("test",))
    haystack = [s for book in texts["test"].values() for s in split_sentences(book)]
    test, sources = {}, {}
    for task in bcfg.tasks:
        test[task], sources[task] = load_babi(task, "test", None, seed=1000 + pipe.seed)

    def grid(task: str, lengths: list[int], depths: list[float] | None) -> list[dict]:
        return evaluate_grid(model, tokenizer, {task: test[task]}, haystack, lengths,
                             bcfg.test_samples, seed=pipe.seed, depths=depths,
                             max_new_tokens=bcfg.eval_max_new_tokens,
                             template=prompts.template_for(task, bcfg.prompt_parts),
                             scorer=bcfg.scorer, batch_size=bcfg.eval_batch_size,
                             progress=progress)

    rows = [row for task in bcfg.tasks for row in grid(task, list(bcfg.eval_lengths), None)]
    depth_rows = grid(bcfg.depth_task, [bcfg.eval_depth_length], list(bcfg.eval_depths))
    fcfg: FinetuneConfig = pipe.settings["finetune"]  # type: ignore[assignment]
    config = pipe.babilong_eval_run_config(name)
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "config.json", config)
    metrics = {"run": name, "design": "evaluate", "finetune_run": pipe.finetune_run_id(name),
               "method": run.method, "alpha": run.alpha, "seed": run.seed,
               "l_train": fcfg.l_train_of(run), "base_window": pcfg.model.base_window,
               "babi_source": sources, "books_source": books_source,
               "prompts": prompts.provenance(bcfg.prompt_parts),
               "max_new_tokens": bcfg.eval_max_new_tokens, "accuracy": rows, "depth": depth_rows}
    save_metrics(folder, metrics, config, started=started)
    finish(folder, {"steps": 0, "evaluated": pipe.finetune_run_id(name),
                    "wall_time_s": round(time.time() - started, 2)})
    return folder
