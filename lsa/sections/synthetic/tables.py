"""Section 3's results as tables (DataFrames in, DataFrames out): the in-range and
out-of-range test MSE of every run (``per_run_summary``), their mean and spread over seeds
(``summarize``, Figure 1's summary) and the scale-free out-of-range error the claims read
(``relative_rmse``). ``per_length``: one row per (run, test length), as
``lsa.synthetic.run_grid`` makes it."""

from __future__ import annotations

import math

import pandas as pd

from lsa.config import SyntheticConfig


def per_run_summary(per_length: pd.DataFrame, cfg: SyntheticConfig) -> pd.DataFrame:
    """In-range and out-of-range test MSE of every run (one row per replicate).

    The MSE of a range is the unweighted mean of its per-length MSEs (each length counts once).
    """
    keys = ["task", "encoding", "transform", "replicate"]
    inside = per_length["length"].between(cfg.train_min_len, cfg.train_max_len)
    outside = per_length["length"] > cfg.train_max_len
    return pd.concat({"in_range": per_length[inside].groupby(keys)["mse"].mean(),
                      "out_of_range": per_length[outside].groupby(keys)["mse"].mean()},
                     axis=1).reset_index()


def summarize(per_length: pd.DataFrame, cfg: SyntheticConfig) -> pd.DataFrame:
    """Mean and standard deviation over seeds of the in-range and out-of-range MSE."""
    return per_run_summary(per_length, cfg).groupby(["task", "encoding", "transform"]).agg(
        in_range_mean=("in_range", "mean"), in_range_std=("in_range", "std"),
        out_of_range_mean=("out_of_range", "mean"), out_of_range_std=("out_of_range", "std"),
        seeds=("replicate", "count"),
    ).reset_index()


def relative_rmse(per_length: pd.DataFrame, cfg: SyntheticConfig) -> pd.DataFrame:
    """Out-of-range RMSE relative to the mean size of the target at each length.

    Scale-free, so "generalizes" means the same for a target in [0, 1] and for one that grows
    with length: ``sqrt(MSE(l)) / E|y|(l)``, averaged over the out-of-range lengths.
    """
    expected = {"mean": lambda l: 0.5, "mean_uniform": lambda l: 0.5,
                "length": lambda l: float(l), "sum": lambda l: l / 2}
    out = per_length[per_length["length"] > cfg.train_max_len].copy()
    out["rel_rmse"] = [math.sqrt(m) / expected[t](l)
                       for m, t, l in zip(out["mse"], out["task"], out["length"])]
    return (out.groupby(["task", "encoding", "transform", "replicate"])["rel_rmse"].mean()
            .reset_index())

