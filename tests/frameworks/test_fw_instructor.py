"""instructor `from_openai` / `from_anthropic` holding latencykit clients: one record per model call."""

from __future__ import annotations

from typing import Any

import pydantic

import latencykit as lk
from latencykit.emulator import Emulator

from _tier import model_calls, need, streamed_request

instructor = need("instructor", "instructor")

MESSAGES = [{"role": "user", "content": "Weather in Paris for two days?"}]


class Weather(pydantic.BaseModel):
    """The structured answer the tests ask for."""

    city: str
    days: int


# The emulator fills a schema deterministically: strings "value-N", integers N (N = position).
EXPECTED = {"city": "value-1", "days": 2}

def test_openai_tools_mode_returns_model_and_one_record(emu: Emulator, oai: lk.OpenAI, recorder: lk.Recorder) -> None:
    """TOOLS mode (a forced function call) gives the pydantic object; usage matches the record."""
    client = instructor.from_openai(oai)
    with model_calls(emu, recorder) as calls:
        weather, completion = client.chat.completions.create_with_completion(
            model="gpt-4o-mini", response_model=Weather, messages=MESSAGES, max_retries=0
        )
    assert weather.model_dump() == EXPECTED
    rec = calls.only
    assert rec.provider == "openai" and rec.request_model == "gpt-4o-mini"
    assert rec.streamed is True and streamed_request(calls)
    assert rec.output_tokens == completion.usage.completion_tokens
    assert rec.input_tokens == completion.usage.prompt_tokens
    assert rec.finish_reasons == ("tool_calls",)


def test_openai_json_schema_mode(emu: Emulator, oai: lk.OpenAI, recorder: lk.Recorder) -> None:
    """JSON_SCHEMA mode (response_format) is recorded once, as a stream."""
    client = instructor.from_openai(oai, mode=instructor.Mode.JSON_SCHEMA)
    with model_calls(emu, recorder) as calls:
        weather = client.chat.completions.create(model="gpt-4o-mini", response_model=Weather, messages=MESSAGES, max_retries=0)
    assert weather.model_dump() == EXPECTED
    assert calls.only.streamed is True


def test_openai_create_partial_streams(emu: Emulator, oai: lk.OpenAI, recorder: lk.Recorder) -> None:
    """create_partial: partial objects arrive as the stream goes; one record with TTFT."""
    client = instructor.from_openai(oai)
    with model_calls(emu, recorder) as calls:
        partials = list(client.chat.completions.create_partial(model="gpt-4o-mini", response_model=Weather, messages=MESSAGES, max_retries=0))
    assert len(partials) > 1
    assert partials[-1].model_dump() == EXPECTED
    rec = calls.only
    assert rec.streamed is True and rec.ttft is not None and rec.ttft <= rec.e2e
    assert rec.chunks > 1


async def test_async_openai_create_and_partial(emu: Emulator, aoai: Any, recorder: lk.Recorder) -> None:
    """The async client: create and create_partial, one record each."""
    client = instructor.from_openai(aoai)
    with model_calls(emu, recorder) as calls:
        weather = await client.chat.completions.create(model="gpt-4o-mini", response_model=Weather, messages=MESSAGES, max_retries=0)
    assert weather.model_dump() == EXPECTED
    assert calls.only.streamed is True
    with model_calls(emu, recorder) as calls:
        partials = [p async for p in client.chat.completions.create_partial(model="gpt-4o-mini", response_model=Weather, messages=MESSAGES, max_retries=0)]
    assert partials[-1].model_dump() == EXPECTED
    assert calls.only.ttft is not None


def test_anthropic_tools_mode(emu: Emulator, ant: lk.Anthropic, recorder: lk.Recorder) -> None:
    """from_anthropic TOOLS mode: a forced tool_use block becomes the object; one streamed record."""
    client = instructor.from_anthropic(ant)
    with model_calls(emu, recorder) as calls:
        weather, message = client.messages.create_with_completion(
            model="claude-sonnet-5", max_tokens=256, response_model=Weather, messages=MESSAGES, max_retries=0
        )
    assert weather.model_dump() == EXPECTED
    rec = calls.only
    assert rec.provider == "anthropic" and rec.streamed is True
    assert rec.output_tokens == message.usage.output_tokens
    assert rec.finish_reasons == ("tool_use",)


def test_anthropic_create_partial_streams(emu: Emulator, ant: lk.Anthropic, recorder: lk.Recorder) -> None:
    """from_anthropic create_partial streams through latencykit: one record with TTFT."""
    client = instructor.from_anthropic(ant)
    with model_calls(emu, recorder) as calls:
        partials = list(client.messages.create_partial(model="claude-sonnet-5", max_tokens=256, response_model=Weather, messages=MESSAGES, max_retries=0))
    assert partials[-1].model_dump() == EXPECTED
    assert calls.only.ttft is not None


async def test_async_anthropic_create_and_partial(emu: Emulator, aant: Any, recorder: lk.Recorder) -> None:
    """from_anthropic on the async client: create and create_partial, one record each."""
    client = instructor.from_anthropic(aant)
    with model_calls(emu, recorder) as calls:
        weather = await client.messages.create(model="claude-sonnet-5", max_tokens=256, response_model=Weather, messages=MESSAGES, max_retries=0)
    assert weather.model_dump() == EXPECTED
    assert calls.only.streamed is True
    with model_calls(emu, recorder) as calls:
        partials = [p async for p in client.messages.create_partial(model="claude-sonnet-5", max_tokens=256, response_model=Weather, messages=MESSAGES, max_retries=0)]
    assert partials[-1].model_dump() == EXPECTED
    assert calls.only.ttft is not None


def test_anthropic_beta_messages(emu: Emulator, ant: lk.Anthropic, recorder: lk.Recorder) -> None:
    """from_anthropic(beta=True) calls client.beta.messages.create: still one streamed record."""
    client = instructor.from_anthropic(ant, beta=True)
    with model_calls(emu, recorder) as calls:
        weather = client.messages.create(model="claude-sonnet-5", max_tokens=256, response_model=Weather, messages=MESSAGES, max_retries=0)
    assert weather.model_dump() == EXPECTED
    assert calls.only.streamed is True
