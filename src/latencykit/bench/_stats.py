"""Percentiles with distribution-free confidence intervals, SLO parsing, and a chi-square p-value.

Confidence interval of the q-quantile from n samples: the order statistics at ranks
``n·q ∓ z·sqrt(n·q·(1-q))`` (normal approximation of the binomial count of samples below
the true quantile; z = 1.96 for 95 %). They are read from the sketch, so they stay exact
after merging and carry the sketch's relative error α on top. A percentile is flagged
unreliable when n < 10 / (1 - q) (e.g. P99 from fewer than 1,000 samples).

When a rank falls outside the sample (the upper one for P99 from fewer than about 400
samples; either one for P50 from fewer than about 8), the sample does not bound the
quantile on that side: the bound shown is the largest (smallest) value seen and the side is
marked *open* (`Pct.hi_open`, `Pct.lo_open`). Comparisons never call a difference
significant across an open side — 20 requests cannot show that a P99 moved, however far
their slowest value lies from the baseline's.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ..telemetry._sketch import PercentileSketch
from ..telemetry._slo import SLO

__all__ = ["QUANTILES", "Pct", "chi_square_p", "parse_slo", "percentiles", "quantile_ranks"]

QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.95, 0.99, 0.999)
Z95 = 1.959964


@dataclass(frozen=True)
class Pct:
    """One percentile: its value and 95 % confidence interval (seconds), and whether n is enough."""

    q: float
    value: Optional[float]
    lo: Optional[float]
    hi: Optional[float]
    n: int
    lo_open: bool = False
    """The sample does not bound the quantile from below: ``lo`` is only the smallest value seen."""
    hi_open: bool = False
    """The sample does not bound the quantile from above: ``hi`` is only the largest value seen."""

    @property
    def lower(self) -> Optional[float]:
        """The interval's lower bound, ``None`` when there is none (open side or no samples)."""
        return None if self.lo_open else self.lo

    @property
    def upper(self) -> Optional[float]:
        """The interval's upper bound, ``None`` when there is none (open side or no samples)."""
        return None if self.hi_open else self.hi

    @property
    def reliable(self) -> bool:
        """n >= 10 / (1 - q)."""
        return self.n >= 10 / (1 - self.q) if self.q < 1 else self.n > 0

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        return {"q": self.q, "value": self.value, "lo": self.lo, "hi": self.hi, "n": self.n, "reliable": self.reliable,
                "lo_open": self.lo_open, "hi_open": self.hi_open}  # fmt: skip


def quantile_ranks(q: float, n: int, z: float = Z95) -> tuple[int, int]:
    """The 0-based ranks, among ``n`` sorted samples, of the q-quantile's confidence interval
    (``n·q ∓ z·sqrt(n·q·(1-q))``, widened outwards by one rank). Not clamped: a rank below 0 or
    above ``n - 1`` means the sample does not bound the quantile on that side."""
    half = z * math.sqrt(n * q * (1 - q))
    return math.floor(n * q - half) - 1, math.ceil(n * q + half)


def percentiles(sketch: PercentileSketch, qs: Sequence[float] = QUANTILES) -> dict[float, Pct]:
    """Each quantile of ``sketch`` with its confidence interval (``None`` values when empty)."""
    n = sketch.count
    if n == 0:
        return {q: Pct(q, None, None, None, 0) for q in qs}
    wanted: list[float] = []
    opens: list[tuple[bool, bool]] = []
    for q in qs:
        lo_rank, hi_rank = quantile_ranks(q, n)
        opens.append((lo_rank < 0, hi_rank > n - 1))
        lo_rank, hi_rank = max(0, lo_rank), min(n - 1, hi_rank)
        # The sketch answers nearest-rank quantiles (0-based index ceil(q·n) − 1): (r + 0.5) / n reads index r.
        wanted += [q, (lo_rank + 0.5) / n, (hi_rank + 0.5) / n]
    values = sketch.quantiles([min(max(w, 0.0), 1.0) for w in wanted])
    return {q: Pct(q, values[3 * i], values[3 * i + 1], values[3 * i + 2], n, *opens[i]) for i, q in enumerate(qs)}


_SLO_RE = re.compile(r"^(?P<metric>[a-z_][a-z0-9_]*)(?::p(?P<pct>[0-9.]+))?\s*<=?\s*(?P<value>[0-9.]+)\s*(?P<unit>ms|s)$")


def parse_slo(text: str) -> SLO:
    """``ttft<=300ms``, ``e2e:p99<=2s``, ``tpot:p95<50ms`` → `SLO` (per-request threshold; percentile for reports)."""
    m = _SLO_RE.match(text.strip().lower())
    if not m:
        raise ValueError(f"SLO must look like 'ttft<=300ms' or 'e2e:p99<=2s', got {text!r}")
    value = float(m["value"]) / (1000.0 if m["unit"] == "ms" else 1.0)
    pct = float(m["pct"]) / 100 if m["pct"] else 0.95
    return SLO(m["metric"], value, pct, text.strip())


def chi_square_p(statistic: float, df: int) -> float:
    """Upper-tail p-value of the chi-square distribution (regularized incomplete gamma, series/continued fraction)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df!r}")
    if statistic <= 0:
        return 1.0
    a, x = df / 2.0, statistic / 2.0
    if x < a + 1:  # series for the lower regularized gamma P(a, x)
        term = total = 1.0 / a
        k = a
        for _ in range(1000):
            k += 1
            term *= x / k
            total += term
            if term < total * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(-x + a * math.log(x) - math.lgamma(a)))
    # Lentz's continued fraction for the upper regularized gamma Q(a, x)
    b, c, d = x + 1 - a, 1e300, 1.0 / (x + 1 - a)
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return min(1.0, math.exp(-x + a * math.log(x) - math.lgamma(a)) * h)
