"""One bench cell on a `latencykit.fleet.Fleet`: the requests dealt to the Ray workers, each worker's share
run there (`CellShare`, the fleet's job), the results put back on the driver's timeline.

Per cell the requests are dealt round-robin over the live workers with their **global** intended
send times (an open loop's schedule is the whole run's; a closed loop's concurrency is split, a
ramp's slots keep their global order), every worker starts at the fleet's one start instant, and
each returns its cell result — sketches, samples, health — which merge exactly as ``bench merge``
does. A worker lost mid-cell comes back as the fleet counted it (finished-but-lost, in flight,
unsent); `latencykit.bench._run` marks the cell partial.
"""

from __future__ import annotations

import asyncio
import os
import socket
from dataclasses import asdict
from typing import Any, Callable, Optional, Sequence

from ..fleet._fleet import Fleet
from ..fleet._ray_worker import WorkerInfo
from ._config import BenchConfig, build_requests, resolve_levers
from ._load import CellResult, LoadSpec, new_sketches
from ._targets import TargetSpec
from ._traffic import TrafficRequest
from ._workers import drive, result_from_dict, result_to_dict, share_of, slot_delays_for

__all__ = ["CellShare", "run_cell_on"]


def run_cell_on(fleet: Fleet, config: BenchConfig, target: TargetSpec, load: LoadSpec, strategy: dict[str, str],
                requests: Sequence[TrafficRequest], offsets: Optional[list[float]],
                progress: Optional[Callable[[int], None]]) -> tuple[list[CellResult], list[dict[str, Any]]]:  # fmt: skip
    """Run one cell on the fleet's live workers: their results (windows on the driver's clock) and the workers lost.

    ``RuntimeError`` when no worker is left or every worker failed; a Ctrl-C interrupts the workers
    (each returns what finished, marked interrupted) and a second one abandons them."""
    base = {"config": config.to_dict(), "target": asdict(target), "strategy": strategy, "offsets": offsets}
    replay = config.traffic == "replay"

    def deal(j: int, n: int) -> tuple[dict[str, Any], int]:
        share = [r for r in requests if r.index % n == j]
        payload = {**base, "load": asdict(share_of(load, j, n)), "slot_delays": slot_delays_for(load, j, n),
                   "indices": [r.index for r in share], "requests": share if replay else None}  # fmt: skip
        return payload, len(share)

    done = fleet.run(CellShare, deal, progress)
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


class CellShare:
    """A worker's share of one cell, built on the worker from the driver's payload (`latencykit.fleet._ray_worker.Job`)."""

    def __init__(self, payload: dict[str, Any], info: WorkerInfo) -> None:
        self.payload = payload
        self.info = info
        self._prepared: Optional[dict[str, Any]] = None

    async def prepare(self) -> int:
        """Build (or receive) this worker's requests and warm its clients; returns how many requests."""
        payload = self.payload
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
        await self._warm(self._prepared["target"], payload["strategy"], config.control)
        return len(mine)

    @staticmethod
    async def _warm(target: Any, strategy: dict[str, str], control: float) -> None:
        """Build and close the cell's senders once, so the SDK imports (seconds on a cold worker) happen before
        the start instant rather than after it."""
        from ._clients import make_sender

        senders = [make_sender(target, resolve_levers(strategy))] + ([make_sender(target, {"client": "thin"})] if control > 0 else [])
        for sender in senders:
            await sender.aclose()

    async def run(self, start_at: float, started: Callable[[], None], finished: Callable[[], None]) -> dict[str, Any]:
        """Run the prepared share from ``start_at``: the cell result as a dict, window in this node's wall clock."""
        p = self._prepared
        if p is None:
            raise RuntimeError("run() before prepare()")
        self._prepared = None
        counts = {"started": 0, "finished": 0}

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
                worker=self.info.index, progress=on_finished, slot_delays=p["slot_delays"], freeze=config.freeze_heap,
                started=on_started)  # fmt: skip
        except asyncio.CancelledError:  # interrupted before its load loop began: nothing measured
            result = CellResult([], new_sketches(), {}, 0, [], (None, None), new_sketches(), True, counts["started"] - counts["finished"])
        out = result_to_dict(result)
        out["window"] = [None if t is None else t + self.info.skew for t in out["window"]]  # as this node's clock reads it
        for s in out["samples"]:
            s["node"] = self.info.node
        out["health"].update(worker=self.info.index, node=self.info.node, node_id=self.info.node_id, host=socket.gethostname(),
                             pid=os.getpid())  # fmt: skip
        return out
