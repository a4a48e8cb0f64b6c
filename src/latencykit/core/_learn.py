"""Learned boundaries: which parts of a "prompt family" stay the same from call to call.

A family is the set of requests with the same API, tool names and system-prompt layout
(see `_segments`); for each, the previous call's segment fingerprints are kept (never
text). Comparing them locates the first changed segment and, to within 16 characters,
where in it the change starts. A ``tools`` or ``system`` segment that changes on
`DYNAMIC_AFTER` consecutive calls is *dynamic*: the planner stops putting breakpoints after
it until it has stayed the same for `STATIC_AFTER` calls.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Optional

from ._segments import CHUNK_CHARS, SegmentPrint, Shape

__all__ = ["Change", "Families", "FamilyState", "Learned", "diff", "DYNAMIC_AFTER", "STATIC_AFTER"]

DYNAMIC_AFTER = 2
STATIC_AFTER = 5
_LEARNABLE = ("tools", "system")


@dataclass(frozen=True)
class Change:
    """The first segment that differs from the family's previous call, and where."""

    segment: str
    """``"model"``, ``"tools"``, ``"system"`` or ``"message k"``."""
    offset: int
    """Character offset (of the segment's canonical text, ±16) where the difference starts."""
    block: int
    """Index of the first block of the changed segment in the *current* request (-1: model)."""
    block_in_segment: int = 0
    """Which block of the segment holds the offset."""

    def describe(self) -> str:
        """``"system changed at character 26"``."""
        return "model changed" if self.segment == "model" else f"{self.segment} changed at character {self.offset}"


def diff(previous: tuple[SegmentPrint, ...], shape: Shape) -> Optional[Change]:
    """The first segment of ``shape`` that differs from ``previous`` (a pure extension is no change)."""
    before = {s.name: s for s in previous}
    for seg in shape.segments:
        old = before.get(seg.name)
        if old is None:
            if seg.name in _LEARNABLE and any(s.name.startswith("message") for s in previous):
                return Change(seg.name, 0, seg.first_block)
            continue
        if old.digest == seg.digest:
            continue
        offset = next((i * CHUNK_CHARS for i, (a, b) in enumerate(zip(old.chunks, seg.chunks)) if a != b), None)
        if offset is None:
            offset = min(len(old.chunks), len(seg.chunks)) * CHUNK_CHARS
            offset = min(offset, old.length, seg.length)
        return Change(seg.name, offset, seg.first_block, _block_of(seg, offset))
    return None


def _block_of(seg: SegmentPrint, offset: int) -> int:
    """Which block of ``seg`` holds character ``offset``."""
    total = 0
    for j, size in enumerate(seg.sizes):
        total += size
        if offset < total:
            return j
    return max(len(seg.sizes) - 1, 0)


@dataclass
class FamilyState:
    """What is remembered about one prompt family."""

    last: tuple[SegmentPrint, ...] = ()
    last_marked: int = -1
    """Furthest block the previous call asked the cache to store."""
    changes: dict[str, int] = field(default_factory=dict)
    steady: dict[str, int] = field(default_factory=dict)
    dynamic: dict[str, int] = field(default_factory=dict)
    warned: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Learned:
    """Result of observing one call: the change (if any) and a segment newly found dynamic."""

    change: Optional[Change]
    dynamic: dict[str, int]
    newly_dynamic: Optional[Change] = None
    previous_marked: int = -1


class Families:
    """Per-family learning state, bounded (LRU) and thread-safe."""

    def __init__(self, *, capacity: int = 1024) -> None:
        self.capacity = capacity
        self._states: OrderedDict[bytes, FamilyState] = OrderedDict()
        self._lock = threading.Lock()

    def observe(self, shape: Shape) -> Learned:
        """Compare ``shape`` with the family's previous call, update what is learned, remember it."""
        with self._lock:
            state = self._states.get(shape.family)
            if state is None:
                state = self._states[shape.family] = FamilyState()
                while len(self._states) > self.capacity:
                    self._states.popitem(last=False)
            self._states.move_to_end(shape.family)
            change = diff(state.last, shape) if state.last else None
            newly: Optional[Change] = None
            for name in _LEARNABLE:
                if change is not None and change.segment == name:
                    state.changes[name] = state.changes.get(name, 0) + 1
                    state.steady[name] = 0
                    if state.changes[name] >= DYNAMIC_AFTER and name not in state.dynamic:
                        state.dynamic[name] = change.block_in_segment
                        if name not in state.warned:
                            state.warned.add(name)
                            newly = change
                elif state.last and shape.segment(name) is not None:
                    state.steady[name] = state.steady.get(name, 0) + 1
                    state.changes[name] = 0
                    if state.steady[name] >= STATIC_AFTER:
                        state.dynamic.pop(name, None)
            previous = state.last_marked
            state.last = shape.segments
            return Learned(change, dict(state.dynamic), newly, previous)

    def marked(self, shape: Shape, furthest: int) -> None:
        """Remember the furthest block this call marked (for explaining the next call's misses)."""
        with self._lock:
            state = self._states.get(shape.family)
            if state is not None:
                state.last_marked = furthest
