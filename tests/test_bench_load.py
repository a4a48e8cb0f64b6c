"""Load that tells the truth: arrival schedules, closed-loop concurrency, and coordinated omission made visible."""

from __future__ import annotations

import io
import statistics
from dataclasses import asdict

import pytest
from rich.console import Console

from latencykit.bench._load import LoadSpec, arrival_offsets
from latencykit.bench._run import BenchConfig, run_bench
from latencykit.bench._traffic import generate
from latencykit.emulator._timing import IDEAL_TIMING


def test_arrival_schedules() -> None:
    """Poisson gaps average 1/rate with CV≈1; gamma's burstiness sets the CV to 1/sqrt(shape); constant is exact."""
    reqs = generate("chat", 4000, seed=0)
    for arrivals, shape, cv in (("poisson", 1.0, 1.0), ("gamma", 0.25, 2.0), ("gamma", 4.0, 0.5)):
        offs = arrival_offsets(reqs, LoadSpec(rate=50.0, arrivals=arrivals, burstiness=shape))
        gaps = [b - a for a, b in zip(offs, offs[1:])]
        assert offs[0] == 0.0 and statistics.fmean(gaps) == pytest.approx(0.02, rel=0.1)
        assert statistics.pstdev(gaps) / statistics.fmean(gaps) == pytest.approx(cv, rel=0.15)
    assert arrival_offsets(reqs[:4], LoadSpec(rate=4.0, arrivals="constant")) == [0.0, 0.25, 0.5, 0.75]
    with pytest.raises(ValueError, match="concurrency"):
        LoadSpec(concurrency=0)
    with pytest.raises(ValueError, match="give a concurrency"):
        LoadSpec()


def test_closed_loop_holds_the_concurrency_and_records_every_request() -> None:
    """A closed loop keeps exactly c in flight, sends every request once, and its queueing is ~0."""
    fast = asdict(IDEAL_TIMING) | {"time_scale": 0.1, "output_tokens": 5}
    run = run_bench(BenchConfig(requests=24, concurrency=(6,), timing=fast, exact_output=False, warmup=6))
    cell = run.cells[0]
    assert sorted(s["i"] for s in cell.samples) == list(range(24))
    assert cell.health[0]["max_in_flight"] == 6 and cell.sketches["ttft"].count == 18
    assert (cell.value("queue", 0.99) or 0) < 0.005
    # Truth 20 ms (scaled); never the role-only chunk, which the emulator sends at once.
    assert (cell.value("ttft_service", 0.01) or 0) >= 0.019


def test_coordinated_omission_is_counted_not_hidden() -> None:
    """40 req/s offered, 8 in flight, a server that serves ~16 req/s: the headline TTFT includes the wait
    for a slot, the service TTFT stays at the server's 200 ms, and the unsent requests are printed."""
    ideal = asdict(IDEAL_TIMING)  # TTFT 200 ms, 30 tokens at 10 ms: 8 / 0.49 s = 16.3 req/s
    run = run_bench(BenchConfig(requests=140, rate=(40.0,), concurrency=(8,), arrivals="constant", duration=3.0,
                                timing=ideal, exact_output=False))  # fmt: skip
    cell = run.cells[0]
    service, headline = cell.value("ttft_service", 0.5), cell.value("ttft", 0.5)
    assert service is not None and headline is not None
    assert service > 0.19
    assert headline > service + 0.4  # the median request waited in the client for a slot
    assert cell.scheduled == 120 and len(cell.samples) + len(cell.unsent_waits) == 120
    assert len(cell.unsent_waits) > 30
    tp = cell.throughput()
    assert tp["offered_rps"] == 40.0 and (tp["sent_rps"] or 0) < 25
    out = io.StringIO()
    run.report(Console(file=out, width=120))
    text = out.getvalue()
    assert f"unsent {len(cell.unsent_waits)}" in text and "behind schedule" in text and "EMULATED" in text


def test_open_loop_without_a_cap_does_not_queue() -> None:
    """The same offered load with no in-flight cap: every arrival is sent, nothing is unsent, and any
    queueing left is the client's own lateness — flagged, never silent (this box may be busy)."""
    ideal = asdict(IDEAL_TIMING) | {"output_tokens": 5}
    run = run_bench(BenchConfig(requests=60, rate=(40.0,), arrivals="constant", duration=1.0, timing=ideal, exact_output=False,
                                warmup=8))  # the first calls pay the SDK's one-off set-up  # fmt: skip
    cell = run.cells[0]
    assert cell.scheduled == 40 and not cell.unsent_waits and len(cell.samples) == 40
    queued = cell.value("queue", 0.5) or 0
    assert queued < 0.02 or any(w.startswith(("behind schedule", "client-")) for w in cell.warnings), cell.warnings
    assert all(s["ttft"] == pytest.approx(s["queue"] + s["ttft_service"]) for s in cell.samples)


def test_ramp_spreads_the_slots_and_health_skips_the_warmup() -> None:
    """`ramp` starts the closed loop's slots evenly over that many seconds, in one process and across
    workers (slot j of worker w at global slot j·workers + w); the client's health (CPU, loop lag, GC)
    starts when the last warm-up request has finished, and GC pauses are reported."""
    from latencykit.bench._workers import slot_delays_for

    fast = asdict(IDEAL_TIMING) | {"time_scale": 0.2, "output_tokens": 5}  # 40 ms TTFT, E2E ~ 48 ms
    run = run_bench(BenchConfig(requests=16, concurrency=(4,), timing=fast, exact_output=False, warmup=4, ramp=0.4))
    cell = run.cells[0]
    first = sorted(s["sent"] for s in cell.samples if s["warmup"])
    assert [round(b - a, 1) for a, b in zip(first, first[1:])] == [0.1, 0.1, 0.1]  # 0, 0.1, 0.2, 0.3 s
    h = cell.health[0]
    assert {"gc_collections", "gc_s", "gc_max", "gc_full"} <= set(h)
    # Health is measured from the end of the last warm-up request (sent at ~0.3 s, done ~0.35 s).
    assert h["wall_s"] < max(s["sent"] for s in cell.samples) + 0.1 - 0.3
    load = LoadSpec(concurrency=5, ramp=1.0)
    assert slot_delays_for(load, 0, 2) == [0.0, 0.4, 0.8] and slot_delays_for(load, 1, 2) == [0.2, 0.6]
    assert slot_delays_for(LoadSpec(concurrency=5), 0, 2) is None
    with pytest.raises(ValueError, match="ramp"):
        LoadSpec(concurrency=2, ramp=-1.0)
