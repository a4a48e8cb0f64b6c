"""A paper's claimed speed-up (``"1.3-1.8x"`` on TTFT P50) and the verdict of a measured one.

The second source article's §3.2: "if the paper says INT8 gives 1.5–2× and you measure 1.1×,
look for the bottleneck elsewhere". A claim is a range of speed-ups (baseline / strategy, so
> 1 is faster) on one metric percentile. The verdict compares the measured speed-up and its
interval — the baseline's 95 % confidence interval over the strategy's, the widest ratio the
two intervals allow — with the claimed range:

- ``within`` (✓): the measured speed-up lies in the claimed range;
- ``noise`` (~): it lies outside, but its interval still reaches into the range;
- ``outside`` (✗): its whole interval lies outside the range;
- ``n/a``: no figure (a failed strategy or no data).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Optional

from ..bench._compare import Comparison, parse_metric

__all__ = ["Claim", "ClaimVerdict", "judge_claim", "parse_claim", "speedup_interval"]

_NUM = r"(\d+(?:\.\d+)?)"
_X = r"\s*[x×]?"
_RANGE = re.compile(rf"^{_NUM}{_X}\s*(?:-|–|—|to|\.\.)\s*{_NUM}\s*[x×]$")
_AT_LEAST = re.compile(rf"^(?:>=|≥|at least\s+)?\s*{_NUM}\s*[x×]$")

SYMBOLS = {"within": "✓", "noise": "~", "outside": "✗", "n/a": "-"}


@dataclass(frozen=True)
class Claim:
    """A claimed speed-up range on one metric percentile (``high`` ``None`` = "at least ``low``")."""

    low: float
    high: Optional[float]
    metric: str = "ttft:p50"
    text: str = ""

    def __str__(self) -> str:
        rng = f"≥{self.low:g}×" if self.high is None else f"{self.low:g}–{self.high:g}×"
        return f"{rng} {self.metric}"

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in the claimed range."""
        return self.low <= value and (self.high is None or value <= self.high)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        return {"low": self.low, "high": self.high, "metric": self.metric, "text": self.text}


def parse_claim(text: str, metric: str = "ttft:p50") -> Claim:
    """``"1.3-1.8x"``, ``"1.3–1.8×"``, ``"2x"`` or ``">=2x"`` (at least) on ``metric``; ``ValueError`` says why not."""
    t = str(text).strip().lower()
    m = _RANGE.match(t)
    if m:
        low, high = float(m[1]), float(m[2])
    else:
        m = _AT_LEAST.match(t)
        if not m:
            raise ValueError(f"a claim looks like '1.3-1.8x' or '>=2x', got {text!r}")
        low, high = float(m[1]), None
    if low <= 0 or (high is not None and high < low) or not math.isfinite(low):
        raise ValueError(f"a claim's range must be positive and low <= high, got {text!r}")
    parse_metric(metric)
    return Claim(low, high, metric, str(text).strip())


def speedup_interval(c: Comparison) -> tuple[Optional[float], Optional[float]]:
    """The speed-up's widest range the two 95 % intervals allow (`Comparison.speedup_range`)."""
    return c.speedup_range()


@dataclass(frozen=True)
class ClaimVerdict:
    """A claim against what was measured."""

    claim: Claim
    status: str
    """``within``, ``noise``, ``outside`` or ``n/a`` (module docstring)."""
    measured: Optional[float] = None
    lo: Optional[float] = None
    hi: Optional[float] = None

    @property
    def symbol(self) -> str:
        """✓, ~, ✗ or -."""
        return SYMBOLS[self.status]

    @property
    def text(self) -> str:
        """``✓ 1.52× (claimed 1.3–1.8× tpot:p50)`` or ``✗ measured 1.05× [0.98–1.12] (claimed ...)``."""
        if self.measured is None:
            return f"- no figure (claimed {self.claim})"
        top = "∞" if self.hi is not None and math.isinf(self.hi) else f"{self.hi:.2f}"
        rng = "" if self.lo is None or self.hi is None else f" [{self.lo:.2f}–{top}]"
        if self.status == "within":
            return f"✓ {self.measured:.2f}×{rng} (claimed {self.claim})"
        return f"{self.symbol} measured {self.measured:.2f}×{rng} (claimed {self.claim})"

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        hi = None if self.hi is not None and math.isinf(self.hi) else self.hi  # JSON has no infinity: unbounded is null
        return {"claim": self.claim.to_dict(), "status": self.status, "measured": self.measured, "lo": self.lo,
                "hi": hi, "text": self.text}  # fmt: skip


def judge_claim(claim: Claim, comparison: Optional[Comparison]) -> ClaimVerdict:
    """The verdict of ``claim`` given the comparison of its metric (strategy against baseline)."""
    if comparison is None or comparison.speedup is None:
        return ClaimVerdict(claim, "n/a")
    value = comparison.speedup
    lo, hi = speedup_interval(comparison)
    if claim.contains(value):
        status = "within"
    elif lo is not None and hi is not None and hi >= claim.low and (claim.high is None or lo <= claim.high):
        status = "noise"
    else:
        status = "outside"
    return ClaimVerdict(claim, status, value, lo, hi)
