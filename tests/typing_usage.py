"""Typed usage, checked by ``mypy --strict`` (tests/test_typing.py) and never run: wrappers keep the SDK's types."""

from __future__ import annotations

from typing import Optional

import anthropic
import openai
from anthropic.lib.streaming import AsyncMessageStream, AsyncMessageStreamManager, MessageStream, MessageStreamManager
from anthropic.types import Message, MessageParam, ParsedMessage, RawMessageStreamEvent
from anthropic.types.beta import BetaMessage
from openai.lib.streaming.chat import (
    AsyncChatCompletionStream,
    AsyncChatCompletionStreamManager,
    ChatCompletionStream,
    ChatCompletionStreamManager,
)
from openai.lib.streaming.responses import (
    AsyncResponseStream,
    AsyncResponseStreamManager,
    ResponseStream,
    ResponseStreamManager,
)
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessageParam, ParsedChatCompletion
from openai.types.responses import ParsedResponse, Response, ResponseStreamEvent
from typing_extensions import assert_type

import latencykit as lk

MODEL = "model"
MESSAGES: list[MessageParam] = [{"role": "user", "content": "Hello"}]
CHAT: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Hello"}]


def anthropic_sync() -> None:
    """``lk.Anthropic`` keeps the return types of ``messages.create`` and ``messages.stream``."""
    client = lk.Anthropic(api_key="key", recorder=lk.Recorder())
    assert_type(client.messages.create(model=MODEL, max_tokens=16, messages=MESSAGES), Message)
    assert_type(
        client.messages.create(model=MODEL, max_tokens=16, messages=MESSAGES, stream=True),
        anthropic.Stream[RawMessageStreamEvent],
    )
    manager = client.messages.stream(model=MODEL, max_tokens=16, messages=MESSAGES)
    assert_type(manager, MessageStreamManager[None])
    with manager as stream:
        assert_type(stream, MessageStream[None])
        assert_type(stream.get_final_message(), ParsedMessage[None])
        assert_type(stream.get_final_text(), str)


async def anthropic_async() -> None:
    """``lk.AsyncAnthropic`` keeps the awaited return types of ``messages.create`` and ``messages.stream``."""
    client = lk.AsyncAnthropic(api_key="key")
    assert_type(await client.messages.create(model=MODEL, max_tokens=16, messages=MESSAGES), Message)
    assert_type(
        await client.messages.create(model=MODEL, max_tokens=16, messages=MESSAGES, stream=True),
        anthropic.AsyncStream[RawMessageStreamEvent],
    )
    manager = client.messages.stream(model=MODEL, max_tokens=16, messages=MESSAGES)
    assert_type(manager, AsyncMessageStreamManager[None])
    async with manager as stream:
        assert_type(stream, AsyncMessageStream[None])
        assert_type(await stream.get_final_message(), ParsedMessage[None])


def openai_sync() -> None:
    """``lk.OpenAI`` keeps the return types of Chat Completions and Responses."""
    client = lk.OpenAI(api_key="key")
    completions = client.chat.completions
    assert_type(completions.create(model=MODEL, messages=CHAT), ChatCompletion)
    assert_type(completions.create(model=MODEL, messages=CHAT, stream=True), openai.Stream[ChatCompletionChunk])
    assert_type(completions.parse(model=MODEL, messages=CHAT), ParsedChatCompletion[None])
    chat_manager = completions.stream(model=MODEL, messages=CHAT)
    assert_type(chat_manager, ChatCompletionStreamManager[None])
    with chat_manager as chat_stream:
        assert_type(chat_stream, ChatCompletionStream[None])
        assert_type(chat_stream.get_final_completion(), ParsedChatCompletion[None])

    assert_type(client.responses.create(model=MODEL, input="Hello"), Response)
    assert_type(client.responses.create(model=MODEL, input="Hello", stream=True), openai.Stream[ResponseStreamEvent])
    responses_manager = client.responses.stream(model=MODEL, input="Hello")
    assert_type(responses_manager, ResponseStreamManager[None])
    with responses_manager as responses_stream:
        assert_type(responses_stream, ResponseStream[None])
        assert_type(responses_stream.get_final_response(), ParsedResponse[None])


async def openai_async() -> None:
    """``lk.AsyncOpenAI`` keeps the awaited return types of Chat Completions and Responses."""
    client = lk.AsyncOpenAI(api_key="key")
    completions = client.chat.completions
    assert_type(await completions.create(model=MODEL, messages=CHAT), ChatCompletion)
    assert_type(
        await completions.create(model=MODEL, messages=CHAT, stream=True), openai.AsyncStream[ChatCompletionChunk]
    )
    assert_type(await completions.parse(model=MODEL, messages=CHAT), ParsedChatCompletion[None])
    chat_manager = completions.stream(model=MODEL, messages=CHAT)
    assert_type(chat_manager, AsyncChatCompletionStreamManager[None])
    async with chat_manager as chat_stream:
        assert_type(chat_stream, AsyncChatCompletionStream[None])
        assert_type(await chat_stream.get_final_completion(), ParsedChatCompletion[None])

    assert_type(await client.responses.create(model=MODEL, input="Hello"), Response)
    assert_type(
        await client.responses.create(model=MODEL, input="Hello", stream=True),
        openai.AsyncStream[ResponseStreamEvent],
    )
    responses_manager = client.responses.stream(model=MODEL, input="Hello")
    assert_type(responses_manager, AsyncResponseStreamManager[None])
    async with responses_manager as responses_stream:
        assert_type(responses_stream, AsyncResponseStream[None])
        assert_type(await responses_stream.get_final_response(), ParsedResponse[None])


def latency_and_options() -> None:
    """``client.latency`` is a `Recorder`, and ``with_options()`` / ``copy()`` keep the latencykit class."""
    client = lk.Anthropic(api_key="key")
    assert_type(client.latency, lk.Recorder)
    assert_type(client.latency.last, Optional[lk.CallRecord])
    assert_type(client.latency.calls, list[lk.CallRecord])
    assert_type(client.latency.summary(), lk.Summary)
    assert_type(client.with_options(timeout=5), lk.Anthropic)
    assert_type(client.copy(max_retries=0), lk.Anthropic)
    assert_type(client.with_options(timeout=5).latency, lk.Recorder)
    assert_type(lk.AsyncAnthropic(api_key="key").with_options(timeout=5), lk.AsyncAnthropic)
    assert_type(lk.OpenAI(api_key="key").with_options(timeout=5), lk.OpenAI)
    assert_type(lk.AsyncOpenAI(api_key="key").with_options(timeout=5).latency.last, Optional[lk.CallRecord])


def wrapped_clients() -> None:
    """`lk.wrap` returns the latencykit class for plain SDK clients and the client's own type otherwise."""
    recorder = lk.Recorder()
    assert_type(lk.wrap(anthropic.Anthropic(api_key="key")), lk.Anthropic)
    assert_type(lk.wrap(anthropic.AsyncAnthropic(api_key="key"), recorder=recorder), lk.AsyncAnthropic)
    assert_type(lk.wrap(openai.OpenAI(api_key="key")), lk.OpenAI)
    assert_type(lk.wrap(openai.AsyncOpenAI()), lk.AsyncOpenAI)
    assert_type(lk.wrap(lk.Anthropic(api_key="key")), lk.Anthropic)
    assert_type(lk.wrap(anthropic.AnthropicBedrock(aws_region="us-east-1")), anthropic.AnthropicBedrock)
    wrapped = lk.wrap(openai.AsyncOpenAI(api_key="key"))
    assert_type(wrapped.latency, lk.Recorder)
    assert_type(wrapped.chat.completions.stream(model=MODEL, messages=CHAT), AsyncChatCompletionStreamManager[None])


def raw_and_beta_paths() -> None:
    """Raw responses, ``beta.messages`` and ``client.post()`` keep the SDK's types (all recorded, see docs/paths.md)."""
    ant = lk.Anthropic(api_key="key")
    raw = ant.messages.with_raw_response.create(model=MODEL, max_tokens=16, messages=MESSAGES)
    assert_type(raw, anthropic._response.APIResponse[Message])
    assert_type(raw.parse(), Message)
    with ant.messages.with_streaming_response.create(model=MODEL, max_tokens=16, messages=MESSAGES, stream=True) as response:
        assert_type(response.parse(), anthropic.Stream[RawMessageStreamEvent])
    assert_type(ant.beta.messages.create(model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "Hello"}]), BetaMessage)
    assert_type(ant.post("/v1/messages", body={}, cast_to=Message), Message)
    oai = lk.OpenAI(api_key="key")
    legacy = oai.chat.completions.with_raw_response.create(model=MODEL, messages=CHAT)
    assert_type(legacy.parse(), ChatCompletion)
    with oai.responses.with_streaming_response.create(model=MODEL, input="hi", stream=True) as streaming:
        assert_type(streaming.parse(), openai.Stream[ResponseStreamEvent])


async def raw_and_beta_paths_async() -> None:
    """Async twins keep the SDK's types."""
    ant = lk.AsyncAnthropic(api_key="key")
    raw = await ant.messages.with_raw_response.create(model=MODEL, max_tokens=16, messages=MESSAGES)
    assert_type(await raw.parse(), Message)
    assert_type(await ant.beta.messages.create(model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "Hello"}]), BetaMessage)
    oai = lk.AsyncOpenAI(api_key="key")
    async with oai.responses.with_streaming_response.create(model=MODEL, input="hi", stream=True) as streaming:
        assert_type(await streaming.parse(), openai.AsyncStream[ResponseStreamEvent])
