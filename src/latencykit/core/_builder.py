"""Blocks made once per distinct content: content keys over Python's cached string hashes, and the `Builder`.

Planning runs before every call, so a block's digest, canonical length and token estimate
are computed once per distinct content and then found again through a memo keyed by
Python's own string hashes (SipHash, keyed per process, cached inside each ``str``
object): a block seen before costs a few dictionary look-ups however long its text, and a
rebuilt but equal string costs one pass at memory speed. The memo keeps hashes and
digests, never text.
"""

from __future__ import annotations

import marshal
from collections.abc import Mapping, Sequence
from typing import Any, Callable, NamedTuple, Optional

from ._blocks import Block, Estimator, SegmentPrint, dump, is_markable, marker_ttl, new_tuple
from ._fingerprint import Fingerprinter
from ._tokens import CHARS_PER_TOKEN, MARKER_KEYS, PER_REQUEST_TOKENS, block_size, canonical

__all__ = ["Builder", "Info", "content_key", "tool_key"]

_marshal = marshal.dumps

_SCALARS = {int: "i", float: "f", bool: "b", type(None): "n"}


class _NoKey(Exception):
    """The value holds something without a cheap, faithful key; compute its digest directly."""


def _fold(value: Any) -> int:
    """A process-local hash of ``value``'s content: equal keys mean equal canonical text.

    Strings cost nothing once hashed (CPython caches the hash in the object); containers
    fold their items in order; scalars go through ``repr`` (``hash(-1) == hash(-2)``).
    """
    kind = type(value)
    if kind is str:
        return hash(value)
    if kind is dict:
        return hash(tuple([(k, hash(v) if type(v) is str else _fold(v)) for k, v in value.items()]))
    if kind is list or kind is tuple:
        return hash(("[", *[hash(v) if type(v) is str else _fold(v) for v in value]))
    tag = _SCALARS.get(kind)
    if tag is not None:
        return hash((tag, repr(value)))
    if isinstance(value, Mapping):
        return hash(tuple([(k, _fold(v)) for k, v in value.items()]))
    fields = getattr(value, "__dict__", None)
    if hasattr(value, "model_dump") and isinstance(fields, dict):
        extra = getattr(value, "__pydantic_extra__", None)
        return hash((kind.__qualname__, _fold(fields), _fold(extra) if extra else 0))
    raise _NoKey


def content_key(raw: Any) -> Any:
    """A fold of a block's content without its top-level ``cache_control`` / ``prompt_cache_breakpoint``; ``None`` if it has none."""
    try:
        kind = type(raw)
        if kind is str:
            return (hash(raw), len(raw))
        if kind is dict or isinstance(raw, Mapping):
            return hash(tuple([(k, hash(v) if type(v) is str else _fold(v)) for k, v in raw.items() if k not in MARKER_KEYS]))
        return _fold(raw)
    except (_NoKey, TypeError):
        return None


def tool_key(raw: Any) -> Any:
    """`content_key` of a tool: its schema (small, nested) folded through ``marshal`` in C.

    Equal bytes mean equal values of equal types, so equal canonical text; unequal bytes for
    equal values (key order, say) only cost a memo miss. Only for tools: a nested image or
    document source would be copied whole, where `_fold` hashes its string once.
    """
    if type(raw) is not dict:
        return content_key(raw)
    try:
        return hash(tuple([(k, hash(v) if type(v) is str else hash(_marshal(v, 0))) for k, v in raw.items() if k != "cache_control"]))
    except (ValueError, TypeError):  # not marshallable (an SDK model inside): fold it
        return content_key(raw)


class Info(NamedTuple):
    """What the memo keeps of one block content: digest, canonical length, token estimate parts, markability."""

    digest: bytes
    length: int
    chars: int
    fixed: int
    markable: bool


class Builder:
    """Collects blocks in prefix order; one call of `add` per block, a few look-ups each."""

    def __init__(self, fp: Fingerprinter, estimate: Estimator) -> None:
        self.fp = fp
        self.memo = fp._blocks
        self.estimate = estimate
        self.default_estimate = estimate is block_size
        self.blocks: list[Block] = []
        self.markers: list[tuple[int, str]] = []
        self.chars = 0
        self.fixed = PER_REQUEST_TOKENS
        self._name = ""
        self._starts: list[tuple[str, int]] = []
        """``(segment name, index of its first block)``, one per segment, in order."""
        self._digests: list[bytes] = []
        self._sizes: list[int] = []
        self.tool_names: Optional[tuple[int, int]] = None
        """`_tool_runs.key_of_names` of the tools' names, when `add_tools` knows it."""
        self._made: tuple[int, tuple[SegmentPrint, ...]] = (0, ())
        """``(index in _starts, prints)``: segments `add_messages` already made (one string message each)."""

    def add(
        self,
        name: str,
        path: tuple[Any, ...],
        raw: Any,
        tag: tuple[Any, ...],
        markable: Optional[bool] = None,
        key: Any = None,
        content_key: Callable[[Any], Any] = content_key,
    ) -> Info:
        kind = type(raw)
        if key is not None:
            pass  # the caller's (a string message's flat key, see `add_messages`)
        elif kind is str:
            key = (tag, hash(raw), len(raw))
        else:
            content = content_key(raw)
            key = None if content is None else (tag, content)
        memo = self.memo
        info: Optional[Info] = None if key is None else (memo.new.get(key) or memo.get(key))
        if info is None:
            value = dump(raw)
            text = canonical(value)
            chars, fixed = self.estimate(value) if self.default_estimate else (0, 0)
            label = ":".join(map(str, tag)).encode()
            info = Info(self.fp.digest(label, text.encode()), len(text), chars, fixed, is_markable(value))
            if key is not None:
                memo.put(key, info)
        if self.default_estimate:
            self.chars += info.chars
            self.fixed += info.fixed
        else:
            chars, fixed = self.estimate(dump(raw))
            self.chars += chars
            self.fixed += fixed
        marker = None if kind is str or (kind is dict and "cache_control" not in raw) else marker_ttl(raw)
        if marker is not None:
            self.markers.append((len(self.blocks), marker))
        blocks = self.blocks
        if name != self._name:
            self._starts.append((name, len(blocks)))
            self._name = name
        self._digests.append(info.digest)
        self._sizes.append(info.length)
        tokens = -(-self.chars // CHARS_PER_TOKEN) + self.fixed  # the running totals include this block
        blocks.append(new_tuple(Block, (name, path, info.digest, tokens, marker, info.markable if markable is None else markable, info.length)))
        return info

    def take(self, blocks: Sequence[Block], digests: Sequence[bytes], sizes: Sequence[int], starts: Sequence[tuple[str, int]]) -> None:
        """Append blocks made by an earlier parse (a reused run), with their digests, sizes and
        segment starts; the running totals are the caller's to set."""
        self.blocks.extend(blocks)
        self._digests.extend(digests)
        self._sizes.extend(sizes)
        self._starts.extend(starts)
        self._name = self._starts[-1][0]

    def segments(self) -> list[SegmentPrint]:
        """The blocks grouped into segments (consecutive blocks with the same segment name)."""
        digests, sizes, starts = self._digests, self._sizes, self._starts
        ends = [start for _, start in starts[1:]]
        ends.append(len(digests))
        new = new_tuple  # tuple.__new__: no Python-level NamedTuple __new__ per segment

        def make(lo: int, hi: Optional[int]) -> list[SegmentPrint]:
            return [new(SegmentPrint, (name, tuple(digests[a:b]), a, tuple(sizes[a:b]))) for (name, a), b in zip(starts[lo:hi], ends[lo:hi])]

        k, made = self._made  # the segments `add_messages` reused or made for string messages
        if not made:
            return make(0, None)
        return [*make(0, k), *made, *make(k + len(made), None)]
