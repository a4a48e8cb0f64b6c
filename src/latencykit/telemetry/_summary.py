"""`Summary`: P50/P90/P95/P99/P99.9, mean, max and count per metric — overall and per group.

Built from the Recorder's percentile sketches (relative error ≤ α, 1 % by default), so it
costs the same for ten calls or ten million. Percentiles follow the nearest-rank rule
(`latencykit.core._rank`): P99 of fewer than 100 values is the maximum. Every display
shows ``n``, the number of values behind each row. Renders as text (80 columns), a
dict/JSON, a rich table and HTML in a notebook; ``check(slo)`` lists SLO violations.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence, Union

from ..core._record import CallRecord
from ._sketch import PercentileSketch
from ._format import ms as _ms
from ._format import outcomes_text, plural
from ._slo import SLO, Violation, goodput
from ._stats import METRICS, GroupKey, LatencyStats, group_key

__all__ = ["MetricSummary", "GroupSummary", "Summary"]

QUANTILES: tuple[float, ...] = (0.50, 0.90, 0.95, 0.99, 0.999)
_LABELS = {"ttft": "TTFT", "ttfo": "TTFO", "tpot": "TPOT", "e2e": "E2E", "ttfb": "TTFB", "itl": "ITL"}
_COLUMNS = ("metric", "n", "P50", "P90", "P95", "P99", "P99.9", "max")
RULE = "percentiles by nearest rank (P99 of n < 100 is the max); times in ms"


@dataclass(frozen=True)
class MetricSummary:
    """Distribution of one metric (seconds); quantiles are ``None`` when no call had a value."""

    metric: str
    count: int
    mean: Optional[float]
    p50: Optional[float]
    p90: Optional[float]
    p95: Optional[float]
    p99: Optional[float]
    p999: Optional[float]
    max: Optional[float]

    @classmethod
    def of(cls, metric: str, sketch: PercentileSketch) -> "MetricSummary":
        """Summarize a sketch."""
        p50, p90, p95, p99, p999 = sketch.quantiles(QUANTILES)
        return cls(metric, sketch.count, sketch.mean, p50, p90, p95, p99, p999, sketch.max)

    def quantile(self, q: float) -> Optional[float]:
        """The stored quantile nearest to ``q`` among P50/P90/P95/P99/P99.9."""
        return {0.5: self.p50, 0.9: self.p90, 0.95: self.p95, 0.99: self.p99, 0.999: self.p999}.get(round(q, 3))

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields."""
        return {k: getattr(self, k) for k in ("metric", "count", "mean", "p50", "p90", "p95", "p99", "p999", "max")}


@dataclass(frozen=True)
class GroupSummary:
    """The calls that share provider, model, operation and cache state."""

    provider: str
    model: str
    operation: str
    cache: str
    calls: int
    outcomes: dict[str, int]
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    metrics: dict[str, MetricSummary]
    sketches: dict[str, PercentileSketch]
    reasoning_calls: int = 0
    """Calls that reasoned before answering (their TTFO row is shown; elsewhere TTFO = TTFT)."""

    @property
    def name(self) -> str:
        """``provider/model (cache state)``."""
        return f"{self.provider}/{self.model} ({self.cache})"

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (without the sketches)."""
        return {
            "provider": self.provider,
            "model": self.model,
            "operation": self.operation,
            "cache": self.cache,
            "calls": self.calls,
            "outcomes": dict(self.outcomes),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "reasoning_calls": self.reasoning_calls,
            "metrics": {k: v.to_dict() for k, v in self.metrics.items()},
        }


class Summary:
    """Percentiles per metric: ``summary["ttft"].p99`` overall, ``summary.groups`` per group."""

    def __init__(self, stats: dict[GroupKey, LatencyStats], label: str = "", records: Sequence[CallRecord] = ()) -> None:
        self.label = label
        self._records = list(records)
        self.groups = [_group(k, v) for k, v in sorted(stats.items())]
        overall = {m: PercentileSketch(_alpha(stats)) for m in METRICS}
        for g in stats.values():
            for m, sk in g.sketches.items():
                overall[m].merge(sk)
        self.overall = {m: MetricSummary.of(m, sk) for m, sk in overall.items()}
        self.calls = sum(g.calls for g in self.groups)
        self.outcomes: dict[str, int] = {}
        for group in self.groups:
            for o, n in group.outcomes.items():
                self.outcomes[o] = self.outcomes.get(o, 0) + n

    @classmethod
    def from_records(cls, records: Iterable[CallRecord], label: str = "") -> "Summary":
        """Summarize records directly (no Recorder), e.g. a filtered list of calls."""
        recs = list(records)
        stats: dict[GroupKey, LatencyStats] = {}
        for r in recs:
            stats.setdefault(group_key(r), LatencyStats()).add(r)
        return cls(stats, label, recs)

    def __getitem__(self, metric: str) -> MetricSummary:
        return self.overall[metric]

    def __contains__(self, metric: object) -> bool:
        return metric in self.overall

    # -- SLOs ------------------------------------------------------------------------------
    def check(self, slos: Union[SLO, Sequence[SLO]]) -> list[Violation]:
        """Violations of each SLO, overall and per group (empty when all are met)."""
        objectives = [slos] if isinstance(slos, SLO) else list(slos)
        out: list[Violation] = []
        for slo in objectives:
            scopes = [("overall", self.overall[slo.metric])] + [(g.name, g.metrics[slo.metric]) for g in self.groups]
            for name, m in scopes:
                if m.count == 0:
                    continue
                observed = _quantile(self, name, slo.metric, slo.percentile)
                if observed is not None and observed > slo.threshold:
                    out.append(Violation(slo, name, observed, m.count))
        return out

    def goodput(self, slos: Union[SLO, Sequence[SLO]]) -> Optional[float]:
        """Share of the summarized calls (those still held by the Recorder) meeting every SLO."""
        return goodput(self._records, slos)

    # -- rendering -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict: calls, outcomes, overall metrics, groups."""
        return {
            "label": self.label,
            "calls": self.calls,
            "outcomes": dict(self.outcomes),
            "overall": {k: v.to_dict() for k, v in self.overall.items()},
            "groups": [g.to_dict() for g in self.groups],
        }

    def to_json(self, **kwargs: Any) -> str:
        """`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), **kwargs)

    def rows(self) -> list[list[str]]:
        """Table rows (header first), times in ms: one row per group × metric with data."""
        out = [["group", "metric", "n", "p50 ms", "p90 ms", "p95 ms", "p99 ms", "p99.9 ms", "max ms"]]
        for g in self.groups:
            out += [[g.name, *r] for r in _metric_rows(g)]
        return out

    def headline(self) -> str:
        """``label — 60 calls: completed 59, error 1``."""
        head = f"{self.label} — " if self.label else ""
        return f"{head}{plural(self.calls, 'call')}: {outcomes_text(self.outcomes)}"

    def __str__(self) -> str:
        """Text for a terminal, at most 80 columns wide (unless a group name is longer)."""
        blocks = [(f"{g.name} — {plural(g.calls, 'call')}: {outcomes_text(g.outcomes)}", _metric_rows(g)) for g in self.groups]
        table = [list(_COLUMNS)] + [r for _, rows in blocks for r in rows]
        widths = [max(len(r[i]) for r in table) for i in range(len(_COLUMNS))]

        def line(r: Sequence[str]) -> str:
            return "  " + "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))

        lines = [self.headline(), RULE] if blocks else [self.headline()]
        for title, rows in blocks:
            lines += [title, line(_COLUMNS)] + [line(r) for r in rows]
        return "\n".join(lines)

    def __rich__(self) -> Any:
        """Rich tables, one per group (``rich.print(summary)``); needs ``rich`` (the ``bench`` extra)."""
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        parts: list[Any] = [Text(self.headline()), Text(RULE, style="dim")]
        for g in self.groups:
            table = Table(title=f"{g.name} — {plural(g.calls, 'call')}: {outcomes_text(g.outcomes)}", title_justify="left")
            for i, name in enumerate(_COLUMNS):
                table.add_column(name, justify="right" if i else "left")
            for r in _metric_rows(g):
                table.add_row(*r)
            parts.append(table)
        return Group(*parts)

    def __repr__(self) -> str:
        t = self.overall["ttft"]
        return f"<Summary calls={self.calls} ttft_n={t.count} ttft_p50={_ms(t.p50)}ms ttft_p99={_ms(t.p99)}ms>"

    def _repr_html_(self) -> str:
        rows = self.rows()
        head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows[1:])
        caption = html.escape(f"latencykit: {self.headline()}; {RULE}")
        return f'<table class="latencykit-summary"><caption>{caption}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _metric_rows(g: "GroupSummary") -> list[list[str]]:
    """``[metric, n, p50, p90, p95, p99, p99.9, max]`` (ms) for each metric of ``g`` with data
    (TTFO only where some call reasoned first: elsewhere it repeats TTFT)."""
    return [
        [_LABELS[metric], f"{m.count:,}", *(_ms(v) for v in (m.p50, m.p90, m.p95, m.p99, m.p999, m.max))]
        for metric in METRICS
        if (m := g.metrics[metric]).count and (metric != "ttfo" or g.reasoning_calls)
    ]


def _group(key: GroupKey, stats: LatencyStats) -> GroupSummary:
    sketches = {m: s.copy() for m, s in stats.sketches.items()}
    return GroupSummary(
        key.provider,
        key.model,
        key.operation,
        key.cache,
        stats.calls,
        dict(stats.outcomes),
        stats.input_tokens,
        stats.output_tokens,
        stats.cache_read_tokens,
        {m: MetricSummary.of(m, s) for m, s in sketches.items()},
        sketches,
        stats.reasoning_calls,
    )


def _quantile(summary: Summary, scope: str, metric: str, q: float) -> Optional[float]:
    if scope == "overall":
        sketch = PercentileSketch(_alpha_of(summary))
        for g in summary.groups:
            sketch.merge(g.sketches[metric])
        return sketch.quantile(q)
    for g in summary.groups:
        if g.name == scope:
            return g.sketches[metric].quantile(q)
    return None


def _alpha(stats: dict[GroupKey, LatencyStats]) -> float:
    return next(iter(stats.values())).relative_accuracy if stats else 0.01


def _alpha_of(summary: Summary) -> float:
    return summary.groups[0].sketches["ttft"].relative_accuracy if summary.groups else 0.01

