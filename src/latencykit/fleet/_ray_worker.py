"""`BenchWorker`: one long-lived async Ray actor per client worker, running today's worker loop.

The driver (`latencykit.bench._fleet`) makes it an actor with ``ray.remote`` and pins it to a
node. Per cell it is handed its share (`prepare`), then one start instant on the driver's wall
clock with its measured clock offset (`run`): it converts the instant into its own monotonic
clock and runs `drive` there. It answers `clock` (its wall clock) for the offset exchanges and
`progress` (requests finished and started) while a cell runs, and `interrupt` cancels the cell
(what finished comes back, marked interrupted). It returns the run-file cell format (sketches,
samples, health), never a stream of records.

This module imports no Ray: the class is made remote by the driver.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
from typing import Any, Optional

from ._clock import start_on_worker

__all__ = ["BenchWorker"]


class BenchWorker:
    """A client worker on one node: ``index`` (global worker number), ``node`` (the node's number in the run)."""

    def __init__(self, index: int, node: int, node_id: str, skew: float = 0.0) -> None:
        self.index = index
        self.node = node
        self.node_id = node_id
        self._skew = skew  # tests: pretend this node's wall clock is off by this much
        self._task: Optional[asyncio.Future[Any]] = None
        self._prepared: Optional[dict[str, Any]] = None
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

    async def prepare(self, payload: dict[str, Any]) -> int:
        """Take this worker's share of a cell: build (or receive) its requests; returns how many."""
        from ..bench._config import BenchConfig, build_requests
        from ..bench._load import LoadSpec
        from ..bench._targets import TargetSpec

        config = BenchConfig(**{**payload["config"], "matrix": tuple(payload["config"]["matrix"]), "cluster": None,
                                "per_node": None})  # fmt: skip
        shares = payload.get("requests")
        if shares is None:
            wanted = set(payload["indices"])
            mine = [r for r in build_requests(config) if r.index in wanted]
        else:
            mine = list(shares)
        offsets = payload["offsets"]
        self._prepared = {
            "config": config, "target": TargetSpec(**payload["target"]), "load": LoadSpec(**payload["load"]),
            "requests": mine, "offsets": None if offsets is None else [offsets[r.index] for r in mine],
            "strategy": payload["strategy"], "slot_delays": payload["slot_delays"],
        }  # fmt: skip
        self._counts = {"dealt": len(mine), "started": 0, "finished": 0}
        await self._warm(self._prepared["target"], payload["strategy"], config.control)
        return len(mine)

    @staticmethod
    async def _warm(target: Any, strategy: dict[str, str], control: float) -> None:
        """Build and close the cell's senders once, so the SDK imports (seconds on a cold worker) happen before
        the start instant rather than after it."""
        from ..bench._clients import make_sender
        from ..bench._config import resolve_levers

        senders = [make_sender(target, resolve_levers(strategy))] + ([make_sender(target, {"client": "thin"})] if control > 0 else [])
        for sender in senders:
            await sender.aclose()

    async def run(self, start_wall: float, offset: float) -> dict[str, Any]:
        """Run the prepared share from the driver's wall-clock instant ``start_wall`` (this worker's clock is
        ``offset`` ahead of the driver's): the cell result as a dict, window in this node's wall clock."""
        from ..bench._workers import drive, result_to_dict

        p = self._prepared
        if p is None:
            raise RuntimeError("run() before prepare()")
        self._prepared = None
        start_at = start_on_worker(start_wall, offset, self._wall(), time.perf_counter())
        counts = self._counts

        def finished() -> None:
            counts["finished"] += 1

        def started() -> None:
            counts["started"] += 1

        config = p["config"]
        self._task = asyncio.ensure_future(drive(
            p["requests"], p["offsets"], p["load"], p["target"], p["strategy"], config.control, start_at=start_at,
            worker=self.index, progress=finished, slot_delays=p["slot_delays"], freeze=config.freeze_heap,
            started=started))  # fmt: skip
        try:
            result = await self._task
        except asyncio.CancelledError:  # interrupted before its load loop began: nothing measured
            from ..bench._load import CellResult, new_sketches

            result = CellResult([], new_sketches(), {}, 0, [], (None, None), new_sketches(), True, counts["started"] - counts["finished"])
        out = result_to_dict(result)
        out["window"] = [None if t is None else t + self._skew for t in out["window"]]  # as this node's clock reads it
        for s in out["samples"]:
            s["node"] = self.node
        out["health"].update(worker=self.index, node=self.node, node_id=self.node_id, host=socket.gethostname(),
                             pid=os.getpid())  # fmt: skip
        return out
