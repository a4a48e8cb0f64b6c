"""Every path an async caller can take to a model endpoint produces exactly one record (mirrors test_paths_sync).

Each test drives a latencykit client and a raw SDK client through the real SDKs over HTTP
to the emulator, asserts the caller gets what the raw SDK gives, and that exactly one
record exists with the right ``streamed`` / ``not_streamed_reason`` / usage.
"""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest
from anthropic import AsyncStream as AntAsyncStream
from anthropic.types import Message, RawMessageStreamEvent
from anthropic.types.beta import BetaMessage
from openai import AsyncStream as OaiAsyncStream
from openai._legacy_response import LegacyAPIResponse
from openai.types.chat import ChatCompletion, ChatCompletionChunk

import latencykit as lk
from latencykit.emulator import Emulator

from _cache_shapes import agent_system
from _paths import LITELLM_OPTIONS, RAW, REQUEST, Forecast, assert_not_streamed, assert_streamed, only_record, sent
from conftest import ANT_REQ, CHAT_REQ, RESP_REQ, WEATHER_TOOL_OAI


async def collect(stream: Any) -> list[Any]:
    return [item async for item in stream]


# -- Anthropic: messages raw responses ------------------------------------------------------


async def test_messages_with_raw_response(aant: Any, raw_aant: Any, recorder: lk.Recorder, emu: Emulator) -> None:
    """langchain-anthropic's path: sent as asked (not streamed), recorded once with the body's usage."""
    raw = await aant.messages.with_raw_response.create(**ANT_REQ)
    assert "stream" not in sent(emu)
    expected = await raw_aant.messages.with_raw_response.create(**ANT_REQ)
    assert type(raw) is type(expected)  # the body was read: recorded at once, the object untouched
    message = await raw.parse()
    assert type(message) is Message and message == await expected.parse()
    rec = only_record(recorder)
    assert_not_streamed(rec, "with_raw_response", RAW)
    assert (rec.input_tokens, rec.output_tokens) == (message.usage.input_tokens, message.usage.output_tokens)
    assert rec.response_id == message.id and rec.finish_reasons == (message.stop_reason,)


async def test_messages_with_raw_response_stream_true(aant: Any, raw_aant: Any, recorder: lk.Recorder) -> None:
    """A raw response of a streamed call: the stream its parse() returns is observed as it is iterated."""
    raw = await aant.messages.with_raw_response.create(stream=True, **ANT_REQ)
    assert recorder.calls == []  # still open
    events = await collect(await raw.parse())
    assert events == await collect(await (await raw_aant.messages.with_raw_response.create(stream=True, **ANT_REQ)).parse())
    rec = only_record(recorder)
    assert_streamed(rec, "with_raw_response(stream=True)")
    assert rec.output_tokens == events[-2].usage.output_tokens  # message_delta's cumulative usage


async def test_messages_with_streaming_response(aant: Any, raw_aant: Any, recorder: lk.Recorder) -> None:
    """with_streaming_response: the body is read inside the block, so E2E ends when parse() reads it."""
    async with aant.messages.with_streaming_response.create(**ANT_REQ) as response:
        message = await response.parse()
    async with raw_aant.messages.with_streaming_response.create(**ANT_REQ) as response:
        assert message == await response.parse()
    rec = only_record(recorder)
    assert_not_streamed(rec, "with_streaming_response", RAW)
    assert rec.output_tokens == message.usage.output_tokens
    recorder.clear()
    async with aant.messages.with_streaming_response.create(stream=True, **ANT_REQ) as response:
        events = await collect(await response.parse())
    async with raw_aant.messages.with_streaming_response.create(stream=True, **ANT_REQ) as response:
        assert events == await collect(await response.parse())
    assert_streamed(only_record(recorder), "with_streaming_response(stream=True)")


async def test_streaming_response_left_unread_is_abandoned(aant: Any, recorder: lk.Recorder) -> None:
    """Leaving the block without reading the body (or iterating the stream) ends the call as abandoned."""
    async with aant.messages.with_streaming_response.create(**ANT_REQ):
        pass
    rec = only_record(recorder)
    assert (rec.outcome, rec.streamed, rec.output_tokens) == ("abandoned", False, None)
    recorder.clear()
    async with aant.messages.with_streaming_response.create(stream=True, **ANT_REQ) as response:
        stream = await response.parse()
        await stream.__aiter__().__anext__()
    rec = only_record(recorder)
    assert (rec.outcome, rec.streamed) == ("abandoned", True)


async def test_streaming_response_read_as_bytes(aant: Any, recorder: lk.Recorder) -> None:
    """A caller that reads the body itself (iter_lines / iter_bytes) gets a completed record with E2E only."""
    async with aant.messages.with_streaming_response.create(stream=True, **ANT_REQ) as response:
        lines = [line async for line in response.iter_lines()]
    assert "event: message_stop" in lines
    rec = only_record(recorder)
    assert (rec.outcome, rec.streamed, rec.ttft) == ("completed", True, None) and rec.e2e
    recorder.clear()
    async with aant.messages.with_streaming_response.create(**ANT_REQ) as response:
        body = b"".join([chunk async for chunk in response.iter_bytes()])
    assert Message.model_validate_json(body).usage.output_tokens > 0
    rec = only_record(recorder)
    assert (rec.outcome, rec.streamed, rec.ttft) == ("completed", False, None) and rec.e2e


async def test_raw_response_http_error_is_recorded_once(aant: Any, recorder: lk.Recorder) -> None:
    """An HTTP error on a raw-response call raises the SDK's error and records one error."""
    with pytest.raises(anthropic.BadRequestError):
        await aant.messages.with_raw_response.create(**ANT_REQ, extra_headers={"x-emulator-status": "400"})
    rec = only_record(recorder)
    assert (rec.outcome, rec.error_type, rec.method) == ("error", "BadRequestError", "with_raw_response")


async def test_raw_response_paths_are_planned(aant: Any, recorder: lk.Recorder, emu: Emulator) -> None:
    """The planner places cache breakpoints on raw-response calls too, and verifies their cache usage."""
    request = {**ANT_REQ, "system": agent_system()}
    for _ in range(2):
        await (await aant.messages.with_raw_response.create(**request)).parse()
    system = sent(emu)["system"]
    assert isinstance(system, list) and system[-1]["cache_control"]["type"] == "ephemeral"
    assert request["system"] == agent_system()  # the caller's arguments are not touched
    second = recorder.calls[-1]
    assert len(recorder.calls) == 2 and second.cache_verdict == "hit" and second.cache_read_tokens


# -- Anthropic: beta.messages (pydantic-ai's AnthropicProvider) ------------------------------


async def test_beta_messages_create_is_streamed(aant: Any, raw_aant: Any, recorder: lk.Recorder, emu: Emulator) -> None:
    """beta.messages.create() is sent as a stream and reassembled into the exact BetaMessage."""
    message = await aant.beta.messages.create(**ANT_REQ, betas=["context-1m-2025-08-07"])
    assert sent(emu)["stream"] is True and emu.requests[-1].headers["anthropic-beta"] == "context-1m-2025-08-07"
    expected = await raw_aant.beta.messages.create(**ANT_REQ, betas=["context-1m-2025-08-07"])
    assert type(message) is BetaMessage and message == expected
    rec = only_record(recorder)
    assert_streamed(rec, "create")
    assert rec.api == "messages" and rec.output_tokens == expected.usage.output_tokens


async def test_beta_messages_stream_and_parse(aant: Any, raw_aant: Any, recorder: lk.Recorder) -> None:
    """beta.messages.create(stream=True), .stream() and .parse() give what the raw SDK gives, one record each."""
    events = await collect(await aant.beta.messages.create(stream=True, **ANT_REQ))
    assert events == await collect(await raw_aant.beta.messages.create(stream=True, **ANT_REQ))
    assert_streamed(only_record(recorder), "create(stream=True)")
    recorder.clear()
    async with aant.beta.messages.stream(**ANT_REQ) as stream:
        final = await stream.get_final_message()
    async with raw_aant.beta.messages.stream(**ANT_REQ) as stream:
        assert final == await stream.get_final_message()
    assert_streamed(only_record(recorder), "stream")
    recorder.clear()
    parsed = await aant.beta.messages.parse(**ANT_REQ, output_format=Forecast)
    expected = await raw_aant.beta.messages.parse(**ANT_REQ, output_format=Forecast)
    assert isinstance(parsed.parsed_output, Forecast) and parsed.parsed_output == expected.parsed_output
    assert parsed.content == expected.content
    assert_streamed(only_record(recorder), "parse")


async def test_beta_messages_with_raw_response(aant: Any, raw_aant: Any, recorder: lk.Recorder) -> None:
    """beta.messages.with_raw_response goes as asked and is recorded by the client's request()."""
    message = await (await aant.beta.messages.with_raw_response.create(**ANT_REQ)).parse()
    expected = await (await raw_aant.beta.messages.with_raw_response.create(**ANT_REQ)).parse()
    assert type(message) is BetaMessage and message == expected
    assert_not_streamed(only_record(recorder), "with_raw_response", RAW)


# -- Anthropic: client.post() / request() ---------------------------------------------------


async def test_anthropic_client_post(aant: Any, raw_aant: Any, recorder: lk.Recorder) -> None:
    """client.post() to /v1/messages: recorded once, streamed when the caller streams."""
    message = await aant.post("/v1/messages", body=ANT_REQ, cast_to=Message)
    assert message == await raw_aant.post("/v1/messages", body=ANT_REQ, cast_to=Message)
    rec = only_record(recorder)
    assert_not_streamed(rec, "request", REQUEST)
    assert rec.output_tokens == message.usage.output_tokens
    recorder.clear()
    body = {**ANT_REQ, "stream": True}
    kwargs: dict[str, Any] = {"body": body, "cast_to": Message, "stream": True, "stream_cls": AntAsyncStream[RawMessageStreamEvent]}
    events = await collect(await aant.post("/v1/messages", **kwargs))
    assert events == await collect(await raw_aant.post("/v1/messages", **kwargs))
    assert_streamed(only_record(recorder), "request(stream=True)")


async def test_only_model_endpoints_are_recorded(aant: Any, aoai: Any, recorder: lk.Recorder) -> None:
    """GETs and other endpoints (count_tokens, files, ...) pass through unrecorded."""
    assert await aant.get("/health", cast_to=object) == {"status": "ok"}
    with pytest.raises(anthropic.NotFoundError):
        await aant.post("/v1/messages/count_tokens", body=ANT_REQ, cast_to=object)
    with pytest.raises(openai.NotFoundError):
        await aoai.post("/files", body={}, cast_to=object)
    assert recorder.calls == []


async def test_wrapped_client_records_raw_responses(emu: Emulator) -> None:
    """lk.wrap() of an existing client gets the same request() catch-all."""
    client = lk.wrap(anthropic.AsyncAnthropic(base_url=emu.base_url, api_key="k", max_retries=0))
    await (await client.messages.with_raw_response.create(**ANT_REQ)).parse()
    assert_not_streamed(only_record(client.latency), "with_raw_response", RAW)
    await client.close()


# -- OpenAI: Chat Completions raw responses (langchain-openai) ------------------------------


async def test_chat_with_raw_response(aoai: Any, raw_aoai: Any, recorder: lk.Recorder, emu: Emulator) -> None:
    """langchain-openai ainvoke(): a LegacyAPIResponse whose parse() is the raw SDK's ChatCompletion."""
    raw = await aoai.chat.completions.with_raw_response.create(**CHAT_REQ)
    assert "stream" not in sent(emu)
    assert isinstance(raw, LegacyAPIResponse)
    completion = raw.parse()
    expected = (await raw_aoai.chat.completions.with_raw_response.create(**CHAT_REQ)).parse()
    assert type(completion) is ChatCompletion and completion == expected
    rec = only_record(recorder)
    assert_not_streamed(rec, "with_raw_response", RAW)
    assert (rec.input_tokens, rec.output_tokens) == (expected.usage.prompt_tokens, expected.usage.completion_tokens)


async def test_chat_with_raw_response_stream_true(aoai: Any, raw_aoai: Any, recorder: lk.Recorder, emu: Emulator) -> None:
    """A streamed raw response is sent unchanged (no include_usage added, no chunk hidden) and timed."""
    chunks = await collect((await aoai.chat.completions.with_raw_response.create(stream=True, **CHAT_REQ)).parse())
    assert "stream_options" not in sent(emu)
    assert chunks == await collect((await raw_aoai.chat.completions.with_raw_response.create(stream=True, **CHAT_REQ)).parse())
    assert_streamed(only_record(recorder), "with_raw_response(stream=True)")


async def test_chat_with_raw_response_tools_and_structured_output(aoai: Any, raw_aoai: Any, recorder: lk.Recorder) -> None:
    """langchain-openai bind_tools() and with_structured_output(): one record each, results as the raw SDK's."""
    request = {**CHAT_REQ, "tools": [WEATHER_TOOL_OAI], "extra_headers": {"x-emulator-tool-call": "1"}}
    completion = (await aoai.chat.completions.with_raw_response.create(**request)).parse()
    assert completion == (await raw_aoai.chat.completions.with_raw_response.create(**request)).parse()
    assert completion.choices[0].message.tool_calls
    assert_not_streamed(only_record(recorder), "with_raw_response", RAW)
    recorder.clear()
    parsed = (await aoai.chat.completions.with_raw_response.parse(**CHAT_REQ, response_format=Forecast)).parse()
    expected = (await raw_aoai.chat.completions.with_raw_response.parse(**CHAT_REQ, response_format=Forecast)).parse()
    assert parsed.choices[0].message.parsed == expected.choices[0].message.parsed
    assert isinstance(parsed.choices[0].message.parsed, Forecast)
    assert_not_streamed(only_record(recorder), "with_raw_response", RAW)


async def test_chat_with_streaming_response(aoai: Any, raw_aoai: Any, recorder: lk.Recorder) -> None:
    """chat.completions.with_streaming_response, streamed and not."""
    async with aoai.chat.completions.with_streaming_response.create(**CHAT_REQ) as response:
        completion = await response.parse()
    async with raw_aoai.chat.completions.with_streaming_response.create(**CHAT_REQ) as response:
        assert completion == await response.parse()
    assert_not_streamed(only_record(recorder), "with_streaming_response", RAW)
    recorder.clear()
    async with aoai.chat.completions.with_streaming_response.create(stream=True, **CHAT_REQ) as response:
        chunks = await collect(await response.parse())
    async with raw_aoai.chat.completions.with_streaming_response.create(stream=True, **CHAT_REQ) as response:
        assert chunks == await collect(await response.parse())
    assert_streamed(only_record(recorder), "with_streaming_response(stream=True)")


async def test_beta_chat_completions_is_streamed(aoai: Any, raw_aoai: Any, recorder: lk.Recorder, emu: Emulator) -> None:
    """client.beta.chat.completions is the observed resource: streamed and reassembled."""
    completion = await aoai.beta.chat.completions.create(**CHAT_REQ)
    assert sent(emu)["stream"] is True
    assert completion == await raw_aoai.beta.chat.completions.create(**CHAT_REQ)
    assert_streamed(only_record(recorder), "create")


# -- OpenAI: Responses (openai-agents) -------------------------------------------------------


async def test_responses_with_streaming_response_stream_true(aoai: Any, raw_aoai: Any, recorder: lk.Recorder) -> None:
    """openai-agents Runner.run_streamed: responses.with_streaming_response.create(stream=True)."""
    async with aoai.responses.with_streaming_response.create(stream=True, **RESP_REQ) as response:
        events = await collect(await response.parse())
    async with raw_aoai.responses.with_streaming_response.create(stream=True, **RESP_REQ) as response:
        assert events == await collect(await response.parse())
    rec = only_record(recorder)
    assert_streamed(rec, "with_streaming_response(stream=True)")
    final = events[-1].response
    assert rec.output_tokens == final.usage.output_tokens and rec.response_id == final.id


async def test_responses_with_raw_response(aoai: Any, raw_aoai: Any, recorder: lk.Recorder) -> None:
    """responses.with_raw_response.create (langchain-openai's Responses path): recorded, not streamed."""
    response = (await aoai.responses.with_raw_response.create(**RESP_REQ)).parse()
    assert response == (await raw_aoai.responses.with_raw_response.create(**RESP_REQ)).parse()
    rec = only_record(recorder)
    assert_not_streamed(rec, "with_raw_response", RAW)
    assert rec.output_tokens == response.usage.output_tokens


async def test_beta_responses_is_recorded(aoai: Any, raw_aoai: Any, recorder: lk.Recorder) -> None:
    """client.beta.responses (not replaced by latencykit) is caught by request(): recorded, not streamed."""
    response = await aoai.beta.responses.create(**RESP_REQ)
    assert response == await raw_aoai.beta.responses.create(**RESP_REQ)
    assert_not_streamed(only_record(recorder), "request", REQUEST)


# -- OpenAI: client.post() (LiteLLM) ---------------------------------------------------------


async def test_litellm_style_client_post(aoai: Any, raw_aoai: Any, recorder: lk.Recorder) -> None:
    """LiteLLM's client.post("/chat/completions") with the raw-response header, streamed and not."""
    raw = await aoai.post("/chat/completions", body=CHAT_REQ, cast_to=ChatCompletion, options=LITELLM_OPTIONS)
    assert isinstance(raw, LegacyAPIResponse)
    expected = await raw_aoai.post("/chat/completions", body=CHAT_REQ, cast_to=ChatCompletion, options=LITELLM_OPTIONS)
    assert raw.parse() == expected.parse()
    assert_not_streamed(only_record(recorder), "with_raw_response", RAW)
    recorder.clear()
    body = {**CHAT_REQ, "stream": True, "stream_options": {"include_usage": True}}
    kwargs: dict[str, Any] = {"body": body, "cast_to": ChatCompletion, "options": LITELLM_OPTIONS, "stream": True}
    kwargs["stream_cls"] = OaiAsyncStream[ChatCompletionChunk]
    chunks = await collect((await aoai.post("/chat/completions", **kwargs)).parse())
    assert chunks == await collect((await raw_aoai.post("/chat/completions", **kwargs)).parse())
    assert chunks[-1].usage is not None
    rec = only_record(recorder)
    assert_streamed(rec, "with_raw_response(stream=True)")
    assert rec.output_tokens == chunks[-1].usage.completion_tokens


async def test_resource_calls_are_still_recorded_once(aant: Any, aoai: Any, recorder: lk.Recorder) -> None:
    """The resource methods latencykit streams itself are not recorded a second time by request()."""
    await aant.messages.create(**ANT_REQ)
    async with aant.messages.stream(**ANT_REQ) as stream:
        await stream.get_final_message()
    await aoai.chat.completions.create(**CHAT_REQ)
    async with aoai.chat.completions.stream(**CHAT_REQ) as chat_stream:
        await chat_stream.get_final_completion()
    await aoai.responses.create(**RESP_REQ)
    await aoai.responses.parse(**RESP_REQ)
    assert [(r.api, r.method) for r in recorder.calls] == [
        ("messages", "create"), ("messages", "stream"), ("chat.completions", "create"),
        ("chat.completions", "stream"), ("responses", "create"), ("responses", "parse"),
    ]  # fmt: skip
