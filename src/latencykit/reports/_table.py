"""Latency tables for the terminal (rich), labelled emulated when the numbers are; 80 columns wide."""

from __future__ import annotations

from rich.table import Table

from ..telemetry._format import ms, outcomes_text, plural
from ..telemetry._summary import RULE, Summary

_METRICS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "E2E"), ("ttfb", "TTFB"))


def latency_table(summary: Summary, title: str) -> Table:
    """Rows of group × metric with n and P50/P95/P99/max in ms; calls, outcomes and tokens per group."""
    table = Table(title=title, title_justify="left", caption=RULE, caption_justify="left")
    for name in ("provider / model", "metric"):
        table.add_column(name)
    for name in ("n", "P50", "P95", "P99", "max"):
        table.add_column(name, justify="right")
    for g in summary.groups:
        labels = [
            f"{g.provider}/{g.model}",
            f"cache {g.cache}, {plural(g.calls, 'call')}",
            outcomes_text(g.outcomes),
            f"{g.input_tokens:,} in / {g.output_tokens:,} out",
        ]
        for i, (key, name) in enumerate(_METRICS):
            m = g.metrics[key]
            cells = (f"{m.count:,}", *(ms(v) for v in (m.p50, m.p95, m.p99, m.max)))
            table.add_row(labels[i], name, *cells, end_section=i == len(_METRICS) - 1)
    return table
