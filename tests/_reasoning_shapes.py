"""Reasoning-model shapes on the emulator, with known timing, and the raw SDK's view of each (truth).

Each shape: how to call it (API, model, request) and which TPOT rule applies. The emulator makes
the first token 100 ms after the request, reasoning tokens 3 ms apart where hidden, and every
streamed token 20 ms apart (`HEADERS`). The truth for TTFO and TTFT is what the raw SDK sees on the
same request: the first answer event and the first event of any generated kind.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

TPOT_S = 0.020
HEADERS = {
    "x-emulator-ttft-ms": "100", "x-emulator-tpot-ms": "20", "x-emulator-output-tokens": "20",
    "x-emulator-reasoning-tokens": "60", "x-emulator-reasoning-tpot-ms": "3",
}  # fmt: skip
USER = [{"role": "user", "content": "How many primes are there below 100? Think first."}]


@dataclass(frozen=True)
class Shape:
    """One reasoning shape: the call, the rule, and how far TPOT may be from the truth."""

    name: str
    api: str  # chat | responses | messages
    request: dict[str, Any]
    basis: str
    tolerance: float


SHAPES = (
    Shape("chat-hidden", "chat", {"model": "o3", "messages": USER}, "answer", 0.15),
    Shape("responses-hidden", "responses", {"model": "o3", "input": USER}, "answer", 0.15),
    Shape("responses-summary", "responses", {"model": "o3", "input": USER, "reasoning": {"summary": "auto"}}, "answer", 0.15),
    Shape("chat-streamed", "chat", {"model": "deepseek-reasoner", "messages": USER}, "streamed_reasoning", 0.15),
    Shape("anthropic-summarized", "messages", {"model": "claude-sonnet-4-5", "max_tokens": 4096, "messages": USER,
          "thinking": {"type": "enabled", "budget_tokens": 2048}}, "answer_estimate", 0.35),  # fmt: skip
    Shape("anthropic-omitted", "messages", {"model": "claude-sonnet-4-6", "max_tokens": 4096, "messages": USER,
          "thinking": {"type": "enabled", "budget_tokens": 2048, "display": "omitted"}}, "answer_estimate", 0.35),  # fmt: skip
    Shape("anthropic-3.7-full", "messages", {"model": "claude-3-7-sonnet-latest", "max_tokens": 4096, "messages": USER,
          "thinking": {"type": "enabled", "budget_tokens": 2048}}, "streamed_reasoning", 0.15),  # fmt: skip
)


def resource(client: Any, api: str) -> Any:
    """The resource whose ``create`` the shape calls."""
    return {"chat": lambda: client.chat.completions, "responses": lambda: client.responses, "messages": lambda: client.messages}[api]()


def kind_of(api: str, event: Any) -> str:
    """``answer``, ``reasoning`` or ``other`` for one raw SDK stream event."""
    if api == "chat":
        if not event.choices:
            return "other"
        delta = event.choices[0].delta
        if delta.content or delta.tool_calls:
            return "answer"
        extra = delta.model_extra or {}
        return "reasoning" if extra.get("reasoning_content") or extra.get("reasoning_details") else "other"
    if api == "responses":
        if event.type == "response.output_text.delta" and event.delta:
            return "answer"
        if event.type in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta") and event.delta:
            return "reasoning"
        return "other"
    if event.type == "content_block_delta":
        if event.delta.type == "text_delta":
            return "answer"
        if event.delta.type == "thinking_delta" and event.delta.thinking:
            return "reasoning"
    return "other"


class Truth:
    """What the raw SDK saw on one streamed call: first generated token, first answer token."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.first: float | None = None
        self.answer: float | None = None

    def see(self, api: str, event: Any) -> None:
        """Note one event as it reaches the caller."""
        kind = kind_of(api, event)
        now = time.perf_counter() - self.t0
        if kind != "other" and self.first is None:
            self.first = now
        if kind == "answer" and self.answer is None:
            self.answer = now


def check(rec: Any, shape: Shape, truth: Truth, same_call: bool) -> None:
    """What the record must say against the truth: TTFT and TTFO within 60 ms (on the same call; across two
    calls, the reasoning span TTFO − TTFT within 60 ms), TPOT within the shape's tolerance of 20 ms, the rule,
    the billed counts."""
    assert rec.outcome == "completed" and rec.tpot_basis == shape.basis
    assert truth.first is not None and truth.answer is not None
    if same_call:
        assert abs(rec.ttft - truth.first) < 0.060, (rec.ttft, truth.first)
        assert abs(rec.ttfo - truth.answer) < 0.060, (rec.ttfo, truth.answer)
    else:
        assert abs((rec.ttfo - rec.ttft) - (truth.answer - truth.first)) < 0.060, (rec.ttfo - rec.ttft, truth.answer - truth.first)
    assert abs(rec.tpot / TPOT_S - 1) <= shape.tolerance, (rec.tpot, shape.tolerance)
    assert rec.output_tokens == 80  # 60 reasoning + 20 answer, billed
    if shape.api != "messages":
        assert rec.reasoning_tokens == 60
    assert rec.reasoning_time is not None and 0 < rec.reasoning_time <= rec.ttfo
