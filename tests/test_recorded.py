"""The taps against real recorded provider streams: TTFT never stops on non-token events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from anthropic.types import RawMessageStreamEvent
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent
from anthropic._models import construct_type as construct_anthropic
from openai._models import construct_type as construct_openai

from latencykit import CallRecord, CallTimer
from latencykit.providers.anthropic import AnthropicTap
from latencykit.providers._usage_habit import UNVERIFIED
from latencykit.providers.openai import ChatTap, ResponsesTap

RECORDED = Path(__file__).resolve().parent / "fixtures" / "recorded"  # provenance: fixtures/README.md


def _events(name: str) -> list[dict[str, Any]]:
    body = yaml.safe_load((RECORDED / name).read_text())["response_body"]
    out = []
    for line in body.splitlines():
        if line.startswith("data:"):
            data = line[5:].strip()
            if data and data != "[DONE]":
                out.append(json.loads(data))
    return out


class Ticks:
    """A clock that advances 1 s per reading, so each event gets its own timestamp."""

    def __init__(self) -> None:
        self.n = 0.0

    def __call__(self) -> float:
        self.n += 1.0
        return self.n


def _replay(tap_cls: Any, type_: Any, events: list[dict[str, Any]], **kw: Any) -> tuple[CallRecord, list[str]]:
    # Built the way the SDKs build stream events (construct, not validate), so recordings
    # with fields newer or older than the installed SDK still load.
    construct = construct_anthropic if tap_cls is AnthropicTap else construct_openai
    sink: list[CallRecord] = []
    timer = CallTimer(CallRecord(provider="x", operation="chat", request_model=None), clock=Ticks(), sink=sink.append)
    tap = tap_cls(timer, **kw)
    kinds = []
    for raw in events:
        event = construct(type_=type_, value=raw)
        tap(event)
        kinds.append(raw.get("type") or ("usage" if not raw.get("choices") else "chunk"))
    timer.exhausted()
    return sink[0], kinds


@pytest.mark.parametrize(
    "name",
    [
        "anthropic-stream-cache-write.yaml",
        "anthropic-stream-tool-use.yaml",
        "anthropic-stream-thinking.yaml",
        "anthropic-stream-modern-basic.yaml",
        "anthropic-stream-thinking-modern.yaml",
    ],
)
def test_anthropic_recordings(name: str) -> None:
    """TTFT lands on the first non-empty text/thinking/tool delta, never on message_start or ping; usage is final."""
    events = _events(name)
    rec, _ = _replay(AnthropicTap, RawMessageStreamEvent, [e for e in events if e["type"] != "ping"])
    kept = [e for e in events if e["type"] != "ping"]
    first = next(
        i
        for i, e in enumerate(kept)
        if e["type"] == "content_block_delta"
        and any(e["delta"].get(k) for k in ("text", "thinking", "partial_json"))
    )
    # Ticks: the timer's start reading is 1, event i is read at i + 2.
    assert rec.ttfb == 1 and rec.ttft == first + 1
    last_delta = [e for e in kept if e["type"] == "message_delta"][-1]
    assert rec.output_tokens == last_delta["usage"]["output_tokens"] and rec.outcome == "completed"


@pytest.mark.parametrize("name", ["openai-stream-include-usage.yaml", "openai-stream-tool-calls-include-usage.yaml", "openai-stream-tool-calls-parallel.yaml"])
def test_openai_chat_recordings(name: str) -> None:
    """The role-only first chunk and the usage chunk are not tokens; usage comes from the final chunk."""
    events = _events(name)
    rec, _ = _replay(ChatTap, ChatCompletionChunk, events, hide_usage=False)
    assert rec.ttfb == 1 and rec.ttft is not None and rec.ttft > 1
    usage = [e for e in events if e.get("usage")]
    if usage:
        assert rec.output_tokens == usage[-1]["usage"]["completion_tokens"]
    assert rec.outcome == "completed" and rec.finish_reasons


@pytest.mark.parametrize("name", ["openai-responses-stream-basic.yaml", "openai-responses-stream-cached-tokens.yaml"])
def test_openai_responses_recordings(name: str) -> None:
    """TTFT is the first output/reasoning/arguments delta; usage and cached tokens come from response.completed."""
    events = _events(name)
    rec, kinds = _replay(ResponsesTap, ResponseStreamEvent, events)
    first = next(i for i, k in enumerate(kinds) if k.endswith(".delta") and events[i].get("delta"))
    assert rec.ttft == first + 1
    done = events[-1]["response"]["usage"]
    assert rec.output_tokens == done["output_tokens"] and rec.cache_read_tokens == done["input_tokens_details"]["cached_tokens"]


def test_an_object_that_is_not_a_chat_chunk_is_read_mid_stream() -> None:
    """A mid-stream item without ``usage``/``choices`` (not a chat chunk) is an event, not a token
    and not a failure: the one-text-piece shortcut leaves it to the full reading."""
    events = _events("openai-stream-include-usage.yaml")
    sink: list[CallRecord] = []
    timer = CallTimer(CallRecord(provider="x", operation="chat", request_model=None), clock=Ticks(), sink=sink.append)
    tap = ChatTap(timer, hide_usage=False)
    chunks = [construct_openai(type_=ChatCompletionChunk, value=raw) for raw in events]
    assert tap(chunks[0]) and tap(chunks[1])

    class Keepalive:
        object = "keepalive"

    assert tap(Keepalive()) is True
    for chunk in chunks[2:]:
        tap(chunk)
    timer.exhausted()
    rec = sink[0]
    usage = [e for e in events if e.get("usage")][-1]["usage"]
    assert rec.outcome == "completed" and rec.output_tokens == usage["completion_tokens"]
    assert "".join(tap.texts) == "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))


def test_a_hidden_usage_chunk_read_from_its_json_gives_the_record_and_a_partial_its_usage() -> None:
    """latencykit's own usage-only chunk is read from its SSE JSON (never built by the SDK): the
    record gets its counts at once, a partial output the SDK's ``CompletionUsage``, built then."""
    events = _events("openai-stream-include-usage.yaml")
    last = [e for e in events if e.get("usage")][-1]
    usage = {**last["usage"], "prompt_tokens_details": {"cached_tokens": 3}}
    sink: list[CallRecord] = []
    timer = CallTimer(CallRecord(provider="x", operation="chat", request_model=None), clock=Ticks(), sink=sink.append)
    tap = ChatTap(timer, hide_usage=True)
    assert not tap.take_usage_chunk(json.dumps(events[1]))  # a chunk with choices: the SDK's to parse
    assert tap.take_usage_chunk(json.dumps({**last, "usage": usage}))
    rec = timer.record
    assert (rec.input_tokens, rec.output_tokens, rec.cache_read_tokens) == (usage["prompt_tokens"], usage["completion_tokens"], 3)
    assert timer.saw_terminal and rec.extra["usage_chunk"] == UNVERIFIED
    built = tap.partial().usage
    assert isinstance(built, CompletionUsage) and built.prompt_tokens_details is not None
    assert built.model_dump(exclude_unset=True) == usage


def test_a_hidden_usage_chunk_with_odd_counts_is_read_as_the_sdk_would_keep_it() -> None:
    sink: list[CallRecord] = []
    timer = CallTimer(CallRecord(provider="x", operation="chat", request_model=None), clock=Ticks(), sink=sink.append)
    tap = ChatTap(timer, hide_usage=True)
    odd = {"prompt_tokens": "many", "completion_tokens": 4}
    assert tap.take_usage_chunk(json.dumps({"object": "chat.completion.chunk", "choices": [], "usage": odd}))
    assert (timer.record.input_tokens, timer.record.output_tokens) == (None, 4)
    kept = tap.partial().usage
    assert isinstance(kept, CompletionUsage) and kept.prompt_tokens == "many"  # unvalidated, as the SDK keeps it
