"""The regularizer's cost benchmark (lsa/bench.py) end to end: ``bench jobs`` times every
setting of a kind in processes of its own."""

def test_bench_jobs_measures_every_setting_of_a_kind():
    from lsa.throughput import SETTINGS, bench, markdown

    result = bench("smoke", ("evaluation",), seconds=0.3, progress=False)["evaluation"]
    assert [len(result["units_per_s"][s]) for s in SETTINGS] == [1, 1, 2]  # the pair: 2 jobs
    assert all(rate > 0 for rates in result["units_per_s"].values() for rate in rates)
    assert result["best_threads"] == (1 if result["pair"] > result["speedup_2t"] else 2)
    assert "| evaluation |" in markdown("smoke", {"evaluation": result}, 0.3)
