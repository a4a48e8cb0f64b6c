"""Where to put OpenAI ``prompt_cache_breakpoint``s (GPT-5.6 and later): the budget and the edit.

OpenAI's rules (openai SDK 3.60, ``PromptCacheOptions``): breakpoints sit on content parts
and mark the exact end of a reusable prefix; in ``mode: "implicit"`` (the default) OpenAI adds
one breakpoint of its own, at the end of the prompt, and writes it and the latest three
explicit ones; in ``mode: "explicit"`` it writes the latest four explicit ones, and with none
it caches nothing. `plan_breakpoints` fits a strategy's wishes into that budget — the
caller's breakpoints kept and counted, never more explicit ones than the mode writes, no
breakpoint where the implicit one already is, only on parts that can carry one (not tools,
not Responses ``instructions``) — and `apply_breakpoints` writes them into a *copy* of the
request, copying only the containers on the path to a marked part (a string content becomes
the one text part it stands for).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Optional

from ._breakpoints import PathCopier, _plain
from ._cache_facts import OPENAI_DEFAULT_TTL, OPENAI_MAX_BREAKPOINTS
from ._openai_parts import BREAKPOINT_KEY
from ._segments import Shape

__all__ = ["BreakpointPlan", "apply_breakpoints", "breakpoint_markable", "plan_breakpoints", "spare_breakpoints"]

_UNMARKABLE_PATHS = frozenset({"tools", "instructions"})


class BreakpointPlan(NamedTuple):
    """The breakpoints a request will carry and which of them the server writes (a named tuple)."""

    added: tuple[tuple[int, Optional[str]], ...]
    """``(block index, ttl or None to inherit the request's)`` placed by latencykit."""
    breakpoints: tuple[int, ...]
    """Every breakpoint the server sees, in prompt order: the caller's, ours and the implicit one."""
    written: tuple[tuple[int, str], ...]
    """``(block index, ttl)`` of the breakpoints the server writes: the implicit one and the latest explicit ones."""
    explicit: int
    """Explicit breakpoints in the request (the caller's and ours)."""
    implicit: int = -1
    """Block of the implicit breakpoint (the last one), ``-1`` in explicit mode."""
    limited: bool = False
    """The strategy wanted more breakpoints than the budget allowed."""


def breakpoint_markable(shape: Shape, i: int) -> bool:
    """Whether block ``i`` is a content part that can carry a breakpoint (tools and ``instructions`` cannot)."""
    block = shape.blocks[i]
    return block.markable and block.path[0] not in _UNMARKABLE_PATHS


def spare_breakpoints(shape: Shape, min_tokens: int) -> list[int]:
    """Breakpoints worth placing while budget is left, before anything is learned: the end of all
    before the newest message (few-shot examples, a conversation's last turn) and of the newest
    message's parts but its last (documents before a question).

    They cost no written token of their own: a request writes the prefix up to its furthest
    breakpoint once (the implicit one is at the end), and these only mark places inside it, so a
    family's second call can read them before its boundary is learned.
    """
    messages = shape.message_segments
    if not messages or messages[-1].name != f"message {shape.messages - 1}":
        return []
    first = messages[-1].first_block
    out = []
    for span in (range(first + len(messages[-1].blocks) - 2, first - 1, -1), range(first - 1, -1, -1)):
        i = next((k for k in span if breakpoint_markable(shape, k)), None)
        if i is not None and shape.blocks[i].prefix_tokens >= min_tokens:
            out.append(i)
    return out


def plan_breakpoints(shape: Shape, wanted: Sequence[int], *, explicit_mode: bool, ttl: Optional[str] = None) -> BreakpointPlan:
    """Fit the strategy's wishes (most valuable first) into OpenAI's budget.

    ``explicit_mode``: the request's ``prompt_cache_options.mode`` is ``"explicit"`` (4 explicit
    written, no implicit one); ``ttl``: the TTL of the breakpoints latencykit adds (``None``:
    they inherit the request's, `Shape.top_level`).
    """
    blocks = shape.blocks
    caller = dict(shape.markers)
    request_ttl = shape.top_level or OPENAI_DEFAULT_TTL
    writes = OPENAI_MAX_BREAKPOINTS if explicit_mode else OPENAI_MAX_BREAKPOINTS - 1
    implicit = -1 if explicit_mode or not blocks else len(blocks) - 1
    budget = max(writes - len(caller), 0)
    chosen: list[int] = []
    limited = False
    for i in wanted:
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(blocks):
            continue
        if i in caller or i == implicit or i in chosen or not breakpoint_markable(shape, i):
            continue
        if len(chosen) >= budget:
            limited = True
            continue
        chosen.append(i)
    chosen.sort()
    added = tuple([(i, ttl) for i in chosen])
    explicit = sorted([*caller, *chosen])
    ttls = {i: caller.get(i) or ttl or request_ttl for i in explicit}
    written = [(i, ttls[i]) for i in explicit[-writes:]]
    if implicit >= 0:
        written = [(i, t) for i, t in written if i != implicit] + [(implicit, request_ttl)]
    every = sorted({*explicit, *([implicit] if implicit >= 0 else [])})
    return BreakpointPlan(added, tuple(every), tuple(written), len(explicit), implicit, limited)


def apply_breakpoints(request: Mapping[str, Any], shape: Shape, added: Sequence[tuple[int, Optional[str]]]) -> dict[str, Any]:
    """A copy of ``request`` with ``prompt_cache_breakpoint`` on the given blocks; the original is untouched.

    Only the containers on the path to a marked part are copied; a string content (or a
    Responses string ``input`` / ``function_call_output`` ``output``) becomes the one text part
    it stands for (``text`` on Chat, ``input_text`` on Responses), carrying the breakpoint.
    """
    out = dict(request)
    own = PathCopier()
    text_type = "text" if shape.api == "chat.completions" else "input_text"

    for index, ttl in added:
        bp: dict[str, Any] = {"mode": "explicit"} if ttl is None else {"mode": "explicit", "ttl": ttl}
        path: tuple[Any, ...] = shape.blocks[index].path
        key = path[0]
        if len(path) == 1:  # Responses: the whole input was one string, one user message
            out[key] = [{"role": "user", "content": [{"type": text_type, "text": out[key], BREAKPOINT_KEY: bp}]}]
            continue
        item = own(path[:2], own(path[:1], out, key), path[1])
        if len(path) == 2:
            field = "content" if "content" in item else "output"
            item[field] = [{"type": text_type, "text": item[field], BREAKPOINT_KEY: bp}]
            own.copied.add(path[:2] + (field,))
            continue
        field = path[2] if len(path) == 4 else "content"
        parts = own(path[:2] + (field,), item, field)
        part = dict(_plain(parts[path[-1]]))
        part[BREAKPOINT_KEY] = bp
        parts[path[-1]] = part
    return out

