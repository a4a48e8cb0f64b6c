"""The record invariant on every real recorded stream, replayed over HTTP through the async clients.

The async mirror of ``test_record_invariant_sync.py`` (the property test on `ChatTap` is sans-I/O
and lives there only).
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Iterator

import pytest

import latencykit as lk

from _invariant import STREAMS, assert_invariant, payloads, token_events, wire_body
from _replay import Replay
from _wire_bodies import ANT_REQ_SMALL, CHAT_REQ_SMALL
from conftest import RESP_REQ
from test_record_invariant_sync import UNMERGEABLE


@pytest.fixture
def replay() -> Iterator[Replay]:
    """A local server answering every POST with a canned body."""
    with Replay() as server:
        yield server


async def _drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


def _calls(api: str, client: Any, name: str) -> list[Callable[[], Awaitable[Any]]]:
    if api == "chat":
        async def streamed() -> Any:
            return await _drain(await client.chat.completions.create(stream=True, **CHAT_REQ_SMALL))

        async def helper() -> Any:
            async with client.chat.completions.stream(**CHAT_REQ_SMALL) as stream:
                return await _drain(stream)

        if name in UNMERGEABLE:
            return [streamed]
        return [streamed, lambda: client.chat.completions.create(**CHAT_REQ_SMALL), helper]
    if api == "anthropic":
        async def messages() -> Any:
            return await _drain(await client.messages.create(stream=True, **ANT_REQ_SMALL))

        return [messages, lambda: client.messages.create(**ANT_REQ_SMALL)]

    async def responses() -> Any:
        return await _drain(await client.responses.create(stream=True, **RESP_REQ))

    return [responses, lambda: client.responses.create(**RESP_REQ)]


@pytest.mark.parametrize("name", sorted(STREAMS))
async def test_recorded_stream_keeps_the_invariant(replay: Replay, name: str) -> None:
    """Each real recorded stream, through async create(stream=True), create() (and Chat's .stream()):
    the record's times are ordered and its chunks are the token-bearing events."""
    api = STREAMS[name]
    replay.serve(wire_body(name))
    expected = token_events(api, payloads(name))
    client: Any
    if api == "anthropic":
        client = lk.AsyncAnthropic(base_url=replay.base_url, api_key="sk-ant-test", max_retries=0)
    else:
        client = lk.AsyncOpenAI(base_url=replay.base_url + "/v1", api_key="sk-test", max_retries=0)
    try:
        for call in _calls(api, client, name):
            await call()
            assert_invariant(client.latency.last, expected)
    finally:
        await client.close()
