"""OpenTelemetry spans and metrics for every call, through the OpenTelemetry *API* only.

One ``CLIENT`` span per call, named ``{operation} {model}``, carrying the GenAI attributes
and latencykit's own; it is the current span while the SDK sends the request, so the
Anthropic SDK's own call span nests inside it. Metrics are histograms and counters with
the conventions' bucket boundaries (names in `_semconv`).

With no SDK configured (no provider given, none set globally) a call starts no span and
records no metric: it costs two look-ups of the global providers. Tracers and meters come
from the global providers lazily (the API's proxies follow a provider configured after import), or
from ``tracer_provider=`` / ``meter_provider=``. Prompt text is never recorded unless
``capture_content=True``, and then capped at ``max_content_bytes``. Nothing here raises
into the call: failures are logged.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import time
from typing import Any, Mapping, NamedTuple, Optional, Sequence

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ..core._record import CallRecord
from . import _semconv as sc

__all__ = ["Telemetry", "attach_span", "default_telemetry", "detach_span"]

logger = logging.getLogger("latencykit")

_SCOPE = "latencykit"
_VERSION = "0.1.0.dev0"
_FAILED = ("error", "interrupted")


class Telemetry:
    """Where a client's spans and metrics go. ``lk.Anthropic(telemetry=lk.Telemetry(...))``.

    The default instance uses the globally registered providers (configured before or
    after import). Pass providers to isolate a client, ``capture_content=True`` to put the
    request's messages on the span (capped), ``semconv="gen_ai_latest_experimental"`` to
    force the newest GenAI names regardless of ``OTEL_SEMCONV_STABILITY_OPT_IN``.

    ``chunk_metrics=True`` also records ``…time_per_output_chunk`` once per chunk, as the
    conventions describe; it is off by default because an SDK histogram ``record()`` per
    chunk costs more client CPU than the rest of latencykit together (500 chunks ≈ 3–7 ms
    per call on the SDK's histogram). Per-call TPOT is always recorded.
    """

    def __init__(
        self,
        *,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        capture_content: bool = False,
        max_content_bytes: int = 16_384,
        semconv: Optional[str] = None,
        chunk_metrics: bool = False,
    ) -> None:
        if not isinstance(capture_content, bool):
            raise ValueError(f"capture_content must be a bool, got {capture_content!r}")
        if not isinstance(max_content_bytes, int) or isinstance(max_content_bytes, bool) or max_content_bytes < 0:
            raise ValueError(f"max_content_bytes must be a non-negative int, got {max_content_bytes!r}")
        if not isinstance(chunk_metrics, bool):
            raise ValueError(f"chunk_metrics must be a bool, got {chunk_metrics!r}")
        self.chunk_metrics = chunk_metrics
        if semconv is not None and (
            not isinstance(semconv, str) or any(v.strip() not in ("", sc.LATEST) for v in semconv.split(","))
        ):
            raise ValueError(
                f"semconv must be None (follow ${sc.OPT_IN_ENV}), '' (v1.41 names) or {sc.LATEST!r}, got {semconv!r}"
            )
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self.capture_content = capture_content
        self.max_content_bytes = max_content_bytes
        self._semconv_env = semconv
        self._tracer: Any = None
        self._instruments: Optional[_Instruments] = None

    # -- lazily created ------------------------------------------------------------------
    @property
    def names(self) -> sc.SemConv:
        """The naming generation in force (read from the environment each call, cheap)."""
        return sc.semconv(self._semconv_env)

    def _get_tracer(self) -> Any:
        if self._tracer is None:
            self._tracer = trace.get_tracer(_SCOPE, _VERSION, tracer_provider=self._tracer_provider)
        return self._tracer

    def _get_instruments(self, names: sc.SemConv) -> "_Instruments":
        inst = self._instruments
        if inst is None or inst.names is not names:
            meter = metrics.get_meter(_SCOPE, _VERSION, meter_provider=self._meter_provider)
            inst = self._instruments = _Instruments(meter, names)
        return inst

    @property
    def tracing(self) -> bool:
        """Whether a span could be recorded: a tracer provider was given, or one is set globally.

        Before any global provider is set the API hands out its stand-in, whose spans record
        nothing; the call then starts no span at all. Checked on every call: a provider set
        after the client was created is followed from the next call on.
        """
        return self._tracer_provider is not None or _configured(_TRACE_GLOBAL, trace.get_tracer_provider)

    @property
    def metering(self) -> bool:
        """Whether metrics could be recorded: a meter provider was given, or one is set globally."""
        return self._meter_provider is not None or _configured(_METER_GLOBAL, metrics.get_meter_provider)

    # -- per call ------------------------------------------------------------------------
    def start(self, rec: CallRecord, request: Optional[Mapping[str, Any]] = None) -> tuple[Any, int]:
        """Start the call's span (before the SDK is called); returns ``(span, start_ns)``.

        The span is ``None`` when nothing could record it (see `tracing`).
        """
        start_ns = time.time_ns()
        if not self.tracing:
            return None, start_ns
        try:
            n = self.names
            attributes: dict[str, Any] = {n.operation: rec.operation, n.provider: rec.provider}
            if rec.request_model:
                attributes[n.request_model] = rec.request_model
            if rec.server_address:
                attributes[n.server_address] = rec.server_address
            if rec.server_port:
                attributes[n.server_port] = rec.server_port
            if rec.streamed:
                attributes[n.request_stream] = True
            name = f"{rec.operation} {rec.request_model}" if rec.request_model else rec.operation
            span = self._get_tracer().start_span(name, kind=SpanKind.CLIENT, attributes=attributes, start_time=start_ns)
            if request is not None and self.capture_content and span.is_recording():
                self._capture(span, n, request)
            return span, start_ns
        except Exception:
            logger.debug("latencykit: could not start a span", exc_info=True)
            return None, start_ns

    def end(self, span: Any, start_ns: int, rec: CallRecord, gaps: Sequence[float]) -> None:
        """Finish the span and record the metrics of one finished call (none while nothing records them)."""
        metering = self.metering
        if span is None and not metering:
            return
        n = self.names
        try:
            if span is not None:
                self._end_span(span, start_ns, rec, n)
        except Exception:
            logger.debug("latencykit: could not end a span", exc_info=True)
        if not metering:
            return
        try:
            self._get_instruments(n).record(rec, gaps if self.chunk_metrics else ())
        except Exception:
            logger.debug("latencykit: could not record metrics", exc_info=True)

    def _end_span(self, span: Any, start_ns: int, rec: CallRecord, n: sc.SemConv) -> None:
        end_ns = start_ns + int((rec.e2e or 0.0) * 1e9)
        if span.is_recording():
            span.set_attributes(_span_attributes(rec, n))
            if rec.ttft is not None:
                span.add_event(sc.EVENT_FIRST_TOKEN, {sc.LK_TTFT: rec.ttft}, timestamp=start_ns + int(rec.ttft * 1e9))
            if rec.ttfo is not None and rec.ttfo != rec.ttft:  # the answer began after reasoning
                span.add_event(sc.EVENT_FIRST_OUTPUT_TOKEN, {sc.LK_TTFO: rec.ttfo}, timestamp=start_ns + int(rec.ttfo * 1e9))
            if rec.cache_verdict == "unexpected_miss":
                span.add_event(sc.EVENT_CACHE_MISS, {sc.LK_CACHE_MISS_REASON: rec.cache_miss_reason or "unknown"})
            if rec.outcome in _FAILED:
                span.set_status(Status(StatusCode.ERROR, rec.error_type or rec.outcome))
        span.end(end_time=end_ns)

    def _capture(self, span: Any, n: sc.SemConv, request: Mapping[str, Any]) -> None:
        messages = request.get("messages", request.get("input"))
        if messages is not None:
            span.set_attribute(n.input_messages, self._cap(messages))
        system = request.get("system", request.get("instructions"))
        if isinstance(system, (str, list)):
            span.set_attribute(n.system_instructions, self._cap(system))

    def _cap(self, value: Any) -> str:
        text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
        raw = text.encode("utf-8")
        if len(raw) <= self.max_content_bytes:
            return text
        return raw[: self.max_content_bytes].decode("utf-8", "ignore") + "…[truncated]"


def _span_attributes(rec: CallRecord, n: sc.SemConv) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        sc.LK_OUTCOME: rec.outcome,
        sc.LK_STREAMED: rec.streamed,
        sc.LK_API: rec.api,
        sc.LK_CHUNKS: rec.chunks,
        sc.LK_ATTEMPTS: rec.attempts,
    }
    if rec.retry_reasons:
        attrs[sc.LK_RETRY_REASONS] = list(rec.retry_reasons)
    if rec.ttft_deadline_hits:
        attrs[sc.LK_TTFT_DEADLINE_HITS] = rec.ttft_deadline_hits
    optional = {
        n.response_model: rec.response_model,
        n.response_id: rec.response_id,
        n.input_tokens: rec.input_tokens,
        n.output_tokens: rec.output_tokens,
        n.reasoning_tokens: rec.reasoning_tokens,
        n.cache_read: rec.cache_read_tokens,
        n.cache_write: rec.cache_write_tokens,
        n.time_to_first_chunk: rec.ttfb if rec.streamed else None,
        n.error_type: rec.error_type if rec.outcome in _FAILED else None,
        sc.LK_TTFT: rec.ttft,
        sc.LK_TTFB: rec.ttfb,
        sc.LK_TTFO: rec.ttfo,
        sc.LK_REASONING_TIME: rec.reasoning_time,
        sc.LK_REASONING_TIME_BASIS: rec.reasoning_time_basis,
        sc.LK_TPOT: rec.tpot,
        sc.LK_TPOT_BASIS: rec.tpot_basis,
        sc.LK_E2E: rec.e2e,
        sc.LK_CACHE_VERDICT: rec.cache_verdict,
        sc.LK_CACHE_MISS_REASON: rec.cache_miss_reason,
        sc.LK_CACHE_EXPECTED: rec.cache_expected_tokens,
        sc.LK_SEMANTIC_HIT: rec.semantic_hit,
    }
    attrs.update({k: v for k, v in optional.items() if v is not None})
    if rec.finish_reasons:
        attrs[n.finish_reasons] = list(rec.finish_reasons)
    return attrs


class _Instruments:
    """The metric instruments of one naming generation, created once."""

    def __init__(self, meter: Any, names: sc.SemConv) -> None:
        self.names = names
        d = sc.DURATION_BUCKETS
        self.duration = meter.create_histogram(names.duration_metric, unit="s", description="GenAI operation duration.", explicit_bucket_boundaries_advisory=d)
        self.ttfc = meter.create_histogram(names.ttfc_metric, unit="s", description="Time from request issuance to the first chunk received.", explicit_bucket_boundaries_advisory=d)
        self.tpoc = meter.create_histogram(names.tpoc_metric, unit="s", description="Time between successive output chunks that carry generated tokens.", explicit_bucket_boundaries_advisory=d)
        self.ttft = meter.create_histogram(sc.LK_TTFT_METRIC, unit="s", description="Time from request issuance to the first chunk carrying a generated token.", explicit_bucket_boundaries_advisory=d)
        self.ttfo = meter.create_histogram(sc.LK_TTFO_METRIC, unit="s", description="Time from request issuance to the first chunk carrying a token of the answer (not reasoning).", explicit_bucket_boundaries_advisory=d)
        self.tpot = meter.create_histogram(sc.LK_TPOT_METRIC, unit="s", description="Time per output token over the tokens that were streamed, per call.", explicit_bucket_boundaries_advisory=sc.TPOT_BUCKETS)
        self.token_usage = (
            meter.create_histogram(names.token_usage_metric, unit="{token}", description="Number of input and output tokens used.", explicit_bucket_boundaries_advisory=sc.TOKEN_BUCKETS)
            if names.token_usage_metric
            else None
        )
        self.input_counter = meter.create_counter(names.input_tokens_counter, unit="{token}") if names.input_tokens_counter else None
        self.output_counter = meter.create_counter(names.output_tokens_counter, unit="{token}") if names.output_tokens_counter else None
        self.cache_read = meter.create_counter(names.cache_read_counter, unit="{token}", description="Input tokens read from the provider's prompt cache.")
        self.cache_write = meter.create_counter(names.cache_write_counter, unit="{token}", description="Input tokens written to the provider's prompt cache.")
        self.misses = meter.create_counter(sc.LK_MISS_METRIC, unit="{call}", description="Calls whose prompt cache missed unexpectedly, by reason.")
        self.semantic = meter.create_counter(sc.LK_SEMANTIC_METRIC, unit="{call}", description="Calls looked up in the semantic response cache, by hit.")
        self.retries = meter.create_counter(sc.LK_RETRY_METRIC, unit="{retry}", description="Retried attempts, by reason (rate_limited, overloaded, error_event, dropped, ttft_deadline, ...).")

    def record(self, rec: CallRecord, gaps: Sequence[float]) -> None:
        n = self.names
        attrs: dict[str, Any] = {n.operation: rec.operation, n.provider: rec.provider}
        for key, value in ((n.request_model, rec.request_model), (n.response_model, rec.response_model), (n.server_address, rec.server_address), (n.server_port, rec.server_port)):
            if value is not None:
                attrs[key] = value
        failed = rec.outcome in _FAILED
        duration_attrs = {**attrs, n.error_type: rec.error_type or rec.outcome} if failed else attrs
        if rec.e2e is not None:
            self.duration.record(rec.e2e, duration_attrs)
        if rec.streamed:
            if rec.ttfb is not None:
                self.ttfc.record(rec.ttfb, attrs)
            for gap in gaps:
                self.tpoc.record(gap, attrs)
        if rec.ttft is not None:
            self.ttft.record(rec.ttft, attrs)
        if rec.ttfo is not None:
            self.ttfo.record(rec.ttfo, attrs)
        if rec.tpot is not None:
            self.tpot.record(rec.tpot, attrs)
        for kind, count, counter in (("input", rec.input_tokens, self.input_counter), ("output", rec.output_tokens, self.output_counter)):
            if count is None:
                continue
            if self.token_usage is not None:
                self.token_usage.record(count, {**attrs, n.token_type: kind})
            if counter is not None:
                counter.add(count, attrs)
        if rec.cache_read_tokens:
            self.cache_read.add(rec.cache_read_tokens, attrs)
        if rec.cache_write_tokens:
            self.cache_write.add(rec.cache_write_tokens, attrs)
        if rec.cache_verdict == "unexpected_miss":
            self.misses.add(1, {**attrs, sc.LK_CACHE_MISS_REASON: rec.cache_miss_reason or "unknown"})
        for reason in rec.retry_reasons:
            self.retries.add(1, {**attrs, sc.LK_RETRY_REASON: reason})
        if rec.semantic_hit is not None:
            self.semantic.add(1, {**attrs, sc.LK_SEMANTIC_HIT: rec.semantic_hit})


_STAND_INS = frozenset({"ProxyTracerProvider", "_ProxyMeterProvider"})
"""The API's global providers before one is set (their tracers and meters follow a later one)."""


def _stand_in(provider: Any) -> bool:
    return type(provider).__name__ in _STAND_INS


class _Global(NamedTuple):
    """Where the API keeps a global provider, and the variable that can name one instead."""

    module: Any
    attribute: str
    env_key: Any
    """``OTEL_PYTHON_…_PROVIDER`` as ``os.environ`` stores it (``None``: ask ``os.environ``)."""
    env_name: str


def _global(module: Any, attribute: str, env_name: str) -> _Global:
    encode = getattr(os.environ, "encodekey", None)
    return _Global(module, attribute, encode(env_name) if callable(encode) else None, env_name)


_TRACE_GLOBAL = _global(trace, "_TRACER_PROVIDER", "OTEL_PYTHON_TRACER_PROVIDER")
_METER_GLOBAL = _global(importlib.import_module("opentelemetry.metrics._internal"), "_METER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER")
_ENVIRON = getattr(os.environ, "_data", None)
_UNKNOWN = object()


def _configured(where: _Global, get_provider: Any) -> bool:
    """Whether the API's global provider is a real one (not its stand-in).

    The usual case, nothing configured, is answered from the API's global and the process
    environment directly: ``get_…_provider()`` asks ``os.environ`` for its variable on every
    call, which raises and catches a ``KeyError`` twice (~1.5 µs, far more cache-cold). The
    answer is the same: the API hands out its stand-in exactly when no provider is set and
    the variable is absent. Anything unexpected (the API's layout changed) asks the API.
    """
    if getattr(where.module, where.attribute, _UNKNOWN) is None:
        env = _ENVIRON
        absent = where.env_key not in env if isinstance(env, dict) and where.env_key is not None else where.env_name not in os.environ
        if absent:
            return False
    return not _stand_in(get_provider())


def attach_span(span: Any) -> Any:
    """Make ``span`` the current span (while the SDK sends, so its own spans nest inside);
    returns the token for `detach_span`."""
    return otel_context.attach(trace.set_span_in_context(span))


def detach_span(token: Any) -> None:
    """Undo `attach_span`."""
    otel_context.detach(token)


_default: Optional[Telemetry] = None


def default_telemetry() -> Telemetry:
    """The process-wide Telemetry on the global providers."""
    global _default
    if _default is None:
        _default = Telemetry()
    return _default
