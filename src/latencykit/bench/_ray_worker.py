"""`BenchShare`: a client worker's share of one cell on a Ray worker — the job a `latencykit.fleet` actor runs.

The driver (`run_cell_on`, from `latencykit.bench._run`) deals the live workers of a
`latencykit.fleet.Fleet` the cell's requests round-robin with their **global** intended send
times (an open loop's schedule is the whole run's; a closed loop's concurrency is split) and
hands each this class. On the worker it is built from its share (`prepare`), then, at the
fleet's one start instant converted to the worker's own monotonic clock, runs `drive` there
(`run`). It returns the run-file cell format (sketches, samples, health), never a stream of
records; the driver puts each window on its own timeline and the results merge exactly as
``bench merge`` does.

This module imports no Ray: the fleet's actor (`latencykit.fleet._actor.FleetWorker`) hosts the job.
"""

from __future__ import annotations

import asyncio
import os
import socket
from dataclasses import asdict
from typing import Any, Callable, Optional, Sequence

from ..fleet._actor import WorkerInfo
from ..fleet._fleet import Fleet
from ._config import BenchConfig
from ._load import CellResult, LoadSpec
from ._sessions import deal_key
from ._targets import TargetSpec
from ._traffic import TrafficRequest
from ._workers import result_from_dict, share_of, slot_delays_for

__all__ = ["BenchShare", "run_cell_on"]


class BenchShare:
    """A client worker's share of one cell on one node: ``index`` (global worker number), ``node`` (the node's number in the run)."""

    def __init__(self, payload: dict[str, Any], info: WorkerInfo) -> None:
        self.index = info.index
        self.node = info.node
        self.node_id = info.node_id
        self._skew = info.skew  # tests: pretend this node's wall clock is off by this much
        self._payload = payload
        self._prepared: Optional[dict[str, Any]] = None
        self._counts = {"dealt": 0, "started": 0, "finished": 0}

    async def prepare(self) -> int:
        """Take this worker's share of a cell: build (or receive) its requests; returns how many."""
        from ._config import BenchConfig, build_requests
        from ._load import LoadSpec
        from ._targets import TargetSpec

        payload = self._payload
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
        from ._clients import make_sender
        from ._config import resolve_levers

        senders = [make_sender(target, resolve_levers(strategy))] + ([make_sender(target, {"client": "thin"})] if control > 0 else [])
        for sender in senders:
            await sender.aclose()

    async def run(self, start_at: float, started: Callable[[], None], finished: Callable[[], None]) -> dict[str, Any]:
        """Run the prepared share from ``start_at`` (this process's ``perf_counter``, the fleet's start instant):
        the cell result as a dict, window in this node's wall clock."""
        from ._workers import drive, result_to_dict

        p = self._prepared
        if p is None:
            raise RuntimeError("run() before prepare()")
        self._prepared = None
        counts = self._counts

        def on_finished() -> None:
            counts["finished"] += 1
            finished()

        def on_started() -> None:
            counts["started"] += 1
            started()

        config = p["config"]
        try:
            result = await drive(
                p["requests"], p["offsets"], p["load"], p["target"], p["strategy"], config.control, start_at=start_at,
                worker=self.index, progress=on_finished, slot_delays=p["slot_delays"], freeze=config.freeze_heap,
                started=on_started)  # fmt: skip
        except asyncio.CancelledError:  # interrupted before its load loop began: nothing measured
            from ._load import CellResult, new_sketches

            result = CellResult([], new_sketches(), {}, 0, [], (None, None), new_sketches(), True, counts["started"] - counts["finished"])
        out = result_to_dict(result)
        out["window"] = [None if t is None else t + self._skew for t in out["window"]]  # as this node's clock reads it
        for s in out["samples"]:
            s["node"] = self.node
        out["health"].update(worker=self.index, node=self.node, node_id=self.node_id, host=socket.gethostname(),
                             pid=os.getpid())  # fmt: skip
        return out


def run_cell_on(fleet: Fleet, config: BenchConfig, target: TargetSpec, load: LoadSpec, strategy: dict[str, str],
                requests: Sequence[TrafficRequest], offsets: Optional[list[float]],
                progress: Optional[Callable[[int], None]]) -> tuple[list[CellResult], list[dict[str, Any]]]:  # fmt: skip
    """Run one cell on the fleet's live workers: their results (windows on the driver's clock) and the workers lost.

    ``RuntimeError`` when no worker is left or every worker failed; a Ctrl-C interrupts the workers
    (each returns what finished, marked interrupted) and a second one abandons them."""
    base = {"config": config.to_dict(), "target": asdict(target), "strategy": strategy, "offsets": offsets}
    replay = config.traffic == "replay"

    def deal(j: int, n: int) -> tuple[dict[str, Any], int]:
        share = [r for r in requests if deal_key(r) % n == j]  # a session stays on one worker
        payload = {**base, "load": asdict(share_of(load, j, n)), "slot_delays": slot_delays_for(load, j, n),
                   "indices": [r.index for r in share], "requests": share if replay else None}  # fmt: skip
        return payload, len(share)

    done = fleet.run(BenchShare, deal, progress)
    results = []
    for w, data in done.results.items():
        res = result_from_dict(data)
        off = done.offsets[w]
        res.window = (None if res.window[0] is None else res.window[0] - off,
                      None if res.window[1] is None else res.window[1] - off)  # fmt: skip
        if res.health:  # this worker's measured window, on the driver's timeline
            res.health["window"] = list(res.window)
        if done.interrupted:
            res.interrupted = True
        results.append(res)
    return results, done.lost
