"""Driving one cell: in this process (`drive`) or dealt to ``workers`` spawned processes (`spawn`).

With ``workers=N`` the requests are dealt round-robin to N spawned processes (one event loop
each); a closed loop's concurrency and an open loop's in-flight cap are split between them, an
open loop keeps the global arrival times, and all start at one shared monotonic instant. Their
results merge exactly (sketches add). On Ctrl-C the parent passes the interrupt on to workers
still running, and each sends back what it measured (marked interrupted).
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
import signal
import time
from dataclasses import asdict, replace
from typing import Any, Callable, Optional, Sequence

from ._clients import make_sender
from ._config import BenchConfig, build_requests, resolve_levers
from ._load import CellResult, LoadSpec, run_cell
from ._sessions import deal_key
from ._targets import TargetSpec
from ._traffic import TrafficRequest

__all__ = ["drive", "result_from_dict", "result_to_dict", "share_of", "slot_delays_for", "spawn"]


async def drive(
    requests: Sequence[TrafficRequest], offsets: Optional[Sequence[float]], load: LoadSpec, target: TargetSpec,
    strategy: dict[str, str], control: float, *, start_at: Optional[float], worker: int,
    progress: Optional[Callable[[], None]], ready: Optional[Callable[[], float]] = None,
    slot_delays: Optional[Sequence[float]] = None, freeze: bool = True, started: Optional[Callable[[], None]] = None,
) -> CellResult:
    """Run one cell's ``requests`` through the strategy's sender (and the thin control) in this event loop."""
    sender = make_sender(target, resolve_levers(strategy))
    thin = make_sender(target, {"client": "thin"}) if control > 0 else None
    if strategy.get("prewarm") == "on" and hasattr(sender, "prewarm"):
        await sender.prewarm(requests)  # before the timed window: its calls are never samples
    if freeze:
        gc.collect()
        gc.freeze()
    try:
        if ready is not None:
            start_at = ready()
        return await run_cell(requests, offsets, load, sender, start_at=start_at, worker=worker, progress=progress,
                              control=thin, control_every=round(1 / control) if control > 0 else 0,
                              slot_delays=slot_delays, started=started)  # fmt: skip
    finally:
        if freeze:
            gc.unfreeze()
        await sender.aclose()
        if thin is not None:
            await thin.aclose()


def slot_delays_for(load: LoadSpec, w: int, workers: int) -> Optional[list[float]]:
    """Worker ``w``'s slots begin at global slot indices w, w + workers, ... of the whole ramp."""
    if load.open_loop or load.concurrency is None or not load.ramp:
        return None
    c = load.concurrency
    mine = share_of(load, w, workers).concurrency or 1
    return [load.ramp * min(j * workers + w, c - 1) / c for j in range(mine)]


def share_of(load: LoadSpec, w: int, workers: int) -> LoadSpec:
    """Worker ``w``'s load: its part of a closed loop's concurrency (or an open loop's cap), at least 1."""
    if load.concurrency is None:
        return load
    c = load.concurrency // workers + (1 if w < load.concurrency % workers else 0)
    return replace(load, concurrency=max(c, 1))


def _worker_main(payload: dict[str, Any], w: int, ready_q: Any, go_q: Any, result_q: Any, counter: Any) -> None:
    """Entry point of a worker process (spawned): run its share of one cell, send back the result."""
    try:
        config = BenchConfig(**{**payload["config"], "matrix": tuple(payload["config"]["matrix"])})
        target = TargetSpec(**payload["target"])
        load = LoadSpec(**payload["load"])
        everything = payload.get("requests") or build_requests(config)
        mine = [r for r in everything if deal_key(r) % payload["workers"] == w]  # a session stays on one worker (a dealt share stays)
        offsets = payload["offsets"]
        my_offsets = None if offsets is None else [offsets[r.index] for r in mine]

        def tick() -> None:
            with counter.get_lock():
                counter.value += 1

        def ready() -> float:
            ready_q.put(w)
            return float(go_q.get())

        result = asyncio.run(drive(mine, my_offsets, load, target, payload["strategy"], config.control,
                                    start_at=None, worker=w, progress=tick, ready=ready,
                                    slot_delays=payload["slot_delays"], freeze=config.freeze_heap))  # fmt: skip
        result_q.put(("ok", w, result_to_dict(result)))
    except BaseException as exc:  # report, so the parent never waits forever
        result_q.put(("error", w, f"{type(exc).__name__}: {exc}"))
        ready_q.put(w)


def result_to_dict(r: CellResult) -> dict[str, Any]:
    """A worker's cell result as plain data (to cross a process boundary)."""
    return {"samples": r.samples, "sketches": {m: s.to_dict() for m, s in r.sketches.items()}, "health": r.health,
            "scheduled": r.scheduled, "unsent": r.unsent_waits, "window": list(r.window),
            "control": {m: s.to_dict() for m, s in r.control.items()}, "interrupted": r.interrupted, "cut": r.cut,
            "turns_not_sent": r.turns_not_sent}  # fmt: skip


def result_from_dict(d: dict[str, Any]) -> CellResult:
    """Inverse of `result_to_dict`."""
    from ..telemetry._sketch import PercentileSketch

    sk = {m: PercentileSketch.from_dict(s) for m, s in d["sketches"].items()}
    ctl = {m: PercentileSketch.from_dict(s) for m, s in d["control"].items()}
    return CellResult(d["samples"], sk, d["health"], d["scheduled"], d["unsent"], (d["window"][0], d["window"][1]), ctl,
                      d["interrupted"], d["cut"], int(d.get("turns_not_sent", 0)))  # fmt: skip


def spawn(config: BenchConfig, target: TargetSpec, load: LoadSpec, strategy: dict[str, str],
          offsets: Optional[list[float]], workers: int, progress: Optional[Callable[[int], None]],
          requests: Optional[Sequence[TrafficRequest]] = None) -> list[CellResult]:  # fmt: skip
    """Run one cell in ``workers`` spawned processes; their results (``RuntimeError`` if a worker failed).

    A Ctrl-C here is passed on to the workers still running (each returns what it measured, marked
    interrupted); a second one stops them. Either way no worker outlives this call."""
    ctx = multiprocessing.get_context("spawn")
    ready_q, result_q, counter = ctx.Queue(), ctx.Queue(), ctx.Value("i", 0)
    go = [ctx.Queue() for _ in range(workers)]
    procs: list[Any] = []
    grace = 1.0  # seconds a worker gets to exit once this call is left by an exception
    try:
        for w in range(workers):
            payload = {"config": config.to_dict(), "target": asdict(target), "load": asdict(share_of(load, w, workers)),
                       "strategy": strategy, "offsets": offsets, "workers": workers,
                       "slot_delays": slot_delays_for(load, w, workers),
                       "requests": None if requests is None else [r for r in requests if deal_key(r) % workers == w]}  # fmt: skip
            p = ctx.Process(target=_worker_main, args=(payload, w, ready_q, go[w], result_q, counter), daemon=True)
            p.start()
            procs.append(p)
        for _ in range(workers):
            ready_q.get(timeout=120)
        start_at = time.perf_counter() + 0.2  # one CLOCK_MONOTONIC instant, shared by processes on this machine
        for q in go:
            q.put(start_at)
        results: dict[int, CellResult] = {}
        errors: list[str] = []
        seen = [0]

        def collect() -> None:
            while len(results) + len(errors) < workers:
                try:
                    status, w, data = result_q.get(timeout=0.25)
                except Exception:
                    if progress is not None and counter.value != seen[0]:
                        progress(counter.value - seen[0])
                        seen[0] = counter.value
                    if not any(p.is_alive() for p in procs) and result_q.empty():
                        errors.append("a worker process died without a result")
                    continue
                if status == "ok":
                    results[w] = result_from_dict(data)
                else:
                    errors.append(f"worker {w}: {data}")

        try:
            collect()
        except KeyboardInterrupt:
            for p in procs:  # a terminal's Ctrl-C reached them too; a signal sent to this process alone did not
                if p.is_alive() and p.pid is not None:
                    os.kill(p.pid, signal.SIGINT)
            collect()
            if not results:
                raise
            for r in results.values():
                r.interrupted = True
        if progress is not None and counter.value != seen[0]:
            progress(counter.value - seen[0])
        if errors and not any(r.interrupted for r in results.values()):
            raise RuntimeError("; ".join(errors))
        grace = 10.0
        return [results[w] for w in sorted(results)]
    finally:
        for p in procs:
            p.join(timeout=grace)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
