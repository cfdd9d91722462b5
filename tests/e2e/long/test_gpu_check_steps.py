"""scripts/gpu_check.py on the CPU: one training step of each gpu-small job kind at its shapes
(minutes; its report and failure handling: tests/workflow/test_gpu_check.py)."""

from support.gpu_check import load_script


def test_one_step_of_each_gpu_small_job_kind_runs_on_the_cpu(tmp_path, monkeypatch):
    """With the override set and stand-in benchmark files (job_kinds writes them), one
    optimizer step of each gpu-small job kind at the profile's shapes (its 60M model, windows,
    batch sizes and lengths; the fewest evaluation samples) runs through lsa.jobs as the
    pipeline runs it, after a pre-flight that finds nothing missing."""
    monkeypatch.setenv("LSA_ALLOW_CPU", "1")
    monkeypatch.setenv("LSA_OUTPUT_ROOT", str(tmp_path / "unused"))  # restored afterwards
    monkeypatch.setenv("LSA_DATA_DIR", str(tmp_path / "unused"))
    report = load_script().job_kinds(tmp_path, "gpu-small", steps=1)
    assert report["preflight"]["problems"] == []
    assert any("run on the CPU" in note for note in report["preflight"]["notes"])
    jobs = report["jobs"]
    assert [k.split()[0] for k in jobs] == ["base", "finetune", "babilong-eval", "longbench",
                                           "probe"]
    assert all(job["finished"] for job in jobs.values())
    assert all(job["plan_gib"] > 0 for job in jobs.values())
    preds = list((tmp_path / "outputs").rglob("pred/*.jsonl"))
    assert len(preds) == 13  # LongBench-E's answers, one file per dataset
