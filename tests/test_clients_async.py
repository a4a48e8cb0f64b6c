"""End-to-end: async latencykit clients through the real SDKs over HTTP to the emulator (mirrors the sync file)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pydantic
import pytest
from anthropic.types import Message
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response

import latencykit as lk
from latencykit.emulator import Emulator

from conftest import ANT_REQ, CHAT_REQ, RESP_REQ, WEATHER_TOOL_ANT, WEATHER_TOOL_OAI, WEATHER_TOOL_RESP, headers


def _last_body(emu: Emulator) -> dict[str, Any]:
    return emu.requests[-1].body


# -- Anthropic ------------------------------------------------------------------------------


async def test_anthropic_create_is_streamed_and_equals_nonstreamed(aant: Any, raw_aant: Any, emu: Emulator) -> None:
    """messages.create() goes over the wire as a stream and returns the same Message as a plain call."""
    msg = await aant.messages.create(**ANT_REQ)
    assert _last_body(emu)["stream"] is True
    expected = await raw_aant.messages.create(**ANT_REQ)
    assert type(msg) is Message and msg == expected
    rec = aant.latency.last
    assert (rec.provider, rec.method, rec.outcome, rec.streamed) == ("anthropic", "create", "completed", True)
    assert rec.output_tokens == msg.usage.output_tokens and rec.input_tokens == msg.usage.input_tokens
    assert 0 < rec.ttfb <= rec.ttft <= rec.e2e and rec.tpot is not None


async def test_anthropic_create_stream_true_returns_the_sdk_stream(aant: Any, raw_aant: Any) -> None:
    """create(stream=True) returns an anthropic.AsyncStream with the same events as the raw SDK."""
    stream = await aant.messages.create(stream=True, **ANT_REQ)
    assert isinstance(stream, anthropic.AsyncStream)
    events = [e.to_dict() async for e in stream]
    raw_events = [e.to_dict() async for e in await raw_aant.messages.create(stream=True, **ANT_REQ)]
    assert events == raw_events
    assert aant.latency.last.method == "create(stream=True)" and aant.latency.last.outcome == "completed"


async def test_anthropic_messages_stream_helper(aant: Any, raw_aant: Any) -> None:
    """messages.stream() keeps the SDK helper: text_stream and get_final_message()."""
    async with aant.messages.stream(**ANT_REQ) as stream:
        text = "".join([t async for t in stream.text_stream])
        final = await stream.get_final_message()
    expected = await raw_aant.messages.create(**ANT_REQ)
    assert text == expected.content[0].text and final.to_dict() == expected.to_dict()
    assert aant.latency.last.method == "stream" and aant.latency.total_calls == 1


async def test_anthropic_tool_use_equals_nonstreamed(aant: Any, raw_aant: Any) -> None:
    """Tool-use blocks reassembled from input_json_delta equal the non-streamed ones."""
    req = {**ANT_REQ, "tools": [WEATHER_TOOL_ANT], "tool_choice": {"type": "any"}}
    assert await aant.messages.create(**req) == await raw_aant.messages.create(**req)
    assert aant.latency.last.finish_reasons == ("tool_use",)


async def test_anthropic_api_error_is_the_sdk_error(aant: Any) -> None:
    """HTTP errors raise the SDK's own exception classes and are recorded as outcome="error"."""
    with pytest.raises(anthropic.RateLimitError):
        await aant.messages.create(**ANT_REQ, extra_headers=headers(status=429, retry_after=1))
    rec = aant.latency.last
    assert rec.outcome == "error" and rec.error_type == "RateLimitError" and rec.ttft is None


async def test_anthropic_error_event_mid_stream_is_interrupted(aant: Any) -> None:
    """An `error` event after content raises the SDK error in the loop; the record says interrupted."""
    stream = await aant.messages.create(stream=True, **ANT_REQ, extra_headers=headers(error_after_chunks=3))
    with pytest.raises(anthropic.APIStatusError):
        async for _ in stream:
            pass
    assert aant.latency.last.outcome == "interrupted" and aant.latency.last.chunks == 3


async def test_anthropic_dropped_connection_is_not_a_silent_truncation(aant: Any) -> None:
    """A non-streaming call whose stream drops mid-way raises instead of returning a truncated Message."""
    with pytest.raises(Exception) as info:
        await aant.messages.create(**ANT_REQ, extra_headers=headers(drop_after_chunks=2))
    assert not isinstance(info.value, AssertionError)
    assert aant.latency.last.outcome == "interrupted"


async def test_anthropic_prewarm_passes_through_unstreamed(aant: Any, emu: Emulator) -> None:
    """max_tokens=0 (cache pre-warm) is sent as given and recorded with streamed=False and why."""
    assert isinstance(await aant.messages.create(**{**ANT_REQ, "max_tokens": 0}), Message)
    assert "stream" not in _last_body(emu)
    rec = aant.latency.last
    assert rec.streamed is False and "max_tokens=0" in rec.not_streamed_reason


# -- OpenAI Chat Completions ---------------------------------------------------------------


async def test_chat_create_is_streamed_and_equals_nonstreamed(aoai: Any, raw_aoai: Any, emu: Emulator) -> None:
    """chat.completions.create() is streamed with include_usage and returns the same ChatCompletion."""
    completion = await aoai.chat.completions.create(**CHAT_REQ)
    assert _last_body(emu)["stream_options"] == {"include_usage": True}
    expected = await raw_aoai.chat.completions.create(**CHAT_REQ)
    assert type(completion) is ChatCompletion and completion == expected
    rec = aoai.latency.last
    assert rec.output_tokens == expected.usage.completion_tokens and rec.outcome == "completed"


async def test_chat_stream_true_hides_the_usage_chunk_it_added(aoai: Any) -> None:
    """Without include_usage from the caller, no usage-only chunk reaches them, yet the record has usage."""
    chunks = [c async for c in await aoai.chat.completions.create(stream=True, **CHAT_REQ)]
    assert all(isinstance(c, ChatCompletionChunk) and c.choices for c in chunks)
    assert aoai.latency.last.output_tokens is not None and aoai.latency.last.tpot is not None


async def test_chat_stream_true_keeps_usage_chunk_when_asked(aoai: Any) -> None:
    """With include_usage from the caller, the usage chunk is delivered as usual."""
    stream = await aoai.chat.completions.create(stream=True, stream_options={"include_usage": True}, **CHAT_REQ)
    chunks = [c async for c in stream]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None


async def test_chat_stream_helper_and_parse(aoai: Any, raw_aoai: Any) -> None:
    """chat.completions.stream() and .parse() work through the SDK helpers and are timed once each."""
    async with aoai.chat.completions.stream(**CHAT_REQ) as stream:
        deltas = [e.delta async for e in stream if e.type == "content.delta"]
        final = await stream.get_final_completion()
    assert "".join(deltas) == final.choices[0].message.content
    parsed = await aoai.chat.completions.parse(**CHAT_REQ)
    expected = await raw_aoai.chat.completions.parse(**CHAT_REQ)
    assert parsed.choices[0].message.content == expected.choices[0].message.content
    assert aoai.latency.total_calls == 2 and [r.method for r in aoai.latency.calls] == ["stream", "parse"]


async def test_chat_tool_calls_equal_nonstreamed(aoai: Any, raw_aoai: Any) -> None:
    """Streamed tool-call deltas reassemble into the same tool_calls as the non-streamed answer."""
    req = {**CHAT_REQ, "tools": [WEATHER_TOOL_OAI], "tool_choice": "required"}
    completion = await aoai.chat.completions.create(**req)
    assert completion == await raw_aoai.chat.completions.create(**req)
    assert json.loads(completion.choices[0].message.tool_calls[0].function.arguments)


async def test_chat_api_error_is_the_sdk_error(aoai: Any) -> None:
    """A 503 raises openai.InternalServerError unchanged and records outcome="error"."""
    with pytest.raises(openai.InternalServerError):
        await aoai.chat.completions.create(**CHAT_REQ, extra_headers=headers(status=503))
    assert aoai.latency.last.outcome == "error"


# -- OpenAI Responses ----------------------------------------------------------------------


async def test_responses_create_is_streamed_and_equals_nonstreamed(aoai: Any, raw_aoai: Any, emu: Emulator) -> None:
    """responses.create() is streamed and returns the Response that response.completed carried."""
    response = await aoai.responses.create(**RESP_REQ)
    assert _last_body(emu)["stream"] is True
    expected = await raw_aoai.responses.create(**RESP_REQ)
    assert type(response) is Response and response == expected
    assert aoai.latency.last.output_tokens == expected.usage.output_tokens


async def test_responses_stream_forms(aoai: Any) -> None:
    """responses.create(stream=True) and responses.stream() keep the SDK types and are timed."""
    events = [e async for e in await aoai.responses.create(stream=True, **RESP_REQ)]
    assert events[-1].type == "response.completed"
    async with aoai.responses.stream(**RESP_REQ) as stream:
        final = await stream.get_final_response()
    assert final.output_text
    assert [r.method for r in aoai.latency.calls] == ["create(stream=True)", "stream"]


async def test_responses_function_call_equals_nonstreamed(aoai: Any, raw_aoai: Any) -> None:
    """A function call streamed as argument deltas reassembles into the non-streamed Response."""
    req = {**RESP_REQ, "tools": [WEATHER_TOOL_RESP], "tool_choice": "required"}
    assert await aoai.responses.create(**req) == await raw_aoai.responses.create(**req)


# -- clients, options, wrap ----------------------------------------------------------------


async def test_with_options_shares_the_recorder(aant: Any) -> None:
    """with_options() returns an async latencykit client recording into the same Recorder."""
    other = aant.with_options(timeout=30)
    assert isinstance(other, lk.AsyncAnthropic) and other.latency is aant.latency
    await other.messages.create(**ANT_REQ)
    assert aant.latency.total_calls == 1


async def test_wrap_existing_async_clients(emu: Emulator) -> None:
    """wrap() works on async SDK clients (plain and Azure) and leaves the original untouched."""
    raw = openai.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="k")
    wrapped = lk.wrap(raw, recorder=lk.Recorder())
    assert isinstance(wrapped, lk.AsyncOpenAI) and isinstance(wrapped, openai.AsyncOpenAI)
    await wrapped.chat.completions.create(**CHAT_REQ)
    await raw.chat.completions.create(**CHAT_REQ)
    assert wrapped.latency.total_calls == 1
    azure = lk.wrap(openai.AsyncAzureOpenAI(api_key="k", api_version="2025-01-01", azure_endpoint=emu.base_url))
    assert isinstance(azure, openai.AsyncAzureOpenAI) and azure._lk.provider == "azure.ai.openai"
    await raw.close()


class Forecast(pydantic.BaseModel):
    """A structured answer the emulator fills from its JSON schema."""

    city: str
    days: int


async def test_structured_output_parse_all_apis(aant: Any, raw_aant: Any, aoai: Any, raw_aoai: Any) -> None:
    """Async parse() with a pydantic model gives the same parsed object as the raw SDK."""
    msg = await aant.messages.parse(**ANT_REQ, output_format=Forecast)
    assert msg.parsed_output == (await raw_aant.messages.parse(**ANT_REQ, output_format=Forecast)).parsed_output
    assert aant.latency.last.method == "parse" and aant.latency.last.streamed
    chat = await aoai.chat.completions.parse(**CHAT_REQ, response_format=Forecast)
    expected = await raw_aoai.chat.completions.parse(**CHAT_REQ, response_format=Forecast)
    assert chat.choices[0].message.parsed == expected.choices[0].message.parsed
    resp = await aoai.responses.parse(**RESP_REQ, text_format=Forecast)
    assert resp.output_parsed == (await raw_aoai.responses.parse(**RESP_REQ, text_format=Forecast)).output_parsed
    assert aoai.latency.last.method == "parse" and aoai.latency.last.streamed is False
