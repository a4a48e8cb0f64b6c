"""The one percentile rule latencykit reports: nearest rank (the inverse of the empirical CDF).

The q-quantile of n values is the value at 1-based rank ``ceil(q·n)`` of the sorted values
(rank 1 for q = 0), i.e. ``np.quantile(values, q, method="inverted_cdf")``: the smallest
value with at least a share q of the values at or below it. Every reported quantile is a
value that was observed, never an interpolation, and P99 over fewer than 100 values is the
maximum — the slowest call is never hidden from the tail.
"""

from __future__ import annotations

import math

__all__ = ["nearest_rank"]


def nearest_rank(q: float, n: int) -> int:
    """0-based index of the q-quantile among ``n`` sorted values: ``ceil(q·n) − 1``, clipped to [0, n−1]."""
    return min(max(math.ceil(q * n) - 1, 0), n - 1)
