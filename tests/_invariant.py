"""The record invariant, and which events of a recorded stream carry a generated token.

Every finished streamed record must satisfy ``ttfb ≤ ttft ≤ ttft + decode_time ≤ e2e``, and
``chunks`` must be the number of token-bearing events. The oracles below say, from the raw
JSON payloads alone, which events carry a token (docs/timing.md, "What counts as a generated
token"); they share no code with the taps they check.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

import yaml

from _replay import recorded_body, sse_events

__all__ = ["STREAMS", "is_stream", "wire_body", "payloads", "token_events", "assert_invariant"]

STREAMS: dict[str, str] = {
    "anthropic-stream-cache-write.yaml": "anthropic",
    "anthropic-stream-cache-read.yaml": "anthropic",
    "anthropic-stream-tool-use.yaml": "anthropic",
    "anthropic-stream-thinking.yaml": "anthropic",
    "anthropic-stream-modern-basic.yaml": "anthropic",
    "anthropic-stream-thinking-modern.yaml": "anthropic",
    "anthropic-stream-cache-read-modern-compaction.yaml": "anthropic",
    "anthropic-stream-cache-mixed-modern-chunks.yaml": "anthropic",
    "openai-stream-include-usage.yaml": "chat",
    "openai-stream-tool-calls-include-usage.yaml": "chat",
    "openai-stream-tool-calls-parallel.yaml": "chat",
    "chat-stream-deepseek-usage-on-empty-finish.yaml": "chat",
    "chat-stream-deepseek-tool-call-usage-on-empty-finish-chunks.yaml": "chat",
    "chat-stream-openrouter-grok4-usage-after-finish.yaml": "chat",
    "chat-stream-openrouter-o3-usage-after-finish.yaml": "chat",
    "chat-stream-openrouter-deepseek-usage-repeats-finish.yaml": "chat",
    "chat-stream-hf-router-usage-unasked.yaml": "chat",
    "real-vllm-cpu-sse-continuous-usage.txt": "chat",
    "real-llama-server-sse.txt": "chat",
    "openai-responses-stream-basic.yaml": "responses",
    "openai-responses-stream-cached-tokens.yaml": "responses",
}
"""Every recorded stream under ``fixtures/recorded`` and the API it speaks."""



def is_stream(path: Path) -> bool:
    """Whether a recording is an event stream (SSE, or a vercel chunk file); the others are JSON
    answers to non-streamed requests (latencykit always streams, so they cannot be replayed to
    it), ``/metrics`` and ``/slots`` pages, and reports of what latencykit measured."""
    if path.suffix == ".yaml":
        doc = yaml.safe_load(path.read_text())
        kind = str(doc.get("response_content_type") or "") + str(doc.get("response_format") or "")
        return "event-stream" in kind or "chunks.txt" in kind
    return path.suffix == ".txt" and any(line.startswith("data: {") for line in path.read_text().splitlines())


_CHUNK = "chat.completion.chunk"


def _is_chunk_file(name: str) -> bool:
    """vercel/ai ``.chunks.txt`` copies: one JSON payload per line, no ``data:`` framing."""
    return name.endswith("-chunks.yaml")


def payloads(name: str) -> list[dict[str, Any]]:
    """The JSON payloads of a recorded stream, in order (``[DONE]`` and comments left out)."""
    body = recorded_body(name)
    if _is_chunk_file(name):
        return [json.loads(line) for line in body.splitlines() if line.strip().startswith("{")]
    out = []
    for line in body.splitlines():
        if line.startswith("data:"):
            data = line[5:].strip()
            if data.startswith("{"):
                out.append(json.loads(data))
    return out


def wire_body(name: str) -> str:
    """The SSE body to replay: the recording itself, or a chunk file framed as SSE (Anthropic
    with its ``event:`` lines)."""
    if not _is_chunk_file(name):
        return recorded_body(name)
    return sse_events(payloads(name), named=STREAMS[name] == "anthropic")


def _delta_carries(delta: dict[str, Any]) -> bool:
    if delta.get("content") or delta.get("refusal"):
        return True
    if delta.get("reasoning_content") or delta.get("reasoning") or delta.get("reasoning_details"):
        return True
    return any((call.get("function") or {}).get("arguments") for call in delta.get("tool_calls") or [])


def _chat(events: Iterable[dict[str, Any]]) -> int:
    count, generated, counted_every_chunk, live = 0, 0, False, True
    for event in events:
        if event.get("object", _CHUNK) != _CHUNK:
            continue
        choices = event.get("choices") or []
        usage = event.get("usage")
        if usage and not choices:
            live = False  # the usage-only chunk: after every choice finished
            continue
        carries = any(_delta_carries(choice.get("delta") or {}) for choice in choices)
        if usage:
            done = usage.get("completion_tokens")
            if isinstance(done, int):
                # By the server's count only where it counts every chunk, while still generating.
                carries = carries or (done > generated and counted_every_chunk and live)
                generated = done
            counted_every_chunk = True
        if carries:
            count += 1
            live = True
        if any(choice.get("finish_reason") for choice in choices):
            live = False
    return count


_ANTHROPIC_FIELD = {
    "text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json",
    "citations_delta": "citation", "compaction_delta": "content",
}  # fmt: skip

_RESPONSES_DELTAS = {
    "response.output_text.delta", "response.refusal.delta", "response.reasoning_text.delta",
    "response.reasoning_summary_text.delta", "response.function_call_arguments.delta",
    "response.custom_tool_call_input.delta", "response.code_interpreter_call_code.delta",
    "response.mcp_call_arguments.delta", "response.audio.transcript.delta",
}  # fmt: skip


def token_events(api: str, events: list[dict[str, Any]]) -> int:
    """How many of ``events`` carry a generated token on any channel."""
    if api == "chat":
        return _chat(events)
    if api == "anthropic":
        return sum(
            1
            for e in events
            if e.get("type") == "content_block_delta" and bool(e["delta"].get(_ANTHROPIC_FIELD.get(e["delta"]["type"], "-")))
        )
    return sum(1 for e in events if e.get("type") in _RESPONSES_DELTAS and bool(e.get("delta")))


def assert_invariant(rec: Any, chunks: int, slack: float = 1e-9) -> None:
    """``ttfb ≤ ttft ≤ ttft + decode_time ≤ e2e`` and ``chunks`` token-bearing events.

    ``slack`` absorbs float rounding only (``ttft + decode_time`` is a sum of two differences).
    """
    assert rec.outcome == "completed", (rec.outcome, rec.error_type)
    assert rec.chunks == chunks
    if not chunks:  # nothing generated: no first or last token
        assert rec.ttft is None and rec.decode_time is None and 0 <= rec.ttfb <= rec.e2e, rec
        return
    assert None not in (rec.ttfb, rec.ttft, rec.decode_time, rec.e2e), rec
    last = rec.ttft + rec.decode_time
    assert 0 <= rec.ttfb <= rec.ttft <= last <= rec.e2e + slack, (rec.ttfb, rec.ttft, last, rec.e2e)
