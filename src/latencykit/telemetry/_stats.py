"""Per-group latency statistics: one percentile sketch per metric, plus outcome and token counts.

A group is (provider, model, operation, cache state). Sketches merge exactly, so groups
merge into the overall view and Recorders merge into one another.
"""

from __future__ import annotations

import math
import operator
from itertools import chain
from typing import Any, Callable, NamedTuple, Sequence

from ..core._record import CallRecord
from ._sketch import PercentileSketch

__all__ = ["GroupKey", "LatencyStats", "METRICS", "cache_state"]

METRICS: tuple[str, ...] = ("ttft", "ttfo", "tpot", "e2e", "ttfb", "itl")
"""Summarized metrics, in seconds: TTFT, TTFO (first token of the answer), TPOT, E2E, TTFB per
call, and ``itl`` — every gap between token-bearing chunks, pooled over calls (vLLM's ITL)."""

# Calls that did not complete still have a valid TTFT/TTFB/ITL up to where they stopped,
# but their E2E and TPOT describe a cut-short call and would skew the distributions.
_COMPLETED_ONLY = frozenset({"tpot", "e2e"})
_PER_CALL: tuple[tuple[str, Callable[[CallRecord], Any]], ...] = tuple(
    (m, operator.attrgetter(m)) for m in ("ttft", "ttfo", "tpot", "e2e", "ttfb")
)


class GroupKey(NamedTuple):
    """Who and what a group of calls is."""

    provider: str
    model: str
    operation: str
    cache: str


def cache_state(rec: CallRecord) -> str:
    """``hit`` (some input read from cache), ``miss`` (none), ``unreported``, or ``semantic_hit``
    (answered from the semantic response cache: its own group, so it never flatters real calls)."""
    if rec.semantic_hit:
        return "semantic_hit"
    if rec.cache_read_tokens is None:
        return "unreported"
    return "hit" if rec.cache_read_tokens > 0 else "miss"


def group_key(rec: CallRecord) -> GroupKey:
    """The group a record belongs to."""
    return GroupKey(rec.provider, rec.response_model or rec.request_model or "?", rec.operation, cache_state(rec))


class LatencyStats:
    """Sketches and counters of one group. Not locked: the owning Recorder serializes access."""

    __slots__ = ("sketches", "outcomes", "input_tokens", "output_tokens", "cache_read_tokens", "relative_accuracy", "reasoning_calls")

    def __init__(self, relative_accuracy: float = 0.01) -> None:
        self.relative_accuracy = relative_accuracy
        self.sketches = {m: PercentileSketch(relative_accuracy) for m in METRICS}
        self.outcomes: dict[str, int] = {}
        self.input_tokens = 0
        self.output_tokens = 0
        self.cache_read_tokens = 0
        self.reasoning_calls = 0
        """Calls whose answer did not start with their first token (reasoning came first, streamed
        or hidden): where TTFO says something TTFT does not."""

    @property
    def calls(self) -> int:
        """Calls seen, whatever their outcome."""
        return sum(self.outcomes.values())

    def add(self, rec: CallRecord, gaps: Sequence[float] = ()) -> None:
        """Fold one finished call in."""
        self.add_all(((rec, gaps),))

    def add_all(self, calls: Sequence[tuple[CallRecord, Sequence[float]]]) -> None:
        """Fold finished calls in, each with its inter-chunk gaps: one pass per sketch.

        A value that is not a finite number >= 0 (a NaN, a clock that went backwards) is
        left out of its sketch; the call's other values still count.
        """
        outcomes = self.outcomes
        completed: list[CallRecord] = []
        for rec, _ in calls:
            outcomes[rec.outcome] = outcomes.get(rec.outcome, 0) + 1
            if rec.outcome == "completed":
                completed.append(rec)
            self.input_tokens += rec.input_tokens or 0
            self.output_tokens += rec.output_tokens or 0
            self.cache_read_tokens += rec.cache_read_tokens or 0
            if rec.reasoning_tokens or rec.ttfo != rec.ttft:
                self.reasoning_calls += 1
        records = [rec for rec, _ in calls]
        for metric, read in _PER_CALL:
            values = [v for v in map(read, completed if metric in _COMPLETED_ONLY else records) if v is not None and 0.0 <= v < math.inf]
            if values:
                self.sketches[metric].add_many(values)
        gaps = list(chain.from_iterable(g for _, g in calls if g))
        if gaps:
            itl = self.sketches["itl"]
            try:
                itl.add_many(gaps)  # checked once there; all or nothing
            except ValueError:
                itl.add_many([g for g in gaps if 0.0 <= g < math.inf])  # a NaN, negative or infinite gap is dropped

    def merge(self, other: "LatencyStats") -> None:
        """Add ``other``'s calls to this group (exact)."""
        for metric, sketch in other.sketches.items():
            self.sketches[metric].merge(sketch)
        for outcome, n in other.outcomes.items():
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + n
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.reasoning_calls += other.reasoning_calls

    def copy(self) -> "LatencyStats":
        """An independent snapshot."""
        new = LatencyStats(self.relative_accuracy)
        new.merge(self)
        return new

    def to_dict(self) -> dict[str, Any]:
        """Serializable state (sketches included), for shipping between processes."""
        return {
            "relative_accuracy": self.relative_accuracy,
            "sketches": {m: s.to_dict() for m, s in self.sketches.items()},
            "outcomes": dict(self.outcomes),
            "tokens": [self.input_tokens, self.output_tokens, self.cache_read_tokens],
            "reasoning_calls": self.reasoning_calls,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "LatencyStats":
        """Inverse of `to_dict`."""
        new = cls(float(d["relative_accuracy"]))
        new.sketches.update({m: PercentileSketch.from_dict(s) for m, s in d["sketches"].items()})  # (older dicts lack ttfo)
        new.outcomes = {str(k): int(v) for k, v in d["outcomes"].items()}
        new.input_tokens, new.output_tokens, new.cache_read_tokens = (int(x) for x in d["tokens"])
        new.reasoning_calls = int(d.get("reasoning_calls", 0))
        return new
