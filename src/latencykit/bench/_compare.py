"""Comparing runs and strategies: speed-ups, significance, and the CI regression gate.

A difference is *significant* when the two 95 % confidence intervals of the percentile do
not overlap (a conservative test, about 1 % false alarms for equal distributions). The gate
(`gate`) fails only on a regression beyond the threshold **and** significant — a slower
figure inside the noise never fails a build.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ._cell import BenchRun, Cell
from ._load import SKETCHED
from ._stats import Pct, percentiles

__all__ = ["Comparison", "compare_cells", "compare_runs", "gate", "parse_metric", "strategy_table"]

_Q = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p99.9": 0.999, "p999": 0.999}


def parse_metric(text: str) -> tuple[str, float, str]:
    """``ttft:p99`` → (``ttft``, 0.99, ``p99``); ``ValueError`` names a bad metric or percentile."""
    metric, _, pct = text.strip().partition(":")
    pct = pct or "p50"
    if metric not in SKETCHED:
        raise ValueError(f"metric must be one of {', '.join(SKETCHED)}; got {metric!r} in {text!r}")
    if pct not in _Q:
        raise ValueError(f"percentile must be one of {', '.join(_Q)}; got {pct!r} in {text!r}")
    return metric, _Q[pct], pct


@dataclass(frozen=True)
class Comparison:
    """One metric percentile of a candidate cell against a baseline cell."""

    cell: str
    metric: str
    pct: str
    base: Pct
    new: Pct

    @property
    def change(self) -> Optional[float]:
        """Relative change, new / base − 1 (positive = slower)."""
        b, n = self.base.value, self.new.value
        return None if b is None or n is None or b == 0 else n / b - 1

    @property
    def speedup(self) -> Optional[float]:
        """base / new (> 1 = faster)."""
        b, n = self.base.value, self.new.value
        return None if b is None or n is None or n == 0 else b / n

    @property
    def significant(self) -> bool:
        """The 95 % confidence intervals do not overlap."""
        b, n = self.base, self.new
        if None in (b.lo, b.hi, n.lo, n.hi):
            return False
        return n.lo > b.hi or n.hi < b.lo  # type: ignore[operator]

    def regression(self, threshold: float) -> bool:
        """Slower by more than ``threshold`` (0.1 = 10 %) and beyond noise."""
        c = self.change
        return c is not None and c > threshold and self.significant

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        return {"cell": self.cell, "metric": self.metric, "pct": self.pct, "base": self.base.to_dict(),
                "new": self.new.to_dict(), "change": self.change, "speedup": self.speedup, "significant": self.significant}  # fmt: skip


def compare_cells(base: Cell, new: Cell, metrics: Sequence[str], name: Optional[str] = None) -> list[Comparison]:
    """Each ``metric:pct`` of ``new`` against ``base``."""
    out = []
    for text in metrics:
        metric, q, pct = parse_metric(text)
        b = percentiles(base.sketches[metric], [q])[q]
        n = percentiles(new.sketches[metric], [q])[q]
        out.append(Comparison(name or new.key, metric, pct, b, n))
    return out


def compare_runs(base: BenchRun, new: BenchRun, metrics: Sequence[str]) -> list[Comparison]:
    """Cells matched by key (two single-cell runs are matched whatever their labels)."""
    if len(base.cells) == 1 and len(new.cells) == 1:
        return compare_cells(base.cells[0], new.cells[0], metrics, new.cells[0].key)
    out: list[Comparison] = []
    for cell in new.cells:
        match = next((c for c in base.cells if c.key == cell.key), None)
        if match is not None:
            out.extend(compare_cells(match, cell, metrics))
    if not out:
        raise ValueError("the two runs have no cell in common (same strategy, labels and load level)")
    return out


def gate(comparisons: Sequence[Comparison], threshold: float) -> list[Comparison]:
    """The comparisons that regress beyond ``threshold`` and beyond noise."""
    return [c for c in comparisons if c.regression(threshold)]


def strategy_table(run: BenchRun, metrics: Sequence[str] = ("ttft:p50", "ttft:p99", "e2e:p50", "e2e:p99")) -> list[Comparison]:
    """Every cell against the first cell at the same load level (the baseline strategy)."""
    out: list[Comparison] = []
    baselines: dict[str, Cell] = {}
    for cell in run.cells:
        base = baselines.setdefault(cell.level, cell)
        if base is not cell:
            out.extend(compare_cells(base, cell, metrics, cell.key))
    return out
