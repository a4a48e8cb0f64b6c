"""The items of a Chat Completions / Responses request as content-part blocks (GPT-5.6 and later).

From ``gpt-5.6`` on, OpenAI caches at explicit breakpoints placed on *content parts*
(``prompt_cache_breakpoint`` on a Chat ``text`` / ``image_url`` / ``input_audio`` / ``file``
part, or a Responses ``input_text`` / ``input_image`` / ``input_file``): so for those models a
request is taken apart part by part, as Anthropic's messages are block by block, and the
planner can end a breakpoint on the last retrieved document before a varying question.

One block per part of a message's ``content`` list (or of a Responses ``function_call_output``
``output`` list); a string content is one block, markable as the one text part it stands for;
any other item (an assistant message with only tool calls, a ``function_call``, a reasoning
item) is one block, never marked. A message's other keys (``tool_call_id``, ``name``,
``tool_calls``) go into its first block's digest, so two tool results with the same text but
different ids differ. Roles whose parts cannot carry a breakpoint (Chat ``function``,
Responses ``assistant``, whose parts are ``output_text``) give unmarkable blocks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ._blocks import SYSTEM_ROLES, Unsupported, dump, get
from ._builder import Builder
from ._message_runs import message_name
from ._tokens import PER_MESSAGE_TOKENS, canonical

__all__ = ["BREAKPOINT_KEY", "add_openai_items", "breakpoint_ttl", "markable_part"]

BREAKPOINT_KEY = "prompt_cache_breakpoint"
_CHAT_PARTS = frozenset({"text", "image_url", "input_audio", "file"})
_RESPONSES_PARTS = frozenset({"input_text", "input_image", "input_file"})
_RESPONSES_ROLES = frozenset({"user", "system", "developer"})
_PLAIN_KEYS = frozenset({"role", "content", "type"})


def breakpoint_ttl(part: Any) -> Optional[str]:
    """The caller's breakpoint on ``part``: its ``ttl`` (``"30m"`` / ``"12h"``), ``""`` when it inherits
    the request's, ``None`` when the part carries none."""
    bp = get(part, BREAKPOINT_KEY) if not isinstance(part, str) else None
    if bp is None:
        return None
    ttl = get(bp, "ttl")
    return ttl if isinstance(ttl, str) else ""


def markable_part(api: str, part: Any) -> bool:
    """Whether a ``prompt_cache_breakpoint`` may go on ``part`` (a content part of ``api``)."""
    if isinstance(part, str):
        return bool(part)
    kind = get(part, "type")
    if kind not in (_CHAT_PARTS if api == "chat.completions" else _RESPONSES_PARTS):
        return False
    return not (kind in ("text", "input_text") and not get(part, "text"))


def _extras(b: Builder, item: Mapping[str, Any]) -> str:
    """A stable tag of a message's keys besides role and content (``""`` when it has none)."""
    if _PLAIN_KEYS.issuperset(item):
        return ""
    rest = {k: v for k, v in item.items() if k not in ("role", "content")}
    return b.fp.digest(canonical(rest).encode(), size=8).hex()


def add_openai_items(b: Builder, api: str, items: Sequence[Any], key: str, single: bool) -> list[int]:
    """The blocks of a Chat ``messages`` / Responses ``input`` list into ``b``, part by part.

    ``key``: ``"messages"`` or ``"input"``; ``single``: the input was one string (one user
    message). Returns the canonical lengths of the leading system / developer blocks (the
    family's system layout).
    """
    add = b.add
    system: list[int] = []
    leading = True
    for m, raw in enumerate(items):
        if single:
            b.fixed += PER_MESSAGE_TOKENS
            add(message_name(0), (key,), raw, ("m", 0, "user"), bool(raw))
            return system
        item = raw if type(raw) is dict else raw if isinstance(raw, Mapping) else dump(raw)
        if not isinstance(item, Mapping):
            raise Unsupported(f"input item of type {type(raw).__name__}")
        role = item.get("role")
        leading = leading and role in SYSTEM_ROLES
        name = "system" if leading else message_name(m)
        b.fixed += PER_MESSAGE_TOKENS
        kind = item.get("type")
        is_message = role is not None and (api == "chat.completions" or kind in (None, "message"))
        content = item.get("content") if is_message else item.get("output") if kind == "function_call_output" else None
        role_ok = (role != "function") if api == "chat.completions" else (role in _RESPONSES_ROLES or kind == "function_call_output")
        if type(content) is str and content:
            extra = _extras(b, item)
            if not extra:
                flat = ("m", m, role, hash(content), len(content))
                info = add(name, (key, m), content, ("m", m, role), role_ok, flat)
            else:
                info = add(name, (key, m), content, ("m", m, role, extra), role_ok)
            if leading:
                system.append(info.length)
        elif isinstance(content, (list, tuple)) and content:
            extra = _extras(b, item)
            deep = () if is_message else ("output",)
            for j, part in enumerate(content):
                # part 0 is tagged as a string content would be: the one text part standing for a string is the same prompt
                tag = ("m", m, role, j) if j else ("m", m, role, extra) if extra else ("m", m, role)
                info = add(name, (key, m, *deep, j), part, tag, role_ok and markable_part(api, part))
                ttl = breakpoint_ttl(part)
                if ttl is not None:
                    b.markers.append((len(b.blocks) - 1, ttl))
                if leading:
                    system.append(info.length)
        else:
            info = add(name, (key, m), raw, ("m", m, role), False)
            if leading:
                system.append(info.length)
    return system
