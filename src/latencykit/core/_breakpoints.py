"""Where to put Anthropic ``cache_control`` breakpoints: the strategy, the budget, the edit.

A strategy is any callable ``(PlanContext) -> Sequence[int]``: the block indices it would
like to mark, most valuable first. `BreakpointPlanner` is the default one. `plan_markers`
enforces the API's rules whatever the strategy says — at most 4 markers counting the
caller's and a top-level ``cache_control``, no duplicates, only markable blocks, TTLs in
order — and `apply_markers` writes them into a *copy* of the request, copying only the
containers on the path to a changed block.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Optional

from ._cache_facts import LOOKBACK_BLOCKS, MAX_MARKERS
from ._segments import SegmentPrint, Shape

__all__ = ["BreakpointPlanner", "MarkerPlan", "PathCopier", "PlanContext", "Strategy", "apply_markers", "plan_markers"]


@dataclass(frozen=True)
class PlanContext:
    """What a strategy may look at: the request's shape and what the library has learned."""

    shape: Shape
    min_tokens: int
    """Minimum cacheable prefix for this model."""
    dynamic: Mapping[str, int] = field(default_factory=dict)
    """Segments learned to change on every call → index of their first changing block within the segment."""
    written: frozenset[int] = frozenset()
    """Block indices whose prefix the ledger believes is cached now."""
    conversation: bool = False
    """The family's calls extend earlier ones (a conversation, many users' interleaved included): the newest
    message is marked even on a conversation's first turn, which the second turn reads."""


Strategy = Callable[[PlanContext], Sequence[int]]


class MarkerPlan(NamedTuple):
    """The markers a request will carry, after the budget was applied (a named tuple)."""

    added: tuple[tuple[int, Optional[str]], ...]
    """``(block index, ttl or None for the default 5m)`` placed by latencykit."""
    markers: tuple[tuple[int, str], ...]
    """All markers the server will see: caller's, top-level (on the last markable block) and ours."""
    limited: bool = False
    """The strategy wanted more markers than the budget allowed."""


class BreakpointPlanner:
    """Default strategy: end of tools, end of the stable system prompt, end of the stable messages.

    Segments learned to be dynamic stop the walk: no marker is put after the first dynamic
    block. In the messages, the learned boundary (`core._learn`) puts a marker on the last
    block before it: the last stable leading block of the newest message (retrieved
    documents before a varying question), or the end of the last stable message (few-shot
    examples before a varying question). With no boundary learned — a conversation that
    grows call by call, or a family's first call — a multi-turn request's newest message is
    marked so the next turn reads the whole history; a single-turn request's user message
    gets none, unless its family's calls have been seen to extend earlier ones (`PlanContext.conversation`:
    then it is a conversation's first turn, which the second reads). When the message marker is more than ``lookback`` blocks past the last
    cached prefix, one extra marker goes ``lookback - 1`` blocks after it, so the 20-block
    lookback finds it. Prefixes shorter than the model's minimum get no marker.
    """

    def __init__(self, *, lookback: int = LOOKBACK_BLOCKS) -> None:
        self.lookback = lookback

    def __call__(self, ctx: PlanContext) -> list[int]:
        shape, dyn = ctx.shape, ctx.dynamic
        blocks = shape.blocks
        if "tools" in dyn:
            return []
        wanted: list[int] = []
        tools, system = _span(shape.segment("tools")), _span(shape.segment("system"))
        if tools is not None:
            wanted.append(tools[1] - 1)
        if system is not None:
            mark = _last_markable(shape, range(system[0], min(system[1], system[0] + dyn.get("system", len(blocks)))))
            if "system" in dyn:  # this value of a changing system prompt is cached: marking it is a read
                whole = _last_markable(shape, range(*system))
                mark = whole if whole is not None and whole in ctx.written else mark
            if mark is not None:
                wanted.append(mark)
        if "system" not in dyn:
            message = self._message_marker(shape, dyn, ctx.conversation)
            if message is not None:
                wanted.append(message)
                cached = max(filter(message.__gt__, ctx.written), default=None)  # in C: written holds every live prefix
                if cached is not None and message - cached >= self.lookback and shape.api == "messages":  # OpenAI: no look-back limit
                    step = _last_markable(shape, range(cached + 1, cached + self.lookback))
                    if step is not None:
                        wanted.append(step)
        keep = [i for i in wanted if blocks[i].prefix_tokens >= ctx.min_tokens]
        # Furthest first: it reads the most; the lookback step right after the message marker.
        keep.sort(reverse=True)
        return keep

    @staticmethod
    def _message_marker(shape: Shape, dyn: Mapping[str, int], conversation: bool = False) -> Optional[int]:
        messages = shape.message_segments
        if not messages:
            return None
        first = messages[0].first_block
        bounds = [
            min(span[0] + dyn[name], span[1])
            for name in dyn
            if name.startswith("message") and (span := _span(shape.segment(name))) is not None
        ]
        if bounds:
            return _last_markable(shape, range(first, min(bounds)))
        last = messages[-1]  # messages come last, in order: the newest one's segment, if it has blocks
        newest = _span(last) if last.name == f"message {shape.messages - 1}" else None
        if (shape.messages > 1 or conversation) and newest is not None:
            return _last_markable(shape, range(*newest))
        return None

    def __repr__(self) -> str:
        return f"BreakpointPlanner(lookback={self.lookback})"


def _span(seg: Optional[SegmentPrint]) -> Optional[tuple[int, int]]:
    """``(first block, end)`` of a segment in `Shape.blocks`, ``None`` when absent."""
    return None if seg is None else (seg.first_block, seg.first_block + len(seg.blocks))


def _last_markable(shape: Shape, indices: Sequence[int]) -> Optional[int]:
    for i in reversed(indices):
        if 0 <= i < len(shape.blocks) and shape.blocks[i].markable:
            return i
    return None


def plan_markers(shape: Shape, wanted: Sequence[int], ttl: Optional[str] = None) -> MarkerPlan:
    """Fit the strategy's wishes into the marker budget; never more than 4 in all.

    ``ttl="1h"``: the markers latencykit adds are ``1h`` wherever no ``5m`` marker comes before them.
    """
    caller = dict(shape.markers)
    top: Optional[int] = None
    if shape.top_level is not None:
        top = _last_markable(shape, range(len(shape.blocks)))
    taken = len(caller) + (1 if shape.top_level is not None else 0)
    budget = max(MAX_MARKERS - taken, 0)
    chosen: list[int] = []
    limited = False
    for i in wanted:
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(shape.blocks):
            continue
        if i in caller or i == top or i in chosen or not shape.blocks[i].markable:
            continue
        if len(chosen) >= budget:
            limited = True
            continue
        chosen.append(i)
    later_1h = [i for i, ttl in caller.items() if ttl == "1h"]
    if shape.top_level == "1h" and top is not None:
        later_1h.append(top)
    chosen.sort()
    if later_1h:  # a 5m marker may not come after a 1h one: ours before a later 1h marker are 1h too
        last_1h = max(later_1h)
        added = tuple([(i, "1h" if i < last_1h else None) for i in chosen])
    else:
        added = tuple([(i, None) for i in chosen])
    if ttl == "1h":
        fives = [i for i, t in caller.items() if t == "5m"] + ([top] if top is not None and shape.top_level == "5m" else [])
        first_5m = min(fives, default=len(shape.blocks))
        added = tuple([(i, "1h" if i < first_5m else t) for i, t in added])
    every: dict[int, str] = dict(caller)
    if top is not None and shape.top_level is not None:
        every.setdefault(top, shape.top_level)
    for i, ttl in added:
        every[i] = ttl or "5m"
    return MarkerPlan(added, tuple(sorted(every.items())), limited)


def apply_markers(request: Mapping[str, Any], shape: Shape, added: Sequence[tuple[int, Optional[str]]]) -> dict[str, Any]:
    """A copy of ``request`` with ``cache_control`` on the given blocks; the original is untouched.

    Only the containers on the path to a marked block are copied; a string system prompt
    or message content becomes one text block carrying the marker (the same prompt).
    """
    out = dict(request)
    own = PathCopier()
    for index, ttl in added:
        cc: dict[str, Any] = {"type": "ephemeral"} if ttl is None else {"type": "ephemeral", "ttl": ttl}
        path: tuple[Any, ...] = shape.blocks[index].path
        if len(path) == 1 or (path[0] == "messages" and len(path) == 2):
            holder: Any = out
            key: Any = path[0]
            if len(path) == 2:
                holder = own(path, own(path[:1], out, "messages"), path[1])
                key = "content"
            holder[key] = [{"type": "text", "text": holder[key], "cache_control": cc}]
            continue
        parent = own(path[:1], out, path[0])
        if path[0] == "messages":
            message = own(path[:2], parent, path[1])
            parent = own(path[:2] + ("content",), message, "content")
        block = dict(_plain(parent[path[-1]]))
        block["cache_control"] = cc
        parent[path[-1]] = block
    return out


class PathCopier:
    """``own(path, parent, key)``: ``parent[key]`` copied (a list, or a dict of an SDK model's dump) the
    first time ``path`` is asked for, so an edit copies only the containers on its path, each once."""

    def __init__(self) -> None:
        self.copied: set[tuple[Any, ...]] = set()

    def __call__(self, path: tuple[Any, ...], parent: Any, key: Any) -> Any:
        value = parent[key]
        if path not in self.copied:
            value = list(value) if isinstance(value, (list, tuple)) else dict(_plain(value))
            parent[key] = value
            self.copied.add(path)
        return value


def _plain(value: Any) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        result: Mapping[str, Any] = dump(mode="json", exclude_none=True)
        return result
    return copy.deepcopy(value)  # pragma: no cover - parse() rejects other shapes


