"""A request as the prompt cache sees it: `parse` turns a request into a `Shape`.

The pieces live in modules of their own: keyed fingerprints and the memo (`_fingerprint`),
the block model (`_blocks`), content keys and the block builder (`_builder`), the tools, the
family and the context (`_tool_runs`) and the Anthropic messages (`_message_runs`). This
module puts them together in prefix order and re-exports the names the planner, the
verifier, the emulator and the semantic cache use.

Cost: planning runs before every call; a block seen before costs a few dictionary look-ups
however long its text (see `_builder`), and a shared history is taken whole (see
`_message_runs`). Chunk prints (which locate a change to within 16 characters) are computed
by `Fingerprinter.chunks` only for blocks the learner has not seen before (`core._learn`).

Odd shapes (a generator of messages, a non-dict block) raise `Unsupported`; callers send
such requests as given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ._blocks import (
    SYSTEM_ROLES, Block, Estimator, SegmentPrint, Shape, Unsupported, common_prefix, frozen, get, is_markable, marker_ttl,
    message_segments, resolve, seq, texts,
)  # fmt: skip
from ._builder import Builder
from ._fingerprint import CHUNK_CHARS, MAX_CHUNKS, Fingerprinter
from ._message_runs import add_messages, message_name
from ._openai_parts import add_openai_items
from ._tokens import CHARS_PER_TOKEN, PER_MESSAGE_TOKENS, block_size
from ._tool_runs import add_tools, context_of, family_of

__all__ = [
    "Block", "Fingerprinter", "SegmentPrint", "Shape", "Unsupported", "parse", "resolve", "texts", "CHUNK_CHARS",
    "MAX_CHUNKS", "marker_ttl", "is_markable", "message_segments", "frozen", "common_prefix",
]  # fmt: skip


def parse(
    api: str, request: Mapping[str, Any], fp: Fingerprinter, estimate: Estimator = block_size, parts: Optional[str] = None
) -> Shape:
    """Take ``request`` (keyword arguments of ``messages.create`` / ``chat.completions.create`` /
    ``responses.create``) apart into a `Shape`; raises `Unsupported` on shapes it does not know.

    ``parts`` (OpenAI, GPT-5.6 and later): take the items apart content part by content part
    (`_openai_parts`), with this request-level TTL (``"30m"`` / ``"12h"``) as `Shape.top_level`.
    """
    model = request.get("model")
    if not isinstance(model, str):
        raise Unsupported("model is not a string")
    b = Builder(fp, estimate)
    add = b.add
    tools = request.get("tools")
    tools = seq(tools, "tools") if isinstance(tools, (list, tuple)) and tools else ()
    if tools:
        add_tools(b, tools)
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
        items = seq(request.get("messages"), "messages")
        context = context_of(fp, request)
    else:
        if api == "responses":
            instructions = request.get("instructions")
            if isinstance(instructions, str) and instructions:
                system_sizes.append(add("system", ("instructions",), instructions, ("instructions",), False).length)
            raw = request.get("input")
            key = "input"
            single = isinstance(raw, str)
            items = [raw] if single else seq(raw, "input")
        else:
            items = seq(request.get("messages"), "messages")
    if api == "messages":
        add_messages(b, items)
    elif parts is not None:
        system_sizes += add_openai_items(b, api, items, key, single)
    else:
        leading = True
        for m, message in enumerate(items):
            is_dict = type(message) is dict
            if not (is_dict or isinstance(message, (str, Mapping)) or hasattr(message, "model_dump")):
                raise Unsupported(f"input item of type {type(message).__name__}")
            role = message.get("role") if is_dict else get(message, "role")
            leading = leading and role in SYSTEM_ROLES
            b.fixed += PER_MESSAGE_TOKENS
            info = add("system" if leading else message_name(m), (key,) if single else (key, m), message, ("m", m, role), False)
            if leading:
                system_sizes.append(info.length)
    top = request.get("cache_control") if api == "messages" else None
    top_ttl = marker_ttl({"cache_control": top}) if isinstance(top, Mapping) else parts
    segments = (SegmentPrint("model", (fp.link(b"model", model.encode()),), -1, (len(model),)), *b.segments())
    return frozen(
        Shape, api=api, model=model, blocks=tuple(b.blocks), segments=segments,
        family=family_of(fp, api if parts is None else api + "+parts", tools, system_sizes, b.tool_names), prompt_tokens=-(-b.chars // CHARS_PER_TOKEN) + b.fixed,
        messages=len(items), top_level=top_ttl, context=context, markers=tuple(b.markers), _fp=fp,
        _digests=tuple(b._digests),
    )  # fmt: skip
