"""A request as the prompt cache sees it: ordered blocks, segments and keyed fingerprints.

The cache is an exact prefix match over ``tools → system → messages`` (Anthropic) or the
serialized prompt (OpenAI). `parse` turns a request into `Block`s in that order, each with
its estimated cumulative token count and a *keyed* digest (BLAKE2b with a secret, so
fingerprints never reveal text and differ between deployments unless they share the
secret). Segments (``tools``, ``system``, ``message k``) are the tuples of their blocks'
digests.

Cost: planning runs before every call, so a block's digest, canonical length and token
estimate are computed once per distinct content and then found again through a memo keyed
by Python's own string hashes (SipHash, keyed per process, cached inside each ``str``
object): a block seen before costs a few dictionary look-ups however long its text, and a
rebuilt but equal string costs one pass at memory speed. The leading string messages a
request shares with a recent one of the same lead (an agent's history) are not even looked
up one by one: their ``(role, content)`` hashes are compared in C and their blocks and
segments taken whole (`_Run`). The memo keeps hashes and digests, never text. Chunk
prints (which locate a change to within 16 characters) are computed by
`Fingerprinter.chunks` only for blocks the learner has not seen before (`core._learn`).

Odd shapes (a generator of messages, a non-dict block) raise `Unsupported`; callers send
such requests as given.
"""

from __future__ import annotations

import hashlib
import marshal
import math
import operator
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, TypeVar

from ._tokens import CHARS_PER_TOKEN, PER_MESSAGE_TOKENS, PER_REQUEST_TOKENS, block_size, canonical

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "Block", "Fingerprinter", "SegmentPrint", "Shape", "Unsupported", "parse", "resolve", "texts", "CHUNK_CHARS",
    "MAX_CHUNKS", "marker_ttl", "is_markable", "message_segments", "frozen",
]  # fmt: skip

CHUNK_CHARS = 16
MAX_CHUNKS = 8192  # locate changes in the first 128k characters of a block
MEMO_SIZE = 4096
"""Distinct block contents (and prefix links) remembered per generation of the memo."""
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})
_SYSTEM_ROLES = frozenset({"system", "developer"})

Estimator = Callable[[Any], "tuple[int, int]"]


class Unsupported(Exception):
    """The request has a shape the planner does not take apart (it is sent as given)."""


class _Memo:
    """A bounded map in two generations: the current one fills up, then becomes the old one.

    Lock-free: every operation is a single dict operation (atomic under the GIL); a race
    costs at most a recomputation.
    """

    __slots__ = ("size", "new", "old")

    def __init__(self, size: int) -> None:
        self.size = size
        self.new: dict[Any, Any] = {}
        self.old: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        value = self.new.get(key)
        if value is None:
            value = self.old.get(key)
            if value is not None:
                self.put(key, value)
        return value

    def put(self, key: Any, value: Any) -> None:
        if len(self.new) >= self.size:
            self.old, self.new = self.new, {}
        self.new[key] = value


class Fingerprinter:
    """Keyed BLAKE2b digests; the secret defaults to ``$LATENCYKIT_CACHE_SECRET`` or a per-process random key."""

    def __init__(self, secret: Optional[bytes] = None) -> None:
        if secret is None:
            env = os.environ.get("LATENCYKIT_CACHE_SECRET")
            secret = env.encode() if env else os.urandom(32)
        if not isinstance(secret, (bytes, bytearray)) or not secret:
            raise ValueError(f"secret must be non-empty bytes, got {secret!r}")
        self._key = hashlib.blake2b(bytes(secret), digest_size=32).digest()
        self._blocks = _Memo(MEMO_SIZE)
        self._links = _Memo(MEMO_SIZE)
        self._chains = _Memo(256)
        """Per (family, api, model, salt, context): the last request's block digests and prefix chain."""
        self._runs = _Memo(RUNS)
        """Per lead (blocks, characters and fixed tokens before the messages): a recent `_Run`."""
        self._tool_runs = _Memo(RUNS)
        """Per `_tools_key` of a tools list: a recent `_ToolRun`."""
        self._mix: Any = None

    def digest(self, *parts: bytes, size: int = 16) -> bytes:
        """Keyed digest of ``parts`` (length-prefixed, so boundaries are unambiguous)."""
        h = hashlib.blake2b(key=self._key, digest_size=size)
        for part in parts:
            h.update(len(part).to_bytes(8, "little"))
            h.update(part)
        return h.digest()

    def link(self, state: bytes, digest: bytes) -> bytes:
        """``digest(state, digest)``, remembered: the cumulative fingerprint of a prefix one block longer."""
        key = state + digest
        out: Optional[bytes] = self._links.get(key)
        if out is None:
            out = self.digest(state, digest)
            self._links.put(key, out)
        return out

    def chunks(self, text: str) -> np.ndarray[Any, Any]:
        """32-bit keyed prints of consecutive `CHUNK_CHARS`-character pieces of ``text`` (first `MAX_CHUNKS`).

        A keyed multilinear hash over each piece's UTF-32 code units followed by a
        multiply-xorshift finalizer, vectorized with numpy (one pass at memory speed). The
        prints are compared only with earlier prints of this process, to locate a change;
        they never leave it.
        """
        import numpy as np

        if self._mix is None:
            seed = hashlib.blake2b(b"chunk-prints", key=self._key, digest_size=64).digest()
            self._mix = np.frombuffer(seed, dtype="<u8") | np.uint64(1)
        data = text[: CHUNK_CHARS * MAX_CHUNKS].encode("utf-32-le")
        pad = -len(data) % (4 * CHUNK_CHARS)
        if pad:
            data += b"\0" * pad
        words = np.frombuffer(data, dtype="<u8").reshape(-1, 2 * CHUNK_CHARS // 4)
        h = words @ self._mix
        h ^= h >> np.uint64(29)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(32)
        out: np.ndarray[Any, Any] = h.astype(np.uint32)
        return out


class Block(NamedTuple):
    """One cacheable unit (a tool, a system block, a message content block) in prefix order."""

    segment: str
    """``"tools"``, ``"system"`` or ``"message k"``."""
    path: tuple[Any, ...]
    """Where it lives: ``("tools", i)``, ``("system",)``, ``("system", j)``, ``("messages", m)``, ``("messages", m, b)``, ``("instructions",)``, ``("input",)``, ``("input", m)``."""
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


_marshal = marshal.dumps
_digest_of = operator.itemgetter(2)
"""``Block.digest`` (its third field), for ``map`` in C."""
_name_of = operator.itemgetter(0)
"""``SegmentPrint.name``."""
_new_block = tuple.__new__
"""``_new_block(Block, fields)``: a `Block` without the Python-level ``__new__`` of a NamedTuple."""


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
    """TTL of a top-level automatic ``cache_control`` (``"5m"`` / ``"1h"``), ``None`` if absent."""
    context: bytes = b""
    """Digest of settings that invalidate the messages tier (``tool_choice``, ``thinking``)."""
    markers: tuple[tuple[int, str], ...] = ()
    """The caller's ``(block index, ttl)`` markers, top-level one excluded."""
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


def _dump(value: Any) -> Any:
    """Plain data for a block: dicts and strings as they are, SDK models dumped."""
    if isinstance(value, (str, Mapping)):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    raise Unsupported(f"block of type {type(value).__name__}")


def _seq(value: Any, what: str) -> Sequence[Any]:
    if isinstance(value, (list, tuple)):
        return value
    raise Unsupported(f"{what} is a {type(value).__name__}, not a list")


def _get(value: Any, key: str) -> Any:
    """``value[key]`` for a mapping, the attribute for an SDK model, else ``None``."""
    if isinstance(value, Mapping):
        return value.get(key)
    return getattr(value, key, None) if hasattr(value, "model_dump") else None


def marker_ttl(block: Any) -> Optional[str]:
    """TTL of a block's ``cache_control`` (``"5m"`` / ``"1h"``), ``None`` when it has none."""
    cc = _get(block, "cache_control")
    if cc is None:
        return None
    ttl = _get(cc, "ttl")
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


# -- content keys: Python's cached string hashes, folded over a block's structure -------------

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


def _content_key(raw: Any) -> Any:
    """A fold of a block's content without its top-level ``cache_control``; ``None`` if it has none."""
    try:
        kind = type(raw)
        if kind is str:
            return (hash(raw), len(raw))
        if kind is dict or isinstance(raw, Mapping):
            return hash(tuple([(k, hash(v) if type(v) is str else _fold(v)) for k, v in raw.items() if k != "cache_control"]))
        return _fold(raw)
    except (_NoKey, TypeError):
        return None


def _tool_key(raw: Any) -> Any:
    """`_content_key` of a tool: its schema (small, nested) folded through ``marshal`` in C.

    Equal bytes mean equal values of equal types, so equal canonical text; unequal bytes for
    equal values (key order, say) only cost a memo miss. Only for tools: a nested image or
    document source would be copied whole, where `_fold` hashes its string once.
    """
    if type(raw) is not dict:
        return _content_key(raw)
    try:
        return hash(tuple([(k, hash(v) if type(v) is str else hash(_marshal(v, 0))) for k, v in raw.items() if k != "cache_control"]))
    except (ValueError, TypeError):  # not marshallable (an SDK model inside): fold it
        return _content_key(raw)


class _Info(NamedTuple):
    digest: bytes
    length: int
    chars: int
    fixed: int
    markable: bool


class _Builder:
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
        """`_names_key` of the tools' names, when `_tools` knows it."""
        self._made: tuple[int, tuple[SegmentPrint, ...]] = (0, ())
        """``(index in _starts, prints)``: segments `_messages` already made (one string message each)."""

    def add(
        self,
        name: str,
        path: tuple[Any, ...],
        raw: Any,
        tag: tuple[Any, ...],
        markable: Optional[bool] = None,
        key: Any = None,
        content_key: Callable[[Any], Any] = _content_key,
    ) -> _Info:
        kind = type(raw)
        if key is not None:
            pass  # the caller's (a string message's flat key, see `_messages`)
        elif kind is str:
            key = (tag, hash(raw), len(raw))
        else:
            content = content_key(raw)
            key = None if content is None else (tag, content)
        memo = self.memo
        info: Optional[_Info] = None if key is None else (memo.new.get(key) or memo.get(key))
        if info is None:
            value = _dump(raw)
            text = canonical(value)
            chars, fixed = self.estimate(value) if self.default_estimate else (0, 0)
            label = ":".join(map(str, tag)).encode()
            info = _Info(self.fp.digest(label, text.encode()), len(text), chars, fixed, is_markable(value))
            if key is not None:
                memo.put(key, info)
        if self.default_estimate:
            self.chars += info.chars
            self.fixed += info.fixed
        else:
            chars, fixed = self.estimate(_dump(raw))
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
        blocks.append(_new_block(Block, (name, path, info.digest, tokens, marker, info.markable if markable is None else markable, info.length)))
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
        new = _new_block  # tuple.__new__: no Python-level NamedTuple __new__ per segment

        def make(lo: int, hi: Optional[int]) -> list[SegmentPrint]:
            return [new(SegmentPrint, (name, tuple(digests[a:b]), a, tuple(sizes[a:b]))) for (name, a), b in zip(starts[lo:hi], ends[lo:hi])]

        k, made = self._made  # the segments `_messages` reused or made for string messages
        if not made:
            return make(0, None)
        return [*make(0, k), *made, *make(k + len(made), None)]


class _ToolRun(NamedTuple):
    """What `_tools` made of a recent ``tools`` list: its blocks and the running totals after it."""

    blocks: tuple[Block, ...]
    digests: tuple[bytes, ...]
    sizes: tuple[int, ...]
    chars: int
    fixed: int
    names: tuple[int, int]
    """`_names_key` of the tools' names (for the request's family)."""


def _tools(b: _Builder, tools: Sequence[Any]) -> None:
    """The blocks of ``tools`` (always the first in a request) into ``b``.

    A list whose key (`_tools_key`: hashes, never text) is that of a recent list is taken
    whole, its blocks and totals being a function of its content alone. Otherwise each
    tool is keyed by a fold of its content (`_tool_key`) and looked up on its own; a tool
    with its own ``cache_control`` (a marker the key leaves out), one without a key, or a
    custom estimator takes the general path, one `_Builder.add` each.
    """
    lead: Optional[int] = None
    if b.default_estimate and not b.blocks and all(map(_plain_dict, tools)):
        lead = _tools_key(tools)
        if lead is not None:
            run: Optional[_ToolRun] = b.fp._tool_runs.get(lead)
            if run is not None:
                b.take(run.blocks, run.digests, run.sizes, (("tools", 0),))
                b.chars, b.fixed, b.tool_names = run.chars, run.fixed, run.names
                return
    keys: Optional[tuple[Any, ...]] = None
    if lead is not None:
        keys = tuple(map(_tool_key, tools))
        if None in keys:
            keys = lead = None
    add = b.add
    for i, tool in enumerate(tools):
        if keys is not None:
            add("tools", ("tools", i), tool, ("tool", i), True, (("tool", i), keys[i]))
        else:
            add("tools", ("tools", i), tool, ("tool", i), type(tool) is dict or isinstance(tool, Mapping), None, _tool_key)
    if lead is not None:
        run = _ToolRun(tuple(b.blocks), tuple(b._digests), tuple(b._sizes), b.chars, b.fixed, _names_key(_tool_names(tools)))
        b.fp._tool_runs.put(lead, run)
        b.tool_names = run.names


def _tools_key(tools: Sequence[dict[str, Any]]) -> Optional[int]:
    """One key for a whole list of plain dict tools: each string field by its (cached) hash,
    the other values (the schemas) through a single ``marshal`` pass; ``None`` when a
    value cannot be marshalled.

    One pass over every schema, in ``marshal``'s current format (shared and repeated objects
    written once, ASCII strings copied as they are), costs about a third of one pass per
    tool. Its bytes depend on which objects are shared, never on anything but the values
    they hold: equal bytes mean equal values, so equal keys mean equal tools (unequal ones
    for equal tools only cost the per-tool path).
    """
    fields: list[Any] = []
    nested: list[Any] = []
    for tool in tools:
        fields.append(len(tool))
        for k, v in tool.items():
            if type(v) is str:
                fields.append((k, hash(v)))
            else:  # a 1-tuple, never equal to a string field's pair whatever the key
                fields.append((k,))
                nested.append(v)
    try:
        packed = _marshal(nested)
    except (ValueError, TypeError):
        return None
    return hash((*fields, hash(packed)))


def _plain_dict(tool: Any) -> bool:
    """A ``dict`` tool without its own ``cache_control``."""
    return type(tool) is dict and "cache_control" not in tool


def _tool_names(tools: Sequence[Any]) -> tuple[Any, ...]:
    return tuple([(t.get("name") or _get(t.get("function"), "name")) if type(t) is dict or isinstance(t, Mapping) else "?" for t in tools])


def _names_key(names: tuple[Any, ...]) -> tuple[int, int]:
    return (hash(names), len(names))  # hashes only: tool names are prompt text too


def _family(fp: Fingerprinter, api: str, tools: Sequence[Any], system: Sequence[int], names_key: Optional[tuple[int, int]] = None) -> bytes:
    """The request's family: stable under edits *inside* the system prompt (a timestamp) but
    not across different prompts: tool names, the number of system blocks and their rough
    sizes. ``names_key``: `_names_key` of the tools' names, when a tools run already knows it."""
    names: Optional[tuple[Any, ...]] = None
    if names_key is None:
        names = _tool_names(tools)
        names_key = _names_key(names)
    sizes = tuple([n // 512 for n in system])
    key = (api, *names_key, sizes)
    found: Optional[bytes] = fp._links.get(key)
    if found is None:
        if names is None:
            names = _tool_names(tools)
        found = fp.digest(api.encode(), "\x1f".join(map(str, names)).encode(), "\x1f".join(map(str, sizes)).encode(), size=8)
        fp._links.put(key, found)
    return found


def _context(fp: Fingerprinter, request: Mapping[str, Any]) -> bytes:
    choice, thinking = request.get("tool_choice"), request.get("thinking")
    if choice is None and thinking is None:
        return fp.link(b"context", b"")
    return fp.digest(canonical(choice).encode(), canonical(thinking).encode())


_MESSAGE_NAMES = tuple(f"message {k}" for k in range(1024))


def _message_name(m: int) -> str:
    """``"message m"`` (made once for the first 1,024 indices)."""
    return _MESSAGE_NAMES[m] if m < 1024 else f"message {m}"


class _Run(NamedTuple):
    """The leading string messages of a recent request and what `_messages` made of them.

    ``prints`` holds ``(hash of role, hash of content, length)`` of each — Python's own
    string hashes, as the memo keys — never text; the rest are the per-message results.
    """

    prints: tuple[tuple[int, int, int], ...]
    blocks: tuple[Block, ...]
    starts: tuple[tuple[str, int], ...]
    digests: tuple[bytes, ...]
    sizes: tuple[int, ...]
    totals: tuple[tuple[int, int], ...]
    """``(chars, fixed)`` running totals after each message."""
    segments: tuple[SegmentPrint, ...]


RUNS = 16
"""Recent message runs kept per `Fingerprinter` (one per distinct lead: tools and system)."""
_content_of = operator.itemgetter("content")
_role_of = operator.itemgetter("role")


def _leading_strings(values: list[Any]) -> int:
    """How many of ``values`` come before the first that is not a ``str`` (counted in C when all are)."""
    kinds = list(map(type, values))
    if kinds.count(str) == len(kinds):
        return len(kinds)
    return kinds.index(next(k for k in kinds if k is not str))


def _string_prints(items: Sequence[Any]) -> Optional[tuple[tuple[int, int, int], ...]]:
    """``(hash(role), hash(content), len(content))`` of the leading messages whose role and
    content are strings, computed in C (``map``); ``None`` when the messages are not dicts."""
    try:
        contents = list(map(_content_of, items))
        roles = list(map(_role_of, items))
    except (TypeError, KeyError):  # SDK models, a message without content: the general path
        return None
    n = _leading_strings(contents)
    n = _leading_strings(roles[:n])
    return tuple(zip(map(hash, roles[:n]), map(hash, contents[:n]), map(len, contents[:n])))


def _messages(b: _Builder, items: Sequence[Any]) -> None:
    """The blocks of Anthropic ``messages`` into ``b``.

    The leading messages whose role and string content print the same as those of a recent
    request with the same lead (tools and system) — an agent's history, few-shot examples —
    are taken from it whole, found by comparing the prints in C. After them, a message whose
    content is a string takes one flat memo key and, when seen before, no call at all; the
    running totals live in locals, written back to ``b`` around each `_Builder.add`.
    """
    add, memo, memo_new, default_estimate = b.add, b.memo, b.memo.new, b.default_estimate
    blocks, starts, digests, sizes = b.blocks, b._starts, b._digests, b._sizes
    chars, fixed = b.chars, b.fixed
    runs = b.fp._runs
    lead = (len(blocks), chars, fixed)
    lead_starts = len(starts)
    prints = _string_prints(items) if default_estimate else None
    start = 0
    totals: list[tuple[int, int]] = []
    run: Optional[_Run] = None
    if prints:
        run = runs.get(lead)
        if run is not None:
            start = common_prefix(run.prints, prints)
            if start:
                b.take(run.blocks[:start], run.digests[:start], run.sizes[:start], run.starts[:start])
                totals.extend(run.totals[:start])
                chars, fixed = totals[-1]
    plain = start  # messages so far that are one string block each
    for m in range(start, len(items)):
        message = items[m]
        if type(message) is not dict:
            message = message if isinstance(message, Mapping) else _dump(message)
        role = message.get("role")
        name = _MESSAGE_NAMES[m] if m < 1024 else f"message {m}"
        fixed += PER_MESSAGE_TOKENS
        content = message.get("content")
        if type(content) is str:
            flat = ("m", m, role, hash(content), len(content))
            info = memo_new.get(flat) or memo.get(flat)
            if info is not None and default_estimate:
                chars += info.chars
                fixed += info.fixed
                starts.append((name, len(blocks)))
                digests.append(info.digest)
                sizes.append(info.length)
                blocks.append(
                    _new_block(Block, (name, ("messages", m), info.digest, -(-chars // CHARS_PER_TOKEN) + fixed, None, info.markable, info.length))
                )
                b._name = name
            else:
                b.chars, b.fixed = chars, fixed
                add(name, ("messages", m), content, ("m", m, role), bool(content), flat)
                chars, fixed = b.chars, b.fixed
            if plain == m:
                plain += 1
                totals.append((chars, fixed))
        else:
            b.chars, b.fixed = chars, fixed
            for j, block in enumerate(_seq(content, "message content")):
                add(name, ("messages", m, j), block, ("m", m, role, j))
            chars, fixed = b.chars, b.fixed
    b.chars, b.fixed = chars, fixed
    if not prints:
        return
    reused = run.segments[:start] if run is not None else ()
    plain = min(plain, len(prints))
    if plain > start:
        first, end = lead[0], lead[0] + plain
        new = _new_block
        made = (*reused, *[
            new(SegmentPrint, (name, (digest,), i, (size,)))
            for (name, i), digest, size in zip(starts[lead_starts + start : lead_starts + plain], digests[first + start : end], sizes[first + start : end])
        ]) if start else tuple([
            new(SegmentPrint, (name, (digest,), i, (size,)))
            for (name, i), digest, size in zip(starts[lead_starts : lead_starts + plain], digests[first:end], sizes[first:end])
        ])  # fmt: skip
        runs.put(lead, _Run(
            prints[:plain], tuple(blocks[first:end]), tuple(starts[lead_starts : lead_starts + plain]),
            tuple(digests[first:end]), tuple(sizes[first:end]), tuple(totals[:plain]), made,
        ))  # fmt: skip
        b._made = (lead_starts, made)
    elif start:
        b._made = (lead_starts, reused)


def parse(api: str, request: Mapping[str, Any], fp: Fingerprinter, estimate: Estimator = block_size) -> Shape:
    """Take ``request`` (keyword arguments of ``messages.create`` / ``chat.completions.create`` /
    ``responses.create``) apart into a `Shape`; raises `Unsupported` on shapes it does not know."""
    model = request.get("model")
    if not isinstance(model, str):
        raise Unsupported("model is not a string")
    b = _Builder(fp, estimate)
    add = b.add
    tools = request.get("tools")
    tools = _seq(tools, "tools") if isinstance(tools, (list, tuple)) and tools else ()
    if tools:
        _tools(b, tools)
    system_sizes: list[int] = []
    context = b""
    key = "messages"
    single = False
    if api == "messages":
        system = request.get("system")
        if isinstance(system, str) and system:
            system_sizes.append(add("system", ("system",), system, ("system", 0)).length)
        elif isinstance(system, (list, tuple)) and system:
            for j, block in enumerate(system):
                system_sizes.append(add("system", ("system", j), block, ("system", j)).length)
        items = _seq(request.get("messages"), "messages")
        context = _context(fp, request)
    else:
        if api == "responses":
            instructions = request.get("instructions")
            if isinstance(instructions, str) and instructions:
                system_sizes.append(add("system", ("instructions",), instructions, ("instructions",), False).length)
            raw = request.get("input")
            key = "input"
            single = isinstance(raw, str)
            items = [raw] if single else _seq(raw, "input")
        else:
            items = _seq(request.get("messages"), "messages")
    if api == "messages":
        _messages(b, items)
    else:
        leading = True
        for m, message in enumerate(items):
            is_dict = type(message) is dict
            if not (is_dict or isinstance(message, (str, Mapping)) or hasattr(message, "model_dump")):
                raise Unsupported(f"input item of type {type(message).__name__}")
            role = message.get("role") if is_dict else _get(message, "role")
            leading = leading and role in _SYSTEM_ROLES
            b.fixed += PER_MESSAGE_TOKENS
            info = add("system" if leading else _message_name(m), (key,) if single else (key, m), message, ("m", m, role), False)
            if leading:
                system_sizes.append(info.length)
    top = request.get("cache_control") if api == "messages" else None
    top_ttl = marker_ttl({"cache_control": top}) if isinstance(top, Mapping) else None
    segments = (SegmentPrint("model", (fp.link(b"model", model.encode()),), -1, (len(model),)), *b.segments())
    return frozen(
        Shape, api=api, model=model, blocks=tuple(b.blocks), segments=segments,
        family=_family(fp, api, tools, system_sizes, b.tool_names), prompt_tokens=-(-b.chars // CHARS_PER_TOKEN) + b.fixed,
        messages=len(items), top_level=top_ttl, context=context, markers=tuple(b.markers), _fp=fp,
        _digests=tuple(b._digests),
    )  # fmt: skip


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

    def text(i: int) -> str:
        return canonical(_dump(resolve(api, request, shape.blocks[i].path)))

    return text


def resolve(api: str, request: Mapping[str, Any], path: tuple[Any, ...]) -> Any:
    """The raw block of ``request`` at a `Block.path` (a string, a mapping or an SDK model)."""
    value: Any = request.get(path[0])
    if len(path) == 1 or path[0] not in ("messages", "input"):
        return value if len(path) == 1 else value[path[1]]
    item = value[path[1]]
    if api != "messages":
        return item
    content = _get(item, "content")
    return content if len(path) == 2 else content[path[2]]
