"""LiteLLM `completion` / `acompletion(model="openai/...", client=<latencykit client>)`."""

from __future__ import annotations

import gc
import json
import os
import warnings
from collections.abc import Iterator
from typing import Any

import pydantic
import pytest

import latencykit as lk
from latencykit.emulator import Emulator

from _tier import TEXT_TOKENS, check_streamed, model_calls, need, streamed_request

# LiteLLM fetches its model price list from the network at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
litellm = need("litellm", "litellm")

# Warnings LiteLLM's own code raises with this pydantic (its typed dicts, its stream handler's
# attribute scan of its Delta objects); nothing of latencykit's.
pytestmark = [
    pytest.mark.filterwarnings("ignore:Items? .* on TypedDict class .* `ReadOnly` qualifier:UserWarning"),
    pytest.mark.filterwarnings("ignore:Accessing the 'model_(computed_)?fields' attribute on the instance is deprecated"),
]



@pytest.fixture(autouse=True)
def _collect_litellm_event_loops() -> Iterator[None]:
    """LiteLLM's sync streaming leaves an event loop of its own unclosed (with the raw SDK client
    too); collect it here, where its ResourceWarning is LiteLLM's, not at the end of the session."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name three colours."}]
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}},
    },
}
ARGS = {"city": "value-1", "days": 2}


class Weather(pydantic.BaseModel):
    """The structured answer the tests ask for."""

    city: str
    days: int


def _call(**kw: Any) -> dict[str, Any]:
    return {"model": "openai/gpt-4o-mini", "messages": MESSAGES, "api_key": "sk-test", **kw}


def test_completion(emu: Emulator, oai: lk.OpenAI, recorder: lk.Recorder) -> None:
    """completion(client=...): LiteLLM posts to /chat/completions itself; still one record, usage equal."""
    with model_calls(emu, recorder) as calls:
        response = litellm.completion(**_call(client=oai))
    assert len(response.choices[0].message.content.split()) == TEXT_TOKENS
    rec = calls.only
    assert (rec.input_tokens, rec.output_tokens) == (response.usage.prompt_tokens, response.usage.completion_tokens)
    assert rec.request_model == "gpt-4o-mini"
    check_streamed(rec, streamed_request(calls))


def test_completion_stream(emu: Emulator, oai: lk.OpenAI, recorder: lk.Recorder) -> None:
    """completion(stream=True): the chunks reach the caller; one streamed record with TTFT."""
    with model_calls(emu, recorder) as calls:
        chunks = list(litellm.completion(**_call(client=oai, stream=True, stream_options={"include_usage": True})))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(text.split()) == TEXT_TOKENS
    rec = calls.only
    check_streamed(rec, True)
    assert rec.output_tokens == TEXT_TOKENS


def test_completion_tool_call(emu: Emulator, oai: lk.OpenAI, recorder: lk.Recorder) -> None:
    """A forced tool call: the arguments LiteLLM returns, one record."""
    with model_calls(emu, recorder) as calls:
        response = litellm.completion(**_call(client=oai, tools=[TOOL], tool_choice="required"))
    call = response.choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", ARGS)
    assert calls.only.finish_reasons == ("tool_calls",)


async def test_acompletion(emu: Emulator, aoai: Any, recorder: lk.Recorder) -> None:
    """acompletion(client=<AsyncOpenAI>): one record, usage equal."""
    with model_calls(emu, recorder) as calls:
        response = await litellm.acompletion(**_call(client=aoai))
    assert len(response.choices[0].message.content.split()) == TEXT_TOKENS
    assert calls.only.output_tokens == response.usage.completion_tokens


async def test_acompletion_stream(emu: Emulator, aoai: Any, recorder: lk.Recorder) -> None:
    """acompletion(stream=True): one streamed record."""
    with model_calls(emu, recorder) as calls:
        stream = await litellm.acompletion(**_call(client=aoai, stream=True))
        chunks = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(text.split()) == TEXT_TOKENS
    check_streamed(calls.only, True)


async def test_acompletion_structured_output(emu: Emulator, aoai: Any, recorder: lk.Recorder) -> None:
    """response_format=Weather: the JSON document parses as the model; one record."""
    with model_calls(emu, recorder) as calls:
        response = await litellm.acompletion(**_call(client=aoai, response_format=Weather))
    assert Weather.model_validate_json(response.choices[0].message.content) == Weather(**ARGS)
    assert calls.only.output_tokens == response.usage.completion_tokens
