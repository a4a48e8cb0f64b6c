"""OpenAI GPT-5.6 request shapes (Chat and Responses), their hindsight oracle, and a run helper.

The shapes of issue 35, each one prompt family: an agent (tools, system prompt, a varying
question), three system prompts in turn, RAG documents before a varying question, few-shot
examples, a static system prompt in two parts, and a growing conversation. The oracle places
``prompt_cache_breakpoint``s by hand, with hindsight, on the same requests (`oracle_openai`).
"""

from __future__ import annotations

import copy
import json
from typing import Any, Optional

from _cache_shapes import Clock, agent_system, filler, rotating_system

MODEL = "gpt-5.6"
APIS = ("chat.completions", "responses")
SHAPES = ("agent", "rotating system prompts", "RAG", "few-shot", "two-part system", "conversation")
ROTATION_GAP = 5.0
"""Seconds between the calls of the rotating shape (each prompt back after 15 s, well within 30 minutes)."""
BP: dict[str, Any] = {"mode": "explicit"}
JUDGED_FROM = 4
"""The acceptance of issue 35 judges calls from the 5th on (index 4)."""


def second_sight(shape: str) -> int:
    """The first call that sees the family's prompt again: the 2nd, or, three prompts in turn, the 4th."""
    return 3 if shape == "rotating system prompts" else 1


def _text(api: str, text: str) -> dict[str, Any]:
    return {"type": "text" if api == "chat.completions" else "input_text", "text": text}


def _tools(api: str) -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {"query": {"type": "string"}}}
    if api == "chat.completions":
        return [{"type": "function", "function": {"name": f"tool_{i}", "description": f"Tool {i} looks things up. " * 30,
                                                   "parameters": schema}} for i in range(6)]  # fmt: skip
    return [{"type": "function", "name": f"tool_{i}", "description": f"Tool {i} looks things up. " * 30, "parameters": schema} for i in range(6)]


def shape_requests(shape: str, api: str, calls: int, model: str = MODEL) -> list[dict[str, Any]]:
    """The ``calls`` requests of one family (keyword arguments of ``chat.completions.create`` / ``responses.create``)."""
    items = "messages" if api == "chat.completions" else "input"
    system_role = "system" if api == "chat.completions" else "developer"
    out: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    for i in range(calls):
        question = {"role": "user", "content": f"Question {i}: what changed in system {i % 7}?"}
        req: dict[str, Any] = {"model": model}
        if shape == "agent":
            req.update(tools=_tools(api), **{items: [{"role": system_role, "content": agent_system()}, question]})
        elif shape == "rotating system prompts":
            req.update(tools=_tools(api), **{items: [{"role": system_role, "content": rotating_system(i % 3)}, question]})
        elif shape == "RAG":
            docs = [_text(api, f"Document {d}: " + filler(900, f"doc{d}")) for d in range(3)]
            user = {"role": "user", "content": [*docs, _text(api, question["content"])]}
            req.update(**{items: [{"role": system_role, "content": agent_system()}, user]})
        elif shape == "few-shot":
            pairs: list[dict[str, Any]] = []
            for k in range(4):
                pairs.append({"role": "user", "content": f"Example {k}: " + filler(250, f"input{k}")})
                pairs.append({"role": "assistant", "content": f"Answer {k}: " + filler(250, f"output{k}")})
            req.update(**{items: [{"role": system_role, "content": "Answer in the style of the examples. " * 10}, *pairs, question]})
        elif shape == "two-part system":
            system = {"role": system_role, "content": [_text(api, filler(700, "partone")), _text(api, filler(700, "parttwo"))]}
            req.update(**{items: [system, question]})
        elif shape == "conversation":
            messages = [{"role": system_role, "content": agent_system()}, *history, question]
            req.update(tools=_tools(api), **{items: messages})
            history = [*messages[1:], {"role": "assistant", "content": f"Answer {i}: " + filler(60, "found")}]
        else:
            raise ValueError(f"unknown shape {shape!r}")
        out.append(req)
    return out


def shape_gap(shape: str) -> float:
    """Seconds between the calls of ``shape``."""
    return ROTATION_GAP if shape == "rotating system prompts" else 0.0


def _parts(api: str, req: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    """``(path, canonical JSON)`` of every block in prompt order: tools (no path to mark), then each content part."""
    out: list[tuple[tuple[Any, ...], str]] = [((), json.dumps(t, sort_keys=True)) for t in req.get("tools") or []]
    items = req["messages" if api == "chat.completions" else "input"]
    for m, item in enumerate(items):
        content = item["content"]
        if isinstance(content, str):
            out.append(((m,), json.dumps([item["role"], content])))
        else:
            out.extend(((m, j), json.dumps([item["role"], part])) for j, part in enumerate(content))
    return out


def _common(a: list[tuple[tuple[Any, ...], str]], b: list[tuple[tuple[Any, ...], str]]) -> int:
    return next((k for k, (x, y) in enumerate(zip(a, b)) if x[1] != y[1]), min(len(a), len(b)))


def oracle_openai(api: str, requests: list[dict[str, Any]], role_ok: Optional[set[str]] = None) -> list[dict[str, Any]]:
    """The requests with the breakpoints an oracle with hindsight places (implicit mode: at most 3).

    Call ``i`` marks the end of what it shares with call ``i - 1`` and with call ``i + 1``, and of
    the longest prefix it shares with any earlier and any later call (every call here is well
    within the 30-minute lifetime), on the last content part of each such prefix (tools cannot
    carry one); the furthest three are kept. Copies; the inputs are not touched.
    """
    items = "messages" if api == "chat.completions" else "input"
    allowed = role_ok or ({"system", "developer", "user", "assistant", "tool"} if api == "chat.completions" else {"system", "developer", "user"})
    prints = [_parts(api, r) for r in requests]
    out = []
    for i, req in enumerate(requests):
        ends: set[int] = set()
        for j in (i - 1, i + 1):
            if 0 <= j < len(requests):
                ends.add(_common(prints[i], prints[j]) - 1)
        for side in (range(0, i), range(i + 1, len(requests))):
            ends.add(max((_common(prints[i], prints[j]) for j in side), default=0) - 1)
        marks: list[int] = []
        for k in sorted(ends, reverse=True):
            while k >= 0 and (not prints[i][k][0] or req[items][prints[i][k][0][0]]["role"] not in allowed):
                k -= 1  # a tool, or a part that cannot carry a breakpoint: mark the last one before it
            if k >= 0 and k not in marks and k != len(prints[i]) - 1:
                marks.append(k)
        sent = copy.deepcopy(req)
        for k in sorted(marks)[-3:]:
            path = prints[i][k][0]
            item = sent[items][path[0]]
            if len(path) == 1:
                item["content"] = [{**_text(api, item["content"]), "prompt_cache_breakpoint": BP}]
            else:
                item["content"][path[1]]["prompt_cache_breakpoint"] = BP
        out.append(sent)
    return out


def run_family(client: Any, api: str, requests: list[dict[str, Any]], clock: Clock, gap: float) -> list[Any]:
    """Send ``requests`` in order through ``client`` (sync), moving ``clock`` by ``gap`` after each; the records."""
    records = []
    for req in requests:
        if api == "chat.completions":
            client.chat.completions.create(max_completion_tokens=8, **req)
        else:
            client.responses.create(max_output_tokens=8, **req)
        records.append(client.latency.last)
        clock.advance(gap)
    return records


async def arun_family(client: Any, api: str, requests: list[dict[str, Any]], clock: Clock, gap: float) -> list[Any]:
    """Async twin of `run_family`."""
    records = []
    for req in requests:
        if api == "chat.completions":
            await client.chat.completions.create(max_completion_tokens=8, **req)
        else:
            await client.responses.create(max_output_tokens=8, **req)
        records.append(client.latency.last)
        clock.advance(gap)
    return records


def count_breakpoints(value: Any) -> int:
    """``prompt_cache_breakpoint``s anywhere in a request body."""
    if isinstance(value, dict):
        return sum(count_breakpoints(v) for k, v in value.items() if k != "prompt_cache_breakpoint") + ("prompt_cache_breakpoint" in value)
    if isinstance(value, list):
        return sum(count_breakpoints(v) for v in value)
    return 0


def new_fields(value: Any) -> bool:
    """Whether a request body carries any GPT-5.6 prompt-cache field."""
    return count_breakpoints(value) > 0 or (isinstance(value, dict) and "prompt_cache_options" in value)
