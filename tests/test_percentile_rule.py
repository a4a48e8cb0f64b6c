"""Percentiles by nearest rank: the slowest call shows in P99 of a small sample, and every display shows n."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from rich.console import Console

import latencykit as lk
from latencykit import CallRecord, CallTimer
from latencykit.reports._table import latency_table
from latencykit.core._rank import nearest_rank
from latencykit.telemetry._sketch import PercentileSketch

# The new-user trial's five calls: P90…P99.9 used to read 105 ms while the slowest took 299 ms.
FIVE_TTFTS = (0.100, 0.101, 0.103, 0.105, 0.299)


def _rec(ttft: float, model: str = "claude-sonnet-5") -> CallRecord:
    r = CallRecord(provider="anthropic", operation="chat", request_model=model, response_model=model)
    r.ttft, r.ttfb, r.e2e, r.tpot = ttft, ttft / 2, ttft * 3, 0.02
    r.cache_read_tokens, r.input_tokens, r.output_tokens = 0, 100, 10
    return r


def _recorder(ttfts: tuple[float, ...] | list[float]) -> lk.Recorder:
    recorder = lk.Recorder()
    for t in ttfts:
        recorder.record(_rec(t))
    return recorder


def test_five_calls_tail_is_the_slowest_call() -> None:
    """With 5 calls, P90, P95, P99 and P99.9 are the slowest call (299 ms), and P50 is the 3rd (103 ms, within 1 %)."""
    s = _recorder(FIVE_TTFTS).summary()["ttft"]
    assert s.count == 5 and s.max == 0.299
    assert s.p90 == s.p95 == s.p99 == s.p999 == 0.299
    assert s.p50 == pytest.approx(0.103, rel=0.01)


@pytest.mark.parametrize("n", [1, 2, 7, 50, 99])
def test_p99_below_100_values_is_the_max(n: int) -> None:
    """P99 of n < 100 values is the exact maximum; P99 of 100 values is the 99th smallest."""
    values = np.random.default_rng(n).lognormal(-1.5, 0.8, n)
    sketch = PercentileSketch()
    sketch.add_many(values)
    assert sketch.quantile(0.99) == values.max()
    hundred = np.arange(1, 101) / 1000
    sketch = PercentileSketch()
    sketch.add_many(hundred)
    assert sketch.quantile(0.99) == pytest.approx(0.099, rel=0.01) and sketch.quantile(0.999) == 0.1


def test_rule_is_numpy_inverted_cdf() -> None:
    """The rank rule equals np.quantile(method="inverted_cdf") for every n up to 300 and many q."""
    qs = [0.0, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0, *np.random.default_rng(0).random(40).tolist()]
    for n in range(1, 301):
        xs = np.arange(n, dtype=float)
        for q in qs:
            assert xs[nearest_rank(q, n)] == np.quantile(xs, q, method="inverted_cdf"), (q, n)


def test_per_call_chunk_gaps_use_the_rule() -> None:
    """A call whose gaps are 9 × 20 ms and one 300 ms stall reports chunk_gap_p95 = the stall (rank ceil(0.95·10) = 10)."""
    now = [0.0]
    sink: list[CallRecord] = []
    timer = CallTimer(CallRecord(provider="anthropic", operation="chat", request_model="m"), clock=lambda: now[0], sink=sink.append)
    now[0] = 0.1
    timer.event(True)
    for gap in [0.02] * 5 + [0.3] + [0.02] * 4:
        now[0] += gap
        timer.event(True)
    timer.record.output_tokens = 11
    timer.terminal()
    timer.exhausted()
    rec = sink[0]
    assert rec.chunk_gap_p95 == pytest.approx(0.3) and rec.chunk_gap_p50 == pytest.approx(0.02)


def test_every_display_shows_n_and_fits_80_columns() -> None:
    """Text, rich, HTML and the latency table show n per row; JSON has count; text and rich stay within 80 columns."""
    recorder = _recorder(FIVE_TTFTS)
    recorder.record(_rec(0.2, model="claude-haiku-5"))
    summary = recorder.summary()

    text = str(summary)
    assert text.splitlines()[0] == "6 calls: completed 6"
    assert "anthropic/claude-sonnet-5 (miss) — 5 calls: completed 5" in text
    assert "anthropic/claude-haiku-5 (miss) — 1 call: completed 1" in text
    assert "nearest rank" in text
    header = next(line for line in text.splitlines() if line.strip().startswith("metric"))
    assert header.split()[:2] == ["metric", "n"]
    ttft_rows = [line.split() for line in text.splitlines() if line.strip().startswith("TTFT")]
    assert [r[1] for r in ttft_rows] == ["1", "5"]  # groups sorted by name: haiku, sonnet
    assert ttft_rows[1][2:] == ["103.3", "299.0", "299.0", "299.0", "299.0", "299.0"]
    assert max(len(line) for line in text.splitlines()) <= 80

    wide = Console(file=io.StringIO(), width=200, color_system=None)
    wide.print(summary)
    wide.print(latency_table(summary, "EMULATED latencies"))
    rendered = wide.file.getvalue()  # type: ignore[attr-defined]
    assert max(len(line.rstrip()) for line in rendered.splitlines()) <= 80
    assert rendered.count("┃ n ┃") == 3  # two summary tables and the latency table

    assert "<th>n</th>" in summary._repr_html_()
    data = json.loads(summary.to_json())
    assert data["overall"]["ttft"]["count"] == 6 and data["groups"][1]["metrics"]["ttft"]["count"] == 5


def test_slo_check_sees_the_slowest_call() -> None:
    """A TTFT P99 SLO of 200 ms is violated by the single 299 ms call among five."""
    violations = _recorder(FIVE_TTFTS).summary().check(lk.SLO("ttft", 0.2, 0.99))
    assert [v.observed for v in violations] == [0.299, 0.299]
    assert str(violations[0]).endswith("299.0 ms over 5 calls")
