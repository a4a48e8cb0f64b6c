"""Reasoning models: TTFO, reasoning time and TPOT over what was streamed (core, recordings, properties).

The rules (docs/timing.md, "Reasoning models"): reasoning streamed token by token → every billed
token was streamed, TPOT over the whole stream; reasoning billed but hidden (or summarized, with its
count reported) → TPOT over the answer's window and its own tokens; Anthropic thinking whose billed
count is far above what was streamed (a summary, or "omitted") → the answer's tokens estimated from
its text. TTFT stays the first token on any channel; TTFO is the answer's first token.
"""

from __future__ import annotations

from typing import Any, Optional

from hypothesis import given, settings
from hypothesis import strategies as st
from openai._models import construct_type
from openai.types.chat import ChatCompletionChunk
from anthropic.types import RawMessageStreamEvent

from latencykit import CallRecord, CallTimer
from latencykit.core._text_tokens import estimate_streamed_tokens
from latencykit.core._timing import REASONING_OPAQUE, REASONING_SUMMARY, REASONING_TEXT, THINKING
from latencykit.providers.anthropic import AnthropicTap
from latencykit.providers.openai import ChatTap

from test_recorded import _events, _replay


class Script:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _timer(clock: Script) -> tuple[CallTimer, list[CallRecord]]:
    out: list[CallRecord] = []
    return CallTimer(CallRecord("openai", "chat", "m"), clock=clock, sink=out.append), out


def _drive(steps: list[tuple[float, str]], output: Optional[int], reasoning: Optional[int] = None,
           estimate: Optional[tuple[int, int]] = None, block: int = 0) -> CallRecord:
    """Events at absolute times: ``"answer"`` or a reasoning kind name; then the usage and the end."""
    kinds = {"text": REASONING_TEXT, "summary": REASONING_SUMMARY, "opaque": REASONING_OPAQUE, "thinking": THINKING}
    clock = Script()
    timer, out = _timer(clock)
    if block:
        timer.reasoning_block(block)
    for at, kind in steps:
        clock.now = at
        if kind == "answer":
            timer.token()
        elif kind == "role":
            timer.event(False)
        else:
            timer.reasoning(kinds[kind])
    timer.record.output_tokens = output
    timer.record.reasoning_tokens = reasoning
    timer.streamed_estimate = estimate
    timer.terminal()
    timer.exhausted()
    return out[0]


def test_no_reasoning_keeps_the_plain_rule() -> None:
    """Without reasoning, TTFO = TTFT and TPOT = window / (output − 1), basis "output"."""
    rec = _drive([(0.0, "role"), (0.2, "answer"), (0.3, "answer"), (0.4, "answer")], output=3)
    assert rec.ttfo == rec.ttft == 0.2
    assert abs(rec.tpot - 0.1) < 1e-12 and rec.tpot_basis == "output"
    assert rec.reasoning_time is None and rec.reasoning_time_basis is None


def test_hidden_reasoning_divides_by_the_answer_only() -> None:
    """The issue's stand-in: role chunk, 1.0 s of silence (1,000 reasoning tokens billed), 50 answer
    tokens 20 ms apart. TPOT is 20 ms (not 0.97 ms); TTFO = TTFT; reasoning time estimated, capped at TTFO."""
    steps = [(0.0, "role")] + [(1.0 + 0.02 * i, "answer") for i in range(50)]
    rec = _drive(steps, output=1050, reasoning=1000)
    assert abs(rec.tpot - 0.02) < 1e-9 and rec.tpot_basis == "answer"
    assert rec.ttft == rec.ttfo == 1.0
    assert rec.reasoning_time_basis == "hidden_estimate" and rec.reasoning_time == 1.0  # 1000 × 20 ms, capped at TTFO


def test_streamed_reasoning_counts_every_token() -> None:
    """DeepSeek-style reasoning_content: 100 reasoning + 50 answer tokens, all streamed 20 ms apart."""
    steps = [(0.1 + 0.02 * i, "text" if i < 100 else "answer") for i in range(150)]
    rec = _drive(steps, output=150, reasoning=100)
    assert abs(rec.tpot - 0.02) < 1e-9 and rec.tpot_basis == "streamed_reasoning"
    assert rec.ttft == 0.1 and abs(rec.ttfo - 2.1) < 1e-9
    assert abs(rec.reasoning_time - 2.0) < 1e-9 and rec.reasoning_time_basis == "streamed"


def test_summary_with_a_reported_count_uses_the_answer_rule() -> None:
    """Responses with a reasoning summary: 20 summary deltas over 2 s, then 40 answer tokens 10 ms apart;
    usage: 840 output, 800 of them reasoning."""
    steps = [(0.1 + 0.1 * i, "summary") for i in range(20)] + [(2.2 + 0.01 * i, "answer") for i in range(40)]
    rec = _drive(steps, output=840, reasoning=800)
    assert abs(rec.tpot - 0.01) < 1e-9 and rec.tpot_basis == "answer"
    assert rec.ttft == 0.1 and rec.ttfo == 2.2
    assert abs(rec.reasoning_time - 2.1) < 1e-9 and rec.reasoning_time_basis == "streamed"


def test_anthropic_summarized_thinking_estimates_the_answer() -> None:
    """Claude 4 thinking: 30 summary deltas, 1,000 thinking tokens billed with the answer's 50 in
    output_tokens and no split: the answer's tokens come from its text (estimate 50)."""
    steps = [(0.1 + 0.05 * i, "thinking") for i in range(30)] + [(2.0 + 0.02 * i, "answer") for i in range(50)]
    rec = _drive(steps, output=1050, estimate=(30, 50))
    assert abs(rec.tpot - 0.02) < 1e-9 and rec.tpot_basis == "answer_estimate"
    assert rec.ttfo == 2.0 and rec.reasoning_time_basis == "streamed"


def test_anthropic_full_thinking_is_streamed_whole() -> None:
    """Claude 3.7: the streamed thinking is the whole thinking (billed ≈ estimated streamed): plain rule."""
    steps = [(0.1 + 0.02 * i, "thinking" if i < 100 else "answer") for i in range(150)]
    rec = _drive(steps, output=150, estimate=(100, 50))
    assert abs(rec.tpot - 0.02) < 1e-9 and rec.tpot_basis == "streamed_reasoning"


def test_anthropic_omitted_thinking_is_hidden() -> None:
    """display "omitted": a thinking block with no text; output bills 1,000 more tokens than the answer."""
    steps = [(1.0 + 0.02 * i, "answer") for i in range(50)]
    rec = _drive(steps, output=1050, estimate=(0, 50), block=THINKING)
    assert abs(rec.tpot - 0.02) < 1e-9 and rec.tpot_basis == "answer_estimate"
    assert rec.ttfo == rec.ttft == 1.0 and rec.reasoning_time_basis == "hidden_estimate"


def test_thinking_without_an_end_leaves_tpot_unknown() -> None:
    """Anthropic thinking and no estimate (the stream never reached message_stop): TPOT None, said so."""
    steps = [(0.1, "thinking"), (0.2, "answer"), (0.3, "answer")]
    rec = _drive(steps, output=400)
    assert rec.tpot is None and rec.tpot_basis == "unknown"
    assert rec.ttfo == 0.2


def test_answer_shorter_than_two_tokens() -> None:
    """All output went to reasoning (the cap hit mid-thought): no TPOT, basis "unknown"; no TTFO."""
    rec = _drive([(0.0, "role"), (0.5, "answer")], output=500, reasoning=499)
    assert rec.tpot is None and rec.tpot_basis == "unknown"
    rec = _drive([(0.1, "text"), (0.2, "text")], output=2, reasoning=2)
    assert rec.ttfo is None and rec.ttft == 0.1


def test_estimate_is_a_lower_bound_never_below_deltas() -> None:
    """Pre-token estimate: words, 3-digit groups, symbols; never fewer than the deltas."""
    assert estimate_streamed_tokens(" the model streams.") == 4
    assert estimate_streamed_tokens("1234567") == 3
    assert estimate_streamed_tokens("ab", deltas=5) == 5
    assert estimate_streamed_tokens("supercalifragilistic") == 2


# -- real recordings ------------------------------------------------------------------------------


def _first(events: list[dict[str, Any]], pick: Any) -> int:
    return next(i for i, e in enumerate(events) if pick(e))


def test_deepseek_recording_streamed_reasoning() -> None:
    """DeepSeek reasoner: reasoning_content first, then content; every billed token streamed."""
    events = _events("chat-stream-deepseek-usage-on-empty-finish.yaml")
    rec, _ = _replay(ChatTap, ChatCompletionChunk, events, hide_usage=False)
    assert rec.tpot_basis == "streamed_reasoning" and rec.reasoning_tokens == 198
    assert rec.ttft is not None and rec.ttfo is not None and rec.ttft < rec.ttfo
    # Ticks: each event read is one second; TTFO is the first content chunk's tick.
    first_answer = _first(events, lambda e: e.get("choices") and e["choices"][0]["delta"].get("content"))
    first_reasoning = _first(events, lambda e: e.get("choices") and e["choices"][0]["delta"].get("reasoning_content"))
    assert rec.ttfo - rec.ttft == first_answer - first_reasoning
    assert rec.reasoning_time == rec.ttfo - rec.ttft and rec.reasoning_time_basis == "streamed"


def test_grok4_recording_hidden_reasoning_answer_rule() -> None:
    """OpenRouter Grok 4: an encrypted reasoning blob, 118 of 187 tokens reasoning: TPOT over the answer."""
    events = _events("chat-stream-openrouter-grok4-usage-after-finish.yaml")
    rec, _ = _replay(ChatTap, ChatCompletionChunk, events, hide_usage=False)
    assert rec.reasoning_tokens == 118 and rec.output_tokens == 187 and rec.tpot_basis == "answer"
    answers = [i for i, e in enumerate(events) if e.get("choices") and e["choices"][0]["delta"].get("content")]
    assert abs(rec.tpot - (answers[-1] - answers[0]) / (187 - 118 - 1)) < 1e-9
    assert rec.ttft < rec.ttfo  # the blob counts for TTFT (a generated item), not for TTFO
    assert rec.reasoning_time_basis == "hidden_estimate"


def test_o3_recording_opaque_blob_no_reasoning_billed() -> None:
    """OpenRouter o3: encrypted reasoning item, reasoning_tokens 0: every billed token is answer."""
    events = _events("chat-stream-openrouter-o3-usage-after-finish.yaml")
    rec, _ = _replay(ChatTap, ChatCompletionChunk, events, hide_usage=False)
    assert rec.tpot_basis == "output" and rec.output_tokens == 104
    assert rec.ttfo == rec.ttft + 1.0  # the text chunk right after the blob


def test_claude_thinking_recordings() -> None:
    """Claude 3.7 thinking (full) and Claude Sonnet 4 thinking: TTFO at the first text delta, TTFT at
    the first thinking delta, and each streamed the whole billed count (within the estimate's bounds)."""
    for name in ("anthropic-stream-thinking.yaml", "anthropic-stream-thinking-modern.yaml"):
        events = [e for e in _events(name) if e["type"] != "ping"]
        rec, _ = _replay(AnthropicTap, RawMessageStreamEvent, events)
        thinking = _first(events, lambda e: e["type"] == "content_block_delta" and e["delta"]["type"] == "thinking_delta")
        text = _first(events, lambda e: e["type"] == "content_block_delta" and e["delta"]["type"] == "text_delta")
        assert rec.ttfo - rec.ttft == text - thinking, name
        assert rec.tpot_basis == "streamed_reasoning", name


# -- properties ------------------------------------------------------------------------------------


def _chunk(delta: dict[str, Any], usage: Optional[dict[str, Any]] = None, finish: Optional[str] = None) -> Any:
    choices = [] if usage is not None and not delta else [{"index": 0, "delta": delta, "finish_reason": finish}]
    raw = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": choices, "usage": usage}
    return construct_type(type_=ChatCompletionChunk, value=raw)


_KINDS = st.sampled_from(["reasoning_content", "summary", "opaque"])


@settings(max_examples=200, deadline=None)
@given(
    kind=_KINDS,
    n_reasoning=st.integers(0, 30),
    n_answer=st.integers(0, 30),
    hidden=st.integers(0, 500),
    gaps=st.lists(st.floats(0.001, 0.5), min_size=70, max_size=70),
    role_at=st.floats(0.0, 0.2),
)
def test_property_order_and_tpot_floor(kind: str, n_reasoning: int, n_answer: int, hidden: int, gaps: list[float], role_at: float) -> None:
    """Random mixes of reasoning, answer and usage chunks, one token each, usage consistent with the kind:
    ttfb ≤ ttft ≤ ttfo ≤ e2e, and TPOT never below half the smallest gap between streamed tokens."""
    if kind == "reasoning_content":
        hidden = 0  # reasoning streamed token by token bills nothing beyond what was streamed
    clock = Script()
    out: list[CallRecord] = []
    timer = CallTimer(CallRecord("openai", "chat", "m"), clock=clock, sink=out.append)
    tap = ChatTap(timer, hide_usage=False)
    t = role_at
    clock.now = t
    tap(_chunk({"role": "assistant", "content": ""}))
    stamps: list[float] = []
    for i in range(n_reasoning + n_answer):
        t += gaps[i]
        clock.now = t
        stamps.append(t)
        if i >= n_reasoning:
            tap(_chunk({"content": f" w{i}"}))
        elif kind == "reasoning_content":
            tap(_chunk({"reasoning_content": f" r{i}"}))
        elif kind == "summary":
            tap(_chunk({"reasoning_details": [{"type": "reasoning.summary", "summary": f" s{i}"}]}))
        else:
            tap(_chunk({"reasoning_details": [{"type": "reasoning.encrypted", "data": "x"}]}))
    billed_reasoning = (n_reasoning if kind == "reasoning_content" else 0) + hidden
    output = billed_reasoning + n_answer
    t += gaps[-1]
    clock.now = t
    tap(_chunk({}, finish="stop"))
    tap(_chunk({}, usage={"prompt_tokens": 5, "completion_tokens": output, "total_tokens": output + 5,
                          "completion_tokens_details": {"reasoning_tokens": billed_reasoning}}))  # fmt: skip
    timer.exhausted()
    rec = out[0]
    seq = [rec.ttfb, rec.ttft, rec.ttfo, rec.e2e]
    present = [v for v in seq if v is not None]
    assert present == sorted(present)
    if rec.tpot is not None and len(stamps) >= 2:
        smallest = min(b - a for a, b in zip(stamps, stamps[1:]))
        assert rec.tpot >= smallest / 2 - 1e-12, (kind, n_reasoning, n_answer, hidden, rec.tpot_basis)
