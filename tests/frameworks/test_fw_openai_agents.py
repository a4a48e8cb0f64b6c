"""openai-agents on a latencykit AsyncOpenAI: chat-completions and Responses models, run and run_streamed."""

from __future__ import annotations

import gc
import warnings
from collections.abc import Iterator
from typing import Any, Callable

import pydantic
import pytest

import latencykit as lk
from latencykit.emulator import Emulator

from _tier import TEXT_TOKENS, model_calls, need, streamed_request

agents = need("agents", "openai-agents")
from agents import Agent, ModelSettings, RunConfig, Runner, function_tool  # noqa: E402
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel  # noqa: E402
from agents.models.openai_responses import OpenAIResponsesModel  # noqa: E402

# Tracing would export to the OpenAI platform; these tests run offline.
agents.set_tracing_disabled(True)
OFFLINE = RunConfig(tracing_disabled=True)


class Weather(pydantic.BaseModel):
    """The structured answer the tests ask for."""

    city: str
    days: int


@function_tool
def get_weather(city: str, days: int) -> str:
    """Weather for a city."""
    return f"sunny in {city} for {days} days"


MODELS: dict[str, Callable[[Any], Any]] = {
    "chat": lambda client: OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
    "responses": lambda client: OpenAIResponsesModel(model="gpt-4.1-mini", openai_client=client),
}


@pytest.fixture(params=list(MODELS))
def model(request: pytest.FixtureRequest, aoai: Any) -> Any:
    """An openai-agents model over the latencykit AsyncOpenAI."""
    return MODELS[request.param](aoai)


def _usage(result: Any) -> Any:
    return result.context_wrapper.usage


async def test_run_text(emu: Emulator, model: Any, recorder: lk.Recorder) -> None:
    """Runner.run: the text answer, one streamed record with the usage the SDK counted."""
    agent = Agent(name="terse", instructions="You are terse.", model=model)
    with model_calls(emu, recorder) as calls:
        result = await Runner.run(agent, "Name three colours.", run_config=OFFLINE)
    assert len(result.final_output.split()) == TEXT_TOKENS
    rec = calls.only
    usage = _usage(result)
    assert (rec.input_tokens, rec.output_tokens) == (usage.input_tokens, usage.output_tokens)
    assert rec.streamed is True and rec.ttft is not None


async def test_run_streamed(emu: Emulator, model: Any, recorder: lk.Recorder) -> None:
    """Runner.run_streamed: text deltas reach the caller; the one stream is recorded with its chunks."""
    agent = Agent(name="terse", instructions="You are terse.", model=model)
    with model_calls(emu, recorder) as calls:
        result = Runner.run_streamed(agent, "Name three colours.", run_config=OFFLINE)
        deltas = [
            event.data.delta
            async for event in result.stream_events()
            if event.type == "raw_response_event" and getattr(event.data, "type", "") == "response.output_text.delta"
        ]
    assert len(deltas) > 1 and "".join(deltas) == result.final_output
    rec = calls.only
    assert streamed_request(calls) and rec.streamed is True
    assert rec.output_tokens == TEXT_TOKENS and rec.chunks > 1


async def test_tool_call_stops_on_first_tool(emu: Emulator, model: Any, recorder: lk.Recorder) -> None:
    """A forced function call, run by the SDK (stop_on_first_tool): one model call, one record."""
    agent = Agent(
        name="weather", model=model, tools=[get_weather], tool_use_behavior="stop_on_first_tool",
        model_settings=ModelSettings(tool_choice="required"),
    )  # fmt: skip
    with model_calls(emu, recorder) as calls:
        result = await Runner.run(agent, "Weather in Paris for two days?", run_config=OFFLINE)
    assert result.final_output == "sunny in value-1 for 2 days"
    rec = calls.only
    assert rec.output_tokens == _usage(result).output_tokens


async def test_structured_output_streamed(emu: Emulator, model: Any, recorder: lk.Recorder) -> None:
    """output_type=Weather through run_streamed: the object, one record."""
    agent = Agent(name="weather", model=model, output_type=Weather)
    with model_calls(emu, recorder) as calls:
        result = Runner.run_streamed(agent, "Weather in Paris for two days?", run_config=OFFLINE)
        async for _ in result.stream_events():
            pass
    assert result.final_output == Weather(city="value-1", days=2)
    assert calls.only.streamed is True


@pytest.fixture
def collect_leaked_transports() -> Iterator[None]:
    """Runner.run_sync drives an async client on the thread's default loop and leaves its pooled
    connection unclosed (a raw openai.AsyncOpenAI too); collect it here, after the test."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def test_run_sync(emu: Emulator, recorder: lk.Recorder, collect_leaked_transports: None) -> None:
    """Runner.run_sync over the chat-completions model: one record."""
    client = lk.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="sk-test", max_retries=0, recorder=recorder)
    agent = Agent(name="terse", model=MODELS["chat"](client))
    with model_calls(emu, recorder) as calls:
        result = Runner.run_sync(agent, "Name three colours.", run_config=OFFLINE)
    assert len(result.final_output.split()) == TEXT_TOKENS
    assert calls.only.output_tokens == TEXT_TOKENS
