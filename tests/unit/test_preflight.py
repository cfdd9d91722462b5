"""The pre-flight check (lsa/preflight.py): a GPU profile started on this CPU machine stops
before any job with one message that lists everything missing (CUDA, 4-bit, data, hub), each
failing case alone, the override that lets the GPU path run on the CPU, the single job's own
stop, and the data files declared as rule inputs (Snakemake stops at DAG time)."""

import pytest
import torch
from support import run, tool

from lsa import preflight
from lsa.config import load_config


@pytest.fixture
def cpu_only(monkeypatch):
    """A CPU-only torch build, whatever this machine has."""
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.delenv(preflight.ALLOW_CPU, raising=False)


@pytest.fixture
def no_data(tmp_path, monkeypatch):
    """No LSA_DATA_DIR and an empty data/: nothing fetched."""
    from lsa import paths

    monkeypatch.delenv("LSA_DATA_DIR", raising=False)
    monkeypatch.setattr(paths, "CACHE", tmp_path / "cache")
    monkeypatch.setattr("lsa.data.books.NPM_CACHE", tmp_path / "cache" / "books" / "npm")
    monkeypatch.setattr(preflight, "npm_available", lambda: False)  # nor a way to fetch books


@pytest.fixture
def gated(monkeypatch):
    """Every hub id answers as a gated repository the user has not accepted."""
    from huggingface_hub.errors import GatedRepoError

    asked = []

    def check(repo, repo_type=None, **kw):
        asked.append((repo, repo_type))
        err = GatedRepoError.__new__(GatedRepoError)  # as the hub raises it, minus the HTTP
        Exception.__init__(err, f"{repo} is gated")
        raise err

    monkeypatch.setattr("huggingface_hub.auth_check", check)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return asked


@pytest.fixture
def no_snakemake(monkeypatch):
    def started(*args, **kwargs):
        raise AssertionError("Snakemake was started")

    monkeypatch.setattr("lsa.launch.run_pipeline", started)


def test_gpu_small_on_a_cpu_machine_stops_before_any_job_listing_everything(
        cpu_only, no_data, no_snakemake, capsys):
    from lsa import __main__ as cli

    assert cli.main(["pipeline", "--profile", "gpu-small"]) == cli.EXIT["check"]
    err = capsys.readouterr().err
    assert "profile gpu-small cannot start: 4 things missing (nothing was run)" in err
    assert "CPU-only build" in err and "LSA_ALLOW_CPU=1" in err
    assert "books: none found" in err and "python -m lsa fetch books" in err
    assert "LongBench-E: 15 files missing" in err and "python -m lsa fetch longbench" in err
    assert "prompts.py is missing" in err and "python -m lsa fetch babilong" in err


def test_paper_on_a_cpu_machine_names_cuda_4bit_data_and_the_gated_model(
        cpu_only, no_data, gated, no_snakemake, capsys):
    from lsa import __main__ as cli

    assert cli.main(["pipeline", "--profile", "paper"]) == cli.EXIT["check"]
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("  - ")]
    kinds = [line[4:].split(":")[0] for line in lines]
    assert kinds.count("devices") == 1 and kinds.count("4-bit") == 1
    assert "LongBench-E" in kinds and "BABILong" in kinds
    llama = next(line for line in lines if "meta-llama/Llama-2-7b-hf" in line)
    assert "gated" in llama and "https://huggingface.co/meta-llama/Llama-2-7b-hf" in llama
    assert "hf auth login" in llama
    assert any("https://huggingface.co/datasets/emozilla/pg19" in line for line in lines)
    assert ("emozilla/pg19", "dataset") in gated  # PG19 is checked as a dataset
    assert "it is never dropped silently" in err
    assert "has no pinned revision" in err  # the population models: a note, not a stop


def test_offline_mode_asks_for_the_cache_and_says_where_to_download(no_data, monkeypatch,
                                                                     tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    pipe = load_config(profile="paper")
    problems, _ = preflight.check_hub(pipe)
    llama = next(p for p in problems if "meta-llama/Llama-2-7b-hf" in p)
    assert "not in the hub's cache" in llama and f"HF_HOME={tmp_path / 'hf'}" in llama
    assert "hf download meta-llama/Llama-2-7b-hf" in llama
    assert f"--revision {pipe.pretrain.model.revision}" in llama


def test_an_unreachable_hub_says_to_download_on_a_login_node(no_data, monkeypatch):
    def down(repo, **kw):
        raise ConnectionError("no route to host")

    monkeypatch.setattr("huggingface_hub.auth_check", down)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    problems, _ = preflight.check_hub(load_config(profile="paper"))
    assert len(problems) == 7  # Llama-2-7B and the six population models
    assert all("cannot be checked (ConnectionError)" in p and "HF_HUB_OFFLINE=1" in p
               for p in problems)


def test_the_override_lets_the_gpu_path_run_on_the_cpu_and_says_so(cpu_only, gpu_data,
                                                                   monkeypatch):
    monkeypatch.setenv(preflight.ALLOW_CPU, "1")
    report = preflight.preflight(load_config(profile="gpu-small"), hub=False, memory=2**40)
    assert report.problems == []
    assert any("run on the CPU" in note for note in report.notes)
    # paper: NF4 is dropped only with the override, and said so
    problems, notes = preflight.check_4bit(load_config(profile="paper"))
    assert problems == [] and "load bfloat16 weights instead" in notes[0]
    monkeypatch.delenv(preflight.ALLOW_CPU)
    problems, notes = preflight.check_4bit(load_config(profile="paper"))
    assert notes == [] and "never dropped silently" in problems[0]


def test_a_cuda_build_without_enough_devices_stops_except_on_a_cluster(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.delenv(preflight.ALLOW_CPU, raising=False)
    pipe = load_config(profile="paper")  # its full fine-tunes claim 4 GPUs
    assert preflight.gpus_needed(pipe) == 4
    problems, _ = preflight.check_devices(pipe)
    assert "a job claims 4 GPUs, 1 visible" in problems[0]
    assert preflight.check_devices(pipe, cluster=True) == ([], [])
    assert preflight.check_devices(load_config(profile="mini")) == ([], [])  # a CPU profile


def test_a_bad_prompts_file_is_named(cpu_only, gpu_data):
    (gpu_data / "babilong" / "prompts.py").write_text("DEFAULT_TEMPLATE = 1\n")
    problems = preflight.check_data(load_config(profile="gpu-small"))
    assert len(problems) == 1 and problems[0].startswith("BABILong: ")
    assert "DEFAULT_TEMPLATE" in problems[0]


def test_missing_longbench_metric_packages_stop_before_any_job(cpu_only, gpu_data, monkeypatch):
    """The GPU check of 2026-12-04 found it: without `rouge` the LongBench-E job generated,
    then failed at its first summary dataset's score."""
    import importlib.util

    from lsa.evaluate import longbench

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("rouge", "rapidfuzz") else real(name, *a))
    pipe = load_config(profile="gpu-small")
    assert longbench.missing_metric_packages(["qasper", "trec"]) == []  # no package needed
    assert longbench.missing_metric_packages(["lcc", "samsum"]) == ["rapidfuzz", "rouge"]
    problems = preflight.check_data(pipe)
    assert problems == ["LongBench-E: the metrics need rapidfuzz, rouge: pip install "
                        "'lsa[longbench]' (or make install)"]
    assert preflight.check_data(load_config(profile="mini")) == []  # no LongBench-E jobs


def test_a_job_that_does_not_fit_its_gpu_stops_the_pipeline(cpu_only, gpu_data, monkeypatch):
    from lsa.pipeline import workflow_settings

    monkeypatch.setenv(preflight.ALLOW_CPU, "1")
    pipe = load_config(profile="paper", overrides={"profiles": {"paper": {"finetune": {
        "method_processes": {"eabf": 1}}}}})  # EABF on one GPU
    report = preflight.preflight(pipe, hub=False)
    memory = [p for p in report.problems if p.startswith("memory: ")]
    assert [p.split(":")[1].strip() for p in memory] == ["finetune eabf_a0_s0",
                                                         "finetune eabf_a0.1_s0"]
    assert "80 GB GPU" in memory[0] and "finetune.method_processes" in memory[0]
    assert workflow_settings().resources("paper", "finetune").gpu_mem_gb == 80


def test_a_single_job_never_falls_back_to_the_cpu_silently(cpu_only, monkeypatch):
    pipe = load_config(profile="gpu-small")
    from lsa.runs import runs_of

    run_ = runs_of(pipe).base
    with pytest.raises(RuntimeError, match="claims 1 GPU but CUDA is not available"):
        preflight.job_notes(pipe, run_, 1)
    assert preflight.job_notes(pipe, run_, 0) == []  # --gpus 0: the user's explicit choice
    monkeypatch.setenv(preflight.ALLOW_CPU, "1")
    assert "running on the CPU" in preflight.job_notes(pipe, run_, 1, memory=2**40)[0]
    paper = load_config(profile="paper")
    lora = runs_of(paper).get("finetune", "longqlora_a0_s0")
    assert any("NF4 configured" in n for n in preflight.job_notes(paper, lora, 1,
                                                                   memory=2**40))
    monkeypatch.delenv(preflight.ALLOW_CPU)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(preflight, "bitsandbytes_cuda", lambda: "bitsandbytes is not installed")
    with pytest.raises(RuntimeError, match="NF4 weights are configured but bitsandbytes"):
        preflight.job_notes(paper, lora, 1)


def test_the_job_command_stops_before_any_compute(cpu_only, capsys):
    from lsa import __main__ as cli

    assert cli.main(["pretrain", "--profile", "gpu-small"]) == cli.EXIT["check"]
    assert "CUDA is not available" in capsys.readouterr().err


def test_the_data_files_are_rule_inputs(gpu_data, out_root):
    from lsa.runs import runs_of

    pipe = load_config(profile="gpu-small")
    kinds = {r.kind for r in runs_of(pipe)}
    assert {"longbench", "babilong-eval"} <= kinds
    assert len(preflight.data_files(pipe, "longbench")) == 15
    assert preflight.data_files(pipe, "babilong-eval") == [
        str(gpu_data / "babilong" / "prompts.py")]
    assert preflight.data_files(pipe, "finetune") == []
    assert preflight.data_files(load_config(profile="smoke"), "longbench") == []  # fixture


def test_snakemake_stops_at_dag_time_on_a_missing_data_file(gpu_data, out_root):
    (gpu_data / "longbench" / "qasper_e.jsonl").unlink()  # $LSA_DATA_DIR/longbench is used
    out = run([tool("snakemake"), "-n", "--config", "profile=gpu-small"])
    assert out.returncode != 0
    assert "Missing input files" in out.stdout + out.stderr
    assert "longbench/qasper_e.jsonl" in out.stdout + out.stderr


def test_a_cpu_profile_claims_no_gpu_even_with_several_processes(cpu_only, no_data,
                                                                  monkeypatch):
    """A multi-process run asks a GPU per process, but on a CPU profile (gpu: 0 for its kind)
    it runs its processes on the CPU (gloo): nothing to stop; books the first job can still
    fetch (npm) are no problem either."""
    pipe = load_config(profile="smoke", overrides={"profiles": {"smoke": {"finetune": {
        "optim": {"grad_accum": 2},
        "runs": [{"name": "pi2p", "method": "pi", "alpha": 0.1, "processes": 2}]}}}})
    assert preflight.gpus_needed(pipe) == 0
    assert preflight.check_devices(pipe) == ([], [])
    monkeypatch.setattr(preflight, "npm_available", lambda: True)
    assert preflight.check_data(pipe) == []


def test_the_cpu_is_offered_and_accepted_only_where_the_jobs_fit_the_hosts_memory(
        cpu_only, gpu_data, monkeypatch):
    """paper's full fine-tuning of a 7B model needs about 130 GiB: on a 23 GiB machine the
    pre-flight does not offer LSA_ALLOW_CPU, refuses it when set, and so does a job by hand."""
    from lsa import plan
    from lsa.runs import runs_of

    paper = load_config(profile="paper")
    biggest = max((p for p in plan.plan_profile(paper) if p.gpus),
                  key=lambda p: p.memory_bytes * p.processes)  # the processes share the host
    need = biggest.memory_gib * biggest.processes
    assert need > 100 and biggest.kind == "finetune"
    small, large = 23 * plan.GIB, 2**40
    (problem,), _ = preflight.check_devices(paper, memory=small)
    assert "CPU-only build" in problem and "LSA_ALLOW_CPU" not in problem
    assert f"{biggest.kind} {biggest.name} needs about {need:.0f} GiB" in problem
    assert "this machine has 23 GiB" in problem
    assert "LSA_ALLOW_CPU=1" in preflight.check_devices(paper, memory=large)[0][0]
    monkeypatch.setenv(preflight.ALLOW_CPU, "1")
    (problem,), notes = preflight.check_devices(paper, memory=small)
    assert problem.startswith("devices: LSA_ALLOW_CPU is set, but ") and notes == []
    assert preflight.check_devices(paper, memory=large)[0] == []
    run_ = runs_of(paper).get("finetune", biggest.name)
    with pytest.raises(RuntimeError, match="needs about .* GiB by the plan's estimate"):
        preflight.job_notes(paper, run_, 1, memory=small)
    assert preflight.host_memory() > 0


def test_a_books_dir_that_points_nowhere_is_named_by_its_key(cpu_only, no_data, tmp_path):
    """The message names the real key (pretrain.data.books_dir) and the folder it gives."""
    def problems(books_dir):
        pipe = load_config(profile="smoke", overrides={"profiles": {"smoke": {"pretrain": {
            "data": {"books_dir": str(books_dir)}}}}})
        return [p for p in preflight.check_data(pipe, hub=False) if p.startswith("books")]

    (nowhere,) = problems(tmp_path / "no such")
    assert f"pretrain.data.books_dir = {str(tmp_path / 'no such')!r} does not exist" in nowhere
    (tmp_path / "empty").mkdir()
    assert "holds no .txt books" in problems(tmp_path / "empty")[0]
    (tmp_path / "empty" / "a.txt").write_text("A book. " * 50)
    assert problems(tmp_path / "empty") == []
