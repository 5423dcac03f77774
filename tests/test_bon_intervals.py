"""Best-of-N figures carry a 95% bootstrap interval over problems (issue 42: the world's table)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from labeler.evaluation.best_of_n import MAJORITY, PASS, Pool, bootstrap_ci95, estimate


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=40))
def test_the_interval_holds_the_mean_and_lies_within_the_values(values):
    low, high = bootstrap_ci95(values)
    mean = sum(values) / len(values)
    assert min(values) - 1e-9 <= low <= mean + 1e-9 and mean - 1e-9 <= high <= max(values) + 1e-9
    assert bootstrap_ci95(values) == [low, high]  # seeded: the same interval every run


def test_one_value_everywhere_has_no_width_and_no_problem_has_none():
    assert bootstrap_ci95([0.5] * 10) == [0.5, 0.5]
    assert all(math.isnan(x) for x in bootstrap_ci95([]))


def test_estimate_gives_each_method_an_interval_per_n():
    pools = [Pool(f"p{i}", (i % 2 == 0, False, i % 3 == 0), ("1", "2", "1" if i % 3 == 0 else "3")) for i in range(30)]
    curves = estimate(pools, [1, 3])
    for method in (PASS, MAJORITY):
        assert len(curves.ci95[method]) == 2
        for (low, high), value in zip(curves.ci95[method], curves.accuracy[method]):
            assert low <= value <= high
    assert curves.ci95[PASS][1][0] < curves.accuracy[PASS][1] < curves.ci95[PASS][1][1]  # 30 problems that differ: a real width
