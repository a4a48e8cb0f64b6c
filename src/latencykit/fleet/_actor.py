"""`FleetWorker`: one long-lived async Ray actor per worker, running the job it is handed.

The driver (`latencykit.fleet._fleet`) makes it an actor with ``ray.remote`` and pins it to a
node. Per round it is handed a job and its share (`prepare`: the job is built here from its
payload, `Job`), then one start instant on the driver's wall clock with its measured clock
offset (`run`): it converts the instant into its own monotonic clock and runs the job from
there. It answers `clock` (its wall clock) for the offset exchanges and `progress` (items
finished and started) while a job runs, and `interrupt` cancels the job (what finished comes
back, marked interrupted by the job). What a job does — the bench's cell share is one
(`latencykit.bench._ray_worker.BenchShare`) — is the caller's: this module imports nothing of it.

This module imports no Ray: the class is made remote by the driver.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional, Protocol

from ._clock import start_on_worker

__all__ = ["FleetWorker", "Job", "WorkerInfo"]


@dataclass(frozen=True)
class WorkerInfo:
    """Who runs a job: ``index`` (global worker number), ``node`` (the node's number in the run), and the
    seconds ``skew`` its wall clock is made to read off by (tests only)."""

    index: int
    node: int
    node_id: str
    skew: float = 0.0


class Job(Protocol):
    """A worker's share of one round, built on the worker as ``job(payload, info)``."""

    def prepare(self) -> Awaitable[int]:
        """Get ready (build the share, warm the clients) before the start instant; how many items it holds."""

    def run(self, start_at: float, started: Callable[[], None], finished: Callable[[], None]) -> Awaitable[Any]:
        """Run from ``start_at`` (this process's ``perf_counter``), calling ``started`` / ``finished`` per item;
        returns what the driver gets back (plain data), also when cancelled."""


class FleetWorker:
    """A worker on one node: ``index`` (global worker number), ``node`` (the node's number in the run)."""

    def __init__(self, index: int, node: int, node_id: str, skew: float = 0.0) -> None:
        self.index = index
        self.node = node
        self.node_id = node_id
        self._skew = skew  # tests: pretend this node's wall clock is off by this much
        self._task: Optional[asyncio.Future[Any]] = None
        self._prepared: Optional[Job] = None
        self._counts = {"dealt": 0, "started": 0, "finished": 0}

    def _wall(self) -> float:
        return time.time() + self._skew

    async def hello(self) -> dict[str, Any]:
        """Who and where this worker is: pid, host, CPUs, versions."""
        try:
            from importlib.metadata import version

            lk: Optional[str] = version("latencykit")
        except Exception:
            lk = None
        return {"worker": self.index, "node": self.node, "node_id": self.node_id, "pid": os.getpid(),
                "host": socket.gethostname(), "cpus": os.cpu_count(), "python": sys.version.split()[0], "latencykit": lk}  # fmt: skip

    async def clock(self) -> float:
        """This node's wall clock (one side of an offset exchange)."""
        return self._wall()

    async def progress(self) -> dict[str, int]:
        """Requests dealt to, started by and finished by this worker in the current cell."""
        return dict(self._counts)

    async def interrupt(self) -> bool:
        """Cancel the running cell (its finished requests still come back); ``False`` if none runs."""
        if self._task is None or self._task.done():
            return False
        self._task.cancel()
        return True

    async def prepare(self, job: Callable[[dict[str, Any], WorkerInfo], Job], payload: dict[str, Any]) -> int:
        """Take this worker's share of a round: ``job`` built from ``payload``, made ready; returns how many items."""
        self._prepared = job(payload, WorkerInfo(self.index, self.node, self.node_id, self._skew))
        dealt = await self._prepared.prepare()
        self._counts = {"dealt": dealt, "started": 0, "finished": 0}
        return dealt

    async def run(self, start_wall: float, offset: float) -> dict[str, Any]:
        """Run the prepared job from the driver's wall-clock instant ``start_wall`` (this worker's clock is
        ``offset`` ahead of the driver's): the job's result and how many items finished."""
        job = self._prepared
        if job is None:
            raise RuntimeError("run() before prepare()")
        self._prepared = None
        start_at = start_on_worker(start_wall, offset, self._wall(), time.perf_counter())
        counts = self._counts

        def finished() -> None:
            counts["finished"] += 1

        def started() -> None:
            counts["started"] += 1

        self._task = asyncio.ensure_future(job.run(start_at, started, finished))
        result = await self._task
        return {"result": result, "finished": counts["finished"]}
