"""Latency tables for the terminal (rich), labelled emulated when the numbers are."""

from __future__ import annotations

from typing import Optional

from rich.table import Table

from ..telemetry._summary import Summary

_METRICS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "E2E"), ("ttfb", "TTFB"))


def _ms(v: Optional[float]) -> str:
    return "-" if v is None else f"{v * 1000:,.1f}"


def latency_table(summary: Summary, title: str) -> Table:
    """Rows of provider × metric with P50/P95/P99/max in ms, plus calls and tokens per provider."""
    table = Table(title=title, title_justify="left")
    for name in ("provider / model", "metric"):
        table.add_column(name)
    for name in ("p50 ms", "p95 ms", "p99 ms", "max ms"):
        table.add_column(name, justify="right")
    for g in summary.groups:
        labels = [g.provider, g.model, f"{g.calls} calls, cache {g.cache}", f"{g.input_tokens:,} in / {g.output_tokens:,} out"]
        for i, (key, name) in enumerate(_METRICS):
            m = g.metrics[key]
            table.add_row(labels[i], name, _ms(m.p50), _ms(m.p95), _ms(m.p99), _ms(m.max), end_section=i == len(_METRICS) - 1)
    return table
