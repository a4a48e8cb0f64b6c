"""`Tap`: the per-call object that sees each SDK stream event on its way to the caller."""

from __future__ import annotations

from typing import Any, ClassVar, Optional

from .._errors import PartialOutput
from ..core._timing import CallTimer

__all__ = ["Tap"]


class Tap:
    """Base tap: every event is timed as a non-token event and passed on.

    Provider taps override `__call__` to mark token-bearing events, read usage and the
    terminal event, and (OpenAI) hide the usage chunk the caller did not ask for, and
    `partial` to rebuild what had arrived from ``events`` when a stream breaks.
    A tap must never hold a reference to the stream it observes: a GC finalizer on the
    stream holds the tap, and a back-reference would keep the stream alive.
    """

    __slots__ = ("timer", "events")

    connection_error: ClassVar[type] = ConnectionError
    """The SDK's ``APIConnectionError``, raised for broken or truncated streams."""

    def __init__(self, timer: CallTimer) -> None:
        self.timer = timer
        self.events: list[Any] = []
        """Every event of the current attempt, kept to rebuild a `PartialOutput` if it breaks."""

    def __call__(self, event: Any) -> bool:
        """Observe ``event``; return whether it should reach the caller."""
        self.timer.event(False)
        return True

    def new_attempt(self) -> None:
        """Forget the events of an abandoned attempt."""
        self.events = []

    def partial(self) -> PartialOutput:
        """What had arrived so far (provider taps fill in text, tool inputs and usage)."""
        return PartialOutput(events=len(self.events))

    def stream_error(self, request: Any) -> Optional[BaseException]:
        """The SDK error for a failure the server reported as an event the SDK does not raise."""
        return None
