"""Semantic cache end to end through the real async SDKs (mirror of test_semantic_sync.py)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any, AsyncIterator

import anthropic
import httpx2
import openai
import pytest
from anthropic.types import Message
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

import latencykit as lk
from latencykit.emulator import Emulator
from latencykit.semantic import HEADER, HashedEmbedder, MemoryStore, SemanticCache, semantic_cacheable

from test_semantic_sync import ASK, CANARIES, LEXICAL, LONG, REWORDED, SYSTEM, T1, T2, ant_req, chat_req, holds, resp_req


@pytest.fixture
def sent() -> list[dict[str, str]]:
    """Headers of every request that really went out."""
    return []


@pytest.fixture
def cache() -> SemanticCache:
    return SemanticCache()


@pytest.fixture
async def sant(emu: Emulator, cache: SemanticCache, sent: list[dict[str, str]]) -> AsyncIterator[lk.AsyncAnthropic]:
    async def hook(r: httpx2.Request) -> None:
        sent.append(dict(r.headers))

    client = lk.AsyncAnthropic(
        base_url=emu.base_url, api_key="k", max_retries=0, http_client=httpx2.AsyncClient(event_hooks={"request": [hook]}), semantic=cache
    )
    yield client
    await client.close()


@pytest.fixture
async def soai(emu: Emulator, cache: SemanticCache) -> AsyncIterator[lk.AsyncOpenAI]:
    client = lk.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, semantic=cache)
    yield client
    await client.close()


async def test_anthropic_create_hit_is_a_message(sant: lk.AsyncAnthropic, sent: list[dict[str, str]]) -> None:
    """A repeat (case, punctuation) is answered from the cache with an equal Message, no request sent."""
    first = await sant.messages.create(**ant_req(), extra_headers=T1)
    again = await sant.messages.create(**ant_req(REWORDED), extra_headers=T1)
    rec = sant.latency.last
    assert type(again) is Message and again == first
    assert rec is not None and rec.semantic_hit is True and rec.ttft is not None
    assert len(sent) == 1 and all(HEADER not in h for h in sent)


async def test_anthropic_stream_hit_is_the_sdk_stream(sant: lk.AsyncAnthropic) -> None:
    """create(stream=True) on a hit returns anthropic.AsyncStream of the SDK's event types."""
    first = await sant.messages.create(**ant_req(), extra_headers=T1)
    stream = await sant.messages.create(**ant_req(REWORDED), stream=True, extra_headers=T1)
    assert isinstance(stream, anthropic.AsyncStream)
    events = [e async for e in stream]
    assert events[0].type == "message_start" and events[-1].type == "message_stop"
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta" and e.delta.type == "text_delta")
    assert text == first.content[0].text
    assert sant.latency.last is not None and sant.latency.last.semantic_hit is True


async def test_anthropic_stream_manager_hit(sant: lk.AsyncAnthropic) -> None:
    """messages.stream() on a hit is the SDK's AsyncMessageStream with the stored answer."""
    first = await sant.messages.create(**ant_req(), extra_headers=T1)
    async with sant.messages.stream(**ant_req(REWORDED), extra_headers=T1) as stream:
        assert isinstance(stream, anthropic.AsyncMessageStream)
        final = await stream.get_final_message()
    assert final.id == first.id
    assert sant.latency.last is not None and sant.latency.last.semantic_hit is True


async def test_openai_chat_hit_types(soai: lk.AsyncOpenAI) -> None:
    """Chat Completions: an equal ChatCompletion; streamed, openai.AsyncStream of chunks."""
    first = await soai.chat.completions.create(**chat_req(), extra_headers=T1)
    again = await soai.chat.completions.create(**chat_req(REWORDED), extra_headers=T1)
    assert type(again) is ChatCompletion and again == first
    stream = await soai.chat.completions.create(**chat_req(REWORDED), stream=True, extra_headers=T1)
    assert isinstance(stream, openai.AsyncStream)
    chunks = [c async for c in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == first.choices[0].message.content
    assert soai.latency.last is not None and soai.latency.last.semantic_hit is True


async def test_openai_responses_hit_types(soai: lk.AsyncOpenAI) -> None:
    """Responses: an equal Response; streamed, the SDK's event types."""
    first = await soai.responses.create(**resp_req(), extra_headers=T1)
    again = await soai.responses.create(**resp_req(REWORDED), extra_headers=T1)
    assert type(again) is Response and again == first
    events = [e async for e in await soai.responses.create(**resp_req(REWORDED), stream=True, extra_headers=T1)]
    assert events[-1].type == "response.completed"
    assert soai.latency.last is not None and soai.latency.last.semantic_hit is True


async def test_scope_isolation(sant: lk.AsyncAnthropic) -> None:
    """The same question under another scope is a miss."""
    await sant.messages.create(**ant_req(), extra_headers=T1)
    await sant.messages.create(**ant_req(), extra_headers=T2)
    assert sant.latency.last is not None and sant.latency.last.semantic_hit is False


async def test_scope_isolation_under_concurrency(emu: Emulator) -> None:
    """Concurrent tasks of eight tenants each get only their own tenant's answer."""
    cache = SemanticCache()
    client = lk.AsyncAnthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=cache)

    async def tenant(t: int) -> set[str]:
        mark = semantic_cacheable(f"tenant-{t}")
        first = await client.messages.create(**ant_req(ASK, system=f"{SYSTEM} Tenant {t}."), extra_headers=mark)
        later = await asyncio.gather(
            *(client.messages.create(**ant_req(REWORDED, system=f"{SYSTEM} Tenant {t}."), extra_headers=mark) for _ in range(3))
        )
        return {first.id, *(m.id for m in later)}

    results = await asyncio.gather(*(tenant(t) for t in range(8)))
    assert all(len(ids) == 1 for ids in results)
    assert len({next(iter(ids)) for ids in results}) == 8
    assert cache.stats().hits == 24
    await client.close()


async def test_wrap_async(emu: Emulator) -> None:
    """lk.wrap(async client, semantic=...) answers from the cache too."""
    raw = openai.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0)
    client = lk.wrap(raw, semantic=SemanticCache())
    await client.chat.completions.create(**chat_req(), extra_headers=T1)
    await client.chat.completions.create(**chat_req(REWORDED), extra_headers=T1)
    assert client.latency.cache_report().semantic_hits == 1
    await raw.close()


async def test_scope_alone_separates_identical_requests(emu: Emulator) -> None:
    """The same request under eight scopes, concurrently: only the scope that stored it hits."""
    cache = SemanticCache()
    client = lk.AsyncAnthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=cache)
    await client.messages.create(**ant_req(), extra_headers=semantic_cacheable("tenant-0"))
    await asyncio.gather(*(client.messages.create(**ant_req(REWORDED), extra_headers=semantic_cacheable(f"tenant-{t}")) for t in range(8)))
    hits = [r.semantic_hit for r in client.latency.calls[1:]]
    assert len(hits) == 8 and hits.count(True) == 1 and hits.count(False) == 7
    await client.close()


async def test_lexical_mode_answers_rewordings(emu: Emulator) -> None:
    """The default matches the folded text only; HashedEmbedder(exact=False) at 0.8 answers a rewording sharing most words."""
    strict = lk.AsyncAnthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=SemanticCache())
    loose = lk.AsyncAnthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=SemanticCache(HashedEmbedder(exact=False), threshold=0.8))
    for client, expected in ((strict, False), (loose, True)):
        await client.messages.create(**ant_req(), extra_headers=T1)
        await client.messages.create(**ant_req(LEXICAL), extra_headers=T1)
        assert client.latency.last is not None and client.latency.last.semantic_hit is expected
        await client.close()


@pytest.mark.parametrize("embedder", [None, "lexical"])
async def test_number_near_miss_is_never_answered(emu: Emulator, embedder: Any) -> None:
    """A long question differing only in a number is a miss, however similar; a repeat of it is a hit."""
    cache = SemanticCache() if embedder is None else SemanticCache(HashedEmbedder(exact=False), threshold=0.8)
    ant = lk.AsyncAnthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=cache)
    oai = lk.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, semantic=cache)
    await ant.messages.create(**ant_req(LONG.format(43)), extra_headers=T1)
    await ant.messages.create(**ant_req(LONG.format(44)), extra_headers=T1)
    await oai.responses.create(**resp_req(LONG.format(43)), extra_headers=T1)
    await oai.responses.create(**resp_req(LONG.format(44)), extra_headers=T1)
    await ant.messages.create(**ant_req(LONG.format(44).upper()), extra_headers=T1)
    assert [r.semantic_hit for r in ant.latency.calls] == [False, False, True]
    assert [r.semantic_hit for r in oai.latency.calls] == [False, False]
    await ant.close()
    await oai.close()


async def test_saved_cache_holds_no_canary_when_encrypted(emu: Emulator, tmp_path: Path) -> None:
    """Async clients, encryption on (a secret is configured): the saved file holds none of the canaries; it loads and answers."""
    secret = b"canary-secret-0123456789abcdef"
    cache = SemanticCache(secret=secret)
    assert cache.encrypt
    oai = lk.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, semantic=cache)
    ant = lk.AsyncAnthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=cache)
    mark = semantic_cacheable(CANARIES["scope"])
    question = f"What does {CANARIES['question']} mean for my order?"
    sys_prompt = f"{SYSTEM} Internal note {CANARIES['system']}."
    for text in (question, question.upper()):
        await oai.responses.create(**resp_req(text, instructions=f"{SYSTEM} Internal note {CANARIES['instructions']}."), extra_headers=mark)
        await oai.chat.completions.create(**chat_req(text, messages=[{"role": "system", "content": sys_prompt}, {"role": "user", "content": text}]), extra_headers=mark)
        await ant.messages.create(**ant_req(text, system=sys_prompt), extra_headers=mark)
    assert [r.semantic_hit for r in oai.latency.calls] == [False, False, True, True]
    assert [r.semantic_hit for r in ant.latency.calls] == [False, True]
    cache.save(tmp_path / "cache.npz")
    blob = (tmp_path / "cache.npz").read_bytes()
    assert [name for name, canary in CANARIES.items() if holds(blob, canary)] == []
    fresh = SemanticCache(secret=secret)
    assert fresh.load(tmp_path / "cache.npz") == 3
    again = lk.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, semantic=fresh)
    await again.responses.create(**resp_req(question, instructions=f"{SYSTEM} Internal note {CANARIES['instructions']}."), extra_headers=mark)
    assert again.latency.last is not None and again.latency.last.semantic_hit is True
    for client in (oai, ant, again):
        await client.close()


class GatedStore(MemoryStore):
    """A `MemoryStore` whose ``search`` / ``add`` wait (as on a slow Redis or PostgreSQL) until
    ``release`` is set — by the event loop, once another call has got through — or 5 s pass."""

    def __init__(self, dim: int, gate: str) -> None:
        super().__init__(dim)
        self.gate = gate
        self.entered = threading.Event()
        self.release = threading.Event()
        self.waited_out = False

    def _wait(self, op: str) -> None:
        if op == self.gate:
            self.entered.set()
            self.waited_out = not self.release.wait(5.0)

    def search(self, *args: Any, **kwargs: Any) -> Any:
        self._wait("search")
        return super().search(*args, **kwargs)

    def add(self, *args: Any, **kwargs: Any) -> None:
        self._wait("add")
        super().add(*args, **kwargs)


async def _until(event: threading.Event) -> None:
    for _ in range(500):
        if event.is_set():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the store was never called")


@pytest.mark.parametrize("gate", ["search", "add"])
async def test_a_slow_store_does_not_hold_the_event_loop(emu: Emulator, gate: str) -> None:
    """While the store is busy with one marked call's lookup (or with storing its answer), the
    other calls on the loop go on: the store runs in a worker thread. Before, the store call ran
    on the loop, so nothing else could run until it returned (here: until it gave up, 5 s)."""
    store = GatedStore(HashedEmbedder().dim, gate)
    client = lk.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, semantic=SemanticCache(store=store))
    try:
        async def marked() -> str:
            stream = await client.chat.completions.create(**chat_req(), stream=True, extra_headers=T1)
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

        task = asyncio.ensure_future(marked())
        await _until(store.entered)
        other = await client.chat.completions.create(**chat_req("Something else entirely?"))  # not marked: no store
        assert other.choices[0].message.content
        assert not task.done()  # it was still waiting on the store
        store.release.set()
        assert await task
        assert not store.waited_out
        assert [r.semantic_hit for r in client.latency.calls] == [None, False]  # the other call, then the marked miss
        assert len(store) == 1  # and its answer was stored
    finally:
        store.release.set()
        await client.close()
