"""`run_bench`: traffic × strategies × load levels → a `BenchRun`, in one process or ``workers``
(`latencykit.bench._workers`).

With the emulator target and no ``base_url`` the emulator runs in this process's background
thread; with workers this process does nothing else, so the emulator then has it to itself.
Ctrl-C stops the run where it is: the cells measured so far, and the interrupted cell's
finished requests, come back in a `BenchRun` marked ``partial``.
"""

from __future__ import annotations

import itertools
import math
import platform
import sys
import threading
import time
from dataclasses import asdict, replace
from typing import Any, Callable, Optional, Sequence

from .._loops import run_coroutine
from .._net_words import redacted_url
from ._cell import BenchRun, Cell
from ._config import LEVERS, BenchConfig, build_requests, parse_matrix, resolve_levers
from ._diagnose import diagnose
from ._load import LoadSpec, arrival_offsets
from ._rates import schedule_of
from ._search import MetricsPoller, RateSearch
from ._stats import parse_slo
from ._targets import TargetSpec, is_emulator, resolve_target
from ._traffic import TrafficRequest
from ._workers import drive, spawn

__all__ = ["LEVERS", "BenchConfig", "find_max_rate", "parse_matrix", "resolve_levers", "run_bench", "diagnose", "environment"]


def environment() -> dict[str, Any]:
    """Versions and machine facts for the run file."""
    from importlib.metadata import PackageNotFoundError, version

    versions: dict[str, Optional[str]] = {}
    # The SDKs' HTTP library is httpx2; plain httpx is listed only where it is installed.
    for pkg in ("latencykit", "openai", "anthropic", "httpx2", "httpx", "aiohttp", "numpy", "rich"):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            if pkg != "httpx":
                versions[pkg] = None
    import os

    return {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
            "versions": versions, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip


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


def run_bench(config: BenchConfig, *, progress: bool = False, console: Any = None, cluster: Any = None,
              per_node: Optional[int] = None, verbose: bool = True) -> BenchRun:
    """Run every strategy at every load level; returns the `BenchRun` (nothing is printed unless ``progress``).

    ``cluster`` (or ``config.cluster``) places the workers on Ray: ``"local:N"`` (a throw-away cluster of N
    nodes on this machine), ``"auto"``, ``"ray://HOST:10001"`` or a head's ``"HOST:PORT"``, with ``per_node``
    workers on each node (default one per CPU); needs ``pip install "latencykit[ray]"``. The run file's
    ``env["cluster"]`` then records every node, its clock offset and its uncertainty. The address is checked
    first (a TCP connection, `check_cluster`): nothing answering there is a one-line ``ValueError`` within
    seconds. ``verbose=False`` keeps Ray's own warnings and log lines out of the terminal (``bench``'s default).

    Ctrl-C (``KeyboardInterrupt``) ends the run early: the `BenchRun` returned holds the finished
    cells and the interrupted cell's finished requests, with ``partial`` saying what was cut. A cluster
    worker lost mid-run does not end it: its share is counted (finished but lost, in flight, unsent), the
    cell is marked partial, and the later cells run on the workers left."""
    from ..emulator import Emulator, TimingModel
    from ..emulator._flags import BENCH_TIMING

    fleet, owned = None, False
    if cluster is not None and not isinstance(cluster, str):  # an open Fleet, shared by several runs (experiments)
        fleet, cluster = cluster, cluster.spec.text
        per_node = per_node if per_node is not None else fleet.per_node
    if cluster is not None or per_node is not None:
        config = replace(config, cluster=cluster if cluster is not None else config.cluster,
                         per_node=per_node if per_node is not None else config.per_node)  # fmt: skip
    if fleet is None and config.cluster is not None:
        from ..fleet._fleet import Fleet

        fleet, owned = Fleet(config.cluster, config.per_node, verbose=verbose), True

    target = resolve_target(config.target, base_url=config.base_url, model=config.model, api=config.api,
                            per_chunk_usage=config.per_chunk_usage, exact_output=config.exact_output)  # fmt: skip
    requests = build_requests(config)
    levels = config.levels()
    emu = None
    if target.kind == "emulator" and target.base_url is None:
        timing = TimingModel(**config.timing) if config.timing else BENCH_TIMING
        emu = Emulator(timing=timing, seed=config.seed).start()
        base = emu.base_url if target.api == "anthropic" else emu.base_url + "/v1"
        target = replace(target, base_url=base)
    else:
        if target.model is None:
            target = replace(target, model=_first_model(target))
        if not target.emulated and target.base_url is not None and is_emulator(target.base_url):
            target = replace(target, emulator_behind=True)  # a vllm / openai-compatible URL served by the emulator
    fitted = None
    if config.traffic == "replay" and config.tokenizer != "estimate" and target.base_url and any(r.extra.get("synthetic") for r in requests):
        from ._tokenize import fit_prompts

        requests, fitted = fit_prompts(requests, target.base_url, target.model, config.seed)
        if fitted is None and config.tokenizer == "server":
            raise ValueError(f"--tokenizer server: {redacted_url(target.base_url)} has no /tokenize to count the synthesized prompts with")
    run_config = {**config.to_dict(), "base_url": redacted_url(config.base_url), "target": target.describe(), "levels": [lv.describe() for lv in levels],
                  "request_count": len(requests)}  # fmt: skip
    if config.traffic == "replay":
        run_config["prompt_lengths"] = fitted or {"tokenizer": "estimate: 4 characters per token + 7 framing tokens"}
    if config.replay is not None:
        run_config["replay_format"] = config.replay_format or _detected(config.replay)
    if emu is not None:
        run_config["emulator_timing"] = asdict(emu.timing)
    run = BenchRun(run_config, environment(), [])
    bar = None
    cells = [(strategy, load) for strategy in config.matrix for load in levels]
    lost: list[str] = []
    try:
        if fleet is not None:
            if owned:
                fleet.__enter__()
            fleet.check_reachable(target.base_url)
            run.env["cluster"] = fleet.describe()
        bar = _Progress(console) if progress else None
        if config.find_max_rate:
            _search(run, config, target, emu, bar, fleet, requests)
            cells = []
        for done, (strategy, load) in enumerate(cells):
            cell = Cell(dict(strategy), dict(config.labels), load.describe())
            try:
                _run_cell(cell, config, requests, target, emu, strategy, load, bar, fleet)
            except KeyboardInterrupt:
                cell.partial = cell.partial or {"reason": "interrupted (Ctrl-C)", "cut": 0}
            if cell.partial is not None and cell.partial.get("workers_lost") and not cell.partial.get("interrupted"):
                run.cells.append(cell)
                lost.append(f"cell {cell.key}: {cell.partial['reason']}")
                continue
            if cell.partial is not None:
                if cell.samples:
                    run.cells.append(cell)
                left = len(cells) - done - 1
                run.partial = (f"interrupted (Ctrl-C) in cell {cell.key} after {len(cell.samples)} of {len(requests)} "
                               f"requests" + (f"; {cell.partial['cut']} in flight were cut" if cell.partial.get("cut") else "")
                               + (f"; {left} more cell(s) not run" if left else ""))  # fmt: skip
                break
            run.cells.append(cell)
    except KeyboardInterrupt:  # between cells, or a second Ctrl-C
        run.partial = run.partial or f"interrupted (Ctrl-C) after {len(run.cells)} of {len(cells)} cells"
    finally:
        if bar is not None:
            bar.close()
        if fleet is not None:
            if "cluster" in run.env:
                run.env["cluster"]["lost"] = list(fleet.lost)
            if owned:
                fleet.close()
        if emu is not None:
            emu.stop()
    if lost:
        run.partial = "; ".join(p for p in (run.partial, "cluster workers lost: " + "; ".join(lost)) if p)
    return run


def _search(run: BenchRun, config: BenchConfig, target: TargetSpec, emu: Any, bar: Optional["_Progress"], fleet: Any,
            replayed: Sequence[TrafficRequest]) -> None:  # fmt: skip
    """``--find-max-rate``: the steps of `RateSearch` as cells, its result as the run's ``max_rate`` section."""
    strategy = dict(config.matrix[0]) if config.matrix else {}
    search = RateSearch([parse_slo(s) for s in config.slos], start=config.rate[0] if config.rate else 1.0,
                        max_duration=config.max_duration)  # fmt: skip
    poller = MetricsPoller(target.base_url)
    measured: list[Cell] = []

    def measure(rate: float, seconds: float, warm_s: float) -> tuple[Cell, dict[str, Any]]:
        spread = 1.0 if config.arrivals == "constant" else 1.5  # Poisson or gamma: more than the mean, never short
        warm = max(config.warmup, math.ceil(warm_s * rate))  # new connections, an idle server: not its steady state
        seconds += warm / rate
        step = replace(config, requests=math.ceil(rate * seconds * spread) + 10, rate=(rate,), duration=seconds, warmup=warm)
        load = LoadSpec(concurrency=config.concurrency[0] if config.concurrency else None, rate=rate, arrivals=config.arrivals,
                        burstiness=config.burstiness, duration=seconds, warmup=warm)  # fmt: skip
        cell = Cell(dict(strategy), dict(config.labels), load.describe())
        with poller:
            try:
                if config.traffic == "replay":  # the file's requests (fitted to the server's tokenizer) in order, cycled
                    reqs = [replace(r, index=i, at=None) for i, r in zip(range(step.requests), itertools.cycle(replayed))]
                else:
                    reqs = build_requests(step)
                _run_cell(cell, step, reqs, target, emu, strategy, load, bar, fleet)
            except KeyboardInterrupt:
                cell.partial = cell.partial or {"reason": "interrupted (Ctrl-C)", "cut": 0}
        measured.append(cell)
        return cell, poller.summary()

    result = search.run(measure)
    kept = {id(s.cell) for s in search.steps}
    run.cells.extend(c for c in measured if id(c) in kept or (c.partial is not None and c.samples))
    run.sections["max_rate"] = result
    run.config["levels"] = [c.load for c in run.cells]
    if result["stopped"] == "interrupted":
        run.partial = f"interrupted (Ctrl-C) during the rate search after {len(search.steps)} decided step(s)"


def find_max_rate(config: BenchConfig, **kwargs: Any) -> BenchRun:
    """`run_bench` with ``find_max_rate=True``: the `BenchRun` of the search, its result in ``run.sections["max_rate"]``
    (the run file's top-level ``max_rate``)."""
    return run_bench(replace(config, find_max_rate=True), **kwargs)


def _run_cell(cell: Cell, config: BenchConfig, requests: Sequence[TrafficRequest], target: TargetSpec, emu: Any,
              strategy: dict[str, str], load: LoadSpec, bar: Optional["_Progress"], fleet: Any = None) -> None:  # fmt: skip
    """Measure one cell into ``cell`` (its ``partial`` set when Ctrl-C cut it)."""
    if emu is not None:
        clear = getattr(emu.cache, "clear", None)
        if clear is not None:
            clear()  # cells do not inherit each other's prompt cache
    _lateness(emu, target.base_url if target.emulated else None, reset=True)
    offsets = arrival_offsets(requests, load, config.seed) if load.open_loop else None
    if offsets is not None and not load.sessions:  # sessions: only first turns follow the schedule (rates per turn)
        cell.schedule = schedule_of(offsets, load.duration)
    tick = bar.start(cell.key, len(requests)) if bar is not None else None
    workers = min(config.workers, load.concurrency) if (load.concurrency and not load.open_loop) else config.workers
    if fleet is not None:
        from ._ray_worker import run_cell_on

        results, lost = run_cell_on(fleet, config, target, load, strategy, requests, offsets, tick)
        for result in results:
            cell.absorb(result)
        if lost:
            _count_lost(cell, lost)
    elif workers == 1:
        result = run_coroutine(lambda: drive(requests, offsets, load, target, strategy, config.control, start_at=None, worker=0,
                                             progress=(lambda: tick(1)) if tick else None, freeze=config.freeze_heap))  # fmt: skip
        cell.absorb(result)
    else:
        shared = requests if config.traffic == "replay" else None  # fitted to the server's tokenizer: sent, not rebuilt
        for result in spawn(config, target, load, strategy, offsets, workers, tick, shared):
            cell.absorb(result)
    if bar is not None:
        bar.stop()
    cell.server = _lateness(emu, target.base_url if target.emulated else None, reset=True)
    cell.warnings = diagnose(cell)


def _count_lost(cell: Cell, lost: Sequence[dict[str, Any]]) -> None:
    """Mark ``cell`` partial for workers lost mid-cell, their share counted (never silently dropped)."""
    part = dict(cell.partial or {"cut": 0})
    interrupted = part.get("reason", "").startswith("interrupted")
    part["workers_lost"] = [dict(x) for x in lost]
    part["cut"] = int(part.get("cut", 0)) + sum(x["in_flight"] for x in lost)
    part["unsent"] = int(part.get("unsent", 0)) + sum(x["unsent"] for x in lost)
    part["finished_lost"] = int(part.get("finished_lost", 0)) + sum(x["finished_lost"] for x in lost)
    who = ", ".join(f"worker {x['worker']} (node {x['node']})" for x in lost)
    why = f"{who} lost: {lost[0]['error']}"
    part["reason"] = f"{part['reason']}; {why}" if interrupted else why
    part["interrupted"] = interrupted
    cell.partial = part


def _detected(path: str) -> Optional[str]:
    """The format of a replay file, from its first non-empty line."""
    from ._traces import detect_format

    with open(path, encoding="utf-8-sig") as f:
        return next((detect_format(line) for line in f if line.strip()), None)


def _first_model(target: TargetSpec) -> Optional[str]:
    import openai

    client = openai.OpenAI(base_url=target.base_url, api_key=target.api_key, max_retries=0, timeout=10)
    try:
        models = client.models.list()
        return next((m.id for m in models), None)
    except Exception as exc:
        from .._net_words import failure_words
        from ._clients import scrub

        why = scrub(failure_words(exc, str(target.base_url)), target.api_key)  # a 401's body may quote the key
        raise ValueError(f"no --model given and {redacted_url(target.base_url)}/models could not be read: {why}") from None
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

