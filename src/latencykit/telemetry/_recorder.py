"""`Recorder`: the in-process sink of call records, shared by any number of clients.

Every record added is logged once at DEBUG on the ``latencykit`` logger (provider, model,
outcome, TTFT / TPOT / E2E, tokens, cache verdict — never prompt text); with DEBUG off the
cost is one ``isEnabledFor`` check.

Cost: a record is kept at once (``last``, ``calls``, ``total_calls``, listeners), but it is
folded into the per-group sketches in batches of `FOLD_BATCH` records, or as soon as
anything reads the statistics (`summary`, `stats`, `merge`, `to_dict`). One call then
touches a deque and a list instead of a group look-up and five sketches: on a shared
machine whose caches have gone cold between calls, that is ~60 µs per call down to a few.
The batch is large because a fold also costs the calls around it: it brings the sketches'
code and numpy's into the CPU caches and evicts what the SDK's next calls would have found
there. Folding every 64 records cost a short async stream ~0.5 % of its client CPU
(``benchmarks/overhead.py``: paired against not folding at all); every 1,024, nothing
measurable. What waits is bounded: 1,024 records and `_FOLD_GAPS` chunk gaps (~2 MB as Python
floats at most). Readers never see the difference: every read folds what is pending first.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from contextvars import ContextVar
from typing import Any, Callable, Mapping, Optional, Sequence

from ..core._record import CallRecord
from . import _export
from ._cache_report import CacheReport, cache_report
from ._stats import GroupKey, LatencyStats, group_key
from ._summary import Summary

__all__ = ["Recorder"]

logger = logging.getLogger("latencykit")

Listener = Callable[[CallRecord], None]

FOLD_BATCH = 1024
"""Records buffered before they are folded into the sketches (reads fold at once)."""
_FOLD_GAPS = 65_536
"""…or as soon as the buffered records hold this many chunk gaps (bounded memory)."""


PREWARM_VIA: ContextVar[Optional[tuple[Any, Callable[[], Any], Callable[[Any, dict[str, Any]], Any]]]] = ContextVar(
    "latencykit_prewarm_via", default=None
)
"""(Recorder, weak reference to the client whose ``.latency`` returned it, the client layer's prewarm
function): set by ``client.latency`` in the current thread or task, read by `Recorder.prewarm`. The
Recorder stays the one object the client was given (``client.latency is recorder``)."""


class Recorder:
    """Keeps recent `CallRecord`s (bounded) and a percentile sketch per metric and group.

    Thread-safe; one instance may be shared by several clients
    (``lk.Anthropic(..., recorder=shared)``). Memory is bounded: ``max_calls`` records, and
    per group — (provider, model, operation, cache state), at most ``max_groups`` — one
    sketch per metric of a few KB (relative accuracy ``relative_accuracy``), plus up to 1,024
    records (and their chunk gaps) waiting to be folded into the sketches. Summaries come
    from the sketches, so they cover every call since creation, not only the retained ones.
    """

    def __init__(self, *, max_calls: int = 10_000, relative_accuracy: float = 0.01, max_groups: int = 1_000) -> None:
        if not isinstance(max_calls, int) or isinstance(max_calls, bool) or max_calls < 1:
            raise ValueError(f"max_calls must be a positive int, got {max_calls!r}")
        if not isinstance(relative_accuracy, float) or not 0 < relative_accuracy < 1:
            raise ValueError(f"relative_accuracy must be a float in (0, 1), got {relative_accuracy!r}")
        if not isinstance(max_groups, int) or isinstance(max_groups, bool) or max_groups < 1:
            raise ValueError(f"max_groups must be a positive int, got {max_groups!r}")
        self.relative_accuracy = relative_accuracy
        self._max_groups = max_groups
        self._stats: dict[GroupKey, LatencyStats] = {}
        self._calls: deque[CallRecord] = deque(maxlen=max_calls)
        self._lock = threading.Lock()
        self._last: Optional[CallRecord] = None
        self._listeners: tuple[Listener, ...] = ()
        self._pending: list[tuple[CallRecord, Sequence[float]]] = []
        """Records (and their gaps) kept but not yet folded into ``_stats``; see `_fold`."""
        self._pending_gaps = 0
        self.total_calls = 0
        """Calls recorded since creation (not bounded by ``max_calls``)."""

    def record(self, rec: CallRecord, gaps: Sequence[float] = ()) -> None:
        """Add a finished record (and its inter-chunk gaps), log it at DEBUG and notify listeners.

        Listener errors are logged, not raised.
        """
        listeners = self._add(rec, gaps)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("latencykit call: %r", rec)  # the record's short repr: no prompt text
        for listener in listeners:
            try:
                listener(rec)
            except Exception:
                logger.exception("latencykit: a Recorder listener failed")

    def _add(self, rec: CallRecord, gaps: Sequence[float]) -> tuple[Listener, ...]:
        """Keep ``rec`` (folded into its group's statistics with the next batch); returns the listeners to notify."""
        with self._lock:
            self._pending.append((rec, gaps))
            self._pending_gaps += len(gaps)
            self._calls.append(rec)
            self._last = rec
            self.total_calls += 1
            if len(self._pending) >= FOLD_BATCH or self._pending_gaps >= _FOLD_GAPS:
                self._fold()
            return self._listeners

    def _fold(self) -> None:
        """Fold the pending records into their groups' statistics (lock held), one batch per group."""
        pending = self._pending
        if not pending:
            return
        self._pending, self._pending_gaps = [], 0
        groups: dict[GroupKey, list[tuple[CallRecord, Sequence[float]]]] = {}
        for item in pending:
            key = group_key(item[0])
            batch = groups.get(key)
            if batch is None:
                batch = groups[key] = []
            batch.append(item)
        for key, batch in groups.items():
            stats = self._stats.get(key)
            if stats is None:
                if len(self._stats) >= self._max_groups:
                    key = GroupKey("other", "other", key.operation, key.cache)
                    stats = self._stats.get(key)
                if stats is None:
                    stats = self._stats[key] = LatencyStats(self.relative_accuracy)
            try:
                stats.add_all(batch)
            except Exception:  # never lose the other groups' calls to one that cannot be folded
                logger.exception("latencykit: could not add %d call(s) to the statistics of %s", len(batch), key)

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(record)`` for every record added from now on."""
        with self._lock:
            self._listeners = (*self._listeners, listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop calling ``listener``."""
        with self._lock:
            listeners = list(self._listeners)
            listeners.remove(listener)
            self._listeners = tuple(listeners)

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
        """Forget all records and statistics."""
        with self._lock:
            self._calls.clear()
            self._stats.clear()
            self._pending, self._pending_gaps = [], 0
            self._last = None

    def summary(self, *, provider: Optional[str] = None, model: Optional[str] = None, label: str = "") -> Summary:
        """P50/P90/P95/P99/P99.9, mean, max and count of TTFT, TPOT, E2E, TTFB and ITL, per group and overall."""
        with self._lock:
            self._fold()
            stats = {
                k: v.copy()
                for k, v in self._stats.items()
                if (provider is None or k.provider == provider) and (model is None or k.model == model)
            }
            recs = [
                r
                for r in self._calls
                if (provider is None or r.provider == provider)
                and (model is None or model in (r.request_model, r.response_model))
            ]
        return Summary(stats, label, recs)

    def merge(self, other: "Recorder") -> None:
        """Add another Recorder's statistics (exact: sketches merge) and records to this one."""
        if not isinstance(other, Recorder):
            raise ValueError(f"can only merge a latencykit.Recorder, got {other!r}")
        snapshot = other.stats()
        records = other.calls
        with self._lock:
            self._fold()
            for key, stats in snapshot.items():
                if key in self._stats:
                    self._stats[key].merge(stats)
                else:
                    self._stats[key] = stats
            self._calls.extend(records)
            self.total_calls += len(records)

    def stats(self) -> dict[GroupKey, LatencyStats]:
        """A snapshot of the per-group statistics (copies)."""
        with self._lock:
            self._fold()
            return {k: v.copy() for k, v in self._stats.items()}

    def to_dict(self) -> dict[str, Any]:
        """The statistics as JSON-friendly data (to ship to another process and `merge` there)."""
        return {"relative_accuracy": self.relative_accuracy, "groups": [[list(k), v.to_dict()] for k, v in self.stats().items()]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Recorder":
        """A Recorder holding the statistics of `to_dict` (no individual records)."""
        rec = cls(relative_accuracy=float(data["relative_accuracy"]))
        for key, stats in data["groups"]:
            rec._stats[GroupKey(*key)] = LatencyStats.from_dict(stats)
        return rec

    # -- export ----------------------------------------------------------------------------
    def to_jsonl(self, path_or_file: _export.PathOrFile) -> int:
        """Write the retained records as JSON Lines, one ``CallRecord.to_dict()`` per line; returns the count.

        Read them back with `Recorder.from_jsonl`.
        """
        return _export.to_jsonl(self.calls, path_or_file)

    @classmethod
    def from_jsonl(cls, path_or_file: _export.PathOrFile, *, max_calls: int = 10_000) -> "Recorder":
        """A Recorder holding the records of a `to_jsonl` file, summaries rebuilt from them (no ITL gaps)."""
        records = _export.read_jsonl(path_or_file)
        recorder = cls(max_calls=max(max_calls, len(records)))
        for rec in records:
            recorder._add(rec, ())
        return recorder

    def to_csv(self, path_or_file: _export.PathOrFile) -> int:
        """Write the retained records as CSV (header row, one row per call); returns the count."""
        return _export.to_csv(self.calls, path_or_file)

    def to_dataframe(self) -> Any:
        """The retained records as a ``pandas.DataFrame``, one row per call (``pip install "latencykit[pandas]"``)."""
        return _export.to_dataframe(self.calls)

    def cache_report(
        self, *, provider: Optional[str] = None, model: Optional[str] = None, prices: Optional[Mapping[str, Mapping[str, float]]] = None
    ) -> CacheReport:
        """Cache hit rate by tokens and by calls, tokens read and written, cost saved, verdicts, top miss reasons.

        ``prices``: model-name substring → cache price multipliers (``read``, ``write_5m``, ``write_1h``)
        over the built-in ones, e.g. ``{"gpt-5.6": {"write_5m": 1.25}}``.
        """
        recs = [
            r
            for r in self.calls
            if (provider is None or r.provider == provider)
            and (model is None or model in (r.request_model, r.response_model))
        ]
        return cache_report(recs, prices)

    def prewarm(self, **request: Any) -> Any:
        """Fill the prompt cache with ``request``'s static prefix, so the first real call reads it.

        Call it as ``client.latency.prewarm(**request)``: it goes through the client whose
        ``.latency`` returned this Recorder (in this thread or task), with that client's cache
        policy (``docs/caching.md``, "Prewarm"). Returns the pre-warm call's `CallRecord` (its
        ``cache_write_tokens``: what it wrote), or ``None`` when the request has nothing to cache;
        on an async client an awaitable of it. A Recorder not reached through a client raises
        ``ValueError``.
        """
        via = PREWARM_VIA.get()
        client = via[1]() if via is not None and via[0] is self else None
        if client is None:
            raise ValueError("prewarm needs a client to send through: call client.latency.prewarm(**request)")
        return via[2](client, request)  # type: ignore[index]

    def __repr__(self) -> str:
        return f"<Recorder calls={len(self._calls)} total={self.total_calls}>"
