"""Request shapes and fixtures shared by the prompt-cache tests (agent, RAG, timestamps, rotating prompts)."""

from __future__ import annotations

import random
from typing import Any, Iterator, Optional

import pytest

from latencykit.emulator import Emulator, PromptCache, TimingModel

MODEL = "claude-sonnet-5"  # minimum cacheable prefix: 1024 tokens
FAST = TimingModel(time_scale=0, output_tokens=4)


def agent_tools(n: int = 12, salt: str = "") -> list[dict[str, Any]]:
    """About 3k tokens of tool definitions (12 tools × ~1000 characters)."""
    return [
        {
            "name": f"tool_{i}",
            "description": f"{salt}Tool {i} looks things up in system {i}. " * 24,
            "input_schema": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}},
        }
        for i in range(n)
    ]


def agent_system(salt: str = "") -> str:
    """About 2k tokens of static system prompt."""
    return salt + "You are a careful agent. Think, then call tools, then answer briefly. " * 115


def timestamp_system(i: int, salt: str = "") -> str:
    """A system prompt that embeds the current time near its start (a classic silent cache breaker)."""
    return f"{salt}Current time: 2026-01-01 10:{i // 60:02d}:{i % 60:02d}. " + agent_system()


def filler(tokens: int, word: str = "context") -> str:
    """Roughly ``tokens`` tokens of text."""
    return (word + " ") * (tokens * 4 // (len(word) + 1))


def rotating_system(k: int) -> str:
    """About 2k tokens of static system prompt for assistant ``k``; every one the same length (one family)."""
    return f"You are assistant {k:02d} of the help desk. " + filler(2000, f"topic{k:02d}")


class Clock:
    """A hand-moved clock shared by a policy's ledger and the emulator's cache."""

    def __init__(self, emu: Emulator) -> None:
        self.now = 1000.0
        self.emu = emu

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.emu.cache.advance(seconds)  # type: ignore[attr-defined]


@pytest.fixture
def cemu() -> Iterator[Emulator]:
    """A fresh emulator with its own prompt cache and no delays (cache state isolated per test)."""
    with Emulator(timing=FAST, seed=3, cache_model=PromptCache()) as emulator:
        yield emulator


# -- the shapes of issue 9 and the hindsight oracle they are measured against -----------------

CC: dict[str, Any] = {"type": "ephemeral"}
ROTATING = tuple(
    f"{k} system prompts in turn, {order}" for k in (2, 3, 5, 20) for order in ("in order", "at random")
) + ("20 system prompts, rare, in order", "20 system prompts, rare, at random")
"""Issue 29: an app serving k assistants sends k static system prompts (tools before them) in turn;
"rare": a call every 2 minutes, so each prompt comes back only after its 5-minute cache lifetime."""
SHAPES = (
    "agent, single-turn", "agent, multi-turn", "RAG, documents in the user turn", "few-shot",
    "timestamp in the system prompt", "tools only", "system of several blocks", "OpenAI chat, shared prefix",
    *ROTATING,
)  # fmt: skip
"""Every request shape the planner is measured on (``benchmarks/caching.py``, ``tests/test_cache_shapes_*``)."""
TTL = 300.0
"""The 5-minute cache lifetime the planner's markers get."""


def rotation(shape: str) -> Optional[tuple[int, bool, float]]:
    """``(k, at random, seconds between calls)`` of a rotating shape, ``None`` for the others."""
    if shape not in ROTATING:
        return None
    return int(shape.split()[0]), shape.endswith("at random"), 120.0 if "rare" in shape else 5.0


def rare(shape: str) -> bool:
    """Whether a rotating shape's prompts come back only after their cache lifetime (as a rule)."""
    return "rare" in shape


def shape_calls(shape: str, calls: int) -> int:
    """At least ``calls``, and enough for a rotating shape to show every prompt at least twice (k = 20: 45)."""
    rot = rotation(shape)
    return calls if rot is None else max(calls, 2 * rot[0] + 5)


def shape_gap(shape: str) -> float:
    """Seconds between the calls of a shape (0: back to back)."""
    rot = rotation(shape)
    return 0.0 if rot is None else rot[2]


def shape_values(shape: str, calls: int) -> list[int]:
    """Which system prompt each call of a rotating shape sends (in order, or seeded random); zeros otherwise."""
    rot = rotation(shape)
    if rot is None:
        return [0] * calls
    k, at_random, _ = rot
    rng = random.Random(f"rotating:{k}")
    return [rng.randrange(k) if at_random else i % k for i in range(calls)]


def measured(shape: str, calls: int) -> list[int]:
    """The calls a shape is judged on: from the third call on, and for a rotating shape from the
    second sight of each prompt on (its first sight cannot read it).

    Rare shapes: every call from the third on but the chance returns of a random order (a
    prompt back within its lifetime although most come back later): the oracle, knowing
    they come, wrote those prompts; the planner writes nothing that most likely expires unread.
    """
    rot = rotation(shape)
    if rot is None:
        return list(range(2, calls))
    values, last = shape_values(shape, calls), {}
    out = []
    for i, v in enumerate(values):
        if rare(shape):
            if i >= 2 and not (v in last and (i - last[v]) * rot[2] < TTL):
                out.append(i)
        elif v in last:
            out.append(i)
        last[v] = i
    return out


def unread_writes(shape: str, writes: list[int]) -> list[int]:
    """Calls (after the first) of a rotating shape that wrote to the cache although their system
    prompt is not sent again within its lifetime; judged where that lifetime ends before the run."""
    calls = len(writes)
    values, near = shape_values(shape, calls), int(TTL // shape_gap(shape))
    return [i for i in range(1, calls - near) if writes[i] and values[i] not in values[i + 1 : i + 1 + near]]


def learning_calls(shape: str, calls: int) -> list[int]:
    """The first sights of a shape's first two prompts: where the planner learns the pace."""
    values = shape_values(shape, calls)
    return sorted({v: values.index(v) for v in values}.values())[:2]


def _question(i: int) -> dict[str, Any]:
    return {"role": "user", "content": f"Question {i}: what changed in system {i % 7}?"}


def _document(d: int) -> dict[str, Any]:
    return {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": filler(900, f"doc{d}")}}


def _examples() -> list[dict[str, Any]]:
    pairs = []
    for k in range(4):
        pairs.append({"role": "user", "content": f"Example {k}: " + filler(250, f"input{k}")})
        pairs.append({"role": "assistant", "content": f"Answer {k}: " + filler(250, f"output{k}")})
    return pairs


def shape_requests(shape: str, calls: int) -> tuple[str, list[dict[str, Any]]]:
    """``(api, requests)``: the ``calls`` requests of one family, in order (``model`` / ``max_tokens`` included).

    ``api`` is ``"messages"`` (Anthropic) or ``"chat.completions"`` (OpenAI). Multi-turn
    conversations carry fixed assistant replies, so every mode sends the same requests.
    """
    out: list[dict[str, Any]] = []
    tools, system = agent_tools(), agent_system()
    history: list[dict[str, Any]] = []
    values = shape_values(shape, calls)
    for i in range(calls):
        req: dict[str, Any] = {"model": MODEL, "max_tokens": 8}
        if shape in ROTATING:
            req.update(tools=tools, system=rotating_system(values[i]), messages=[_question(i)])
        elif shape == "agent, single-turn":
            req.update(tools=tools, system=system, messages=[_question(i)])
        elif shape == "agent, multi-turn":
            req.update(tools=tools, system=system, messages=[*history, _question(i)])
            history = [*req["messages"], {"role": "assistant", "content": f"Answer {i}: " + filler(60, "found")}]
        elif shape == "RAG, documents in the user turn":
            content = [*(_document(d) for d in range(3)), {"type": "text", "text": _question(i)["content"]}]
            req.update(system=system, messages=[{"role": "user", "content": content}])
        elif shape == "few-shot":
            req.update(system="Answer in the style of the examples. " * 10, messages=[*_examples(), _question(i)])
        elif shape == "timestamp in the system prompt":
            req.update(tools=tools, system=timestamp_system(i), messages=[_question(i)])
        elif shape == "tools only":
            req.update(tools=tools, messages=[_question(i)])
        elif shape == "system of several blocks":
            blocks = [{"type": "text", "text": filler(700, f"part{j}")} for j in range(3)]
            req.update(system=blocks, messages=[_question(i)])
        elif shape == "OpenAI chat, shared prefix":
            req = {"model": "gpt-4o", "messages": [{"role": "system", "content": system}, *_examples()[:4], _question(i)]}
        else:
            raise ValueError(f"unknown shape {shape!r}")
        out.append(req)
    return ("chat.completions" if shape.startswith("OpenAI") else "messages"), out


def _blocks(req: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    """``(path, canonical JSON)`` of every cacheable block, in the order the prompt cache sees them."""
    import json

    def text(value: Any) -> str:
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if k != "cache_control"}
        return json.dumps(value, sort_keys=True)

    out: list[tuple[tuple[Any, ...], str]] = [(("tools", i), text(t)) for i, t in enumerate(req.get("tools") or [])]
    system = req.get("system")
    if isinstance(system, str):
        out.append((("system",), text(system)))
    for j, block in enumerate(system if isinstance(system, list) else []):
        out.append((("system", j), text(block)))
    for m, message in enumerate(req["messages"]):
        content = message["content"]
        if isinstance(content, str):
            out.append((("messages", m), text([message["role"], content])))
        else:
            out.extend((("messages", m, b), text([message["role"], block])) for b, block in enumerate(content))
    return out


def _common(a: list[tuple[tuple[Any, ...], str]], b: list[tuple[tuple[Any, ...], str]]) -> int:
    return next((k for k, (x, y) in enumerate(zip(a, b)) if x[1] != y[1]), min(len(a), len(b)))


def oracle_requests(requests: list[dict[str, Any]], gap: float = 0.0) -> list[dict[str, Any]]:
    """The requests with the markers an oracle with hindsight would place (Anthropic).

    Call ``i`` marks the end of what it shares with call ``i - 1`` and with call ``i + 1``,
    and the end of the longest prefix it shares with any earlier and with any later call
    less than a cache lifetime away (calls ``gap`` seconds apart): it reads what it can and
    writes what a later call will read, the most any placement of breakpoints can read (a
    system prompt that comes back three calls later is written on its first sight, one that
    comes back after its lifetime is not). Copies; the inputs are not touched.
    """
    import copy

    prints = [_blocks(r) for r in requests]
    near = len(requests) if gap <= 0 else int((TTL - 1e-9) // gap)  # calls less than a lifetime apart
    out = []
    for i, req in enumerate(requests):
        ends = set()
        for j in (i - 1, i + 1):
            if 0 <= j < len(requests) and abs(i - j) <= near:
                common = _common(prints[i], prints[j])
                if common > 0:
                    ends.add(common - 1)
        for side in (range(max(i - near, 0), i), range(i + 1, min(i + near + 1, len(requests)))):
            common = max((_common(prints[i], prints[j]) for j in side), default=0)
            if common > 0:
                ends.add(common - 1)
        sent = copy.deepcopy(req)
        for k in ends:
            path = prints[i][k][0]
            if path[0] == "tools":
                sent["tools"][path[1]]["cache_control"] = CC
            elif path == ("system",):
                sent["system"] = [{"type": "text", "text": sent["system"], "cache_control": CC}]
            elif path[0] == "system":
                sent["system"][path[1]]["cache_control"] = CC
            elif len(path) == 2:
                message = sent["messages"][path[1]]
                message["content"] = [{"type": "text", "text": message["content"], "cache_control": CC}]
            else:
                sent["messages"][path[1]]["content"][path[2]]["cache_control"] = CC
        out.append(sent)
    return out


def oracle_openai(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI's oracle: every call of the family routed alike (one fixed ``prompt_cache_key``)."""
    return [{**r, "prompt_cache_key": "oracle"} for r in requests]


def without_markers(value: Any) -> Any:
    """``value`` without ``cache_control`` anywhere, string contents as one text block: what the model reads."""
    if isinstance(value, dict):
        out = {k: without_markers(v) for k, v in value.items() if k not in ("cache_control", "prompt_cache_key")}
        if isinstance(out.get("system"), str):
            out["system"] = [{"type": "text", "text": out["system"]}]
        if "role" in out and isinstance(out.get("content"), str) and "messages" not in out:
            out["content"] = [{"type": "text", "text": out["content"]}]
        return out
    if isinstance(value, list):
        return [without_markers(v) for v in value]
    return value


def count_markers(body: dict[str, Any]) -> int:
    """``cache_control`` markers in a request body (top-level one included)."""
    if isinstance(body, dict):
        return sum(count_markers(v) for k, v in body.items() if k != "cache_control") + (1 if body.get("cache_control") else 0)
    if isinstance(body, list):
        return sum(count_markers(v) for v in body)
    return 0
