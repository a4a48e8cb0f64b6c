"""Traffic shapes: seeded, provider-neutral requests of a chosen prompt and output length.

Shapes (``SHAPES``):

- ``chat``, ``rag``, ``code``: prompt lengths drawn from three buckets with the second
  source article's weights (``PROFILES``: chat 50-200 / 200-1000 / 1000-4000 tokens at
  0.70 / 0.20 / 0.10; rag 200-500 / 500-2000 / 2000-8000 at 0.20 / 0.40 / 0.40; code
  100-300 / 300-1500 / 1500-6000 at 0.30 / 0.40 / 0.30), uniform inside a bucket; outputs
  uniform in 50-500, 100-800 and 200-2000 tokens.
- ``agent``: a large shared prefix (12 tool definitions and a long system prompt), sessions
  of several turns whose history holds earlier tool calls and results.
- ``shared-prefix``: RAG over ``documents`` long documents reused across requests.
- ``few-shot``: one long system prompt of worked examples, then a short query.
- ``reasoning``: chat-sized questions to a reasoning model: each asks for a reasoning budget
  (64-512 tokens: OpenAI ``reasoning_effort``, Anthropic ``thinking``) and a 50-300 token
  answer, so TTFT (the first token of any kind) and TTFO (the answer's first) differ.
- ``sessions``: users' conversations of several turns, each turn sent when the answer before it
  arrived plus a think time, the server's answer in its history (`latencykit.bench._sessions`).
- ``replay``: the user's own traffic from JSONL, or a public trace (`load_replay`, `latencykit.bench._traces`).

A request carries its target prompt and output token counts (the output through
``max_tokens``), the id of its shared static prefix (for cold-start and cache
expectations) and its session. Same seed, same requests.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from ._text import CHARS_PER_TOKEN, code_text, prose

__all__ = ["PROFILES", "SHAPES", "TrafficRequest", "generate", "load_replay"]

Bucket = tuple[str, int, int, float]

PROFILES: dict[str, tuple[tuple[Bucket, ...], tuple[int, int]]] = {
    "chat": ((("short", 50, 200, 0.70), ("medium", 200, 1000, 0.20), ("long", 1000, 4000, 0.10)), (50, 500)),
    "rag": ((("short", 200, 500, 0.20), ("medium", 500, 2000, 0.40), ("long", 2000, 8000, 0.40)), (100, 800)),
    "code": ((("short", 100, 300, 0.30), ("medium", 300, 1500, 0.40), ("long", 1500, 6000, 0.30)), (200, 2000)),
}
"""Prompt-length buckets (name, low, high, weight) and the output range, in tokens, per shape."""

SHAPES = ("chat", "rag", "code", "agent", "shared-prefix", "few-shot", "reasoning", "sessions", "replay")
_OWN = ("sessions", "replay")
"""Shapes `generate` does not make: ``sessions`` (`latencykit.bench._sessions.generate_sessions`) and ``replay``."""

# Per-request and per-message framing tokens (the emulator's counting rule).
_OVERHEAD = 3 + 4 + 4


@dataclass(frozen=True)
class TrafficRequest:
    """One request to send, provider-neutral (the target renders it for its API)."""

    index: int
    shape: str
    prompt_tokens: int
    """Target prompt size in tokens (approximate: four characters per token)."""
    output_tokens: int
    """Asked for through ``max_tokens`` (and, on the emulator, generated exactly)."""
    system: str = ""
    messages: tuple[dict[str, Any], ...] = ()
    """``{"role": "user"|"assistant", "content": str}``, plus agent history items
    ``{"role": "assistant", "tool_call": {"id", "name", "arguments"}}`` and
    ``{"role": "tool", "tool_call_id", "content"}``."""
    tools: tuple[dict[str, Any], ...] = ()
    """``{"name", "description", "parameters"}`` (JSON schema)."""
    bucket: str = ""
    prefix_id: Optional[str] = None
    """Which shared static prefix (system / tools / documents) this request reuses, if any."""
    session: Optional[str] = None
    at: Optional[float] = None
    """Recorded arrival offset in seconds (replay only)."""
    extra: dict[str, Any] = field(default_factory=dict)


def _lengths(shape: str, rng: random.Random) -> tuple[str, int, int]:
    buckets, (out_lo, out_hi) = PROFILES[shape]
    r = rng.random()
    acc = 0.0
    chosen = buckets[-1]
    for b in buckets:
        acc += b[3]
        if r < acc:
            chosen = b
            break
    name, lo, hi, _ = chosen
    # Half-open [lo, hi) except the last bucket, so a boundary value belongs to one bucket only.
    top = hi if chosen is buckets[-1] else hi - 1
    return name, rng.randint(lo, top), rng.randint(out_lo, out_hi)


def _tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


_SYSTEMS = {
    "chat": "You are a helpful assistant for a software company. Answer clearly and briefly.",
    "rag": "Answer the question using only the context below. Cite the section you used.",
    "code": "You are a coding assistant. Complete or fix the code and explain the change in one line.",
}


def _simple(shape: str, i: int, rng: random.Random) -> TrafficRequest:
    bucket, prompt, out = _lengths(shape, rng)
    system = _SYSTEMS[shape]
    body_tokens = max(prompt - _OVERHEAD - _tokens(system), 8)
    if shape == "chat":
        text = prose(rng, body_tokens)
    elif shape == "rag":
        question = prose(rng, 24)
        text = "Context:\n" + prose(rng, max(body_tokens - 30, 1)) + "\n\nQuestion: " + question
    else:
        text = "Complete this code:\n" + code_text(rng, max(body_tokens - 6, 1))
    return TrafficRequest(i, shape, prompt, out, system, ({"role": "user", "content": text},), bucket=bucket)


def _agent_prefix(rng: random.Random) -> tuple[str, tuple[dict[str, Any], ...]]:
    tools = tuple(
        {
            "name": f"tool_{k}_{name}",
            "description": prose(rng, 90),
            "parameters": {
                "type": "object",
                "properties": {
                    p: {"type": "string", "description": prose(rng, 12)} for p in ("query", "scope", "format")
                },
                "required": ["query"],
            },
        }
        for k, name in enumerate(("search", "read", "write", "list", "run", "diff", "fetch", "plan", "ask", "todo", "grep", "test"))
    )
    system = "You are an autonomous engineering agent. Use the tools to finish the task.\n" + prose(rng, 900)
    return system, tools


def _agent(n: int, rng: random.Random, turns: int = 4) -> list[TrafficRequest]:
    system, tools = _agent_prefix(rng)
    sessions = max(1, -(-n // turns))
    histories: list[list[dict[str, Any]]] = [[] for _ in range(sessions)]
    out: list[TrafficRequest] = []
    # Turn-major order: every session's first turn, then every second turn, ... so a session's
    # later turn is normally sent after its earlier one finished.
    for turn in range(turns):
        for s in range(sessions):
            if len(out) == n:
                break
            history = histories[s]
            user = {"role": "user", "content": prose(rng, rng.randint(20, 120))}
            messages = (*history, user)
            prompt = _tokens(system) + sum(_tokens(json.dumps(t)) for t in tools) + sum(
                _tokens(str(m.get("content", m.get("tool_call", "")))) + 4 for m in messages
            ) + 3
            out.append(
                TrafficRequest(len(out), "agent", prompt, rng.randint(30, 300), system, messages, tools,
                               bucket=f"turn{turn + 1}", prefix_id="agent", session=f"s{s}")
            )  # fmt: skip
            call_id = f"call_{s}_{turn}"
            history += [
                user,
                {"role": "assistant", "tool_call": {"id": call_id, "name": tools[turn % len(tools)]["name"], "arguments": json.dumps({"query": prose(rng, 8)})}},
                {"role": "tool", "tool_call_id": call_id, "content": prose(rng, rng.randint(80, 400))},
                {"role": "assistant", "content": prose(rng, rng.randint(20, 80))},
            ]  # fmt: skip
    return out


def _shared_prefix(n: int, rng: random.Random, documents: int) -> list[TrafficRequest]:
    docs = [prose(rng, rng.randint(1500, 3000)) for _ in range(documents)]
    system = _SYSTEMS["rag"]
    out = []
    for i in range(n):
        k = rng.randrange(documents)
        system_k = f"{system}\n\nDocument {k}:\n{docs[k]}"
        question = prose(rng, rng.randint(15, 60))
        prompt = _tokens(system_k) + _tokens(question) + _OVERHEAD
        out.append(TrafficRequest(i, "shared-prefix", prompt, rng.randint(50, 300), system_k,
                                  ({"role": "user", "content": question},), bucket=f"doc{k}", prefix_id=f"doc{k}"))  # fmt: skip
    return out


def _few_shot(n: int, rng: random.Random, examples: int = 8) -> list[TrafficRequest]:
    shots = "\n\n".join(f"Example {j + 1}\nQ: {prose(rng, 40)}\nA: {prose(rng, 100)}" for j in range(examples))
    system = "Answer in the style of the examples.\n\n" + shots
    out = []
    for i in range(n):
        q = prose(rng, rng.randint(20, 100))
        out.append(TrafficRequest(i, "few-shot", _tokens(system) + _tokens(q) + _OVERHEAD, rng.randint(20, 200), system,
                                  ({"role": "user", "content": q},), prefix_id="few-shot"))  # fmt: skip
    return out


def _reasoning(i: int, rng: random.Random) -> TrafficRequest:
    bucket, prompt, _ = _lengths("chat", rng)
    system = _SYSTEMS["chat"]
    text = prose(rng, max(prompt - _OVERHEAD - _tokens(system), 8))
    return TrafficRequest(i, "reasoning", prompt, rng.randint(50, 300), system, ({"role": "user", "content": text},),
                          bucket=bucket, extra={"reasoning_tokens": rng.randint(64, 512)})  # fmt: skip


def generate(shape: str, n: int, *, seed: int = 0, documents: int = 4) -> list[TrafficRequest]:
    """``n`` requests of a traffic shape (not ``replay``: see `load_replay`; not ``sessions``: see
    `latencykit.bench._sessions.generate_sessions`), deterministic for ``seed``."""
    if shape not in SHAPES or shape in _OWN:
        raise ValueError(f"traffic shape must be one of {', '.join(s for s in SHAPES if s not in _OWN)}; got {shape!r}")
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"number of requests must be a positive int, got {n!r}")
    if documents < 1:
        raise ValueError(f"documents must be >= 1, got {documents!r}")
    rng = random.Random(f"latencykit-bench:{shape}:{seed}")
    if shape in PROFILES:
        return [_simple(shape, i, rng) for i in range(n)]
    if shape == "agent":
        return _agent(n, rng)
    if shape == "shared-prefix":
        return _shared_prefix(n, rng, documents)
    if shape == "reasoning":
        return [_reasoning(i, rng) for i in range(n)]
    return _few_shot(n, rng)


_TIME_KEYS = ("timestamp", "t", "at", "started_at")


def load_replay(lines: Iterable[str] | str | Path, *, seed: int = 0) -> list[TrafficRequest]:
    """Requests from JSONL: one object per line with ``prompt_tokens`` (or ``input_tokens``)
    and ``output_tokens``, optionally ``messages`` / ``system`` bodies and a timestamp
    (``timestamp``, ``t``, ``at`` or ``started_at``, seconds). Lines of ``Recorder.to_jsonl()``
    qualify: records that did not complete or lack token counts are skipped. Without bodies,
    text of the right length is generated. ``ValueError`` names the bad line."""
    if isinstance(lines, (str, Path)):
        lines = Path(lines).read_text().splitlines()
    rng = random.Random(f"latencykit-bench:replay:{seed}")
    rows: list[tuple[Optional[float], dict[str, Any]]] = []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"replay line {no} is not JSON: {exc}") from None
        if not isinstance(row, dict):
            raise ValueError(f"replay line {no} must be a JSON object, got {type(row).__name__}")
        if row.get("outcome") not in (None, "completed"):
            continue
        prompt = row.get("prompt_tokens", row.get("input_tokens"))
        out = row.get("output_tokens")
        if prompt is None or out is None:
            if "outcome" in row:  # a Recorder record without usage
                continue
            raise ValueError(f"replay line {no} needs prompt_tokens (or input_tokens) and output_tokens: {line[:80]!r}")
        if not (isinstance(prompt, int) and isinstance(out, int) and prompt >= 1 and out >= 1):
            raise ValueError(f"replay line {no}: token counts must be positive ints, got {prompt!r} and {out!r}")
        at = next((row[k] for k in _TIME_KEYS if isinstance(row.get(k), (int, float))), None)
        rows.append((float(at) if at is not None else None, {**row, "prompt_tokens": prompt, "output_tokens": out}))
    if not rows:
        raise ValueError("replay input holds no usable requests")
    t0 = min((a for a, _ in rows if a is not None), default=None)
    out_reqs: list[TrafficRequest] = []
    for i, (at, row) in enumerate(rows):
        messages: Sequence[dict[str, Any]] = row.get("messages") or (
            {"role": "user", "content": prose(rng, max(row["prompt_tokens"] - _OVERHEAD, 1))},
        )
        out_reqs.append(
            TrafficRequest(i, "replay", row["prompt_tokens"], row["output_tokens"], str(row.get("system") or ""),
                           tuple(messages), at=None if at is None or t0 is None else at - t0)
        )  # fmt: skip
    return out_reqs
