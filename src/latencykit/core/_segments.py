"""A request as the prompt cache sees it: ordered blocks, segments and keyed fingerprints.

The cache is an exact prefix match over ``tools → system → messages`` (Anthropic) or the
serialized prompt (OpenAI). `parse` turns a request into `Block`s in that order, each with
its estimated cumulative token count and a *keyed* digest (BLAKE2b with a secret, so
fingerprints never reveal text and differ between deployments unless they share the
secret). Segments (``tools``, ``system``, ``message k``) also keep digests of 16-character
chunks, which is how a change is located to within 16 characters without storing text.

Odd shapes (a generator of messages, a non-dict block) raise `Unsupported`; callers send
such requests as given.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ._tokens import CHARS_PER_TOKEN, PER_MESSAGE_TOKENS, PER_REQUEST_TOKENS, block_size, canonical

__all__ = [
    "Block", "Fingerprinter", "SegmentPrint", "Shape", "Unsupported", "parse", "CHUNK_CHARS", "marker_ttl", "is_markable",
]  # fmt: skip

CHUNK_CHARS = 16
MAX_CHUNKS = 8192  # locate changes in the first 128k characters of a segment
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})
_SYSTEM_ROLES = frozenset({"system", "developer"})

Estimator = Callable[[Any], "tuple[int, int]"]


class Unsupported(Exception):
    """The request has a shape the planner does not take apart (it is sent as given)."""


class Fingerprinter:
    """Keyed BLAKE2b digests; the secret defaults to ``$LATENCYKIT_CACHE_SECRET`` or a per-process random key."""

    def __init__(self, secret: Optional[bytes] = None) -> None:
        if secret is None:
            env = os.environ.get("LATENCYKIT_CACHE_SECRET")
            secret = env.encode() if env else os.urandom(32)
        if not isinstance(secret, (bytes, bytearray)) or not secret:
            raise ValueError(f"secret must be non-empty bytes, got {secret!r}")
        self._key = hashlib.blake2b(bytes(secret), digest_size=32).digest()

    def digest(self, *parts: bytes, size: int = 16) -> bytes:
        """Keyed digest of ``parts`` (length-prefixed, so boundaries are unambiguous)."""
        h = hashlib.blake2b(key=self._key, digest_size=size)
        for part in parts:
            h.update(len(part).to_bytes(8, "little"))
            h.update(part)
        return h.digest()

    def chunks(self, text: str) -> tuple[bytes, ...]:
        """8-byte digests of consecutive `CHUNK_CHARS`-character pieces of ``text``."""
        limit = min(len(text), CHUNK_CHARS * MAX_CHUNKS)
        return tuple(self.digest(text[i : i + CHUNK_CHARS].encode(), size=8) for i in range(0, limit, CHUNK_CHARS))


@dataclass(frozen=True)
class Block:
    """One cacheable unit (a tool, a system block, a message content block) in prefix order."""

    segment: str
    """``"tools"``, ``"system"`` or ``"message k"``."""
    path: tuple[Any, ...]
    """Where it lives: ``("tools", i)``, ``("system",)``, ``("system", j)``, ``("messages", m)``, ``("messages", m, b)``."""
    digest: bytes
    """Keyed digest of this block alone (role and position included, ``cache_control`` excluded)."""
    prefix_tokens: int
    """Estimated tokens of the whole prompt up to and including this block."""
    marker: Optional[str] = None
    """TTL of the caller's ``cache_control`` on this block (``"5m"`` / ``"1h"``), ``None`` if unmarked."""
    markable: bool = True
    """Whether a ``cache_control`` may be put on it (not thinking blocks, not empty text)."""


@dataclass(frozen=True)
class SegmentPrint:
    """Keyed fingerprints of one segment: the whole, and its 16-character chunks."""

    name: str
    digest: bytes
    chunks: tuple[bytes, ...]
    length: int
    first_block: int
    """Index in `Shape.blocks` of its first block (``-1`` for ``model``)."""
    sizes: tuple[int, ...] = ()
    """Canonical text length of each of its blocks (to find the block holding an offset)."""


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
    _fp: Fingerprinter = field(default_factory=lambda: Fingerprinter(b"-"), repr=False, compare=False)

    def prefixes(self, salt: str = "") -> tuple[bytes, ...]:
        """Cumulative fingerprint of the prefix ending at each block (``salt``: e.g. a ``prompt_cache_key``)."""
        state = self._fp.digest(self.api.encode(), self.model.encode(), salt.encode())
        out = []
        first_message = True
        for block in self.blocks:
            if block.segment.startswith("message") and first_message:
                state = self._fp.digest(state, self.context)
                first_message = False
            state = self._fp.digest(state, block.digest)
            out.append(state)
        return tuple(out)

    def segment(self, name: str) -> Optional[SegmentPrint]:
        """The print of segment ``name``, if the request has it."""
        return next((s for s in self.segments if s.name == name), None)

    @property
    def markers(self) -> tuple[tuple[int, str], ...]:
        """The caller's ``(block index, ttl)`` markers, top-level one excluded."""
        return tuple((i, b.marker) for i, b in enumerate(self.blocks) if b.marker is not None)


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


def marker_ttl(block: Any) -> Optional[str]:
    """TTL of a block's ``cache_control`` (``"5m"`` / ``"1h"``), ``None`` when it has none."""
    cc = block.get("cache_control") if isinstance(block, Mapping) else None
    if cc is None:
        return None
    ttl = cc.get("ttl") if isinstance(cc, Mapping) else None
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


class _Builder:
    def __init__(self, fp: Fingerprinter, estimate: Estimator) -> None:
        self.fp = fp
        self.estimate = estimate
        self.blocks: list[Block] = []
        self.segments: list[SegmentPrint] = []
        self.chars = 0
        self.fixed = PER_REQUEST_TOKENS
        self._seg: Optional[tuple[str, int, list[str]]] = None

    def open(self, name: str) -> None:
        self.close()
        self._seg = (name, len(self.blocks), [])

    def close(self) -> None:
        if self._seg is None:
            return
        name, first, texts = self._seg
        text = "".join(texts)
        self.segments.append(
            SegmentPrint(
                name, self.fp.digest(text.encode()), self.fp.chunks(text), len(text), first, tuple(map(len, texts))
            )
        )
        self._seg = None

    def add(self, name: str, path: tuple[Any, ...], raw: Any, tag: str, markable: Optional[bool] = None) -> None:
        value = _dump(raw)
        text = canonical(value)
        chars, fixed = self.estimate(value)
        self.chars += chars
        self.fixed += fixed
        tokens = math.ceil(self.chars / CHARS_PER_TOKEN) + self.fixed
        assert self._seg is not None
        self._seg[2].append(text)
        digest = self.fp.digest(tag.encode(), text.encode())
        ok = is_markable(value) if markable is None else markable
        self.blocks.append(Block(name, path, digest, tokens, marker_ttl(value), ok))


def _family(fp: Fingerprinter, api: str, tools: Sequence[Any], system: Sequence[str]) -> bytes:
    # Stable under edits *inside* the system prompt (a timestamp) but not across different
    # prompts: tool names, the number of system blocks and their rough sizes.
    names = [str(t.get("name") or (t.get("function") or {}).get("name")) if isinstance(t, Mapping) else "?" for t in tools]
    sizes = [str(len(s) // 512) for s in system]
    return fp.digest(api.encode(), "\x1f".join(names).encode(), "\x1f".join(sizes).encode(), size=8)


def parse(api: str, request: Mapping[str, Any], fp: Fingerprinter, estimate: Estimator = block_size) -> Shape:
    """Take ``request`` (keyword arguments of ``messages.create`` / ``chat.completions.create`` /
    ``responses.create``) apart into a `Shape`; raises `Unsupported` on shapes it does not know."""
    model = request.get("model")
    if not isinstance(model, str):
        raise Unsupported("model is not a string")
    b = _Builder(fp, estimate)
    tools = request.get("tools")
    tools = _seq(tools, "tools") if isinstance(tools, (list, tuple)) and tools else ()
    if tools:
        b.open("tools")
        for i, tool in enumerate(tools):
            b.add("tools", ("tools", i), tool, f"tool:{i}", markable=isinstance(tool, Mapping))
    system_texts: list[str] = []
    context = b""
    if api == "messages":
        system = request.get("system")
        if isinstance(system, str) and system:
            b.open("system")
            b.add("system", ("system",), system, "system:0")
            system_texts.append(system)
        elif isinstance(system, (list, tuple)) and system:
            b.open("system")
            for j, block in enumerate(system):
                b.add("system", ("system", j), block, f"system:{j}")
                system_texts.append(canonical(_dump(block)))
        items = _seq(request.get("messages"), "messages")
        context = fp.digest(canonical(request.get("tool_choice")).encode(), canonical(request.get("thinking")).encode())
    else:
        if api == "responses":
            instructions = request.get("instructions")
            if isinstance(instructions, str) and instructions:
                b.open("system")
                b.add("system", ("instructions",), instructions, "instructions", markable=False)
                system_texts.append(instructions)
            raw = request.get("input")
            items = [raw] if isinstance(raw, str) else _seq(raw, "input")
        else:
            items = _seq(request.get("messages"), "messages")
    leading = True
    for m, message in enumerate(items):
        message = _dump(message)
        role = message.get("role") if isinstance(message, Mapping) else None
        is_system = api != "messages" and leading and role in _SYSTEM_ROLES
        leading = leading and is_system
        name = "system" if is_system else f"message {m}"
        if is_system:
            if b._seg is None or b._seg[0] != "system":
                b.open("system")
            system_texts.append(canonical(message))
        else:
            b.open(name)
        b.fixed += PER_MESSAGE_TOKENS
        content = message.get("content") if isinstance(message, Mapping) and api == "messages" else None
        if api != "messages" or isinstance(content, str):
            b.add(name, ("messages", m), message if api != "messages" else content, f"m{m}:{role}", bool(content) and api == "messages")
            continue
        for j, block in enumerate(_seq(content, "message content")):
            b.add(name, ("messages", m, j), block, f"m{m}:{role}:{j}")
    b.close()
    top = request.get("cache_control") if api == "messages" else None
    top_ttl = marker_ttl({"cache_control": top}) if isinstance(top, Mapping) else None
    segments = (SegmentPrint("model", fp.digest(model.encode()), (), len(model), -1), *b.segments)
    return Shape(
        api=api, model=model, blocks=tuple(b.blocks), segments=segments,
        family=_family(fp, api, tools, system_texts), prompt_tokens=math.ceil(b.chars / CHARS_PER_TOKEN) + b.fixed,
        messages=len(items), top_level=top_ttl, context=context, _fp=fp,
    )  # fmt: skip
