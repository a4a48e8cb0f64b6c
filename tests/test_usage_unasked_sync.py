"""A usage-only chunk the server sends unasked (#27 §2): the caller sees what the raw SDK gives (sync).

The recording: the Hugging Face router (Novita) answering a request without ``stream_options``
with role, text and finish chunks and then a usage-only chunk; every chunk carries its own
``sla_metrics``. latencykit learns per base URL whether a server sends that chunk unasked
(`latencykit.providers._usage_habit`). The async mirror is ``test_usage_unasked_async.py``.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator

import httpx2
import openai
import pytest

import latencykit as lk
from latencykit.providers._usage_habit import may_probe, own_network

from _invariant import wire_body
from _replay import Replay, sse_events

HF = "chat-stream-hf-router-usage-unasked.yaml"
HF_URL = "https://router.huggingface.co/novita/v3/openai"
REQ: dict[str, Any] = {
    "model": "meta-llama/llama-3.1-8b-instruct",
    "messages": [{"role": "user", "content": "Reply with exactly: Paris"}],
    "temperature": 0.0,
}
SSE = "text/event-stream"


def _honouring(body: dict[str, Any]) -> str:
    """A server that sends the usage-only chunk only when asked (OpenAI's documented behaviour)."""
    base = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    items: list[Any] = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"content": "Par"}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"content": "is"}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    if (body.get("stream_options") or {}).get("include_usage"):
        # Asked, OpenAI puts "usage":null on every other chunk (last, compact JSON) and ends with the usage-only chunk.
        items = [{**item, "usage": None} for item in items]
        items.append({**base, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}})
    return sse_events([*items, "[DONE]"])


class Server:
    """A mock transport answering every POST: the recording, or ``answer(request body)``."""

    def __init__(self, answer: Callable[[dict[str, Any]], str]) -> None:
        self.answer = answer
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content or b"{}")
        self.bodies.append(body)
        return httpx2.Response(200, headers={"content-type": SSE}, content=self.answer(body).encode())

    def client(self, base_url: str, cls: Any = openai.OpenAI, **kw: Any) -> Any:
        return cls(base_url=base_url, api_key="sk-test", max_retries=0, http_client=openai.DefaultHttpxClient(transport=httpx2.MockTransport(self)), **kw)


def _recording(body: dict[str, Any]) -> str:
    return wire_body(HF)


def _chunks(stream: Any) -> list[dict[str, Any]]:
    return [chunk.to_dict() for chunk in stream]


def _final(client: Any, **kw: Any) -> Any:
    with client.chat.completions.stream(**REQ, **kw) as stream:
        return stream.get_final_completion()


@pytest.fixture
def replay() -> Iterator[Replay]:
    """A local server answering every POST with a canned body."""
    with Replay() as server:
        yield server


@pytest.mark.parametrize("first", ["create(stream=True)", "stream()"])
def test_remote_server_sending_usage_unasked_gives_the_raw_view(first: str) -> None:
    """The recording from the HF router's URL: whichever streamed call comes first learns that the
    server sends the usage chunk unasked, and every path gives what the raw SDK gives."""
    server = Server(_recording)
    raw, client = server.client(HF_URL), server.client(HF_URL, lk.OpenAI)
    raw_chunks = _chunks(raw.chat.completions.create(stream=True, **REQ))
    raw_final = _final(raw)
    assert len(raw_chunks) == 4 and raw_final.usage is not None
    server.bodies.clear()

    if first == "stream()":
        assert _final(client).to_dict() == raw_final.to_dict()
    seen = _chunks(client.chat.completions.create(stream=True, **REQ))
    assert seen == raw_chunks  # 4 chunks, the usage-only one included
    rec = client.latency.last
    assert rec.extra["usage_chunk"] == "unasked" and rec.output_tokens == 2 and rec.chunks == 1
    assert _final(client).to_dict() == raw_final.to_dict()  # usage included, as the raw helper has it
    assert all("stream_options" not in body for body in server.bodies)  # sent as the caller wrote it

    done = client.chat.completions.create(**REQ)
    assert (done.id, done.created, done.usage, done.model_extra) == (raw_final.id, raw_final.created, raw_final.usage, raw_final.model_extra)
    assert done.model_extra is not None and done.model_extra["sla_metrics"]["ts_us"] == 1786507380308596  # the first chunk's, as the SDK keeps
    assert done.choices[0].message.content == raw_final.choices[0].message.content == "Paris"
    client.close()
    raw.close()


def _honouring_spaced(body: dict[str, Any]) -> str:
    """`_honouring` written with Python's default JSON separators (``"usage": null`` with spaces)."""
    lines = [line[len("data: "):] for line in _honouring(body).split("\n\n") if line.startswith("data: ")]
    return "".join(f"data: {json.dumps(json.loads(x)) if x != '[DONE]' else x}\n\n" for x in lines)


@pytest.mark.parametrize("answer", [_honouring, _honouring_spaced], ids=["compact", "spaced"])
def test_hidden_usage_leaves_no_null_usage_on_the_chunks(answer: Callable[[dict[str, Any]], str]) -> None:
    """On api.openai.com latencykit asks for usage and hides it: every chunk the caller gets is the
    raw SDK's for the request as written, the null usage the ask puts on each chunk taken off."""
    server = Server(answer)
    raw = server.client("https://api.openai.com/v1")
    client = server.client("https://api.openai.com/v1", lk.OpenAI)
    raw_chunks = _chunks(raw.chat.completions.create(stream=True, **REQ))
    seen = _chunks(client.chat.completions.create(stream=True, **REQ))
    assert server.bodies[-1]["stream_options"] == {"include_usage": True}
    assert '"usage": null' in answer(server.bodies[-1]) or '"usage":null' in answer(server.bodies[-1])
    assert seen == raw_chunks and all("usage" not in c for c in seen)
    rec = client.latency.last
    assert rec.extra["usage_chunk"] == "hidden" and rec.output_tokens == 2 and rec.outcome == "completed"
    asked = _chunks(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **REQ))
    assert all(c["usage"] is None for c in asked[:-1]) and asked[-1]["usage"]["completion_tokens"] == 2  # asked: as sent
    client.close()
    raw.close()


def test_remote_server_that_honours_include_usage_is_probed_once() -> None:
    """A remote server that sends usage only when asked: the first unasked stream goes as written
    (its record has no usage: the probe's price), every later one asks and hides the chunk."""
    server = Server(_honouring)
    raw, client = server.client("https://llm.example.com/v1"), server.client("https://llm.example.com/v1", lk.OpenAI)
    raw_chunks = _chunks(raw.chat.completions.create(stream=True, **REQ))
    assert _chunks(client.chat.completions.create(stream=True, **REQ)) == raw_chunks
    probe = client.latency.last
    assert probe.extra["usage_chunk"] == "not asked" and probe.output_tokens is None and probe.outcome == "completed"
    for _ in range(2):
        seen = _chunks(client.chat.completions.create(stream=True, **REQ))
        assert seen == raw_chunks and all("usage" not in c for c in seen)  # no "usage": null the caller did not ask for
        rec = client.latency.last
        assert rec.extra["usage_chunk"] == "hidden" and rec.output_tokens == 2
    assert _final(client).usage is None and _final(raw).usage is None
    asked = {"include_usage": True}
    assert [b.get("stream_options") for b in server.bodies] == [None, None, asked, asked, asked, None]  # raw, probe, 3 × latencykit, raw
    client.close()
    raw.close()


def test_openai_is_known_to_honour_include_usage() -> None:
    """api.openai.com sends the usage chunk only when asked (documented): no probe, the chunk is hidden."""
    server = Server(_honouring)
    client = server.client("https://api.openai.com/v1", lk.OpenAI)
    list(client.chat.completions.create(stream=True, **REQ))
    rec = client.latency.last
    assert rec.extra["usage_chunk"] == "hidden" and rec.output_tokens == 2
    assert server.bodies[0]["stream_options"] == {"include_usage": True}
    client.close()


def test_what_is_learned_is_shared_by_copies_and_the_recorder() -> None:
    """Learned per base URL for every client recording into one Recorder (copies included), not beyond."""
    server = Server(_recording)
    shared = lk.Recorder()
    client = server.client(HF_URL, lk.OpenAI, recorder=shared)
    list(client.chat.completions.create(stream=True, **REQ))
    for other in (client.with_options(timeout=5.0), server.client(HF_URL, lk.OpenAI, recorder=shared)):
        list(other.chat.completions.create(stream=True, **REQ))
        assert other.latency.last.extra["usage_chunk"] == "unasked"
    server.bodies.clear()
    stranger = server.client(HF_URL + "/", lk.OpenAI)  # another Recorder: learns for itself
    list(stranger.chat.completions.create(stream=True, **REQ))
    assert stranger.latency.last.extra["usage_chunk"] == "unasked"
    client.close()
    stranger.close()


def test_own_server_is_not_probed_unasked_but_the_record_says_so(replay: Replay) -> None:
    """On the caller's own machine the chunk is hidden (no record loses its usage to a probe), and
    the record says the view may differ; one call with include_usage False teaches latencykit."""
    replay.serve(wire_body(HF))
    raw = openai.OpenAI(base_url=replay.base_url + "/v1", api_key="sk-test", max_retries=0)
    client = lk.OpenAI(base_url=replay.base_url + "/v1", api_key="sk-test", max_retries=0)
    raw_chunks = _chunks(raw.chat.completions.create(stream=True, **REQ))
    seen = _chunks(client.chat.completions.create(stream=True, **REQ))
    assert seen == raw_chunks[:-1] and client.latency.last.extra["usage_chunk"] == "hidden, unverified"
    assert client.latency.last.output_tokens == 2

    told = _chunks(client.chat.completions.create(stream=True, stream_options={"include_usage": False}, **REQ))
    assert told == _chunks(raw.chat.completions.create(stream=True, stream_options={"include_usage": False}, **REQ))
    assert replay.requests[-1]["stream_options"] == {"include_usage": False}
    assert _chunks(client.chat.completions.create(stream=True, **REQ)) == raw_chunks
    assert client.latency.last.extra["usage_chunk"] == "unasked"
    assert _final(client).to_dict() == _final(raw).to_dict()
    client.close()
    raw.close()


def test_caller_asking_and_plain_create_are_not_probes() -> None:
    """A caller who asks gets the chunk; create() needs the usage for its result: neither goes unasked."""
    server = Server(_honouring)
    client = server.client("https://llm.example.com/v1", lk.OpenAI)
    chunks = _chunks(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **REQ))
    assert chunks[-1]["choices"] == [] and "usage_chunk" not in client.latency.last.extra
    done = client.chat.completions.create(**REQ)
    assert done.usage is not None and done.usage.completion_tokens == 2
    assert [b["stream_options"] for b in server.bodies] == [{"include_usage": True}] * 2
    client.close()


def test_abandoned_probe_teaches_nothing() -> None:
    """A probe the caller leaves before the end says nothing; until it expires the chunk is hidden, unverified."""
    server = Server(_recording)
    client = server.client(HF_URL, lk.OpenAI)
    stream = client.chat.completions.create(stream=True, **REQ)
    next(iter(stream))
    stream.close()
    assert client.latency.last.extra["usage_chunk"] == "not asked"
    list(client.chat.completions.create(stream=True, **REQ))
    assert client.latency.last.extra["usage_chunk"] == "hidden, unverified"
    client.close()


@pytest.mark.parametrize(
    ("host", "own"),
    [("localhost", True), ("127.0.0.1", True), ("::1", True), ("10.0.3.7", True), ("192.168.1.20", True), ("vllm", True),
     ("api.example.com", False), ("router.huggingface.co", False), ("8.8.8.8", False)],
)  # fmt: skip
def test_own_network_is_never_probed_unasked(host: str, own: bool) -> None:
    """Hosts on the caller's machine or network are probed only when the caller says include_usage False."""
    assert own_network(host) is own
    assert may_probe(host, {}) is not own and may_probe(host, {"include_usage": False})
    assert not may_probe(host, {"continuous_usage_stats": True})


def test_an_event_without_instance_state_passes_unchanged() -> None:
    """An SSE event of another make (no ``__dict__``) keeps its null usage and still streams."""
    from latencykit.core._record import CallRecord
    from latencykit.core._timing import CallTimer
    from latencykit.providers._openai_chat import ChatTap, _swallow

    class Slotted:
        __slots__ = ("data", "event")

        def __init__(self, data: str) -> None:
            self.data, self.event = data, None

    timer = CallTimer(CallRecord(provider="openai", operation="chat", request_model="m"), clock=lambda: 0.0, sink=lambda r: None)
    chunk = '{"id":"c1","choices":[{"index":0,"delta":{"content":"a"}}],"usage":null}'
    out = [e.data for e in _swallow(iter([Slotted(chunk), Slotted("[DONE]")]), ChatTap(timer, hide_usage=True))]
    assert out == [chunk, "[DONE]"] and timer.saw_terminal
