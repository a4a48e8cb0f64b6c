"""The record invariant on every real recorded stream, replayed over HTTP through the sync clients,
and on synthetic Chat chunk sequences (a property test on `ChatTap`).

``ttfb ≤ ttft ≤ ttft + decode_time ≤ e2e``, and ``chunks`` is the number of events that carry a
generated token (`_invariant.token_events`). The async mirror is ``test_record_invariant_async.py``.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator, Optional

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai._models import construct_type
from openai.types.chat import ChatCompletionChunk

import latencykit as lk
from latencykit import CallRecord, CallTimer
from latencykit.providers.openai import ChatTap

from _invariant import STREAMS, assert_invariant, is_stream, payloads, token_events, wire_body
from _replay import RECORDED, Replay
from _wire_bodies import ANT_REQ_SMALL, CHAT_REQ_SMALL
from conftest import RESP_REQ

ISSUE_27_COUNTS = {
    "chat-stream-deepseek-usage-on-empty-finish.yaml": (211, 209),
    "chat-stream-deepseek-tool-call-usage-on-empty-finish-chunks.yaml": (52, 49),
    "chat-stream-openrouter-grok4-usage-after-finish.yaml": (73, 70),
    "chat-stream-openrouter-o3-usage-after-finish.yaml": (102, 99),
    "chat-stream-openrouter-deepseek-usage-repeats-finish.yaml": (19, 12),
    "chat-stream-hf-router-usage-unasked.yaml": (4, 1),
}
"""(chunks, chunks with content, reasoning or tool arguments), counted by hand on each recording."""


@pytest.fixture
def replay() -> Iterator[Replay]:
    """A local server answering every POST with a canned body."""
    with Replay() as server:
        yield server


def test_every_recorded_stream_is_checked() -> None:
    """A new recorded stream must be listed in `STREAMS`, and so checked here."""
    streams = {p.name for p in RECORDED.iterdir() if is_stream(p)}
    assert streams == set(STREAMS)


@pytest.mark.parametrize("name", sorted(ISSUE_27_COUNTS))
def test_the_oracle_counts_what_the_recordings_hold(name: str) -> None:
    """The oracle's token-chunk count on the issue-27 recordings is the hand count."""
    events = payloads(name)
    assert (len(events), token_events("chat", events)) == ISSUE_27_COUNTS[name]


UNMERGEABLE = {"chat-stream-openrouter-deepseek-usage-repeats-finish.yaml"}
"""Streams the SDK's own chunk accumulator rejects (OpenRouter's ``annotations`` deltas carry no
``index``): the raw ``.stream()`` helper raises on them, and so does a reassembling create()."""


def _calls(api: str, client: Any, name: str) -> list[Callable[[], Any]]:
    if api == "chat":
        def helper() -> Any:
            with client.chat.completions.stream(**CHAT_REQ_SMALL) as stream:
                return list(stream)  # not get_final_completion(): it raises on finish_reason "length"

        streamed = lambda: list(client.chat.completions.create(stream=True, **CHAT_REQ_SMALL))  # noqa: E731
        if name in UNMERGEABLE:
            return [streamed]
        return [streamed, lambda: client.chat.completions.create(**CHAT_REQ_SMALL), helper]
    if api == "anthropic":
        return [lambda: list(client.messages.create(stream=True, **ANT_REQ_SMALL)), lambda: client.messages.create(**ANT_REQ_SMALL)]
    return [lambda: list(client.responses.create(stream=True, **RESP_REQ)), lambda: client.responses.create(**RESP_REQ)]


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_recorded_stream_keeps_the_invariant(replay: Replay, name: str) -> None:
    """Each real recorded stream, through create(stream=True), create() (and Chat's .stream()):
    the record's times are ordered and its chunks are the token-bearing events."""
    api = STREAMS[name]
    replay.serve(wire_body(name))
    expected = token_events(api, payloads(name))
    assert expected > 0
    client: Any
    if api == "anthropic":
        client = lk.Anthropic(base_url=replay.base_url, api_key="sk-ant-test", max_retries=0)
    else:
        client = lk.OpenAI(base_url=replay.base_url + "/v1", api_key="sk-test", max_retries=0)
    try:
        for call in _calls(api, client, name):
            call()
            assert_invariant(client.latency.last, expected)
    finally:
        client.close()


def test_unmergeable_stream_fails_the_raw_helper_too(replay: Replay) -> None:
    """The SDK's own helper cannot merge OpenRouter's index-less annotation deltas: not latencykit's doing."""
    replay.serve(wire_body("chat-stream-openrouter-deepseek-usage-repeats-finish.yaml"))
    raw = openai.OpenAI(base_url=replay.base_url + "/v1", api_key="sk-test", max_retries=0)
    with pytest.raises(RuntimeError, match="index"):
        with raw.chat.completions.stream(**CHAT_REQ_SMALL) as stream:
            list(stream)
    raw.close()


def test_reports_of_real_servers_keep_the_invariant() -> None:
    """What latencykit recorded against real vLLM and llama.cpp servers (ms, rounded to 0.01)."""
    seen = 0
    for name in ("real-latencykit-vs-llama-server.txt", "real-latencykit-vs-vllm-cpu.txt"):
        for line in (RECORDED / name).read_text().splitlines():
            if "latencykit (ms): {" in line:
                rec = json.loads(line.split("latencykit (ms): ", 1)[1])
                if rec["outcome"] == "completed" and rec["ttft"] is not None:
                    assert rec["ttfb"] <= rec["ttft"] <= rec["ttft"] + rec["decode_time"] <= rec["e2e"] + 0.02, rec
                    seen += 1
    assert seen >= 20


# -- property test over synthetic chunk sequences ------------------------------------------------


class Clock:
    """A clock the test sets: event ``i`` is read at ``i + 1`` s, the call starts at 0."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


_KINDS = ["text", "empty", "reasoning_content", "reasoning", "reasoning_details", "tool_args", "tool_header", "refusal"]


def _delta(kind: str) -> dict[str, Any]:
    return {
        "text": {"content": "ab"},
        "empty": {"content": ""},
        "partial_utf8": {"content": ""},
        "reasoning_content": {"content": None, "reasoning_content": "hm"},
        "reasoning": {"reasoning": "hm"},
        "reasoning_details": {"content": "", "reasoning_details": [{"type": "reasoning.text", "text": "hm", "index": 0}]},
        "tool_args": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]},
        "tool_header": {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}]},
        "refusal": {"refusal": "no"},
    }[kind]


@st.composite
def chat_streams(draw: Any) -> tuple[list[dict[str, Any]], bool]:
    """A Chat stream as real servers shape it: one or two choices (interleaved), deltas on every
    channel, and the usage where each kind of server puts it; whether ``[DONE]`` follows."""
    usage_mode = draw(st.sampled_from(["none", "usage_only", "on_finish", "after_finish", "after_finish_repeat", "continuous"]))
    n = 1 if usage_mode == "continuous" else draw(st.integers(1, 2))
    kinds = _KINDS + (["partial_utf8"] if usage_mode == "continuous" else [])
    per_choice = [draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=8)) for _ in range(n)]
    order = draw(st.permutations([i for i, ks in enumerate(per_choice) for _ in ks + ["finish"]]))
    chunks: list[dict[str, Any]] = []
    cursor = [0] * n
    generated = 0

    def chunk(index: int, delta: dict[str, Any], finish: Optional[str] = None, usage: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        body: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                                "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}  # fmt: skip
        if usage is not None:
            body["usage"] = usage
        return body

    def usage_of(done: int) -> dict[str, Any]:
        return {"prompt_tokens": 3, "completion_tokens": done, "total_tokens": 3 + done}

    chunks.append(chunk(0, {"role": "assistant", "content": ""}, usage=usage_of(0) if usage_mode == "continuous" else None))
    for index in order:
        ks = per_choice[index]
        if cursor[index] < len(ks):
            kind = ks[cursor[index]]
            cursor[index] += 1
            grows = kind not in ("empty", "tool_header")
            generated += grows
            chunks.append(chunk(index, _delta(kind), usage=usage_of(generated) if usage_mode == "continuous" else None))
        else:
            last = usage_mode == "on_finish" and all(c >= len(k) for c, k in zip(cursor, per_choice)) and index == order[-1]
            chunks.append(chunk(index, {"content": ""}, "stop", usage_of(generated) if last or usage_mode == "continuous" else None))
    if usage_mode == "usage_only" or usage_mode == "continuous":
        chunks.append({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [], "usage": usage_of(generated)})
    elif usage_mode.startswith("after_finish"):
        finish = "stop" if usage_mode == "after_finish_repeat" else None
        chunks.append(chunk(0, {"role": "assistant", "content": ""}, finish, usage_of(generated)))
    return chunks, draw(st.booleans())


@settings(max_examples=300, deadline=None)
@given(chat_streams())
def test_chat_tap_keeps_the_invariant(stream: tuple[list[dict[str, Any]], bool]) -> None:
    """Any Chat stream: chunks = token-bearing chunks, times ordered, E2E at the last finish, one
    finish reason per choice; a usage at the end never counts as a token."""
    events, done = stream
    sink: list[CallRecord] = []
    clock = Clock()
    timer = CallTimer(CallRecord(provider="openai", operation="chat", request_model=None), clock=clock, sink=sink.append)
    tap = ChatTap(timer, hide_usage=False)
    for i, raw in enumerate(events):
        clock.now = i + 1.0
        tap(construct_type(type_=ChatCompletionChunk, value=raw))
    clock.now += 1.0
    if done:
        timer.terminal()  # what `ChatTap.ended` does at [DONE]
    timer.exhausted()
    rec = sink[0]
    assert_invariant(rec, token_events("chat", events), slack=0.0)
    n = 1 + max(c["choices"][0]["index"] for c in events if c["choices"])
    assert len(rec.finish_reasons) == n
    finishes = [i for i, c in enumerate(events) if c["choices"] and c["choices"][0]["finish_reason"]]
    # E2E ends at the first finish after the last token.
    closing = min(i for i in finishes if not any(_carries_after(events, i)))
    assert rec.e2e == closing + 1


def _carries_after(events: list[dict[str, Any]], i: int) -> Iterator[bool]:
    for event in events[i + 1 :]:
        for choice in event["choices"]:
            yield token_events("chat", [{"choices": [choice]}]) > 0
