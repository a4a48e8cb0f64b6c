"""Service-level objectives on any metric and percentile, the source article's presets, goodput.

An `SLO` says "the P-th percentile of a metric stays at or under a threshold". On a
`Summary`, ``summary.check(slo)`` lists the groups that break it. Per call, an SLO is met
when that call's value is at or under the threshold; goodput is the share of calls that
meet every SLO given (a call missing the metric — no TTFT on an error — does not meet it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Sequence, Union

from ..core._record import CallRecord
from ._format import plural
from ._stats import METRICS

__all__ = ["SLO", "Violation", "CHAT_TTFT", "CODE_COMPLETION_TTFT", "BATCH_E2E", "goodput"]


@dataclass(frozen=True)
class SLO:
    """``percentile`` of ``metric`` (seconds) must be <= ``threshold``; e.g. ``SLO("ttft", 0.5, 0.95)``."""

    metric: str
    threshold: float
    percentile: float = 0.95
    name: str = ""

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"SLO metric must be one of {', '.join(METRICS)}; got {self.metric!r}")
        if not isinstance(self.threshold, (int, float)) or isinstance(self.threshold, bool) or not self.threshold > 0:
            raise ValueError(f"SLO threshold must be a positive number of seconds, got {self.threshold!r}")
        if not isinstance(self.percentile, (int, float)) or not 0 < self.percentile <= 1:
            raise ValueError(f"SLO percentile must be in (0, 1], e.g. 0.95; got {self.percentile!r}")

    @property
    def label(self) -> str:
        """A readable name: the given one, or e.g. ``ttft p95 <= 500 ms``."""
        return self.name or f"{self.metric} p{_pct(self.percentile)} <= {self.threshold * 1000:g} ms"

    def met_by(self, rec: CallRecord) -> bool:
        """Whether one call meets the objective (its own value at or under the threshold)."""
        if rec.outcome != "completed" and self.metric in ("e2e", "tpot"):
            return False
        value = rec.chunk_gap_max if self.metric == "itl" else getattr(rec, self.metric)
        return value is not None and value <= self.threshold


CHAT_TTFT = SLO("ttft", 0.5, 0.95, "chat: TTFT p95 < 500 ms")
"""Interactive chat: the first token within half a second."""
CODE_COMPLETION_TTFT = SLO("ttft", 0.1, 0.95, "code completion: TTFT p95 < 100 ms")
"""Inline code completion: the first token within 100 ms."""
BATCH_E2E = SLO("e2e", 30.0, 0.95, "batch: E2E p95 <= 30 s")
"""Batch / offline work: whole responses within 30 s."""


@dataclass(frozen=True)
class Violation:
    """One group (or ``overall``) whose observed percentile exceeds the SLO's threshold."""

    slo: SLO
    group: str
    observed: float
    calls: int

    def __str__(self) -> str:
        return f"{self.slo.label}: {self.group} has {self.observed * 1000:.1f} ms over {plural(self.calls, 'call')}"


def goodput(records: Iterable[CallRecord], slos: Union[SLO, Sequence[SLO]]) -> Optional[float]:
    """Share of calls meeting every SLO; ``None`` with no calls."""
    objectives = [slos] if isinstance(slos, SLO) else list(slos)
    total = good = 0
    for rec in records:
        total += 1
        good += all(s.met_by(rec) for s in objectives)
    return good / total if total else None


def _pct(p: float) -> str:
    text = f"{p * 100:.1f}".rstrip("0").rstrip(".")
    return text
