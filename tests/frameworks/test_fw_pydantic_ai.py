"""pydantic-ai agents on latencykit clients: OpenAI chat and Responses models, Anthropic model."""

from __future__ import annotations

from typing import Any, Callable

import pydantic
import pytest

import latencykit as lk
from latencykit.emulator import Emulator

from _tier import TEXT_TOKENS, model_calls, need, streamed_request

need("pydantic_ai", "pydantic-ai-slim[openai,anthropic]")
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.models.anthropic import AnthropicModel  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel  # noqa: E402
from pydantic_ai.providers.anthropic import AnthropicProvider  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402


class Weather(pydantic.BaseModel):
    """The structured answer the tests ask for."""

    city: str
    days: int


EXPECTED = {"city": "value-1", "days": 2}


def _chat(client: Any) -> Any:
    return OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client))


def _responses(client: Any) -> Any:
    return OpenAIResponsesModel("gpt-4.1-mini", provider=OpenAIProvider(openai_client=client))


def _anthropic(client: Any) -> Any:
    return AnthropicModel("claude-sonnet-5", provider=AnthropicProvider(anthropic_client=client))


def _usage(result: Any) -> Any:
    # `usage` is a method in older pydantic-ai releases and a property in newer ones.
    usage = result.usage
    return usage if hasattr(usage, "input_tokens") else usage()


MODELS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "openai-chat": ("aoai", _chat),
    "openai-responses": ("aoai", _responses),
    "anthropic": ("aant", _anthropic),
}


@pytest.fixture(params=list(MODELS))
def model(request: pytest.FixtureRequest) -> Any:
    """A pydantic-ai model over the latencykit async client of its provider."""
    fixture, make = MODELS[request.param]
    return make(request.getfixturevalue(fixture))


async def test_run_text(emu: Emulator, model: Any, recorder: lk.Recorder) -> None:
    """agent.run: the text answer, one record whose tokens are the usage pydantic-ai reports."""
    agent = Agent(model, instructions="You are terse.")
    with model_calls(emu, recorder) as calls:
        result = await agent.run("Name three colours.")
    assert isinstance(result.output, str) and len(result.output.split()) == TEXT_TOKENS
    rec = calls.only
    usage = _usage(result)
    assert (rec.input_tokens, rec.output_tokens) == (usage.input_tokens, usage.output_tokens)
    assert rec.streamed is True and rec.ttft is not None


async def test_run_stream_text(emu: Emulator, model: Any, recorder: lk.Recorder) -> None:
    """agent.run_stream: text arrives in pieces; the stream pydantic-ai asked for is the one recorded."""
    agent = Agent(model)
    with model_calls(emu, recorder) as calls:
        async with agent.run_stream("Name three colours.") as result:
            pieces = [piece async for piece in result.stream_text(delta=True, debounce_by=None)]
    assert len(pieces) > 1 and len("".join(pieces).split()) == TEXT_TOKENS
    rec = calls.only
    assert streamed_request(calls) and rec.streamed is True
    assert rec.output_tokens == TEXT_TOKENS and rec.chunks > 1


async def test_structured_output(emu: Emulator, model: Any, recorder: lk.Recorder) -> None:
    """output_type=Weather (pydantic-ai's output tool): the object, one record."""
    agent = Agent(model, output_type=Weather)
    with model_calls(emu, recorder) as calls:
        result = await agent.run("Weather in Paris for two days?")
    assert result.output == Weather(**EXPECTED)
    assert calls.only.output_tokens == _usage(result).output_tokens


def test_run_sync_chat(emu: Emulator, aoai: Any, recorder: lk.Recorder) -> None:
    """agent.run_sync (pydantic-ai's sync entry point over the async client): one record."""
    agent = Agent(_chat(aoai), output_type=Weather)
    with model_calls(emu, recorder) as calls:
        result = agent.run_sync("Weather in Paris for two days?")
    assert result.output == Weather(**EXPECTED)
    assert calls.only.streamed is True
