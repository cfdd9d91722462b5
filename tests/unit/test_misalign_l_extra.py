"""The l_extra settings of Section 5.3's item 3 (lsa.misalign.sample_l_extra) against the
rebuttal's later description of them (docs/methods.md, "l_extra settings"): each setting drawn
many times at the testbed's window and at windows that l/4 does not divide."""

import pytest
import torch
from scipy.stats import chisquare

from lsa import misalign as M

#: the rebuttal's later description, inclusive integer ranges, l/k rounded down: 1 the paper's
#: windowing [1, l/2], 2 "a narrower range" [1, l/4], 3 "a shifted range" [l/4, l/2], 4 "a
#: broader range" [1, l]
RANGES = {1: lambda l: (1, l // 2), 2: lambda l: (1, l // 4), 3: lambda l: (l // 4, l // 2),
          4: lambda l: (1, l)}


@pytest.mark.parametrize("l_train", [256, 30, 9])
@pytest.mark.parametrize("setting", [1, 2, 3, 4])
def test_each_setting_draws_exactly_its_range_uniformly(setting, l_train):
    low, high = RANGES[setting](l_train)
    size = high - low + 1
    g = torch.Generator().manual_seed(setting * 1000 + l_train)
    draws = [M.sample_l_extra(l_train, setting, g) for _ in range(200 * size)]
    assert (min(draws), max(draws)) == (low, high)
    assert set(draws) == set(range(low, high + 1))  # the support: every value, no other
    counts = [draws.count(v) for v in range(low, high + 1)]
    assert chisquare(counts).pvalue > 1e-4  # uniform on the range (200 draws a value)


def test_settings_2_and_3_split_setting_1s_range_at_a_quarter():
    """Under the rebuttal's first description (|l1 - l2| below or above l/4) settings 2 and 3
    trade places; in ours they are the two parts of setting 1's range, meeting at l/4, and
    only setting 4 draws l_extra above l/2 (the paper's positions then empty)."""
    g = torch.Generator().manual_seed(7)
    for l_train in (256, 30, 9):
        drawn = {s: {M.sample_l_extra(l_train, s, g) for _ in range(50 * l_train)}
                 for s in (1, 2, 3, 4)}
        assert drawn[2] | drawn[3] == drawn[1] and drawn[2] & drawn[3] == {l_train // 4}
        assert {s for s in drawn if max(drawn[s]) > l_train // 2} == {4}
