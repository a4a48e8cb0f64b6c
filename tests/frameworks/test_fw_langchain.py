"""LangChain chat models holding latencykit clients: ChatOpenAI and ChatAnthropic, sync and async."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

import latencykit as lk
from latencykit.emulator import Emulator

from _tier import TEXT_TOKENS, check_streamed, model_calls, need, streamed_request

need("langchain_openai", "langchain-openai")
need("langchain_anthropic", "langchain-anthropic")
from langchain_anthropic import ChatAnthropic  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402


class Weather(pydantic.BaseModel):
    """Weather for a city."""

    city: str
    days: int


EXPECTED = Weather(city="value-1", days=2)


def _chat_openai(client: lk.OpenAI, aclient: Any, responses: bool) -> Any:
    # ChatOpenAI takes the SDK clients as `client`/`root_client` (sync) and `async_client`/`root_async_client`.
    return ChatOpenAI(
        model="gpt-4o-mini", client=client.chat.completions, root_client=client, async_client=aclient.chat.completions,
        root_async_client=aclient, use_responses_api=responses, stream_usage=True,
    )  # fmt: skip


def _chat_anthropic(client: lk.Anthropic, aclient: Any) -> Any:
    model = ChatAnthropic(model="claude-sonnet-5", api_key="sk-ant-test", base_url="http://unused.invalid", max_tokens=256)
    # ChatAnthropic has no client argument: it builds its SDK clients in cached properties,
    # so setting those attributes first is how users hand it theirs.
    model.__dict__["_client"] = client
    model.__dict__["_async_client"] = aclient
    return model


@pytest.fixture(params=["openai-chat", "openai-responses", "anthropic"])
def chat_model(request: pytest.FixtureRequest, oai: lk.OpenAI, aoai: Any, ant: lk.Anthropic, aant: Any) -> Any:
    """Each LangChain chat model in turn, holding latencykit clients that share the test's Recorder."""
    if request.param == "anthropic":
        return _chat_anthropic(ant, aant)
    return _chat_openai(oai, aoai, responses=request.param == "openai-responses")


def _usage_matches(rec: lk.CallRecord, message: Any) -> None:
    usage = message.usage_metadata
    assert usage is not None
    assert (rec.input_tokens, rec.output_tokens) == (usage["input_tokens"], usage["output_tokens"])


def test_invoke(emu: Emulator, chat_model: Any, recorder: lk.Recorder) -> None:
    """invoke: the answer and one record whose tokens are the ones LangChain reports."""
    with model_calls(emu, recorder) as calls:
        message = chat_model.invoke("Name three colours.")
    assert len(message.text.split()) == TEXT_TOKENS
    rec = calls.only
    _usage_matches(rec, message)
    check_streamed(rec, streamed_request(calls))


async def test_ainvoke(emu: Emulator, chat_model: Any, recorder: lk.Recorder) -> None:
    """ainvoke: the async client's one record."""
    with model_calls(emu, recorder) as calls:
        message = await chat_model.ainvoke("Name three colours.")
    assert len(message.text.split()) == TEXT_TOKENS
    _usage_matches(calls.only, message)
    check_streamed(calls.only, streamed_request(calls))


def test_stream(emu: Emulator, chat_model: Any, recorder: lk.Recorder) -> None:
    """stream: chunks reach the caller as they arrive; one streamed record with TTFT."""
    with model_calls(emu, recorder) as calls:
        chunks = list(chat_model.stream("Name three colours."))
    assert len(chunks) > 2
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole = whole + chunk
    assert len(whole.text.split()) == TEXT_TOKENS
    rec = calls.only
    assert streamed_request(calls)
    check_streamed(rec, True)
    _usage_matches(rec, whole)


async def test_astream(emu: Emulator, chat_model: Any, recorder: lk.Recorder) -> None:
    """astream: the async stream, one record."""
    with model_calls(emu, recorder) as calls:
        chunks = [chunk async for chunk in chat_model.astream("Name three colours.")]
    assert len(chunks) > 2
    check_streamed(calls.only, True)


def test_with_structured_output(emu: Emulator, chat_model: Any, recorder: lk.Recorder) -> None:
    """with_structured_output(Weather): the object, one record."""
    with model_calls(emu, recorder) as calls:
        weather = chat_model.with_structured_output(Weather).invoke("Weather in Paris for two days?")
    assert weather == EXPECTED
    assert calls.only.output_tokens


async def test_with_structured_output_async(emu: Emulator, chat_model: Any, recorder: lk.Recorder) -> None:
    """with_structured_output(Weather).ainvoke: the object, one record."""
    with model_calls(emu, recorder) as calls:
        weather = await chat_model.with_structured_output(Weather).ainvoke("Weather in Paris for two days?")
    assert weather == EXPECTED
    assert calls.only.output_tokens


def test_bind_tools(emu: Emulator, chat_model: Any, recorder: lk.Recorder) -> None:
    """bind_tools with a forced tool: the tool call LangChain parsed, one record."""
    with model_calls(emu, recorder) as calls:
        message = chat_model.bind_tools([Weather], tool_choice="Weather").invoke("Weather in Paris for two days?")
    assert [(c["name"], c["args"]) for c in message.tool_calls] == [("Weather", EXPECTED.model_dump())]
    _usage_matches(calls.only, message)


async def test_bind_tools_astream(emu: Emulator, chat_model: Any, recorder: lk.Recorder) -> None:
    """bind_tools + astream: tool-call chunks add up to the call; one streamed record."""
    with model_calls(emu, recorder) as calls:
        chunks = [c async for c in chat_model.bind_tools([Weather], tool_choice="Weather").astream("Weather in Paris?")]
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole = whole + chunk
    assert [(c["name"], c["args"]) for c in whole.tool_calls] == [("Weather", EXPECTED.model_dump())]
    check_streamed(calls.only, True)
