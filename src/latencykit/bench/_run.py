"""`run_bench`: traffic × strategies × load levels → a `BenchRun`, in one process or ``workers``.

With ``workers=N`` the requests are dealt round-robin to N spawned processes (one event loop
each); a closed loop's concurrency and an open loop's in-flight cap are split between them,
an open loop keeps the global arrival times, and all start at one shared monotonic instant.
Their cells merge exactly (sketches add). With the emulator target and no ``base_url`` the
emulator runs in this process's background thread; with workers this process does nothing
else, so the emulator then has it to itself.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import multiprocessing
import platform
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Optional, Sequence

from ._cell import BenchRun, Cell
from ._clients import CALLS, CLIENTS, make_sender
from ._load import CellResult, LoadSpec, arrival_offsets, run_cell
from ._stats import parse_slo
from ._targets import TargetSpec, resolve_target
from ._traffic import SHAPES, TrafficRequest, generate, load_replay

__all__ = ["LEVERS", "BenchConfig", "parse_matrix", "run_bench", "diagnose"]

LEVERS: dict[str, tuple[str, ...]] = {
    "client": CLIENTS,
    "call": CALLS,
    "cache": ("auto", "off"),
    "retry": ("on", "off"),
    "stream": ("forced", "as-asked"),
    "http": ("httpx", "aiohttp"),
}
"""latencykit's own levers for ``--matrix``. ``stream=forced`` is the latencykit client (every call
streamed); ``stream=as-asked`` sends the app's call as written, through the plain SDK. ``http`` is
the SDK client's HTTP backend: its default httpx transport, or the SDK's own
``DefaultAioHttpClient`` (aiohttp; the SDKs' advice for high concurrency)."""


def resolve_levers(strategy: dict[str, str]) -> dict[str, str]:
    """The sender configuration a strategy means (``stream`` expanded)."""
    out = {"client": "latencykit", "call": "stream", "cache": "auto", "retry": "on", "http": "httpx"}
    out.update({k: v for k, v in strategy.items() if k != "stream"})
    if strategy.get("stream") == "as-asked":
        out["client"] = "sdk"
    elif strategy.get("stream") == "forced":
        out["client"] = "latencykit"
    return out


def parse_matrix(items: Sequence[str]) -> list[dict[str, str]]:
    """``["cache=auto,off", "client=latencykit,sdk"]`` → every combination, in order."""
    axes: list[tuple[str, list[str]]] = []
    for item in items:
        name, sep, values = item.partition("=")
        name = name.strip()
        if not sep or name not in LEVERS:
            raise ValueError(f"--matrix takes lever=value,value with a lever among {', '.join(LEVERS)}; got {item!r}")
        vals = [v.strip() for v in values.split(",") if v.strip()]
        bad = [v for v in vals if v not in LEVERS[name]]
        if not vals or bad:
            raise ValueError(f"--matrix {name} values must be among {', '.join(LEVERS[name])}; got {values!r}")
        axes.append((name, vals))
    if not axes:
        return [{}]
    return [dict(zip((a for a, _ in axes), combo)) for combo in itertools.product(*(v for _, v in axes))]


@dataclass
class BenchConfig:
    """Everything one ``latencykit bench`` invocation needs (also the ``config`` of its run file)."""

    target: str = "emulator"
    base_url: Optional[str] = None
    model: Optional[str] = None
    api: Optional[str] = None
    per_chunk_usage: Optional[bool] = None
    exact_output: Optional[bool] = None
    traffic: str = "chat"
    requests: int = 200
    seed: int = 0
    documents: int = 4
    replay: Optional[str] = None
    concurrency: tuple[int, ...] = ()
    rate: tuple[float, ...] = ()
    arrivals: str = "poisson"
    burstiness: float = 1.0
    duration: Optional[float] = None
    warmup: int = 0
    matrix: tuple[dict[str, str], ...] = ({},)
    labels: dict[str, str] = field(default_factory=dict)
    workers: int = 1
    control: float = 0.0
    """Share of requests sent through the thin reader as an interleaved control (0 = none)."""
    slos: tuple[str, ...] = ()
    ramp: float = 0.0
    """Closed loop: seconds over which the slots start, spread evenly (see `LoadSpec.ramp`)."""
    freeze_heap: bool = True
    """Before each cell, collect and ``gc.freeze()`` what the process holds (the imported SDKs' ~300k
    objects, the generated traffic), so the measured window's full collections scan only what the
    requests allocate; GC pauses are reported in the client's health either way."""
    timing: Optional[dict[str, Any]] = None
    """Emulator `TimingModel` fields for the in-process emulator (default: `BENCH_TIMING`)."""

    def __post_init__(self) -> None:
        if self.traffic not in SHAPES:
            raise ValueError(f"traffic must be one of {', '.join(SHAPES)}; got {self.traffic!r}")
        if self.traffic == "replay" and not self.replay:
            raise ValueError("traffic replay needs a JSONL file (--replay PATH)")
        if not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"workers must be a positive int, got {self.workers!r}")
        if not 0 <= self.control < 1:
            raise ValueError(f"control must be a share in [0, 1), got {self.control!r}")
        for s in self.slos:
            parse_slo(s)
        for strategy in self.matrix:
            for k, v in strategy.items():
                if k not in LEVERS or v not in LEVERS[k]:
                    raise ValueError(f"unknown strategy lever {k}={v}")

    def levels(self) -> list[LoadSpec]:
        """One `LoadSpec` per load level (rates × concurrencies; closed loop at 16 by default)."""
        common = dict(arrivals=self.arrivals, burstiness=self.burstiness, duration=self.duration, warmup=self.warmup,
                      ramp=self.ramp)  # fmt: skip
        if self.rate or self.arrivals == "recorded":
            caps: Sequence[Optional[int]] = self.concurrency or (None,)
            rates: Sequence[Optional[float]] = self.rate or (None,)
            return [LoadSpec(concurrency=c, rate=r, **common) for r in rates for c in caps]  # type: ignore[arg-type]
        return [LoadSpec(concurrency=c, **common) for c in (self.concurrency or (16,))]  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly fields."""
        d = asdict(self)
        d["matrix"] = [dict(m) for m in self.matrix]
        return d


def _requests(config: BenchConfig) -> list[TrafficRequest]:
    if config.traffic == "replay":
        assert config.replay is not None
        return load_replay(config.replay, seed=config.seed)
    return generate(config.traffic, config.requests, seed=config.seed, documents=config.documents)


def environment() -> dict[str, Any]:
    """Versions and machine facts for the run file."""
    from importlib.metadata import PackageNotFoundError, version

    versions: dict[str, Optional[str]] = {}
    for pkg in ("latencykit", "openai", "anthropic", "httpx", "aiohttp", "numpy"):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = None
    import os

    return {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
            "versions": versions, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip


# -- one process ------------------------------------------------------------------------------


async def _drive(
    requests: Sequence[TrafficRequest], offsets: Optional[Sequence[float]], load: LoadSpec, target: TargetSpec,
    strategy: dict[str, str], control: float, *, start_at: Optional[float], worker: int,
    progress: Optional[Callable[[], None]], ready: Optional[Callable[[], float]] = None,
    slot_delays: Optional[Sequence[float]] = None, freeze: bool = True,
) -> CellResult:
    sender = make_sender(target, resolve_levers(strategy))
    thin = make_sender(target, {"client": "thin"}) if control > 0 else None
    if freeze:
        gc.collect()
        gc.freeze()
    try:
        if ready is not None:
            start_at = ready()
        return await run_cell(requests, offsets, load, sender, start_at=start_at, worker=worker, progress=progress,
                              control=thin, control_every=round(1 / control) if control > 0 else 0,
                              slot_delays=slot_delays)  # fmt: skip
    finally:
        if freeze:
            gc.unfreeze()
        await sender.aclose()
        if thin is not None:
            await thin.aclose()


def _slot_delays(load: LoadSpec, w: int, workers: int) -> Optional[list[float]]:
    """Worker ``w``'s slots begin at global slot indices w, w + workers, ... of the whole ramp."""
    if load.open_loop or load.concurrency is None or not load.ramp:
        return None
    c = load.concurrency
    mine = _share(load, w, workers).concurrency or 1
    return [load.ramp * min(j * workers + w, c - 1) / c for j in range(mine)]


def _share(load: LoadSpec, w: int, workers: int) -> LoadSpec:
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
        everything = _requests(config)
        mine = [r for r in everything if r.index % payload["workers"] == w]
        offsets = payload["offsets"]
        my_offsets = None if offsets is None else [offsets[r.index] for r in mine]

        def tick() -> None:
            with counter.get_lock():
                counter.value += 1

        def ready() -> float:
            ready_q.put(w)
            return float(go_q.get())

        result = asyncio.run(_drive(mine, my_offsets, load, target, payload["strategy"], config.control,
                                    start_at=None, worker=w, progress=tick, ready=ready,
                                    slot_delays=payload["slot_delays"], freeze=config.freeze_heap))  # fmt: skip
        result_q.put(("ok", w, _result_to_dict(result)))
    except BaseException as exc:  # report, so the parent never waits forever
        result_q.put(("error", w, f"{type(exc).__name__}: {exc}"))
        ready_q.put(w)


def _result_to_dict(r: CellResult) -> dict[str, Any]:
    return {"samples": r.samples, "sketches": {m: s.to_dict() for m, s in r.sketches.items()}, "health": r.health,
            "scheduled": r.scheduled, "unsent": r.unsent_waits, "window": list(r.window),
            "control": {m: s.to_dict() for m, s in r.control.items()}}  # fmt: skip


def _result_from_dict(d: dict[str, Any]) -> CellResult:
    from ..telemetry._sketch import PercentileSketch

    sk = {m: PercentileSketch.from_dict(s) for m, s in d["sketches"].items()}
    ctl = {m: PercentileSketch.from_dict(s) for m, s in d["control"].items()}
    return CellResult(d["samples"], sk, d["health"], d["scheduled"], d["unsent"], (d["window"][0], d["window"][1]), ctl)


def _spawn(config: BenchConfig, target: TargetSpec, load: LoadSpec, strategy: dict[str, str],
           offsets: Optional[list[float]], workers: int, progress: Optional[Callable[[int], None]]) -> list[CellResult]:  # fmt: skip
    ctx = multiprocessing.get_context("spawn")
    ready_q, result_q, counter = ctx.Queue(), ctx.Queue(), ctx.Value("i", 0)
    go = [ctx.Queue() for _ in range(workers)]
    procs = []
    for w in range(workers):
        payload = {"config": config.to_dict(), "target": asdict(target), "load": asdict(_share(load, w, workers)),
                   "strategy": strategy, "offsets": offsets, "workers": workers,
                   "slot_delays": _slot_delays(load, w, workers)}  # fmt: skip
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
    seen = 0
    while len(results) + len(errors) < workers:
        try:
            status, w, data = result_q.get(timeout=0.25)
        except Exception:
            if progress is not None and counter.value != seen:
                progress(counter.value - seen)
                seen = counter.value
            if not any(p.is_alive() for p in procs) and result_q.empty():
                errors.append("a worker process died without a result")
            continue
        if status == "ok":
            results[w] = _result_from_dict(data)
        else:
            errors.append(f"worker {w}: {data}")
    if progress is not None and counter.value != seen:
        progress(counter.value - seen)
    for p in procs:
        p.join(timeout=10)
    if errors:
        raise RuntimeError("; ".join(errors))
    return [results[w] for w in sorted(results)]


# -- diagnosis -------------------------------------------------------------------------------


def diagnose(cell: Cell) -> list[str]:
    """Warnings for a finished cell: client-bound, server late, unsent, behind schedule."""
    out: list[str] = []
    bound: list[str] = []
    ttft50 = cell.value("ttft_service", 0.5) or 0.0
    starved: list[str] = []
    for h in cell.health:
        lag = h.get("loop_lag_p99")
        cores = h.get("cores")
        if lag is not None and lag > max(0.02, 0.1 * ttft50):
            if cores is not None and cores < 0.5:
                load = h.get("load_average")
                starved.append(f"event-loop lag p99 {lag * 1000:.0f} ms while using only {cores:.2f} cores"
                               + (f" (machine load average {load:.1f})" if load is not None else ""))  # fmt: skip
            else:
                bound.append(f"event-loop lag p99 {lag * 1000:.0f} ms")
        if cores is not None and cores > 0.85:
            bound.append(f"a client process used {cores:.2f} cores (one event loop can use one)")
        late = h.get("dispatch_late_p99")
        if late is not None and late > 0.05:
            bound.append(f"the dispatcher woke {late * 1000:.0f} ms late (p99)")
    if bound:
        import os

        used = sum(h.get("cores") or 0.0 for h in cell.health)
        cpus = os.cpu_count() or 1
        advice = ("use --workers N or fewer streams" if used < 0.6 * cpus else
                  f"the client processes used {used:.2f} of this machine's {cpus} cores, so more workers cannot help "
                  "here: fewer streams, or a machine with more cores")  # fmt: skip
        levers = resolve_levers(cell.strategy)
        if levers["client"] != "thin" and levers["http"] == "httpx":
            advice += ("; the SDK's own aiohttp backend (--matrix http=aiohttp) reads streams with about a third "
                       "less client CPU")  # fmt: skip
        out.append("client-bound: " + "; ".join(dict.fromkeys(bound)) +
                   " — the client, not the server, limits these figures; " + advice)  # fmt: skip
    if starved:
        out.append("client-starved: " + "; ".join(dict.fromkeys(starved)) +
                   " — other processes took the CPU from the client, so its clocks ran late; rerun on a quieter machine")  # fmt: skip
    first = (cell.server or {}).get("first") or {}
    if first.get("p99") is not None and first["p99"] > 0.02:
        out.append(f"server-late: the emulator released first chunks {first['p99'] * 1000:.0f} ms late (p99) — "
                   "it shares the CPU with the client")  # fmt: skip
    if cell.unsent_waits:
        waits = sorted(cell.unsent_waits)
        out.append(f"unsent: {len(waits)} of {cell.scheduled} scheduled requests never left the client "
                   f"(they had waited {waits[len(waits) // 2]:.1f} s p50 at the cut-off)")  # fmt: skip
    tp = cell.throughput()
    if tp["offered_rps"] and tp["sent_rps"] is not None and tp["sent_rps"] < 0.9 * tp["offered_rps"]:
        q50 = cell.value("queue", 0.5) or 0.0
        out.append(f"behind schedule: sent {tp['sent_rps']:.1f} req/s of {tp['offered_rps']:g} offered; requests "
                   f"queued {q50:.2f} s (p50) in the client, and that wait is in the headline TTFT/E2E")  # fmt: skip
    return out


# -- the run -----------------------------------------------------------------------------------


def _lateness(emu: Any, url: Optional[str], reset: bool) -> Optional[dict[str, Any]]:
    if emu is not None:
        result: dict[str, Any] = emu.chunk_lateness(reset=reset)
        return result
    if url is None:
        return None
    import json
    import urllib.request

    base = url[:-3] if url.endswith("/v1") else url
    try:
        with urllib.request.urlopen(f"{base}/_emulator/lateness{'?reset=1' if reset else ''}", timeout=2) as resp:
            data: dict[str, Any] = json.loads(resp.read())["lateness"]
            return data
    except Exception:
        return None


def run_bench(config: BenchConfig, *, progress: bool = False, console: Any = None) -> BenchRun:
    """Run every strategy at every load level; returns the `BenchRun` (nothing is printed unless ``progress``)."""
    from ..emulator import Emulator, TimingModel
    from ..emulator._flags import BENCH_TIMING

    target = resolve_target(config.target, base_url=config.base_url, model=config.model, api=config.api,
                            per_chunk_usage=config.per_chunk_usage, exact_output=config.exact_output)  # fmt: skip
    requests = _requests(config)
    levels = config.levels()
    emu = None
    if target.kind == "emulator" and target.base_url is None:
        timing = TimingModel(**config.timing) if config.timing else BENCH_TIMING
        emu = Emulator(timing=timing, seed=config.seed).start()
        base = emu.base_url if target.api == "anthropic" else emu.base_url + "/v1"
        target = replace(target, base_url=base)
    elif target.model is None:
        target = replace(target, model=_first_model(target))
    run_config = {**config.to_dict(), "target": target.describe(), "levels": [lv.describe() for lv in levels]}
    if emu is not None:
        run_config["emulator_timing"] = asdict(emu.timing)
    run = BenchRun(run_config, environment(), [])
    bar = _Progress(console) if progress else None
    try:
        for strategy in config.matrix:
            for load in levels:
                cell = Cell(dict(strategy), dict(config.labels), load.describe())
                if emu is not None:
                    clear = getattr(emu.cache, "clear", None)
                    if clear is not None:
                        clear()  # cells do not inherit each other's prompt cache
                _lateness(emu, target.base_url if target.emulated else None, reset=True)
                offsets = arrival_offsets(requests, load, config.seed) if load.open_loop else None
                tick = bar.start(cell.key, len(requests)) if bar is not None else None
                workers = min(config.workers, load.concurrency) if (load.concurrency and not load.open_loop) else config.workers
                if workers == 1:
                    result = asyncio.run(_drive(requests, offsets, load, target, strategy, config.control, start_at=None,
                                                worker=0, progress=(lambda: tick(1)) if tick else None,
                                                freeze=config.freeze_heap))  # fmt: skip
                    cell.absorb(result)
                else:
                    for result in _spawn(config, target, load, strategy, offsets, workers, tick):
                        cell.absorb(result)
                if bar is not None:
                    bar.stop()
                cell.server = _lateness(emu, target.base_url if target.emulated else None, reset=True)
                cell.warnings = diagnose(cell)
                run.cells.append(cell)
    finally:
        if bar is not None:
            bar.close()
        if emu is not None:
            emu.stop()
    return run


def _first_model(target: TargetSpec) -> Optional[str]:
    import openai

    client = openai.OpenAI(base_url=target.base_url, api_key=target.api_key, max_retries=0, timeout=10)
    try:
        models = client.models.list()
        return next((m.id for m in models), None)
    except Exception as exc:
        raise ValueError(f"no --model given and {target.base_url}/models could not be read: {exc}") from None
    finally:
        client.close()


class _Progress:
    """A rich progress bar per cell, updated from this thread (in-process) or by polling workers."""

    def __init__(self, console: Any) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._p = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                           console=console, transient=False)  # fmt: skip
        self._p.start()
        self._task: Any = None
        self._lock = threading.Lock()

    def start(self, name: str, total: int) -> Callable[[int], None]:
        self._task = self._p.add_task(name, total=total)

        def tick(n: int) -> None:
            with self._lock:
                self._p.advance(self._task, n)

        return tick

    def stop(self) -> None:
        self._p.update(self._task, completed=self._p.tasks[-1].completed)

    def close(self) -> None:
        self._p.stop()
