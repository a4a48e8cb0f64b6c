"""The emulator driven by the real anthropic and openai SDKs over real HTTP."""

from __future__ import annotations

import json
import gc
import statistics
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from latencykit.emulator import Emulator, TimingModel
from latencykit.emulator.pytest_plugin import lk_emulator, lk_emulator_session

__all__ = ["lk_emulator", "lk_emulator_session"]

CREATED = 1_700_000_000
MESSAGES: list[Any] = [{"role": "user", "content": "Say something."}]
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}},
    "required": ["city"],
}


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    """A fast emulator with a fixed `created` timestamp, shared by this module."""
    with Emulator(TimingModel(time_scale=0.0), seed=7, created=CREATED) as emulator:
        yield emulator


@pytest.fixture
def ant(emu: Emulator) -> Iterator[anthropic.Anthropic]:
    """A raw Anthropic client pointed at the emulator."""
    with anthropic.Anthropic(base_url=emu.base_url, api_key="x", max_retries=0) as client:
        yield client


@pytest.fixture
def oai(emu: Emulator) -> Iterator[openai.OpenAI]:
    """A raw OpenAI client pointed at the emulator."""
    with openai.OpenAI(base_url=emu.base_url + "/v1", api_key="x", max_retries=0) as client:
        yield client


def test_anthropic_nonstream_parses(ant: anthropic.Anthropic) -> None:
    """A non-streaming Messages call parses into a Message with modern usage."""
    msg = ant.messages.create(model="claude-test", max_tokens=100, messages=MESSAGES)
    assert msg.id.startswith("msg_") and len(msg.id) == 28
    assert msg.model == "claude-test" and msg.stop_reason == "end_turn"
    assert msg.content[0].type == "text" and msg.content[0].text.endswith(".")
    assert msg.usage.output_tokens == 32 and msg.usage.cache_read_input_tokens == 0
    assert msg.usage.cache_creation is not None and msg.usage.service_tier == "standard"


def test_anthropic_stream_matches_nonstream(ant: anthropic.Anthropic) -> None:
    """`messages.stream().get_final_message()` equals the non-streamed Message field for field."""
    plain = ant.messages.create(model="claude-test", max_tokens=100, messages=MESSAGES)
    with ant.messages.stream(model="claude-test", max_tokens=100, messages=MESSAGES) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == plain.content[0].text  # type: ignore[union-attr]
    assert final.to_dict() == plain.to_dict() | {"content": final.to_dict()["content"]}
    assert final.content[0].text == text  # type: ignore[union-attr]


def test_anthropic_raw_event_order(ant: anthropic.Anthropic, emu: Emulator) -> None:
    """Raw stream: message_start, first block start, deltas, message_delta with cumulative usage."""
    events = list(ant.messages.create(model="m", max_tokens=5, messages=MESSAGES, stream=True))
    types = [e.type for e in events]
    assert types[:2] == ["message_start", "content_block_start"]
    assert types[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert types.count("content_block_delta") == 5
    delta = events[-2]
    assert delta.type == "message_delta" and delta.delta.stop_reason == "max_tokens"
    assert delta.usage.output_tokens == 5 and delta.usage.input_tokens is not None
    assert emu.requests[-1].body["stream"] is True and emu.requests[-1].path == "/v1/messages"


def test_same_request_same_id(ant: anthropic.Anthropic, oai: openai.OpenAI) -> None:
    """Identical requests get identical ids and text; different ones differ."""
    a = ant.messages.create(model="m", max_tokens=50, messages=MESSAGES)
    b = ant.messages.create(model="m", max_tokens=50, messages=MESSAGES)
    c = ant.messages.create(model="m", max_tokens=51, messages=MESSAGES)
    assert a.id == b.id and a.content == b.content and a.id != c.id
    x = oai.chat.completions.create(model="g", messages=MESSAGES)
    y = oai.chat.completions.create(model="g", messages=MESSAGES)
    assert x.id == y.id and x.id.startswith("chatcmpl-") and len(x.id) == 38


def test_anthropic_thinking(ant: anthropic.Anthropic) -> None:
    """Thinking requests stream a thinking block with a signature before the text."""
    kwargs: dict[str, Any] = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    with ant.messages.stream(model="m", max_tokens=2000, messages=MESSAGES, **kwargs) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[0].signature  # type: ignore[union-attr]
    plain = ant.messages.create(model="m", max_tokens=2000, messages=MESSAGES, **kwargs)
    assert plain.to_dict()["content"] == final.to_dict()["content"] and plain.usage.output_tokens == 32


def test_anthropic_tool_use(ant: anthropic.Anthropic) -> None:
    """A forced tool call streams input_json_delta and parses into a tool_use input dict."""
    tools: Any = [{"name": "weather", "description": "d", "input_schema": WEATHER_SCHEMA}]
    choice: Any = {"type": "any"}
    with ant.messages.stream(model="m", max_tokens=100, messages=MESSAGES, tools=tools, tool_choice=choice) as s:
        final = s.get_final_message()
    assert final.stop_reason == "tool_use"
    tool = final.content[-1]
    assert tool.type == "tool_use" and tool.id.startswith("toolu_") and tool.name == "weather"
    assert tool.input == {"city": "value-1", "days": 2, "metric": True}
    plain = ant.messages.create(model="m", max_tokens=100, messages=MESSAGES, tools=tools, tool_choice=choice)
    assert plain.to_dict()["content"] == final.to_dict()["content"]


def test_chat_nonstream_shape(oai: openai.OpenAI) -> None:
    """A non-streaming chat completion has the recorded shape and usage details."""
    c = oai.chat.completions.create(model="gpt-test", messages=MESSAGES, max_completion_tokens=4)
    assert c.created == CREATED and c.model == "gpt-test" and c.service_tier == "default"
    assert c.choices[0].finish_reason == "length" and c.choices[0].message.refusal is None
    assert c.usage is not None and c.usage.completion_tokens == 4
    assert c.usage.prompt_tokens_details is not None and c.usage.prompt_tokens_details.cached_tokens == 0


def test_chat_stream_include_usage(oai: openai.OpenAI, emu: Emulator) -> None:
    """With include_usage every chunk has usage None except a final choices-less usage chunk."""
    chunks = list(
        oai.chat.completions.create(
            model="g", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
    )
    assert emu.requests[-1].body["stream_options"] == {"include_usage": True}
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 32
    plain = list(oai.chat.completions.create(model="g", messages=MESSAGES, stream=True))
    assert all(c.usage is None and c.choices for c in plain) and len(plain) == len(chunks) - 1
    raw = json.loads(plain[1].to_json())
    assert "usage" not in raw


def test_chat_stream_helper_matches_nonstream(oai: openai.OpenAI) -> None:
    """`chat.completions.stream().get_final_completion()` matches the non-streamed completion."""
    plain = oai.chat.completions.create(model="g", messages=MESSAGES)
    with oai.chat.completions.stream(model="g", messages=MESSAGES) as stream:
        final = stream.get_final_completion()
    assert final.id == plain.id and final.choices[0].message.content == plain.choices[0].message.content
    assert final.choices[0].finish_reason == "stop"


def test_chat_tool_calls(oai: openai.OpenAI) -> None:
    """tool_choice=required yields one tool call whose arguments are valid JSON, streamed or not."""
    tools: Any = [{"type": "function", "function": {"name": "weather", "parameters": WEATHER_SCHEMA}}]
    plain = oai.chat.completions.create(model="g", messages=MESSAGES, tools=tools, tool_choice="required")
    call = plain.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert plain.choices[0].finish_reason == "tool_calls" and call.id.startswith("call_")
    assert json.loads(call.function.arguments) == {"city": "value-1", "days": 2, "metric": True}  # type: ignore[union-attr]
    with oai.chat.completions.stream(model="g", messages=MESSAGES, tools=tools, tool_choice="required") as s:
        final = s.get_final_completion()
    streamed = final.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert streamed.function.arguments == call.function.arguments  # type: ignore[union-attr]
    assert final.choices[0].message.content == plain.choices[0].message.content


def test_responses_stream_matches_nonstream(oai: openai.OpenAI) -> None:
    """`responses.stream().get_final_response()` equals the non-streamed Response; events are contiguous."""
    plain = oai.responses.create(model="gpt-r", input="hello", instructions="be brief")
    events = list(oai.responses.create(model="gpt-r", input="hello", instructions="be brief", stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert [e.type for e in events[:4]] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
    ]  # fmt: skip
    assert events[-1].type == "response.completed" and events[-1].response.to_dict() == plain.to_dict()
    with oai.responses.stream(model="gpt-r", input="hello", instructions="be brief") as stream:
        final = stream.get_final_response()
    assert final.output_text == plain.output_text and final.id == plain.id and plain.id.startswith("resp_")
    assert plain.usage is not None and plain.usage.input_tokens_details.cached_tokens == 0


def test_responses_tool_call_and_incomplete(oai: openai.OpenAI) -> None:
    """Responses forced function calls parse; a max_output_tokens cap gives status incomplete."""
    tools: Any = [{"type": "function", "name": "weather", "parameters": WEATHER_SCHEMA, "strict": False}]
    with oai.responses.stream(model="g", input="x", tools=tools, tool_choice="required") as s:
        final = s.get_final_response()
    call = final.output[0]
    assert call.type == "function_call" and call.name == "weather"
    assert json.loads(call.arguments) == {"city": "value-1", "days": 2, "metric": True}
    capped = oai.responses.create(model="g", input="x", max_output_tokens=16)
    assert capped.status == "incomplete" and capped.incomplete_details is not None
    assert capped.incomplete_details.reason == "max_output_tokens" and capped.usage.output_tokens == 16  # type: ignore[union-attr]


def test_tool_call_header_forces_call(ant: anthropic.Anthropic) -> None:
    """`x-emulator-tool-call: 1` forces a tool call even with tool_choice auto."""
    tools: Any = [{"name": "t", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}]
    msg = ant.messages.create(
        model="m", max_tokens=50, messages=MESSAGES, tools=tools, extra_headers={"x-emulator-tool-call": "1"}
    )
    assert msg.stop_reason == "tool_use" and msg.content[-1].input == {"q": "value-1"}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("status", "exc"),
    [
        (529, anthropic.InternalServerError),
        (500, anthropic.InternalServerError),
        (429, anthropic.RateLimitError),
        (401, anthropic.AuthenticationError),
        (400, anthropic.BadRequestError),
    ],
)
def test_anthropic_error_status(ant: anthropic.Anthropic, status: int, exc: type[Exception]) -> None:
    """`x-emulator-status` makes the SDK raise its own class with the real error body."""
    with pytest.raises(exc) as info:
        ant.messages.create(
            model="m", max_tokens=5, messages=MESSAGES,
            extra_headers={"x-emulator-status": str(status), "x-emulator-retry-after": "1"},
        )  # fmt: skip
    err = info.value
    assert isinstance(err, anthropic.APIStatusError) and err.status_code == status
    assert isinstance(err.body, dict) and err.body["type"] == "error"
    assert err.response.headers["retry-after"] == "1"
    if status == 529:
        assert err.body["error"]["type"] == "overloaded_error"


def test_openai_error_status(oai: openai.OpenAI) -> None:
    """OpenAI clients raise RateLimitError / InternalServerError for injected statuses."""
    with pytest.raises(openai.RateLimitError) as info:
        oai.chat.completions.create(model="g", messages=MESSAGES, extra_headers={"x-emulator-status": "429"})
    assert info.value.code == "rate_limit_exceeded"
    with pytest.raises(openai.InternalServerError):
        oai.responses.create(model="g", input="x", extra_headers={"x-emulator-status": "503"})


def test_missing_fields_are_400(ant: anthropic.Anthropic, oai: openai.OpenAI, emu: Emulator) -> None:
    """Missing required fields, bad JSON and unknown routes give provider-shaped errors."""
    with pytest.raises(anthropic.BadRequestError):
        ant.messages.create(model="m", max_tokens=5, messages=MESSAGES, extra_body={"max_tokens": None})
    with pytest.raises(openai.BadRequestError):
        oai.chat.completions.create(model="g", messages=MESSAGES, n=2)
    with pytest.raises(openai.NotFoundError):
        oai.models.list()
    assert ant.get("/health", cast_to=object) == {"status": "ok"}


def test_midstream_errors_raise(ant: anthropic.Anthropic, oai: openai.OpenAI) -> None:
    """A mid-stream error event raises the SDK error during iteration after N chunks."""
    headers = {"x-emulator-error-after-chunks": "3"}
    seen: list[str] = []
    with pytest.raises(anthropic.APIStatusError) as info:
        with ant.messages.stream(model="m", max_tokens=50, messages=MESSAGES, extra_headers=headers) as s:
            seen.extend(s.text_stream)
    assert len(seen) == 3 and "overloaded_error" in str(info.value)
    got: list[str] = []
    with pytest.raises(openai.APIError):
        for chunk in oai.chat.completions.create(model="g", messages=MESSAGES, stream=True, extra_headers=headers):
            got.extend(c.delta.content or "" for c in chunk.choices)
    types = [e.type for e in oai.responses.create(model="g", input="x", stream=True, extra_headers=headers)]
    assert types[-2:] == ["error", "response.failed"] and types.count("response.output_text.delta") == 3


def test_drop_after_chunks(ant: anthropic.Anthropic, oai: openai.OpenAI) -> None:
    """A dropped connection surfaces as a transport error (or a truncated stream) mid-iteration."""
    headers = {"x-emulator-drop-after-chunks": "2"}
    seen: list[str] = []
    with pytest.raises(Exception) as info:  # noqa: PT011 - the SDKs differ in what they raise
        with ant.messages.stream(model="m", max_tokens=50, messages=MESSAGES, extra_headers=headers) as s:
            seen.extend(s.text_stream)
            s.get_final_message()
    assert len(seen) == 2, info.value
    # openai < 3.14 lets the transport error through unwrapped (the supported floor is 3.3).
    with pytest.raises((openai.APIConnectionError, httpx2.TransportError)):
        list(oai.chat.completions.create(model="g", messages=MESSAGES, stream=True, extra_headers=headers))


def test_timing_headers_are_honoured() -> None:
    """ttft 300 ms and tpot 20 ms headers are observed by a client within a few ms (median of 3, GC held off)."""
    ttfts: list[float] = []
    mean_gaps: list[float] = []
    with Emulator(TimingModel(time_scale=0.0)) as emu, anthropic.Anthropic(
        base_url=emu.base_url, api_key="x", max_retries=0
    ) as client:
        headers = {"x-emulator-ttft-ms": "300", "x-emulator-tpot-ms": "20", "x-emulator-output-tokens": "10"}
        for _ in range(3):
            gc.collect()
            gc.disable()
            try:
                start = time.perf_counter()
                stamps: list[float] = []
                with client.messages.create(
                    model="m", max_tokens=100, messages=MESSAGES, stream=True, extra_headers=headers
                ) as stream:
                    for event in stream:
                        if event.type == "content_block_delta":
                            stamps.append(time.perf_counter())
            finally:
                gc.enable()
            assert len(stamps) == 10
            ttfts.append(stamps[0] - start)
            gaps = [b - a for a, b in zip(stamps, stamps[1:])]
            mean_gaps.append(sum(gaps) / len(gaps))
    assert abs(statistics.median(ttfts) - 0.300) < 0.015, ttfts
    assert abs(statistics.median(mean_gaps) - 0.020) < 0.002, mean_gaps


def test_time_scale_zero_is_fast(oai: openai.OpenAI) -> None:
    """With time_scale=0 a 500-token stream finishes almost instantly."""
    start = time.perf_counter()
    chunks = list(
        oai.chat.completions.create(
            model="g", messages=MESSAGES, stream=True, extra_headers={"x-emulator-output-tokens": "500"}
        )
    )
    assert len(chunks) == 502 and time.perf_counter() - start < 2.0


def test_tokens_per_chunk(oai: openai.OpenAI) -> None:
    """x-emulator-tokens-per-chunk groups several tokens into each content chunk."""
    chunks = list(
        oai.chat.completions.create(
            model="g", messages=MESSAGES, stream=True, extra_headers={"x-emulator-tokens-per-chunk": "4"}
        )
    )
    assert len(chunks) == 2 + 32 // 4


def test_pytest_fixture(lk_emulator: Emulator) -> None:
    """The lk_emulator fixture yields a started, fast emulator."""
    with openai.OpenAI(base_url=lk_emulator.base_url + "/v1", api_key="x", max_retries=0) as client:
        assert client.chat.completions.create(model="g", messages=MESSAGES).choices[0].message.content
    assert lk_emulator.stats.requests_total == 1


def test_session_fixture(lk_emulator_session: Emulator) -> None:
    """The session-scoped fixture serves requests too."""
    with anthropic.Anthropic(base_url=lk_emulator_session.base_url, api_key="x", max_retries=0) as client:
        assert client.messages.create(model="m", max_tokens=3, messages=MESSAGES).usage.output_tokens == 3
