"""The interval and verdict `benchmarks/overhead.py --only async` prints beside each paired ratio."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from overhead_async import GOAL, median_interval, verdict  # noqa: E402


def test_interval_holds_the_sign_test_table_ranks() -> None:
    # Published 95 % confidence ranks for the median (sign test): n=15 -> 4th and 12th,
    # n=25 -> 8th and 18th, n=100 -> 40th and 61st. The bench's rule (shared with its
    # percentile intervals) is one rank wider on each side where rounding leaves it short.
    for n, (lo, hi) in {15: (4, 12), 25: (8, 18), 100: (40, 61)}.items():
        med, low, high = median_interval([float(k) for k in range(1, n + 1)])
        assert lo - 1 <= low <= lo and hi <= high <= hi + 1
        assert low <= med <= high
    assert median_interval([float(k) for k in range(1, 101)])[1:] == (40.0, 61.0)


def test_order_of_rounds_does_not_matter_and_interval_narrows_with_more_rounds() -> None:
    rng = random.Random(7)
    ratios = [1.04 * rng.lognormvariate(0, 0.14) for _ in range(400)]
    assert median_interval(ratios) == median_interval(sorted(ratios, reverse=True))
    _, lo_few, hi_few = median_interval(ratios[:25])
    _, lo_many, hi_many = median_interval(ratios)
    assert hi_many - lo_many < hi_few - lo_few
    assert lo_many < 1.04 < hi_many  # the true median of the spread is inside


def test_verdict_reads_the_whole_interval_against_the_goal() -> None:
    assert GOAL == 1.05
    assert verdict(0.99, 1.05) == "within"
    assert verdict(1.051, 1.08) == "over"
    assert verdict(1.02, 1.07) == "unsure"


@pytest.mark.parametrize("ratios", [[1.0], [1.2, 0.9]])
def test_few_rounds_give_the_widest_interval(ratios: list[float]) -> None:
    med, lo, hi = median_interval(ratios)
    assert lo == min(ratios) and hi == max(ratios)
