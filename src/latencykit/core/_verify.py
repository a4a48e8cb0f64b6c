"""Cache verification: what a call should read from the prompt cache, the verdict, and why it missed.

`expect_anthropic` / `expect_openai` replay the provider's rules against the local
`Ledger` *before* the call (markers, the 20-block lookback, minimum lengths, TTLs; OpenAI's
automatic 1024-token / 128-token-increment rule) and say how many tokens should be read
and, if fewer than the request could have read, why. `judge` compares that with the
tokens the server reports and gives the verdict and the miss reason.

Verdicts: ``hit`` (read what was expected, and at least the provider's cacheable minimum), ``partial`` (read less, or a known change cut
the prefix short), ``write`` (nothing to read yet, written now), ``expected_miss``
(nothing cacheable), ``unexpected_miss`` (a read was expected and none came),
``not_reported`` (the server reported no cache usage).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Optional

from ._cache_facts import LOOKBACK_BLOCKS, OPENAI_INCREMENT, OPENAI_MIN_TOKENS
from ._learn import Change
from ._ledger import EntryState
from ._segments import Shape

__all__ = [
    "Expectation", "expect_anthropic", "expect_openai", "judge", "VERDICTS", "MISS_REASONS",
    "HIT", "PARTIAL", "WRITE", "EXPECTED_MISS", "UNEXPECTED_MISS", "NOT_REPORTED",
    "PREFIX_CHANGED", "TTL_EXPIRED", "BELOW_MINIMUM", "BEYOND_LOOKBACK", "MARKER_LIMIT",
    "NOT_CHANGED_LOCALLY", "NO_BREAKPOINT", "OUTSIDE_WINDOW", "HIT_TOLERANCE",
]  # fmt: skip

HIT = "hit"
PARTIAL = "partial"
WRITE = "write"
EXPECTED_MISS = "expected_miss"
UNEXPECTED_MISS = "unexpected_miss"
NOT_REPORTED = "not_reported"
VERDICTS = (HIT, PARTIAL, WRITE, EXPECTED_MISS, UNEXPECTED_MISS, NOT_REPORTED)
"""Every ``CallRecord.cache_verdict`` value (see docs/caching.md)."""

PREFIX_CHANGED = "prefix_changed"
"""A segment before the cached boundary differs from the family's previous call (see ``extra``)."""
TTL_EXPIRED = "ttl_expired"
"""The prefix was cached, but longer ago than its TTL."""
BELOW_MINIMUM = "below_minimum"
"""No marked prefix reaches the model's minimum cacheable length."""
BEYOND_LOOKBACK = "beyond_lookback"
"""A cached prefix exists, more than 20 blocks before the nearest breakpoint."""
MARKER_LIMIT = "marker_limit"
"""The 4-marker budget (caller's markers included) left a static part unmarked."""
NOT_CHANGED_LOCALLY = "not_changed_locally"
"""Nothing changed here: the entry was evicted, or the request reached another replica."""
NO_BREAKPOINT = "no_breakpoint"
"""The request carried no breakpoint (caching off, nothing markable)."""
OUTSIDE_WINDOW = "outside_window"
"""OpenAI (GPT-5.6+): a cached prefix exists, but not among the latest 80 breakpoints matching considers."""
MISS_REASONS = (
    PREFIX_CHANGED, TTL_EXPIRED, BELOW_MINIMUM, BEYOND_LOOKBACK, MARKER_LIMIT, NOT_CHANGED_LOCALLY, NO_BREAKPOINT, OUTSIDE_WINDOW,
)
"""Every ``CallRecord.cache_miss_reason`` value (see docs/caching.md)."""

HIT_TOLERANCE = 0.8
"""A read of at least this share of the expected tokens is a hit (local estimates are ±20%)."""


class Expectation(NamedTuple):
    """The ledger's prediction for one call (a named tuple: made before every call)."""

    expected_tokens: int
    read_block: int
    """Index of the block whose prefix should be read (-1: none)."""
    reason: Optional[str] = None
    """Why less than the request's marked prefix will be read, if known."""
    change: Optional[Change] = None
    eligible: bool = False
    """Something in the request can be written to the cache."""
    min_tokens: int = 0
    """The provider's cacheable minimum: a smaller read (a few reused template tokens) is no hit."""


def _common_reason(
    shape: Shape,
    states: Sequence[Optional[EntryState]],
    read: int,
    upto: int,
    change: Optional[Change],
    previous_marked: int,
) -> tuple[Optional[str], Optional[Change]]:
    far = -1
    for q in range(min(upto, len(states) - 1), -1, -1):  # from the end: the furthest entry is usually near it
        if states[q] is not None:
            far = q
            break
    if far > read:
        return (TTL_EXPIRED if states[far] == "expired" else BEYOND_LOOKBACK), None
    # A different newest message is the dynamic tail of the request, not a change of its prefix;
    # nor is a change whose new value is cached itself (one of a few system prompts in turn).
    newest = f"message {shape.messages - 1}"
    if (
        change is not None and change.segment != newest and 0 <= previous_marked and change.block <= previous_marked
        and (read < change.block or change.block < 0)
    ):  # fmt: skip
        return PREFIX_CHANGED, change
    return None, None


def expect_anthropic(
    shape: Shape,
    states: Sequence[Optional[EntryState]],
    markers: Sequence[tuple[int, str]],
    min_tokens: int,
    *,
    change: Optional[Change] = None,
    previous_marked: int = -1,
    limited: bool = False,
    lookback: int = LOOKBACK_BLOCKS,
) -> Expectation:
    """Replay Anthropic's rules: each marker looks back ``lookback`` blocks for a live entry."""
    blocks = shape.blocks
    read = -1
    for p, _ in markers:
        for q in range(p, max(p - lookback, -1), -1):
            if states[q] == "live":
                read = max(read, q)
                break
    expected = blocks[read].prefix_tokens if read >= 0 else 0
    marked = [p for p, _ in markers]
    eligible = bool(marked) and max([blocks[p].prefix_tokens for p in marked]) >= min_tokens
    last = max(marked, default=-1)
    reason, why = _common_reason(shape, states, read, last, change, previous_marked)
    if reason is None:
        if limited:
            reason = MARKER_LIMIT
        elif not markers:
            reason = BELOW_MINIMUM if shape.prompt_tokens < min_tokens else NO_BREAKPOINT
        elif not eligible:
            reason = BELOW_MINIMUM
    return Expectation(expected, read, reason, why, eligible, min_tokens)


def expect_openai(
    shape: Shape,
    states: Sequence[Optional[EntryState]],
    *,
    change: Optional[Change] = None,
    previous_marked: int = -1,
) -> Expectation:
    """Replay OpenAI's automatic caching: longest live prefix, ≥ 1024 tokens, 128-token steps."""
    blocks = shape.blocks
    read = max((q for q, s in enumerate(states) if s == "live"), default=-1)
    expected = 0
    if read >= 0:
        tokens = min(blocks[read].prefix_tokens, shape.prompt_tokens)
        if tokens >= OPENAI_MIN_TOKENS:
            expected = OPENAI_MIN_TOKENS + (tokens - OPENAI_MIN_TOKENS) // OPENAI_INCREMENT * OPENAI_INCREMENT
    eligible = shape.prompt_tokens >= OPENAI_MIN_TOKENS
    reason, why = _common_reason(shape, states, read, len(states) - 1, change, previous_marked)
    if reason is None and not eligible:
        reason = BELOW_MINIMUM
    return Expectation(expected, read, reason, why, eligible, OPENAI_MIN_TOKENS)


def judge(exp: Expectation, read: Optional[int], write: Optional[int], implicit_write: bool = False) -> tuple[str, Optional[str]]:
    """``(verdict, miss reason)`` for a call that read ``read`` and wrote ``write`` tokens.

    A read counts only when it reaches the provider's cacheable minimum or most of the
    expected prefix: llama.cpp reuses the longest common token prefix, so even a brand-new
    prompt reports 1–15 cached template tokens, and a cold 2,000-token prefill is no hit.
    """
    if read is None:
        return NOT_REPORTED, None
    if 0 < read < exp.min_tokens and not (exp.expected_tokens and read >= HIT_TOLERANCE * exp.expected_tokens):
        read = 0
    if read > 0:
        if exp.expected_tokens and read < HIT_TOLERANCE * exp.expected_tokens:
            return PARTIAL, exp.reason or NOT_CHANGED_LOCALLY
        if exp.reason in (PREFIX_CHANGED, TTL_EXPIRED, BEYOND_LOOKBACK, MARKER_LIMIT, OUTSIDE_WINDOW):
            return PARTIAL, exp.reason
        return HIT, None
    if exp.expected_tokens > 0:
        return UNEXPECTED_MISS, NOT_CHANGED_LOCALLY
    if (write or 0) > 0 or (implicit_write and exp.eligible):
        return WRITE, exp.reason
    if exp.reason is None and exp.eligible:
        # Both counters 0 although a marked prefix looked long enough: the server's minimum is higher.
        return EXPECTED_MISS, BELOW_MINIMUM
    return EXPECTED_MISS, exp.reason
