"""Comparing runs and strategies: speed-ups, significance, and the CI regression gate.

A difference is *significant* when the two 95 % confidence intervals of the percentile do
not overlap (a conservative test, about 1 % false alarms for equal distributions); a side the
sample does not bound (P99 from a few dozen requests) never separates. The gate
(`gate`) fails only on a regression beyond the threshold **and** significant — a slower
figure inside the noise never fails a build.

`gate_runs` is the whole CI gate over two run files. Cells are paired by strategy, labels and
load level (two single-cell runs whatever their labels; ``match_load="any"`` also pairs
different load levels). It fails when a gated percentile regresses (above), when the share of
failed requests (errors and interrupted streams, warm-up and control left out) rises by more
than ``max_error_increase`` (1 percentage point) **and** a one-sided Fisher exact test on the
two counts gives p < ``alpha`` (0.01), when a cell has no completed request on either side, and
when a cell exists on one side only (unless ``allow_missing``). From a base without failures,
7 failed requests in an equally sized run always give p < 0.01 (6 give about 0.015 from a few
dozen requests up): so 0 % → 5 % fails from 140 requests per cell; two runs with equal
failure rates pass at least 99 % of the time (always when neither fails).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from ._cell import BenchRun, Cell
from ._load import SKETCHED
from ._stats import Pct, percentiles

__all__ = [
    "ALPHA", "MATCH_LOAD", "Comparison", "ErrorComparison", "GateResult", "compare_cells", "compare_runs",
    "fisher_greater", "gate", "gate_runs", "match_cells", "parse_metric", "strategy_table",
]  # fmt: skip

ALPHA = 0.01
"""Significance level of the error-rate test (one-sided Fisher exact test)."""
MATCH_LOAD = ("same", "any")
"""How cells pair across runs: at the same load level only (default), or at any level."""

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

    def speedup_range(self) -> tuple[Optional[float], Optional[float]]:
        """The widest speed-up the two 95 % intervals allow: (base lo / new hi, base hi / new lo).

        A side the sample does not bound (`Pct.hi_open`, `Pct.lo_open`) widens it to 0 or infinity
        on that side; ``(None, None)`` without data."""
        b, n = self.base, self.new
        if b.lo is None or b.hi is None or n.lo is None or n.hi is None:
            return None, None
        lo = 0.0 if b.lo_open or n.hi_open or b.lo == 0 else (b.lo / n.hi if n.hi else None)
        hi = math.inf if b.hi_open or n.lo_open else (b.hi / n.lo if n.lo else None)
        return lo, hi

    @property
    def significant(self) -> bool:
        """The 95 % confidence intervals do not overlap (an open side, `Pct.hi_open`, overlaps everything beyond it)."""
        b, n = self.base, self.new
        slower = n.lower is not None and b.upper is not None and n.lower > b.upper
        faster = n.upper is not None and b.lower is not None and n.upper < b.lower
        return slower or faster

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


def match_cells(base: BenchRun, new: BenchRun, match_load: str = "same") -> tuple[list[tuple[Cell, Cell]], list[Cell], list[Cell]]:
    """(base, new) pairs, base-only cells, new-only cells.

    Cells pair by key (label and load level); two single-cell runs pair whatever their labels.
    Cells at different load levels never pair unless ``match_load="any"``: then cells pair by
    label, the i-th level of a label in ``base`` with its i-th level in ``new``.
    """
    if match_load not in MATCH_LOAD:
        raise ValueError(f"match_load must be one of {', '.join(MATCH_LOAD)}; got {match_load!r}")
    if len(base.cells) == 1 and len(new.cells) == 1:
        b, n = base.cells[0], new.cells[0]
        return ([(b, n)], [], []) if match_load == "any" or b.level == n.level else ([], [b], [n])
    left, pairs, new_only = list(base.cells), [], []
    for cell in new.cells:
        match = next((c for c in left if (c.key == cell.key if match_load == "same" else c.label == cell.label)), None)
        if match is None:
            new_only.append(cell)
        else:
            left.remove(match)
            pairs.append((match, cell))
    return pairs, left, new_only


def _pair_name(b: Cell, n: Cell) -> str:
    return n.key if b.level == n.level else f"{n.key} (base {b.level})"


def compare_runs(base: BenchRun, new: BenchRun, metrics: Sequence[str], match_load: str = "same") -> list[Comparison]:
    """Each paired cell's ``metrics`` (`match_cells`); ``ValueError`` when no cell pairs."""
    out: list[Comparison] = []
    for b, n in match_cells(base, new, match_load)[0]:
        out.extend(compare_cells(b, n, metrics, _pair_name(b, n)))
    if not out:
        raise ValueError("the two runs have no cell in common (same strategy, labels and load level)")
    return out


def fisher_greater(base_failed: int, base_n: int, new_failed: int, new_n: int) -> float:
    """One-sided Fisher exact p-value that the new failure rate exceeds the base's.

    P(X >= ``new_failed``) for X hypergeometric: ``new_n`` requests drawn from all
    ``base_n + new_n``, of which ``base_failed + new_failed`` failed. 1.0 when either side is empty.
    """
    total, failed = base_n + new_n, base_failed + new_failed
    if base_n <= 0 or new_n <= 0 or failed == 0:
        return 1.0

    def log_choose(n: int, k: int) -> float:
        return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)

    logs = [log_choose(failed, k) + log_choose(total - failed, new_n - k) - log_choose(total, new_n)
            for k in range(new_failed, min(failed, new_n) + 1)]  # fmt: skip
    if not logs:
        return 0.0
    top = max(logs)
    return min(1.0, math.exp(top) * math.fsum(math.exp(v - top) for v in logs))


@dataclass(frozen=True)
class ErrorComparison:
    """Failed requests (errors and interrupted streams) of a candidate cell against a baseline cell."""

    cell: str
    base_failed: int
    base_n: int
    new_failed: int
    new_n: int

    @property
    def base_rate(self) -> Optional[float]:
        """Share of the base cell's measured requests that failed (``None`` without requests)."""
        return self.base_failed / self.base_n if self.base_n else None

    @property
    def new_rate(self) -> Optional[float]:
        """Share of the new cell's measured requests that failed (``None`` without requests)."""
        return self.new_failed / self.new_n if self.new_n else None

    @property
    def increase(self) -> Optional[float]:
        """new rate − base rate (0.05 = 5 percentage points more failed)."""
        b, n = self.base_rate, self.new_rate
        return None if b is None or n is None else n - b

    @property
    def p_value(self) -> float:
        """One-sided Fisher exact p-value that the new rate is higher (`fisher_greater`)."""
        return fisher_greater(self.base_failed, self.base_n, self.new_failed, self.new_n)

    def regression(self, max_increase: float, alpha: float = ALPHA) -> bool:
        """Up by more than ``max_increase`` (0.01 = 1 percentage point) and p < ``alpha``."""
        inc = self.increase
        return inc is not None and inc > max_increase and self.p_value < alpha

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        return {"cell": self.cell, "base_failed": self.base_failed, "base_n": self.base_n, "new_failed": self.new_failed,
                "new_n": self.new_n, "increase": self.increase, "p_value": self.p_value}  # fmt: skip


def gate(comparisons: Sequence[Comparison], threshold: float) -> list[Comparison]:
    """The comparisons that regress beyond ``threshold`` and beyond noise."""
    return [c for c in comparisons if c.regression(threshold)]


@dataclass
class GateResult:
    """What `gate_runs` found: the rows it compared and every reason it fails (``passed`` when none)."""

    comparisons: list[Comparison]
    """Every compared metric percentile of every paired cell (gated and shown)."""
    errors: list[ErrorComparison]
    """Failed requests of every paired cell."""
    gated: list[Comparison]
    """The rows of the gated metrics."""
    regressions: list[Comparison]
    """The gated percentiles slower beyond the threshold and beyond noise."""
    failures: list[tuple[str, str]] = field(default_factory=list)
    """``(kind, line)``: kind ``REGRESSION``, ``ERRORS``, ``NO DATA``, ``MISSING``, ``LOAD`` or ``NOTHING COMPARED``."""
    notes: list[str] = field(default_factory=list)
    """What was allowed (cells on one side only with ``allow_missing``, pairs at different load levels)."""

    @property
    def passed(self) -> bool:
        """Nothing failed."""
        return not self.failures


def gate_runs(
    base: BenchRun, new: BenchRun, metrics: Sequence[str] = ("ttft:p99",), *, max_regression: float = 0.10,
    max_error_increase: float = 0.01, alpha: float = ALPHA, match_load: str = "same", allow_missing: bool = False,
    show: Sequence[str] = (),
) -> GateResult:
    """The CI gate (module docstring): ``metrics`` are gated, ``show`` only compared; ``ValueError`` for a bad metric."""
    for m in (*metrics, *show):
        parse_metric(m)
    pairs, base_only, new_only = match_cells(base, new, match_load)
    wanted = [*metrics, *(m for m in show if m not in metrics)]
    rows: list[Comparison] = []
    errors: list[ErrorComparison] = []
    for b, n in pairs:
        name = _pair_name(b, n)
        rows.extend(compare_cells(b, n, wanted, name))
        errors.append(ErrorComparison(name, b.failed, len(b.measured), n.failed, len(n.measured)))
    keys = {(metric, pct) for metric, _, pct in map(parse_metric, metrics)}
    gated = [r for r in rows if (r.metric, r.pct) in keys]
    bad = gate(gated, max_regression)
    out = GateResult(rows, errors, gated, bad)
    out.notes += [f"{_pair_name(b, n)}: base at {b.level}, new at {n.level} (compared across load levels)"
                  for b, n in pairs if b.level != n.level]  # fmt: skip
    fail = out.failures.append
    for r in bad:
        fail(("REGRESSION", f"{r.cell}: {r.metric} {r.pct} {(r.change or 0) * 100:+.1f}% (> {max_regression * 100:g}% and beyond noise)"))
    for e, (b, n) in zip(errors, pairs):
        if e.regression(max_error_increase, alpha):
            first = n.first_error if n.completed else None  # else NO DATA below says it
            fail(("ERRORS", f"{e.cell}: {e.new_failed} of {e.new_n} failed ({(e.new_rate or 0) * 100:.1f}%) against "
                            f"{e.base_failed} of {e.base_n} ({(e.base_rate or 0) * 100:.1f}%) in base: "
                            f"+{(e.increase or 0) * 100:.1f} points (> {max_error_increase * 100:g}), p = {e.p_value:.2g} "
                            f"(< {alpha:g})" + (f"; first error: {first}" if first else "")))  # fmt: skip
    for b, n in pairs:
        name = _pair_name(b, n)
        for side, cell in (("base", b), ("new", n)):
            if cell.no_data:
                fail(("NO DATA", f"{side}: {name} has {cell.no_data}"))
    for n in new_only:
        if n.no_data:
            fail(("NO DATA", f"new: {n.key} has {n.no_data}"))
    for side, cells, other in (("base", base_only, new_only), ("new", new_only, base_only)):
        for c in cells:
            moved = next((o for o in other if o.label == c.label or len(base.cells) == len(new.cells) == 1), None)
            if moved is not None and side == "new":
                continue  # said once, from the base side
            if moved is not None:
                kind, line = "LOAD", (f"{c.label}: base at {c.level}, new at {moved.level}: cells at different load "
                                      "levels are not compared unless told to (--match-load any)")  # fmt: skip
            else:
                kind, line = "MISSING", f"{c.key} is in {side} only"
            if allow_missing:
                out.notes.append(line)
            else:
                fail((kind, line))
    if not pairs and allow_missing:
        fail(("NOTHING COMPARED", "the two runs have no cell in common (same strategy, labels and load level)"))
    return out


def strategy_table(run: BenchRun, metrics: Sequence[str] = ("ttft:p50", "ttft:p99", "e2e:p50", "e2e:p99")) -> list[Comparison]:
    """Every cell against the first cell at the same load level (the baseline strategy)."""
    out: list[Comparison] = []
    baselines: dict[str, Cell] = {}
    for cell in run.cells:
        base = baselines.setdefault(cell.level, cell)
        if base is not cell:
            out.extend(compare_cells(base, cell, metrics, cell.key))
    return out
