"""python -m lsa plan (lsa/plan.py): parameter counts against models built on the meta device,
memory and FLOPs against hand-computed values, paper's full fine-tunes fitting the GPUs they
claim, and workflow/settings.yaml's wall-time limits against the plan."""

import math

import pytest
import torch

from lsa import plan
from lsa.config import load_config
from lsa.plan import Architecture, llama_parameters


@pytest.fixture
def nothing_fetched(tmp_path, monkeypatch):
    """No LongBench-E files at hand: the plan counts the stated sample counts."""
    from lsa import paths

    monkeypatch.delenv("LSA_DATA_DIR", raising=False)
    monkeypatch.setattr(paths, "CACHE", tmp_path / "cache")


def meta_llama(arch: Architecture):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=arch.vocab_size, hidden_size=arch.hidden_size,
                         num_hidden_layers=arch.n_layers, num_attention_heads=arch.n_heads,
                         num_key_value_heads=arch.n_kv_heads,
                         intermediate_size=arch.intermediate_size,
                         tie_word_embeddings=arch.tie_embeddings)
    with torch.device("meta"):
        return LlamaForCausalLM(config)


@pytest.mark.parametrize("arch", [
    Architecture(1024, 64, 2, 4, 4, 172, True),            # smoke's scratch model
    Architecture(16384, 640, 10, 10, 10, 1728, True),      # gpu-small's
    Architecture(49152, 576, 30, 9, 3, 1536, True),        # SmolLM2-135M (grouped KV heads)
    Architecture(32000, 4096, 4, 32, 32, 11008, False),    # Llama-2-7B's widths, 4 layers
])
def test_parameters_in_closed_form_match_the_model(arch):
    model = meta_llama(arch)
    unique = {id(p): p.numel() for p in model.parameters()}  # a tied head counts once
    n = llama_parameters(arch)
    assert n["total"] == sum(unique.values())
    linear = sum(m.weight.numel() for name, m in model.named_modules()
                 if isinstance(m, torch.nn.Linear) and name != "lm_head")
    assert n["linear"] == linear


def test_llama_2_7b_has_its_published_parameter_count():
    from lsa.pipeline import workflow_settings

    arch = plan.architecture(load_config(profile="paper"),
                             workflow_settings().plan.architectures)
    assert llama_parameters(arch)["total"] == 6_738_415_616  # "7B": 6.74e9


def test_lora_parameters_match_peft(tokenizer):
    from lsa.models import scratch_llama
    from lsa.train import LoraSettings, apply_lora

    arch = Architecture(len(tokenizer), 32, 2, 4, 2, 48, True)
    model = scratch_llama(len(tokenizer), 32, 2, 4, 48, 16, n_kv_heads=2)
    lora = apply_lora(model, LoraSettings(r=4, dropout=0.0))
    trainable = sum(p.numel() for p in lora.parameters() if p.requires_grad)
    assert plan.lora_parameters(arch, 4) == trainable


def test_memory_and_flops_by_hand():
    arch = Architecture(vocab_size=100, hidden_size=8, n_layers=2, n_heads=2, n_kv_heads=2,
                        intermediate_size=16, tie_embeddings=False)
    n = llama_parameters(arch)
    # per layer: q, k, v, o 4 x 64 + MLP 3 x 128 + norms 16 = 656; 2 layers, embedding and head
    # 800 each, final norm 8
    assert n["layers"] == 1312 and n["total"] == 1312 + 800 + 800 + 8
    assert n["matmul"] == 1312 + 800
    tokens = 10
    # checkpointing: one layer (34 x 10 x 8) + each layer's input (2 x 10 x 8 x 2 bytes),
    # logits 12 x 10 x 100
    assert plan.activation_bytes(arch, tokens, True) == 34 * 80 + 2 * 80 * 2 + 12 * 1000
    full1 = plan.train_memory(arch, micro_batch=1, seq=10, windows=1, checkpointing=True)
    full4 = plan.train_memory(arch, micro_batch=1, seq=10, windows=1, checkpointing=True,
                              processes=4)
    assert full1["weights_and_optimizer"] == 18 * n["total"]
    assert full4["weights_and_optimizer"] == 18 * n["total"] / 4
    assert full4["gathered_layer"] == 4 * 656
    assert full1["total"] == pytest.approx(
        (18 * n["total"] + full1["activations"] + plan.CONTEXT_BYTES) * plan.ALLOCATOR)
    lora = plan.train_memory(arch, micro_batch=1, seq=10, windows=1, checkpointing=True,
                             lora_r=2, quantized=True)
    assert lora["frozen_base"] == 0.5 * n["linear"] + 2 * (n["total"] - n["linear"])
    assert plan.train_flops(arch, 1000, 10) == 1000 * (6 * 2112 + 6 * 2 * 10 * 8)
    assert plan.train_flops(arch, 1000, 10, lora=True, checkpointing=True) == \
        1000 * (6 * 2112 + 8 * 2 * 10 * 8)
    assert plan.eval_flops(arch, 1000, 10) == 1000 * (2 * 2112 + 2 * 2 * 10 * 8)


def test_paper_full_fine_tunes_fit_the_gpus_they_claim(nothing_fetched):
    pipe = load_config(profile="paper")
    plans = plan.plan_profile(pipe)
    assert plan.problems(plans) == []
    full = [p for p in plans if p.kind == "finetune" and "full" in p.notes]
    assert {p.name for p in full} == {"eabf_a0_s0", "eabf_a0.1_s0", "clex4k_a0_s0",
                                      "clex4k_a0.1_s0"}
    assert all(p.gpus == p.processes == 4 and p.fits for p in full)
    # on one GPU the same runs would not: 18 bytes x 6.7e9 parameters alone are 113 GiB
    one = load_config(profile="paper", overrides={"profiles": {"paper": {"finetune": {
        "method_processes": {"eabf": 1}}}}})
    eabf = [p for p in plan.plan_profile(one) if p.name.startswith("eabf")
            and p.kind == "finetune"]
    assert all(p.fits is False and p.memory_gib > 113 for p in eabf)


@pytest.mark.parametrize("profile", ["gpu-small", "paper"])
def test_settings_runtimes_come_from_the_plan(profile, nothing_fetched):
    """Each kind's wall-time limit is the plan's high end for its longest job x 1.5, rounded up
    to whole hours (workflow/settings.yaml says so); a kind on the CPU (Section 3's grid) is
    not the GPU plan's."""
    from lsa.pipeline import workflow_settings

    pipe = load_config(profile=profile)
    plans = plan.plan_profile(pipe)
    settings = workflow_settings()
    assert {p.kind for p in plans if not p.gpus} == {"synthetic"}
    for kind in {p.kind for p in plans if p.gpus}:
        longest = max(p.wall_hours[1] for p in plans if p.kind == kind)
        wanted = 60 * max(1, math.ceil(1.5 * longest))
        assert settings.resources(profile, kind).runtime == wanted, kind
    assert all(p.runtime_ok for p in plans)


def test_the_plan_command_prints_memory_and_time_per_job(nothing_fetched, capsys,
                                                         monkeypatch):
    from lsa import __main__ as cli

    monkeypatch.setattr(torch.version, "cuda", None)
    assert cli.main(["plan", "--profile", "paper", "--no-hub"]) == cli.EXIT["check"]  # here
    out, err = capsys.readouterr()
    assert "| eabf_a0_s0 | finetune | 4 | 80.0 |" in out
    assert "Assumed, not measured: 100-300 effective TFLOP/s" in out
    assert "Profile total:" in out and "GPU-hours" in out
    # the pre-flight's problems on stderr, one line each, as the pipeline's
    assert "lsa plan: profile paper cannot start" in err and "cannot start" not in out


def test_the_plan_counts_the_prompts_the_configured_longbench_data_holds(gpu_data):
    """smoke evaluates the tiny fixture (8 prompts, 4-token answers), not 300 a dataset; a
    data folder's files are counted line by line, and limit caps them."""
    from lsa.evaluate.longbench import write_fixture
    from lsa.pipeline import PlanAssumptions

    smoke = load_config(profile="smoke")
    jobs = [p for p in plan.plan_profile(smoke) if p.kind == "longbench"]
    fixture = write_fixture(gpu_data / "fixture")
    rows = sum(len((fixture / f"{d}_e.jsonl").read_text().splitlines())
               for d in smoke.longbench.datasets)
    assert rows == 8 and jobs and all(p.notes == f"{rows} prompts, batch 1" for p in jobs)
    steps = sum(math.ceil(len((fixture / f"{d}_e.jsonl").read_text().splitlines())
                          / smoke.longbench.batch_size) * 4 for d in smoke.longbench.datasets)
    assert all(p.decode_steps == steps for p in jobs)
    gpu = load_config(profile="gpu-small")  # gpu_data: one line a dataset
    counts, maxlen = plan.longbench_data(gpu, PlanAssumptions())
    assert set(counts.values()) == {1} and set(maxlen.values()) == {8}
    capped = load_config(profile="gpu-small", overrides={"profiles": {"gpu-small": {
        "longbench": {"limit": 1, "data_dir": str(gpu_data / "nowhere")}}}})
    assert set(plan.longbench_data(capped, PlanAssumptions())[0].values()) == {1}
