"""Load that tells the truth: closed and open loop on absolute deadlines, every wait counted.

Closed loop (``concurrency`` only): that many requests in flight; a request's intended send
time is the moment its slot freed, so its queueing is ~0 by construction.

Open loop (``rate``): arrivals at absolute offsets from the start — Poisson (exponential
gaps), gamma (``burstiness`` = shape: < 1 burstier, > 1 smoother, 1 = Poisson, as in vLLM),
constant, or the recorded times of replayed traffic — optionally capped at ``concurrency``
in flight. The dispatcher never resets its schedule to "now": a late wake-up sends every
overdue arrival at once and its lateness is reported. A capped arrival waits for a slot,
and **that wait is part of its headline TTFT and E2E** (latency counted from the intended
send time; the service time from the actual send is reported beside it). With a
``duration``, arrivals due after it are not scheduled, and those still waiting for a slot
at the cut-off are counted as **unsent**, with how long they had waited.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import math
import os
import random
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional, Sequence

from ..telemetry._sketch import PercentileSketch
from ._clients import Sender
from ._targets import Observed
from ._sessions import group_sessions, run_sessions
from ._traffic import TrafficRequest

__all__ = ["ARRIVALS", "LoadSpec", "CellResult", "arrival_offsets", "run_cell", "session_offsets"]

ARRIVALS = ("poisson", "gamma", "constant", "recorded")
_clock = time.perf_counter
LAG_INTERVAL = 0.01


@dataclass(frozen=True)
class LoadSpec:
    """How requests are offered: closed loop at ``concurrency``, or open loop at ``rate`` (capped at ``concurrency``)."""

    concurrency: Optional[int] = None
    rate: Optional[float] = None
    arrivals: str = "poisson"
    burstiness: float = 1.0
    duration: Optional[float] = None
    warmup: int = 0
    """The first ``warmup`` requests (by index) run but are left out of the headline."""
    idle_gap: float = 5.0
    """A request sent after the client sat idle this long is marked cold (``idle``)."""
    ramp: float = 0.0
    """Closed loop: the slots start spread evenly over this many seconds (0 = all at once). Against a
    server without jitter, slots that start together stay in lock-step, every chunk of every stream
    arriving in the same millisecond; a ramp of about one request's duration spreads them out."""
    sessions: bool = False
    """Conversations (``--traffic sessions``): ``rate`` is sessions per second and ``concurrency`` (closed loop)
    the users conversing at once; within a session each turn waits for the answer before it (`_sessions`)."""

    def __post_init__(self) -> None:
        if self.concurrency is not None and (not isinstance(self.concurrency, int) or self.concurrency < 1):
            raise ValueError(f"concurrency must be a positive int, got {self.concurrency!r}")
        if self.rate is not None and not (isinstance(self.rate, (int, float)) and 0 < self.rate < math.inf):
            raise ValueError(f"rate must be a positive number of requests per second, got {self.rate!r}")
        if self.arrivals not in ARRIVALS:
            raise ValueError(f"arrivals must be one of {', '.join(ARRIVALS)}; got {self.arrivals!r}")
        if not self.burstiness > 0:
            raise ValueError(f"burstiness must be > 0, got {self.burstiness!r}")
        if self.duration is not None and not self.duration > 0:
            raise ValueError(f"duration must be > 0 seconds, got {self.duration!r}")
        if not (isinstance(self.ramp, (int, float)) and 0 <= self.ramp < math.inf):
            raise ValueError(f"ramp must be >= 0 seconds, got {self.ramp!r}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0 requests, got {self.warmup!r}")
        if self.rate is None and self.arrivals != "recorded" and self.concurrency is None:
            raise ValueError("give a concurrency (closed loop) or a rate (open loop)")

    @property
    def open_loop(self) -> bool:
        """Arrivals on a schedule (rate or recorded times) rather than on slot release."""
        return self.rate is not None or self.arrivals == "recorded"

    def describe(self) -> dict[str, Any]:
        """JSON-friendly fields."""
        out = {"mode": "open" if self.open_loop else "closed", "concurrency": self.concurrency, "rate": self.rate,
               "arrivals": self.arrivals if self.open_loop else None, "burstiness": self.burstiness,
               "duration": self.duration, "warmup": self.warmup, "ramp": self.ramp}  # fmt: skip
        if self.sessions:
            out["sessions"] = True
        return out


def arrival_offsets(requests: Sequence[TrafficRequest], spec: LoadSpec, seed: int = 0) -> list[float]:
    """Seconds from the start at which each request is due (the first at 0). For sessions the arrivals are
    the sessions' (one draw per session, in order of first appearance), and every turn carries its
    session's: only the first turn is sent then (the later ones wait for the answers before them)."""
    if spec.sessions:
        order = list(dict.fromkeys(r.session for r in requests))
        firsts = _offsets(len(order), requests, replace(spec, sessions=False), seed)
        at = dict(zip(order, firsts))
        return [at[r.session] for r in requests]
    return _offsets(len(requests), requests, spec, seed)


def session_offsets(requests: Sequence[TrafficRequest], offsets: Sequence[float]) -> list[float]:
    """One offset per session (in order of first appearance) from `arrival_offsets`' per-turn list."""
    seen: dict[Optional[str], float] = {}
    for r, off in zip(requests, offsets):
        seen.setdefault(r.session, off)
    return list(seen.values())


def _offsets(n: int, requests: Sequence[TrafficRequest], spec: LoadSpec, seed: int) -> list[float]:
    if spec.arrivals == "recorded":
        if any(r.at is None for r in requests):
            raise ValueError("arrivals 'recorded' need a timestamp on every replayed request")
        scale = 1.0 if spec.rate is None else spec.rate  # --rate with recorded times = speed-up factor
        return [float(r.at) / scale for r in requests]  # type: ignore[arg-type]
    rate = float(spec.rate or 1.0)
    if spec.arrivals == "constant":
        return [i / rate for i in range(n)]
    rng = random.Random(f"latencykit-bench-arrivals:{seed}")
    out, t = [], 0.0
    for _ in range(n):
        out.append(t)
        if spec.arrivals == "poisson":
            t += rng.expovariate(rate)
        else:
            t += rng.gammavariate(spec.burstiness, 1.0 / (rate * spec.burstiness))
    return out


@dataclass
class CellResult:
    """What one process measured for one cell."""

    samples: list[dict[str, Any]]
    sketches: dict[str, PercentileSketch]
    health: dict[str, Any]
    scheduled: int
    unsent_waits: list[float]
    window: tuple[Optional[float], Optional[float]]
    """Wall-clock (``time.time()``) first measured send and last measured completion."""
    control: dict[str, PercentileSketch]
    """Sketches of the interleaved thin-reader control requests."""
    interrupted: bool = False
    """Cancelled part-way (Ctrl-C): what had finished is kept, the rest is counted in ``cut``."""
    cut: int = 0
    """Requests in flight when the cell was interrupted (not measured)."""
    turns_not_sent: int = 0
    """Sessions: turns never sent — due after ``duration``, or after a turn of their session failed."""


SKETCHED = ("ttft", "ttft_service", "ttfo", "tpot", "itl_token", "itl_chunk", "e2e", "e2e_service", "queue")
"""Metrics kept as mergeable sketches (seconds). ``ttft``/``ttfo``/``e2e`` count from the intended send
time; ``ttfo`` is the answer's first token (after any reasoning)."""


def new_sketches() -> dict[str, PercentileSketch]:
    """One empty sketch per `SKETCHED` metric."""
    return {m: PercentileSketch() for m in SKETCHED}


def _load_average() -> Optional[float]:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # not on Windows
        return None


class _State:
    __slots__ = ("in_flight", "max_in_flight", "last_idle", "first", "last", "warm_left", "started")

    def __init__(self) -> None:
        self.started = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.last_idle: Optional[float] = None
        self.first: Optional[float] = None
        self.last: Optional[float] = None
        self.warm_left = 0


class _GcPauses:
    """Garbage-collector pauses in this process while the cell runs (they stop the event loop too)."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, float]] = []
        self._t0 = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t0 = _clock()
        else:
            self.pauses.append((int(info.get("generation", 0)), _clock() - self._t0))

    def summary(self) -> dict[str, Any]:
        full = [d for g, d in self.pauses if g == 2]
        return {"gc_collections": len(self.pauses), "gc_s": sum(d for _, d in self.pauses),
                "gc_max": max((d for _, d in self.pauses), default=0.0), "gc_full": len(full)}  # fmt: skip


class _LagMonitor:
    """Wakes every 10 ms on an absolute schedule; how late each wake-up is = event-loop lag."""

    def __init__(self) -> None:
        self.lag = PercentileSketch()
        self._task: Optional[asyncio.Task[None]] = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time() + LAG_INTERVAL
        while True:
            await asyncio.sleep(max(due - loop.time(), 0))
            now = loop.time()
            self.lag.add(max(now - due, 0.0))
            due = max(due + LAG_INTERVAL, now)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def restart(self) -> None:
        """Forget the lag seen so far (the warm-up's)."""
        self.lag = PercentileSketch()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass


async def run_cell(
    requests: Sequence[TrafficRequest],
    offsets: Optional[Sequence[float]],
    spec: LoadSpec,
    sender: Sender,
    *,
    start_at: Optional[float] = None,
    worker: int = 0,
    progress: Optional[Callable[[], None]] = None,
    control: Optional[Sender] = None,
    control_every: int = 0,
    slot_delays: Optional[Sequence[float]] = None,
    started: Optional[Callable[[], None]] = None,
) -> CellResult:
    """Run ``requests`` under ``spec`` through ``sender``; ``offsets`` (open loop) from `arrival_offsets`.

    ``start_at`` is a ``time.perf_counter()`` instant shared by worker processes on one machine.
    With ``control``, every ``control_every``-th request (by index) goes through it instead (the
    thin reader), interleaved under the same load, and is sketched apart. ``slot_delays`` (closed
    loop) are the seconds after the start at which each slot begins (default ``spec.ramp`` spread
    evenly); a worker process gets its slots' share of the whole ramp.

    The client's health (CPU, event-loop lag, GC pauses) covers the measured part only: it is
    reset when the last warm-up request has finished.
    """
    sketches = new_sketches()
    control_sketches = new_sketches()
    samples: list[dict[str, Any]] = []
    unsent: list[float] = []
    dispatch_late = PercentileSketch()
    monitor = _LagMonitor()
    state = _State()
    seen_prefixes: set[str] = set()
    start = start_at if start_at is not None else _clock()
    wall_offset = time.time() - _clock()
    cutoff = start + spec.duration if spec.duration is not None else None

    async def one(req: TrafficRequest, t_sched: float) -> tuple[Observed, float]:
        cold = []
        state.started += 1
        if started is not None:
            started()
        state.in_flight += 1
        if state.in_flight > state.max_in_flight:
            state.max_in_flight = state.in_flight
            cold.append("connection")
        idle_since = state.last_idle
        if state.in_flight == 1 and idle_since is not None and _clock() - idle_since > spec.idle_gap:
            cold.append("idle")
        if req.prefix_id is not None and req.prefix_id not in seen_prefixes:
            seen_prefixes.add(req.prefix_id)
            cold.append("prefix")
        ctl = control is not None and control_every > 0 and req.index % control_every == 0
        t_send = _clock()
        try:
            obs = await (control if ctl and control is not None else sender).send(req)
        finally:
            state.in_flight -= 1
        t_end = _clock()
        if state.in_flight == 0:
            state.last_idle = t_end
        queue = max(t_send - t_sched, 0.0)
        warm = req.index < spec.warmup
        s: dict[str, Any] = {
            "i": req.index, "worker": worker, "shape": req.shape, "bucket": req.bucket, "prefix": req.prefix_id,
            "warmup": warm, "cold": "+".join(cold) or None, "sched": t_sched - start, "sent": t_send - start,
            "queue": queue, "ttft": None if obs.ttft is None else queue + obs.ttft, "ttft_service": obs.ttft,
            "ttfo": None if obs.ttfo is None else queue + obs.ttfo,
            "ttfb": obs.ttfb, "tpot": obs.tpot, "e2e": None if obs.e2e is None else queue + obs.e2e,
            "e2e_service": obs.e2e, "in_tok": obs.input_tokens, "out_tok": obs.output_tokens,
            "reasoning_tok": obs.reasoning_tokens,
            "asked_out": req.output_tokens, "cache_read": obs.cache_read, "cache_write": obs.cache_write,
            "verdict": obs.cache_verdict, "miss_reason": obs.cache_miss_reason, "outcome": obs.outcome,
            "error": obs.error, "attempts": obs.attempts, "chunks": len(obs.chunk_gaps) + (obs.ttft is not None),
            "client": "thin" if ctl else None, "message": obs.error_message,
        }  # fmt: skip
        if "turn" in req.extra:  # a session's turn: which, the think time drawn before it, and when its answer ended
            s.update(session=req.session, turn=req.extra["turn"], turns=req.extra.get("turns"),
                     think=req.extra.get("think"), end=t_end - start)  # fmt: skip
        samples.append(s)
        target = control_sketches if ctl else sketches
        if warm:
            state.warm_left -= 1
            if state.warm_left == 0:
                measured_from()
        if not warm and not ctl:
            state.first = t_send if state.first is None else min(state.first, t_send)
            state.last = t_end if state.last is None else max(state.last, t_end)
        if not warm:
            completed = obs.outcome == "completed"
            for m in SKETCHED:
                v = s.get(m)
                if v is not None and (completed or m not in ("tpot", "e2e", "e2e_service")):
                    target[m].add(max(v, 0.0))
            if obs.chunk_gaps:
                target["itl_chunk"].add_many([max(g, 0.0) for g in obs.chunk_gaps])
            if obs.token_gaps:
                target["itl_token"].add_many([max(g, 0.0) for g in obs.token_gaps])
        if progress is not None:
            progress()
        return obs, t_end

    marks = {"cpu": time.thread_time(), "wall": _clock()}
    gc_pauses = _GcPauses()

    def measured_from() -> None:
        marks["cpu"], marks["wall"] = time.thread_time(), _clock()
        monitor.restart()
        gc_pauses.pauses.clear()

    state.warm_left = sum(1 for r in requests if r.index < spec.warmup)
    tasks: list[asyncio.Future[None]] = []
    counts = {"scheduled": 0, "cut": 0}

    async def closed_loop() -> None:
        assert spec.concurrency is not None
        delay = start - _clock()
        if delay > 0:
            await asyncio.sleep(delay)
        if state.warm_left == 0:
            measured_from()
        n = spec.concurrency
        delays = list(slot_delays) if slot_delays is not None else [spec.ramp * i / n for i in range(n)]
        pending = iter(requests[n:])  # slot i begins with request i (a ramp must not hand it to an early slot)

        async def slot(i: int, begin: float) -> None:
            if begin > 0:
                await asyncio.sleep(max(start + begin - _clock(), 0.0))
            for req in itertools.chain(requests[i : i + 1], pending):
                if cutoff is not None and _clock() >= cutoff:
                    return
                await one(req, _clock())

        tasks.extend(asyncio.ensure_future(slot(i, d)) for i, d in enumerate(delays[:n]))
        await asyncio.gather(*tasks)

    async def open_loop() -> None:
        assert offsets is not None
        sem = asyncio.Semaphore(spec.concurrency) if spec.concurrency else None
        if state.warm_left == 0:
            measured_from()

        async def arrival(req: TrafficRequest, t_sched: float) -> None:
            if sem is None:
                await one(req, t_sched)
                return
            async with sem:
                if cutoff is not None and _clock() >= cutoff:
                    unsent.append(cutoff - t_sched)
                    return
                await one(req, t_sched)

        for req, off in zip(requests, offsets):
            if spec.duration is not None and off >= spec.duration:
                break
            due = start + off
            delay = due - _clock()
            if delay > 0:
                await asyncio.sleep(delay)
            dispatch_late.add(max(_clock() - due, 0.0))
            tasks.append(asyncio.ensure_future(arrival(req, due)))
            counts["scheduled"] += 1
        await asyncio.gather(*tasks)

    async def sessions_loop() -> None:
        # A turn is capped like an open-loop arrival (its wait for a slot is queueing); users run back to back.
        sem = asyncio.Semaphore(spec.concurrency) if spec.concurrency and spec.open_loop else None
        delay = start - _clock()
        if delay > 0:
            await asyncio.sleep(delay)
        if state.warm_left == 0:
            measured_from()

        async def send(req: TrafficRequest, t_sched: float) -> tuple[Any, float]:
            counts["scheduled"] += 1
            if sem is None:
                return await one(req, t_sched)
            async with sem:
                return await one(req, t_sched)

        groups = group_sessions(requests)
        pos = {id(r): i for i, r in enumerate(requests)}
        firsts = None if offsets is None else [offsets[pos[id(g[0])]] for g in groups]
        counts["cut"] = await run_sessions(groups, firsts, spec.concurrency, send, start=start, cutoff=cutoff,
                                           clock=_clock, on_arrival=dispatch_late.add)  # fmt: skip

    monitor.start()
    gc.callbacks.append(gc_pauses)
    interrupted, cut = False, 0
    try:
        await (sessions_loop() if spec.sessions else open_loop() if spec.open_loop else closed_loop())
    except asyncio.CancelledError:
        # Ctrl-C (asyncio.run cancels its main task): keep what finished; what was in flight is cut.
        interrupted = True
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        cut = state.started - len(samples)
        uncancel = getattr(asyncio.current_task(), "uncancel", None)
        if uncancel is not None:  # Python >= 3.11: asyncio.run then returns this partial result
            uncancel()
    finally:
        await monitor.stop()
        gc.callbacks.remove(gc_pauses)
    wall = _clock() - marks["wall"]
    cpu = time.thread_time() - marks["cpu"]
    lag = monitor.lag.quantiles([0.5, 0.99])
    health = {
        "cpu_s": cpu, "wall_s": wall, "cores": cpu / wall if wall > 0 else None,
        "loop_lag_p50": lag[0], "loop_lag_p99": lag[1], "loop_lag_max": monitor.lag.max,
        "loop_lag": monitor.lag.to_dict(), "dispatch_late_p99": dispatch_late.quantile(0.99),
        "dispatch_late_max": dispatch_late.max, "max_in_flight": state.max_in_flight, "load_average": _load_average(),
        **gc_pauses.summary(),
    }  # fmt: skip
    first, last = state.first, state.last
    window = (None if first is None else first + wall_offset, None if last is None else last + wall_offset)
    scheduled = counts["scheduled"] if spec.open_loop or spec.sessions else len(samples)
    return CellResult(samples, sketches, health, scheduled, unsent, window, control_sketches, interrupted, cut,
                      counts.get("cut", 0))  # fmt: skip
