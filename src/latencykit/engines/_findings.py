"""The doctor's rules: from a `MetricsWindow` (and the client's own records) to `Finding`s.

Each rule is a plain function ``(Evidence) -> Finding | None``; `diagnose` runs them all
and answers ``healthy`` when none holds. The advice is the first source article's (see
``reference/articles``): waiting requests with a KV cache that cannot hold another sequence
(`_kv`) are memory pressure (more KV memory: quantize the KV cache or the weights, a higher
``--gpu-memory-utilization``, more GPUs or replicas), waiting requests with KV room are
compute / scheduler pressure (batch more: ``--max-num-seqs``; replicas); speculative decoding
pays only when drafts are accepted (< 0.5 accepted tokens per step = a poor draft/target
pairing).

The rules read every engine the reader knows (vLLM, SGLang, TensorRT-LLM, Triton, TGI,
llama.cpp) where it exposes the evidence; each finding names the engine's own metrics
(``evidence["metrics"]``) and gives its advice in that engine's vocabulary (`_advice`). A
finding needs its evidence: no KV-cache finding for TGI or a plain Triton model (no KV usage
on their pages), no time-outside-the-engine finding where the server has no real TTFT (TGI,
Triton: Triton's request-duration counters are backend time, not a TTFT).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Optional, Sequence

from ..core._record import CallRecord
from . import _advice
from ._kv import KVSnapshot, kv_snapshots
from ._window import MetricsWindow
from ._words import KIND_WORDS, engine_name, evidence_text

__all__ = ["Diagnosis", "Finding", "SlotQueue", "Thresholds", "diagnose", "slot_queue", "KINDS"]

KINDS = (
    "kv_cache_pressure",
    "queue_pressure",
    "weak_speculative_decoding",
    "low_prefix_cache_hit_rate",
    "time_outside_engine",
    "gpu_memory_near_full",
    "unknown_engine",
    "healthy",
)
"""Every ``Finding.kind``, in the order the doctor reports them."""


@dataclass(frozen=True)
class Thresholds:
    """When a rule fires. Fractions are 0-1, times seconds."""

    kv_cache_high: float = 0.9
    """KV-cache usage at or above this is "full" whatever the per-sequence estimate."""
    kv_free_sequences: float = 1.0
    """Below it, the KV cache is "full" when its free part holds fewer than this many more
    sequences of the running ones' size (see `latencykit.engines._kv`)."""
    waiting: float = 1.0
    """At least this many requests waiting (at the window's peak) is a queue."""
    queue_time: float = 0.1
    """... as is a mean server-side queue time (vLLM ``request_queue_time_seconds``) of this many
    seconds, which scrapes cannot miss the way they can miss a short-lived waiting gauge."""
    spec_accepted_per_step: float = 0.5
    """Fewer accepted draft tokens per step than this is weak speculative decoding."""
    spec_min_drafts: float = 10
    """Judge speculative decoding only after this many drafts in the window."""
    prefix_hit_rate: float = 0.3
    """A prefix-cache hit rate below this, with shared prefixes, is low."""
    prefix_min_tokens: float = 1000
    """Judge the hit rate only after this many queried prompt tokens."""
    outside_gap: float = 0.1
    """Client TTFT this many seconds above the server's ..."""
    outside_ratio: float = 1.5
    """... and this many times the server's is time lost outside the engine."""
    min_calls: int = 3
    """Client records needed before comparing client and server TTFT."""
    gpu_memory_high: float = 0.95
    """A GPU with this share of its memory in use (Triton's DCGM gauges) is near full."""
    slot_wait: float = 0.1
    """A call that waited this many seconds longer before its first token than the quickest call
    did (client TTFT minus the server's own per-call TTFT, llama.cpp's ``prompt_ms``), while the
    client had more calls open than the server has slots, waited for a slot."""

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise ValueError(f"Thresholds.{name} must be a number >= 0, got {value!r}")


@dataclass(frozen=True)
class Finding:
    """One thing the doctor found: its ``kind``, the numbers behind it, and what to do."""

    kind: str
    title: str
    evidence: dict[str, Any]
    advice: str

    def __str__(self) -> str:
        return self.text()

    def text(self, server: Optional[str] = None) -> str:
        """The finding in words (its kind, title, evidence and advice; ``server`` names the engine that does
        not expose a figure); `Diagnosis.to_dict` keeps the keys."""
        numbers = evidence_text(self.evidence, server)
        return f"[{KIND_WORDS.get(self.kind, self.kind)}] {self.title} ({numbers})\n  -> {self.advice}"


@dataclass(frozen=True)
class Diagnosis:
    """The doctor's verdict on one window: findings (``healthy`` alone when nothing holds)."""

    findings: tuple[Finding, ...]
    window: dict[str, Any]
    """`MetricsWindow.summary()` of the window judged."""
    client: dict[str, Any] = field(default_factory=dict)
    """What the client's records in the window said (calls, TTFT mean, cache expectations)."""

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds found, in report order."""
        return tuple(f.kind for f in self.findings)

    @property
    def healthy(self) -> bool:
        """Whether nothing limits the server."""
        return self.kinds == ("healthy",)

    def __str__(self) -> str:
        return "\n".join(f.text(self.window.get("server")) for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly: ``findings`` (kind, title, evidence, advice), ``window``, ``client``."""
        findings = [{"kind": f.kind, "title": f.title, "evidence": dict(f.evidence), "advice": f.advice} for f in self.findings]
        return {"findings": findings, "window": dict(self.window), "client": dict(self.client)}


@dataclass(frozen=True)
class Evidence:
    """What the rules read: the window, the records that fall in it, the thresholds."""

    window: MetricsWindow
    records: tuple[CallRecord, ...]
    limits: Thresholds
    capacity: Optional[int] = None
    """Requests the server runs at once (llama-server's slots, vLLM's ``--max-num-seqs``), if known."""

    def summary(self) -> dict[str, Any]:
        """The window's figures."""
        return self.window.summary()

    @property
    def engine(self) -> str:
        """The engine, Triton split by backend (``"triton-trtllm"``): the advice's vocabulary."""
        server = self.window.server
        return "triton-trtllm" if server == "triton" and self.window.last.backend == "tensorrtllm" else server

    def metrics(self, *logical: str) -> Optional[str]:
        """The engine's own names for ``logical`` that the newest scrape holds, comma-separated."""
        names = [self.window.last.metric_name(x) for x in logical]
        return ", ".join(dict.fromkeys(n for n in names if n)) or None

    @property
    def kv_usage_names(self) -> tuple[str, ...]:
        """The logical metrics KV usage was read from: the usage itself, or used and max blocks."""
        return ("kv_cache_usage",) if self.window.last.metric_name("kv_cache_usage") else ("kv_used_blocks", "kv_max_blocks")

    @cached_property
    def kv(self) -> tuple[KVSnapshot, ...]:
        """The window's scrapes judged for KV room (`latencykit.engines._kv`)."""
        return kv_snapshots(self.window, kv_high=self.limits.kv_cache_high, free_sequences=self.limits.kv_free_sequences)


@dataclass(frozen=True)
class SlotQueue:
    """What the client's own records say about waiting for a slot (see `slot_queue`)."""

    capacity: int
    in_flight_max: int
    """The most of the client's calls open at once."""
    contended: tuple[CallRecord, ...]
    """Calls during whose wait for the first token more calls were open than the server has slots."""
    waited: tuple[CallRecord, ...]
    """Contended calls whose first token came ``slot_wait`` s or more later than the quickest call's
    would have (beyond the server's own TTFT for the call)."""
    wait_mean: Optional[float]
    """Mean extra wait of the ``waited`` calls, seconds."""


def _server_ttft(r: CallRecord) -> Optional[float]:
    v = r.extra.get("server_ttft")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def slot_queue(records: Sequence[CallRecord], capacity: Optional[int], limits: Optional[Thresholds] = None) -> Optional[SlotQueue]:
    """Queueing for a slot, read from the client's own records alone (scrapes can miss it).

    Needs the server's slot count (``capacity``) and per-call server TTFT (llama.cpp's
    ``timings.prompt_ms``, which starts when a slot takes the request): a call that waited for
    a slot shows a client TTFT above the server's by more than the quickest call's margin. Only
    calls during whose wait the client itself had more calls open than ``capacity`` count, so
    a client that never over-subscribes the server is never said to queue. ``None`` when
    ``capacity`` or per-call server TTFT is unknown.
    """
    lim = limits or Thresholds()
    timed = [
        r for r in records
        if r.outcome == "completed" and r.ttft is not None and r.e2e is not None and _server_ttft(r) is not None
    ]  # fmt: skip
    if not capacity or capacity < 1 or not timed:
        return None
    spans = [(r.started_at, r.started_at + (r.e2e or 0.0)) for r in timed]
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans], key=lambda e: (e[0], e[1]))
    open_now = in_flight_max = 0
    for _, step in events:
        open_now += step
        in_flight_max = max(in_flight_max, open_now)

    def open_during(start: float, end: float) -> int:
        # calls open at some instant of [start, end]: the most at one time, checked at each start
        instants = [start] + [a for a, _ in spans if start < a <= end]
        return max(sum(1 for a, b in spans if a <= t < b) for t in instants)

    margins = {id(r): (r.ttft or 0.0) - (_server_ttft(r) or 0.0) for r in timed}
    quickest = min(margins.values())
    contended = tuple(r for r in timed if open_during(r.started_at, r.started_at + (r.ttft or 0.0)) > capacity)
    waited = tuple(r for r in contended if margins[id(r)] - quickest >= lim.slot_wait)
    mean = sum(margins[id(r)] - quickest for r in waited) / len(waited) if waited else None
    return SlotQueue(capacity, in_flight_max, contended, waited, mean)


Rule = Callable[[Evidence], Optional[Finding]]


def _kv_bound(ev: Evidence) -> tuple[bool, Optional[KVSnapshot]]:
    """Whether memory held requests back in the window, and the scrape that shows it best.

    A scrape with requests waiting and a full cache (`KVSnapshot.full`) shows it. Where no
    waiting scrape was judged at all (sparse scrapes; the queue seen only in the queue-time
    histogram), a full cache at any scrape with a sequence running stands in, unless a waiting
    scrape showed room. A preemption (or, on V0, a swapped request) happens only when the KV
    cache ran out, even if no scrape caught the peak.
    """
    lim = ev.limits
    waiting = [k for k in ev.kv if k.waiting >= lim.waiting]
    bound = [k for k in waiting if k.full]
    queued = bool(waiting) or (ev.window.queue_time_mean or 0.0) >= lim.queue_time
    if not bound and queued and not any(k.running >= 1 for k in waiting):
        bound = [k for k in ev.kv if k.full and k.running >= 1]
    at = max(bound, key=lambda k: (k.waiting, k.usage)) if bound else None
    evicted = (ev.window.preemptions or 0) > 0 or (ev.window.gauge_max("swapped") or 0) > 0
    return at is not None or evicted, at


def _kv_cache_pressure(ev: Evidence) -> Optional[Finding]:
    w = ev.window
    bound, at = _kv_bound(ev)
    if not bound:
        return None
    preempted = w.preemptions or 0.0
    advice = _advice.kv_pressure(ev.engine, bool(preempted))
    return Finding(
        "kv_cache_pressure",
        "The KV cache cannot hold another sequence: requests wait or are preempted (memory-bound)",
        {
            "kv_cache_usage": at.usage if at else None,
            "running": at.running if at else None,
            "waiting": at.waiting if at else None,
            "kv_free": at.free if at else None,
            "kv_need_per_sequence": at.need if at else None,
            "kv_cache_usage_max": w.gauge_max("kv_cache_usage"),
            "waiting_max": w.gauge_max("waiting") or 0.0,
            "waiting_for_capacity_max": w.waiting_for_capacity_max(),
            "preemptions": preempted,
            "swapped_max": w.gauge_max("swapped") or None,
            "kv_cache_tokens": w.kv_cache_tokens,
            "prompt_tokens_mean": w.prompt_tokens_mean,
            "metrics": ev.metrics(*ev.kv_usage_names, "waiting", "running", "preemptions", "preempted_now", "swapped"),
        },
        advice,
    )


def _queue_pressure(ev: Evidence) -> Optional[Finding]:
    w, lim = ev.window, ev.limits
    waiting = w.gauge_max("waiting")
    usage = w.gauge_max("kv_cache_usage")
    queued = w.queue_time_mean
    slots = slot_queue(ev.records, ev.capacity, lim)
    client_saw = slots is not None and bool(slots.waited)
    if (waiting is None or waiting < lim.waiting) and (queued is None or queued < lim.queue_time) and not client_saw:
        return None
    if _kv_bound(ev)[0]:
        return None  # that is memory pressure, reported above
    rooms = [k.room for k in ev.kv if k.waiting >= lim.waiting and k.room is not None]
    if usage is not None:
        title = "Requests queue while the KV cache has room (compute / scheduling-bound)"
    elif w.exposes("kv_cache_usage"):
        title = "Requests queue (this page holds no KV-cache usage to tell memory from compute)"
    else:
        title = f"Requests queue ({engine_name(w.server)} exposes no KV-cache usage to tell memory from compute)"
    return Finding(
        "queue_pressure",
        title,
        {
            "waiting_max": waiting,
            "waiting_mean": w.gauge_mean("waiting"),
            "running_max": w.gauge_max("running"),
            "kv_cache_usage_max": usage,
            "kv_room_sequences_min": min(rooms) if rooms else None,
            "server_queue_time_mean_s": queued,
            "server_queue_time_p95_s": w.quantile("queue_time", 0.95),
            "server_slots": ev.capacity,
            "client_calls_in_flight_max": slots.in_flight_max if slots else None,
            "client_calls_waited_for_slot": len(slots.waited) if slots else None,
            "client_slot_wait_mean_s": slots.wait_mean if slots else None,
            "batch_token_budget_used_max": w.gauge_max("batch_token_budget_used"),
            "metrics": ev.metrics("waiting", "running", "kv_cache_usage", "queue_time", "queue_us"),
        },
        _advice.queue_pressure(ev.engine),
    )


def _weak_speculative_decoding(ev: Evidence) -> Optional[Finding]:
    w, lim = ev.window, ev.limits
    drafts = w.spec_steps
    per_step = w.spec_accepted_per_step
    if not drafts or drafts < lim.spec_min_drafts or per_step is None or per_step >= lim.spec_accepted_per_step:
        return None
    return Finding(
        "weak_speculative_decoding",
        "Speculative decoding accepts few draft tokens (poor draft/target pairing)",
        {
            "spec_accepted_per_step": per_step,
            "spec_acceptance_rate": w.spec_acceptance_rate,
            "spec_drafts": drafts,
            "spec_draft_tokens": w.delta("spec_draft_tokens"),
            "metrics": ev.metrics("spec_accepted_tokens", "spec_drafts", "spec_accept_length", "spec_accept_rate", "spec_skipped_tokens"),
        },
        _advice.weak_spec(ev.engine, lim.spec_accepted_per_step),
    )


_MISS_ADVICE = {
    "prefix_changed": "the client changes the prefix between calls (a timestamp, an id, reordered "
    "tools or documents before the question): keep the static part byte-identical and first, "
    "dynamic content after it",
    "not_changed_locally": "the client sent the same prefix, so the server dropped it: its KV cache "
    "is too small for the working set (more KV memory, fewer concurrent sequences) or requests "
    "with one prefix reach different replicas (route by prefix or session)",
    "below_minimum": "the shared prefix is shorter than one KV block (vLLM caches whole blocks): "
    "put more of the static content in front",
    "ttl_expired": "calls sharing a prefix are too far apart: the blocks were evicted in between",
}


def _low_prefix_cache_hit_rate(ev: Evidence) -> Optional[Finding]:
    w, lim = ev.window, ev.limits
    queried = w.prefix_cache_queried_tokens
    rate = w.prefix_cache_hit_rate
    if rate is None or queried is None or queried < lim.prefix_min_tokens or rate >= lim.prefix_hit_rate:
        return None
    # "Despite shared prefixes": only the client knows it sent the same prefix again.
    shared = [r for r in ev.records if (r.cache_expected_tokens or 0) > 0]
    if not shared:
        return None
    misses = Counter(r.cache_miss_reason for r in shared if r.cache_miss_reason)
    enabled = w.last.prefix_caching_enabled
    if enabled is False:
        advice = "Prefix caching is off on this server: start vLLM with --enable-prefix-caching."
        reason = None
    else:
        reason = misses.most_common(1)[0][0] if misses else "not_changed_locally"
        advice = "Shared prefixes miss the cache: " + _MISS_ADVICE.get(reason, _MISS_ADVICE["not_changed_locally"]) + "."
        advice += _advice.prefix_note(ev.engine)
    return Finding(
        "low_prefix_cache_hit_rate",
        "Low prefix-cache hit rate although calls share prefixes",
        {
            "prefix_cache_hit_rate": rate,
            "queried_tokens": queried,
            "calls_with_shared_prefix": len(shared),
            "client_expected_tokens": sum(r.cache_expected_tokens or 0 for r in shared),
            "client_read_tokens": sum(r.cache_read_tokens or 0 for r in shared),
            "prefix_caching_enabled": enabled,
            "main_miss_reason": reason,
            "metrics": ev.metrics("prefix_cache_hits", "prefix_cache_queries", "prefix_cache_hit_rate", "prompt_tokens_cached"),
        },
        advice,
    )


def _client_server_ttft(ev: Evidence, skip: Sequence[CallRecord] = ()) -> tuple[Optional[float], Optional[float], int]:
    """Client TTFT mean and the server's figure for the same calls (per call where the adapter
    recorded one, else the window's histogram mean); calls in ``skip`` left out."""
    skipped = {id(r) for r in skip}
    timed = [r for r in ev.records if r.ttft is not None and r.outcome == "completed" and id(r) not in skipped]
    if not timed:
        return None, None, 0
    per_call = [r for r in timed if isinstance(r.extra.get("server_ttft"), (int, float))]
    if len(per_call) == len(timed):
        client = sum(r.ttft or 0.0 for r in per_call) / len(per_call)
        server = sum(float(r.extra["server_ttft"]) for r in per_call) / len(per_call)
        return client, server, len(per_call)
    return sum(r.ttft or 0.0 for r in timed) / len(timed), ev.window.mean("ttft"), len(timed)


def _time_outside_engine(ev: Evidence) -> Optional[Finding]:
    lim = ev.limits
    per_call = all("server_ttft" in r.extra for r in ev.records if r.ttft is not None)
    # llama.cpp's prompt_ms excludes the wait for a slot: calls that waited while the client
    # had more calls open than the server has slots queued inside the server (reported as
    # queue pressure); only the others can show time lost outside it.
    slots = slot_queue(ev.records, ev.capacity, lim) if per_call else None
    client, server, calls = _client_server_ttft(ev, slots.contended if slots else ())
    if client is None or server is None or calls < lim.min_calls:
        return None
    if per_call and (ev.window.gauge_max("waiting") or 0) >= lim.waiting:
        # Requests deferred by the server (perhaps other clients'): the gap is queueing inside it.
        return None
    gap = client - server
    if gap < lim.outside_gap or client < lim.outside_ratio * server:
        return None
    return Finding(
        "time_outside_engine",
        "Client TTFT far above the server's: time is lost outside the engine",
        {"client_ttft_mean_s": client, "server_ttft_mean_s": server, "gap_s": gap, "calls": calls, "metrics": ev.metrics("ttft")},
        "The engine answers fast, the caller waits long: look at the network path, a proxy or "
        "gateway queueing requests, TLS and connection set-up (reuse one client), client-side "
        "work before the request is sent or after the bytes arrived (a blocked event loop), and "
        + _advice.outside_note(ev.engine),
    )


def _gpu_memory_near_full(ev: Evidence) -> Optional[Finding]:
    w = ev.window
    share = w.gpu_memory_usage_max()
    if share is None or share < ev.limits.gpu_memory_high:
        return None
    return Finding(
        "gpu_memory_near_full",
        "GPU memory is nearly all in use",
        {"gpu_memory_usage_max": share, "kv_cache_usage_max": w.gauge_max("kv_cache_usage"), "metrics": "nv_gpu_memory_used_bytes, nv_gpu_memory_total_bytes"},
        _advice.gpu_memory(ev.engine),
    )


RULES: tuple[Rule, ...] = (
    _kv_cache_pressure,
    _queue_pressure,
    _weak_speculative_decoding,
    _low_prefix_cache_hit_rate,
    _time_outside_engine,
    _gpu_memory_near_full,
)


def _in_window(records: Sequence[CallRecord], window: MetricsWindow) -> tuple[CallRecord, ...]:
    if len(window.scrapes) == 1:
        return tuple(records)
    start, end = window.first.wall, window.last.wall
    return tuple(r for r in records if start - 1.0 <= r.started_at <= end)


def diagnose(
    window: MetricsWindow,
    records: Sequence[CallRecord] = (),
    thresholds: Optional[Thresholds] = None,
    *,
    capacity: Optional[int] = None,
) -> Diagnosis:
    """Run every rule over ``window`` and the ``records`` that started in it.

    ``capacity``: how many requests the server runs at once (llama-server's slots, ``-np``), if
    known; with it, calls that waited for a slot are recognised from the records themselves.
    """
    limits = thresholds or Thresholds()
    if not isinstance(limits, Thresholds):
        raise ValueError(f"thresholds must be a latencykit.engines.Thresholds, got {thresholds!r}")
    if capacity is not None and (isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1):
        raise ValueError(f"capacity must be an int >= 1 or None, got {capacity!r}")
    ev = Evidence(window, _in_window(records, window), limits, capacity)
    findings = [f for f in (rule(ev) for rule in RULES) if f is not None]
    summary = window.summary()
    client, server, calls = _client_server_ttft(ev)
    client_view: dict[str, Any] = {"calls": len(ev.records), "client_ttft_mean_s": client, "server_ttft_mean_s": server}
    slots = slot_queue(ev.records, capacity, limits)
    if slots is not None:
        client_view.update(
            server_slots=slots.capacity, calls_in_flight_max=slots.in_flight_max,
            calls_contended=len(slots.contended), calls_waited_for_slot=len(slots.waited),
        )  # fmt: skip
    if not findings:
        findings = [_unknown(ev) if window.server == "unknown" else _healthy(ev, summary)]
    return Diagnosis(tuple(findings), summary, client_view)


def _unknown(ev: Evidence) -> Finding:
    names = sorted(ev.window.last.names)
    return Finding(
        "unknown_engine",
        "No metric latencykit knows on this page: it cannot tell whether the server is idle or saturated",
        {"samples": len(names), "first_names": ", ".join(names[:5]) or None},
        "Point the doctor at the engine's own metrics endpoint: vLLM, SGLang (--enable-metrics) and "
        "TGI serve /metrics on their API port, Triton on port 8002, trtllm-serve at "
        "/prometheus/metrics (with return_perf_metrics), llama-server with --metrics.",
    )


def _healthy(ev: Evidence, summary: dict[str, Any]) -> Finding:
    evidence = {k: summary[k] for k in ("kv_cache_usage_max", "waiting_max", "prefix_cache_hit_rate", "spec_accepted_per_step", "not_exposed")}
    advice = "No action needed."
    enabled = ev.window.last.prefix_caching_enabled
    if enabled is False and (ev.window.prefix_cache_queried_tokens or 0) > 0 and not ev.records:
        # Only the client knows whether its calls resent a prefix; without its records, say what is unknown.
        evidence["prefix_caching_enabled"] = False
        advice = (
            "No action needed for what the server's metrics show. Prefix caching is off: if your "
            "calls share a prefix (system prompt, tools, documents), start vLLM with "
            "--enable-prefix-caching. Only the client's records tell a shared prefix: pass them "
            "(records=, or latencykit doctor --records FILE written by Recorder.to_jsonl)."
        )
    return Finding("healthy", "Nothing limits the server in this window", evidence, advice)
