"""Wire shapes from real OpenAI-compatible servers and newer APIs, through the real SDKs over HTTP (async).

The async mirror of ``test_wire_shapes_sync.py``: the same shapes, the same checks.
"""

from __future__ import annotations

from typing import Any, Iterator

import anthropic
import openai
import pytest

import latencykit as lk
from latencykit.emulator import Emulator

from _replay import Replay, recorded_body
from _wire_bodies import (
    ANT_REQ_SMALL, CHAT_REQ_SMALL, USAGE, WORDS, anthropic_named, chat_no_finish, chat_reasoning_details, chat_with_usage,
    llama_tiny_read, truncated_chat, usage_chunks_parsed, vllm_created_cache,
)  # fmt: skip
from conftest import ANT_REQ, CHAT_REQ, headers

FAST_RETRY = lk.RetryPolicy(max_attempts=3, initial_backoff=0.0, max_backoff=0.0)


@pytest.fixture
def replay() -> Iterator[Replay]:
    """A local server answering every POST with a canned body."""
    with Replay() as server:
        yield server


def _oai(base: str, **kw: Any) -> lk.AsyncOpenAI:
    return lk.AsyncOpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0, **kw)


def _raw_oai(base: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0)


async def _dicts(stream: Any) -> list[dict[str, Any]]:
    # Whole chunks: the "usage": null that the include_usage latencykit adds puts on every chunk is taken off again.
    return [chunk.to_dict() async for chunk in stream]


async def _drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


async def test_azure_filter_object_is_passed_on_but_not_read(aoai: Any, raw_aoai: Any) -> None:
    """Azure's first `{"object": ""}` reaches the caller as from the raw SDK; record and result get the real id."""
    wire = headers(wire="azure-filter")
    raw = await _dicts(await raw_aoai.chat.completions.create(stream=True, extra_headers=wire, **CHAT_REQ))
    seen = await _dicts(await aoai.chat.completions.create(stream=True, extra_headers=wire, **CHAT_REQ))
    assert seen == raw and seen[0]["object"] == ""
    assert aoai.latency.last.response_id == raw[1]["id"] != ""
    done = await aoai.chat.completions.create(extra_headers=wire, **CHAT_REQ)
    plain = await raw_aoai.chat.completions.create(**CHAT_REQ)
    assert (done.id, done.model, done.created) == (plain.id, plain.model, plain.created)
    async with aoai.chat.completions.stream(extra_headers=wire, **CHAT_REQ) as stream:
        final = await stream.get_final_completion()
    assert final.id == plain.id


async def test_no_finish_reason_usage_chunk_completes(emu: Emulator, recorder: lk.Recorder) -> None:
    """No finish_reason from the server: create() returns the answer at once, sent once."""
    client = _oai(emu.base_url, recorder=recorder, retry=FAST_RETRY)
    before = emu.stats.requests_total
    done = await client.chat.completions.create(extra_headers=headers(wire="no-finish-reason"), **CHAT_REQ)
    assert emu.stats.requests_total - before == 1 and done.choices[0].message.content
    rec = client.latency.last
    assert (rec.outcome, rec.error_type, rec.attempts) == ("completed", None, 1)
    await client.close()


@pytest.mark.parametrize("with_usage", [True, False], ids=["usage-chunk", "done-only"])
async def test_no_finish_reason_done_completes(replay: Replay, with_usage: bool) -> None:
    """`[DONE]` ends a stream as complete, as the raw SDK sees it."""
    replay.serve(chat_no_finish(with_usage))
    client = _oai(replay.base_url, retry=FAST_RETRY)
    raw_client = _raw_oai(replay.base_url)
    raw = await _dicts(await raw_client.chat.completions.create(stream=True, **CHAT_REQ_SMALL))
    seen = await _dicts(await client.chat.completions.create(stream=True, **CHAT_REQ_SMALL))
    assert seen == [c for c in raw if c["choices"]] and client.latency.last.outcome == "completed"
    replay.requests.clear()
    done = await client.chat.completions.create(**CHAT_REQ_SMALL)
    assert done.choices[0].message.content == "".join(WORDS) and len(replay.requests) == 1
    assert client.latency.last.outcome == "completed"
    await client.close()
    await raw_client.close()


async def test_truncated_stream_raises_the_exported_incomplete_stream_error(replay: Replay) -> None:
    """A clean end with no finish, usage or [DONE] is `lk.IncompleteStreamError` on every path, and the record names it."""
    replay.serve(truncated_chat())
    client = _oai(replay.base_url, retry=FAST_RETRY)
    with pytest.raises(lk.IncompleteStreamError) as info:
        await _drain(await client.chat.completions.create(stream=True, **CHAT_REQ_SMALL))
    assert isinstance(info.value, lk.StreamInterruptedError) and isinstance(info.value, openai.APIConnectionError)
    assert client.latency.last.error_type == "IncompleteStreamError"
    replay.requests.clear()
    with pytest.raises(lk.IncompleteStreamError):
        await client.chat.completions.create(**CHAT_REQ_SMALL)
    rec = client.latency.last
    assert (rec.outcome, rec.error_type, rec.attempts) == ("interrupted", "IncompleteStreamError", 3) and len(replay.requests) == 3
    await client.close()


@pytest.mark.parametrize("api", ["chat", "messages"])
async def test_html_answer_says_so_and_is_not_retried(emu: Emulator, recorder: lk.Recorder, api: str) -> None:
    """A 200 `text/html` page: the error says it was not an event stream, and it is sent once."""
    wire = headers(wire="html")
    client: Any
    if api == "chat":
        client = _oai(emu.base_url, recorder=recorder, retry=FAST_RETRY)
        sdk: Any = openai

        async def call() -> Any:
            return await client.chat.completions.create(extra_headers=wire, **CHAT_REQ)

        async def call_stream() -> Any:
            return await _drain(await client.chat.completions.create(stream=True, extra_headers=wire, **CHAT_REQ))
    else:
        client = lk.AsyncAnthropic(base_url=emu.base_url, api_key="sk-ant-test", max_retries=0, recorder=recorder, retry=FAST_RETRY)
        sdk = anthropic

        async def call() -> Any:
            return await client.messages.create(extra_headers=wire, **ANT_REQ)

        async def call_stream() -> Any:
            return await _drain(await client.messages.create(stream=True, extra_headers=wire, **ANT_REQ))

    for fn in (call, call_stream):
        before = emu.stats.requests_total
        with pytest.raises(sdk.APIError, match="text/html.*not an event stream"):
            await fn()
        assert emu.stats.requests_total - before == 1
        assert (client.latency.last.outcome, client.latency.last.attempts) == ("error", 1)
    await client.close()


async def test_error_after_finish_is_recorded_as_the_caller_saw_it(emu: Emulator, recorder: lk.Recorder) -> None:
    """An error chunk after finish_reason: APIError for the caller, 'interrupted' in the record; attempts do not pile up finish reasons."""
    wire = headers(wire="error-after-finish")
    client = _oai(emu.base_url, recorder=recorder, retry=FAST_RETRY)
    with pytest.raises(openai.APIError):
        await _drain(await client.chat.completions.create(stream=True, extra_headers=wire, **CHAT_REQ))
    rec = client.latency.last
    assert (rec.outcome, rec.error_type, rec.finish_reasons) == ("interrupted", "APIError", ("stop",))
    with pytest.raises(openai.APIError):
        await client.chat.completions.create(extra_headers=wire, **CHAT_REQ)
    rec = client.latency.last
    assert (rec.attempts, rec.outcome, rec.finish_reasons) == (3, "interrupted", ("stop",))
    await client.close()


async def test_usage_chunk_the_caller_asked_for_is_kept(aoai: Any, raw_aoai: Any) -> None:
    """With include_usage from the caller, the usage chunk arrives as from the raw SDK, and .stream() keeps usage."""
    req = {**CHAT_REQ, "stream_options": {"include_usage": True}}
    raw = await _dicts(await raw_aoai.chat.completions.create(stream=True, **req))
    seen = await _dicts(await aoai.chat.completions.create(stream=True, **req))
    assert seen == raw and seen[-1]["choices"] == []
    async with aoai.chat.completions.stream(**req) as stream:
        final = await stream.get_final_completion()
    assert final.usage is not None and final.usage.completion_tokens == raw[-1]["usage"]["completion_tokens"]


async def test_usage_the_server_sends_unasked_is_kept(aoai: Any, raw_aoai: Any) -> None:
    """Usage on the finish chunk, unasked: the caller and .stream() see it as from the raw SDK."""
    wire = headers(wire="usage-unasked")
    raw = await _dicts(await raw_aoai.chat.completions.create(stream=True, extra_headers=wire, **CHAT_REQ))
    seen = await _dicts(await aoai.chat.completions.create(stream=True, extra_headers=wire, **CHAT_REQ))
    assert seen == raw and raw[-1]["usage"] is not None
    async with aoai.chat.completions.stream(extra_headers=wire, **CHAT_REQ) as stream:
        final = await stream.get_final_completion()
    assert final.usage is not None and final.usage.completion_tokens == raw[-1]["usage"]["completion_tokens"]


async def test_hidden_usage_chunk_is_read_without_the_sdk_building_it(replay: Replay, monkeypatch: pytest.MonkeyPatch) -> None:
    """Async: the usage chunk latencykit asked for is read from its JSON, never built by the SDK; the record has every count."""
    replay.serve(chat_with_usage(USAGE))
    plain = _raw_oai(replay.base_url)
    raw = [c for c in await _dicts(await plain.chat.completions.create(stream=True, **CHAT_REQ_SMALL)) if c["choices"]]
    await plain.close()
    parsed = usage_chunks_parsed(monkeypatch)
    client = _oai(replay.base_url)
    seen = await _dicts(await client.chat.completions.create(stream=True, **CHAT_REQ_SMALL))
    assert seen == raw and parsed == []
    rec = client.latency.last
    assert (rec.outcome, rec.input_tokens, rec.output_tokens, rec.cache_read_tokens) == ("completed", 9, 6, 4)
    assert rec.finish_reasons == ("stop",) and rec.extra["usage_chunk"] == "hidden, unverified" and rec.tpot is not None
    await client.close()


async def test_a_usage_chunk_the_sdk_model_would_reject_is_still_read_and_hidden(replay: Replay, monkeypatch: pytest.MonkeyPatch) -> None:
    """Async: a usage the SDK's model would reject is read from its JSON all the same (never built by
    the SDK): still hidden, the counts that are numbers kept."""
    replay.serve(chat_with_usage({**USAGE, "prompt_tokens": None}))
    parsed = usage_chunks_parsed(monkeypatch)
    client = _oai(replay.base_url)
    seen = await _dicts(await client.chat.completions.create(stream=True, **CHAT_REQ_SMALL))
    assert all(c["choices"] for c in seen) and parsed == []
    rec = client.latency.last
    assert (rec.outcome, rec.input_tokens, rec.output_tokens, rec.cache_read_tokens) == ("completed", None, 6, 4)
    await client.close()


async def test_empty_partial_utf8_deltas_count_as_tokens_with_continuous_usage(aoai: Any) -> None:
    """With continuous usage stats, an empty delta whose completion_tokens grew carries a token."""
    req = {**CHAT_REQ, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    wire = headers(wire="empty-deltas", output_tokens=8, tokens_per_chunk=1, ttft_ms=40, tpot_ms=25)
    await _drain(await aoai.chat.completions.create(stream=True, extra_headers=wire, **req))
    rec = aoai.latency.last
    assert rec.output_tokens == 8 and rec.chunks == 8
    assert rec.decode_time is not None and rec.decode_time >= 7 * 0.025 * 0.9


async def test_reasoning_details_deltas_are_thinking_tokens(replay: Replay) -> None:
    """`reasoning_details`-only deltas are generated tokens."""
    replay.serve(chat_reasoning_details())
    client = _oai(replay.base_url)
    await _drain(await client.chat.completions.create(stream=True, **CHAT_REQ_SMALL))
    assert client.latency.last.chunks == 5
    await client.close()


async def test_compaction_stream_no_warning_and_iterations_counted(replay: Replay) -> None:
    """The recorded compaction stream: no warning, the raw helper's blocks, the compaction step's cache read recorded."""
    replay.serve(recorded_body("anthropic-stream-cache-read-modern-compaction.yaml"))
    raw = anthropic.AsyncAnthropic(base_url=replay.base_url, api_key="sk-ant-test", max_retries=0)
    async with raw.messages.stream(**ANT_REQ_SMALL) as stream:
        expected = await stream.get_final_message()
    client = lk.AsyncAnthropic(base_url=replay.base_url, api_key="sk-ant-test", max_retries=0)
    msg = await client.messages.create(**ANT_REQ_SMALL)
    assert [b.type for b in msg.content] == [b.type for b in expected.content] == ["compaction", "text"]
    rec = client.latency.last
    assert (rec.cache_read_tokens, rec.output_tokens, rec.outcome) == (55096, 91, "completed")
    await client.close()
    await raw.close()


async def test_code_execution_blocks_no_warning(replay: Replay) -> None:
    """The recorded code-execution stream: create() has the raw helper's blocks, no warning."""
    replay.serve(anthropic_named("anthropic-stream-cache-mixed-modern-chunks.yaml"))
    raw = anthropic.AsyncAnthropic(base_url=replay.base_url, api_key="sk-ant-test", max_retries=0)
    async with raw.messages.stream(**ANT_REQ_SMALL) as stream:
        expected = await stream.get_final_message()
    client = lk.AsyncAnthropic(base_url=replay.base_url, api_key="sk-ant-test", max_retries=0)
    msg = await client.messages.create(**ANT_REQ_SMALL)
    assert [b.type for b in msg.content] == [b.type for b in expected.content]
    assert client.latency.last.cache_read_tokens == expected.usage.cache_read_input_tokens
    await client.close()
    await raw.close()


async def test_abandoned_anthropic_stream_has_unknown_output_tokens(aant: Any) -> None:
    """Closing an Anthropic stream before message_delta: output_tokens is unknown, not the placeholder 1."""
    stream = await aant.messages.create(stream=True, **ANT_REQ)
    async for event in stream:
        if event.type == "content_block_delta":
            break
    await stream.close()
    rec = aant.latency.last
    assert rec.outcome == "abandoned" and rec.output_tokens is None


async def test_iterating_after_close_behaves_like_the_raw_sdk(replay: Replay) -> None:
    """After close(), iterating again gives what the raw SDK gives, not 'the stream broke'."""
    replay.serve(chat_no_finish(with_usage=True))
    results = []
    for client in (_raw_oai(replay.base_url), _oai(replay.base_url)):
        stream = await client.chat.completions.create(stream=True, **CHAT_REQ_SMALL)
        it = stream.__aiter__()
        await it.__anext__()
        await it.__anext__()
        await stream.close()
        try:
            results.append(("ok", [c.choices[0].delta.content async for c in stream if c.choices]))
        except Exception as exc:
            results.append((type(exc).__name__, []))
        await client.close()
    assert results[0] == results[1]


async def test_llama_tiny_template_read_is_not_a_hit(replay: Replay, recorder: lk.Recorder) -> None:
    """A 7-token read of a cold 2,025-token prompt (llama.cpp's template tokens) is no hit; writes unknown."""
    client = _oai(replay.base_url, recorder=recorder)
    long_prompt = {"model": "tiny", "max_tokens": 4, "messages": [{"role": "system", "content": "lorem ipsum " * 1100}, {"role": "user", "content": "hi"}]}
    replay.serve(llama_tiny_read(7, 2025))
    await client.chat.completions.create(**long_prompt)
    rec = client.latency.last
    assert rec.cache_read_tokens == 7 and rec.cache_verdict in ("write", "expected_miss") and rec.cache_write_tokens is None
    report = client.latency.cache_report()
    assert report.hit_rate_calls == 0 and "7 / unknown" in str(report)
    await client.close()


async def test_llama_timings_kept_in_the_reassembled_completion(replay: Replay) -> None:
    """The non-stream create() result keeps llama.cpp's `timings` in model_extra."""
    replay.serve(recorded_body("real-llama-server-sse.txt"))
    client = _oai(replay.base_url)
    done = await client.chat.completions.create(**CHAT_REQ_SMALL)
    assert (done.model_extra or {}).get("timings", {}).get("predicted_n") == 4
    await client.close()


async def test_vllm_created_cache_tokens_are_cache_writes(replay: Replay) -> None:
    """vLLM's created_cache_tokens is the record's cache_write_tokens."""
    replay.serve(vllm_created_cache(read=0, created=1920))
    client = _oai(replay.base_url)
    await client.chat.completions.create(**CHAT_REQ_SMALL)
    assert client.latency.last.cache_write_tokens == 1920
    await client.close()
