"""Context extension: what each method changes in a base model for a target window.

Notation of ``docs/methods.md``: base ``b`` (``rope_theta``), head dim ``d``, original window
``L0``, target window ``L``, scale ``s = L / L0``.

| method     | RoPE (transformers' own)                     | attention     | weights            |
|------------|----------------------------------------------|---------------|--------------------|
| none       | unchanged                                    | sdpa          | full fine-tuning   |
| pi         | ``linear``, factor ``ceil(s)``               | sdpa          | full               |
| ntk        | ``rope_theta = b * s^(d/(d-2))``             | sdpa          | full               |
| abf        | ``rope_theta = abf_theta`` (500000)          | sdpa          | full               |
| dynamic    | ``dynamic``, factor ``s``                    | sdpa          | full               |
| yarn       | ``yarn``, factor ``s``, L0, beta 32 / 1      | sdpa          | full               |
| longqlora  | ``linear``, factor ``ceil(s)`` (PI)          | S2 (training) | LoRA r64 a16 (+NF4)|
| eabf       | ``rope_theta = abf_theta``                   | EABF scale    | full               |
| clex       | replaced by the CLEX ODE module              | sdpa          | full + ODE         |

``method_spec`` returns the recipe; ``load_for_method`` loads a base model folder with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, get_args

from lsa.config import Method

METHODS: tuple[str, ...] = get_args(Method)  # the one list of names: lsa.config.Method
DEFAULT_ABF_THETA = 500000.0


@dataclass
class MethodSpec:
    """What a run needs for one method at one target window."""

    name: str
    rope_parameters: dict[str, Any]
    attention: str = "sdpa"                 # sdpa | lsa_s2 | lsa_eabf
    lora: bool = False                      # LoRA adapters (peft) instead of full fine-tuning
    quantize_4bit: bool = False             # NF4 base weights (QLoRA; GPU only)
    clex: bool = False                      # install the CLEX rotary module
    config_extras: dict[str, Any] = field(default_factory=dict)


def head_dim_of(config) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def rope_parameters(method: str, base_window: int, target_window: int, rope_theta: float,
                    head_dim: int = 64, abf_theta: float = DEFAULT_ABF_THETA) -> dict[str, Any]:
    """transformers 5 ``rope_parameters`` of ``method`` (``rope_scaling`` is the old name)."""
    if target_window < base_window:
        raise ValueError(f"target window {target_window} is shorter than the base window "
                         f"{base_window}")
    s = target_window / base_window
    theta = float(rope_theta)
    if method in ("none", "clex"):
        return {"rope_type": "default", "rope_theta": theta}
    if method in ("pi", "longqlora"):
        return {"rope_type": "linear", "factor": float(math.ceil(s)), "rope_theta": theta}
    if method == "ntk":
        return {"rope_type": "default", "rope_theta": theta * s ** (head_dim / (head_dim - 2))}
    if method in ("abf", "eabf"):
        return {"rope_type": "default", "rope_theta": float(abf_theta)}
    if method == "dynamic":
        return {"rope_type": "dynamic", "factor": float(s), "rope_theta": theta}
    if method == "yarn":
        return {"rope_type": "yarn", "factor": float(s), "rope_theta": theta,
                "original_max_position_embeddings": base_window,
                "beta_fast": 32.0, "beta_slow": 1.0}
    raise ValueError(f"unknown method {method!r}; allowed: {', '.join(METHODS)}")


def method_spec(method: str, base_window: int, target_window: int, rope_theta: float,
                head_dim: int = 64, abf_theta: float = DEFAULT_ABF_THETA,
                eabf_skip_layers: int = 2, s2_group_ratio: float = 0.25,
                use_4bit: bool = False) -> MethodSpec:
    rope = rope_parameters(method, base_window, target_window, rope_theta, head_dim, abf_theta)
    if method == "longqlora":
        return MethodSpec(method, rope, attention="lsa_s2", lora=True, quantize_4bit=use_4bit,
                          config_extras={"s2_group_ratio": s2_group_ratio})
    if method == "eabf":
        return MethodSpec(method, rope, attention="lsa_eabf",
                          config_extras={"eabf_base_window": base_window,
                                         "eabf_skip_layers": eabf_skip_layers})
    return MethodSpec(method, rope, clex=method == "clex")


def load_for_method(path: str, method: str, base_window: int, target_window: int,
                    spec: MethodSpec | None = None, **kwargs):
    """Load the causal LM in ``path`` with the method's RoPE, attention and config extras
    (LoRA and CLEX are applied by the caller: ``lsa.models.build_for_run``)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from lsa.extend.attention import register

    config = AutoConfig.from_pretrained(path)
    if spec is None:
        theta = (config.rope_parameters or {}).get("rope_theta", 10000.0)
        spec = method_spec(method, base_window, target_window, theta, head_dim_of(config))
    config.rope_parameters = dict(spec.rope_parameters)
    for key, value in spec.config_extras.items():
        setattr(config, key, value)
    config.use_cache = False
    register()
    return AutoModelForCausalLM.from_pretrained(path, config=config,
                                                attn_implementation=spec.attention, **kwargs)
