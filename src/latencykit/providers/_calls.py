"""What every wrapped call does before and around the SDK: settings, call start, pass-through."""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Optional, TypeVar

from ..core._record import CallRecord
from ..core._timing import CallTimer, Clock
from ..core._retry import RetryPolicy
from ..core._hooks import CURRENT_RECORD as _CURRENT_RECORD, AnswerHook
from ..telemetry._otel import Telemetry, attach_span, default_telemetry, detach_span
from ..telemetry._recorder import Recorder

__all__ = [
    "Settings",
    "Finish",
    "Planner",
    "prepare",
    "begin",
    "passthrough",
    "apassthrough",
    "raw_response_requested",
    "given",
    "helper_method",
    "sending",
    "in_flight",
    "sdk_client",
    "attempts",
    "PREPLANNED",
]

T = TypeVar("T")
logger = logging.getLogger("latencykit")

Finish = Callable[[CallRecord], None]
"""Runs on a finished record before it is emitted (e.g. cache verification)."""
Planner = Callable[[str, dict[str, Any]], tuple[dict[str, Any], Optional[Finish]]]
"""Request planning: ``(api, kwargs) -> (kwargs to send, finish hook)``; never mutates ``kwargs``."""

_RAW_HEADER = "x-stainless-raw-response"
PREPLANNED: ContextVar[Optional[Finish]] = ContextVar("latencykit_preplanned", default=None)
"""Set by ``client.latency.prewarm``: the next call on this thread / task is sent as given, with this finish hook."""


@dataclass
class Settings:
    """latencykit's per-client options (shared by ``copy()`` / ``with_options()`` results)."""

    recorder: Recorder = field(default_factory=Recorder)
    provider: str = "anthropic"
    clock: Clock = time.perf_counter
    planner: Optional[Planner] = None
    """Request planning before each call (prompt-cache breakpoints and keys); ``None`` sends as given."""
    telemetry: Optional[Telemetry] = field(default_factory=default_telemetry)
    retry: Optional[RetryPolicy] = field(default_factory=RetryPolicy)
    """latencykit's retries (SDK retries off for its attempts); ``None`` leaves retries to the SDK."""
    """Where spans and metrics go; ``None`` turns them off for this client."""
    semantic: Optional[AnswerHook] = None
    """An answer hook (a `latencykit.SemanticCache`) in front of this client's model calls; ``None`` (default) for none."""

    def emit(self, rec: CallRecord, timer: CallTimer) -> None:
        """Hand a finished record to its destinations: the span and metrics, then the Recorder."""
        telemetry = self.telemetry
        if telemetry is not None:
            ctx = timer.context
            if isinstance(ctx, _CallSpan):
                telemetry.end(ctx.span, ctx.start_ns, rec, timer.gaps)
            else:  # no span was started (nothing records one): metrics only, if anything records those
                telemetry.end(None, 0, rec, timer.gaps)
        self.recorder.record(rec, timer.gaps)


class _CallSpan:
    """The span of one call and its wall-clock start."""

    __slots__ = ("span", "start_ns")

    def __init__(self, span: Any, start_ns: int) -> None:
        self.span = span
        self.start_ns = start_ns


_IN_FLIGHT: ContextVar[bool] = ContextVar("latencykit_in_flight", default=False)


class sending:
    """``with sending(timer):`` while the SDK sends the request, the call's span is the current
    span and the call is marked as observed, so the client's ``request()`` catch-all does not
    record it again. (A class, not a generator context manager: it runs on every call.)"""

    __slots__ = ("_timer", "_tokens")

    def __init__(self, timer: CallTimer) -> None:
        self._timer = timer
        self._tokens: Any = None

    def __enter__(self) -> None:
        timer = self._timer
        ctx = timer.context
        flight = _IN_FLIGHT.set(True)
        record = _CURRENT_RECORD.set(timer.record)  # an answer hook marks its hits on it
        try:
            span = attach_span(ctx.span) if isinstance(ctx, _CallSpan) and ctx.span is not None else None
        except BaseException:
            _CURRENT_RECORD.reset(record)
            _IN_FLIGHT.reset(flight)
            raise
        self._tokens = (flight, record, span)

    def __exit__(self, *exc: Any) -> None:
        flight, record, span = self._tokens
        try:
            if span is not None:
                detach_span(span)
        finally:
            _CURRENT_RECORD.reset(record)
            _IN_FLIGHT.reset(flight)


def in_flight() -> bool:
    """Whether a latencykit-observed call is being sent on this thread / task right now."""
    return _IN_FLIGHT.get()


ONCE = RetryPolicy(max_attempts=1, retry_interrupted=False)
"""One attempt, no retries: how a non-streaming call is consumed when latencykit retries are off."""


def sdk_client(client: Any) -> Any:
    """The client whose SDK methods latencykit calls: with retries of its own, a copy whose
    ``max_retries`` is 0 (made once per client, sharing its connection pool), so SDK
    retries and latencykit attempts never multiply."""
    hook: Optional[AnswerHook] = client._lk.semantic
    if hook is not None:  # a twin whose transport may answer from the hook
        return hook.client_for(client)
    if client._lk.retry is None:
        return client
    twin = client.__dict__.get("_lk_twin")
    if twin is None:
        twin = type(client)._lk_sdk_base.copy(client, max_retries=0)
        # The SDK's copy() does not carry strict response validation over: the caller's calls,
        # sent through the twin, must still be validated as the caller asked.
        if getattr(client, "_strict_response_validation", False):
            twin._strict_response_validation = True
        client.__dict__["_lk_twin"] = twin
    return twin


def attempts(client: Any) -> int:
    """Total attempts for a call on ``client`` under its retry policy."""
    policy: Optional[RetryPolicy] = client._lk.retry
    return 1 if policy is None else policy.attempts_for(getattr(client, "max_retries", None))


def prepare(client: Any, api: str, kwargs: dict[str, Any]) -> tuple[dict[str, Any], Optional[Finish]]:
    """Plan the request (``api`` is ``"messages"``, ``"chat.completions"`` or ``"responses"``).

    A planner failure is logged and the request is sent exactly as the caller wrote it.
    """
    preplanned = PREPLANNED.get()
    if preplanned is not None:  # a cache pre-warm: planned already, and not to be learned from
        PREPLANNED.set(None)
        return kwargs, preplanned
    planner: Optional[Planner] = client._lk.planner
    if planner is None:
        return kwargs, None
    try:
        if getattr(planner, "takes_url", False):  # a CachePolicy: it remembers servers that reject OpenAI breakpoints
            return planner(api, kwargs, url=client.base_url)  # type: ignore[call-arg]
        return planner(api, kwargs)
    except Exception:
        logger.debug("latencykit: request planning failed; sending the request as given", exc_info=True)
        return kwargs, None


def given(value: Any) -> bool:
    """Whether a keyword argument was really given (not absent, ``None`` or the SDK's omit/NOT_GIVEN)."""
    return value is not None and type(value).__name__ not in ("Omit", "NotGiven")


def raw_response_requested(kwargs: Mapping[str, Any]) -> bool:
    """``with_raw_response`` / ``with_streaming_response`` calls go to the SDK untouched."""
    headers = kwargs.get("extra_headers")
    if headers is None or not (type(headers) is dict or isinstance(headers, Mapping)):  # a dict without the ABC check
        return False
    for k in headers:
        if isinstance(k, str) and k.lower() == _RAW_HEADER:
            return True
    return False


def helper_method(kwargs: Mapping[str, Any]) -> Optional[str]:
    """The SDK helper making this call (``"chat.completions.stream"``, ...), if any."""
    headers = kwargs.get("extra_headers")
    if headers is not None and (type(headers) is dict or isinstance(headers, Mapping)):
        for k, v in headers.items():
            if isinstance(k, str) and k.lower() == "x-stainless-helper-method" and isinstance(v, str):
                return v
    return None


def begin(
    client: Any,
    *,
    api: str,
    method: str,
    model: Any,
    streamed: bool = True,
    reason: Optional[str] = None,
    finish: Optional[Finish] = None,
    request: Optional[Mapping[str, Any]] = None,
) -> CallTimer:
    """Start the clock (and the span) for one call on ``client``, a latencykit client.

    ``request`` (the call's keyword arguments) is read only when content capture is on.
    """
    settings: Settings = client._lk
    url = client.base_url
    port = url.port or (443 if url.scheme == "https" else 80)
    rec = CallRecord(
        provider=settings.provider,
        operation="chat",
        request_model=model if isinstance(model, str) else None,
        api=api,
        method=method,
        started_at=time.time(),
        streamed=streamed,
        not_streamed_reason=reason,
        server_address=url.host,
        server_port=port,
    )

    sink = _Sink(settings, finish)
    telemetry = settings.telemetry
    span = telemetry.start(rec, request) if telemetry is not None else None
    timer = sink.timer = CallTimer(rec, clock=settings.clock, sink=sink)
    if span is not None and span[0] is not None:
        timer.context = _CallSpan(*span)
    return timer


class _Sink:
    """Where a finished record goes: the finish hook, then `Settings.emit`. (A slotted object,
    not a closure: one allocation per call instead of a function, its cells and their tuple.)"""

    __slots__ = ("settings", "finish", "timer")

    def __init__(self, settings: Settings, finish: Optional[Finish]) -> None:
        self.settings = settings
        self.finish = finish
        self.timer: Optional[CallTimer] = None

    def __call__(self, done: CallRecord) -> None:
        finish = self.finish
        if finish is not None:
            try:
                finish(done)
            except Exception:
                logger.debug("latencykit: a finish hook failed", exc_info=True)
        timer = self.timer
        self.timer = None  # the timer refers to this sink until it finishes: no cycle left behind
        if timer is not None:
            self.settings.emit(done, timer)


def passthrough(timer: CallTimer, call: Callable[[], T], on_result: Callable[[CallRecord, T], None]) -> T:
    """Run a call the SDK will not stream; time it as a whole (no TTFT)."""
    try:
        with sending(timer):
            result = call()
    except BaseException as exc:
        timer.fail(exc)
        raise
    safe(on_result, timer.record, result)
    timer.complete()
    return result


async def apassthrough(
    timer: CallTimer, call: Callable[[], Awaitable[T]], on_result: Callable[[CallRecord, T], None]
) -> T:
    """Async twin of `passthrough`."""
    try:
        with sending(timer):
            result = await call()
    except BaseException as exc:
        timer.fail(exc)
        raise
    safe(on_result, timer.record, result)
    timer.complete()
    return result


def safe(fn: Callable[[Any, T], None], target: Any, result: T, what: str = "read usage") -> None:
    """``fn(target, result)``, logged at DEBUG instead of raised: measurement never breaks the call."""
    try:
        fn(target, result)
    except Exception:
        logger.debug("latencykit: could not %s", what, exc_info=True)
