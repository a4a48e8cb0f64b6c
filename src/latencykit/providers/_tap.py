"""`Tap`: the per-call object that sees each SDK stream event on its way to the caller."""

from __future__ import annotations

from typing import Any, ClassVar, Optional

from .._errors import PartialOutput
from ..core._timing import CallTimer

__all__ = ["Tap", "not_event_stream"]


class Tap:
    """Base tap: every event is timed as a non-token event and passed on.

    Provider taps override `__call__` to mark token-bearing events, read usage and the
    terminal event, and (OpenAI) hide the usage chunk the caller did not ask for, and
    `partial` to rebuild what had arrived from ``events`` when a stream breaks.
    A tap must never hold a reference to the stream it observes: a GC finalizer on the
    stream holds the tap, and a back-reference would keep the stream alive.
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
        # parsed objects per call alive.
        self.texts: list[str] = []
        self.tools: dict[str, list[str]] = {}
        self.usage: Any = None
        # The hottest path (one token-bearing event): ``self._stamp(self._now())`` is
        # ``timer.token()`` without a method call per event.
        self._stamp = timer.stamp
        self._now = timer.clock

    def __call__(self, event: Any) -> bool:
        """Observe ``event``; return whether it should reach the caller."""
        self.timer.event(False)
        return True

    def opened(self, stream: Any) -> None:
        """The SDK stream exists and has not been iterated yet (a hook for wire-level watching)."""

    def new_attempt(self) -> None:
        """Forget what an abandoned attempt delivered, in the tap and in the record.

        The record describes the attempt the caller got: usage, finish reasons, model, id
        and a reported error of a failed attempt must not pile up or linger.
        """
        self.texts = []
        self.tools = {}
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
        return PartialOutput(
            text="".join(self.texts),
            tool_inputs={key: "".join(pieces) for key, pieces in self.tools.items()},
            usage=self.usage,
            events=len(self.texts) + sum(len(p) for p in self.tools.values()),
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
