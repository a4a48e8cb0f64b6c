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
- TPOT: (last token − first token) / (output_tokens − 1), tokens from the server's usage —
  over the tokens that were streamed: where reasoning was billed but not streamed, over the
  answer only (`_tpot`; ``docs/timing.md``, "Reasoning models").
- TTFO: the first token-bearing event that is not reasoning (the answer's first token).
"""

from __future__ import annotations

import asyncio
import logging
import operator
from typing import Callable, Optional, Sequence

from ._rank import nearest_rank
from ._record import CallRecord, Outcome

__all__ = ["CallTimer", "Clock", "Sink", "REASONING_TEXT", "REASONING_SUMMARY", "REASONING_OPAQUE", "THINKING"]

Clock = Callable[[], float]
Sink = Callable[[CallRecord], None]

logger = logging.getLogger("latencykit")

# What a reasoning-channel event carried (`CallTimer.reasoning`), as bits: the TPOT rule
# depends on whether every billed reasoning token was streamed.
REASONING_TEXT = 1
"""The reasoning itself, token by token (DeepSeek ``reasoning_content``, vLLM / llama.cpp
reasoning parsers, OpenRouter ``reasoning.text``, Responses ``reasoning_text``)."""
REASONING_SUMMARY = 2
"""A summary of the reasoning (Responses ``reasoning_summary_text``, OpenRouter ``reasoning.summary``)."""
REASONING_OPAQUE = 4
"""An encrypted or redacted blob standing for reasoning (OpenRouter ``reasoning.encrypted``)."""
THINKING = 8
"""Anthropic thinking: the full thinking on some models, a summary of it on others; the usage
does not say which, so the streamed text's size against the billed count decides (`_tpot`)."""

# Summarized rather than streamed whole: the billed output exceeds this multiple of the
# estimated streamed tokens (plus a small constant for short answers).
_SUMMARY_RATIO = 1.5
_SUMMARY_SLACK = 16

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
        "_reasoning",
        "_reasoning_kinds",
        "streamed_estimate",
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
        self._gaps: Sequence[float] = ()
        self._terminal_at: Optional[float] = None
        self._done = False
        self._attempt_started: Optional[float] = None
        self._reasoning: Optional[list[int]] = None
        """Indices into ``_stamps`` of the reasoning-channel events (appended off the hot path;
        made by the first one: most calls have none, and an object less per call is a
        garbage-collector pass less every few hundred calls)."""
        self._reasoning_kinds = 0
        self.streamed_estimate: Optional[tuple[int, int]] = None
        """(reasoning, answer) tokens estimated from the streamed text, where the usage cannot
        split the billed count (Anthropic thinking); set by the tap before the end."""
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

    def reasoning(self, kind: int) -> None:
        """A token-bearing event on the reasoning channel (``kind``: `REASONING_TEXT`, ...).

        It counts for TTFT (a generated token on any channel) but not for TTFO.
        """
        stamps = self._stamps
        marked = self._reasoning
        if marked is None:
            marked = self._reasoning = []
        marked.append(len(stamps))
        self._reasoning_kinds |= kind
        stamps.append(self._clock())

    def reasoning_block(self, kind: int) -> None:
        """The response holds reasoning of ``kind`` whether or not any of it is streamed (an
        Anthropic thinking block shown ``omitted``, a redacted one): no token, no time."""
        self._reasoning_kinds |= kind

    @property
    def stamp(self) -> Callable[[float], None]:
        """Appends one token arrival time (``stamp(clock())`` is `token` without a method call;
        a tap reads it once per call, for its hottest path). Stays valid across attempts."""
        return self._stamps.append

    @property
    def clock(self) -> Clock:
        """The clock this timer reads."""
        return self._clock

    def new_attempt(self) -> bool:
        """A (re)try starts: what an abandoned attempt saw is forgotten, the call start is kept.
        Returns whether this is a retry (there was an attempt before; its tap must forget it too).

        TTFB and TTFT then measure from the call start to the events of the attempt that
        reached the caller, so a retried call's TTFT includes the failed attempts and waits.
        """
        now = self._clock()
        retry = self._attempt_started is not None
        if retry:
            self.record.attempts += 1
            self._first_event = self._terminal_at = None
            self._stamps.clear()  # in place: a tap may hold its ``append``
            self._reasoning = None
            self._reasoning_kinds = 0
            self.streamed_estimate = None
        self._attempt_started = now
        return retry

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
    def gaps(self) -> Sequence[float]:
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
            self._gaps = ()
            stamps = self._stamps
            if len(stamps) > 2:  # keep what saw_token needs, not one float per token (in place: no new list)
                del stamps[1:-1]
            self._reasoning = None

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
            if self._reasoning_kinds:
                self._fill_reasoning(rec, stamps)
            else:
                rec.ttfo = rec.ttft
                n = rec.output_tokens
                if n is not None:
                    hidden = rec.reasoning_tokens or 0  # billed, never streamed (o-series on Chat)
                    if n - hidden >= 2:
                        rec.tpot = (last - first) / (n - hidden - 1)
                        rec.tpot_basis = "answer" if hidden else "output"
                        if hidden:
                            _hidden_reasoning(rec, hidden, first - t0)
                    elif hidden:
                        rec.tpot_basis = "unknown"
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

    def _fill_reasoning(self, rec: CallRecord, stamps: list[float]) -> None:
        """TTFO, reasoning time and TPOT of a call whose stream carried reasoning."""
        t0 = self._t0
        marked = self._reasoning  # ascending
        kinds = self._reasoning_kinds
        if marked:
            reasoning = set(marked)
            out = [t for i, t in enumerate(stamps) if i not in reasoning]
        else:  # a reasoning block with nothing streamed in it (Anthropic display "omitted")
            out = stamps
        if out:
            rec.ttfo = out[0] - t0
            if marked and stamps[marked[0]] < out[0] and kinds != REASONING_OPAQUE:
                rec.reasoning_time = out[0] - stamps[marked[0]]
                rec.reasoning_time_basis = "streamed"
        n = rec.output_tokens
        if n is None:
            return
        hidden = rec.reasoning_tokens or 0
        estimate = self.streamed_estimate
        if kinds & REASONING_TEXT or (kinds & THINKING and estimate is not None and _streamed_whole(n, estimate)):
            # Every billed token was streamed: today's rule over the whole stream.
            if n >= 2:
                rec.tpot = (stamps[-1] - stamps[0]) / (n - 1)
                rec.tpot_basis = "streamed_reasoning"
            return
        if hidden > 0:
            answer, basis = n - hidden, "answer"
        elif kinds & THINKING and estimate is not None:
            answer, basis = estimate[1], "answer_estimate"
            hidden = max(n - answer, 0)
        elif kinds & THINKING:
            rec.tpot_basis = "unknown"  # Anthropic thinking, and the stream never ended
            return
        else:  # a summary or an opaque blob, and no reasoning billed: all output was answer
            answer, basis = n, "output"
        if answer >= 2 and out:
            rec.tpot = (out[-1] - out[0]) / (answer - 1)
            rec.tpot_basis = basis
            if hidden > 0 and rec.reasoning_time is None:
                _hidden_reasoning(rec, hidden, out[0] - t0)
        else:
            rec.tpot_basis = "unknown"


def _streamed_whole(billed: int, estimate: tuple[int, int]) -> bool:
    """Whether the streamed thinking was the whole thinking (not a summary, not omitted)."""
    return billed <= _SUMMARY_RATIO * (estimate[0] + estimate[1]) + _SUMMARY_SLACK


def _hidden_reasoning(rec: CallRecord, tokens: int, ttfo: float) -> None:
    """Reasoning that was billed but never streamed: its span estimated as its tokens × the
    answer's TPOT, capped at TTFO (it happened after the call start, before the answer)."""
    if rec.tpot is None:
        return
    rec.reasoning_time = min(tokens * rec.tpot, ttfo)
    rec.reasoning_time_basis = "hidden_estimate"


def _no_sink(rec: CallRecord) -> None:
    pass


def _quantile_sorted(xs: list[float], q: float) -> float:
    """Nearest-rank quantile of a sorted, non-empty list (the rule every reported percentile uses)."""
    return xs[nearest_rank(q, len(xs))]
