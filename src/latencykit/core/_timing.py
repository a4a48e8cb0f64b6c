"""The per-call timing state machine (sans-I/O, injected clock).

A `CallTimer` is created just before the request is handed to the SDK ("call start") and
then told, in order, about every event the SDK yields. Provider adapters decide whether an
event carries a generated token; the timer only keeps times. It finalizes the record
exactly once, whichever exit path gets there first, and hands it to a sink.

When the clocks start and stop (see also ``docs/timing.md``):

- call start: ``CallTimer.__init__`` (after request planning, before the SDK call).
- TTFB: the first event of any kind (``message_start``, a role-only chunk, ``response.created``).
- TTFT: the first event that carries a generated token on any channel.
- last token: the last token-bearing event.
- E2E: the terminal event if one arrived, else the moment of the error or abandonment.
- TPOT: (last token − first token) / (output_tokens − 1), tokens from the server's usage.
"""

from __future__ import annotations

import asyncio
import logging
import operator
from typing import Callable, Optional

from ._rank import nearest_rank
from ._record import CallRecord, Outcome

__all__ = ["CallTimer", "Clock", "Sink"]

Clock = Callable[[], float]
Sink = Callable[[CallRecord], None]

logger = logging.getLogger("latencykit")

# Exceptions that mean "the caller stopped", not "the call failed".
_CALLER_STOPS: tuple[type[BaseException], ...] = (
    asyncio.CancelledError,
    GeneratorExit,
    KeyboardInterrupt,
)


class CallTimer:
    """Times one call and finalizes its `CallRecord` exactly once."""

    __slots__ = (
        "record",
        "context",
        "_clock",
        "_sink",
        "_t0",
        "_first_event",
        "_stamps",
        "_gaps",
        "_terminal_at",
        "_done",
        "_attempt_started",
    )

    def __init__(self, record: CallRecord, *, clock: Clock, sink: Sink) -> None:
        self.record = record
        self.context: object = None
        """Opaque per-call data owned by the shell that created the timer (e.g. its span)."""
        self._clock = clock
        self._sink = sink
        self._first_event: Optional[float] = None
        self._stamps: list[float] = []
        """When each token-bearing event arrived (gaps and TTFT are derived once, at the end)."""
        self._gaps: list[float] = []
        self._terminal_at: Optional[float] = None
        self._done = False
        self._attempt_started: Optional[float] = None
        self._t0 = clock()  # last, so that set-up above is not counted

    # -- hot path: once per event -------------------------------------------------------
    def event(self, token: bool) -> None:
        """Note one event from the stream; ``token`` says whether it carries generated output."""
        now = self._clock()
        if token:
            self._stamps.append(now)
        elif self._first_event is None:
            self._first_event = now

    def token(self) -> None:
        """`event` for an event known to carry a token (the common case: one clock read, one append)."""
        self._stamps.append(self._clock())

    @property
    def stamp(self) -> Callable[[float], None]:
        """Appends one token arrival time (``stamp(clock())`` is `token` without a method call;
        a tap reads it once per call, for its hottest path). Stays valid across attempts."""
        return self._stamps.append

    @property
    def clock(self) -> Clock:
        """The clock this timer reads."""
        return self._clock

    def new_attempt(self) -> None:
        """A (re)try starts: what an abandoned attempt saw is forgotten, the call start is kept.

        TTFB and TTFT then measure from the call start to the events of the attempt that
        reached the caller, so a retried call's TTFT includes the failed attempts and waits.
        """
        now = self._clock()
        if self._attempt_started is not None:
            self.record.attempts += 1
            self._first_event = self._terminal_at = None
            self._stamps.clear()  # in place: a tap may hold its ``append``
        self._attempt_started = now

    def attempt_elapsed(self) -> float:
        """Seconds since the current attempt started (since the call start before any)."""
        start = self._attempt_started if self._attempt_started is not None else self._t0
        return self._clock() - start

    def terminal(self) -> None:
        """The provider's terminal event arrived (``message_stop``, finish, ``response.completed``)."""
        if self._terminal_at is None:
            self._terminal_at = self._clock()

    def resume(self) -> None:
        """The terminal event was not the end: a token followed it (one of ``n`` choices finished
        while another still streams); the next terminal event ends the call."""
        self._terminal_at = None

    @property
    def gaps(self) -> list[float]:
        """Gaps between token-bearing events, sorted (set when finalized; cleared after the sink ran)."""
        return self._gaps

    @property
    def finished(self) -> bool:
        """Whether the record has been finalized."""
        return self._done

    @property
    def saw_token(self) -> bool:
        """Whether any token-bearing event has arrived (content reached the caller)."""
        return bool(self._stamps)

    @property
    def saw_terminal(self) -> bool:
        """Whether the terminal event arrived."""
        return self._terminal_at is not None

    # -- exits ----------------------------------------------------------------------------
    def exhausted(self) -> None:
        """The SDK iterator ended. Without a terminal event that is a truncated stream."""
        if self._terminal_at is not None:
            self._finish("completed")
        else:
            self._finish(
                "interrupted" if self._stamps else "error",
                "IncompleteStreamError",
            )

    def abandon(self) -> None:
        """The caller closed the stream, left its ``with`` block, or dropped it (GC)."""
        self._finish("completed" if self._terminal_at is not None else "abandoned")

    def fail(self, exc: BaseException) -> None:
        """An exception reached the caller: the SDK's, a connection error, or a cancellation.

        The record says what the caller experienced: an error that follows the terminal
        event (an ``error`` chunk after the finish chunk) is still an error, and E2E ends
        at it. ``error_type`` is the class name (``IncompleteStreamError`` for a truncation).
        """
        if isinstance(exc, _CALLER_STOPS):
            self.abandon()
            return
        self._terminal_at = None
        self._finish(
            "interrupted" if self._stamps else "error",
            getattr(exc, "_lk_error_type", None) or type(exc).__name__,
        )

    def complete(self) -> None:
        """A call that was not streamed returned its response."""
        self._terminal_at = self._clock()
        self._finish("completed")

    # -- finalization ---------------------------------------------------------------------
    def _finish(self, outcome: Outcome, error_type: Optional[str] = None) -> None:
        if self._done:
            return
        self._done = True
        end = self._terminal_at if self._terminal_at is not None else self._clock()
        sink, self._sink = self._sink, _no_sink  # the sink often refers back to this timer: break the cycle
        try:
            self._fill(outcome, error_type, end)
            sink(self.record)
        except Exception:  # measurement never breaks the call
            logger.exception("latencykit: failed to finalize a call record")
        finally:
            self._gaps = []
            stamps = self._stamps
            if len(stamps) > 2:  # keep what saw_token needs, not one float per token
                self._stamps = [stamps[0], stamps[-1]]

    def _fill(self, outcome: Outcome, error_type: Optional[str], end: float) -> None:
        rec = self.record
        t0 = self._t0
        rec.outcome = outcome
        if error_type is not None and rec.error_type is None:
            rec.error_type = error_type
        rec.e2e = end - t0
        stamps = self._stamps
        first_event = self._first_event
        if stamps and (first_event is None or stamps[0] < first_event):
            first_event = stamps[0]
        if first_event is not None:
            rec.ttfb = first_event - t0
        if stamps:
            first, last = stamps[0], stamps[-1]
            rec.ttft = first - t0
            rec.decode_time = last - first
            n = rec.output_tokens
            if n is not None and n >= 2:
                rec.tpot = (last - first) / (n - 1)
        rec.chunks = len(stamps)
        if len(stamps) > 1:
            gaps = list(map(operator.sub, stamps[1:], stamps))  # one C loop, not a comprehension
            gaps.sort()
            k = len(gaps)
            rec.chunk_gap_mean = (stamps[-1] - stamps[0]) / k  # the gaps telescope: no sum needed
            rec.chunk_gap_p50 = _quantile_sorted(gaps, 0.50)
            rec.chunk_gap_p95 = _quantile_sorted(gaps, 0.95)
            rec.chunk_gap_max = gaps[-1]
            self._gaps = gaps


def _no_sink(rec: CallRecord) -> None:
    pass


def _quantile_sorted(xs: list[float], q: float) -> float:
    """Nearest-rank quantile of a sorted, non-empty list (the rule every reported percentile uses)."""
    return xs[nearest_rank(q, len(xs))]
