"""The timing model and the scheduler that applies it (a toy continuous-batching engine).

`TimingModel` is plain configuration.  `Engine` owns the mutable state shared by all
requests on one server: the FIFO of requests waiting for a decode slot, the number of
requests currently decoding, and the seeded jitter RNG.  `Engine.run` is the one timing
loop every protocol handler feeds on: it yields groups of generated-token units at the
wall-clock instants the model says they are produced.
"""

from __future__ import annotations

import asyncio
import collections
import math
import random
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ..telemetry._sketch import PercentileSketch
from ._overrides import RequestOverrides

__all__ = ["IDEAL_TIMING", "Engine", "TimingModel"]

_U = TypeVar("_U")


@dataclass(frozen=True)
class TimingModel:
    """Seconds-based latency model of an LLM server; see the package docstring for semantics."""

    base_ttft: float = 0.05
    prefill_per_token: float = 2e-5
    decode_per_token: float = 0.01
    tokens_per_chunk: int = 1
    max_concurrency: int = 64
    batch_slowdown: float = 0.02
    jitter: float = 0.0
    time_scale: float = 1.0
    output_tokens: int = 32
    reasoning_tokens: int = 128
    """Reasoning tokens a reasoning model generates at medium effort (`_reasoning`)."""

    def __post_init__(self) -> None:
        for name in ("base_ttft", "prefill_per_token", "decode_per_token", "batch_slowdown", "jitter", "time_scale"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"TimingModel.{name} must be a finite number >= 0, got {value!r}")
        for name in ("tokens_per_chunk", "max_concurrency"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise ValueError(f"TimingModel.{name} must be an int >= 1, got {value!r}")
        for name in ("output_tokens", "reasoning_tokens"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 0):
                raise ValueError(f"TimingModel.{name} must be an int >= 0, got {value!r}")


IDEAL_TIMING = TimingModel(
    base_ttft=0.2,
    prefill_per_token=0.0,
    decode_per_token=0.01,
    tokens_per_chunk=1,
    max_concurrency=100_000,
    batch_slowdown=0.0,
    jitter=0.0,
    output_tokens=30,
)
"""The calibration preset (``latencykit bench emulator --ideal``): the truth does not depend on
load. TTFT 200 ms after the request is read, one token every 10 ms, one token per chunk, 30
tokens, so E2E = 490 ms; no prefill cost, no batch slowdown, no slot queue, no jitter."""


def chunked(units: Sequence[_U], size: int) -> list[Sequence[_U]]:
    """Split `units` into consecutive groups of at most `size`."""
    return [units[i : i + size] for i in range(0, len(units), size)]


class Engine:
    """Shared scheduler state: FIFO admission to `max_concurrency` slots plus seeded jitter."""

    def __init__(self, timing: TimingModel, seed: int) -> None:
        self.timing = timing
        self.active = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._rng = random.Random(f"latencykit-emulator-jitter:{seed}")
        # How late each chunk left against its deadline: server-side lateness, so a benchmark
        # can tell a late server (CPU starved) from a late client.
        self.late_first = PercentileSketch()
        self.late_later = PercentileSketch()

    def lateness(self, reset: bool = False) -> dict[str, dict[str, float | int | None]]:
        """Seconds each chunk left after its deadline: ``first`` chunks and ``later`` ones (count, p50, p99, max)."""
        out: dict[str, dict[str, float | int | None]] = {}
        for name, sketch in (("first", self.late_first), ("later", self.late_later)):
            p50, p99 = sketch.quantiles([0.5, 0.99])
            out[name] = {"count": sketch.count, "p50": p50, "p99": p99, "max": sketch.max}
        if reset:
            self.late_first, self.late_later = PercentileSketch(), PercentileSketch()
        return out

    async def acquire(self) -> None:
        """Wait in FIFO order for a decode slot."""
        if self.active < self.timing.max_concurrency and not self._waiters:
            self.active += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            # A slot handed over at the same instant as the cancel must not leak.
            if waiter.done() and not waiter.cancelled():
                self.release()
            elif waiter in self._waiters:  # a release may already have popped it (and passed it over)
                self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        """Free a slot, handing it straight to the oldest waiter so the count never dips."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.active -= 1

    def _jitter(self) -> float:
        sigma = self.timing.jitter
        return math.exp(self._rng.gauss(0.0, sigma)) if sigma > 0 else 1.0

    def ttft(self, uncached_prompt_tokens: int, overrides: RequestOverrides) -> float:
        """Seconds from admission to the first generated token."""
        stall = (overrides.stall_ms or 0.0) / 1000.0
        if overrides.ttft_ms is not None:
            return overrides.ttft_ms / 1000.0 + stall
        t = self.timing
        raw = t.base_ttft + t.prefill_per_token * uncached_prompt_tokens
        return raw * t.time_scale * self._jitter() + stall

    def decode_step(self, overrides: RequestOverrides) -> float:
        """Seconds to produce one token now, slowed by the other requests sharing the batch."""
        if overrides.tpot_ms is not None:
            return overrides.tpot_ms / 1000.0
        t = self.timing
        slowdown = 1.0 + t.batch_slowdown * max(self.active - 1, 0)
        return t.decode_per_token * slowdown * t.time_scale * self._jitter()

    async def run(
        self, units: Sequence[_U], uncached_prompt_tokens: int, overrides: RequestOverrides
    ) -> AsyncGenerator[Sequence[_U], None]:
        """Yield `units` in chunks, each at its modelled wall-clock time; holds a slot meanwhile."""
        loop = asyncio.get_running_loop()
        per_chunk = overrides.tokens_per_chunk or self.timing.tokens_per_chunk
        await self.acquire()
        try:
            # Absolute deadlines: sleeping "until" rather than "for" keeps long streams from drifting.
            deadline = loop.time() + self.ttft(uncached_prompt_tokens, overrides)
            for i, (chunk, silent) in enumerate(_groups(units, per_chunk)):
                if silent:  # tokens generated, not streamed: one wake-up at the last one's time
                    steps = len(chunk) - (0 if i else 1)
                    if overrides.reasoning_tpot_ms is not None:
                        deadline += steps * overrides.reasoning_tpot_ms / 1000.0
                    else:
                        deadline += sum(self.decode_step(overrides) for _ in range(steps))
                elif i:
                    deadline += sum(self.decode_step(overrides) for _ in chunk)
                await _sleep_until(loop, deadline)
                (self.late_later if i else self.late_first).add(max(loop.time() - deadline, 0.0))
                yield chunk
        finally:
            self.release()


def _groups(units: Sequence[_U], size: int) -> list[tuple[Sequence[_U], bool]]:
    """Timed groups: streamed units in chunks of `size`; each run of silent units (a unit
    whose ``text`` is empty: reasoning generated but never streamed) as one group."""
    if all(getattr(u, "text", "x") for u in units):
        return [(chunk, False) for chunk in chunked(units, size)]
    out: list[tuple[Sequence[_U], bool]] = []
    start = 0
    for i in range(1, len(units) + 1):
        if i == len(units) or bool(getattr(units[i], "text", "x")) != bool(getattr(units[start], "text", "x")):
            run = units[start:i]
            if getattr(run[0], "text", "x"):
                out += [(chunk, False) for chunk in chunked(run, size)]
            else:
                out.append((run, True))
            start = i
    return out


async def _sleep_until(loop: asyncio.AbstractEventLoop, deadline: float) -> None:
    delay = deadline - loop.time()
    if delay > 0:
        await asyncio.sleep(delay)
