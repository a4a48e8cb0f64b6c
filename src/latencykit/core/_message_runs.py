"""The messages of an Anthropic request: string messages by one flat key, shared histories taken whole.

The leading string messages a request shares with a recent one of the same lead (an
agent's history) are not even looked up one by one: their ``(role, content)`` hashes are
compared in C and their blocks and segments taken whole (`Run`).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Optional

from ._blocks import Block, SegmentPrint, common_prefix, dump, new_tuple, seq
from ._builder import Builder
from ._tokens import CHARS_PER_TOKEN, PER_MESSAGE_TOKENS

__all__ = ["Run", "add_messages", "message_name"]

_MESSAGE_NAMES = tuple(f"message {k}" for k in range(1024))


def message_name(m: int) -> str:
    """``"message m"`` (made once for the first 1,024 indices)."""
    return _MESSAGE_NAMES[m] if m < 1024 else f"message {m}"


class Run(NamedTuple):
    """The leading string messages of a recent request and what `add_messages` made of them.

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


def add_messages(b: Builder, items: Sequence[Any]) -> None:
    """The blocks of Anthropic ``messages`` into ``b``.

    The leading messages whose role and string content print the same as those of a recent
    request with the same lead (tools and system) — an agent's history, few-shot examples —
    are taken from it whole, found by comparing the prints in C. After them, a message whose
    content is a string takes one flat memo key and, when seen before, no call at all; the
    running totals live in locals, written back to ``b`` around each `Builder.add`.
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
    run: Optional[Run] = None
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
            message = message if isinstance(message, Mapping) else dump(message)
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
                    new_tuple(Block, (name, ("messages", m), info.digest, -(-chars // CHARS_PER_TOKEN) + fixed, None, info.markable, info.length))
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
            for j, block in enumerate(seq(content, "message content")):  # block 0 tagged as a string content: alike when they render alike
                add(name, ("messages", m, j), block, ("m", m, role, j) if j else ("m", m, role))
            chars, fixed = b.chars, b.fixed
    b.chars, b.fixed = chars, fixed
    if not prints:
        return
    reused = run.segments[:start] if run is not None else ()
    plain = min(plain, len(prints))
    if plain > start:
        first, end = lead[0], lead[0] + plain
        new = new_tuple
        made = (*reused, *[
            new(SegmentPrint, (name, (digest,), i, (size,)))
            for (name, i), digest, size in zip(starts[lead_starts + start : lead_starts + plain], digests[first + start : end], sizes[first + start : end])
        ]) if start else tuple([
            new(SegmentPrint, (name, (digest,), i, (size,)))
            for (name, i), digest, size in zip(starts[lead_starts : lead_starts + plain], digests[first:end], sizes[first:end])
        ])  # fmt: skip
        runs.put(lead, Run(
            prints[:plain], tuple(blocks[first:end]), tuple(starts[lead_starts : lead_starts + plain]),
            tuple(digests[first:end]), tuple(sizes[first:end]), tuple(totals[:plain]), made,
        ))  # fmt: skip
        b._made = (lead_starts, made)
    elif start:
        b._made = (lead_starts, reused)

