"""The jobs that fill run folders (``lsa.runs``): one recipe per kind of run.

- ``pretrain``: the profile's base model (``base``);
- ``finetune``: one context-extension run, CE + alpha * SCE (``finetune``);
- ``babilong_train``: BABILong, train design: the base model fine-tuned on BABILong samples
  (``babilong``; mini, smoke);
- ``babilong_evaluate``: BABILong, evaluate design: a finished finetune run answers the
  benchmark's prompts (``babilong-eval``; gpu-small, paper);
- ``longbench``: LongBench-E, a finished finetune run answers the benchmark's prompts
  (``longbench``; gpu-small, paper; smoke on a fixture);
- ``probe``: a model not fine-tuned on books here (the base model, with or without a RoPE
  setting; a BABILong run; a hub model) measured by the fine-tuning runs' protocol,
  ``lm_metrics`` (``probe``; the Section 4.1 population);
- ``synthetic``: Section 3's grid of small regression models (``synthetic``).

Each takes the resolved configuration and a ``Run`` from ``runs_of(pipe)``, returns the run's
folder, and reuses a finished one. ``ensure`` makes a run and whatever it needs, in order (the
notebooks run alone use it; the pipeline makes each run a job of its own:
``python -m lsa <kind> --config-file ... --run NAME --expect-id ID``).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import torch

from lsa import paths
from lsa.config import PipelineConfig
from lsa.data.corpus import Corpus, book_texts, load_corpus_for, prepare_corpus
from lsa.files import remove_partial_writes, save_metrics, write_json
from lsa.markers import mark_finished
from lsa.runs import Run, runs_of
from lsa.seeding import seed_everything


def pretrain(pipe: PipelineConfig, run: Run | None = None, progress: bool = True) -> Path:
    """The base model of the profile: a scratch Llama pretrained at ``base_window`` on the
    training books (a downloaded base model is only evaluated). Reused when finished."""
    from lsa.evaluate.longrange import copy_retrieval
    from lsa.evaluate.perplexity import perplexity
    from lsa.models import base_tokenizer, build_base_model, count_parameters
    from lsa.train import Objective, train

    run = run or runs_of(pipe).base
    cfg = replace(pipe.pretrain, seed=run.identity["seed"])  # ablation.base_seeds: another
    folder = run.folder
    if run.finished:
        return folder
    started = time.time()
    seed_everything(cfg.seed)
    corpus = prepare_corpus(cfg.data, base_tokenizer(pipe), window=cfg.model.base_window)
    model = build_base_model(pipe, corpus.tokenizer, seed=cfg.seed)
    folder.mkdir(parents=True, exist_ok=True)
    corpus.tokenizer.save_pretrained(folder / "tokenizer")
    if cfg.model.source == "scratch":
        summary = train(model, corpus.streams["train"], folder, cfg.optim,
                        Objective(l_train=cfg.model.base_window), cfg.seed,
                        run_config=run.identity, progress=progress)
    else:  # a downloaded model is used where it lies (see lsa.models.base_model_path)
        summary = {"steps": 0, "note": f"base model from source {cfg.model.source}"}
    # both windows on the same tokens: eval_max_chunks chunks of 2 x base_window
    ppl = perplexity(model, corpus.streams["validation"],
                     [cfg.model.base_window, 2 * cfg.model.base_window],
                     max_chunks=cfg.eval_max_chunks)
    # the premise gates' numbers (lsa.gates): the copy probes from 1x to the longest length the
    # fine-tuning runs are evaluated at, with the control (the far occurrence replaced)
    long_range = copy_retrieval(model, corpus.streams["test"], base_probe_lengths(pipe),
                                pipe.finetune.copy_probes, cfg.data.recurrence_span,
                                pipe.finetune.metric_seed, control=True)
    metrics = {"run": run.name, "data_source": corpus.source, "long_range": long_range,
               "parameters": count_parameters(model), "vocab_size": len(corpus.tokenizer),
               "tokens": {k: len(v) for k, v in corpus.streams.items()},
               "validation_perplexity": ppl, "train": summary}
    save_metrics(folder, metrics, run.identity, started=started)
    mark_finished(folder, summary)
    return folder


def base_probe_lengths(pipe: PipelineConfig) -> list[int]:
    """The windows the base model's copy probes use: base_window doubled up to the longest
    fine-tuning evaluation length."""
    l0 = pipe.pretrain.model.base_window
    longest = max(pipe.finetune.eval_multiples) * pipe.finetune.l_train
    lengths = [l0]
    while lengths[-1] * 2 <= longest:
        lengths.append(lengths[-1] * 2)
    return lengths


def _require_finished(pipe: PipelineConfig, runs: tuple[Run, ...]) -> None:
    """An error that says what to run first when a run's inputs are not finished."""
    for need in runs:
        if not need.finished:
            how = " ".join(need.command)
            raise FileNotFoundError(f"{need.describe()} {need.folder} is not finished: run "
                                    f"`python -m lsa {how} --profile {pipe.profile}` first")


def _start(pipe: PipelineConfig, run: Run) -> tuple[Corpus, float]:
    """Seeded start of a run from the finished base model: its corpus and the start time."""
    _require_finished(pipe, run.needs)
    started = time.time()
    seed_everything(run.spec.seed)
    window = (pipe.babilong.l_train if run.kind == "babilong"
              else pipe.finetune.l_train_of(run.spec))
    return load_corpus_for(run.base.folder, pipe.pretrain.data, window), started


def lm_metrics(pipe: PipelineConfig, model, corpus: Corpus, l_train: int, lengths: list[int]
               ) -> dict:
    """The protocol every fine-tuning run and probe is measured by, on the test books, with
    ``finetune.metric_seed`` (every model sees the same samples): ``perplexity`` at ``lengths``
    (all on the same tokens; beyond ``l_train`` also the NLL of the targets whose context is
    longer than ``l_train``, ``nll_beyond``); ``long_range`` at ``lengths``: the copy probes
    (``lsa.evaluate.longrange``: NLL of a span whose earlier occurrence lies in the far half of
    the window, and retrieval); ``train_ce``: the CE at ``l_train`` on the training books (the
    training loss, measured alike for models not trained here); and from one forward pass per
    sample at ``l_train`` (``lsa.alignment.alignment_measures``, ``l_extra`` drawn per sample)
    ``misalignment`` (the paper's: SCE where both contexts are at least l_train / 2 tokens),
    ``misalignment_all`` (every overlap position), its parts ``jeffreys`` and ``entropy``,
    ``l2``, ``tv`` and ``top1_change`` over the paper's positions, and ``last_position``: per
    sample, ``l_extra`` and the measures where A's context is ``l_train`` and B's
    ``l_train - l_extra``."""
    from lsa.alignment import alignment_measures
    from lsa.evaluate.longrange import copy_retrieval
    from lsa.evaluate.perplexity import perplexity

    fcfg, seed, test = pipe.finetune, pipe.finetune.metric_seed, corpus.streams["test"]
    ppl = perplexity(model, test, lengths, max_chunks=fcfg.eval_max_chunks, beyond=l_train)
    train_ce = perplexity(model, corpus.streams["train"], [l_train],
                          max_chunks=fcfg.eval_max_chunks)[l_train]
    long_range = copy_retrieval(model, test, lengths, fcfg.copy_probes,
                                pipe.pretrain.data.recurrence_span, seed)
    res = alignment_measures(model, test, l_train, fcfg.metric_samples, seed=seed,
                             batch_size=1)

    def summary(r, positions: str) -> dict:
        return {"mean": r.mean, "stderr": r.stderr, "n": r.n, "positions": positions}

    return {"perplexity": ppl, "long_range": long_range,
            "train_ce": {"nll": train_ce["nll"], "tokens": train_ce["tokens"]},
            "misalignment": summary(res.paper["sce"], "paper"),
            "misalignment_all": summary(res.all, "all"),
            **{m: summary(res.paper[m], "paper") for m in ("jeffreys", "entropy", "l2", "tv",
                                                           "top1_change")},
            "last_position": res.by_sample}


def finetune(pipe: PipelineConfig, run: Run, progress: bool = True) -> Path:
    """One context-extension run: base model + method at its ``l_train``, trained with
    CE + alpha * SCE, then measured on the test books (``lm_metrics``: perplexity at every
    evaluation length, the misalignment metric and its parts). Reused when finished."""
    from lsa.models import build_for_run, count_parameters
    from lsa.train import Objective, train

    pcfg, fcfg, spec = pipe.pretrain, pipe.finetune, run.spec
    folder = run.folder
    if run.finished:
        return folder
    corpus, started = _start(pipe, run)
    l_train = fcfg.l_train_of(spec)
    model, method = build_for_run(pipe, spec, l_train, base=run.base)
    objective = Objective.for_run(spec, fcfg, l_train)
    optim = replace(fcfg.optim, lr=spec.lr or (fcfg.lora_lr if method.lora else fcfg.optim.lr),
                    steps=spec.steps or fcfg.optim.steps)
    # the stream it trains on; measured (lm_metrics) on the recurring one, as every run is
    stream = (corpus.streams["train"] if spec.stream == "recurring" else load_corpus_for(
        run.base.folder, replace(pcfg.data, recurrence=0.0), l_train).streams["train"])
    summary = train(model, stream, folder, optim, objective, spec.seed,
                    run_config=run.identity, progress=progress)
    measured = lm_metrics(pipe, model, corpus, l_train, fcfg.eval_lengths(spec))
    metrics = {"run": run.name, "method": spec.method, "alpha": spec.alpha, "seed": spec.seed,
               "stream": spec.stream, "l_train": l_train, "base_window": pcfg.model.base_window,
               "lr": optim.lr, "steps": optim.steps,
               "trainable_parameters": count_parameters(model, trainable_only=True),
               "data_source": corpus.source, **measured, "train": summary}
    save_metrics(folder, metrics, run.identity, started=started)
    mark_finished(folder, summary)
    return folder


def babilong_train(pipe: PipelineConfig, run: Run, progress: bool = True) -> Path:
    """BABILong, train design: the base model extended by the configured method to
    ``l_train``, fine-tuned on BABILong samples built from the training books (CE of window B +
    the answers' CE, + alpha * SCE), then accuracy by task x length and the depth grid, on
    samples built from the test books. Reused when finished."""
    from lsa.data.babi import load_babi
    from lsa.data.babilong import BabilongStream, split_sentences
    from lsa.evaluate.babilong import evaluate_grid
    from lsa.models import build_for_run
    from lsa.train import Objective, train

    pcfg, bcfg, spec = pipe.pretrain, pipe.babilong, run.spec
    folder = run.folder
    if run.finished:
        return folder
    corpus, started = _start(pipe, run)
    texts, _ = book_texts(pcfg.data, ("train", "test"))  # the corpus's own book source
    train_hay = [s for book in texts["train"].values() for s in split_sentences(book)]
    test_hay = [s for book in texts["test"].values() for s in split_sentences(book)]

    def short(samples):  # the stories the configuration keeps
        return [s for s in samples if bcfg.max_facts is None or len(s.facts) <= bcfg.max_facts]

    train_samples, sources = [], {}
    for task in bcfg.tasks:
        samples, sources[task] = load_babi(task, "train", None, seed=spec.seed)
        train_samples.extend(short(samples)[:bcfg.train_samples])
    # the test files too are read before any training: a bad file stops the job at once
    test = {task: short(load_babi(task, "test", None, seed=1000 + spec.seed)[0])
            for task in bcfg.tasks}
    stream = BabilongStream(train_samples, train_hay, corpus.streams["train"], corpus.tokenizer,
                            l_train=bcfg.l_train).keep_fitting(int(0.8 * bcfg.l_train))
    model, _ = build_for_run(pipe, spec, bcfg.l_train, base=run.base)
    objective = Objective.for_run(spec, pipe.finetune, bcfg.l_train, ce_on="b",
                                  answer_weight=bcfg.answer_weight)
    summary = train(model, stream, folder, bcfg.optim, objective, spec.seed,
                    run_config=run.identity, progress=progress)
    lengths = [m * bcfg.l_train for m in bcfg.eval_multiples]
    rows = evaluate_grid(model, corpus.tokenizer, test, test_hay, lengths, bcfg.test_samples,
                         seed=spec.seed, max_new_tokens=bcfg.max_new_tokens, scorer=bcfg.scorer,
                         batch_size=bcfg.eval_batch_size)
    depth_rows = evaluate_grid(model, corpus.tokenizer, {bcfg.depth_task: test[bcfg.depth_task]},
                               test_hay, [bcfg.depth_multiple * bcfg.l_train],
                               bcfg.test_samples, seed=spec.seed, depths=list(bcfg.depths),
                               max_new_tokens=bcfg.max_new_tokens, scorer=bcfg.scorer,
                               batch_size=bcfg.eval_batch_size)
    trained_on = {t: sum(s.task == t for s in stream.samples) for t in bcfg.tasks}
    metrics = {"run": run.name, "method": spec.method, "alpha": spec.alpha, "seed": spec.seed,
               "l_train": bcfg.l_train, "babi_source": sources, "train_samples": trained_on,
               "scorer": bcfg.scorer,
               "accuracy": rows, "depth": depth_rows, "train": summary}
    save_metrics(folder, metrics, run.identity, started=started)
    mark_finished(folder, summary)
    return folder


def load_finetuned(pipe: PipelineConfig, run: Run):
    """A finished fine-tuning (or BABILong) run's model, rebuilt as it was trained (the
    method's RoPE and attention, CLEX module, LoRA adapters: ``lsa.models.build_for_run``)
    with the weights its ``model/`` holds, in eval mode on the GPU when there is one; and the
    base model's tokenizer. Returns (model, tokenizer)."""
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    from lsa.models import build_for_run

    folder = run.folder
    if not run.finished:
        raise FileNotFoundError(f"the fine-tuning run {folder} is not finished: run "
                                f"`python -m lsa finetune --run {run.name} --profile "
                                f"{pipe.profile}` first")
    l_train = (pipe.babilong.l_train if run.kind == "babilong"
               else pipe.finetune.l_train_of(run.spec))
    model, method = build_for_run(pipe, run.spec, l_train, base=run.base)
    files = sorted((folder / "model").glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder / 'model'} holds no .safetensors weights")
    if method.lora:  # peft saved the adapters (and any modules_to_save) only
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
    if torch.cuda.is_available() and not method.quantize_4bit:  # NF4 weights: placed on load
        model = model.to("cuda")
    model.eval()
    base = run.base or runs_of(pipe).base
    _require_finished(pipe, (base,))
    tokenizer = AutoTokenizer.from_pretrained(base.folder / "tokenizer")
    return model, tokenizer


def babilong_evaluate(pipe: PipelineConfig, run: Run, progress: bool = True) -> Path:
    """BABILong, evaluate design (gpu-small, paper; the paper's Sec. 5.4): the finished
    fine-tuning run ``run.needs[0]`` answers BABILong samples built from the test books with
    the benchmark's own prompts (``lsa.evaluate.babilong_prompts``), greedy decoding: accuracy
    by task x ``eval_lengths``, and ``depth_task`` by ``eval_depths`` at
    ``eval_depth_length``. Lengths (context + question) are measured in the evaluated model's
    tokens; every evaluated run sees the same samples. Its folder follows the run layout
    (``train_summary.json`` last, with no training); reused when finished."""
    from lsa.data.babi import load_babi
    from lsa.data.babilong import split_sentences
    from lsa.evaluate.babilong import evaluate_grid
    from lsa.evaluate.babilong_prompts import locate_prompts, read_prompts

    pcfg, bcfg, fcfg = pipe.pretrain, pipe.babilong, pipe.finetune
    (finetuned,) = run.needs
    folder = run.folder
    if run.finished:
        return folder
    prompts = read_prompts(locate_prompts(bcfg.prompts_file), bcfg.tasks)  # before any model
    test, sources = {}, {}
    for task in bcfg.tasks:
        test[task], sources[task] = load_babi(task, "test", None, seed=1000 + pipe.seed)
    texts, books_source = book_texts(pcfg.data, ("test",))
    started = time.time()
    seed_everything(pipe.seed)
    model, tokenizer = load_finetuned(pipe, finetuned)
    spec = finetuned.spec
    haystack = [s for book in texts["test"].values() for s in split_sentences(book)]

    def grid(task: str, lengths: list[int], depths: list[float] | None) -> list[dict]:
        return evaluate_grid(model, tokenizer, {task: test[task]}, haystack, lengths,
                             bcfg.test_samples, seed=pipe.seed, depths=depths,
                             max_new_tokens=bcfg.eval_max_new_tokens,
                             template=prompts.template_for(task, bcfg.prompt_parts),
                             scorer=bcfg.scorer, batch_size=bcfg.eval_batch_size,
                             progress=progress)

    rows = [row for task in bcfg.tasks for row in grid(task, list(bcfg.eval_lengths), None)]
    depth_rows = grid(bcfg.depth_task, [bcfg.eval_depth_length], list(bcfg.eval_depths))
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "config.json", run.identity)
    metrics = {"run": run.name, "design": "evaluate", "finetune_run": finetuned.id,
               "method": spec.method, "alpha": spec.alpha, "seed": spec.seed,
               "l_train": fcfg.l_train_of(spec), "base_window": pcfg.model.base_window,
               "babi_source": sources, "books_source": books_source,
               "prompts": prompts.provenance(bcfg.prompt_parts),
               "max_new_tokens": bcfg.eval_max_new_tokens, "accuracy": rows, "depth": depth_rows}
    save_metrics(folder, metrics, run.identity, started=started)
    mark_finished(folder, {"steps": 0, "evaluated": finetuned.id,
                           "wall_time_s": round(time.time() - started, 2)})
    return folder


def longbench_folder(pipe: PipelineConfig) -> Path:
    """Where the LongBench-E files are: ``longbench.data_dir``, ``$LSA_DATA_DIR/longbench``,
    ``data/longbench`` (``python -m lsa fetch longbench``), or
    (``data_dir: fixture``) the tiny fixture ``lsa.evaluate.longbench.write_fixture`` writes
    under ``data/``. A clear error names what is missing."""
    from lsa.evaluate.longbench import data_files, data_folder, write_fixture

    if pipe.longbench.data_dir == "fixture":
        return write_fixture(paths.CACHE / "longbench-fixture")
    folder = data_folder(pipe.longbench)
    missing = [p.name for p in data_files(pipe.longbench) if not p.exists()]
    if missing:
        raise FileNotFoundError(f"{folder}: LongBench-E files missing: {', '.join(missing)} "
                                "(python -m lsa fetch longbench puts LongBench's data/*_e.jsonl "
                                "and config/*.json there; or set longbench.data_dir, or "
                                "switch it off: longbench.enabled: false)")
    return folder


def longbench_evaluate(pipe: PipelineConfig, run: Run, progress: bool = True) -> Path:
    """LongBench-E (Tables 2-3): the finished fine-tuning run ``run.needs[0]`` answers the
    benchmark's prompts (greedy, the benchmark's answer lengths, prompts longer than
    ``max_length`` tokens cut in the middle) and is scored by the official metrics per dataset
    and length bucket (0-4k / 4-8k / 8k+ words); the LongBench-E score and each bucket's are
    unweighted means over datasets. The files' checksums are recorded. Reused when finished."""
    import hashlib

    from lsa.evaluate.longbench import bucket_scores, evaluate

    lcfg, fcfg = pipe.longbench, pipe.finetune
    (finetuned,) = run.needs
    folder = run.folder
    if run.finished:
        return folder
    data = longbench_folder(pipe)  # before any model: missing files stop the job at once
    checksums = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:16]
                 for p in sorted(data.glob("*.json*"))
                 if p.name.endswith(".json") or p.stem[:-2] in lcfg.datasets}
    started = time.time()
    seed_everything(pipe.seed)
    model, tokenizer = load_finetuned(pipe, finetuned)
    # predictions in LongBench's own form, kept in the run folder and reused by a restart
    result = evaluate(model, tokenizer, data, data, lcfg.max_length, list(lcfg.datasets),
                      lcfg.limit, pred_dir=folder / "pred", batch_size=lcfg.batch_size)
    spec = finetuned.spec
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "config.json", run.identity)
    metrics = {"run": run.name, "finetune_run": finetuned.id, "method": spec.method,
               "alpha": spec.alpha, "seed": spec.seed, "l_train": fcfg.l_train_of(spec),
               "data_dir": str(data), "files": checksums, **result,
               "buckets": bucket_scores(result["per_dataset"])}
    save_metrics(folder, metrics, run.identity, started=started)
    mark_finished(folder, {"steps": 0, "evaluated": finetuned.id,
                           "wall_time_s": round(time.time() - started, 2)})
    return folder


def probed_base(run: Run) -> Run | None:
    """The base model a probe measures (the pipeline's or a further one: the study's), or None
    for a probe of another model."""
    return next((n for n in run.needs if n.kind == "base" and n.id == run.identity["model"]),
                None)


def _probe_model(pipe: PipelineConfig, run: Run, tokenizer):
    """The model a probe measures: the base model (with its RoPE setting, when the probe has
    one), a finished BABILong run, or a hub model that shares the base model's tokenizer."""
    from lsa.config import RunConfig
    from lsa.models import build_for_run, hub_path, load_pretrained

    source, rope = run.identity["model"], run.identity["rope"]
    base = probed_base(run)
    if base is not None:
        method = rope["method"] if rope else "none"
        window = pipe.pretrain.model.base_window
        model, _ = build_for_run(pipe, RunConfig(name=run.name, method=method),
                                 window * (rope["factor"] if rope else 1), base=base)
    elif run.needs[0].kind != "base":  # a finished BABILong run
        model, _ = load_finetuned(pipe, run.needs[0])
    else:  # a hub id or folder
        model, theirs = load_pretrained(hub_path(source, pipe.population.revisions.get(source)),
                                        dtype=getattr(torch, pipe.pretrain.model.dtype))
        if theirs.get_vocab() != tokenizer.get_vocab():
            raise ValueError(f"population.models: {source} has another tokenizer than the base "
                             "model; the protocol scores every model on the same tokens")
    if torch.cuda.is_available() and next(model.parameters()).device.type != "cuda":
        model = model.to("cuda")
    return model.eval()


def loaded_from(model) -> list[Path]:
    """The files of the local folder ``model`` was loaded from (its ``name_or_path``:
    SmolLM2's cached copy under ``data/``), [] for a model built here: what a run read from
    outside its folder, whose checksums its marker records (``lsa.markers.mark_finished``)."""
    name = getattr(model, "name_or_path", "") or ""
    folder = Path(name)
    return sorted(p for p in folder.iterdir() if p.is_file()) if name and folder.is_dir() else []


def reference_probe(pipe: PipelineConfig, run: Run) -> Path:
    """A reference model (``population.reference_models``: SmolLM2-135M from its wheel),
    forward only: the misalignment and its parts at ``reference_window`` on its own tokens of
    the test books, with ``finetune.metric_seed`` and ``l_extra`` drawn per sample. Not a
    Table 1 model (other tokens); the decomposition beside the scratch models'."""
    from lsa.alignment import alignment_measures
    from lsa.data.tokens import TokenStream
    from lsa.models import count_parameters, load_smollm2

    folder, ref = run.folder, run.identity["reference"]
    started = time.time()
    seed_everything(pipe.seed)
    model, tokenizer = load_smollm2()
    if torch.cuda.is_available():
        model = model.to("cuda")
    texts, source = book_texts(pipe.pretrain.data, ("test",))
    stream = TokenStream.build(tokenizer, texts["test"], paths.CACHE / "tokens",
                               f"test-{run.identity['model']}")
    res = alignment_measures(model.eval(), stream, ref["window"], ref["samples"],
                             seed=ref["metric_seed"], batch_size=1)
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "config.json", run.identity)
    metrics = {"run": run.name, "model": run.identity["model"], "window": ref["window"],
               "parameters": count_parameters(model), "data_source": source,
               "tokens": len(stream),
               **{m: {"mean": r.mean, "stderr": r.stderr, "n": r.n, "positions": "paper"}
                  for m, r in (("misalignment", res.paper["sce"]),
                               *((k, res.paper[k]) for k in ("jeffreys", "entropy", "l2", "tv",
                                                             "top1_change")))}}
    save_metrics(folder, metrics, run.identity, started=started)
    mark_finished(folder, {"steps": 0, "probed": run.identity["model"],
                           "wall_time_s": round(time.time() - started, 2)},
                  inputs=loaded_from(model))
    return folder


def probe(pipe: PipelineConfig, run: Run, progress: bool = True) -> Path:
    """A probe of the Section 4.1 population: a model measured by the fine-tuning runs'
    protocol (``lm_metrics`` at ``finetune.l_train``, its evaluation lengths and sample
    counts); a reference model's decomposition (``reference_probe``). Reused when finished."""
    from lsa.models import count_parameters

    folder = run.folder
    if run.finished:
        return folder
    if "reference" in run.identity:
        return reference_probe(pipe, run)
    _require_finished(pipe, run.needs)
    started = time.time()
    seed_everything(pipe.seed)
    fcfg = pipe.finetune
    # the training stream as the fine-tuning runs see it at l_train: train_ce is comparable
    corpus = load_corpus_for((probed_base(run) or runs_of(pipe).base).folder,
                             pipe.pretrain.data, fcfg.l_train)
    model = _probe_model(pipe, run, corpus.tokenizer)
    measured = lm_metrics(pipe, model, corpus, fcfg.l_train,
                          [m * fcfg.l_train for m in fcfg.eval_multiples])
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "config.json", run.identity)
    metrics = {"run": run.name, "model": run.identity["model"], "rope": run.identity["rope"],
               "l_train": fcfg.l_train, "base_window": pipe.pretrain.model.base_window,
               "parameters": count_parameters(model), "data_source": corpus.source, **measured}
    save_metrics(folder, metrics, run.identity, started=started)
    mark_finished(folder, {"steps": 0, "probed": run.identity["model"],
                           "wall_time_s": round(time.time() - started, 2)})
    return folder


def synthetic(pipe: PipelineConfig, run: Run, progress: bool = True) -> Path:
    """Section 3's grid of small regression models, trained and tested (``lsa.synthetic``)."""
    from lsa.synthetic import make

    return make(pipe.synthetic, run, progress=progress)


JOBS = {"base": pretrain, "finetune": finetune, "babilong": babilong_train,
        "babilong-eval": babilong_evaluate, "probe": probe, "longbench": longbench_evaluate,
        "synthetic": synthetic}


def run_job(pipe: PipelineConfig, run: Run, progress: bool = True) -> Path:
    """The job of ``run``'s kind (its inputs must be finished). A run that is not finished
    starts again (from its checkpoint, when it has one) without the temporary files of writes
    an earlier, killed attempt left."""
    if not run.finished and run.folder.is_dir():
        for stale in remove_partial_writes(run.folder):
            print(f"removed {stale.name}, a write cut by an earlier attempt")
    return JOBS[run.kind](pipe, run, progress=progress)


def ensure(pipe: PipelineConfig, run: Run, progress: bool = True) -> Path:
    """``run`` and, first, every run it needs that is not finished yet, as the pipeline makes
    them: a finished one whose files no longer verify is made again, never read
    (``lsa.runs.Run.unmark_if_broken``)."""
    for need in run.needs:
        ensure(pipe, need, progress)
    problems = run.unmark_if_broken()
    if problems:
        print(f"{run.describe()} ({run.id}) is made again, its files do not verify: "
              + "; ".join(problems))
    return run.folder if run.finished else run_job(pipe, run, progress)
