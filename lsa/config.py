"""Configuration: one dataclass per section, strict loading from ``config/config.yaml``.

Importing this module must stay cheap (the Snakefile imports it): no torch, no numpy.

Every error names the key, the value it got and what is allowed, and is raised before any
compute starts::

    >>> SyntheticConfig.from_dict({"steps": -1})
    Traceback (most recent call last):
    lsa.config.ConfigError: synthetic.steps = -1: must be >= 1
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml

PROFILES = ("smoke", "mini", "gpu-small", "paper")


class ConfigError(ValueError):
    """Invalid configuration: unknown key, wrong type or value out of range."""


# ---------------------------------------------------------------------------------------------
# strict conversion of plain YAML values into typed dataclass fields


def _type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin in (list, tuple):
        args = get_args(tp)
        return f"a list of {_type_name(args[0])}" if args else "a list"
    if origin is dict:
        return "a mapping"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp))
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def _coerce(key: str, value: Any, tp: Any) -> Any:
    """Return ``value`` as type ``tp`` or raise ConfigError naming ``key``."""
    origin = get_origin(tp)
    bad = ConfigError(f"{key} = {value!r}: must be {_type_name(tp)}")
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        for arg in get_args(tp):
            try:
                return _coerce(key, value, arg)
            except ConfigError:
                continue
        raise bad
    if tp is type(None):
        if value is None:
            return None
        raise bad
    if origin is Literal:
        if value in get_args(tp):
            return value
        raise bad
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise bad
        (arg,) = get_args(tp)[:1] or (Any,)
        items = [_coerce(f"{key}[{i}]", v, arg) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise bad
        return dict(value)
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise bad
        return tp.from_dict(value, prefix=key)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise bad
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise bad
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise bad
    if tp is str:
        if isinstance(value, str):
            return value
        raise bad
    raise TypeError(f"unsupported config type {tp!r} for {key}")


class StrictConfig:
    """Mixin for dataclasses: strict ``from_dict`` and ``to_dict``; ranges in ``validate``."""

    _section: typing.ClassVar[str] = ""

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None = None, prefix: str | None = None):
        data = dict(data or {})
        prefix = prefix if prefix is not None else cls._section
        hints = typing.get_type_hints(cls)
        names = cls.field_names()
        unknown = sorted(set(data) - set(names))
        if unknown:
            where = f"{prefix}." if prefix else ""
            raise ConfigError(
                f"unknown key {where}{unknown[0]} (value {data[unknown[0]]!r}); "
                f"allowed keys: {', '.join(names)}"
            )
        kwargs = {}
        defaults = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        for name in names:
            if name in data:
                key = f"{prefix}.{name}" if prefix else name
                value = data[name]
                factory = defaults[name].default_factory
                if isinstance(value, dict) and dataclasses.is_dataclass(hints[name]) and \
                        factory is not dataclasses.MISSING:
                    # a partial mapping overrides the field's own default, key by key
                    value = _merge(factory().to_dict(), value)
                kwargs[name] = _coerce(key, value, hints[name])
        try:
            return cls(**kwargs)  # type: ignore[call-arg]
        except ConfigError as err:
            if prefix and prefix != cls._section:
                raise ConfigError(f"{prefix}: {err}") from None
            raise

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:  # overridden by sections with range rules
        pass

    def _fail(self, name: str, message: str) -> None:
        key = f"{self._section}.{name}" if self._section else name
        raise ConfigError(f"{key} = {getattr(self, name)!r}: {message}")

    def _at_least(self, name: str, low: float) -> None:
        if getattr(self, name) < low:
            self._fail(name, f"must be >= {low}")

    def _in_range(self, name: str, low: float, high: float) -> None:
        value = getattr(self, name)
        if not low <= value <= high:
            self._fail(name, f"must be in [{low}, {high}]")

    def _non_empty_unique(self, name: str) -> None:
        value = getattr(self, name)
        if len(value) == 0:
            self._fail(name, "must not be empty")
        if len(set(value)) != len(value):
            self._fail(name, "must not repeat an entry")

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name))
                for f in dataclasses.fields(self)}  # type: ignore[arg-type]


def _plain(value: Any) -> Any:
    if isinstance(value, StrictConfig):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------------------------
# Section 3: the synthetic study

Task = Literal["mean", "mean_uniform", "length", "sum"]
Encoding = Literal["nope", "learned", "sinusoidal", "rope", "alibi"]
OutRep = Literal["identity", "sqrt", "log", "inv_sqrt"]


@dataclass
class SyntheticConfig(StrictConfig):
    """Sec. 3 / Fig. 1: regression on binary sequences, train short, test long."""

    _section: typing.ClassVar[str] = "synthetic"

    profile: str = "smoke"
    seed: int = 0
    tasks: list[Task] = field(default_factory=lambda: ["mean", "mean_uniform", "length", "sum"])
    encodings: list[Encoding] = field(
        default_factory=lambda: ["nope", "learned", "sinusoidal", "rope", "alibi"]
    )
    # OutRep is run for these tasks x transforms x encodings (identity is always included)
    outrep_tasks: list[Task] = field(default_factory=lambda: ["length", "sum"])
    outrep_transforms: list[OutRep] = field(default_factory=lambda: ["sqrt", "log", "inv_sqrt"])
    outrep_encodings: list[Encoding] = field(default_factory=lambda: ["nope"])
    seeds: int = 1
    train_min_len: int = 1
    train_max_len: int = 10
    test_max_len: int = 50
    d_model: int = 32
    n_layers: int = 2
    n_heads: int = 4
    steps: int = 150
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.0
    test_samples: int = 64
    workers: int = 1

    def validate(self) -> None:
        if self.profile not in PROFILES:
            self._fail("profile", f"must be one of {', '.join(PROFILES)}")
        for name in ("tasks", "encodings", "outrep_tasks", "outrep_transforms", "outrep_encodings"):
            self._non_empty_unique(name)
        for name in ("seeds", "train_min_len", "d_model", "n_layers", "n_heads", "steps",
                     "batch_size", "test_samples", "workers"):
            self._at_least(name, 1)
        self._at_least("seed", 0)
        self._at_least("weight_decay", 0.0)
        if not self.lr > 0:
            self._fail("lr", "must be > 0")
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

    books_dir: str | None = None        # a folder of .txt books; else LSA_DATA_DIR, else npm
    books_source: Literal["local", "hub"] = "local"
    hub_dataset: str = "emozilla/pg19"  # profile paper, books_source: hub
    hub_books: list[int] = field(default_factory=lambda: [200, 5, 10])  # train, val, test
    vocab_size: int = 1024              # byte-level BPE of the scratch models

    def validate(self) -> None:
        self._at_least("vocab_size", 300)
        if len(self.hub_books) != 3 or min(self.hub_books) < 1:
            self._fail("hub_books", "must be three counts >= 1 (train, validation, test)")


@dataclass
class ModelConfig(StrictConfig):
    """The base model: a scratch Llama pretrained by the pipeline, SmolLM2, or a hub model."""

    _section: typing.ClassVar[str] = "model"

    source: Literal["scratch", "smollm2", "pretrained"] = "scratch"
    name_or_path: str | None = None     # source: pretrained (hub id or local folder)
    hidden_size: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int | None = None
    intermediate_size: int = 172
    base_window: int = 64               # L0: the window the base model is pretrained at
    rope_theta: float = 10000.0
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    load_in_4bit: bool = False

    def validate(self) -> None:
        for name in ("hidden_size", "n_layers", "n_heads", "intermediate_size", "base_window"):
            self._at_least(name, 1)
        if self.hidden_size % self.n_heads:
            self._fail("hidden_size", f"must be divisible by n_heads ({self.n_heads})")
        if (self.hidden_size // self.n_heads) % 2:
            self._fail("hidden_size", "hidden_size / n_heads must be even (RoPE)")
        if self.n_kv_heads is not None and (self.n_kv_heads < 1 or self.n_heads % self.n_kv_heads):
            self._fail("n_kv_heads", f"must divide n_heads ({self.n_heads})")
        if not self.rope_theta > 0:
            self._fail("rope_theta", "must be > 0")
        if self.source == "pretrained" and not self.name_or_path:
            self._fail("name_or_path", "is required when source is 'pretrained'")


@dataclass
class OptimConfig(StrictConfig):
    """Optimisation settings shared by pretraining and fine-tuning."""

    _section: typing.ClassVar[str] = "optim"

    steps: int = 20
    batch_size: int = 4
    grad_accum: int = 1
    lr: float = 1e-3
    schedule: Literal["cosine", "constant", "linear"] = "cosine"
    warmup_steps: int = 2
    weight_decay: float = 0.0
    clip: float = 1.0
    gradient_checkpointing: bool = False
    bf16: bool = False                   # on a GPU that supports it
    save_every: int = 0                  # 0: only at the end (a killed run restarts)

    def validate(self) -> None:
        for name in ("steps", "batch_size", "grad_accum"):
            self._at_least(name, 1)
        for name in ("warmup_steps", "weight_decay", "save_every"):
            self._at_least(name, 0)
        if not self.lr > 0:
            self._fail("lr", "must be > 0")
        if not self.clip > 0:
            self._fail("clip", "must be > 0")
        if self.warmup_steps >= self.steps:
            self._fail("warmup_steps", f"must be < steps ({self.steps})")


@dataclass
class PretrainConfig(StrictConfig):
    """Pretraining of the scratch base model at its base window."""

    _section: typing.ClassVar[str] = "pretrain"

    profile: str = "smoke"
    seed: int = 0
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(steps=30, lr=3e-3))
    # validation perplexity at base_window and 2x: chunks of the longest (2x) length; the 1x
    # window scores the same tokens in twice as many chunks (lsa/evaluate/perplexity.py)
    eval_max_chunks: int = 8
    threads: int = 2                     # CPU threads of the job (torch intra-op)
    gpu: bool = False                    # the job needs a GPU (cluster scheduling)

    def validate(self) -> None:
        if self.profile not in PROFILES:
            self._fail("profile", f"must be one of {', '.join(PROFILES)}")
        self._at_least("eval_max_chunks", 1)
        self._at_least("threads", 1)


Method = Literal["none", "pi", "ntk", "abf", "dynamic", "yarn", "longqlora", "eabf", "clex"]


@dataclass
class RunConfig(StrictConfig):
    """One context-extension run; unset fields take the fine-tuning defaults."""

    _section: typing.ClassVar[str] = "run"

    name: str
    method: Method = "pi"
    alpha: float = 0.0
    seed: int = 0
    ce_on: Literal["a", "b", "both"] = "a"
    l_extra_setting: int = 1
    # sce (the paper), jeffreys (alignment part only), entropy (H(p) + H(q), sharpening only)
    divergence: Literal["sce", "jeffreys", "entropy"] = "sce"
    l_train: int | None = None          # default: finetune.l_train
    lr: float | None = None             # default: finetune.optim.lr (LoRA methods: lora_lr)
    steps: int | None = None            # default: finetune.optim.steps

    def validate(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.+-]+", self.name):
            self._fail("name", "must be letters, digits and _ . + - only")
        self._at_least("alpha", 0.0)
        self._at_least("seed", 0)
        if self.l_train is not None:
            self._at_least("l_train", 2)
        if self.lr is not None and not self.lr > 0:
            self._fail("lr", "must be > 0")
        if self.steps is not None:
            self._at_least("steps", 1)
        if self.l_extra_setting not in (1, 2, 3, 4):
            self._fail("l_extra_setting", "must be 1, 2, 3 or 4 (see methods.md)")


def grid_run_name(method: str, alpha: float, seed: int) -> str:
    return f"{method}_a{alpha:g}_s{seed}"


def find_run(runs: list[RunConfig], name: str, where: str) -> RunConfig:
    for run in runs:
        if run.name == name:
            return run
    raise ConfigError(f"{where}: no run named {name!r}; known: {', '.join(r.name for r in runs)}")


@dataclass
class FinetuneConfig(StrictConfig):
    """Context-extension fine-tuning from the base model: window l_train, CE + alpha * SCE."""

    _section: typing.ClassVar[str] = "finetune"

    profile: str = "smoke"
    l_train: int = 128
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(steps=10, lr=1e-3))
    reduce_terms: Literal["sum", "mean"] = "sum"
    detach: Literal["none", "long", "short"] = "none"
    # overlap positions of the training term: all, the last, or where both contexts >= l/2
    positions: Literal["all", "last", "paper"] = "all"
    chunk_size: int = 512
    # method settings (lsa/extend): ABF base, LoRA (LongQLoRA), S2 groups, EABF, CLEX
    abf_theta: float = 500000.0
    lora_r: int = 64
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    lora_lr: float = 2e-3
    use_4bit: bool = False               # NF4 base weights for LoRA methods (GPU only)
    s2_group_ratio: float = 0.25
    eabf_skip_layers: int = 2
    clex_hidden: int = 32
    # CLEX training: an integer scale t in {1..clex_max_factor} per forward (CLEX-7B-16K: 16)
    clex_max_factor: int = 16
    # reference: DAMO-NLP-SG/CLEX (integer t, positions spread over [0, t * l_train));
    # continuous: t ~ U[1, ceil(l_train / base_window)] on contiguous positions (first version)
    clex_sampling: Literal["reference", "continuous"] = "reference"
    eval_multiples: list[int] = field(default_factory=lambda: [1, 2, 4])  # x l_train
    # perplexity: chunks of the longest evaluation length; every shorter length (it must divide
    # the longest) scores the same tokens in more chunks (lsa/evaluate/perplexity.py)
    eval_max_chunks: int = 8
    metric_samples: int = 16
    threads: int = 2
    gpu: bool = False
    # the runs: every method x alpha x seed of the grid, plus any explicit extra runs
    methods: list[Method] = field(
        default_factory=lambda: ["pi", "longqlora", "yarn", "eabf", "clex"])
    alphas: list[float] = field(default_factory=lambda: [0.0, 0.1])
    seeds: list[int] = field(default_factory=lambda: [0])
    runs: list[RunConfig] = field(default_factory=list)

    def validate(self) -> None:
        if self.profile not in PROFILES:
            self._fail("profile", f"must be one of {', '.join(PROFILES)}")
        self._at_least("l_train", 2)
        self._at_least("chunk_size", 1)
        self._at_least("eval_max_chunks", 1)
        self._at_least("metric_samples", 1)
        self._at_least("threads", 1)
        self._non_empty_unique("eval_multiples")
        if min(self.eval_multiples) < 1:
            self._fail("eval_multiples", "every multiple of l_train must be >= 1")
        if any(max(self.eval_multiples) % m for m in self.eval_multiples):
            self._fail("eval_multiples", "every multiple must divide the largest (perplexity "
                                         "scores every length on the same chunks)")
        for name in ("lora_r", "lora_alpha", "clex_hidden", "clex_max_factor"):
            self._at_least(name, 1)
        self._at_least("eabf_skip_layers", 0)
        self._in_range("lora_dropout", 0.0, 0.9)
        if not self.abf_theta > 0:
            self._fail("abf_theta", "must be > 0")
        if not self.lora_lr > 0:
            self._fail("lora_lr", "must be > 0")
        if not 0 < self.s2_group_ratio <= 1:
            self._fail("s2_group_ratio", "must be in (0, 1]")
        for name in ("methods", "alphas", "seeds"):
            self._non_empty_unique(name)
        if min(self.alphas) < 0:
            self._fail("alphas", "every alpha must be >= 0")
        names = [r.name for r in self.all_runs()]
        if len(set(names)) != len(names):
            self._fail("runs", "run names must be unique (grid runs are named "
                               "METHOD_aALPHA_sSEED)")
        for run in self.all_runs():
            l_train = self.l_train_of(run)
            if run.l_extra_setting == 3 and l_train < 4:
                self._fail("runs", f"run {run.name}: l_extra setting 3 needs l_train >= 4")
            if run.method == "longqlora":
                group = int(l_train * self.s2_group_ratio)
                if group < 2 or l_train % group or group % 2:
                    raise ConfigError(
                        f"finetune.runs[{run.name}].l_train = {l_train}: S2 attention "
                        f"(longqlora) needs l_train to be a multiple of an even group of "
                        f"l_train * s2_group_ratio ({self.s2_group_ratio}) tokens")

    def l_train_of(self, run: RunConfig) -> int:
        return run.l_train or self.l_train

    def eval_lengths(self, run: RunConfig) -> list[int]:
        return [m * self.l_train_of(run) for m in self.eval_multiples]

    def all_runs(self) -> list[RunConfig]:
        grid = [RunConfig(name=grid_run_name(m, a, s), method=m, alpha=a, seed=s)
                for s in self.seeds for m in self.methods for a in self.alphas]
        return grid + list(self.runs)

    def run(self, name: str) -> RunConfig:
        return find_run(self.all_runs(), name, "finetune.runs")


@dataclass
class RunsViewConfig(StrictConfig):
    """A notebook over the profile's runs (Sections 5.1-5.2, 5.4): reads them, or, run on its
    own, trains the missing ones first."""

    _section: typing.ClassVar[str] = "view"

    profile: str = "smoke"
    seed: int = 0
    alpha: float = 0.1                   # the regularized runs compared with alpha = 0
    train_missing: bool = True           # standalone: train runs the pipeline has not made

    def validate(self) -> None:
        if self.profile not in PROFILES:
            self._fail("profile", f"must be one of {', '.join(PROFILES)}")
        if not self.alpha > 0:
            self._fail("alpha", "must be > 0 (it is compared with alpha = 0)")


@dataclass
class BabilongConfig(StrictConfig):
    """Section 5.4: BABILong accuracy by task x length, and QA1 by fact depth, in one of two
    designs (``design``):

    - ``train`` (mini, smoke): a model of a few million parameters cannot follow instructions,
      so the base model is fine-tuned on BABILong samples at l_train with CE and with
      CE + alpha * SCE, then prompted with the bare format (``lsa.runs.babilong_run``);
    - ``evaluate`` (gpu-small, paper; the paper's experiment): the fine-tuning section's runs
      (``finetune_runs``) are evaluated with the benchmark's own prompts at ``eval_lengths``
      and, for ``depth_task``, at ``eval_depths`` (``lsa.runs.babilong_evaluate``).

    ``tasks``, ``test_samples``, ``depth_task``, ``threads`` and ``gpu`` serve both designs; the
    fields from ``design`` on serve the evaluate design only, the others the train design."""

    _section: typing.ClassVar[str] = "babilong"

    profile: str = "smoke"
    tasks: list[Literal["qa1", "qa2", "qa3", "qa4", "qa5"]] = field(
        default_factory=lambda: ["qa1", "qa4"])
    method: Method = "pi"
    l_train: int = 128
    alphas: list[float] = field(default_factory=lambda: [0.0, 0.1])
    seeds: list[int] = field(default_factory=lambda: [0])
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(steps=10, lr=1e-3))
    answer_weight: float = 5.0           # CE of the answer tokens, added to window B's LM CE
    train_samples: int = 1000            # per task, from the bAbI train split
    max_facts: int | None = 2            # keep stories with at most this many facts
    test_samples: int = 8                # per task x length (and per depth)
    eval_multiples: list[int] = field(default_factory=lambda: [1, 2, 4])
    depth_task: Literal["qa1", "qa2", "qa3", "qa4", "qa5"] = "qa1"
    depths: list[float] = field(default_factory=lambda: [0.0, 0.25, 0.5, 0.75, 1.0])
    depth_multiple: int = 2
    max_new_tokens: int = 4
    # official: babilong/metrics.py's compare_answers (first '.', labels as substrings);
    # word: ours, first sentence at . ! ? or newline, whole-word labels (lsa.evaluate.babilong)
    scorer: Literal["official", "word"] = "official"
    eval_batch_size: int = 16            # prompts decoded together (left padding); 1: one by one
    threads: int = 2
    gpu: bool = False
    # --- the evaluate design (gpu-small, paper): the paper evaluates its Table 2 models
    design: Literal["train", "evaluate"] = "train"  # train: fine-tune on BABILong (mini, smoke)
    finetune_runs: list[str] | None = None  # finetune runs to evaluate; null: all of them
    prompts_file: str | None = None      # the benchmark's babilong/prompts.py; null: looked for
    #                                      in $LSA_DATA_DIR/babilong/, then data/babilong/
    prompt_parts: list[Literal["instruction", "examples", "post_prompt"]] = field(
        default_factory=lambda: ["instruction", "examples", "post_prompt"])  # [] = bare template
    eval_lengths: list[int] = field(      # Table 6: context + question, in the model's tokens
        default_factory=lambda: [4096, 8192, 16384])
    eval_depths: list[float] = field(     # Table 7: where the facts sit (fraction of context)
        default_factory=lambda: [0.0, 0.25, 0.5, 0.75])
    eval_depth_length: int = 16384        # Table 7's input length
    eval_max_new_tokens: int = 20         # greedy tokens per answer, as the benchmark generates

    def validate(self) -> None:
        if self.profile not in PROFILES:
            self._fail("profile", f"must be one of {', '.join(PROFILES)}")
        for name in ("tasks", "alphas", "seeds", "eval_multiples", "depths"):
            self._non_empty_unique(name)
        self._at_least("l_train", 8)
        for name in ("train_samples", "test_samples", "depth_multiple", "max_new_tokens",
                     "eval_batch_size", "threads"):
            self._at_least(name, 1)
        self._at_least("answer_weight", 0.0)
        if self.max_facts is not None:
            self._at_least("max_facts", 1)
        if min(self.alphas) < 0:
            self._fail("alphas", "every alpha must be >= 0")
        if min(self.eval_multiples) < 1:
            self._fail("eval_multiples", "every multiple of l_train must be >= 1")
        if not all(0.0 <= d <= 1.0 for d in self.depths):
            self._fail("depths", "every depth must be a fraction in [0, 1]")
        if self.depth_task not in self.tasks:
            self._fail("depth_task", f"must be one of the tasks ({', '.join(self.tasks)})")
        self._validate_evaluate()

    def _validate_evaluate(self) -> None:
        if self.finetune_runs is not None:
            if not self.finetune_runs:
                self._fail("finetune_runs", "the evaluate design needs at least one fine-tuning "
                                            "run to evaluate (null: every run of finetune)")
            self._non_empty_unique("finetune_runs")
        if len(set(self.prompt_parts)) != len(self.prompt_parts):
            self._fail("prompt_parts", "must not repeat an entry")
        for name in ("eval_lengths", "eval_depths"):
            self._non_empty_unique(name)
        if min(self.eval_lengths) < 32:
            self._fail("eval_lengths", "every length must be >= 32 tokens")
        self._at_least("eval_depth_length", 32)
        self._at_least("eval_max_new_tokens", 1)
        if not all(0.0 <= d <= 1.0 for d in self.eval_depths):
            self._fail("eval_depths", "every depth must be a fraction in [0, 1]")

    def all_runs(self) -> list[RunConfig]:
        """The BABILong training runs (train design); none in the evaluate design, whose jobs
        are ``PipelineConfig.babilong_eval_runs``."""
        if self.design == "evaluate":
            return []
        return [RunConfig(name=f"babilong_{grid_run_name(self.method, a, s)}",
                          method=self.method, alpha=a, seed=s, ce_on="b")
                for s in self.seeds for a in self.alphas]

    def run(self, name: str) -> RunConfig:
        return find_run(self.all_runs(), name, "babilong")


# ---------------------------------------------------------------------------------------------
# Section 6: the replication report


@dataclass
class ReportConfig(StrictConfig):
    """The replication report: gathers every section's claims and figures."""

    _section: typing.ClassVar[str] = "report"

    profile: str = "smoke"
    seed: int = 0
    sections: list[str] = field(
        default_factory=lambda: ["01_synthetic_study", "03_regularized_finetuning",
                                 "05_babilong"])

    def validate(self) -> None:
        if self.profile not in PROFILES:
            self._fail("profile", f"must be one of {', '.join(PROFILES)}")
        self._non_empty_unique("sections")


# ---------------------------------------------------------------------------------------------
# the pipeline: sections (notebooks) and profiles


@dataclass
class SectionSpec(StrictConfig):
    """How the pipeline runs one notebook (pipeline structure, not experiment settings)."""

    notebook: str
    config: str
    modules: list[str] = field(default_factory=list)
    needs: list[str] = field(default_factory=list)
    uses_runs: list[Literal["finetune", "babilong"]] = field(default_factory=list)  # inputs
    threads: int = 1
    mem_mb: int = 2000
    gpu: int = 0

    def validate(self) -> None:
        self._at_least("threads", 1)
        self._at_least("mem_mb", 100)
        self._at_least("gpu", 0)
        if self.config not in SECTION_CONFIGS:
            self._fail("config", f"must be one of {', '.join(SECTION_CONFIGS)}")


SECTION_CONFIGS: dict[str, type[StrictConfig]] = {
    "synthetic": SyntheticConfig,
    "pretrain": PretrainConfig,
    "finetune": FinetuneConfig,
    "view": RunsViewConfig,
    "babilong": BabilongConfig,
    "report": ReportConfig,
}


@dataclass
class PipelineConfig:
    """The whole of ``config/config.yaml`` for one chosen profile."""

    profile: str
    seed: int
    sections: dict[str, SectionSpec]
    settings: dict[str, StrictConfig]  # section config name -> validated config

    def section_config(self, section: str) -> StrictConfig:
        return self.settings[self.sections[section].config]

    def base_run_id(self) -> str:
        """The base model's run folder name: a digest of its configuration."""
        cfg = self.settings["pretrain"].to_dict()
        for key in ("profile", "threads", "gpu"):  # where it runs is not what it is
            cfg.pop(key)
        return f"base-{digest(cfg)}"

    def finetune_run_config(self, name: str) -> dict[str, Any]:
        """Everything that determines a fine-tuning run's result (its identity)."""
        ft = self.settings["finetune"]
        shared = {k: v for k, v in ft.to_dict().items()
                  if k not in ("profile", "runs", "threads", "gpu")}
        return {"base": self.base_run_id(), **shared, "run": ft.run(name).to_dict()}  # type: ignore[attr-defined]

    def finetune_run_id(self, name: str) -> str:
        return f"{name}-{digest(self.finetune_run_config(name))}"

    def babilong_run_config(self, name: str) -> dict[str, Any]:
        bl = self.settings["babilong"]
        shared = {k: v for k, v in bl.to_dict().items()
                  if k not in ("profile", "threads", "gpu", "alphas", "seeds")}
        return {"base": self.base_run_id(), **shared, "run": bl.run(name).to_dict()}  # type: ignore[attr-defined]

    def babilong_run_id(self, name: str) -> str:
        return f"{name}-{digest(self.babilong_run_config(name))}"

    def babilong_eval_runs(self) -> list[RunConfig]:
        """The fine-tuning runs BABILong evaluates (evaluate design; none in the train design)."""
        bl = self.settings["babilong"]
        if bl.design != "evaluate":  # type: ignore[attr-defined]
            return []
        ft = self.settings["finetune"]
        names = bl.finetune_runs  # type: ignore[attr-defined]
        runs = ft.all_runs()  # type: ignore[attr-defined]
        return runs if names is None else [ft.run(n) for n in names]  # type: ignore[attr-defined]

    def babilong_eval_run(self, name: str) -> RunConfig:
        bl = self.settings["babilong"]
        if bl.design != "evaluate":  # type: ignore[attr-defined]
            raise ConfigError(f"babilong.design = {bl.design!r}: fine-tuning runs are evaluated "  # type: ignore[attr-defined]
                              "on BABILong in the evaluate design only (set design: evaluate)")
        return find_run(self.babilong_eval_runs(), name, "babilong.finetune_runs")

    def babilong_eval_run_config(self, name: str) -> dict[str, Any]:
        """What determines one evaluation's result: the evaluated run and the test settings
        (the prompts file is recorded by its checksum in the metrics, not here)."""
        bl = self.settings["babilong"].to_dict()
        keys = ("tasks", "test_samples", "depth_task", "prompt_parts", "eval_lengths",
                "eval_depths", "eval_depth_length", "eval_max_new_tokens")
        return {"finetune": self.finetune_run_id(self.babilong_eval_run(name).name),
                "seed": self.seed, **{k: bl[k] for k in keys}}

    def babilong_eval_run_id(self, name: str) -> str:
        return f"babilong-eval_{name}-{digest(self.babilong_eval_run_config(name))}"

    def notebook_parameters(self, section: str) -> dict[str, Any]:
        """The parameters papermill passes to the section's notebook.

        A config with a ``sections`` field (the report) gets the sections it needs.
        """
        params = self.section_config(section).to_dict()
        if "sections" in params:
            params["sections"] = list(self.sections[section].needs)
        return params


def digest(obj: Any) -> str:
    """A short stable digest of a JSON-able object (run identities)."""
    import hashlib
    import json

    text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _merge(base: dict, override: dict) -> dict:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _check_babilong_runs(settings: dict[str, StrictConfig], where: str) -> None:
    """The runs ``babilong.finetune_runs`` names exist in ``finetune`` (evaluate design)."""
    names = settings["babilong"].finetune_runs  # type: ignore[attr-defined]
    known = [r.name for r in settings["finetune"].all_runs()]  # type: ignore[attr-defined]
    for name in names or []:
        if name not in known:
            raise ConfigError(f"{where}.finetune_runs = {names!r}: no fine-tuning run named "
                              f"{name!r}; finetune's runs: {', '.join(known)}")


def load_config(path: str | Path | None = None, profile: str | None = None,
                overrides: dict[str, Any] | None = None) -> PipelineConfig:
    """Load ``config/config.yaml`` (or ``path``) and validate it for ``profile``."""
    from lsa import paths

    path = Path(path) if path else paths.CONFIG_FILE
    raw = yaml.safe_load(path.read_text()) or {}
    return from_mapping(_merge(raw, overrides or {}), profile=profile)


def from_mapping(raw: dict[str, Any], profile: str | None = None) -> PipelineConfig:
    """Validate a whole configuration mapping (what Snakemake's ``config`` holds).

    ``defaults`` hold per-section-config values, ``profiles.<name>`` override them for one
    profile; a section config's own dataclass defaults are the ``smoke`` sizes.
    """
    allowed = {"profile", "seed", "sections", "defaults", "profiles"}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]} (value {raw[unknown[0]]!r}); "
                          f"allowed top-level keys: {', '.join(sorted(allowed))}")
    profile = profile or raw.get("profile", "mini")
    if profile not in PROFILES:
        raise ConfigError(f"profile = {profile!r}: must be one of {', '.join(PROFILES)}")
    seed = _coerce("seed", raw.get("seed", 0), int)
    profiles = raw.get("profiles") or {}
    bad = sorted(set(profiles) - set(PROFILES))
    if bad:
        raise ConfigError(f"profiles.{bad[0]}: unknown profile; allowed: {', '.join(PROFILES)}")
    defaults = raw.get("defaults") or {}
    chosen = profiles.get(profile) or {}
    for where, block in (("defaults", defaults), (f"profiles.{profile}", chosen)):
        for name in block:
            if name not in SECTION_CONFIGS:
                raise ConfigError(f"{where}.{name}: unknown section config; allowed: "
                                  f"{', '.join(SECTION_CONFIGS)}")
    settings: dict[str, StrictConfig] = {}
    for name, cls in SECTION_CONFIGS.items():
        data = _merge(defaults.get(name) or {}, chosen.get(name) or {})
        for key, value in (("profile", profile), ("seed", seed)):
            if key in cls.field_names():
                data.setdefault(key, value)
        settings[name] = cls.from_dict(data, prefix=f"profiles.{profile}.{name}")
    _check_babilong_runs(settings, f"profiles.{profile}.babilong")
    sections = {
        key: SectionSpec.from_dict(spec, prefix=f"sections.{key}")
        for key, spec in (raw.get("sections") or {}).items()
    }
    for key, spec in sections.items():
        for need in spec.needs:
            if need not in sections:
                raise ConfigError(f"sections.{key}.needs = {need!r}: unknown section; "
                                  f"allowed: {', '.join(sections)}")
    return PipelineConfig(profile=profile, seed=seed, sections=sections, settings=settings)
