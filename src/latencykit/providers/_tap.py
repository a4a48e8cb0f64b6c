"""`Tap`: the per-call object that sees each SDK stream event on its way to the caller."""

from __future__ import annotations

import logging
from typing import Any, AsyncIterable, AsyncIterator, ClassVar, Iterable, Iterator, NoReturn, Optional, Sequence

from ..core._errors import PartialOutput, incomplete_error, interrupted_error
from ..core._timing import CallTimer
from ._sse import fast_events

__all__ = ["Tap", "not_event_stream", "tap_failed", "raise_failure", "end_of_events", "raise_if_cut"]

logger = logging.getLogger("latencykit")


class Tap:
    """Base tap: every event is timed as a non-token event and passed on.

    Provider taps override `__call__` to mark token-bearing events, read usage and the
    terminal event, and (OpenAI) hide the usage chunk the caller did not ask for, and
    `partial` to rebuild what had arrived from ``events`` when a stream breaks.
    A tap must never hold a reference to the stream it observes: the stream holds the tap
    (its ``__del__`` finalizes the record of a stream dropped unclosed), and a back-reference
    would make a cycle that only the garbage collector could free.
    """

    __slots__ = ("timer", "texts", "tools", "usage", "_stamp", "_now")

    connection_error: ClassVar[type] = ConnectionError
    """The SDK's ``APIConnectionError``, raised for broken or truncated streams."""
    api_error: ClassVar[type] = Exception
    """The SDK's ``APIError`` base, raised for answers that are not an event stream at all."""

    def __init__(self, timer: CallTimer) -> None:
        self.timer = timer
        # What a broken stream's PartialOutput needs, kept as it arrives: the text pieces and
        # tool-argument pieces (plain strings, which the garbage collector does not track)
        # and the last usage — not the events themselves, which would hold hundreds of
        # parsed objects per call alive. The tool pieces' dict is made by the first tool call
        # (`tool_input`): every object a call holds brings the collector's next pass nearer.
        self.texts: list[str] = []
        self.tools: Optional[dict[str, list[str]]] = None
        self.usage: Any = None
        # The hottest path (one token-bearing event): ``self._stamp(self._now())`` is
        # ``timer.token()`` without a method call per event.
        self._stamp = timer.stamp
        self._now = timer.clock

    def __call__(self, event: Any) -> bool:
        """Observe ``event``; return whether it should reach the caller."""
        self.timer.event(False)
        return True

    def tool_input(self, key: str) -> list[str]:
        """The argument pieces of tool call ``key`` so far (an empty list, kept, for a new one)."""
        tools = self.tools
        if tools is None:
            tools = self.tools = {}
        pieces = tools.get(key)
        if pieces is None:
            pieces = tools[key] = []
        return pieces

    def relay(self, stream: Any, events: Iterable[Any], replay: list[Any]) -> Iterator[Any]:
        """What iterating an observed ``stream`` yields: ``replay`` (events held back until the
        first token, already timed), then ``events`` (the SDK's), each tapped; the call is
        finalized when they end or fail (see `end_of_events`, `raise_failure`).

        The one loop every event of a streamed call passes through. A provider tap may
        override it to handle its commonest event inline (a call fewer per event), leaving
        everything else to ``__call__``.
        """
        see = self.__call__  # a bound method: CPython inlines its call, not an instance's (~40 ns per event)
        try:
            while replay:  # handed on one by one: the caller, not the relay, holds them now
                yield replay.pop(0)
            for event in events:
                try:
                    if not see(event):
                        continue
                except Exception:
                    tap_failed(self)  # logged once; the event still reaches the caller
                yield event
        except GeneratorExit:
            raise  # the caller stopped iterating; close() / GC finalize the record
        except BaseException as exc:
            raise_failure(self, exc, stream)
        raise_if_cut(self, stream)

    async def arelay(self, stream: Any, events: AsyncIterable[Any], replay: list[Any]) -> AsyncIterator[Any]:
        """Async twin of `relay`."""
        see = self.__call__
        try:
            while replay:
                yield replay.pop(0)
            async for event in events:
                try:
                    if not see(event):
                        continue
                except Exception:
                    tap_failed(self)  # logged once; the event still reaches the caller
                yield event
        except GeneratorExit:
            raise
        except BaseException as exc:
            raise_failure(self, exc, stream)
        raise_if_cut(self, stream)

    def opened(self, stream: Any) -> None:
        """The SDK stream exists and has not been iterated yet (a hook for wire-level watching):
        its SSE events are decoded by `FastEvents` where the SDK's decoder passed its check."""
        fast_events(stream)

    def ended(self) -> None:
        """The SDK's events ran out (before the call is judged complete or cut short)."""

    def new_attempt(self) -> None:
        """Forget what an abandoned attempt delivered, in the tap and in the record.

        The record describes the attempt the caller got: usage, finish reasons, model, id
        and a reported error of a failed attempt must not pile up or linger.
        """
        self.texts = []
        self.tools = None
        self.usage = None
        rec = self.timer.record
        rec.finish_reasons = ()
        rec.error_type = None
        rec.response_model = rec.response_id = None
        rec.input_tokens = rec.uncached_input_tokens = rec.output_tokens = rec.reasoning_tokens = None
        rec.cache_read_tokens = rec.cache_write_tokens = None
        rec.server_cache_miss_reason = None

    def partial(self) -> PartialOutput:
        """What had arrived so far: text, each tool call's argument JSON, the last usage."""
        tools = self.tools or {}
        return PartialOutput(
            text="".join(self.texts),
            tool_inputs={key: "".join(pieces) for key, pieces in tools.items()},
            usage=self.usage,
            events=len(self.texts) + sum(len(p) for p in tools.values()),
        )

    def stream_error(self, request: Any) -> Optional[BaseException]:
        """The SDK error for a failure the server reported as an event the SDK does not raise."""
        return None


def not_event_stream(tap: Tap, response: Any) -> Optional[BaseException]:
    """The SDK's ``APIError`` for a 2xx answer that is not an event stream (an HTML page from a
    proxy or a login wall): the SDK parses it as a stream with no events. Not retried."""
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    ctype = str(headers.get("content-type") or "")
    if "event-stream" in ctype.lower():
        return None
    status = getattr(response, "status_code", "2xx")
    message = (
        f"the server answered {status} with Content-Type {ctype or 'none'!r}, not an event stream "
        "(a proxy, gateway or login page?): no events could be read"
    )
    err: BaseException = tap.api_error(message, getattr(response, "request", None), body=None)
    return err


def tap_failed(tap: Tap) -> bool:
    """Log a tap failure once per call (inside an ``except``); the event still reaches the caller."""
    record = tap.timer.record
    if not record.extra.get("tap_failed"):
        record.extra["tap_failed"] = True
        logger.warning("latencykit: could not read a %s stream event; timing may be incomplete", record.provider, exc_info=True)
    return True


def _broken(tap: Tap, exc: BaseException, request: Any) -> BaseException:
    """The exception the caller gets when the stream breaks: after content, with the partial output."""
    if not isinstance(exc, Exception) or not tap.timer.saw_token:
        return exc
    return interrupted_error(exc, tap.partial(), tap.connection_error, request)


def _truncated(tap: Tap, stream: Any) -> BaseException:
    """The stream ended cleanly but without its terminal event: a drop all the same (an
    `IncompleteStreamError`), unless the server reported an error or sent no event stream."""
    request = _request(stream)
    reported = tap.stream_error(request)
    if reported is not None:
        return interrupted_error(reported, tap.partial(), tap.connection_error, request) if tap.timer.saw_token else reported
    if not tap.timer.saw_token:
        wrong = not_event_stream(tap, getattr(stream, "response", None))
        if wrong is not None:
            return wrong
    return incomplete_error(tap.partial(), tap.connection_error, request, after_content=tap.timer.saw_token)


def raise_failure(tap: Tap, exc: BaseException, stream: Any) -> NoReturn:
    """End the call on ``exc`` and raise what the caller gets (the SDK error, or after content
    a `StreamInterruptedError` with the partial output). A stream the caller had already
    closed fails as the raw SDK's does: the call was over, nothing broke."""
    if tap.timer.finished:
        raise exc
    broken = _broken(tap, exc, _request(stream))
    tap.timer.fail(broken)
    if broken is exc:
        raise exc
    raise broken from exc


def end_of_events(tap: Tap, stream: Any) -> Optional[BaseException]:
    """The iterator ended: finalize; the error to raise if the terminal event never came."""
    timer = tap.timer
    if timer.finished:
        return None
    tap.ended()
    if timer.saw_terminal:
        timer.exhausted()
        return None
    err = _truncated(tap, stream)
    timer.fail(err)
    return err


def _request(stream: Any) -> Any:
    return getattr(getattr(stream, "response", None), "request", None)


def raise_if_cut(tap: Tap, stream: Any) -> None:
    """The events ran out: finalize the call (`end_of_events`) and raise the error for a
    stream cut short before its terminal event, if it was."""
    truncated = end_of_events(tap, stream)
    if truncated is not None:
        raise truncated
