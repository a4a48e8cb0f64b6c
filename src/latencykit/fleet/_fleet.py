"""`Fleet`: long-lived worker actors spread over a Ray cluster's nodes, and one round of a job run on them.

One async actor per worker (`latencykit.fleet._actor.FleetWorker`), pinned to its node
(node affinity, never one actor per request), ``per_node`` of them on each node (default: one
per CPU Ray gives the node). Per round (`Fleet.run`) each live worker is dealt its share of a
job — the bench deals a cell's requests round-robin with their **global** intended send times
(`latencykit.bench._ray_worker`) — every worker gets one start instant on the driver's wall
clock and its clock offset (`latencykit.fleet._clock`), and each returns its result.

A worker that dies mid-round (its node lost, the process killed) does not stop the run: what it
had been dealt is counted from its last progress report as finished-but-lost, in flight (cut)
and unsent, and the next rounds run on the workers left.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

from ._clock import ClockOffset, measure_offset
from ._cluster import ClusterSpec, LocalRayCluster, check_cluster, import_ray, parse_cluster, ray_env
from ._actor import Job, WorkerInfo

__all__ = ["Fleet", "FleetRound", "SKEW_ENV"]

SKEW_ENV = "LATENCYKIT_TEST_CLOCK_SKEW"
"""Tests only: ``"1=5.0"`` makes worker 1 read its wall clock 5 s fast (a skewed node, detected and corrected)."""
POLL_S = 0.25
"""How long the driver waits for results between looks (a Ctrl-C is seen within it)."""
PROGRESS_S = 1.0
"""How often the driver asks each worker for its progress (what a lost worker had done is known to within it)."""
START_LEAD_S = 0.3


def _skews() -> dict[int, float]:
    text = os.environ.get(SKEW_ENV, "").strip()
    out: dict[int, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        w, _, s = part.partition("=")
        try:
            out[int(w)] = float(s)
        except ValueError:
            raise ValueError(f"{SKEW_ENV} takes WORKER=SECONDS[,WORKER=SECONDS]; got {text!r}") from None
    return out


class Fleet:
    """Worker actors on the Ray cluster at ``cluster`` (`parse_cluster`); use as a context manager.

    ``verbose=False`` keeps Ray's own warnings and log lines (Python warnings, its ``ray`` logger below
    ERROR, its core's C++ log) out of the terminal while the fleet is open; the CLI's default."""

    def __init__(self, cluster: str, per_node: Optional[int] = None, *, verbose: bool = True) -> None:
        self.spec: ClusterSpec = parse_cluster(cluster)
        self.per_node = per_node
        self.verbose = verbose
        self._quiet: Optional[warnings.catch_warnings[None]] = None
        self.local: Optional[LocalRayCluster] = None
        self.workers: list[dict[str, Any]] = []
        """One entry per worker: ``worker``, ``node``, ``node_id``, ``pid``, ``host``, ``clock`` ... and ``alive``."""
        self.nodes: list[dict[str, Any]] = []
        self._actors: list[Any] = []
        self._ray: Any = None
        self._owns_init = False
        self._env_set: dict[str, Optional[str]] = {}
        self.lost: list[dict[str, Any]] = []

    # -- life cycle --------------------------------------------------------------------------
    def __enter__(self) -> "Fleet":
        try:
            return self.open()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def open(self) -> "Fleet":
        """Start (``local:N``) or join the cluster, place the workers, measure their clocks."""
        address = self.spec.ray_address
        connected = "ray" in sys.modules and getattr(sys.modules["ray"], "is_initialized", lambda: False)()
        if self.spec.kind == "local" and connected:
            raise ValueError(f"--cluster {self.spec.text} starts a cluster of its own, but this process is already "
                             "connected to Ray: call ray.shutdown() first, or pass cluster='auto' to use that one")  # fmt: skip
        if not connected:
            check_cluster(self.spec)  # a dead address in a second, on one line: not Ray's timeouts and warnings
        if not self.verbose:
            self._quiet = warnings.catch_warnings()
            self._quiet.__enter__()
            warnings.filterwarnings("ignore", module=r"ray(\.|$)")
        if self.spec.kind == "local":
            for k, v in ray_env().items():  # this driver joins on 127.0.0.1 too (read when ray is imported)
                self._env_set[k] = os.environ.get(k)
                os.environ[k] = v
        ray = self._ray = import_ray()
        if self.spec.kind == "local":
            self._loopback(ray, True)
            self.local = LocalRayCluster(self.spec.nodes)  # set first: `close` stops it whatever `start` reached
            address = self.local.start().address
        if not ray.is_initialized():
            level = logging.WARNING if self.verbose else logging.ERROR
            logging.getLogger("ray").setLevel(level)
            try:
                extra = {"_node_ip_address": "127.0.0.1"} if self.local is not None else {}
                with contextlib.nullcontext() if self.verbose else _native_stderr_hushed():
                    ray.init(address=address, logging_level=level, log_to_driver=False, namespace="latencykit-bench",
                             **extra)  # fmt: skip
            except ConnectionError as exc:
                more = "" if self.verbose else "; --verbose shows Ray's own log lines"
                raise ValueError(f"--cluster {self.spec.text}: no Ray cluster answered ({exc}){more}") from None
            self._owns_init = True
        nodes = sorted((n for n in ray.nodes() if n.get("Alive")), key=lambda n: (n.get("NodeManagerAddress", ""), n["NodeID"]))
        if not nodes:
            raise ValueError(f"--cluster {self.spec.text}: the cluster has no live node")
        import importlib

        from ._actor import FleetWorker

        NodeAffinitySchedulingStrategy = importlib.import_module("ray.util.scheduling_strategies").NodeAffinitySchedulingStrategy

        remote = ray.remote(num_cpus=0, max_restarts=0)(FleetWorker)
        skews = _skews()
        w = 0
        for i, n in enumerate(nodes):
            count = self.per_node or max(int(n.get("Resources", {}).get("CPU", 1)), 1)
            mine = []
            for _ in range(count):
                strategy = NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False)
                self._actors.append(remote.options(scheduling_strategy=strategy).remote(w, i, n["NodeID"], skews.get(w, 0.0)))
                mine.append(w)
                w += 1
            self.nodes.append({"node": i, "node_id": n["NodeID"], "ip": n.get("NodeManagerAddress"),
                               "cpus": n.get("Resources", {}).get("CPU"), "workers": mine})  # fmt: skip
        hellos = ray.get([a.hello.remote() for a in self._actors], timeout=180)
        for a, h in zip(self._actors, hellos):
            self.workers.append({**h, "clock": measure_offset(_asker(ray, a)), "alive": True})
        for node in self.nodes:
            first = self.workers[node["workers"][0]]
            node.update(host=first["host"], clock=first["clock"].to_dict(), latencykit=first["latencykit"])
        if self.local is not None:
            self.local.remember()
        return self

    def close(self) -> None:
        """Stop the actors, leave the cluster and (``local:N``) stop its every process."""
        ray = self._ray
        if ray is not None:
            for a in self._actors:
                try:
                    ray.kill(a)
                except Exception:
                    pass
            self._actors = []
            if self._owns_init and ray.is_initialized():
                try:
                    ray.shutdown()
                except Exception:
                    pass
            self._owns_init = False
        if self.local is not None:
            self.local.stop()
            self.local = None
        if self._ray is not None and self._env_set:
            self._loopback(self._ray, False)
        for k, v in self._env_set.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self._env_set = {}
        if self._quiet is not None:
            self._quiet.__exit__(None, None, None)
            self._quiet = None

    _saved_cluster_flag: Any = None

    def _loopback(self, ray: Any, on: bool) -> None:
        """Keep this driver's Ray on 127.0.0.1 while it is in a local cluster, also when ``ray`` was imported
        before (Ray reads the switch at import and would otherwise turn 127.0.0.1 into this machine's address)."""
        consts = getattr(getattr(ray, "_private", None), "ray_constants", None)
        if consts is None or not hasattr(consts, "ENABLE_RAY_CLUSTER"):
            return
        if on:
            self._saved_cluster_flag = consts.ENABLE_RAY_CLUSTER
            consts.ENABLE_RAY_CLUSTER = False
        elif self._saved_cluster_flag is not None:
            consts.ENABLE_RAY_CLUSTER = self._saved_cluster_flag
            self._saved_cluster_flag = None

    # -- facts ---------------------------------------------------------------------------------
    def check_reachable(self, base_url: Optional[str]) -> None:
        """``ValueError`` when workers on other hosts are pointed at a loopback URL (an in-process emulator, a
        server an experiment started on 127.0.0.1): they would measure their own machine, or nothing."""
        from urllib.parse import urlparse

        host = (urlparse(base_url or "").hostname or "").lower()
        if host not in ("127.0.0.1", "localhost", "::1") and not host.startswith("127."):
            return
        here = socket.gethostname()
        away = sorted({w["host"] for w in self.workers if w["host"] != here})
        if away:
            raise ValueError(f"the target {base_url} is on the loopback of {here}, which the workers on "
                             f"{', '.join(away)} cannot reach: serve it on an address they reach (for the emulator, "
                             "`latencykit emulator --host 0.0.0.0` and --base-url http://HOST:8000)")  # fmt: skip

    def describe(self) -> dict[str, Any]:
        """The run file's ``env["cluster"]``: address, nodes (clock offset, uncertainty, workers) and workers."""
        return {
            "address": self.spec.text, "kind": self.spec.kind,
            "local_start_s": None if self.local is None else self.local.started_s,
            "nodes": [dict(n) for n in self.nodes],
            "workers": [{"worker": w["worker"], "node": w["node"], "pid": w["pid"], "host": w["host"],
                         "python": w["python"], "latencykit": w["latencykit"], **w["clock"].to_dict()} for w in self.workers],
            "lost": list(self.lost),
        }  # fmt: skip

    @property
    def alive(self) -> list[int]:
        """Workers still running."""
        return [w["worker"] for w in self.workers if w["alive"]]

    # -- one round -------------------------------------------------------------------------------
    def run(self, job: Callable[[dict[str, Any], WorkerInfo], Job], deal: Callable[[int, int], tuple[dict[str, Any], int]],
            progress: Optional[Callable[[int], None]]) -> "FleetRound":  # fmt: skip
        """Run ``job`` on the live workers, the ``j``-th of ``n`` built from the payload ``deal(j, n)`` gives (with how
        many items it holds), all from one start instant: each worker's result and the workers lost.

        ``RuntimeError`` when no worker is left or every worker failed; a Ctrl-C interrupts the workers
        (each returns what finished) and a second one abandons them."""
        ray = self._ray
        alive = self.alive
        if not alive:
            raise RuntimeError("every cluster worker has been lost; nothing left to run the cell")
        n = len(alive)
        prep: dict[int, Any] = {}
        dealt: dict[int, int] = {}
        for j, w in enumerate(alive):
            payload, dealt[w] = deal(j, n)
            prep[w] = self._actors[w].prepare.remote(job, payload)
        lost: list[dict[str, Any]] = []
        live = self._settle(prep, dealt, lost, timeout=300)
        start_wall = time.time() + START_LEAD_S + max((self.workers[w]["clock"].round_trip for w in live), default=0.0)
        runs = {self._actors[w].run.remote(start_wall, self.workers[w]["clock"].offset): w for w in live}
        results: dict[int, Any] = {}
        errors: list[tuple[int, str]] = []
        seen = {w: {"dealt": dealt[w], "started": 0, "finished": 0} for w in live}
        ticked = [0]
        next_poll = [time.monotonic() + PROGRESS_S]

        def collect(deadline: Optional[float]) -> None:
            while runs and (deadline is None or time.monotonic() < deadline):
                ready, _ = ray.wait(list(runs), num_returns=len(runs), timeout=POLL_S)
                for ref in ready:
                    w = runs.pop(ref)
                    try:
                        data = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:  # the worker's own code raised
                        errors.append((w, _first_line(exc)))
                        continue
                    except ray.exceptions.RayError as exc:  # the actor, its process or its node is gone
                        lost.append(self._lose(w, seen[w], exc))
                        continue
                    results[w] = data["result"]
                    seen[w]["finished"] = int(data["finished"])
                if time.monotonic() >= next_poll[0]:
                    self._poll(runs, seen)
                    next_poll[0] = time.monotonic() + PROGRESS_S
                if progress is not None:
                    done = sum(s["finished"] for s in seen.values())
                    if done != ticked[0]:
                        progress(done - ticked[0])
                        ticked[0] = done

        interrupted = False
        try:
            collect(None)
        except KeyboardInterrupt:
            for w in runs.values():
                self._actors[w].interrupt.remote()
            collect(time.monotonic() + 15)
            for ref, w in list(runs.items()):  # did not answer in time: counted, never waited on forever
                lost.append(self._lose(w, seen[w], RuntimeError("did not answer the interrupt within 15 s")))
                runs.pop(ref)
            if not results:
                raise
            interrupted = True
        if errors and not results:
            raise RuntimeError("; ".join(f"worker {w}: {e}" for w, e in errors))
        for w, e in errors:  # a worker's own failure (not its death): counted like a lost share, with its message
            lost.append(self._lose(w, seen[w], RuntimeError(e), dead=False))
        offsets = {w: self.workers[w]["clock"].offset for w in results}
        return FleetRound({w: results[w] for w in sorted(results)}, offsets, lost, interrupted)

    def _settle(self, refs: dict[int, Any], dealt: dict[int, int], lost: list[dict[str, Any]], timeout: float) -> list[int]:
        """Wait for ``prepare`` on every worker; those that died are lost with everything unsent."""
        ray = self._ray
        live = []
        for w, ref in refs.items():
            try:
                ray.get(ref, timeout=timeout)
                live.append(w)
            except ray.exceptions.RayTaskError as exc:  # a bad share, the same on every worker: not a lost node
                raise RuntimeError(f"cluster worker {w} could not take its share: {_first_line(exc)}") from None
            except ray.exceptions.RayError as exc:  # gone, or no answer within the timeout
                lost.append(self._lose(w, {"dealt": dealt[w], "started": 0, "finished": 0}, exc))
        if not live:
            raise RuntimeError("every cluster worker was lost before the cell started: "
                               + "; ".join(str(x["error"]) for x in lost))  # fmt: skip
        return live

    def _poll(self, runs: dict[Any, int], seen: dict[int, dict[str, int]]) -> None:
        """Refresh each running worker's progress (a dead one simply does not answer)."""
        if not runs:
            return
        ray = self._ray
        asks = {self._actors[w].progress.remote(): w for w in runs.values()}
        ready, _ = ray.wait(list(asks), num_returns=len(asks), timeout=POLL_S)
        for ref in ready:
            try:
                seen[asks[ref]] = ray.get(ref)
            except ray.exceptions.RayError:
                pass

    def _lose(self, w: int, progress: dict[str, int], exc: BaseException, dead: bool = True) -> dict[str, Any]:
        """Count a lost worker's share from its last progress report; later cells run without it."""
        if dead:
            self.workers[w]["alive"] = False
        started, finished = int(progress.get("started", 0)), int(progress.get("finished", 0))
        entry = {"worker": w, "node": self.workers[w]["node"], "error": _first_line(exc), "dealt": int(progress.get("dealt", 0)),
                 "finished_lost": finished, "in_flight": max(started - finished, 0),
                 "unsent": max(int(progress.get("dealt", 0)) - started, 0)}  # fmt: skip
        self.lost.append(entry)
        return entry


@dataclass
class FleetRound:
    """What one `Fleet.run` brought back."""

    results: dict[int, Any]
    """Each worker's result, by worker number, as its job returned it (times on that worker's clocks)."""
    offsets: dict[int, float]
    """Each of those workers' wall clock minus the driver's (seconds): subtract to put its times on the driver's."""
    lost: list[dict[str, Any]]
    """The workers lost (`Fleet.lost` entries): what each had been dealt, finished, had in flight and left unsent."""
    interrupted: bool = False
    """A Ctrl-C cut the round: the results hold what had finished."""


@contextlib.contextmanager
def _native_stderr_hushed() -> Iterator[None]:
    """File descriptor 2 to /dev/null while Ray connects: its core's C++ log lines (a GCS that does not answer
    is retried for some 20 s, a line a second) bypass Python's logging and warnings."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _asker(ray: Any, actor: Any) -> Callable[[], float]:
    def ask() -> float:
        return float(ray.get(actor.clock.remote(), timeout=30))

    return ask


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


def offsets_text(clock: ClockOffset) -> str:
    """``+0.4 ± 1.2 ms``."""
    return f"{clock.offset * 1000:+.1f} ± {clock.uncertainty * 1000:.1f} ms"
