"""End-to-end: sync latencykit clients through the real SDKs over HTTP to the emulator."""

from __future__ import annotations

import json

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


def _last_body(emu: Emulator) -> dict:
    return emu.requests[-1].body


# -- Anthropic ------------------------------------------------------------------------------


def test_anthropic_create_is_streamed_and_equals_nonstreamed(ant: lk.Anthropic, raw_ant: anthropic.Anthropic, emu: Emulator) -> None:
    """messages.create() goes over the wire as a stream and returns the same Message as a plain call."""
    msg = ant.messages.create(**ANT_REQ)
    assert _last_body(emu)["stream"] is True
    expected = raw_ant.messages.create(**ANT_REQ)
    assert "stream" not in _last_body(emu) or _last_body(emu)["stream"] is False
    assert type(msg) is Message
    assert msg == expected
    assert msg.content[0].text == expected.content[0].text and msg.usage == expected.usage
    rec = ant.latency.last
    assert rec is not None and ant.latency.total_calls == 1
    assert (rec.provider, rec.api, rec.method, rec.outcome, rec.streamed) == ("anthropic", "messages", "create", "completed", True)
    assert rec.request_model == ANT_REQ["model"] and rec.response_id == msg.id
    assert rec.output_tokens == msg.usage.output_tokens and rec.input_tokens == msg.usage.input_tokens
    assert rec.cache_read_tokens == 0 and rec.cache_write_tokens == 0
    assert rec.finish_reasons == ("end_turn",)
    assert rec.ttfb is not None and rec.ttft is not None and rec.e2e is not None and rec.tpot is not None
    assert 0 < rec.ttfb <= rec.ttft <= rec.e2e
    assert rec.chunks == msg.usage.output_tokens  # one token per chunk in the default timing model


def test_anthropic_create_stream_true_returns_the_sdk_stream(ant: lk.Anthropic, raw_ant: anthropic.Anthropic) -> None:
    """create(stream=True) returns an anthropic.Stream with the same events the raw SDK yields."""
    stream = ant.messages.create(stream=True, **ANT_REQ)
    assert isinstance(stream, anthropic.Stream)
    events = [e.to_dict() for e in stream]
    raw_events = [e.to_dict() for e in raw_ant.messages.create(stream=True, **ANT_REQ)]
    assert events == raw_events
    rec = ant.latency.last
    assert rec is not None and rec.method == "create(stream=True)" and rec.outcome == "completed"
    deltas = [e for e in events if e["type"] == "content_block_delta"]
    assert rec.chunks == len(deltas) and rec.output_tokens == events[-2]["usage"]["output_tokens"]


def test_anthropic_messages_stream_helper(ant: lk.Anthropic, raw_ant: anthropic.Anthropic) -> None:
    """messages.stream() keeps the SDK helper: text_stream, get_final_message(), response headers."""
    with ant.messages.stream(**ANT_REQ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
        assert stream.request_id is not None
    with raw_ant.messages.stream(**ANT_REQ) as raw:
        expected = raw.get_final_message()
    assert text == expected.content[0].text and final == expected
    rec = ant.latency.last
    assert rec is not None and rec.method == "stream" and rec.outcome == "completed"
    assert ant.latency.total_calls == 1 and rec.ttft is not None


def test_anthropic_tool_use_equals_nonstreamed(ant: lk.Anthropic, raw_ant: anthropic.Anthropic) -> None:
    """Tool-use blocks reassembled from input_json_delta equal the non-streamed ones; TTFT counts tool arguments."""
    req = {**ANT_REQ, "tools": [WEATHER_TOOL_ANT], "tool_choice": {"type": "tool", "name": "get_weather"}}
    msg = ant.messages.create(**req)
    expected = raw_ant.messages.create(**req)
    assert msg == expected
    tool = [b for b in msg.content if b.type == "tool_use"][0]
    assert tool.name == "get_weather" and isinstance(tool.input, dict) and tool.input
    rec = ant.latency.last
    assert rec is not None and rec.finish_reasons == ("tool_use",) and rec.ttft is not None


def test_anthropic_thinking_counts_as_first_token(ant: lk.Anthropic, raw_ant: anthropic.Anthropic) -> None:
    """Thinking deltas are generated tokens: TTFT stops at the first thinking_delta, not the text."""
    req = {**ANT_REQ, "max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024}}
    with ant.messages.stream(**req) as stream:
        first_thinking = None
        for event in stream:
            if event.type == "thinking" and first_thinking is None:
                first_thinking = event
        final = stream.get_final_message()
    assert first_thinking is not None
    assert [b.type for b in final.content][:1] == ["thinking"]
    assert final.to_dict() == raw_ant.messages.create(**req).to_dict()
    rec = ant.latency.last
    assert rec is not None and rec.ttft is not None and rec.chunks >= 2


def test_anthropic_api_error_is_the_sdk_error(ant: lk.Anthropic, raw_ant: anthropic.Anthropic) -> None:
    """HTTP errors raise the SDK's own exception classes and are recorded as outcome="error"."""
    for status, cls in ((529, anthropic.APIStatusError), (429, anthropic.RateLimitError), (400, anthropic.BadRequestError)):
        with pytest.raises(cls) as ours:
            ant.messages.create(**ANT_REQ, extra_headers=headers(status=status))
        with pytest.raises(cls) as theirs:
            raw_ant.messages.create(**ANT_REQ, extra_headers=headers(status=status))
        assert type(ours.value) is type(theirs.value) and ours.value.status_code == status
        rec = ant.latency.last
        assert rec is not None and rec.outcome == "error" and rec.error_type == type(ours.value).__name__
        assert rec.ttft is None and rec.e2e is not None


def test_anthropic_error_event_mid_stream_is_interrupted(ant: lk.Anthropic) -> None:
    """An `error` event after content raises the SDK error in the loop; the record says interrupted."""
    stream = ant.messages.create(stream=True, **ANT_REQ, extra_headers=headers(error_after_chunks=3))
    seen = []
    with pytest.raises(anthropic.APIStatusError):
        for event in stream:
            seen.append(event)
    rec = ant.latency.last
    assert rec is not None and rec.outcome == "interrupted" and rec.chunks == 3 and rec.ttft is not None
    assert any(e.type == "content_block_delta" for e in seen)


def test_anthropic_dropped_connection_is_not_a_silent_truncation(ant: lk.Anthropic) -> None:
    """A non-streaming call whose stream drops mid-way raises instead of returning a truncated Message."""
    with pytest.raises((lk.IncompleteStreamError, anthropic.APIError, Exception)) as info:
        ant.messages.create(**ANT_REQ, extra_headers=headers(drop_after_chunks=2))
    assert not isinstance(info.value, AssertionError)
    rec = ant.latency.last
    assert rec is not None and rec.outcome == "interrupted" and rec.chunks == 2


def test_anthropic_prewarm_passes_through_unstreamed(ant: lk.Anthropic, emu: Emulator) -> None:
    """max_tokens=0 (cache pre-warm) cannot be streamed: sent as given, recorded with streamed=False and why."""
    msg = ant.messages.create(**{**ANT_REQ, "max_tokens": 0})
    assert isinstance(msg, Message)
    assert "stream" not in _last_body(emu)
    rec = ant.latency.last
    assert rec is not None and rec.streamed is False and "max_tokens=0" in (rec.not_streamed_reason or "")
    assert rec.ttft is None and rec.e2e is not None and rec.outcome == "completed"


def test_anthropic_with_raw_response_passes_through(ant: lk.Anthropic, emu: Emulator) -> None:
    """with_raw_response is the SDK's own: a raw response whose parse() gives the Message."""
    raw = ant.messages.with_raw_response.create(**ANT_REQ)
    assert raw.http_request.url.path == "/v1/messages"
    assert isinstance(raw.parse(), Message)


# -- OpenAI Chat Completions ---------------------------------------------------------------


def test_chat_create_is_streamed_and_equals_nonstreamed(oai: lk.OpenAI, raw_oai: openai.OpenAI, emu: Emulator) -> None:
    """chat.completions.create() is streamed with include_usage and returns the same ChatCompletion."""
    completion = oai.chat.completions.create(**CHAT_REQ)
    sent = _last_body(emu)
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    expected = raw_oai.chat.completions.create(**CHAT_REQ)
    assert type(completion) is ChatCompletion and completion == expected
    assert completion.usage == expected.usage and completion.choices[0].message.content == expected.choices[0].message.content
    rec = oai.latency.last
    assert rec is not None and (rec.provider, rec.api, rec.method, rec.outcome) == ("openai", "chat.completions", "create", "completed")
    assert rec.input_tokens == expected.usage.prompt_tokens and rec.output_tokens == expected.usage.completion_tokens
    assert rec.cache_read_tokens == 0 and rec.tpot is not None and rec.ttft is not None and rec.ttft > rec.ttfb


def test_chat_stream_true_hides_the_usage_chunk_it_added(oai: lk.OpenAI, raw_oai: openai.OpenAI, emu: Emulator) -> None:
    """Without include_usage from the caller, no usage-only chunk reaches them, yet the record has usage."""
    chunks = list(oai.chat.completions.create(stream=True, **CHAT_REQ))
    assert _last_body(emu)["stream_options"] == {"include_usage": True}
    raw_chunks = list(raw_oai.chat.completions.create(stream=True, **CHAT_REQ))
    assert all(isinstance(c, ChatCompletionChunk) and c.choices for c in chunks)
    assert [c.choices[0].delta.content for c in chunks] == [c.choices[0].delta.content for c in raw_chunks]
    rec = oai.latency.last
    assert rec is not None and rec.output_tokens is not None and rec.tpot is not None and rec.outcome == "completed"


def test_chat_stream_true_keeps_usage_chunk_when_asked(oai: lk.OpenAI) -> None:
    """With include_usage from the caller, the usage chunk is delivered as usual."""
    chunks = list(oai.chat.completions.create(stream=True, stream_options={"include_usage": True}, **CHAT_REQ))
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert oai.latency.last is not None and oai.latency.last.output_tokens == chunks[-1].usage.completion_tokens


def test_chat_does_not_mutate_caller_objects(oai: lk.OpenAI) -> None:
    """The caller's stream_options and messages are left exactly as they were."""
    opts = {"include_usage": False}
    req = json.loads(json.dumps(CHAT_REQ))
    list(oai.chat.completions.create(stream=True, stream_options=opts, **req))
    assert opts == {"include_usage": False} and req == CHAT_REQ


def test_chat_stream_helper_and_parse(oai: lk.OpenAI, raw_oai: openai.OpenAI) -> None:
    """chat.completions.stream() and .parse() work through the SDK helpers and are timed once each."""
    with oai.chat.completions.stream(**CHAT_REQ) as stream:
        deltas = [e.delta for e in stream if e.type == "content.delta"]
        final = stream.get_final_completion()
    assert "".join(deltas) == final.choices[0].message.content
    assert oai.latency.last is not None and oai.latency.last.method == "stream"
    parsed = oai.chat.completions.parse(**CHAT_REQ)
    expected = raw_oai.chat.completions.parse(**CHAT_REQ)
    assert parsed.choices[0].message.content == expected.choices[0].message.content
    assert oai.latency.total_calls == 2 and all(r.outcome == "completed" for r in oai.latency.calls)


def test_chat_tool_calls_equal_nonstreamed(oai: lk.OpenAI, raw_oai: openai.OpenAI) -> None:
    """Streamed tool-call deltas reassemble into the same tool_calls as the non-streamed answer."""
    req = {**CHAT_REQ, "tools": [WEATHER_TOOL_OAI], "tool_choice": "required"}
    completion = oai.chat.completions.create(**req)
    expected = raw_oai.chat.completions.create(**req)
    assert completion == expected
    call = completion.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and json.loads(call.function.arguments)
    rec = oai.latency.last
    assert rec is not None and rec.finish_reasons == ("tool_calls",) and rec.ttft is not None


def test_chat_api_error_is_the_sdk_error(oai: lk.OpenAI) -> None:
    """A 429 raises openai.RateLimitError unchanged and records outcome="error"."""
    with pytest.raises(openai.RateLimitError):
        oai.chat.completions.create(**CHAT_REQ, extra_headers=headers(status=429))
    rec = oai.latency.last
    assert rec is not None and rec.outcome == "error" and rec.error_type == "RateLimitError"


# -- OpenAI Responses ----------------------------------------------------------------------


def test_responses_create_is_streamed_and_equals_nonstreamed(oai: lk.OpenAI, raw_oai: openai.OpenAI, emu: Emulator) -> None:
    """responses.create() is streamed and returns the Response that response.completed carried."""
    response = oai.responses.create(**RESP_REQ)
    assert _last_body(emu)["stream"] is True
    expected = raw_oai.responses.create(**RESP_REQ)
    assert type(response) is Response and response == expected
    rec = oai.latency.last
    assert rec is not None and (rec.api, rec.method, rec.outcome) == ("responses", "create", "completed")
    assert rec.output_tokens == expected.usage.output_tokens and rec.input_tokens == expected.usage.input_tokens
    assert rec.ttft is not None and rec.tpot is not None


def test_responses_stream_forms(oai: lk.OpenAI, raw_oai: openai.OpenAI) -> None:
    """responses.create(stream=True) and responses.stream() keep the SDK types and are timed."""
    events = list(oai.responses.create(stream=True, **RESP_REQ))
    assert events[-1].type == "response.completed"
    assert oai.latency.last is not None and oai.latency.last.method == "create(stream=True)"
    with oai.responses.stream(**RESP_REQ) as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert text == final.output_text == raw_oai.responses.create(**RESP_REQ).output_text
    assert oai.latency.last.method == "stream" and oai.latency.total_calls == 2


def test_responses_function_call_equals_nonstreamed(oai: lk.OpenAI, raw_oai: openai.OpenAI) -> None:
    """A function call streamed as argument deltas reassembles into the non-streamed Response."""
    req = {**RESP_REQ, "tools": [WEATHER_TOOL_RESP], "tool_choice": "required"}
    response = oai.responses.create(**req)
    assert response == raw_oai.responses.create(**req)
    assert any(item.type == "function_call" for item in response.output)
    assert oai.latency.last is not None and oai.latency.last.ttft is not None


# -- clients, options, wrap ----------------------------------------------------------------


def test_with_options_and_copy_share_the_recorder(ant: lk.Anthropic) -> None:
    """with_options()/copy() return latencykit clients recording into the same Recorder."""
    other = ant.with_options(timeout=30)
    assert isinstance(other, lk.Anthropic) and other.latency is ant.latency
    other.messages.create(**ANT_REQ)
    ant.copy(max_retries=1).messages.create(**ANT_REQ)
    assert ant.latency.total_calls == 2


def test_one_recorder_shared_by_two_providers(emu: Emulator) -> None:
    """A Recorder passed to several clients collects all their calls; summary() groups them."""
    shared = lk.Recorder()
    with lk.Anthropic(base_url=emu.base_url, api_key="k", recorder=shared) as a, lk.OpenAI(
        base_url=emu.base_url + "/v1", api_key="k", recorder=shared
    ) as o:
        for _ in range(3):
            a.messages.create(**ANT_REQ)
            o.chat.completions.create(**CHAT_REQ)
    summary = shared.summary()
    assert summary.calls == 6 and summary["ttft"].count == 6
    assert {g.provider for g in summary.groups} == {"anthropic", "openai"}
    s = summary["ttft"]
    assert s.p50 is not None and s.p95 is not None and s.p99 is not None and s.p50 <= s.p95 <= s.p99 <= s.max  # type: ignore[operator]
    assert "TTFT" in str(summary) and "<table" in summary._repr_html_()


def test_wrap_existing_clients(emu: Emulator) -> None:
    """wrap() gives a recording client that is still an instance of the SDK class; the original stays raw."""
    raw = anthropic.Anthropic(base_url=emu.base_url, api_key="k")
    wrapped = lk.wrap(raw)
    assert isinstance(wrapped, anthropic.Anthropic) and isinstance(wrapped, lk.Anthropic)
    wrapped.messages.create(**ANT_REQ)
    raw.messages.create(**ANT_REQ)
    assert wrapped.latency.total_calls == 1
    assert lk.wrap(wrapped) is wrapped
    azure = openai.AzureOpenAI(api_key="k", api_version="2025-01-01", azure_endpoint=emu.base_url)
    wrapped_azure = lk.wrap(azure)
    assert isinstance(wrapped_azure, openai.AzureOpenAI) and wrapped_azure._lk.provider == "azure.ai.openai"
    assert type(wrapped_azure.chat.completions).__mro__[1] is openai.resources.chat.Completions
    bedrock = anthropic.AnthropicBedrock(aws_access_key="a", aws_secret_key="b", aws_region="us-east-1")
    wrapped_bedrock = lk.wrap(bedrock)
    assert isinstance(wrapped_bedrock, anthropic.AnthropicBedrock) and wrapped_bedrock._lk.provider == "aws.bedrock"
    assert wrapped_bedrock.latency is not wrapped.latency
    raw.close()


def test_bad_options_raise_clear_errors() -> None:
    """Invalid latencykit options raise ValueError/TypeError naming the bad value."""
    with pytest.raises(ValueError, match="recorder"):
        lk.Anthropic(api_key="k", recorder="nope")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dict"):
        lk.wrap({})
    with pytest.raises(ValueError, match="max_calls"):
        lk.Recorder(max_calls=0)


def test_recorder_is_bounded(emu: Emulator) -> None:
    """Recorder keeps at most max_calls records but counts every call."""
    rec = lk.Recorder(max_calls=3)
    with lk.OpenAI(base_url=emu.base_url + "/v1", api_key="k", recorder=rec) as client:
        for _ in range(5):
            client.responses.create(**RESP_REQ)
    assert len(rec.calls) == 3 and rec.total_calls == 5


# -- structured output ---------------------------------------------------------------------


class Forecast(pydantic.BaseModel):
    """A structured answer the emulator fills from its JSON schema."""

    city: str
    days: int
    tags: list[str]


def test_structured_output_parse_all_apis(ant: lk.Anthropic, raw_ant: anthropic.Anthropic, oai: lk.OpenAI, raw_oai: openai.OpenAI) -> None:
    """parse() with a pydantic model gives the same parsed object as the raw SDK; streamed where possible."""
    msg = ant.messages.parse(**ANT_REQ, output_format=Forecast)
    assert msg.parsed_output == raw_ant.messages.parse(**ANT_REQ, output_format=Forecast).parsed_output
    assert isinstance(msg.parsed_output, Forecast)
    rec = ant.latency.last
    assert rec is not None and (rec.method, rec.streamed, rec.outcome) == ("parse", True, "completed") and rec.ttft is not None

    chat = oai.chat.completions.parse(**CHAT_REQ, response_format=Forecast)
    assert chat.choices[0].message.parsed == raw_oai.chat.completions.parse(**CHAT_REQ, response_format=Forecast).choices[0].message.parsed
    rec = oai.latency.last
    assert rec is not None and (rec.method, rec.streamed) == ("parse", True)

    resp = oai.responses.parse(**RESP_REQ, text_format=Forecast)
    assert resp.output_parsed == raw_oai.responses.parse(**RESP_REQ, text_format=Forecast).output_parsed
    rec = oai.latency.last
    assert rec is not None and rec.method == "parse" and rec.streamed is False and rec.not_streamed_reason
    assert rec.e2e is not None and rec.output_tokens == resp.usage.output_tokens  # type: ignore[union-attr]
