"""`FastEvents` reads every body exactly as the installed SDKs' own SSE decoders do.

Differential: the same bytes, cut into the same network chunks, go through the SDK decoder
and through `FastEvents` over a fresh SDK decoder; the events (their class and every attribute),
when each comes out (how many chunks had been read: an event held back would delay its
token's timestamp) and any error must be the same, sync and async. The bodies are drawn by Hypothesis from the
SSE grammar and its odd corners (comments, ``id``/``retry``, fields without a colon, several
``data:`` lines, empty event names, ``\\r\\n`` and ``\\r`` line ends, runs of blank lines, bytes
that are not UTF-8, a partial last line) mixed with the two common shapes it reads at once.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

import anthropic
import anthropic._streaming as anthropic_streaming
import openai
import openai._streaming as openai_streaming
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import latencykit as lk
from latencykit.providers import _sse
from latencykit.providers._sse import FastEvents, _check, fast_events

DECODERS = {"anthropic": anthropic_streaming.SSEDecoder, "openai": openai_streaming.SSEDecoder}


@pytest.fixture(params=sorted(DECODERS), scope="module")
def decoder_class(request: Any) -> Any:
    return DECODERS[request.param]


def _run_sync(decoder: Any, pieces: list[bytes]) -> tuple[list[Any], Any]:
    """The events (with how many chunks had been read when each came out) and the error."""
    read = [0]

    def chunks() -> Any:
        for piece in pieces:
            read[0] += 1
            yield piece

    out: list[Any] = []
    try:
        for event in decoder.iter_bytes(chunks()):
            out.append((read[0], type(event), dict(vars(event))))
    except Exception as exc:
        return out, (type(exc), str(exc))
    return out, None


def _run_async(decoder: Any, pieces: list[bytes]) -> tuple[list[Any], Any]:
    read = [0]

    async def chunks() -> AsyncIterator[bytes]:
        for piece in pieces:
            await asyncio.sleep(0)  # a real suspension between network reads
            read[0] += 1
            yield piece

    async def go() -> tuple[list[Any], Any]:
        out: list[Any] = []
        try:
            async for event in decoder.aiter_bytes(chunks()):
                out.append((read[0], type(event), dict(vars(event))))
        except Exception as exc:
            return out, (type(exc), str(exc))
        return out, None

    return asyncio.run(go())


def _fast(decoder_class: Any) -> FastEvents:
    parse = _check(decoder_class)
    assert parse is not None, f"{decoder_class.__module__}'s decoder did not pass the check"
    return FastEvents(decoder_class(), parse)


def test_the_installed_sdks_decoders_pass_the_check(decoder_class: Any) -> None:
    assert _check(decoder_class) is not None


_NAMES = st.sampled_from(["message_start", "content_block_delta", "ping", "response.output_text.delta", "error", "é✓", ""])
_VALUES = st.one_of(
    st.sampled_from(['{"type":"content_block_delta","delta":{"text":"hi"}}', '{"x":1,"usage":null}', "[DONE]", "", " lead", "a:b"]),
    st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=12),
)
_COMMON = st.one_of(
    st.builds(lambda v: f"data: {v}\n\n", _VALUES),
    st.builds(lambda n, v: f"event: {n}\ndata: {v}\n\n", _NAMES, _VALUES),
    st.builds(lambda n, v: f"event:{n}\ndata:{v}\n\n", _NAMES, _VALUES),
)
_ODD = st.one_of(
    st.builds(lambda v: f": {v}\n", _VALUES),
    st.builds(lambda v: f"id: {v}\n", st.sampled_from(["7", "8\x00", "", "x y"])),
    st.builds(lambda v: f"retry: {v}\n", st.sampled_from(["50", "x", ""])),
    st.builds(lambda v: f"data: {v}\n", _VALUES),
    st.builds(lambda n: f"event: {n}\n", _NAMES),
    st.sampled_from(["data\n", "event\n", "field: v\n", "\n", "\n\n", "data:  two\n"]),
)
_BODIES = st.lists(st.one_of(_COMMON, _COMMON, _ODD), max_size=14).map("".join).map(str.encode)


@st.composite
def _bodies(draw: Any) -> bytes:
    body: bytes = draw(_BODIES)
    if draw(st.integers(0, 9)) == 0:  # CR line ends somewhere: the hand-over to the SDK decoder
        at = draw(st.integers(0, len(body)))
        body = body[:at] + draw(st.sampled_from([b"data: cr\r\r", b"data: crlf\r\n\r\n", b"\r", b"x\r\ny\n\n"])) + body[at:]
    if draw(st.integers(0, 14)) == 0:  # bytes that are not UTF-8
        at = draw(st.integers(0, len(body)))
        body = body[:at] + b"\xff\xfe" + body[at:]
    if draw(st.booleans()):  # a partial last line
        body += draw(st.sampled_from([b"data: partial", b"event: e\ndata: d", b"\n", b"data: x\n"]))
    return body


@st.composite
def _cut(draw: Any) -> list[bytes]:
    body = draw(_bodies())
    cuts = sorted(set(draw(st.lists(st.integers(0, len(body)), max_size=8))))
    pieces, last = [], 0
    for at in cuts:
        pieces.append(body[last:at])  # empty pieces too: an empty network read
        last = at
    pieces.append(body[last:])
    return pieces


@settings(max_examples=300, deadline=None)
@given(pieces=_cut())
def test_reads_any_body_as_the_sdk_decoder_does_sync(decoder_class: Any, pieces: list[bytes]) -> None:
    assert _run_sync(_fast(decoder_class), pieces) == _run_sync(decoder_class(), pieces)


@settings(max_examples=150, deadline=None)
@given(pieces=_cut())
def test_reads_any_body_as_the_sdk_decoder_does_async(decoder_class: Any, pieces: list[bytes]) -> None:
    assert _run_async(_fast(decoder_class), pieces) == _run_async(decoder_class(), pieces)


def test_an_event_spread_over_many_chunks(decoder_class: Any) -> None:
    big = b'event: message_start\ndata: {"text":"' + b"\xc3\xa9" * 50_000 + b'"}\n\ndata: [DONE]\n\n'
    pieces = [big[i : i + 997] for i in range(0, len(big), 997)]  # cuts through the two-byte characters
    fast, sdk = _run_sync(_fast(decoder_class), pieces), _run_sync(decoder_class(), pieces)
    assert fast == sdk and len(fast[0]) == 2 and fast[1] is None


def test_invalid_utf8_raises_where_the_sdk_does(decoder_class: Any) -> None:
    pieces = [b"data: one\n\ndata: \xff\n\ndata: three\n\n"]
    fast, sdk = _run_sync(_fast(decoder_class), pieces), _run_sync(decoder_class(), pieces)
    assert fast == sdk
    assert [attrs["_data"] for _, _, attrs in fast[0]] == ["one"] and fast[1][0] is UnicodeDecodeError


def test_keep_sees_each_event_in_order_and_may_change_or_drop_it(decoder_class: Any) -> None:
    seen: list[tuple[Any, str]] = []
    consumed: list[str] = []

    def keep(event: Any, data: str) -> Any:
        seen.append((event, data))
        assert len(consumed) == len(seen) - 1 - sum(1 for _, d in seen[:-1] if d == "drop")  # nothing read ahead
        if data == "drop":
            return None
        return data.upper() if data == "up" else data

    fast = FastEvents(decoder_class(), _check(decoder_class), keep)
    body = [b"data: a\n\nevent: e\ndata: drop\n\n: odd\ndata: up\n\ndata: b\n\n"]
    for event in fast.iter_bytes(iter(body)):
        consumed.append(event.data)
    assert seen == [(None, "a"), ("e", "drop"), (None, "up"), (None, "b")]
    assert consumed == ["a", "UP", "b"]


class _OddDecoder:
    """A decoder of another make (as Bedrock's AWS event-stream decoder is)."""

    def iter_bytes(self, iterator: Any) -> Any:
        for chunk in iterator:
            yield anthropic_streaming.ServerSentEvent(event="completion", data=chunk.decode())

    async def aiter_bytes(self, iterator: Any) -> Any:
        async for chunk in iterator:
            yield anthropic_streaming.ServerSentEvent(event="completion", data=chunk.decode())


class _Stream:
    def __init__(self, decoder: Any) -> None:
        self._decoder = decoder


def test_a_decoder_that_reads_otherwise_keeps_its_own_decoding() -> None:
    class Upper(anthropic_streaming.SSEDecoder):  # an SDK decoder that changes the data
        def decode(self, line: str) -> Any:
            sse = super().decode(line)
            if sse is not None:
                sse._data = sse._data.upper()
            return sse

    for decoder in (Upper(), _OddDecoder()):
        stream = _Stream(decoder)
        assert fast_events(stream) is False
        assert stream._decoder is decoder


def test_once_per_stream() -> None:
    stream = _Stream(anthropic_streaming.SSEDecoder())
    assert fast_events(stream) is True
    fast = stream._decoder
    assert isinstance(fast, FastEvents)
    assert fast_events(stream, lambda e, d: d) is True and stream._decoder is fast  # a second call changes nothing


@pytest.mark.parametrize("api", ["anthropic", "chat", "responses"])
def test_observed_streams_are_read_by_fast_events_and_the_caller_sees_the_raw_sdks_events(
    api: str, ant: lk.Anthropic, raw_ant: anthropic.Anthropic, oai: lk.OpenAI, raw_oai: openai.OpenAI, recorder: lk.Recorder
) -> None:
    """Through latencykit against the emulator, the stream's decoder is `FastEvents`, and the
    events equal the raw SDK's for the same request."""

    def events(client: Any) -> tuple[Any, list[Any]]:
        if api == "anthropic":
            stream = client.messages.create(model="claude-sonnet-5", max_tokens=64, stream=True,
                                            messages=[{"role": "user", "content": "Write a story."}])  # fmt: skip
        elif api == "chat":
            stream = client.chat.completions.create(model="gpt-5-mini", stream=True, max_completion_tokens=64,
                                                    messages=[{"role": "user", "content": "Write a story."}])  # fmt: skip
        else:
            stream = client.responses.create(model="gpt-5-mini", stream=True, input="Write a story.", max_output_tokens=64)
        with stream:
            return stream._decoder, [e.to_dict() for e in stream]

    mine, raw = (ant, raw_ant) if api == "anthropic" else (oai, raw_oai)
    decoder, got = events(mine)
    _, want = events(raw)
    assert isinstance(decoder, FastEvents)
    assert got == want and len(got) > 5
    rec = recorder.last
    assert rec is not None and rec.ttft is not None and rec.output_tokens and rec.error_type is None


@pytest.mark.parametrize("fast", [True, False], ids=["fast-events", "sdk-decoder"])
def test_chat_hides_latencykits_usage_chunk_either_way(
    fast: bool, oai: lk.OpenAI, raw_oai: openai.OpenAI, recorder: lk.Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the SDK decoder did not pass the check, the chunks go through `_swallow` instead:
    the caller gets the raw SDK's chunks either way, and the record the server's usage."""
    if not fast:
        monkeypatch.setitem(_sse._parses, openai_streaming.SSEDecoder, None)
    kwargs: Any = {"model": "gpt-5-mini", "stream": True, "max_completion_tokens": 64,
                   "messages": [{"role": "user", "content": "Write a story."}]}  # fmt: skip
    with oai.chat.completions.create(**kwargs) as stream:
        assert isinstance(stream._decoder, FastEvents) is fast
        got = [(c.to_dict(), c.model_fields_set) for c in stream]
    want = [(c.to_dict(), c.model_fields_set) for c in raw_oai.chat.completions.create(**kwargs)]
    assert got == want and all(c["choices"] for c, _ in got)
    rec = recorder.last
    assert rec is not None and rec.output_tokens and rec.input_tokens and rec.extra.get("usage_chunk")


@pytest.mark.parametrize("fast", [True, False], ids=["fast-events", "sdk-decoder"])
def test_async_chat_hides_latencykits_usage_chunk_either_way(fast: bool, emu: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    if not fast:
        monkeypatch.setitem(_sse._parses, openai_streaming.SSEDecoder, None)
    kwargs: Any = {"model": "gpt-5-mini", "stream": True, "max_completion_tokens": 64,
                   "messages": [{"role": "user", "content": "Write a story."}]}  # fmt: skip

    async def go() -> tuple[Any, Any, lk.Recorder]:
        recorder = lk.Recorder()
        async with lk.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, recorder=recorder) as mine, \
                openai.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0) as raw:  # fmt: skip
            stream = await mine.chat.completions.create(**kwargs)
            assert isinstance(stream._decoder, FastEvents) is fast
            got = [(c.to_dict(), c.model_fields_set) async for c in stream]
            want = [(c.to_dict(), c.model_fields_set) async for c in await raw.chat.completions.create(**kwargs)]
        return got, want, recorder

    got, want, recorder = asyncio.run(go())
    assert got == want and all(c["choices"] for c, _ in got)
    rec = recorder.last
    assert rec is not None and rec.output_tokens and rec.input_tokens and rec.extra.get("usage_chunk")


def test_reads_of_the_sdk_decoders_state_go_to_it_and_a_copy_works() -> None:
    import copy

    sdk = anthropic_streaming.SSEDecoder()
    fast = FastEvents(sdk, _check(anthropic_streaming.SSEDecoder))
    sdk._last_event_id = "7"
    assert fast._last_event_id == "7" and fast.decode == sdk.decode  # what code reading the decoder sees
    twin = copy.copy(fast)
    assert twin._sdk is sdk and [e.data for e in twin.iter_bytes(iter([b"data: x\n\n"]))] == ["x"]


@pytest.mark.parametrize("make", [
    lambda: lk.Anthropic(api_key="k", base_url="http://127.0.0.1:9"),
    lambda: lk.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1"),
    lambda: lk.wrap(anthropic.AsyncAnthropic(api_key="k", base_url="http://127.0.0.1:9")),
    lambda: lk.wrap(openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")),
], ids=["Anthropic", "AsyncOpenAI", "wrap(AsyncAnthropic)", "wrap(OpenAI)"])  # fmt: skip
def test_the_decoder_is_checked_when_the_client_is_made_not_at_its_first_stream(make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check (~2 ms) runs while the client is made: the first stream's first token is not
    held behind it."""
    monkeypatch.setattr(_sse, "_parses", {})
    client = make()
    assert type(client._make_sse_decoder()) in _sse._parses and _sse._parses[type(client._make_sse_decoder())] is not None
