"""Percentile summaries of call records (P50/P90/P95/P99 per metric), as text, dict and HTML."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from ..core._record import CallRecord

__all__ = ["MetricSummary", "Summary", "TIME_METRICS", "summarize"]

TIME_METRICS: tuple[str, ...] = ("ttft", "tpot", "e2e", "ttfb", "chunk_gap_mean")
"""Per-call time metrics, in seconds, that `Summary` reports."""
TOKEN_METRICS: tuple[str, ...] = ("input_tokens", "output_tokens")
QUANTILES: tuple[float, ...] = (0.50, 0.90, 0.95, 0.99)


@dataclass(frozen=True)
class MetricSummary:
    """Distribution of one metric over a group of calls; ``None`` when no call had a value."""

    metric: str
    count: int
    mean: Optional[float]
    p50: Optional[float]
    p90: Optional[float]
    p95: Optional[float]
    p99: Optional[float]
    max: Optional[float]

    @classmethod
    def of(cls, metric: str, values: Sequence[float]) -> "MetricSummary":
        """Summarize raw values (exact quantiles, numpy's linear method)."""
        if not values:
            return cls(metric, 0, None, None, None, None, None, None)
        arr = np.asarray(values, dtype=float)
        qs = np.quantile(arr, QUANTILES)
        return cls(
            metric,
            int(arr.size),
            float(arr.mean()),
            float(qs[0]),
            float(qs[1]),
            float(qs[2]),
            float(qs[3]),
            float(arr.max()),
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields."""
        return {
            "metric": self.metric,
            "count": self.count,
            "mean": self.mean,
            "p50": self.p50,
            "p90": self.p90,
            "p95": self.p95,
            "p99": self.p99,
            "max": self.max,
        }


@dataclass(frozen=True)
class GroupSummary:
    """All metrics of the calls that share provider, model and operation."""

    provider: str
    model: str
    operation: str
    calls: int
    outcomes: dict[str, int]
    metrics: dict[str, MetricSummary]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the group."""
        return {
            "provider": self.provider,
            "model": self.model,
            "operation": self.operation,
            "calls": self.calls,
            "outcomes": dict(self.outcomes),
            "metrics": {k: v.to_dict() for k, v in self.metrics.items()},
        }


class Summary:
    """Percentiles per metric, overall (``summary["ttft"]``) and per (provider, model, operation)."""

    def __init__(self, overall: dict[str, MetricSummary], groups: list[GroupSummary], calls: int, label: str = "") -> None:
        self.overall = overall
        self.groups = groups
        self.calls = calls
        self.label = label

    def __getitem__(self, metric: str) -> MetricSummary:
        return self.overall[metric]

    def __contains__(self, metric: object) -> bool:
        return metric in self.overall

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict: ``{"calls", "overall": {metric: ...}, "groups": [...]}``."""
        return {
            "calls": self.calls,
            "label": self.label,
            "overall": {k: v.to_dict() for k, v in self.overall.items()},
            "groups": [g.to_dict() for g in self.groups],
        }

    def rows(self) -> list[list[str]]:
        """Table rows (header first) with times in milliseconds, one row per group × time metric."""
        out = [["provider", "model", "metric", "n", "p50 ms", "p90 ms", "p95 ms", "p99 ms", "max ms"]]
        for g in self.groups:
            for name in TIME_METRICS:
                m = g.metrics[name]
                if m.count:
                    out.append([g.provider, g.model, name, str(m.count), *(_ms(v) for v in (m.p50, m.p90, m.p95, m.p99, m.max))])
        return out

    def __str__(self) -> str:
        rows = self.rows()
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = [f"{self.label}calls: {self.calls}"] if self.label else [f"calls: {self.calls}"]
        for r in rows:
            lines.append("  ".join(c.rjust(w) if i >= 3 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Summary calls={self.calls} ttft_p50={_ms(self.overall['ttft'].p50)}ms ttft_p99={_ms(self.overall['ttft'].p99)}ms>"

    def _repr_html_(self) -> str:
        rows = self.rows()
        head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows[1:])
        caption = html.escape(f"{self.label}latencykit summary — {self.calls} calls")
        return f"<table><caption>{caption}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _ms(v: Optional[float]) -> str:
    return "-" if v is None else f"{v * 1000:.1f}"


def _metric_values(records: Iterable[CallRecord], metric: str) -> list[float]:
    vals: list[float] = []
    for r in records:
        v = getattr(r, metric)
        if v is not None:
            vals.append(float(v))
    return vals


def _all_metrics(records: Sequence[CallRecord]) -> dict[str, MetricSummary]:
    return {m: MetricSummary.of(m, _metric_values(records, m)) for m in TIME_METRICS + TOKEN_METRICS}


def summarize(records: Sequence[CallRecord], label: str = "") -> Summary:
    """Build a `Summary` from records (only calls that completed count toward latencies)."""
    done = [r for r in records if r.outcome == "completed"]
    buckets: dict[tuple[str, str, str], list[CallRecord]] = {}
    outcomes: dict[tuple[str, str, str], dict[str, int]] = {}
    for r in records:
        key = (r.provider, r.response_model or r.request_model or "?", r.operation)
        counts = outcomes.setdefault(key, {})
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
        if r.outcome == "completed":
            buckets.setdefault(key, []).append(r)
    groups = [
        GroupSummary(k[0], k[1], k[2], sum(outcomes[k].values()), outcomes[k], _all_metrics(buckets.get(k, [])))
        for k in sorted(outcomes)
    ]
    return Summary(_all_metrics(done), groups, len(records), label)
