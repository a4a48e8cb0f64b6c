"""Semantic cache end to end through the real sync SDKs and the emulator: exact types, scopes, safety.

The caches here use the defaults: the hashed embedder matching the folded text, so "what is
the return policy" (case and punctuation) matches "What is the return policy?" and "what's
the return policy" does not, and the number guard. One test uses the lexical mode
(``HashedEmbedder(exact=False)`` at 0.8, where "what's the return policy" is at cosine 0.86).
"""

from __future__ import annotations

import threading
import zlib
from pathlib import Path
from typing import Any, Iterator

import anthropic
import httpx2
import openai
import pytest
from anthropic.types import Message
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

import latencykit as lk
from latencykit.emulator import Emulator
from latencykit.semantic import HEADER, HashedEmbedder, SemanticCache, semantic_cacheable, semantic_skip

ASK = "What is the return policy?"
REWORDED = "what is the return policy"  # case and punctuation
LEXICAL = "what's the return policy"  # HashedEmbedder(exact=False) at 0.8: cosine 0.86
NEAR_MISS = "What is the refund policy for gift cards?"
SYSTEM = "You are a support agent for an online shop."


def ant_req(text: str = ASK, **extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-5", "max_tokens": 64, "system": SYSTEM, "messages": [{"role": "user", "content": text}], **extra}


def chat_req(text: str = ASK, **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "max_tokens": 64, "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}], **extra}


def resp_req(text: str = ASK, **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4.1-mini", "max_output_tokens": 64, "instructions": SYSTEM, "input": text, **extra}


@pytest.fixture
def sent() -> list[dict[str, str]]:
    """Headers of every request that really went out (an event hook on the caller's HTTP client)."""
    return []


@pytest.fixture
def cache() -> SemanticCache:
    return SemanticCache()


@pytest.fixture
def sant(emu: Emulator, cache: SemanticCache, sent: list[dict[str, str]]) -> Iterator[lk.Anthropic]:
    http = httpx2.Client(event_hooks={"request": [lambda r: sent.append(dict(r.headers))]})
    client = lk.Anthropic(base_url=emu.base_url, api_key="sk-ant-test", max_retries=0, http_client=http, semantic=cache)
    yield client
    client.close()


@pytest.fixture
def soai(emu: Emulator, cache: SemanticCache, sent: list[dict[str, str]]) -> Iterator[lk.OpenAI]:
    http = httpx2.Client(event_hooks={"request": [lambda r: sent.append(dict(r.headers))]})
    client = lk.OpenAI(base_url=emu.base_url + "/v1", api_key="sk-test", max_retries=0, http_client=http, semantic=cache)
    yield client
    client.close()


T1 = semantic_cacheable("tenant-1")
T2 = semantic_cacheable("tenant-2")


def test_anthropic_create_hit_is_a_message(sant: lk.Anthropic, sent: list[dict[str, str]]) -> None:
    """A repeat (case, punctuation) is answered from the cache with an equal anthropic Message, no request sent."""
    first = sant.messages.create(**ant_req(), extra_headers=T1)
    assert sant.latency.last is not None and sant.latency.last.semantic_hit is False
    again = sant.messages.create(**ant_req(REWORDED), extra_headers=T1)
    rec = sant.latency.last
    assert type(again) is Message and again == first
    assert rec is not None and rec.semantic_hit is True and rec.outcome == "completed"
    assert rec.ttft is not None and rec.ttft > 0 and rec.output_tokens == first.usage.output_tokens
    assert rec.extra["semantic_similarity"] == pytest.approx(1.0, abs=1e-4)  # the folded texts are equal
    assert len(sent) == 1 and all(HEADER not in h for h in sent)  # the mark never leaves the process


def test_anthropic_stream_hit_is_the_sdk_stream(sant: lk.Anthropic) -> None:
    """create(stream=True) on a hit returns anthropic.Stream of the SDK's own event types."""
    first = sant.messages.create(**ant_req(), extra_headers=T1)
    stream = sant.messages.create(**ant_req(REWORDED), stream=True, extra_headers=T1)
    assert isinstance(stream, anthropic.Stream)
    events = list(stream)
    assert [e.type for e in events][0] == "message_start" and events[-1].type == "message_stop"
    assert all(type(e).__module__.startswith("anthropic.types") for e in events)
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta" and e.delta.type == "text_delta")
    assert text == first.content[0].text
    assert sant.latency.last is not None and sant.latency.last.semantic_hit is True


def test_anthropic_stream_manager_hit(sant: lk.Anthropic) -> None:
    """messages.stream() on a hit is the SDK's MessageStream with the stored answer."""
    first = sant.messages.create(**ant_req(), extra_headers=T1)
    with sant.messages.stream(**ant_req(REWORDED), extra_headers=T1) as stream:
        assert isinstance(stream, anthropic.MessageStream)
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == first.content[0].text
    assert final.id == first.id
    rec = sant.latency.last
    assert rec is not None and rec.semantic_hit is True and rec.method == "stream"


def test_openai_chat_hit_types(soai: lk.OpenAI) -> None:
    """Chat Completions: a hit is an equal ChatCompletion; streamed, openai.Stream of ChatCompletionChunk."""
    first = soai.chat.completions.create(**chat_req(), extra_headers=T1)
    again = soai.chat.completions.create(**chat_req(REWORDED), extra_headers=T1)
    assert type(again) is ChatCompletion and again == first
    assert soai.latency.last is not None and soai.latency.last.semantic_hit is True
    stream = soai.chat.completions.create(**chat_req(REWORDED), stream=True, extra_headers=T1)
    assert isinstance(stream, openai.Stream)
    chunks = list(stream)
    assert all(type(c).__name__ == "ChatCompletionChunk" for c in chunks)
    assert all(c.usage is None for c in chunks)  # the caller did not ask for the usage chunk
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == first.choices[0].message.content
    with soai.chat.completions.stream(**chat_req(REWORDED), extra_headers=T1) as helper:
        final = helper.get_final_completion()
    assert final.choices[0].message.content == first.choices[0].message.content
    assert soai.latency.last is not None and soai.latency.last.semantic_hit is True


def test_openai_responses_hit_types(soai: lk.OpenAI) -> None:
    """Responses: a hit is an equal Response; streamed, the SDK's event types."""
    first = soai.responses.create(**resp_req(), extra_headers=T1)
    again = soai.responses.create(**resp_req(REWORDED), extra_headers=T1)
    assert type(again) is Response and again == first
    events = list(soai.responses.create(**resp_req(REWORDED), stream=True, extra_headers=T1))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert soai.latency.last is not None and soai.latency.last.semantic_hit is True


def test_scope_isolation(sant: lk.Anthropic, sent: list[dict[str, str]]) -> None:
    """An answer stored under one scope is never served under another, even for the same text."""
    sant.messages.create(**ant_req(), extra_headers=T1)
    sant.messages.create(**ant_req(), extra_headers=T2)
    assert sant.latency.last is not None and sant.latency.last.semantic_hit is False
    assert len(sent) == 2


def test_scope_isolation_under_concurrency(emu: Emulator) -> None:
    """Threads of eight tenants asking the same question each get only their own tenant's answer."""
    cache = SemanticCache()
    client = lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=cache)
    answers: dict[str, set[str]] = {}
    lock = threading.Lock()

    def tenant(t: int) -> None:
        mark = semantic_cacheable(f"tenant-{t}")
        for i in range(4):
            # a tenant-specific system prompt makes each tenant's real answer distinguishable
            msg = client.messages.create(**ant_req(REWORDED if i else ASK, system=f"{SYSTEM} Tenant {t}."), extra_headers=mark)
            with lock:
                answers.setdefault(f"tenant-{t}", set()).add(msg.id)

    threads = [threading.Thread(target=tenant, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    ids = [next(iter(v)) for v in answers.values()]
    assert all(len(v) == 1 for v in answers.values())  # every later call was that tenant's hit
    assert len(set(ids)) == 8  # and no two tenants share an answer
    stats = cache.stats()
    assert stats.hits == 24 and stats.misses == 8
    client.close()


def test_everything_but_the_last_message_must_match(sant: lk.Anthropic) -> None:
    """Another system prompt, sampling parameter, model, tools or earlier turn is a miss."""
    sant.messages.create(**ant_req(), extra_headers=T1)
    variants = [
        ant_req(system="You are a pirate."),
        ant_req(stop_sequences=["END"]),
        ant_req(max_tokens=65),
        ant_req(model="claude-haiku-5"),
        ant_req(tools=[{"name": "lookup", "description": "d", "input_schema": {"type": "object"}}]),
        {**ant_req(), "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": ASK}]},
    ]
    for req in variants:
        sant.messages.create(**req, extra_headers=T1)
        assert sant.latency.last is not None and sant.latency.last.semantic_hit is False, req


def test_near_miss_below_threshold(sant: lk.Anthropic, cache: SemanticCache) -> None:
    """A different question on the same topic is not answered from the cache."""
    sant.messages.create(**ant_req("cancel my order"), extra_headers=T1)
    sant.messages.create(**ant_req("cancel my subscription"), extra_headers=T1)
    assert sant.latency.last is not None and sant.latency.last.semantic_hit is False
    assert cache.stats().hits == 0


def test_off_by_default_and_unmarked(emu: Emulator, sant: lk.Anthropic, cache: SemanticCache) -> None:
    """Unmarked calls are never looked up; a client without semantic= has no cache at all."""
    sant.messages.create(**ant_req())
    sant.messages.create(**ant_req())
    assert sant.latency.last is not None and sant.latency.last.semantic_hit is None
    assert cache.stats().lookups == 0 and cache.stats().skipped == {"not_marked": 2}
    plain = lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0)
    plain.messages.create(**ant_req())
    assert plain.latency.last is not None and plain.latency.last.semantic_hit is None
    plain.close()


def test_tool_results_and_images_are_not_cached(sant: lk.Anthropic, cache: SemanticCache) -> None:
    """Requests carrying tool results or images stay out unless the cache allows them."""
    tool_turns = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "w", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}, {"type": "text", "text": "and tomorrow?"}]},
    ]
    image = [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}, {"type": "text", "text": "What is this?"}]}]
    for messages in (tool_turns, image):
        sant.messages.create(**{**ant_req(), "messages": messages}, extra_headers=T1)
        assert sant.latency.last is not None and sant.latency.last.semantic_hit is None
    assert cache.stats().skipped == {"tool_results": 1, "images": 1}


def test_temperature_zero_opt_in(emu: Emulator) -> None:
    """With temperature_zero=True, temperature-0 calls are cached under default_scope; others are not."""
    cache = SemanticCache(temperature_zero=True, default_scope="app")
    client = lk.OpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, semantic=cache)
    client.chat.completions.create(**chat_req(temperature=0))
    client.chat.completions.create(**chat_req(REWORDED, temperature=0))
    assert client.latency.last is not None and client.latency.last.semantic_hit is True
    client.chat.completions.create(**chat_req(REWORDED, temperature=0), extra_headers=semantic_skip())
    assert client.latency.last is not None and client.latency.last.semantic_hit is None
    client.chat.completions.create(**chat_req(REWORDED, temperature=0.7))
    assert client.latency.last is not None and client.latency.last.semantic_hit is None
    client.close()


def test_abandoned_stream_is_not_stored(sant: lk.Anthropic, cache: SemanticCache) -> None:
    """A stream the caller left before its end is not kept as an answer."""
    stream = sant.messages.create(**ant_req(), stream=True, extra_headers=T1)
    next(iter(stream))
    stream.close()
    assert cache.stats().stored == 0
    sant.messages.create(**ant_req(), extra_headers=T1)
    assert sant.latency.last is not None and sant.latency.last.semantic_hit is False


def test_wrap_and_reports(emu: Emulator) -> None:
    """lk.wrap(client, semantic=...) works; hits are counted in cache_report() and their own summary group."""
    raw = openai.OpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0)
    client = lk.wrap(raw, semantic=SemanticCache())
    client.chat.completions.create(**chat_req(), extra_headers=T1)
    client.chat.completions.create(**chat_req(REWORDED), extra_headers=T1)
    report = client.latency.cache_report()
    assert report.semantic_lookups == 2 and report.semantic_hits == 1
    assert report.semantic_hit_rate == 0.5
    groups = {g.cache for g in client.latency.summary().groups}
    assert "semantic_hit" in groups
    assert raw.chat.completions.create(**chat_req(REWORDED)).choices  # the original is untouched
    raw.close()


def test_otel_metric_and_span_attribute(emu: Emulator) -> None:
    """Semantic lookups are counted by hit in the OTel metrics, and the span says whether it hit."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    meter_provider = MeterProvider(metric_readers=[reader])
    telemetry = lk.Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
    client = lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0, telemetry=telemetry, semantic=SemanticCache())
    for text in (ASK, REWORDED, REWORDED):
        client.messages.create(**ant_req(text), extra_headers=T1)
    data = reader.get_metrics_data()
    points: list[Any] = [
        p
        for rm in (data.resource_metrics if data else [])
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "latencykit.client.semantic_cache.lookups"
        for p in m.data.data_points
    ]
    by_hit = {p.attributes["latencykit.semantic_cache.hit"]: p.value for p in points}
    assert by_hit == {False: 1, True: 2}
    hits = [s.attributes.get("latencykit.semantic_cache.hit") for s in spans.get_finished_spans() if s.attributes and "latencykit.outcome" in s.attributes]
    assert hits == [False, True, True]
    client.close()
    tracer_provider.shutdown()
    meter_provider.shutdown()


def test_scope_alone_separates_identical_requests(emu: Emulator) -> None:
    """The same request under eight scopes, in threads: only the scope that stored it hits."""
    cache = SemanticCache()
    client = lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=cache)
    client.messages.create(**ant_req(), extra_headers=semantic_cacheable("tenant-0"))
    def ask(t: int) -> None:
        client.messages.create(**ant_req(REWORDED), extra_headers=semantic_cacheable(f"tenant-{t}"))

    recorder = client.latency
    threads = [threading.Thread(target=ask, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    hits = [r.semantic_hit for r in recorder.calls[1:]]
    assert len(hits) == 8 and hits.count(True) == 1 and hits.count(False) == 7  # tenant-0 hit; tenants 1-7 missed the same question
    assert cache.stats().hits == 1 and cache.stats().misses == 8
    client.close()


def test_lexical_mode_answers_rewordings(emu: Emulator) -> None:
    """The default matches the folded text only; HashedEmbedder(exact=False) at 0.8 answers a rewording sharing most words."""
    strict = lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=SemanticCache())
    loose = lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=SemanticCache(HashedEmbedder(exact=False), threshold=0.8))
    for client, expected in ((strict, False), (loose, True)):
        client.messages.create(**ant_req(), extra_headers=T1)
        client.messages.create(**ant_req(LEXICAL), extra_headers=T1)
        assert client.latency.last is not None and client.latency.last.semantic_hit is expected
        client.close()


LONG = (
    "I bought the trail running shoes from your winter collection last month and they fit well, but my brother would "
    "like the same model, so do you still have them in size {} in the blue colour?"
)  # 37 words: the lexical hashed embedder puts "size 43" / "size 44" at cosine 0.981


@pytest.mark.parametrize("embedder", [None, "lexical"])
def test_number_near_miss_is_never_answered(emu: Emulator, embedder: Any) -> None:
    """A long question differing only in a number is a miss, however similar (default, and the lexical embedder at 0.8)."""
    cache = SemanticCache() if embedder is None else SemanticCache(HashedEmbedder(exact=False), threshold=0.8)
    ant = lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=cache)
    oai = lk.OpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, semantic=cache)
    ant.messages.create(**ant_req(LONG.format(43)), extra_headers=T1)
    ant.messages.create(**ant_req(LONG.format(44)), extra_headers=T1)
    oai.chat.completions.create(**chat_req(LONG.format(43)), extra_headers=T1)
    oai.chat.completions.create(**chat_req(LONG.format(44)), extra_headers=T1)
    ant.messages.create(**ant_req(LONG.format(44).upper()), extra_headers=T1)  # a repeat of the second: a hit
    assert [r.semantic_hit for r in ant.latency.calls] == [False, False, True]
    assert [r.semantic_hit for r in oai.latency.calls] == [False, False]
    ant.close()
    oai.close()


CANARIES = {
    "instructions": "zq7-instructions-canary",
    "system": "zq7-system-canary",
    "question": "zq7-question-canary",
    "scope": "zq7-scope-canary",
}


def holds(blob: bytes, needle: str) -> bool:
    """Whether ``needle`` is in ``blob``: as UTF-8 or hex, or inside a zlib or raw-deflate stream starting at any offset."""
    raw = needle.encode()
    if raw in blob or raw.hex().encode() in blob:
        return True
    for i in range(len(blob)):
        for wbits in (15, -15):
            try:
                if raw in zlib.decompressobj(wbits).decompress(blob[i:], 1 << 20):
                    return True
            except zlib.error:
                pass
    return False


def canary_calls(oai: Any, ant: Any, question: str) -> None:
    """A Responses, a Chat Completions and a Messages call carrying the canaries in instructions, system prompt, question, scope."""
    mark = semantic_cacheable(CANARIES["scope"])
    sys_prompt = f"{SYSTEM} Internal note {CANARIES['system']}."
    oai.responses.create(**resp_req(question, instructions=f"{SYSTEM} Internal note {CANARIES['instructions']}."), extra_headers=mark)
    oai.chat.completions.create(model="gpt-4o-mini", max_tokens=64, messages=[{"role": "system", "content": sys_prompt}, {"role": "user", "content": question}], extra_headers=mark)
    ant.messages.create(**ant_req(question, system=sys_prompt), extra_headers=mark)


@pytest.mark.parametrize("encrypt", [True, False])
def test_saved_cache_holds_no_canary_when_encrypted(emu: Emulator, tmp_path: Path, encrypt: bool) -> None:
    """Encrypted, a saved cache holds none of the canaries put in instructions, system prompt, question and scope,
    in any form (raw, hex, compressed); it loads and answers again. Unencrypted (the control) the echoed instructions are there."""
    question = f"What does {CANARIES['question']} mean for my order?"
    cache = SemanticCache(secret=b"canary-secret-0123456789abcdef", encrypt=encrypt)
    oai = lk.OpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, semantic=cache)
    ant = lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=cache)
    canary_calls(oai, ant, question)
    canary_calls(oai, ant, question.lower())
    assert [r.semantic_hit for r in oai.latency.calls] == [False, False, True, True]
    assert [r.semantic_hit for r in ant.latency.calls] == [False, True]
    cache.save(tmp_path / "cache.npz")
    blob = (tmp_path / "cache.npz").read_bytes()
    found = {name for name, canary in CANARIES.items() if holds(blob, canary)}
    if encrypt:
        assert found == set()
    else:
        assert {"instructions", "scope"} <= found  # the Responses answer echoes instructions; the scope is kept as given
    fresh = SemanticCache(secret=b"canary-secret-0123456789abcdef", encrypt=encrypt)
    assert fresh.load(tmp_path / "cache.npz") == 3
    again = lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=fresh)
    sys_prompt = f"{SYSTEM} Internal note {CANARIES['system']}."
    again.messages.create(**ant_req(question, system=sys_prompt), extra_headers=semantic_cacheable(CANARIES["scope"]))
    assert again.latency.last is not None and again.latency.last.semantic_hit is True
    for client in (oai, ant, again):
        client.close()
