"""The block model: a request as ordered blocks (`Block`) grouped into segments (`SegmentPrint`), in a `Shape`.

The cache is an exact prefix match over ``tools → system → messages`` (Anthropic) or the
serialized prompt (OpenAI). A `Block` is one cacheable unit with its estimated cumulative
token count and keyed digest; a segment (``tools``, ``system``, ``message k``) is the tuple
of its blocks' digests. Also here: reading blocks of a request (``cache_control`` markers,
markability, `resolve` / `texts`) and `frozen`, the cheap constructor of frozen dataclasses.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Optional, TypeVar

from ._fingerprint import Fingerprinter
from ._tokens import canonical

__all__ = [
    "Block", "SegmentPrint", "Shape", "Unsupported", "Estimator", "common_prefix", "message_segments", "marker_ttl",
    "is_markable", "dump", "seq", "get", "frozen", "texts", "resolve", "new_tuple", "SYSTEM_ROLES",
]  # fmt: skip

_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})
SYSTEM_ROLES = frozenset({"system", "developer"})
"""Roles whose leading input items are the system prompt (OpenAI)."""

Estimator = Callable[[Any], "tuple[int, int]"]


class Unsupported(Exception):
    """The request has a shape the planner does not take apart (it is sent as given)."""


class Block(NamedTuple):
    """One cacheable unit (a tool, a system block, a message content block) in prefix order."""

    segment: str
    """``"tools"``, ``"system"`` or ``"message k"``."""
    path: tuple[Any, ...]
    """Where it lives: ``("tools", i)``, ``("system",)``, ``("system", j)``, ``("messages", m)``, ``("messages", m, b)``, ``("instructions",)``, ``("input",)``, ``("input", m)``, ``("input", m, j)``, ``("input", m, "output", j)``."""
    digest: bytes
    """Keyed digest of this block alone (role and position included, ``cache_control`` excluded)."""
    prefix_tokens: int
    """Estimated tokens of the whole prompt up to and including this block."""
    marker: Optional[str] = None
    """TTL of the caller's ``cache_control`` on this block (``"5m"`` / ``"1h"``), ``None`` if unmarked."""
    markable: bool = True
    """Whether a ``cache_control`` may be put on it (not thinking blocks, not empty text)."""
    length: int = 0
    """Characters of its canonical text (to turn a chunk index into a segment offset)."""

_digest_of = operator.itemgetter(2)
"""``Block.digest`` (its third field), for ``map`` in C."""
_name_of = operator.itemgetter(0)
"""``SegmentPrint.name``."""
new_tuple = tuple.__new__
"""``new_tuple(Block, fields)``: a `Block` without the Python-level ``__new__`` of a NamedTuple."""

class SegmentPrint(NamedTuple):
    """Keyed fingerprints of one segment: the digests of its blocks, in order."""

    name: str
    blocks: tuple[bytes, ...]
    first_block: int
    """Index in `Shape.blocks` of its first block (``-1`` for ``model``)."""
    sizes: tuple[int, ...] = ()
    """Canonical text length of each of its blocks (to turn a block and chunk into an offset)."""

    @property
    def length(self) -> int:
        """Characters of the segment's canonical text."""
        return sum(self.sizes)


@dataclass(frozen=True)
class Shape:
    """Everything the planner, ledger and verifier need to know about a request; no text."""

    api: str
    model: str
    blocks: tuple[Block, ...]
    segments: tuple[SegmentPrint, ...]
    family: bytes
    prompt_tokens: int
    messages: int
    """Number of messages (input items): more than one means a multi-turn conversation."""
    top_level: Optional[str] = None
    """TTL of a top-level automatic ``cache_control`` (``"5m"`` / ``"1h"``), ``None`` if absent; OpenAI
    part by part (GPT-5.6+): the request-level TTL (``"30m"`` / ``"12h"``)."""
    context: bytes = b""
    """Digest of settings that invalidate the messages tier (``tool_choice``, ``thinking``)."""
    markers: tuple[tuple[int, str], ...] = ()
    """The caller's ``(block index, ttl)`` markers, top-level one excluded (OpenAI breakpoints: ttl ``""`` inherits)."""
    _fp: Fingerprinter = field(default_factory=lambda: Fingerprinter(b"-"), repr=False, compare=False)
    _digests: tuple[bytes, ...] = field(default=(), init=False, repr=False, compare=False)
    """Set by `parse`; not an init field, so ``dataclasses.replace`` never carries stale digests."""

    @property
    def digests(self) -> tuple[bytes, ...]:
        """The digest of each block, in order (kept from parsing)."""
        if len(self._digests) != len(self.blocks):
            object.__setattr__(self, "_digests", tuple(map(_digest_of, self.blocks)))
        return self._digests

    def prefixes(self, salt: str = "") -> tuple[bytes, ...]:
        """Cumulative fingerprint of the prefix ending at each block (``salt``: e.g. a ``prompt_cache_key``).

        The chain of the family's previous request with the same model, salt and context is reused
        up to the first block that differs, so a call costs one comparison per block plus
        one keyed digest per new block.
        """
        fp = self._fp
        head = (self.family, self.api, self.model, salt, self.context)
        digests = self.digests
        first = self.segments_start  # index in `blocks` of the first message block
        known: Optional[tuple[tuple[bytes, ...], tuple[bytes, ...]]] = fp._chains.get(head)
        if known is not None and known[0] == digests:
            return known[1]
        link = fp.link
        out: list[bytes] = []
        start = 0
        if known is not None:
            old_digests, old_states = known
            start = common_prefix(old_digests, digests)
            out.extend(old_states[:start])
        if start:
            state = out[-1]
        else:
            state = fp.digest(self.api.encode(), self.model.encode(), salt.encode())
        for i in range(start, len(digests)):
            if i == first:
                state = link(state, self.context)
            state = link(state, digests[i])
            out.append(state)
        states = tuple(out)
        fp._chains.put(head, (digests, states))
        return states

    @property
    def segments_start(self) -> int:
        """Index in `blocks` of the first message block (``len(blocks)`` when there is none)."""
        for seg in self.segments:
            if seg.name.startswith("message"):
                return seg.first_block
        return len(self.blocks)

    def segment(self, name: str) -> Optional[SegmentPrint]:
        """The print of segment ``name``, if the request has it."""
        if name.startswith("message"):
            messages = self.message_segments
            if messages and messages[-1].name == name:  # the newest message: what the planner asks for
                return messages[-1]
            return self._segment_map.get(name)
        for seg in self.segments:
            if seg.name == name:
                return seg
            if seg.name.startswith("message"):
                break
        return None

    @property
    def message_segments(self) -> tuple[SegmentPrint, ...]:
        """The segments of the messages (input items), in order; they come last."""
        found: Optional[tuple[SegmentPrint, ...]] = self.__dict__.get("_msgsegs")
        if found is None:
            found = message_segments(self.segments)
            object.__setattr__(self, "_msgsegs", found)
        return found

    @property
    def _segment_map(self) -> dict[str, SegmentPrint]:
        found: Optional[dict[str, SegmentPrint]] = self.__dict__.get("_segmap")
        if found is None:
            found = dict(zip(map(_name_of, self.segments), self.segments))
            object.__setattr__(self, "_segmap", found)
        return found


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items ``a`` and ``b`` (tuples) share, found by comparing slices in C.

    A family's next call usually repeats all but its last few blocks or segments: the first
    comparison settles that, the rest is a bisection, never a Python loop over the items.
    """
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    if n > 1 and a[: n - 1] == b[: n - 1]:
        return n - 1
    lo, hi = 0, n - 1  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def message_segments(segments: tuple[SegmentPrint, ...]) -> tuple[SegmentPrint, ...]:
    """The message segments of ``segments`` (a `Shape.segments`): they come after model, tools and system."""
    for k, seg in enumerate(segments):
        if seg.name.startswith("message"):
            return segments[k:]
    return ()


def dump(value: Any) -> Any:
    """Plain data for a block: dicts and strings as they are, SDK models dumped."""
    if isinstance(value, (str, Mapping)):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    raise Unsupported(f"block of type {type(value).__name__}")


def seq(value: Any, what: str) -> Sequence[Any]:
    if isinstance(value, (list, tuple)):
        return value
    raise Unsupported(f"{what} is a {type(value).__name__}, not a list")


def get(value: Any, key: str) -> Any:
    """``value[key]`` for a mapping, the attribute for an SDK model, else ``None``."""
    if isinstance(value, Mapping):
        return value.get(key)
    return getattr(value, key, None) if hasattr(value, "model_dump") else None


def marker_ttl(block: Any) -> Optional[str]:
    """TTL of a block's ``cache_control`` (``"5m"`` / ``"1h"``), ``None`` when it has none."""
    cc = get(block, "cache_control")
    if cc is None:
        return None
    ttl = get(cc, "ttl")
    return ttl if ttl in ("5m", "1h") else "5m"


def is_markable(block: Any) -> bool:
    """Whether a ``cache_control`` may go on ``block`` (not thinking blocks, not empty text)."""
    if isinstance(block, str):
        return bool(block)
    if not isinstance(block, Mapping):
        return False
    kind = block.get("type")
    if kind in _UNMARKABLE:
        return False
    return not (kind == "text" and not block.get("text"))


T = TypeVar("T")


def frozen(cls: type[T], **values: Any) -> T:
    """An instance of the frozen dataclass ``cls`` holding ``values`` (every field, by name),
    made without its ``__init__``: that sets each field through ``object.__setattr__``,
    ~1 µs per object for the few made before every call. The caller passes every field."""
    obj = object.__new__(cls)
    obj.__dict__.update(values)
    return obj


def texts(api: str, request: Mapping[str, Any], shape: Shape) -> Callable[[int], str]:
    """``text(i)``: the canonical text of block ``i`` of ``shape`` (parsed from ``request``)."""

    parts = api != "messages" and shape.top_level is not None  # OpenAI part by part (GPT-5.6+)

    def text(i: int) -> str:
        return canonical(dump(resolve(api, request, shape.blocks[i].path, parts)))

    return text


def resolve(api: str, request: Mapping[str, Any], path: tuple[Any, ...], parts: bool = False) -> Any:
    """The raw block of ``request`` at a `Block.path` (a string, a mapping or an SDK model);
    ``parts``: an OpenAI request taken apart part by part, where ``(key, m)`` is a string content."""
    value: Any = request.get(path[0])
    if len(path) == 1 or path[0] not in ("messages", "input"):
        return value if len(path) == 1 else value[path[1]]
    item = value[path[1]]
    if api != "messages" and len(path) == 2:
        if parts:
            text = get(item, "content") if get(item, "content") is not None else get(item, "output")
            return text if isinstance(text, str) and text else item
        return item
    content = get(item, path[2] if len(path) == 4 else "content")  # ("input", m, "output", j): a tool output's part
    return content if len(path) == 2 else content[path[-1]]
