"""What an OpenAI call with breakpoints (GPT-5.6 and later) should read, and why it read less.

`expect_breakpoints` replays OpenAI's rules against the local `Ledger` before the call:
entries exist only where an earlier request *wrote a breakpoint* (the implicit one at the end
of its prompt, its latest explicit ones), each for its TTL (``30m`` / ``12h``); matching
looks back from this request's breakpoints without a content-block limit, over the latest
80 breakpoints of the conversation — this request's own and the earlier requests' ones it
shares (the entries on its prefix); the read is the furthest live one, exact to the token
(no 128-token rounding). A prefix changed before the previous call's furthest explicit
breakpoint is `PREFIX_CHANGED` (the newest message included: new documents before the same
question are a change); a live entry outside the window is `OUTSIDE_WINDOW`; a request
without any explicit breakpoint, where only the implicit one at its end was written, misses
for `NO_BREAKPOINT` (not eviction).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from typing import Optional

from ._cache_facts import OPENAI_BREAKPOINT_WINDOW, OPENAI_MIN_TOKENS
from ._learn import Change
from ._ledger import EntryState
from ._openai_breakpoints import BreakpointPlan
from ._segments import Shape
from ._verify import BELOW_MINIMUM, MARKER_LIMIT, NO_BREAKPOINT, OUTSIDE_WINDOW, PREFIX_CHANGED, TTL_EXPIRED, Expectation

__all__ = ["expect_breakpoints", "first_changed_block"]


def first_changed_block(change: Change) -> int:
    """Index of the first block that differs (``-1``: the model changed, so every block does)."""
    return -1 if change.block < 0 else change.block + change.block_in_segment


def expect_breakpoints(
    shape: Shape,
    states: Sequence[Optional[EntryState]],
    plan: BreakpointPlan,
    *,
    change: Optional[Change] = None,
    previous_marked: int = -1,
    window: int = OPENAI_BREAKPOINT_WINDOW,
    min_tokens: int = OPENAI_MIN_TOKENS,
) -> Expectation:
    """Replay OpenAI's breakpoint rules; ``previous_marked``: the family's previous furthest explicit breakpoint."""
    blocks = shape.blocks
    if shape.prompt_tokens < min_tokens:
        return Expectation(0, -1, BELOW_MINIMUM, None, False, min_tokens)
    if not plan.breakpoints:  # explicit mode without a breakpoint: nothing is cached at all
        return Expectation(0, -1, NO_BREAKPOINT, None, False, min_tokens)
    last = plan.breakpoints[-1]
    known = list(compress(range(last + 1), [s is not None for s in states[: last + 1]]))
    considered = sorted({*known, *plan.breakpoints})[-window:]
    read = max((q for q in considered if states[q] == "live"), default=-1)
    expected = blocks[read].prefix_tokens if read >= 0 else 0
    eligible = any(blocks[p].prefix_tokens >= min_tokens for p, _ in plan.written)
    reason: Optional[str] = None
    why: Optional[Change] = None
    live = [q for q in known if states[q] == "live"]
    if live and live[-1] > read:
        reason = OUTSIDE_WINDOW
    elif known and known[-1] > read and states[known[-1]] == "expired":
        reason = TTL_EXPIRED
    elif change is not None and previous_marked >= 0:
        first = first_changed_block(change)
        if first <= previous_marked and (first < 0 or read < first):
            reason, why = PREFIX_CHANGED, change
    if reason is None:
        later = any(s == "live" for s in states[last + 1 :])
        if plan.limited:
            reason = MARKER_LIMIT
        elif plan.explicit == 0 or later:
            reason = NO_BREAKPOINT
        elif not eligible:
            reason = BELOW_MINIMUM
    return Expectation(expected, read, reason, why, eligible, min_tokens)
