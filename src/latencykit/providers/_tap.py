"""`Tap`: the per-call object that sees each SDK stream event on its way to the caller."""

from __future__ import annotations

from typing import Any

from ..core._timing import CallTimer

__all__ = ["Tap"]


class Tap:
    """Base tap: every event is timed as a non-token event and passed on.

    Provider taps override `__call__` to mark token-bearing events, read usage and the
    terminal event, and (OpenAI) hide the usage chunk the caller did not ask for.
    A tap must never hold a reference to the stream it observes: a GC finalizer on the
    stream holds the tap, and a back-reference would keep the stream alive.
    """

    __slots__ = ("timer",)

    def __init__(self, timer: CallTimer) -> None:
        self.timer = timer

    def __call__(self, event: Any) -> bool:
        """Observe ``event``; return whether it should reach the caller."""
        self.timer.event(False)
        return True
