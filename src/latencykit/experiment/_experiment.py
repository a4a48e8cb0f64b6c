"""`experiment`: each server configuration started, timed cold and warm, loaded, measured, stopped.

For each strategy in turn (rounds interleaved ABBA, `ExperimentSpec.order`):

1. start its command in its own process group on a free 127.0.0.1 port (`ServerRegistry`);
   **ready** = spawn → the ready path answers 200; the process tree's RSS (and GPU memory) is
   sampled from the spawn on;
2. send the traffic's first request alone through the latencykit client: spawn → its first
   token, and its TTFT (later set against the same request sent again warm, median of 3);
3. run the warm-up and the traffic through `run_bench` exactly as ``latencykit bench`` does,
   labelled ``strategy=NAME``, while ``/metrics`` is scraped (the doctor's reader) if asked;
4. the quality pass (once per strategy): fixed prompts at temperature 0 (`_quality`), graded
   against their known answers where they have them (`_tasks`);
5. stop the process group (SIGTERM, SIGKILL after ``stop_timeout``) and check the port is free.

A server that cannot start, exits, or never gets ready fails its strategy (reason, exit code,
last 30 log lines) and the experiment goes on. Ctrl-C or SIGTERM stops every server started;
the live ones are listed in ``<out>/servers.json`` while they run, and each carries
``LATENCYKIT_EXPERIMENT=<run id>`` in its environment. Before the first start the machine's
memory bandwidth is measured once (`_roofline`), and after the last stop every strategy's
roofline TPOT is set beside its measured one.
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence, Union

from .._loops import OwnLoop
from ..bench._cell import BenchRun, Cell
from ..bench._clients import make_sender
from ._run import ExperimentRun, RoundResult, StrategyResult
from ._file import ExperimentFileError, ExperimentSpec, StrategySpec, load_experiment
from ._quality import Answers, collect_answers, compare_answers, load_scorer, quality_prompts
from ..bench._run import BenchConfig, _first_model, environment, resolve_levers, run_bench
from ._memory import MemorySampler
from ._roofline import machine, roofline, strategy_files
from ._servers import ServerFailed, ServerProcess, ServerRegistry, free_port
from ..bench._targets import Observed, TargetSpec, resolve_target
from ..bench._traffic import TrafficRequest, generate, load_replay

__all__ = ["experiment"]

_clock = time.perf_counter
WARM_REPEATS = 3


@dataclass
class _Context:
    spec: ExperimentSpec
    out: Path
    registry: ServerRegistry
    run_id: str
    requests: list[TrafficRequest]
    prompts: list[TrafficRequest]
    console: Any = None
    progress: bool = False
    targets: dict[str, dict[str, Any]] = field(default_factory=dict)
    fleet: Any = None
    """The Ray workers (`latencykit.fleet.Fleet`) every strategy's traffic is sent from, or ``None``."""
    machine: Optional[dict[str, Any]] = None
    """CPU, cores, date and the bandwidth probe (`latencykit.experiment._roofline.machine`), when the roofline is on."""

    def say(self, text: str) -> None:
        if self.console is not None:
            self.console.print(text, highlight=False)


# -- one strategy, one round ----------------------------------------------------------------


class _Probe:
    """The traffic's first request through one latencykit client, on an event loop of its own that
    outlives the bench's (so the warm repeats reuse the client the cold request used)."""

    def __init__(self, target: TargetSpec) -> None:
        self.loop = OwnLoop()  # in a worker thread where this one runs a loop already (a notebook)
        self.sender = make_sender(target, resolve_levers({}))

    def send(self, req: TrafficRequest) -> tuple[Observed, float]:
        """The observation and the ``perf_counter`` instant it was sent."""
        async def one() -> tuple[Observed, float]:
            t = _clock()
            return await self.sender.send(req), t

        return self.loop.run(one())

    def close(self) -> None:
        """Close the client and the loop (quietly: this runs on the way out of an interrupt too)."""
        try:
            self.loop.run(self.sender.aclose())
            self.loop.run(self.loop.loop.shutdown_asyncgens())
        except Exception:  # a loop an interrupt left mid-run; the interrupt is what matters
            pass
        finally:
            self.loop.close()


def _target(spec: ExperimentSpec, s: StrategySpec, url: str) -> TargetSpec:
    model = s.request_model or spec.server.request_model or (s.model if s.base_url else None)
    t = resolve_target(spec.target_kind(s), base_url=url, model=model, api=spec.traffic.get("api"),
                       per_chunk_usage=spec.traffic.get("per_chunk_usage"), exact_output=spec.traffic.get("exact_output"))  # fmt: skip
    if t.model is None:
        t = replace(t, model=_first_model(t))
    return t


class _Scraper:
    """``/metrics`` every ``interval`` seconds on a thread; `stop` gives the window's summary."""

    def __init__(self, url: str, interval: float = 2.0) -> None:
        self.url = url
        self.interval = interval
        self.scrapes: list[Any] = []
        self.error: Optional[str] = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="latencykit-metrics", daemon=True)

    def _scrape(self) -> None:
        try:
            from ..engines import fetch_metrics

            self.scrapes.append(fetch_metrics(self.url, timeout=5))
        except ImportError as exc:
            self.error = str(exc)
            self._stop.set()
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"

    def _run(self) -> None:
        self._scrape()
        while not self._stop.wait(self.interval):
            self._scrape()

    def start(self) -> "_Scraper":
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(timeout=10)
        if self.error is None:
            self._scrape()
        if len(self.scrapes) < 2:
            return {"error": self.error or "fewer than two scrapes"}
        from ..engines import MetricsWindow

        window = MetricsWindow(self.scrapes)
        out: dict[str, Any] = window.summary()
        for key in ("spec_draft_tokens", "spec_accepted_tokens"):  # counts: the rate alone hides "drafted nothing"
            out.setdefault(key, window.delta(key))
        if self.error:
            out["error"] = self.error
        return out


def _run_round(ctx: _Context, s: StrategySpec, rnd: int, want_answers: bool) -> tuple[RoundResult, Optional[BenchRun], Optional[Answers]]:
    spec = ctx.spec
    rr = RoundResult(round=rnd)
    server: Optional[ServerProcess] = None
    sampler: Optional[MemorySampler] = None
    bench: Optional[BenchRun] = None
    answers: Optional[Answers] = None
    if s.base_url:
        url = s.base_url
    else:
        port = spec.server.port or free_port()
        argv = spec.argv(s, port)
        log = ctx.out / "logs" / f"{s.name}-r{rnd + 1}.log"
        server = ServerProcess(argv, port, log, {**spec.env(s), "LATENCYKIT_EXPERIMENT": ctx.run_id}, spec.cwd(), s.name)
        rr.port, rr.argv, rr.log = port, argv, str(log)
        url = server.url()
    try:
        if server is not None:
            ctx.registry.start(server)
            rr.pid = server.pid
            ctx.say(f"[bold]{s.name}[/bold] (round {rnd + 1}): started pid {server.pid} on port {server.port}")
            sampler = MemorySampler(server.pid or 0, spec.server.sample_interval).start()
            rr.ready_s = server.wait_ready(spec.server.ready, spec.server.ready_timeout)
            sampler.sample()
            rr.rss_ready = sampler.last_rss
        target = _target(spec, s, url)
        ctx.targets.setdefault(s.name, target.describe())
        probe = _Probe(target)
        try:
            first, t_send = probe.send(ctx.requests[0])
            if first.outcome != "completed" or first.ttft is None:
                raise ServerFailed(f"the first request failed: {first.error_message or first.error or first.outcome}")
            rr.first_ttft_s = first.ttft
            if server is not None and server.spawned_at is not None:
                rr.first_token_s = t_send + first.ttft - server.spawned_at
            ctx.say(f"  ready {_s(rr.ready_s)}, first token {_s(rr.first_token_s)} after spawn (its TTFT {_ms(first.ttft)})")
            scraper = _Scraper(url.rstrip("/") + spec.server.metrics).start() if spec.server.metrics else None
            try:
                bench = run_bench(spec.bench_config(s, url, target.model), progress=ctx.progress, console=ctx.console,
                                  cluster=ctx.fleet)  # fmt: skip
            finally:
                if scraper is not None:
                    rr.metrics = scraper.stop()
            if getattr(bench, "partial", None):  # run_bench returns what it measured on Ctrl-C: the experiment stops
                raise KeyboardInterrupt
            _check_alive(server, "during the traffic")
            repeats = [probe.send(ctx.requests[0])[0] for _ in range(WARM_REPEATS)]
            rr.warm_ttft_s = _median([o.ttft for o in repeats])
            rr.warm_tpot_s = _median([o.tpot for o in repeats])
            contexts = [o.input_tokens + o.output_tokens / 2 for o in repeats if o.input_tokens and o.output_tokens]
            rr.warm_context = sum(contexts) / len(contexts) if contexts else None
        finally:
            probe.close()
        if want_answers:
            q = spec.quality
            answers = collect_answers(target, ctx.prompts, max_tokens=q.max_tokens, temperature=q.temperature,
                                      extra_body=dict(q.extra_body))  # fmt: skip
            if answers.errors:
                ctx.say(f"  quality: {len(answers.errors)} prompt(s) failed; first: {answers.errors[0]}")
        _check_alive(server, "during the quality pass")
    except ServerFailed as exc:
        rr.failed, rr.exit_code = exc.reason, exc.exit_code
        rr.log_tail = exc.log_tail or (server.log_tail() if server is not None else [])
        bench, answers = None, None
    except (ValueError, OSError, RuntimeError) as exc:
        rr.failed = f"{type(exc).__name__}: {exc}"
        rr.exit_code = server.returncode() if server is not None else None
        rr.log_tail = server.log_tail() if server is not None else []
        bench, answers = None, None
    finally:
        if sampler is not None:
            sampler.stop()
            rr.rss_peak, rr.processes = sampler.peak_rss, sampler.max_processes
            rr.gpu, rr.gpu_note = (sampler.gpu_peak or None), sampler.gpu_text()
        if server is not None:
            rr.stop = ctx.registry.stop(server, spec.server.stop_timeout)
    if rr.failed:
        ctx.say(f"  [bold red]FAILED[/bold red]: {_escape(rr.failed)}" + (f" (exit code {rr.exit_code})" if rr.exit_code is not None else ""))
        for line in rr.log_tail:
            ctx.say(f"  [dim]| {_escape(line)}[/dim]")
    elif rr.stop is not None:
        ctx.say(f"  stopped ({rr.stop['how']}, {rr.stop['seconds']:.1f} s), port free: {'yes' if rr.stop['port_free'] else 'NO'}; "
                f"peak RSS {_mb(rr.rss_peak)}")  # fmt: skip
    return rr, bench, answers


def _median(values: Sequence[Optional[float]]) -> Optional[float]:
    xs = sorted(v for v in values if v is not None)
    return xs[len(xs) // 2] if xs else None


def _warm_client(spec: ExperimentSpec) -> None:
    """Import and build the client once before any server starts, so "spawn → first token" does not
    count this process's own imports (seconds on a busy machine)."""
    kind = spec.target_kind(spec.strategy(spec.baseline))
    kind = kind if kind not in ("anthropic", "openai") else "openai-compatible"
    try:
        target = resolve_target(kind, base_url="http://127.0.0.1:9", model="warm-up", api=spec.traffic.get("api"))
        _Probe(target).close()
    except Exception:  # only a warm-up
        pass


def _traffic_requests(config: BenchConfig) -> list[TrafficRequest]:
    if config.traffic == "replay" and config.replay:
        return load_replay(config.replay, seed=config.seed)
    return generate(config.traffic, config.requests, seed=config.seed, documents=config.documents)


def _check_alive(server: Optional[ServerProcess], when: str) -> None:
    if server is None:
        return
    code = server.returncode()
    if code is not None:
        raise ServerFailed(f"exited {when} with code {code}", code, server.log_tail())


def _s(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.2f} s"


def _ms(v: Optional[float]) -> str:
    return "-" if v is None else f"{v * 1000:.0f} ms"


def _mb(v: Optional[float]) -> str:
    return "n/a" if v is None else f"{v / 2**20:,.0f} MiB"


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


# -- the experiment --------------------------------------------------------------------------


@contextlib.contextmanager
def _terminate_as_exit(registry: ServerRegistry) -> Iterator[None]:
    """SIGTERM (CI cancelling a job) becomes SystemExit(143), so the servers are stopped on the way out."""
    main = threading.current_thread() is threading.main_thread()
    old: Any = None
    if main:
        def on_term(signum: int, frame: Any) -> None:
            raise SystemExit(128 + signal.SIGTERM)

        old = signal.signal(signal.SIGTERM, on_term)
    atexit.register(registry.stop_all)
    try:
        yield
    finally:
        registry.stop_all()
        atexit.unregister(registry.stop_all)
        if main:
            signal.signal(signal.SIGTERM, old)


def experiment(
    source: Union[str, Path, Mapping[str, Any], ExperimentSpec], *, out: Union[str, Path, None] = None,
    html: Union[str, Path, None] = None, repeat: Optional[int] = None, only: Sequence[str] = (), progress: bool = False,
    console: Any = None, cluster: Optional[str] = None, per_node: Optional[int] = None, verbose: bool = True,
) -> ExperimentRun:
    """Run an experiment file (or its dict): every strategy started, loaded, measured and stopped.

    Writes ``<out>/experiment.json`` (a bench run file that ``bench compare`` and ``bench merge``
    take), the servers' logs under ``<out>/logs/``, and the HTML report to ``html`` if given;
    ``out`` defaults to ``experiment-<UTC time>``. ``only`` runs those strategies (and the
    baseline). Prints progress to ``console`` (rich) when ``progress``. ``cluster`` / ``per_node``
    send each strategy's traffic from Ray workers as ``latencykit bench --cluster`` does (one set
    of workers for the whole experiment; a server the experiment starts listens on this machine,
    so the nodes must be on it too, e.g. ``local:N``; ``verbose=False`` keeps Ray's own warnings out of the
    terminal). `ExperimentFileError` (a ``ValueError``)
    for a bad file, before any server starts.
    """
    spec = source if isinstance(source, ExperimentSpec) else load_experiment(source)
    unknown = [n for n in only if n not in {s.name for s in spec.strategies}]
    if unknown:
        raise ExperimentFileError(f"{spec.source}: --only: no strategy {unknown[0]!r} (strategies: {', '.join(s.name for s in spec.strategies)})")
    if repeat is not None and repeat < 1:
        raise ExperimentFileError(f"{spec.source}: --repeat: must be >= 1, got {repeat!r}")
    order = spec.order(repeat, only)
    folder = Path(out) if out is not None else Path(time.strftime("experiment-%Y%m%dT%H%M%SZ", time.gmtime()))
    folder.mkdir(parents=True, exist_ok=True)
    if progress and console is None:
        from rich.console import Console

        console = Console()
    requests = _traffic_requests(spec.bench_config(spec.strategy(spec.baseline), None, None))
    q = spec.quality
    prompts = quality_prompts(spec.traffic["shape"], q.prompts, seed=spec.traffic.get("seed", 0),
                              documents=spec.traffic.get("documents", 4), file=q.file, replay=spec.traffic.get("replay"))  # fmt: skip
    _warm_client(spec)
    registry = ServerRegistry(folder / "servers.json", spec.server.stop_timeout)
    ctx = _Context(spec, folder, registry, uuid.uuid4().hex[:12], requests, prompts, console if progress else None, progress)
    if spec.roofline.enabled:
        ctx.machine = machine(spec.roofline.threads)
        bw = ctx.machine["bandwidth"]
        ctx.say(f"memory bandwidth: {bw['bytes_per_s'] / 1e9:.1f} GB/s ({bw['threads']} thread(s), {bw['seconds']:.1f} s probe); "
                f"{ctx.machine['cpu']}, {ctx.machine['cores']} cores")  # fmt: skip
    results = {s.name: StrategyResult(s.name, s.description, s.base_url, lossless=s.lossless,
                                      claim=None if s.claim is None else s.claim.to_dict())
               for _, s in order}  # fmt: skip
    cells: dict[str, Cell] = {}
    configs: list[dict[str, Any]] = []
    interrupted = False
    fleet = None
    if cluster is not None:
        from ..fleet._fleet import Fleet

        BenchConfig(cluster=cluster, per_node=per_node)  # a bad address or count: ValueError before anything starts
        fleet = Fleet(cluster, per_node, verbose=verbose)
        ctx.fleet = fleet
    try:
        if fleet is not None:
            ctx.say(f"starting the cluster workers ({cluster})")
            fleet.__enter__()
        with _terminate_as_exit(registry):
            for rnd, s in order:
                want = q.enabled and s.quality and results[s.name].answers is None
                rr, bench, answers = _run_round(ctx, s, rnd, want)
                results[s.name].rounds.append(rr)
                if answers is not None:
                    results[s.name].answers = answers
                if bench is not None:
                    configs.append(bench.config)
                    for cell in bench.cells:
                        if cell.key in cells:
                            cells[cell.key].merge(cell)
                        else:
                            cells[cell.key] = cell
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        if fleet is not None:
            fleet.close()
        run = _assemble(spec, ctx, order, results, cells, configs, interrupted)
        run.spec["out"] = str(folder)
        with contextlib.suppress(OSError):
            run.save(folder / "experiment.json")
    if html is not None:
        Path(html).write_text(run.to_html())
    return run


def _assemble(spec: ExperimentSpec, ctx: _Context, order: list[tuple[int, StrategySpec]], results: dict[str, StrategyResult],
              cells: dict[str, Cell], configs: list[dict[str, Any]], interrupted: bool) -> ExperimentRun:  # fmt: skip
    base = results.get(spec.baseline)
    scorer = load_scorer(spec.quality.scorer) if spec.quality.scorer else None
    grader = load_scorer(spec.quality.grader) if spec.quality.grader else None
    expected: list[Any] = []
    if spec.quality.file is not None:
        from ._tasks import expected_answers

        expected = expected_answers(spec.quality.file, len(ctx.prompts))
    for r in results.values():
        if base is not None and base.answers is not None and r.answers is not None:
            r.quality = compare_answers(base.answers, r.answers, ctx.prompts, scorer, expected, grader)
        if ctx.machine is not None:
            r.roofline = _roofline(spec, ctx.machine, r)
    names = list(dict.fromkeys(s.name for _, s in order))
    ordered = sorted(cells.values(), key=lambda c: names.index(c.labels.get("strategy", "")) if c.labels.get("strategy") in names else len(names))
    base_target = ctx.targets.get(spec.baseline) or next(iter(ctx.targets.values()), None)
    config = dict(configs[0]) if configs else spec.bench_config(spec.strategy(spec.baseline), None, None).to_dict()
    kind = spec.target_kind(spec.strategy(spec.baseline))
    config["target"] = base_target or {"kind": kind, "emulated": kind == "emulator"}
    config["labels"] = {}
    spec_dict = {"name": spec.name, "description": spec.description, "source": spec.source, "baseline": spec.baseline,
                 "slo": list(spec.slos), "target": kind, "order": [[r, s.name] for r, s in order], "run_id": ctx.run_id,
                 "interrupted": interrupted, "quality": {"prompts": len(ctx.prompts), "max_tokens": spec.quality.max_tokens,
                 "temperature": spec.quality.temperature, "scorer": spec.quality.scorer, "enabled": spec.quality.enabled},
                 "file": spec.raw, "targets": ctx.targets}  # fmt: skip
    if ctx.machine is not None:
        spec_dict["machine"] = ctx.machine
    env = environment()
    if ctx.fleet is not None:
        env["cluster"] = ctx.fleet.describe()
    bench = BenchRun(config, env, ordered)
    return ExperimentRun(bench, [results[n] for n in names], spec_dict)


def _roofline(spec: ExperimentSpec, mach: dict[str, Any], r: StrategyResult) -> Optional[dict[str, Any]]:
    """The strategy's roofline from its command line's model file, its warm context, and the bandwidth of where it ran
    (a GPU when its server held GPU memory and NVML gave that GPU's peak, else the CPU probe)."""
    s = spec.strategy(r.name)
    if s.base_url:
        return {"error": "a running server (base_url): its model file is not known here"}
    done = [x for x in r.rounds if x.argv]
    argv = done[0].argv if done else spec.argv(s, 0)
    files = strategy_files(argv or [], spec.cwd(), s.model or spec.server.model)
    on_gpu = bool(r.gpu_peak()) and any((d.get("server") or 0) > 0 for x in r.rounds for d in (x.gpu or []))
    gpus = mach.get("gpus") or []
    if on_gpu and gpus:
        bandwidth, on = float(gpus[0]["bytes_per_s"]), f"gpu {gpus[0]['name']}"
    else:
        bandwidth, on = float(mach["bandwidth"]["bytes_per_s"]), f"cpu, {mach['bandwidth']['threads']} thread(s)"
    return roofline(files, r.median("warm_context"), bandwidth, on)
