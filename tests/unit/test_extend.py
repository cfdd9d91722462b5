"""Context-extension methods against dense references and the formulas of docs/methods.md."""

import math

import pytest
import torch

from lsa.extend import METHODS, load_for_method, method_spec, rope_parameters
from lsa.extend.attention import EABF_ATTENTION, S2_ATTENTION, eabf_scale, register, s2_attention
from lsa.extend.clex import ClexRotaryEmbedding, install_clex
from lsa.models import scratch_llama


def dense_causal(q, k, v, logit_scale=None):
    """Reference attention with an explicit mask (float64)."""
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if logit_scale is not None:
        scores = scores * logit_scale[:, None]
    t = q.shape[-2]
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    return scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v


def qkv(b=2, h=4, t=16, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, h, t, d, generator=g) for _ in range(3))


def test_s2_with_one_group_is_full_attention():
    q, k, v = qkv()
    torch.testing.assert_close(s2_attention(q, k, v, group_size=16).double(),
                               dense_causal(q, k, v), rtol=1e-5, atol=1e-5)


def test_s2_matches_a_dense_reference_of_the_longlora_pattern():
    q, k, v = qkv(t=16)
    g, half = 4, 2
    got = s2_attention(q, k, v, group_size=g)
    # reference: heads [0, half) attend causally within groups [0,4), [4,8), ...; heads
    # [half, H) within groups shifted by g/2 (with LongLoRA's wrap-around of the last group)
    ref = torch.empty_like(got, dtype=torch.float64)
    for head in range(4):
        order = torch.arange(16) if head < half else torch.arange(16).roll(-g // 2)
        for start in range(0, 16, g):
            idx = order[start:start + g]
            ref[:, head, idx] = dense_causal(q[:, head:head + 1, idx], k[:, head:head + 1, idx],
                                             v[:, head:head + 1, idx])[:, 0]
    torch.testing.assert_close(got.double(), ref, rtol=1e-5, atol=1e-5)


def test_s2_rejects_a_length_that_is_no_multiple_of_the_group():
    q, k, v = qkv(t=10)
    with pytest.raises(ValueError, match="not a multiple"):
        s2_attention(q, k, v, group_size=4)


def test_eabf_scale():
    got = eabf_scale(torch.tensor([0, 10, 63, 127, 255, 1023]), 128)
    expected = [max(1.0, math.log(p + 1) / math.log(128)) for p in (0, 10, 63, 127, 255, 1023)]
    torch.testing.assert_close(got, torch.tensor(expected))
    assert got[:4].tolist() == [1.0, 1.0, 1.0, 1.0]  # within the base window: no change


def tiny(attn="sdpa", **rope):
    model = scratch_llama(vocab_size=64, hidden_size=32, n_layers=3, n_heads=4,
                          intermediate_size=64, base_window=8, seed=0)
    return model


@pytest.mark.parametrize("name", [S2_ATTENTION, EABF_ATTENTION])
def test_registered_attention_in_a_real_model_equals_the_reference(tmp_path, name):
    """Whole-model check: eval-mode S2 is full attention; EABF with a base window longer than
    the input scales nothing; both match the sdpa model exactly, causality included."""
    register()
    model = tiny()
    model.save_pretrained(tmp_path / "m")
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))
    ref = model.eval()(input_ids=ids).logits
    spec = method_spec("longqlora" if name == S2_ATTENTION else "eabf", 8, 16, 10000.0, 8)
    spec.rope_parameters = {"rope_type": "default", "rope_theta": 10000.0}
    other = load_for_method(str(tmp_path / "m"), spec.name, 8, 16, spec=spec).eval()
    assert other.config._attn_implementation == name
    torch.testing.assert_close(other(input_ids=ids).logits, ref, rtol=1e-4, atol=1e-5)
    changed = ids.clone()
    changed[:, 5:] = (changed[:, 5:] + 1) % 64
    torch.testing.assert_close(other(input_ids=changed).logits[:, :5], ref[:, :5], rtol=1e-4,
                               atol=1e-5)


def test_eabf_attention_scales_logits_beyond_the_base_window(tmp_path):
    register()
    model = tiny()
    model.save_pretrained(tmp_path / "m")
    spec = method_spec("eabf", 4, 16, 10000.0, 8, eabf_skip_layers=0)
    spec.rope_parameters = {"rope_type": "default", "rope_theta": 10000.0}
    eabf = load_for_method(str(tmp_path / "m"), "eabf", 4, 16, spec=spec).eval()
    attn = eabf.model.layers[0].self_attn
    from transformers import AttentionInterface

    fn = AttentionInterface._global_mapping[EABF_ATTENTION]
    q, k, v = qkv(b=1, h=4, t=12, d=8)
    out, _ = fn(attn, q, k, v, None, scaling=1 / math.sqrt(8))
    scale = eabf_scale(torch.arange(12), 4)
    ref = dense_causal(q, k, v, logit_scale=scale)
    torch.testing.assert_close(out.transpose(1, 2).double(), ref, rtol=1e-5, atol=1e-5)
    attn_skipped = eabf.model.layers[0].self_attn
    eabf.config.eabf_skip_layers = 1
    out2, _ = fn(attn_skipped, q, k, v, None, scaling=1 / math.sqrt(8))
    torch.testing.assert_close(out2.transpose(1, 2).double(), dense_causal(q, k, v), rtol=1e-5,
                               atol=1e-5)


def inv_freq(rope, head_dim=64, window=4096):
    """Frequencies transformers computes for ``rope`` (through its own rotary module)."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    cfg = LlamaConfig(hidden_size=head_dim * 2, num_attention_heads=2, rope_parameters=rope,
                      max_position_embeddings=window)
    return LlamaRotaryEmbedding(cfg).inv_freq.double()


def test_rope_parameters_give_the_formulas_frequencies():
    d, b, l0, l = 64, 10000.0, 4096, 16384
    theta = b ** (-torch.arange(0, d, 2).double() / d)
    s = l / l0
    torch.testing.assert_close(inv_freq(rope_parameters("pi", l0, l, b, d)), theta / 4)
    ntk = (b * s ** (d / (d - 2))) ** (-torch.arange(0, d, 2).double() / d)
    torch.testing.assert_close(inv_freq(rope_parameters("ntk", l0, l, b, d)), ntk)
    abf = 500000.0 ** (-torch.arange(0, d, 2).double() / d)
    torch.testing.assert_close(inv_freq(rope_parameters("abf", l0, l, b, d)), abf)
    yarn = inv_freq(rope_parameters("yarn", l0, l, b, d))
    # YaRN: the fastest dimensions extrapolate (unchanged), the slowest interpolate (/ s)
    torch.testing.assert_close(yarn[0], theta[0])
    torch.testing.assert_close(yarn[-1], theta[-1] / s)
    assert rope_parameters("dynamic", l0, l, b, d)["rope_type"] == "dynamic"


def test_every_method_has_a_spec():
    for method in METHODS:
        spec = method_spec(method, 128, 256, 10000.0, 64)
        assert spec.rope_parameters["rope_theta"] > 0
    assert method_spec("longqlora", 128, 256, 1e4).lora
    assert method_spec("clex", 128, 256, 1e4).clex


def test_clex_at_init_equals_ntk_with_alpha_2t_minus_1_and_rope_at_t1():
    d, b = 16, 10000.0
    clex = ClexRotaryEmbedding(d, b, base_window=32, t_max=4, ode_steps=16)
    theta = b ** (-torch.arange(0, d, 2).float() / d)
    torch.testing.assert_close(clex.log_freqs(1.0).exp(), theta)
    for t in (1.5, 2.0, 4.0):
        alpha = 2 * t - 1
        ntk = (b * alpha ** (d / (d - 2))) ** (-torch.arange(0, d, 2).float() / d)
        torch.testing.assert_close(clex.log_freqs(t).exp(), ntk, rtol=1e-4, atol=1e-7)


def test_clex_is_trainable_and_changes_with_its_parameters():
    clex = ClexRotaryEmbedding(16, 10000.0, base_window=32, t_max=4)
    with torch.no_grad():
        clex.down.normal_(0, 0.1)
    z = clex.log_freqs(3.0)
    z.sum().backward()
    assert clex.up.grad is not None and clex.down.grad.abs().sum() > 0
    assert clex.eval_scale(64) == 2 and clex.eval_scale(16) == 1


def test_install_clex_in_a_model_keeps_outputs_within_the_base_window():
    model = tiny().eval()
    ids = torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(2))
    ref = model(input_ids=ids).logits
    clex = install_clex(model, base_window=8, target_window=32)
    assert model.model.rotary_emb is clex
    torch.testing.assert_close(model(input_ids=ids).logits, ref, rtol=1e-5, atol=1e-5)
    assert any(p is clex.down for p in model.parameters())


# --- CLEX training draws (DAMO-NLP-SG/CLEX ``CLEXScalingRotaryEmbedding``) --------------------


def clex_model(base_window=8, target_window=8, **kw):
    model = scratch_llama(vocab_size=64, hidden_size=32, n_layers=2, n_heads=4,
                          intermediate_size=64, base_window=base_window, seed=0)
    return model, install_clex(model, base_window, target_window, hidden=8, **kw)


def token_stream():
    import numpy as np

    from lsa.data.tokens import TokenStream

    return TokenStream(np.random.default_rng(0).integers(0, 64, 2000).astype(np.uint16), "t")


def record_draws(clex):
    draws = []
    clex.register_forward_hook(lambda m, args, out: draws.append(
        (m.sampled_t, None if m.sampled_positions is None else m.sampled_positions.clone())))
    return draws


def clex_train(model, folder, seed, alpha=0.0, steps=2, grad_accum=1, lr=1e-2):
    from lsa.config import OptimConfig
    from lsa.train import Objective, train

    optim = OptimConfig(steps=steps, batch_size=2, grad_accum=grad_accum, lr=lr,
                        warmup_steps=0, schedule="constant")
    return train(model, token_stream(), folder, optim, Objective(l_train=8, alpha=alpha), seed,
                 progress=False)


def test_clex_trains_its_ode_when_l_train_is_the_base_window(tmp_path):
    """paper's CLEX at 4K on a 4K base: the ODE must see scales t > 1 during training."""
    model, clex = clex_model(base_window=8, target_window=8)
    draws = record_draws(clex)
    up, down = clex.up.detach().clone(), clex.down.detach().clone()
    clex_train(model, tmp_path / "run", seed=0, steps=2)
    assert [t for t, _ in draws] and all(t > 1 for t, _ in draws)  # this seed draws t > 1
    assert not torch.equal(clex.down, down)  # step 1: down gets a gradient
    assert not torch.equal(clex.up, up)      # step 2: up too, through the now non-zero down


def test_clex_gradient_of_one_training_forward_at_the_base_window():
    model, clex = clex_model(base_window=8, target_window=8)
    model.train()
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(0))
    for seed in range(20):  # the first draw with t > 1 (15 in 16 are)
        clex.seed_draws(seed)
        model.zero_grad()
        model(input_ids=ids, labels=ids).loss.backward()
        if clex.sampled_t > 1:
            break
    assert clex.down.grad.abs().sum() > 0
    assert clex.up.grad is None or clex.up.grad.abs().sum() == 0  # down = 0: nothing yet


def test_clex_reference_draws_integer_scales_and_spread_positions():
    clex = ClexRotaryEmbedding(8, 10000.0, base_window=16, max_factor=4).train()
    clex.seed_draws(0)
    seen = set()
    for _ in range(200):
        t, pos = clex.draw(16)
        seen.add(t)
        assert t == int(t) and 1 <= t <= 4
        assert pos.shape == (16,) and pos[0] == 0 and pos[-1] == 16 * t - 1
        assert torch.equal(pos, pos.round()) and (pos.diff() > 0).all()  # distinct, sorted
    assert seen == {1.0, 2.0, 3.0, 4.0}
    # at t = 1 the positions are contiguous, as in the reference (randperm takes them all)
    while True:
        t, pos = clex.draw(16)
        if t == 1:
            break
    assert torch.equal(pos, torch.arange(16).float())
    # twice the base window: the reference divides by k = L // L0 = 2 (spread over [0, t L0))
    t, pos = clex.draw(32)
    assert pos.shape == (32,) and pos[-1] == 32 * t // 2 - 1
    assert torch.equal(pos * 2, (pos * 2).round()) and (pos.diff() >= 0).all()


def test_clex_training_forward_uses_the_drawn_positions_at_contiguous_ids():
    clex = ClexRotaryEmbedding(8, 10000.0, base_window=16, max_factor=4, hidden=4).train()
    with torch.no_grad():
        clex.down.normal_(0, 0.1)
    x = torch.zeros(2, 16, 8)
    ids = torch.arange(16)[None].expand(2, 16)
    clex.seed_draws(3)
    cos, sin = clex(x, ids)
    clex.seed_draws(3)
    t, pos = clex.draw(16)
    assert clex.sampled_t == t and torch.equal(clex.sampled_positions, pos)
    angles = pos[:, None] * clex.log_freqs(t).exp()
    torch.testing.assert_close(cos[0], torch.cat([angles, angles], -1).cos())
    torch.testing.assert_close(sin[1], torch.cat([angles, angles], -1).sin())


def test_clex_training_keeps_one_causal_sequence():
    """The model sees contiguous position ids (no packed-sequence masks): a later token never
    changes an earlier logit, and the first token still reaches the last one."""
    model, clex = clex_model(base_window=8, target_window=8, max_factor=4)
    with torch.no_grad():
        clex.down.normal_(0, 0.1)
    model.train()
    ids = torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(4))

    def logits(tokens):
        clex.seed_draws(11)  # the same draw for every forward
        out = model(input_ids=tokens).logits
        assert clex.sampled_t > 1 and clex.sampled_positions[-1] > 7  # positions spread
        return out

    ref = logits(ids)
    later = ids.clone()
    later[:, 5:] = (later[:, 5:] + 1) % 64
    torch.testing.assert_close(logits(later)[:, :5], ref[:, :5])
    first = ids.clone()
    first[:, 0] = (first[:, 0] + 1) % 64
    assert not torch.allclose(logits(first)[:, -1], ref[:, -1])


def test_clex_evaluation_is_contiguous_with_t_ceil_of_the_length():
    clex = ClexRotaryEmbedding(8, 10000.0, base_window=16, max_factor=4, hidden=4).eval()
    with torch.no_grad():
        clex.down.normal_(0, 0.1)
    for length, t in ((10, 1), (16, 1), (17, 2), (48, 3), (64, 4), (100, 4)):  # capped at 4
        assert clex.eval_scale(length) == t
        cos, _ = clex(torch.zeros(1, length, 8), torch.arange(length)[None])
        angles = torch.arange(length).float()[:, None] * clex.log_freqs(t).exp()
        torch.testing.assert_close(cos[0], torch.cat([angles, angles], -1).cos())
    assert clex.sampled_t is None  # evaluation draws nothing


def test_clex_continuous_sampling_keeps_the_first_version():
    clex = ClexRotaryEmbedding(8, 10000.0, base_window=16, t_max=3, sampling="continuous")
    clex.train().seed_draws(0)
    draws = [clex.draw(16) for _ in range(50)]
    assert all(pos is None and 1.0 <= t <= 3.0 for t, pos in draws)
    assert len({t for t, _ in draws}) == 50  # continuous
    assert clex.eval().eval_scale(100) == 7  # not capped
    with pytest.raises(ValueError, match="sampling"):
        ClexRotaryEmbedding(8, 10000.0, base_window=16, sampling="uniform")


def test_clex_runs_with_one_seed_draw_the_same_scales(tmp_path):
    """CE-only and regularized runs (one forward of batch 2 for windows A and B: one draw)
    see the same scale and positions at every micro-batch, whatever else used the global RNG
    before (dropout, another initialisation); another seed draws others."""
    runs = {}
    for i, (name, alpha, seed) in enumerate((("ce", 0.0, 5), ("reg", 0.1, 5), ("other", 0.0, 6))):
        model, clex = clex_model(base_window=8, target_window=32)
        draws = record_draws(clex)
        torch.manual_seed(100 + i)  # the global RNG differs between the runs
        clex_train(model, tmp_path / name, seed=seed, alpha=alpha, steps=3, grad_accum=2)
        runs[name] = draws
    assert len(runs["ce"]) == 6
    assert [t for t, _ in runs["ce"]] == [t for t, _ in runs["reg"]]
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(runs["ce"], runs["reg"]))
    assert [t for t, _ in runs["ce"]] != [t for t, _ in runs["other"]]
    assert len({t for t, _ in runs["ce"]}) > 1


def test_clex_settings_are_validated():
    from lsa.config import ConfigError, FinetuneConfig

    cfg = FinetuneConfig()
    assert (cfg.clex_max_factor, cfg.clex_sampling) == (16, "reference")
    with pytest.raises(ConfigError, match="clex_max_factor = 0: must be >= 1"):
        FinetuneConfig.from_dict({"clex_max_factor": 0})
    with pytest.raises(ConfigError, match="clex_sampling"):
        FinetuneConfig.from_dict({"clex_sampling": "uniform"})


def test_clex_frequencies_stay_fp32_under_autocast():
    """Mixed-precision training runs the forward under bf16 autocast: the ODE and the angles
    must not be computed in bf16 (as transformers' own rotary module, which turns it off)."""
    clex = ClexRotaryEmbedding(16, 10000.0, base_window=16, max_factor=4, hidden=8).eval()
    with torch.no_grad():
        clex.down.normal_(0, 0.1)
    x, ids = torch.zeros(1, 64, 16), torch.arange(64)[None]
    ref = clex(x, ids)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = clex(x, ids)
    for a, b in zip(got, ref):
        assert a.dtype == torch.float32
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


# --- RoPE parameters of the methods (transformers' rope types) ---------------------------------


def test_rope_parameters_for_methods():
    assert rope_parameters("pi", 128, 256, 10000.0) == {"rope_type": "linear", "factor": 2.0,
                                                        "rope_theta": 10000.0}
    assert rope_parameters("pi", 128, 300, 1e4)["factor"] == 3.0  # s = ceil(L / L0)
    assert rope_parameters("none", 128, 256, 5e5) == {"rope_type": "default",
                                                      "rope_theta": 5e5}
    with pytest.raises(ValueError, match="unknown method"):
        rope_parameters("xpos", 128, 256, 1e4)


def test_pi_halves_the_rotary_frequencies(tmp_path):
    model = scratch_llama(vocab_size=64, hidden_size=16, n_layers=2, n_heads=2,
                          intermediate_size=32, base_window=32, seed=0).eval()
    model.save_pretrained(tmp_path / "m")
    plain = load_for_method(str(tmp_path / "m"), "none", 32, 64)
    pi = load_for_method(str(tmp_path / "m"), "pi", 32, 64)
    torch.testing.assert_close(pi.model.rotary_emb.inv_freq * 2,
                               plain.model.rotary_emb.inv_freq)
    for a, b in zip(plain.parameters(), model.parameters()):
        assert torch.equal(a, b)  # the weights are untouched
