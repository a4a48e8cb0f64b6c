"""Shared fixtures: one emulator per session, fresh latencykit and raw SDK clients per test."""

from __future__ import annotations

import gc
import os
import time
from typing import Any, Callable, Iterator

import anthropic
import openai
import pytest

import latencykit as lk
from latencykit.emulator import Emulator, TimingModel

# The CLI's reports print at the terminal's width, on a pipe at full width unless COLUMNS says otherwise:
# the suite reads them as a pipe, whatever terminal (or pytest-xdist worker, which gets COLUMNS=80) runs it.
for _var in ("COLUMNS", "LINES"):
    os.environ.pop(_var, None)

# Fast but not instantaneous: a few ms per call, so event ordering and timing are real.
TIMING = TimingModel(time_scale=0.02, output_tokens=24)
CREATED = 1_760_000_000  # fixed OpenAI `created`, so two identical calls compare equal


@pytest.fixture(scope="session")
def emu() -> Iterator[Emulator]:
    """The emulator shared by the session."""
    with Emulator(timing=TIMING, seed=7, created=CREATED) as emulator:
        yield emulator


@pytest.fixture
def recorder() -> lk.Recorder:
    """A fresh Recorder for one test."""
    return lk.Recorder()


@pytest.fixture
def ant(emu: Emulator, recorder: lk.Recorder) -> Iterator[lk.Anthropic]:
    """latencykit Anthropic client pointed at the emulator."""
    client = lk.Anthropic(base_url=emu.base_url, api_key="sk-ant-test", max_retries=0, recorder=recorder)
    yield client
    client.close()


@pytest.fixture
def raw_ant(emu: Emulator) -> Iterator[anthropic.Anthropic]:
    """Plain SDK Anthropic client pointed at the emulator."""
    client = anthropic.Anthropic(base_url=emu.base_url, api_key="sk-ant-test", max_retries=0)
    yield client
    client.close()


@pytest.fixture
def oai(emu: Emulator, recorder: lk.Recorder) -> Iterator[lk.OpenAI]:
    """latencykit OpenAI client pointed at the emulator."""
    client = lk.OpenAI(base_url=emu.base_url + "/v1", api_key="sk-test", max_retries=0, recorder=recorder)
    yield client
    client.close()


@pytest.fixture
def raw_oai(emu: Emulator) -> Iterator[openai.OpenAI]:
    """Plain SDK OpenAI client pointed at the emulator."""
    client = openai.OpenAI(base_url=emu.base_url + "/v1", api_key="sk-test", max_retries=0)
    yield client
    client.close()


@pytest.fixture
async def aant(emu: Emulator, recorder: lk.Recorder) -> Any:
    """latencykit AsyncAnthropic client pointed at the emulator."""
    client = lk.AsyncAnthropic(base_url=emu.base_url, api_key="sk-ant-test", max_retries=0, recorder=recorder)
    yield client
    await client.close()


@pytest.fixture
async def raw_aant(emu: Emulator) -> Any:
    """Plain SDK AsyncAnthropic client pointed at the emulator."""
    client = anthropic.AsyncAnthropic(base_url=emu.base_url, api_key="sk-ant-test", max_retries=0)
    yield client
    await client.close()


@pytest.fixture
async def aoai(emu: Emulator, recorder: lk.Recorder) -> Any:
    """latencykit AsyncOpenAI client pointed at the emulator."""
    client = lk.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="sk-test", max_retries=0, recorder=recorder)
    yield client
    await client.close()


@pytest.fixture
async def raw_aoai(emu: Emulator) -> Any:
    """Plain SDK AsyncOpenAI client pointed at the emulator."""
    client = openai.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="sk-test", max_retries=0)
    yield client
    await client.close()


ANT_REQ: dict[str, Any] = {
    "model": "claude-sonnet-5",
    "max_tokens": 64,
    "system": "You are terse.",
    "messages": [{"role": "user", "content": "Name three colours."}],
}
CHAT_REQ: dict[str, Any] = {
    "model": "gpt-4o-mini",
    "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name three colours."}],
    "max_tokens": 64,
}
RESP_REQ: dict[str, Any] = {"model": "gpt-4.1-mini", "input": "Name three colours.", "max_output_tokens": 64}
WEATHER_TOOL_ANT = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}},
}
WEATHER_TOOL_OAI = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}},
    },
}
WEATHER_TOOL_RESP = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}},
    "strict": False,
}


def headers(**kw: Any) -> dict[str, str]:
    """``x-emulator-*`` request headers from keyword arguments (``ttft_ms=300`` → ``x-emulator-ttft-ms``)."""
    return {"x-emulator-" + k.replace("_", "-"): str(v) for k, v in kw.items()}


def wait_for(predicate: Callable[[], bool], timeout: float = 3.0) -> bool:
    """Poll ``predicate`` (collecting garbage in between) until true or timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        gc.collect()
        time.sleep(0.01)
    return predicate()
