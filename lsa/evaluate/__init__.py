"""Evaluations of a trained model: perplexity, the copy probes, BABILong and LongBench-E; and
what the two benchmarks' greedy decoding asks of a model, so that an answer depends on its own
prompt alone: whether it may be batched (``pads_safely``), and no state left by the prompt
before (``forget_prompts``)."""

from __future__ import annotations


def pads_safely(model) -> bool:
    """Whether left padding leaves each row's greedy output as it is alone, so that prompts may
    be decoded in batches: not for lsa's S2 and EABF attention functions (they ignore the
    padding mask; EABF also scales by index), nor for rotary embeddings whose scale follows the
    longest row of the batch (CLEX, dynamic NTK). Both benchmarks decode a model that does not
    one prompt at a time: a prompt alone has no padding, so its answer is the model's own."""
    from lsa.extend.attention import EABF_ATTENTION, S2_ATTENTION
    from lsa.extend.clex import ClexRotaryEmbedding

    config = model.config
    if getattr(config, "_attn_implementation", None) in (S2_ATTENTION, EABF_ATTENTION):
        return False
    if (getattr(config, "rope_parameters", None) or {}).get("rope_type") == "dynamic":
        return False
    return not any(isinstance(m, ClexRotaryEmbedding) for m in model.modules())


def forget_prompts(model) -> None:
    """Undo what earlier prompts left in ``model``: transformers' dynamic NTK rotary embedding
    keeps the scale of the longest sequence it has seen until one shorter than the original
    window comes, so that a prompt's answer would depend on the prompts decoded before it; its
    frequencies go back to the original ones (what a freshly loaded model starts from)."""
    for module in model.modules():
        if getattr(module, "rope_type", None) == "dynamic" and hasattr(module,
                                                                       "original_inv_freq"):
            module.register_buffer("inv_freq", module.original_inv_freq.clone(),
                                   persistent=False)
            module.max_seq_len_cached = module.original_max_seq_len
