"""A usage-only chunk the server sends unasked (#27 §2): the caller sees what the raw SDK gives (async).

The async mirror of ``test_usage_unasked_sync.py``: the same servers, the same checks.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator

import httpx2
import openai
import pytest

import latencykit as lk

from _invariant import wire_body
from _replay import Replay
from test_usage_unasked_sync import HF, HF_URL, REQ, SSE, _honouring, _honouring_spaced, _recording


class Server:
    """A mock transport answering every POST: the recording, or ``answer(request body)``."""

    def __init__(self, answer: Callable[[dict[str, Any]], str]) -> None:
        self.answer = answer
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content or b"{}")
        self.bodies.append(body)
        return httpx2.Response(200, headers={"content-type": SSE}, content=self.answer(body).encode())

    def client(self, base_url: str, cls: Any = openai.AsyncOpenAI, **kw: Any) -> Any:
        http = openai.DefaultAsyncHttpxClient(transport=httpx2.MockTransport(self))
        return cls(base_url=base_url, api_key="sk-test", max_retries=0, http_client=http, **kw)


async def _chunks(stream: Any) -> list[dict[str, Any]]:
    return [chunk.to_dict() async for chunk in stream]


async def _final(client: Any, **kw: Any) -> Any:
    async with client.chat.completions.stream(**REQ, **kw) as stream:
        return await stream.get_final_completion()


@pytest.fixture
def replay() -> Iterator[Replay]:
    """A local server answering every POST with a canned body."""
    with Replay() as server:
        yield server


@pytest.mark.parametrize("first", ["create(stream=True)", "stream()"])
async def test_remote_server_sending_usage_unasked_gives_the_raw_view(first: str) -> None:
    """The recording from the HF router's URL: whichever streamed call comes first learns that the
    server sends the usage chunk unasked, and every path gives what the raw SDK gives."""
    server = Server(_recording)
    raw, client = server.client(HF_URL), server.client(HF_URL, lk.AsyncOpenAI)
    raw_chunks = await _chunks(await raw.chat.completions.create(stream=True, **REQ))
    raw_final = await _final(raw)
    assert len(raw_chunks) == 4 and raw_final.usage is not None
    server.bodies.clear()

    if first == "stream()":
        assert (await _final(client)).to_dict() == raw_final.to_dict()
    assert await _chunks(await client.chat.completions.create(stream=True, **REQ)) == raw_chunks
    rec = client.latency.last
    assert rec.extra["usage_chunk"] == "unasked" and rec.output_tokens == 2 and rec.chunks == 1
    assert (await _final(client)).to_dict() == raw_final.to_dict()
    assert all("stream_options" not in body for body in server.bodies)

    done = await client.chat.completions.create(**REQ)
    assert (done.id, done.created, done.usage, done.model_extra) == (raw_final.id, raw_final.created, raw_final.usage, raw_final.model_extra)
    assert done.choices[0].message.content == raw_final.choices[0].message.content == "Paris"
    await client.close()
    await raw.close()


@pytest.mark.parametrize("answer", [_honouring, _honouring_spaced], ids=["compact", "spaced"])
async def test_hidden_usage_leaves_no_null_usage_on_the_chunks(answer: Callable[[dict[str, Any]], str]) -> None:
    """Async: the chunks are the raw SDK's for the request as written, no null usage on them."""
    server = Server(answer)
    raw = server.client("https://api.openai.com/v1")
    client = server.client("https://api.openai.com/v1", lk.AsyncOpenAI)
    raw_chunks = await _chunks(await raw.chat.completions.create(stream=True, **REQ))
    seen = await _chunks(await client.chat.completions.create(stream=True, **REQ))
    assert server.bodies[-1]["stream_options"] == {"include_usage": True}
    assert seen == raw_chunks and all("usage" not in c for c in seen)
    assert client.latency.last.extra["usage_chunk"] == "hidden" and client.latency.last.output_tokens == 2
    asked = await _chunks(await client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **REQ))
    assert all(c["usage"] is None for c in asked[:-1]) and asked[-1]["usage"]["completion_tokens"] == 2
    await client.close()
    await raw.close()


async def test_remote_server_that_honours_include_usage_is_probed_once() -> None:
    """A remote server that sends usage only when asked: one probe without usage, then asked and hidden."""
    server = Server(_honouring)
    raw, client = server.client("https://llm.example.com/v1"), server.client("https://llm.example.com/v1", lk.AsyncOpenAI)
    raw_chunks = await _chunks(await raw.chat.completions.create(stream=True, **REQ))
    assert await _chunks(await client.chat.completions.create(stream=True, **REQ)) == raw_chunks
    probe = client.latency.last
    assert probe.extra["usage_chunk"] == "not asked" and probe.output_tokens is None and probe.outcome == "completed"
    for _ in range(2):
        seen = await _chunks(await client.chat.completions.create(stream=True, **REQ))
        assert seen == raw_chunks and all("usage" not in c for c in seen)  # no "usage": null the caller did not ask for
        rec = client.latency.last
        assert rec.extra["usage_chunk"] == "hidden" and rec.output_tokens == 2
    assert (await _final(client)).usage is None and (await _final(raw)).usage is None
    asked = {"include_usage": True}
    assert [b.get("stream_options") for b in server.bodies] == [None, None, asked, asked, asked, None]
    await client.close()
    await raw.close()


async def test_openai_is_known_to_honour_include_usage() -> None:
    """api.openai.com sends the usage chunk only when asked (documented): no probe, the chunk is hidden."""
    server = Server(_honouring)
    client = server.client("https://api.openai.com/v1", lk.AsyncOpenAI)
    await _chunks(await client.chat.completions.create(stream=True, **REQ))
    assert client.latency.last.extra["usage_chunk"] == "hidden" and client.latency.last.output_tokens == 2
    assert server.bodies[0]["stream_options"] == {"include_usage": True}
    await client.close()


async def test_own_server_is_not_probed_unasked_but_the_record_says_so(replay: Replay) -> None:
    """On the caller's own machine the chunk is hidden and the record says the view may differ; one
    call with include_usage False teaches latencykit."""
    replay.serve(wire_body(HF))
    raw = openai.AsyncOpenAI(base_url=replay.base_url + "/v1", api_key="sk-test", max_retries=0)
    client = lk.AsyncOpenAI(base_url=replay.base_url + "/v1", api_key="sk-test", max_retries=0)
    raw_chunks = await _chunks(await raw.chat.completions.create(stream=True, **REQ))
    seen = await _chunks(await client.chat.completions.create(stream=True, **REQ))
    assert seen == raw_chunks[:-1] and client.latency.last.extra["usage_chunk"] == "hidden, unverified"
    await _chunks(await client.chat.completions.create(stream=True, stream_options={"include_usage": False}, **REQ))
    assert replay.requests[-1]["stream_options"] == {"include_usage": False}
    assert await _chunks(await client.chat.completions.create(stream=True, **REQ)) == raw_chunks
    assert client.latency.last.extra["usage_chunk"] == "unasked"
    assert (await _final(client)).to_dict() == (await _final(raw)).to_dict()
    await client.close()
    await raw.close()


async def test_abandoned_probe_teaches_nothing() -> None:
    """A probe the caller leaves before the end says nothing; until it expires the chunk is hidden, unverified."""
    server = Server(_recording)
    client = server.client(HF_URL, lk.AsyncOpenAI)
    stream = await client.chat.completions.create(stream=True, **REQ)
    await stream.__anext__()
    await stream.close()
    assert client.latency.last.extra["usage_chunk"] == "not asked"
    await _chunks(await client.chat.completions.create(stream=True, **REQ))
    assert client.latency.last.extra["usage_chunk"] == "hidden, unverified"
    await client.close()
