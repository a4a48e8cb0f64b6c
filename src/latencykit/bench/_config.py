"""`BenchConfig`: one ``latencykit bench`` invocation (also the ``config`` of its run file), and the
strategy levers of ``--matrix``: which apply to which client, and the combinations that mean something."""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Optional, Sequence

from ._clients import CALLS, CLIENTS
from ._load import LoadSpec
from ._sessions import generate_sessions, parse_think
from ._stats import parse_slo
from ._traces import FORMATS, load_trace
from ._traffic import SHAPES, TrafficRequest, generate

TOKENIZERS = ("auto", "server", "estimate")

__all__ = ["APPLIES", "LEVERS", "TOKENIZERS", "BenchConfig", "build_requests", "parse_matrix", "plan_matrix", "resolve_levers"]

LEVERS: dict[str, tuple[str, ...]] = {
    "client": CLIENTS,
    "call": CALLS,
    "cache": ("auto", "off"),
    "retry": ("on", "off"),
    "stream": ("forced", "as-asked"),
    "http": ("httpx", "aiohttp"),
    "prewarm": ("off", "on"),
}
"""latencykit's own levers for ``--matrix``. ``stream=forced`` is the latencykit client (every call
streamed); ``stream=as-asked`` sends the app's call as written, through the plain SDK. ``http`` is
the SDK client's HTTP backend: its default httpx transport, or the SDK's own
``DefaultAioHttpClient`` (aiohttp; the SDKs' advice for high concurrency). ``prewarm=on`` fills the
prompt cache with each system prompt's static prefix (``client.latency.prewarm``) before the timed window."""


def resolve_levers(strategy: dict[str, str]) -> dict[str, str]:
    """The sender configuration a strategy means (``stream`` expanded)."""
    out = {"client": "latencykit", "call": "stream", "cache": "auto", "retry": "on", "http": "httpx"}
    out.update({k: v for k, v in strategy.items() if k != "stream"})
    if strategy.get("stream") == "as-asked":
        out["client"] = "sdk"
    elif strategy.get("stream") == "forced":
        out["client"] = "latencykit"
    return out


APPLIES: dict[str, tuple[str, ...]] = {"latencykit": ("call", "cache", "retry", "http", "prewarm"), "sdk": ("call", "retry", "http"), "thin": ()}
"""Which levers change what each client does (``client`` and ``stream`` choose the client)."""
_WHY = {
    "sdk": "the plain SDK has no cache planner",
    "thin": "the thin reader has no SDK, planner, retries or HTTP backend choice",
}


def plan_matrix(items: Sequence[str]) -> tuple[list[dict[str, str]], list[str]]:
    """``["cache=auto,off", "stream=forced,as-asked"]`` → the cells worth running, in order, and notes.

    A lever that does not apply to a combination's client (`APPLIES`: ``cache`` with the plain SDK;
    ``http``, ``call``, ``retry`` or ``cache`` with the thin reader) is left out of that combination,
    and combinations that then coincide run once; each note says which were folded and why.
    ``ValueError`` for an unknown lever or value, or ``client`` and ``stream`` together."""
    axes: list[tuple[str, list[str]]] = []
    for item in items:
        name, sep, values = item.partition("=")
        name = name.strip()
        if not sep or name not in LEVERS:
            raise ValueError(f"--matrix takes lever=value,value with a lever among {', '.join(LEVERS)}; got {item!r}")
        vals = list(dict.fromkeys(v.strip() for v in values.split(",") if v.strip()))
        bad = [v for v in vals if v not in LEVERS[name]]
        if not vals or bad:
            raise ValueError(f"--matrix {name} values must be among {', '.join(LEVERS[name])}; got {values!r}")
        if any(a == name for a, _ in axes):
            raise ValueError(f"--matrix names {name} twice; give its values once, comma-separated")
        axes.append((name, vals))
    names = {a for a, _ in axes}
    if {"client", "stream"} <= names:
        raise ValueError("--matrix: stream=forced is client=latencykit and stream=as-asked is client=sdk; give one of the two levers")
    if not axes:
        return [{}], []
    combos = [dict(zip((a for a, _ in axes), combo)) for combo in itertools.product(*(v for _, v in axes))]
    cells: list[dict[str, str]] = []
    folded: dict[tuple[str, str], set[str]] = {}
    for combo in combos:
        client = resolve_levers(combo)["client"]
        kept = {k: v for k, v in combo.items() if k in ("client", "stream") or k in APPLIES[client]}
        for k in combo.keys() - kept.keys():
            folded.setdefault((client, " ".join(f"{a}={b}" for a, b in combo.items() if a in ("client", "stream"))), set()).add(k)
        if kept not in cells:
            cells.append(kept)
    notes = [f"--matrix: {', '.join(sorted(levers))} does not apply to {who} ({_WHY[client]}); "
             f"{len(combos)} combinations run as {len(cells)} cells" for (client, who), levers in folded.items()]  # fmt: skip
    return cells, notes


def parse_matrix(items: Sequence[str]) -> list[dict[str, str]]:
    """The cells of ``--matrix`` items (`plan_matrix` without its notes)."""
    return plan_matrix(items)[0]


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
    replay_format: Optional[str] = None
    tokenizer: str = "auto"
    """Synthesized trace prompts: ``auto`` fits them to the server's ``/tokenize`` where it has one
    (`latencykit.bench._tokenize`), ``server`` insists on it, ``estimate`` keeps four characters per token."""
    """The ``replay`` file's format (`latencykit.bench._traces.FORMATS`); ``None``: detected from its first line."""
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
    cluster: Optional[str] = None
    """Place the workers on Ray: ``local:N``, ``auto``, ``ray://HOST:10001`` or ``HOST:PORT`` (``None``: this machine)."""
    per_node: Optional[int] = None
    """With ``cluster``: worker processes per node (default: one per CPU Ray gives the node)."""
    find_max_rate: bool = False
    """Search the highest open-loop rate meeting every ``slos`` (`latencykit.bench._search`) instead of the levels."""
    max_duration: float = 300.0
    """``find_max_rate``: seconds the whole search may take (no step starts that would pass it)."""
    turns: int = 4
    """``traffic="sessions"``: turns per session (``requests`` counts turns in all)."""
    think: str = "0s"
    """``traffic="sessions"``: the think time before each later turn (`latencykit.bench._sessions.parse_think`)."""

    def __post_init__(self) -> None:
        if self.traffic not in SHAPES:
            raise ValueError(f"traffic must be one of {', '.join(SHAPES)}; got {self.traffic!r}")
        if self.traffic == "replay" and not self.replay:
            raise ValueError("traffic replay needs a JSONL file (--replay PATH)")
        if self.replay and self.traffic != "replay":
            raise ValueError(f"--replay {self.replay} is replayed traffic: leave --traffic out or say --traffic replay "
                             f"(got --traffic {self.traffic})")  # fmt: skip
        if self.replay_format is not None and self.replay_format not in FORMATS:
            raise ValueError(f"--replay-format must be one of {', '.join(FORMATS)}; got {self.replay_format!r}")
        if self.tokenizer not in TOKENIZERS:
            raise ValueError(f"--tokenizer must be one of {', '.join(TOKENIZERS)}; got {self.tokenizer!r}")
        if self.replay_format is not None and not self.replay:
            raise ValueError("--replay-format says how to read a --replay file; give one")
        if self.arrivals == "recorded" and self.traffic != "replay":
            raise ValueError("--arrivals recorded replays the timestamps of a --replay file; generated traffic has none")
        if not isinstance(self.requests, int) or self.requests < 1:
            raise ValueError(f"requests must be a positive int, got {self.requests!r}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0 requests, got {self.warmup!r}")
        if self.traffic != "replay" and self.warmup >= self.requests:
            raise ValueError(f"--warmup {self.warmup} leaves nothing to measure of --requests {self.requests} per cell; "
                             "the warm-up must be fewer requests than the cell sends")  # fmt: skip
        if not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"workers must be a positive int, got {self.workers!r}")
        if self.cluster is not None:
            from ..fleet._cluster import parse_cluster

            parse_cluster(self.cluster)
            if self.workers != 1:
                raise ValueError("--workers counts processes on this machine; with --cluster say --per-node N (worker "
                                 "processes on each node)")  # fmt: skip
        if self.per_node is not None:
            if not isinstance(self.per_node, int) or isinstance(self.per_node, bool) or self.per_node < 1:
                raise ValueError(f"per_node must be a positive int, got {self.per_node!r}")
            if self.cluster is None:
                raise ValueError("--per-node is for --cluster (worker processes on each node); on this machine use --workers N")
        if not 0 <= self.control < 1:
            raise ValueError(f"control must be a share in [0, 1), got {self.control!r}")
        for s in self.slos:
            parse_slo(s)
        if self.find_max_rate:
            self._check_search()
        if self.traffic == "sessions":
            if not isinstance(self.turns, int) or isinstance(self.turns, bool) or self.turns < 1:
                raise ValueError(f"--turns must be a positive int, got {self.turns!r}")
            parse_think(self.think)
        for strategy in self.matrix:
            for k, v in strategy.items():
                if k not in LEVERS or v not in LEVERS[k]:
                    raise ValueError(f"unknown strategy lever {k}={v}")

    def _check_search(self) -> None:
        if not self.slos:
            raise ValueError("--find-max-rate needs at least one --slo, e.g. --slo 'ttft:p95<=500ms'")
        if len(self.rate) > 1:
            raise ValueError(f"--find-max-rate searches the rates itself: --rate gives its first step, one value (got "
                             f"{','.join(f'{r:g}' for r in self.rate)})")  # fmt: skip
        if len(self.concurrency) > 1:
            raise ValueError("--find-max-rate: --concurrency caps the requests in flight, one value")
        if self.traffic == "sessions" or self.arrivals == "recorded":
            what = "--traffic sessions (sessions arrive, not requests)" if self.traffic == "sessions" else "--arrivals recorded"
            raise ValueError(f"--find-max-rate searches request rates; it does not take {what}")
        if len(self.matrix) > 1:
            raise ValueError("--find-max-rate searches for one strategy at a time; give --matrix levers one value each")
        if not (isinstance(self.max_duration, (int, float)) and self.max_duration > 0):
            raise ValueError(f"--max-duration must be a positive number of seconds, got {self.max_duration!r}")

    def levels(self) -> list[LoadSpec]:
        """One `LoadSpec` per load level (rates × concurrencies; closed loop at 16 by default)."""
        common = dict(arrivals=self.arrivals, burstiness=self.burstiness, duration=self.duration, warmup=self.warmup,
                      ramp=self.ramp, sessions=self.traffic == "sessions")  # fmt: skip
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


def build_requests(config: BenchConfig) -> list[TrafficRequest]:
    """The config's requests: generated traffic, sessions, or the replayed file in any of `FORMATS` (``ValueError``
    when it cannot be read, naming the line, or when the warm-up would take every replayed request)."""
    if config.traffic == "sessions":
        return generate_sessions(config.requests, turns=config.turns, think=parse_think(config.think), seed=config.seed)
    if config.traffic != "replay":
        return generate(config.traffic, config.requests, seed=config.seed, documents=config.documents)
    assert config.replay is not None
    try:
        requests = load_trace(config.replay, fmt=config.replay_format, seed=config.seed)[0]
    except OSError as exc:
        raise ValueError(f"cannot read --replay {config.replay}: {exc.strerror or exc}") from None
    if config.find_max_rate:  # a search step needs its own count: the file's requests in order, cycled, untimed
        requests = [replace(r, index=i, at=None) for i, r in enumerate(itertools.islice(itertools.cycle(requests), config.requests))]
    if config.warmup >= len(requests):
        raise ValueError(f"--warmup {config.warmup} leaves nothing to measure of the {len(requests)} replayed requests")
    return requests

