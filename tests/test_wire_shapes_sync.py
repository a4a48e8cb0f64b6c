"""Wire shapes from real OpenAI-compatible servers and newer APIs, through the real SDKs over HTTP (sync).

Each test makes the emulator produce the shape (``x-emulator-wire``) or replays a recorded
real response (or a variant of one) from a local server, and checks what a user would:
the caller gets what the raw SDK gives, and the record says what happened.
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


def _oai(base: str, **kw: Any) -> lk.OpenAI:
    return lk.OpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0, **kw)


def _raw_oai(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0)


def _dicts(stream: Any) -> list[dict[str, Any]]:
    # Whole chunks: the "usage": null that the include_usage latencykit adds puts on every chunk is taken off again.
    return [chunk.to_dict() for chunk in stream]


# -- Azure's prompt-filter object first ------------------------------------------------------


def test_azure_filter_object_is_passed_on_but_not_read(oai: lk.OpenAI, raw_oai: openai.OpenAI, emu: Emulator) -> None:
    """Azure's first `{"object": "", "id": "", "model": ""}` reaches the caller as from the raw SDK; record and result get the real id."""
    wire = headers(wire="azure-filter")
    raw = _dicts(raw_oai.chat.completions.create(stream=True, extra_headers=wire, **CHAT_REQ))
    seen = _dicts(oai.chat.completions.create(stream=True, extra_headers=wire, **CHAT_REQ))
    assert seen == raw and seen[0]["object"] == "" and "prompt_filter_results" in seen[0]
    rec = oai.latency.last
    assert rec.response_id == raw[1]["id"] != "" and rec.response_model == raw[1]["model"] != ""
    assert rec.outcome == "completed" and rec.ttft is not None

    done = oai.chat.completions.create(extra_headers=wire, **CHAT_REQ)
    plain = raw_oai.chat.completions.create(**CHAT_REQ)
    assert (done.id, done.model, done.created) == (plain.id, plain.model, plain.created)
    assert done.choices[0].message.content == plain.choices[0].message.content
    assert oai.latency.last.response_id == plain.id

    with oai.chat.completions.stream(extra_headers=wire, **CHAT_REQ) as stream:
        final = stream.get_final_completion()
    assert final.id == plain.id and final.choices[0].message.content == plain.choices[0].message.content


# -- no finish_reason: a usage chunk or [DONE] ends the stream ---------------------------------


def test_no_finish_reason_usage_chunk_completes(emu: Emulator, recorder: lk.Recorder) -> None:
    """A server that never sends a finish_reason: create() returns the whole answer at once, not a truncation retried 3 times."""
    client = _oai(emu.base_url, recorder=recorder, retry=FAST_RETRY)
    wire = headers(wire="no-finish-reason")
    before = emu.stats.requests_total
    done = client.chat.completions.create(extra_headers=wire, **CHAT_REQ)
    assert emu.stats.requests_total - before == 1
    rec = client.latency.last
    assert (rec.outcome, rec.error_type, rec.attempts) == ("completed", None, 1)
    assert done.choices[0].message.content and done.usage is not None and rec.output_tokens == done.usage.completion_tokens
    seen = _dicts(client.chat.completions.create(stream=True, extra_headers=wire, **CHAT_REQ))
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in seen) == done.choices[0].message.content
    assert client.latency.last.outcome == "completed"
    client.close()


@pytest.mark.parametrize("with_usage", [True, False], ids=["usage-chunk", "done-only"])
def test_no_finish_reason_done_completes(replay: Replay, with_usage: bool) -> None:
    """`[DONE]` (with or without a usage chunk before it) ends a stream as complete, as the raw SDK sees it."""
    replay.serve(chat_no_finish(with_usage))
    client = _oai(replay.base_url, retry=FAST_RETRY)
    raw = _dicts(_raw_oai(replay.base_url).chat.completions.create(stream=True, **CHAT_REQ_SMALL))
    seen = _dicts(client.chat.completions.create(stream=True, **CHAT_REQ_SMALL))
    assert seen == [c for c in raw if c["choices"]]  # the usage chunk latencykit asked for is hidden
    assert client.latency.last.outcome == "completed"
    replay.requests.clear()
    done = client.chat.completions.create(**CHAT_REQ_SMALL)
    assert done.choices[0].message.content == "".join(WORDS) and len(replay.requests) == 1
    rec = client.latency.last
    assert (rec.outcome, rec.attempts, rec.finish_reasons) == ("completed", 1, ())
    assert rec.output_tokens == (5 if with_usage else None)
    client.close()


# -- one exception name per failure kind ------------------------------------------------------


def test_truncated_stream_raises_the_exported_incomplete_stream_error(replay: Replay) -> None:
    """A clean end with no finish, usage or [DONE] is `lk.IncompleteStreamError` on every path, and the record names it."""
    replay.serve(truncated_chat())
    client = _oai(replay.base_url, retry=FAST_RETRY)
    with pytest.raises(lk.IncompleteStreamError) as info:
        for _ in client.chat.completions.create(stream=True, **CHAT_REQ_SMALL):
            pass
    err = info.value
    assert isinstance(err, lk.StreamInterruptedError) and isinstance(err, openai.APIConnectionError)
    assert err.partial.text == "".join(WORDS)
    rec = client.latency.last
    assert (rec.outcome, rec.error_type) == ("interrupted", "IncompleteStreamError")

    replay.requests.clear()
    with pytest.raises(lk.IncompleteStreamError) as info:
        client.chat.completions.create(**CHAT_REQ_SMALL)
    assert isinstance(info.value, openai.APIConnectionError) and info.value.partial.text == "".join(WORDS)
    assert len(replay.requests) == 3  # a truncation is a drop: retried
    rec = client.latency.last
    assert (rec.outcome, rec.error_type, rec.attempts) == ("interrupted", "IncompleteStreamError", 3)
    client.close()


def test_truncated_before_content_is_incomplete_not_interrupted(replay: Replay) -> None:
    """A clean end before any content: `lk.IncompleteStreamError` and the SDK's APIConnectionError, not a StreamInterruptedError."""
    replay.serve('data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"tiny","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n')
    client = _oai(replay.base_url, retry=FAST_RETRY)
    for call in (lambda: list(client.chat.completions.create(stream=True, **CHAT_REQ_SMALL)), lambda: client.chat.completions.create(**CHAT_REQ_SMALL)):
        with pytest.raises(lk.IncompleteStreamError) as info:
            call()
        assert isinstance(info.value, openai.APIConnectionError) and not isinstance(info.value, lk.StreamInterruptedError)
        rec = client.latency.last
        assert (rec.outcome, rec.error_type) == ("error", "IncompleteStreamError")
    client.close()


# -- an answer that is no event stream ----------------------------------------------------------


@pytest.mark.parametrize("api", ["chat", "messages"])
def test_html_answer_says_so_and_is_not_retried(emu: Emulator, recorder: lk.Recorder, api: str) -> None:
    """A 200 `text/html` page: the error says it was not an event stream, and it is sent once, not 3 times."""
    wire = headers(wire="html")
    if api == "chat":
        client: Any = _oai(emu.base_url, recorder=recorder, retry=FAST_RETRY)
        calls = [lambda: client.chat.completions.create(extra_headers=wire, **CHAT_REQ),
                 lambda: list(client.chat.completions.create(stream=True, extra_headers=wire, **CHAT_REQ))]
        sdk: Any = openai
    else:
        client = lk.Anthropic(base_url=emu.base_url, api_key="sk-ant-test", max_retries=0, recorder=recorder, retry=FAST_RETRY)
        calls = [lambda: client.messages.create(extra_headers=wire, **ANT_REQ),
                 lambda: list(client.messages.create(stream=True, extra_headers=wire, **ANT_REQ))]
        sdk = anthropic
    for call in calls:
        before = emu.stats.requests_total
        with pytest.raises(sdk.APIError, match="text/html.*not an event stream"):
            call()
        assert emu.stats.requests_total - before == 1
        rec = client.latency.last
        assert (rec.outcome, rec.attempts, rec.error_type) == ("error", 1, "APIError")
    client.close()


# -- an error after the finish chunk -------------------------------------------------------------


def test_error_after_finish_is_recorded_as_the_caller_saw_it(emu: Emulator, recorder: lk.Recorder, raw_oai: openai.OpenAI) -> None:
    """An error chunk after finish_reason: the caller gets the SDK's APIError, and the record says so (not 'completed')."""
    wire = headers(wire="error-after-finish")
    with pytest.raises(openai.APIError):
        list(raw_oai.chat.completions.create(stream=True, extra_headers=wire, **CHAT_REQ))
    client = _oai(emu.base_url, recorder=recorder, retry=FAST_RETRY)
    with pytest.raises(openai.APIError) as info:
        for _ in client.chat.completions.create(stream=True, extra_headers=wire, **CHAT_REQ):
            pass
    assert "server had an error" in str(info.value)
    rec = client.latency.last
    assert (rec.outcome, rec.error_type) == ("interrupted", "APIError") and rec.finish_reasons == ("stop",)

    before = emu.stats.requests_total
    with pytest.raises(openai.APIError):
        client.chat.completions.create(extra_headers=wire, **CHAT_REQ)
    rec = client.latency.last
    assert emu.stats.requests_total - before == rec.attempts == 3  # retry_interrupted: the caller saw nothing yet
    assert (rec.outcome, rec.error_type) == ("interrupted", "APIError")
    assert rec.finish_reasons == ("stop",)  # the last attempt's, not one per attempt
    client.close()


# -- the usage chunk ----------------------------------------------------------------------------


def test_usage_chunk_the_caller_asked_for_is_kept(oai: lk.OpenAI, raw_oai: openai.OpenAI) -> None:
    """With include_usage from the caller, the usage chunk arrives as from the raw SDK, and .stream() keeps usage."""
    req = {**CHAT_REQ, "stream_options": {"include_usage": True}}
    raw = _dicts(raw_oai.chat.completions.create(stream=True, **req))
    seen = _dicts(oai.chat.completions.create(stream=True, **req))
    assert seen == raw and seen[-1]["choices"] == [] and seen[-1]["usage"]["completion_tokens"] > 0
    with oai.chat.completions.stream(**req) as stream:
        final = stream.get_final_completion()
    with raw_oai.chat.completions.stream(**req) as raw_stream:
        raw_final = raw_stream.get_final_completion()
    assert final.usage is not None and final.usage == raw_final.usage


def test_usage_latencykit_asked_for_is_hidden(oai: lk.OpenAI, raw_oai: openai.OpenAI) -> None:
    """Without include_usage from the caller, the caller sees the raw SDK's chunks; the record still has the usage."""
    raw = _dicts(raw_oai.chat.completions.create(stream=True, **CHAT_REQ))
    seen = _dicts(oai.chat.completions.create(stream=True, **CHAT_REQ))
    assert len(seen) == len(raw) and all(c["choices"] for c in seen)
    assert oai.latency.last.output_tokens == 24


def test_usage_the_server_sends_unasked_is_kept(oai: lk.OpenAI, raw_oai: openai.OpenAI) -> None:
    """A server that ignores stream_options and puts usage on its finish chunk: the caller and .stream() see it as raw."""
    wire = headers(wire="usage-unasked")
    raw = _dicts(raw_oai.chat.completions.create(stream=True, extra_headers=wire, **CHAT_REQ))
    seen = _dicts(oai.chat.completions.create(stream=True, extra_headers=wire, **CHAT_REQ))
    assert seen == raw and raw[-1]["usage"] is not None
    assert oai.latency.last.output_tokens == raw[-1]["usage"]["completion_tokens"] and oai.latency.last.outcome == "completed"
    with oai.chat.completions.stream(extra_headers=wire, **CHAT_REQ) as stream:
        final = stream.get_final_completion()
    with raw_oai.chat.completions.stream(extra_headers=wire, **CHAT_REQ) as raw_stream:
        raw_final = raw_stream.get_final_completion()
    assert final.usage is not None and final.usage == raw_final.usage


def test_hidden_usage_chunk_is_read_without_the_sdk_building_it(replay: Replay, monkeypatch: pytest.MonkeyPatch) -> None:
    """The usage chunk latencykit asked for is read from its JSON: the caller sees the raw SDK's chunks less it,
    the record has every count, and the SDK never builds a chunk object it would drop."""
    replay.serve(chat_with_usage(USAGE))
    with _raw_oai(replay.base_url) as plain:
        raw = [c for c in _dicts(plain.chat.completions.create(stream=True, **CHAT_REQ_SMALL)) if c["choices"]]
    parsed = usage_chunks_parsed(monkeypatch)
    client = _oai(replay.base_url)
    seen = _dicts(client.chat.completions.create(stream=True, **CHAT_REQ_SMALL))
    assert seen == raw and parsed == []
    rec = client.latency.last
    assert (rec.outcome, rec.input_tokens, rec.output_tokens, rec.cache_read_tokens) == ("completed", 9, 6, 4)
    assert rec.finish_reasons == ("stop",) and rec.extra["usage_chunk"] == "hidden, unverified" and rec.tpot is not None
    client.close()


def test_a_usage_chunk_the_sdk_model_would_reject_is_still_read_and_hidden(replay: Replay, monkeypatch: pytest.MonkeyPatch) -> None:
    """A usage the SDK's model would reject (``prompt_tokens: null``) is read from its JSON all the same (never built
    by the SDK): still hidden, the counts that are numbers kept."""
    replay.serve(chat_with_usage({**USAGE, "prompt_tokens": None}))
    parsed = usage_chunks_parsed(monkeypatch)
    client = _oai(replay.base_url)
    seen = _dicts(client.chat.completions.create(stream=True, **CHAT_REQ_SMALL))
    assert all(c["choices"] for c in seen) and parsed == []
    rec = client.latency.last
    assert (rec.outcome, rec.input_tokens, rec.output_tokens, rec.cache_read_tokens) == ("completed", None, 6, 4)
    client.close()


# -- tokens by the server's count ------------------------------------------------------------------


def test_empty_partial_utf8_deltas_count_as_tokens_with_continuous_usage(oai: lk.OpenAI, emu: Emulator) -> None:
    """With continuous usage stats, a chunk whose completion_tokens grew carries a token although its text is empty."""
    req = {**CHAT_REQ, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    wire = headers(wire="empty-deltas", output_tokens=8, tokens_per_chunk=1, ttft_ms=40, tpot_ms=25)
    chunks = list(oai.chat.completions.create(stream=True, extra_headers=wire, **req))
    empty = [c for c in chunks if c.choices and c.choices[0].delta.content == "" and (c.usage and c.usage.completion_tokens)]
    assert len(empty) == 4  # half the tokens arrived without text
    rec = oai.latency.last
    assert rec.output_tokens == 8 and rec.chunks == 8
    # The decode window spans all 8 token chunks (7 gaps of 25 ms), not the 4 with text.
    assert rec.decode_time is not None and rec.decode_time >= 7 * 0.025 * 0.9


def test_continuous_usage_read_on_every_chunk_of_a_stream_left_early(oai: lk.OpenAI, emu: Emulator) -> None:
    """A stream left after 5 chunks with continuous usage stats: the record has the prompt side
    (read once) and the completion count of the last chunk the caller got."""
    req = {**CHAT_REQ, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    wire = headers(output_tokens=12, tokens_per_chunk=1, ttft_ms=20, tpot_ms=5)
    stream = oai.chat.completions.create(stream=True, extra_headers=wire, **req)
    got = [next(stream) for _ in range(5)]
    stream.close()
    last = got[-1].usage
    assert last is not None and 0 < last.completion_tokens < 12
    rec = oai.latency.last
    assert rec.outcome == "abandoned"
    assert (rec.input_tokens, rec.output_tokens) == (last.prompt_tokens, last.completion_tokens)


def test_reasoning_details_deltas_are_thinking_tokens(replay: Replay) -> None:
    """OpenRouter/Snowflake `reasoning_details`-only deltas are generated tokens: TTFT lands on the first."""
    replay.serve(chat_reasoning_details())
    client = _oai(replay.base_url)
    chunks = list(client.chat.completions.create(stream=True, **CHAT_REQ_SMALL))
    rec = client.latency.last
    assert rec.chunks == 5 and rec.outcome == "completed"  # three reasoning chunks + two text chunks
    assert chunks[1].choices[0].delta.model_extra["reasoning_details"][0]["text"] == "Think"
    client.close()


# -- Anthropic blocks the SDK does not model ---------------------------------------------------------


def test_compaction_stream_no_warning_and_iterations_counted(replay: Replay, recorder: lk.Recorder) -> None:
    """The recorded compaction stream: create() gives the raw helper's blocks without a warning (-W error);
    compaction_delta is a token; usage.iterations' cache read of the compaction step is recorded."""
    replay.serve(recorded_body("anthropic-stream-cache-read-modern-compaction.yaml"))
    raw = anthropic.Anthropic(base_url=replay.base_url, api_key="sk-ant-test", max_retries=0)
    with raw.messages.stream(**ANT_REQ_SMALL) as stream:
        expected = stream.get_final_message()
    client = lk.Anthropic(base_url=replay.base_url, api_key="sk-ant-test", max_retries=0, recorder=recorder)
    msg = client.messages.create(**ANT_REQ_SMALL)
    assert [b.type for b in msg.content] == [b.type for b in expected.content] == ["compaction", "text"]
    assert msg.content[0].to_dict(warnings=False) == expected.content[0].to_dict(warnings=False)
    assert msg.content[1].text == expected.content[1].text
    rec = client.latency.last
    text_deltas = recorded_body("anthropic-stream-cache-read-modern-compaction.yaml").count('"text_delta"')
    assert rec.outcome == "completed" and rec.chunks == 1 + text_deltas  # the compaction delta is a token
    assert rec.cache_read_tokens == 55096 and rec.output_tokens == 83 + 8 and rec.uncached_input_tokens == 100 + 181
    assert rec.input_tokens == 100 + 181 + 55096 and rec.extra["usage_iterations"] == 2
    with client.messages.stream(**ANT_REQ_SMALL) as helper:
        again = helper.get_final_message()
    assert [b.type for b in again.content] == ["compaction", "text"]
    client.close()
    raw.close()


def test_code_execution_blocks_no_warning(replay: Replay) -> None:
    """The recorded code-execution stream (server_tool_use + result blocks): create() equals the raw helper's message, no warning."""
    replay.serve(anthropic_named("anthropic-stream-cache-mixed-modern-chunks.yaml"))
    raw = anthropic.Anthropic(base_url=replay.base_url, api_key="sk-ant-test", max_retries=0)
    with raw.messages.stream(**ANT_REQ_SMALL) as stream:
        expected = stream.get_final_message()
    client = lk.Anthropic(base_url=replay.base_url, api_key="sk-ant-test", max_retries=0)
    msg = client.messages.create(**ANT_REQ_SMALL)
    assert [b.type for b in msg.content] == [b.type for b in expected.content]
    rec = client.latency.last
    assert (rec.cache_read_tokens, rec.cache_write_tokens) == (expected.usage.cache_read_input_tokens, expected.usage.cache_creation_input_tokens)
    assert rec.output_tokens == expected.usage.output_tokens
    client.close()
    raw.close()


def test_abandoned_anthropic_stream_has_unknown_output_tokens(ant: lk.Anthropic) -> None:
    """Closing an Anthropic stream before message_delta: output_tokens is unknown, not message_start's placeholder 1."""
    stream = ant.messages.create(stream=True, **ANT_REQ)
    for event in stream:
        if event.type == "content_block_delta":
            break
    stream.close()
    rec = ant.latency.last
    assert rec.outcome == "abandoned" and rec.output_tokens is None and rec.tpot is None
    assert rec.input_tokens is not None  # message_start's input count is real


def test_iterating_after_close_behaves_like_the_raw_sdk(replay: Replay) -> None:
    """After close(), iterating again gives what the raw SDK gives (the buffered rest), not 'the stream broke'."""
    replay.serve(chat_no_finish(with_usage=True))
    results = []
    for client in (_raw_oai(replay.base_url), _oai(replay.base_url)):
        stream = client.chat.completions.create(stream=True, **CHAT_REQ_SMALL)
        it = iter(stream)
        next(it), next(it)
        stream.close()
        try:
            results.append(("ok", [c.choices[0].delta.content for c in stream if c.choices]))
        except Exception as exc:
            results.append((type(exc).__name__, []))
        client.close()
    assert results[0] == results[1]


# -- self-hosted servers: cache counters and extras ------------------------------------------------


def test_llama_tiny_template_read_is_not_a_hit(replay: Replay, recorder: lk.Recorder) -> None:
    """llama.cpp reuses a few template tokens of any prompt: a 7-token read of a cold 2,025-token prompt is no hit."""
    client = _oai(replay.base_url, recorder=recorder)
    long_prompt = {"model": "tiny", "max_tokens": 4, "messages": [{"role": "system", "content": "lorem ipsum " * 1100}, {"role": "user", "content": "hi"}]}
    replay.serve(llama_tiny_read(7, 2025))
    client.chat.completions.create(**long_prompt)
    rec = client.latency.last
    assert rec.cache_read_tokens == 7 and rec.cache_verdict in ("write", "expected_miss")
    assert rec.cache_write_tokens is None  # llama.cpp does not say
    replay.serve(llama_tiny_read(2009, 2025))
    client.chat.completions.create(**long_prompt)
    assert client.latency.last.cache_verdict in ("hit", "partial")  # a real read (the local estimate is ±20 %)
    report = client.latency.cache_report()
    assert report.hit_rate_calls == pytest.approx(0.5) and report.tokens_written is None
    assert "2,016 / unknown" in str(report)
    client.close()


def test_llama_timings_kept_in_the_reassembled_completion(replay: Replay) -> None:
    """The non-stream create() result keeps llama.cpp's `timings` in model_extra, as the raw SDK's non-stream answer has it."""
    replay.serve(recorded_body("real-llama-server-sse.txt"))
    client = _oai(replay.base_url)
    done = client.chat.completions.create(**CHAT_REQ_SMALL)
    timings = (done.model_extra or {}).get("timings")
    assert timings is not None and timings["predicted_n"] == 4 and timings["cache_n"] == 0
    assert done.usage is not None and done.usage.completion_tokens == 4 and done.id.startswith("chatcmpl-")
    client.close()


def test_vllm_created_cache_tokens_are_cache_writes(replay: Replay, recorder: lk.Recorder) -> None:
    """vLLM's prompt_tokens_details.created_cache_tokens is the record's cache_write_tokens, and the report counts it."""
    replay.serve(vllm_created_cache(read=0, created=1920))
    client = _oai(replay.base_url, recorder=recorder)
    client.chat.completions.create(**CHAT_REQ_SMALL)
    rec = client.latency.last
    assert (rec.cache_read_tokens, rec.cache_write_tokens, rec.input_tokens) == (0, 1920, 2025)
    report = client.latency.cache_report()
    assert report.tokens_written == 1920 and "0 / 1,920" in str(report)
    client.close()
