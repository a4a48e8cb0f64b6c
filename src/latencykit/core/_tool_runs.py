"""The tools of a request (always its first blocks), its family and its context.

A ``tools`` list whose key (hashes, never text) is that of a recent list is taken whole,
its blocks and totals being a function of its content alone. The family is what groups a
request with its earlier calls: tool names, the number of system blocks and their rough
sizes; the context is the digest of settings that invalidate the messages tier.
"""

from __future__ import annotations

import marshal
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Optional

from ._blocks import Block, get
from ._builder import Builder, tool_key
from ._fingerprint import Fingerprinter
from ._tokens import canonical

__all__ = ["ToolRun", "add_tools", "family_of", "context_of", "key_of_names"]

_marshal = marshal.dumps


class ToolRun(NamedTuple):
    """What `add_tools` made of a recent ``tools`` list: its blocks and the running totals after it."""

    blocks: tuple[Block, ...]
    digests: tuple[bytes, ...]
    sizes: tuple[int, ...]
    chars: int
    fixed: int
    names: tuple[int, int]
    """`key_of_names` of the tools' names (for the request's family)."""


def add_tools(b: Builder, tools: Sequence[Any]) -> None:
    """The blocks of ``tools`` (always the first in a request) into ``b``.

    A list whose key (`_tools_key`: hashes, never text) is that of a recent list is taken
    whole, its blocks and totals being a function of its content alone. Otherwise each
    tool is keyed by a fold of its content (`tool_key`) and looked up on its own; a tool
    with its own ``cache_control`` (a marker the key leaves out), one without a key, or a
    custom estimator takes the general path, one `Builder.add` each.
    """
    lead: Optional[int] = None
    if b.default_estimate and not b.blocks and all(map(_plain_dict, tools)):
        lead = _tools_key(tools)
        if lead is not None:
            run: Optional[ToolRun] = b.fp._tool_runs.get(lead)
            if run is not None:
                b.take(run.blocks, run.digests, run.sizes, (("tools", 0),))
                b.chars, b.fixed, b.tool_names = run.chars, run.fixed, run.names
                return
    keys: Optional[tuple[Any, ...]] = None
    if lead is not None:
        keys = tuple(map(tool_key, tools))
        if None in keys:
            keys = lead = None
    add = b.add
    for i, tool in enumerate(tools):
        if keys is not None:
            add("tools", ("tools", i), tool, ("tool", i), True, (("tool", i), keys[i]))
        else:
            add("tools", ("tools", i), tool, ("tool", i), type(tool) is dict or isinstance(tool, Mapping), None, tool_key)
    if lead is not None:
        run = ToolRun(tuple(b.blocks), tuple(b._digests), tuple(b._sizes), b.chars, b.fixed, key_of_names(_tool_names(tools)))
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
    return tuple([(t.get("name") or get(t.get("function"), "name")) if type(t) is dict or isinstance(t, Mapping) else "?" for t in tools])


def key_of_names(names: tuple[Any, ...]) -> tuple[int, int]:
    return (hash(names), len(names))  # hashes only: tool names are prompt text too


def family_of(fp: Fingerprinter, api: str, tools: Sequence[Any], system: Sequence[int], names_key: Optional[tuple[int, int]] = None) -> bytes:
    """The request's family: stable under edits *inside* the system prompt (a timestamp) but
    not across different prompts: tool names, the number of system blocks and their rough
    sizes. ``names_key``: `key_of_names` of the tools' names, when a tools run already knows it."""
    names: Optional[tuple[Any, ...]] = None
    if names_key is None:
        names = _tool_names(tools)
        names_key = key_of_names(names)
    sizes = tuple([n // 512 for n in system])
    key = (api, *names_key, sizes)
    found: Optional[bytes] = fp._links.get(key)
    if found is None:
        if names is None:
            names = _tool_names(tools)
        found = fp.digest(api.encode(), "\x1f".join(map(str, names)).encode(), "\x1f".join(map(str, sizes)).encode(), size=8)
        fp._links.put(key, found)
    return found


def context_of(fp: Fingerprinter, request: Mapping[str, Any]) -> bytes:
    choice, thinking = request.get("tool_choice"), request.get("thinking")
    if choice is None and thinking is None:
        return fp.link(b"context", b"")
    return fp.digest(canonical(choice).encode(), canonical(thinking).encode())
