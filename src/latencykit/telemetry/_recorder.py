"""`Recorder`: the in-process sink of call records, shared by any number of clients."""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Callable, Optional

from ..core._record import CallRecord
from ._summary import Summary, summarize

__all__ = ["Recorder"]

logger = logging.getLogger("latencykit")

Listener = Callable[[CallRecord], None]


class Recorder:
    """Keeps the most recent `CallRecord`s (bounded) and summarizes them.

    Thread-safe; one instance may be shared by several clients
    (``lk.Anthropic(..., recorder=shared)``). ``max_calls`` bounds memory.
    """

    def __init__(self, *, max_calls: int = 10_000) -> None:
        if not isinstance(max_calls, int) or isinstance(max_calls, bool) or max_calls < 1:
            raise ValueError(f"max_calls must be a positive int, got {max_calls!r}")
        self._calls: deque[CallRecord] = deque(maxlen=max_calls)
        self._lock = threading.Lock()
        self._last: Optional[CallRecord] = None
        self._listeners: list[Listener] = []
        self.total_calls = 0
        """Calls recorded since creation (not bounded by ``max_calls``)."""

    def record(self, rec: CallRecord) -> None:
        """Add a finished record and notify listeners (their errors are logged, not raised)."""
        with self._lock:
            self._calls.append(rec)
            self._last = rec
            self.total_calls += 1
            listeners = tuple(self._listeners)
        for listener in listeners:
            try:
                listener(rec)
            except Exception:
                logger.exception("latencykit: a Recorder listener failed")

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(record)`` for every record added from now on."""
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop calling ``listener``."""
        with self._lock:
            self._listeners.remove(listener)

    @property
    def last(self) -> Optional[CallRecord]:
        """The record of the most recently finished call, or ``None``."""
        return self._last

    @property
    def calls(self) -> list[CallRecord]:
        """A copy of the recent records, oldest first (at most ``max_calls``)."""
        with self._lock:
            return list(self._calls)

    def clear(self) -> None:
        """Forget all records."""
        with self._lock:
            self._calls.clear()
            self._last = None

    def summary(self, *, provider: Optional[str] = None, model: Optional[str] = None, label: str = "") -> Summary:
        """P50/P90/P95/P99, mean and max of TTFT, TPOT, E2E, TTFB and chunk gaps, per group and overall."""
        recs = [
            r
            for r in self.calls
            if (provider is None or r.provider == provider)
            and (model is None or model in (r.request_model, r.response_model))
        ]
        return summarize(recs, label)

    def cache_report(self) -> dict[str, object]:
        """Cache hit rate by tokens and by calls, tokens read and written (from server-reported usage)."""
        recs = [r for r in self.calls if r.cache_read_tokens is not None]
        read = sum(r.cache_read_tokens or 0 for r in recs)
        written = sum(r.cache_write_tokens or 0 for r in recs)
        total_in = sum(r.input_tokens or 0 for r in recs)
        hits = sum(1 for r in recs if (r.cache_read_tokens or 0) > 0)
        return {
            "calls_reporting": len(recs),
            "calls_not_reporting": len(self.calls) - len(recs),
            "hit_rate_tokens": (read / total_in) if total_in else None,
            "hit_rate_calls": (hits / len(recs)) if recs else None,
            "tokens_read": read,
            "tokens_written": written,
            "input_tokens": total_in,
        }

    def __repr__(self) -> str:
        return f"<Recorder calls={len(self._calls)} total={self.total_calls}>"
