"""Clock offsets between the driver and a worker on another node, the way NTP estimates them.

One exchange: the driver reads its wall clock (``t0``), asks the worker for its wall clock
(``tw``), reads its own again (``t1``). If the request and the reply took equal time, the worker
read its clock at the driver's midpoint, so ``offset = tw - (t0 + t1) / 2``; whatever the split,
the true offset lies within ``± (t1 - t0) / 2`` of that. Of several exchanges the one with the
least round trip wins (it had the least room for an asymmetric delay), and its half round trip
is the stated uncertainty.

Offsets only place events on one shared timeline (a common start instant, the run's window);
latencies are always measured on each worker's own monotonic clock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

__all__ = ["ClockOffset", "estimate_offset", "measure_offset", "start_on_worker"]


@dataclass(frozen=True)
class ClockOffset:
    """A worker's wall clock minus the driver's (seconds), give or take ``uncertainty``."""

    offset: float
    uncertainty: float
    round_trip: float
    exchanges: int

    def to_dict(self) -> dict[str, float]:
        """``offset_s``, ``uncertainty_s``, ``round_trip_s``, ``exchanges`` (for the run file)."""
        return {"offset_s": self.offset, "uncertainty_s": self.uncertainty, "round_trip_s": self.round_trip,
                "exchanges": self.exchanges}  # fmt: skip


def estimate_offset(exchanges: Sequence[tuple[float, float, float]]) -> ClockOffset:
    """The offset from ``(t0, worker_time, t1)`` exchanges: the least-delay one wins (``ValueError`` if none)."""
    valid = [(t0, tw, t1) for t0, tw, t1 in exchanges if t1 >= t0]
    if not valid:
        raise ValueError("no clock exchange to estimate an offset from")
    t0, tw, t1 = min(valid, key=lambda e: e[2] - e[0])
    rtt = t1 - t0
    return ClockOffset(tw - (t0 + t1) / 2, rtt / 2, rtt, len(valid))


def measure_offset(ask: Callable[[], float], rounds: int = 8, clock: Callable[[], float] = time.time) -> ClockOffset:
    """Run ``rounds`` exchanges with ``ask`` (returns the worker's wall clock) and `estimate_offset` them."""
    out = []
    for _ in range(max(rounds, 1)):
        t0 = clock()
        tw = ask()
        t1 = clock()
        out.append((t0, tw, t1))
    return estimate_offset(out)


def start_on_worker(start_wall: float, offset: float, wall_now: float, mono_now: float) -> float:
    """The worker's monotonic instant for the driver's wall-clock ``start_wall``.

    ``offset`` is the worker's clock minus the driver's; ``wall_now`` and ``mono_now`` are the
    worker's wall and monotonic clocks read together."""
    return mono_now + (start_wall + offset - wall_now)
