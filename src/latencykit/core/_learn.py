"""Learned boundaries: which parts of a "prompt family" stay the same from call to call.

A family is the set of requests with the same API, tool names and system-prompt layout
(see `_segments`); for each, the previous call's segment fingerprints are kept (never
text). Comparing them locates the first changed segment, the first changed block in it
and, to within 16 characters, where in that block the change starts (chunk prints, made
once per block content the learner has not seen before and kept in a bounded store).

What is learned:

- a ``tools`` or ``system`` segment whose value *recurs* is static per value (an app serving
  three assistants sends three system prompts in turn): once it has changed, the family
  keeps the segment's recent values, each with the time its cache entry would expire
  (`Rotation`), and the segment keeps its breakpoint while a value is likely to be read
  again before it expires — at least half the values came back within their lifetime, or,
  before any came back, the values seen so far, in order, would come round again in time;
- a segment that changes on `DYNAMIC_AFTER` consecutive calls into an *edit* of its previous
  value (all but a few 16-character chunks equal at the same places: a timestamp in the
  system prompt), or into `ROTATION_VALUES` new values in a row, none of which came back, is
  *dynamic*: the planner stops putting breakpoints after it until it has stayed the same
  for `STATIC_AFTER` calls or a value comes back, and one warning per family says so;
- in the messages, the first block that differs from the previous call, counted from the
  newest message (RAG documents before a varying question: the newest message's block 3;
  few-shot examples: the newest message's block 0). The later of the last two observations
  is used, so one unusual call (new documents) does not move it; a call that extends the
  previous one (a conversation) means the messages have no boundary, and the planner marks
  the newest message as before. So does a call that extends any of the family's last
  `CONVERSATIONS` calls: one client serving many users sees their conversations interleaved.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import filterfalse
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Sequence, Union

from ._cache_facts import OPENAI_BREAKPOINT_TTLS, OPENAI_TTL_SECONDS, TTL_SECONDS
from ._segments import CHUNK_CHARS, SegmentPrint, Shape, common_prefix, message_segments

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "Change", "Families", "FamilyState", "Learned", "Prints", "Rotation", "diff", "DYNAMIC_AFTER", "STATIC_AFTER",
    "ROTATION_VALUES",
]  # fmt: skip

DYNAMIC_AFTER = 2
STATIC_AFTER = 5
ROTATION_VALUES = 32
CONVERSATIONS = 32
"""Recent calls a family remembers the messages of, so interleaved conversations are each seen to grow."""
"""Recent values a family keeps per changing segment: a rotation of up to this many prompts is learned."""
_LIFETIME_5M, _LIFETIME_1H = TTL_SECONDS["5m"], TTL_SECONDS["1h"]
_LEARNABLE = ("tools", "system")
Position = tuple[int, int]
"""``(messages before the newest, block in that message)`` of the first changed message block."""


class Change(NamedTuple):
    """The first segment that differs from the family's previous call, and where (a named tuple)."""

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


class Prints:
    """Chunk prints by block digest, bounded by total bytes in two generations; lock-free.

    The current generation fills up to half the bound, then becomes the old one (its
    entries move back to the current one when used). Every operation is one dict
    operation, atomic under the GIL; a race costs at most a recomputation.
    """

    def __init__(self, *, max_bytes: int = 32 << 20) -> None:
        self.max_bytes = max_bytes
        self._new: dict[bytes, np.ndarray[Any, Any]] = {}
        self._old: dict[bytes, np.ndarray[Any, Any]] = {}
        self._bytes = 0

    def get(self, digest: bytes) -> Optional[np.ndarray[Any, Any]]:
        """The prints of the block with ``digest``, if kept."""
        found = self._new.get(digest)
        if found is None:
            found = self._old.get(digest)
            if found is not None:
                self.put(digest, found)
        return found

    def __contains__(self, digest: bytes) -> bool:
        return digest in self._new or self.get(digest) is not None

    def put(self, digest: bytes, prints: np.ndarray[Any, Any]) -> None:
        """Keep ``prints`` for ``digest``."""
        if self._bytes + prints.nbytes > self.max_bytes // 2 and self._new:
            self._old, self._new, self._bytes = self._new, {}, 0
        self._new[digest] = prints
        self._bytes += prints.nbytes


def diff(
    previous: tuple[SegmentPrint, ...],
    shape: Shape,
    prints: Optional[Prints] = None,
    text: Optional[Callable[[int], str]] = None,
    explained_upto: Optional[int] = None,
) -> Optional[Change]:
    """The first segment of ``shape`` that differs from ``previous`` (a pure extension is no change).

    ``text(i)`` (block ``i``'s canonical text) makes the changed block's prints when they
    are not kept yet. With ``explained_upto`` (the previous call's furthest marker), the
    offset inside the changed block is located only where a miss can be explained by it:
    in tools and system, or in a segment starting at or before that block; elsewhere it
    is the offset of the changed block's start.
    """
    before: Optional[dict[str, SegmentPrint]] = None
    same = common_prefix(previous, shape.segments)  # equal segments at equal positions: no change
    for k in range(same, len(shape.segments)):
        seg = shape.segments[k]
        # Segments usually sit where they sat in the previous call: compare by position first.
        old: Optional[SegmentPrint] = previous[k] if k < len(previous) else None
        if old is None or old.name != seg.name:
            if before is None:
                before = {s.name: s for s in previous}
            old = before.get(seg.name)
        if old is None:
            if seg.name in _LEARNABLE and any(s.name.startswith("message") for s in previous):
                return Change(seg.name, 0, seg.first_block)
            continue
        if old.blocks == seg.blocks:
            continue
        j = common_prefix(old.blocks, seg.blocks)
        offset = sum(seg.sizes[:j])
        precise = explained_upto is None or seg.name in _LEARNABLE or seg.first_block <= explained_upto
        if precise and j < len(old.blocks) and j < len(seg.blocks):
            if prints is not None and text is not None and old.blocks[j] in prints and seg.blocks[j] not in prints:
                prints.put(seg.blocks[j], shape._fp.chunks(text(seg.first_block + j)))
            offset += _offset_in_block(prints, old.blocks[j], seg.blocks[j], min(old.sizes[j], seg.sizes[j]))
        return Change(seg.name, offset, seg.first_block, min(j, max(len(seg.blocks) - 1, 0)))
    return None


def _offset_in_block(prints: Optional[Prints], old: bytes, new: bytes, shorter: int) -> int:
    """Where two versions of a block first differ (±16 characters); 0 when their prints are not kept."""
    a = prints.get(old) if prints is not None else None
    b = prints.get(new) if prints is not None else None
    if a is None or b is None:
        return 0
    n = min(len(a), len(b))
    differing = (a[:n] != b[:n]).nonzero()[0]
    return int(differing[0]) * CHUNK_CHARS if len(differing) else min(n * CHUNK_CHARS, shorter)


def _tail(previous: tuple[SegmentPrint, ...], shape: Shape) -> Optional[Position]:
    """Where the messages first differ from the previous call's, counted from the newest; ``None``
    when they extend (a conversation) or repeat the previous call's messages."""
    old, new = message_segments(previous), shape.message_segments
    for k in range(common_prefix(old, new), len(new)):
        seg = new[k]
        if k >= len(old):
            return None
        if old[k].blocks != seg.blocks:
            return (len(new) - 1 - k, common_prefix(old[k].blocks, seg.blocks))
    return None


def _add_tails(dynamic: dict[str, int], tails: list[Optional[Position]], shape: Shape) -> None:
    """Add the learned boundary in the messages (the later of the last two observations) to ``dynamic``."""
    if tails:
        where = tails[0] if len(tails) == 1 else _later(tails[0], tails[1])
        messages = shape.message_segments
        if where is not None and where[0] < len(messages):
            dynamic[messages[len(messages) - 1 - where[0]].name] = where[1]


def _later(a: Optional[Position], b: Optional[Position]) -> Optional[Position]:
    if a is None or b is None:
        return None
    return a if (-a[0], a[1]) >= (-b[0], b[1]) else b


class Rotation:
    """The recent values of one changing segment of a family, each with the time its cache entry expires.

    Kept from the segment's first change on (a family whose segments never change has none).
    A value seen again before it expires *came back in time*; one that expires unseen, or
    comes back later, *lapsed*. Both are counted (halved past 64, so the recent past weighs
    most), and `worth` says whether a value not yet cached should be written: at least half
    the values came back in time, or, before any did, the values seen so far, taken in
    order at the pace they arrived, would come round again within a lifetime (at most
    `ROTATION_VALUES` of them). At most `ROTATION_VALUES` live values are kept, the least
    recently seen dropped first, and as many lapsed ones (a value back after its lifetime
    recurs, late: it is not one of the values that never come back, counted in `fresh`).
    """

    __slots__ = ("expires", "gone", "current", "in_time", "lapsed", "streak", "fresh", "first", "block")

    def __init__(self, block: int = 0) -> None:
        self.expires: dict[tuple[bytes, ...], float] = {}
        """Live value (its blocks' digests) → when its cache entry expires, least recently seen first."""
        self.gone: dict[tuple[bytes, ...], None] = {}
        """Values whose entry expired unseen, most recent last."""
        self.current: tuple[bytes, ...] = ()
        self.in_time = 0
        self.lapsed = 0
        self.streak = 0
        """Values in a row, new or back late, since a value last came back in time."""
        self.fresh = 0
        """Values never seen before, in a row."""
        self.first = 0.0
        """When the first value of the streak was seen."""
        self.block = block
        """First block of the segment (in it) that differs between its values."""

    def see(self, value: tuple[bytes, ...], now: float, lifetime: float) -> bool:
        """Record a sight of ``value``; whether it came back before its entry expired."""
        expires, gone = self.expires, self.gone
        previous = expires.pop(value, None)
        while expires:  # the least recently seen first: the ones that expired unseen lapse
            oldest = next(iter(expires))
            if expires[oldest] >= now:
                break
            del expires[oldest]
            self.lapsed += 1
            gone[oldest] = None
            if len(gone) > ROTATION_VALUES:
                del gone[next(iter(gone))]
        expires[value] = now + lifetime
        if len(expires) > ROTATION_VALUES:
            del expires[next(iter(expires))]
        self.current = value
        if previous is not None and previous >= now:
            self.in_time += 1
            self.streak = self.fresh = 0
            if self.in_time + self.lapsed > 64:
                self.in_time, self.lapsed = (self.in_time + 1) // 2, self.lapsed // 2
            return True
        if previous is not None:  # back after its entry expired, before its lapse was counted
            self.lapsed += 1
            self.fresh = 0
        elif gone and gone.pop(value, 0) is None:  # back after it lapsed
            self.fresh = 0
        else:
            self.fresh += 1
        if self.streak == 0:
            self.first = now
        self.streak += 1
        return False

    def worth(self, now: float, lifetime: float) -> bool:
        """Whether a value not cached yet is likely to be read again before its entry expires."""
        if self.in_time:
            return self.in_time > self.lapsed
        n = self.streak
        if n >= ROTATION_VALUES:
            return False
        # In order, n values seen over (now - first) come round again after about n gaps.
        return n <= 1 or (now - self.first) * n < lifetime * (n - 1)


@dataclass
class FamilyState:
    """What is remembered about one prompt family."""

    last: tuple[SegmentPrint, ...] = ()
    last_time: float = 0.0
    """When the previous call was planned."""
    last_marked: int = -1
    """Furthest block the previous call asked the cache to store."""
    changes: dict[str, int] = field(default_factory=dict)
    steady: dict[str, int] = field(default_factory=dict)
    dynamic: dict[str, int] = field(default_factory=dict)
    rotations: dict[str, Rotation] = field(default_factory=dict)
    """Recent values of the segments that changed (see `Rotation`)."""
    warned: bool = False
    """The family's one "changes on every call" warning was given."""
    tails: list[Optional[Position]] = field(default_factory=list)
    """The last two observations of where the messages first changed (see `_tail`)."""
    conversation: bool = False
    """A call of the family has extended an earlier one: its calls are conversations, whose every turn (the first
    included) the next one reads, so no boundary is learned in their messages."""
    recent: list[tuple[SegmentPrint, ...]] = field(default_factory=list)
    """The message segments of the family's last `CONVERSATIONS` calls: a call that extends any of them continues
    a conversation, even when calls of other conversations came in between (many users, one client)."""


def _edit(prints: Prints, old: tuple[bytes, ...], new: tuple[bytes, ...]) -> bool:
    """Whether ``new`` is an edit of ``old``, not another text; ``True`` when unknown.

    An edit (a timestamp, a request id) leaves all but a few 16-character chunks of the first
    differing block where they were: at most 4 of them, or an eighth, differ.
    """
    j = common_prefix(old, new)
    if j >= len(old) or j >= len(new):
        return True
    a, b = prints.get(old[j]), prints.get(new[j])
    if a is None or b is None:
        return True
    n, longest = min(len(a), len(b)), max(len(a), len(b))
    differing = longest - int((a[:n] == b[:n]).sum())
    return differing <= 4 or differing * 8 <= longest


def _lifetime(shape: Shape, seg: SegmentPrint) -> float:
    """Seconds a cache entry ending at ``seg`` lives: 1h under a later caller's (or top-level) 1h marker;
    OpenAI: the request's breakpoint TTL (GPT-5.6+, `Shape.top_level`), else the in-memory retention."""
    if shape.api != "messages":
        return OPENAI_BREAKPOINT_TTLS.get(shape.top_level or "", OPENAI_TTL_SECONDS)
    if shape.top_level == "1h":
        return _LIFETIME_1H
    if shape.markers:
        end = seg.first_block + len(seg.blocks) - 1
        if any(ttl == "1h" and i >= end for i, ttl in shape.markers):
            return _LIFETIME_1H
    return _LIFETIME_5M


class Learned(NamedTuple):
    """Result of observing one call: the change (if any) and a segment newly found dynamic (a named tuple)."""

    change: Optional[Change]
    dynamic: dict[str, int]
    """Segments that change from call to call → index of their first changing block (messages included)."""
    newly_dynamic: Optional[Change] = None
    previous_marked: int = -1
    unprinted: tuple[int, ...] = ()
    """Blocks whose chunk prints `Families.marked` is to make (``observe(defer_prints=True)``)."""
    conversation: bool = False
    """The family's calls extend earlier ones (`FamilyState.conversation`)."""


class Families:
    """Per-family learning state, bounded (LRU) and thread-safe."""

    def __init__(
        self, *, capacity: int = 1024, prints: Optional[Prints] = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.capacity = capacity
        self.clock = clock
        self.prints = prints if prints is not None else Prints()
        self._states: OrderedDict[bytes, FamilyState] = OrderedDict()
        self._lock = threading.Lock()

    def observe(
        self, shape: Shape, text: Optional[Callable[[int], str]] = None, *, defer_prints: bool = False, now: Optional[float] = None
    ) -> Learned:
        """Compare ``shape`` with the family's previous call, update what is learned, remember it.

        ``now``: the call's time (default: the clock), for the values of changing segments.

        ``text(i)`` gives block ``i``'s canonical text; it is asked only for blocks whose
        chunk prints are not kept yet (none at all in a steady family). With
        ``defer_prints`` the new blocks are only listed (`Learned.unprinted`), and
        `marked` makes the prints of those a later call can be told about: the blocks
        up to the furthest marker, and tools and system.
        """
        if now is None:
            now = self.clock()
        unprinted: tuple[int, ...] = ()
        if text is not None:
            unprinted = self._new_blocks(shape)
            if not defer_prints:
                self._print(shape, text, unprinted)
                unprinted = ()
        with self._lock:
            state = self._states.get(shape.family)
            if state is None:
                state = self._states[shape.family] = FamilyState()
                while len(self._states) > self.capacity:
                    self._states.popitem(last=False)
            self._states.move_to_end(shape.family)
            change = diff(state.last, shape, self.prints, text, state.last_marked if defer_prints else None) if state.last else None
            newly: Optional[Change] = None
            skip: Optional[list[tuple[str, int]]] = None
            for name in _LEARNABLE:
                changed = change is not None and change.segment == name
                if not changed and name not in state.rotations:  # a segment that never changed: the common case
                    if state.last and shape.segment(name) is not None:
                        state.steady[name] = state.steady.get(name, 0) + 1
                        state.changes[name] = 0
                        if state.steady[name] >= STATIC_AFTER:
                            state.dynamic.pop(name, None)
                    continue
                found = self._rotate(state, shape, name, change if changed else None, now)
                if isinstance(found, Change):
                    newly = found
                elif found is not None:
                    skip = [*(skip or ()), (name, found)]
            if state.last:
                tail = _tail(state.last, shape)
                if tail is not None and any(_tail(old, shape) is None for old in state.recent):
                    tail = None  # another conversation's call came in between: this one extends its own
                state.tails = [*state.tails[-1:], tail]
                grown = len(shape.message_segments)
                state.conversation = state.conversation or any(
                    0 < len(old) < grown and _tail(old, shape) is None for old in (message_segments(state.last), *state.recent))
            state.recent = [*state.recent[-(CONVERSATIONS - 1):], shape.message_segments]
            conversation = state.conversation
            previous = state.last_marked
            state.last = shape.segments
            state.last_time = now
            dynamic = dict(state.dynamic)
            if skip:
                dynamic.update(skip)
            tails = state.tails
        if not conversation:
            _add_tails(dynamic, tails, shape)
        return Learned(change, dynamic, newly, previous, unprinted, conversation)

    def learned(self, shape: Shape) -> dict[str, int]:
        """What ``shape``'s family has learned to change from call to call, without observing ``shape``
        (a cache pre-warm plans with it and teaches nothing)."""
        with self._lock:
            state = self._states.get(shape.family)
            if state is None:
                return {}
            dynamic, tails, conversation = dict(state.dynamic), state.tails, state.conversation
        if not conversation:
            _add_tails(dynamic, tails, shape)
        return dynamic

    def _rotate(
        self, state: FamilyState, shape: Shape, name: str, change: Optional[Change], now: float
    ) -> Union[Change, int, None]:
        """Learn from the value of segment ``name`` of a family in which it changed (under the lock).

        Returns the `Change` that made it newly dynamic (to warn about, once per family), the
        block (in the segment) to stop before when this value is not worth writing, or ``None``.
        """
        seg = shape.segment(name)
        if seg is None:
            return None
        lifetime = _lifetime(shape, seg)
        rot = state.rotations.get(name)
        if rot is None:
            rot = state.rotations[name] = Rotation(change.block_in_segment if change is not None else 0)
            old = next((s for s in state.last if s.name == name), None)
            if old is not None:
                rot.see(old.blocks, state.last_time, lifetime)
        current = rot.current
        changed = seg.blocks is not current and seg.blocks != current
        back = rot.see(seg.blocks, now, lifetime)
        newly: Optional[Change] = None
        if not changed:
            state.steady[name] = state.steady.get(name, 0) + 1
            state.changes[name] = 0
            if state.steady[name] >= STATIC_AFTER:  # settled on one value: a plain static segment again
                state.dynamic.pop(name, None)
                del state.rotations[name]
                return None
        else:
            state.steady[name] = 0
            if change is not None and change.segment == name:
                rot.block = min(rot.block, change.block_in_segment)
            if back:  # a value came back before it expired: static per value
                state.changes[name] = 0
                state.dynamic.pop(name, None)
            elif not rot.in_time and (rot.fresh >= ROTATION_VALUES or _edit(self.prints, current, seg.blocks)):
                state.changes[name] = state.changes.get(name, 0) + 1
                if state.changes[name] >= DYNAMIC_AFTER and name not in state.dynamic:
                    state.dynamic[name] = rot.block
                    if not state.warned:
                        state.warned = True
                        newly = change or Change(name, 0, seg.first_block, rot.block)
            else:
                state.changes[name] = 0
        if newly is not None:
            return newly
        if name not in state.dynamic and not rot.worth(now, lifetime):
            return rot.block
        return None

    def _new_blocks(self, shape: Shape) -> tuple[int, ...]:
        """Blocks whose prints are not kept yet (those of a segment learned dynamic only once they repeat)."""
        prints = self.prints
        state = self._states.get(shape.family)  # read without the lock: a stale view costs a recomputation
        dynamic = state.dynamic if state is not None else {}
        kept, older = prints._new, prints._old
        digests = shape.digests
        # The few digests not kept yet, found in C; their positions only if no digest repeats.
        new = list(filterfalse(older.__contains__, filterfalse(kept.__contains__, digests)))
        if not new:
            return ()
        blocks = shape.blocks
        if len(set(digests)) == len(digests):
            found = sorted(map(digests.index, new))
        else:
            found = [i for i, d in enumerate(digests) if d not in kept and d not in older]
        if not dynamic or state is None:
            return tuple(found)
        seen = {d for s in state.last for d in s.blocks}
        return tuple([i for i in found if blocks[i].segment not in dynamic or digests[i] in seen])

    def _print(self, shape: Shape, text: Callable[[int], str], indices: Sequence[int]) -> None:
        prints, blocks, chunks = self.prints, shape.blocks, shape._fp.chunks
        for i in indices:
            digest = blocks[i].digest
            if digest not in prints:
                prints.put(digest, chunks(text(i)))

    def marked(
        self, shape: Shape, furthest: int, learned: Optional[Learned] = None, text: Optional[Callable[[int], str]] = None
    ) -> None:
        """Remember the furthest block this call marked (for explaining the next call's misses).

        With the `Learned` of ``observe(defer_prints=True)`` and ``text``, make the prints a
        later call can be told about: a change is explained (`Change.offset`) only before
        the previous call's furthest marker, or in tools and system (dynamic content).
        """
        with self._lock:
            state = self._states.get(shape.family)
            if state is not None:
                state.last_marked = furthest
        if learned is not None and learned.unprinted and text is not None:
            upto = max(furthest, shape.segments_start - 1)
            self._print(shape, text, [i for i in learned.unprinted if i <= upto])
