"""Retries, deadlines and broken streams (issue 5, items 1–4), sync clients against the emulator.

Every fault is injected by ``x-emulator-*`` headers with a fresh fault id, so
``fault_times=1`` fails exactly the first attempt of this call and the retry succeeds.
Mirrored by test_retries_async.py.
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any, Callable, Iterator

import anthropic
import httpx2
import openai
import pytest

import latencykit as lk
from latencykit.emulator import Emulator

from _retry_forms import (
    CREATE_FORMS, FORMS, INVALID, INVALID_POLICIES, ODD, PATHS, PRE_CONTENT_FAULTS, REQUESTS, SDK, STREAM_FORMS,
    Seen, fault_id, policy, provider, reason, run, strip_cache_control, truncations,
)  # fmt: skip
from conftest import ANT_REQ, CHAT_REQ, WEATHER_TOOL_ANT, WEATHER_TOOL_OAI, WEATHER_TOOL_RESP, headers

_TOOLS = {"messages": WEATHER_TOOL_ANT, "chat": WEATHER_TOOL_OAI, "responses": WEATHER_TOOL_RESP}


Make = Callable[..., Any]


@pytest.fixture
def make(emu: Emulator, recorder: lk.Recorder) -> Iterator[Make]:
    """Build latencykit clients for a provider (fast retry policy by default); closed afterwards."""
    made: list[Any] = []

    def build(prov: str, retry: Any = None, **kw: Any) -> Any:
        retry = policy() if retry is None else retry
        if prov == "anthropic":
            client: Any = lk.Anthropic(base_url=emu.base_url, api_key="sk-ant-test", recorder=recorder, retry=retry, **kw)
        else:
            client = lk.OpenAI(base_url=emu.base_url + "/v1", api_key="sk-test", recorder=recorder, retry=retry, **kw)
        made.append(client)
        return client

    yield build
    for client in made:
        client.close()


@pytest.fixture(scope="module")
def clean(emu: Emulator) -> dict[str, Seen]:
    """What a fault-free call returns, per API (the emulator is deterministic per request)."""
    out: dict[str, Seen] = {}
    ant = lk.Anthropic(base_url=emu.base_url, api_key="sk-ant-test")
    oai = lk.OpenAI(base_url=emu.base_url + "/v1", api_key="sk-test")
    try:
        for api, client in (("messages", ant), ("chat", oai), ("responses", oai)):
            out[api] = run(client, f"{api}-create", Seen(api), {})
    finally:
        ant.close()
        oai.close()
    return out


class Requests:
    """Counts the requests the emulator received since construction."""

    def __init__(self, emu: Emulator) -> None:
        self.emu = emu
        self.start = emu.stats.requests_total

    @property
    def count(self) -> int:
        return self.emu.stats.requests_total - self.start


# -- item 1: failures before content are retried -------------------------------------------------


@pytest.mark.parametrize("fault", sorted(PRE_CONTENT_FAULTS))
@pytest.mark.parametrize("form", FORMS)
def test_pre_content_failure_is_retried(make: Make, emu: Emulator, clean: dict[str, Seen], form: str, fault: str) -> None:
    """A failure before the first token is retried once and the caller sees one clean answer."""
    api = form.split("-")[0]
    client = make(provider(form))
    sent = Requests(emu)
    seen = run(client, form, Seen(api), headers(fault_times=1, fault_id=fault_id(), **PRE_CONTENT_FAULTS[fault][0]))
    assert seen.joined == clean[api].joined and seen.joined
    assert seen.starts == 1  # no second message_start / role chunk / response.created
    rec = client.latency.last
    assert (rec.attempts, rec.retry_reasons, rec.outcome) == (2, (reason(fault, api),), "completed")
    assert sent.count == 2 and client.latency.total_calls == 1


def test_retry_after_is_honoured(make: Make, emu: Emulator) -> None:
    """A 429 with ``retry-after: 1`` waits about a second before the retry."""
    client = make("anthropic")
    start = time.perf_counter()
    client.messages.create(extra_headers=headers(status=429, retry_after=1, fault_times=1, fault_id=fault_id()), **ANT_REQ)
    assert time.perf_counter() - start >= 0.9
    assert client.latency.last.attempts == 2


@pytest.mark.parametrize("form", FORMS)
def test_bad_request_is_not_retried(make: Make, emu: Emulator, form: str) -> None:
    """A 400 is raised on the first attempt as the SDK's own BadRequestError."""
    client = make(provider(form))
    sent = Requests(emu)
    with pytest.raises(SDK[provider(form)].BadRequestError) as info:
        run(client, form, Seen(form.split("-")[0]), headers(status=400))
    assert type(info.value) is SDK[provider(form)].BadRequestError
    assert not isinstance(info.value, lk.StreamInterruptedError)
    rec = client.latency.last
    assert (rec.attempts, rec.retry_reasons, rec.outcome, rec.error_type) == (1, (), "error", "BadRequestError")
    assert sent.count == 1


@pytest.mark.parametrize("form", FORMS)
def test_max_attempts_is_respected(make: Make, emu: Emulator, form: str) -> None:
    """A fault outlasting ``max_attempts`` surfaces the SDK's error after exactly that many requests."""
    client = make(provider(form), retry=policy(max_attempts=3))
    sent = Requests(emu)
    with pytest.raises(SDK[provider(form)].InternalServerError) as info:
        run(client, form, Seen(form.split("-")[0]), headers(status=529, fault_times=5, fault_id=fault_id()))
    assert info.value.status_code == 529
    rec = client.latency.last
    assert (rec.attempts, rec.retry_reasons, rec.outcome) == (3, ("overloaded", "overloaded"), "error")
    assert sent.count == 3 and client.latency.total_calls == 1


@pytest.mark.parametrize("form", FORMS)
def test_exhausted_drop_before_content_is_the_sdk_connection_error(make: Make, emu: Emulator, form: str) -> None:
    """A drop before content on every attempt raises the SDK's APIConnectionError, never a bare transport error."""
    client = make(provider(form))
    sent = Requests(emu)
    with pytest.raises(SDK[provider(form)].APIConnectionError) as info:
        run(client, form, Seen(form.split("-")[0]), headers(drop_after_chunks=0))
    assert not isinstance(info.value, lk.StreamInterruptedError)
    rec = client.latency.last
    assert (rec.attempts, rec.retry_reasons, rec.outcome) == (3, ("connection", "connection"), "error")
    assert sent.count == 3


@pytest.mark.parametrize("how", ["client", "wrap"])
@pytest.mark.parametrize("form", ["messages-create", "messages-stream", "chat-create", "responses-helper"])
def test_sdk_retries_do_not_multiply(emu: Emulator, form: str, how: str) -> None:
    """With ``max_retries=2`` on the client, an always-529 call makes exactly 3 requests, not 3 × 3."""
    prov = provider(form)
    retry = lk.RetryPolicy(initial_backoff=0.01, max_backoff=0.05)  # attempts from max_retries
    if prov == "anthropic":
        raw: Any = anthropic.Anthropic(base_url=emu.base_url, api_key="sk-ant-test", max_retries=2)
    else:
        raw = openai.OpenAI(base_url=emu.base_url + "/v1", api_key="sk-test", max_retries=2)
    if how == "wrap":
        client = lk.wrap(raw, retry=retry)
    else:
        cls: Any = lk.Anthropic if prov == "anthropic" else lk.OpenAI
        client = cls(base_url=raw.base_url, api_key=raw.api_key, max_retries=2, retry=retry)
    sent = Requests(emu)
    try:
        with pytest.raises(SDK[prov].InternalServerError):
            run(client, form, Seen(form.split("-")[0]), headers(status=529))
        assert sent.count == 3
        assert client.latency.last.attempts == 3
        assert client.max_retries == 2  # the caller's client is untouched
    finally:
        client.close()
        raw.close()


@pytest.mark.parametrize("prov", ["anthropic", "openai"])
def test_retry_false_leaves_retries_to_the_sdk(make: Make, emu: Emulator, prov: str) -> None:
    """``retry=False``: the SDK's own retries run (max_retries=1 → 2 requests), one record."""
    client = make(prov, retry=False, max_retries=1)
    form = "messages-create" if prov == "anthropic" else "chat-create"
    sent = Requests(emu)
    with pytest.raises(SDK[prov].InternalServerError):
        run(client, form, Seen(form.split("-")[0]), headers(status=503))
    assert sent.count == 2
    assert client.latency.total_calls == 1 and client.latency.last.attempts == 1


@pytest.mark.parametrize("form", ["messages-create", "chat-stream", "responses-helper"])
def test_deadline_stops_retrying(make: Make, emu: Emulator, form: str) -> None:
    """No retry starts past ``deadline``, however many attempts remain."""
    client = make(provider(form), retry=policy(max_attempts=10, deadline=0.5))
    sent = Requests(emu)
    start = time.perf_counter()
    with pytest.raises(SDK[provider(form)].RateLimitError):
        run(client, form, Seen(form.split("-")[0]), headers(status=429, retry_after=0.3))
    assert time.perf_counter() - start < 1.0
    assert 2 <= sent.count <= 3 and client.latency.last.attempts == sent.count


# -- item 2: failures after content ------------------------------------------------------------


def _mid_stream_error(prov: str, fault: str) -> type:
    if fault == "drop":
        return SDK[prov].APIConnectionError  # type: ignore[no-any-return]
    return anthropic.APIStatusError if prov == "anthropic" else openai.APIError


@pytest.mark.parametrize("fault", ["drop", "error"])
@pytest.mark.parametrize("form", STREAM_FORMS)
def test_never_retried_after_content_reached_the_caller(
    make: Make, emu: Emulator, clean: dict[str, Seen], form: str, fault: str
) -> None:
    """A caller stream failing after 3 chunks is not retried; the error carries exactly what was shown."""
    api, prov = form.split("-")[0], provider(form)
    client = make(prov)
    sent = Requests(emu)
    seen = Seen(api)
    with pytest.raises(lk.StreamInterruptedError) as info:
        run(client, form, seen, headers(fault_times=1, fault_id=fault_id(), **{f"{fault}_after_chunks": 3}))
    err = info.value
    assert isinstance(err, _mid_stream_error(prov, fault))
    assert seen.joined and err.partial.text == seen.joined
    assert clean[api].joined.startswith(seen.joined) and seen.joined != clean[api].joined
    assert err.partial.events > 0
    rec = client.latency.last
    assert (rec.attempts, rec.retry_reasons, rec.outcome) == (1, (), "interrupted")
    assert sent.count == 1 and client.latency.total_calls == 1


@pytest.mark.parametrize("form", ["messages-stream", "chat-stream", "responses-helper"])
def test_interrupted_tool_call_keeps_its_arguments_so_far(make: Make, form: str) -> None:
    """A drop in the middle of tool arguments keeps the argument text that had arrived."""
    api = form.split("-")[0]
    client = make(provider(form))
    with pytest.raises(lk.StreamInterruptedError) as info:
        # Anthropic's tool call comes after 3 text chunks; drop inside the arguments.
        run(client, form, Seen(api), headers(tool_call=1, drop_after_chunks=5 if api == "messages" else 2), tools=[_TOOLS[api]])
    partial = info.value.partial
    assert len(partial.tool_inputs) == 1
    (args,) = partial.tool_inputs.values()
    assert args and isinstance(args, str)
    if form.startswith("messages"):
        assert partial.usage is not None  # message_start carries usage


@pytest.mark.parametrize("fault", ["drop", "error"])
@pytest.mark.parametrize("form", CREATE_FORMS)
def test_non_streaming_call_is_retried_after_content(
    make: Make, emu: Emulator, clean: dict[str, Seen], form: str, fault: str
) -> None:
    """The caller saw nothing yet, so a failure after content is retried; the result equals a clean one."""
    api = form.split("-")[0]
    client = make(provider(form))
    sent = Requests(emu)
    seen = run(client, form, Seen(api), headers(fault_times=1, fault_id=fault_id(), **{f"{fault}_after_chunks": 3}))
    assert seen.result == clean[api].result
    rec = client.latency.last
    assert (rec.attempts, rec.outcome) == (2, "completed") and len(rec.retry_reasons) == 1
    assert sent.count == 2


@pytest.mark.parametrize("fault", ["drop", "error"])
@pytest.mark.parametrize("form", CREATE_FORMS)
def test_non_streaming_without_retry_interrupted_raises_with_partial(
    make: Make, emu: Emulator, clean: dict[str, Seen], form: str, fault: str
) -> None:
    """``retry_interrupted=False``: the failure after content raises, carrying the partial output."""
    api, prov = form.split("-")[0], provider(form)
    client = make(prov, retry=policy(retry_interrupted=False))
    sent = Requests(emu)
    with pytest.raises(lk.StreamInterruptedError) as info:
        run(client, form, Seen(api), headers(**{f"{fault}_after_chunks": 3}))
    err = info.value
    assert isinstance(err, _mid_stream_error(prov, fault))
    assert err.partial.text and clean[api].joined.startswith(err.partial.text)
    rec = client.latency.last
    assert (rec.attempts, rec.outcome) == (1, "interrupted") and sent.count == 1


# -- a stream that ends cleanly without its terminal event --------------------------------------

@pytest.fixture(scope="module")
def truncated_bodies(emu: Emulator) -> dict[tuple[str, str], bytes]:
    """Real SSE bodies from the emulator, cut before the terminal event ("after") or the first token ("before")."""
    out: dict[tuple[str, str], bytes] = {}
    with httpx2.Client() as http:
        for api, path in PATHS.items():
            body = http.post(emu.base_url + path, json={**REQUESTS[api], "stream": True}).content
            out[(api, "after")], out[(api, "before")] = truncations(api, body)
    return out


def _mock_client(prov: str, body: bytes, hits: list[int], retry: Any) -> Any:
    def handler(request: httpx2.Request) -> httpx2.Response:
        hits.append(1)
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    http = SDK[prov].DefaultHttpxClient(transport=httpx2.MockTransport(handler))
    if prov == "anthropic":
        return lk.Anthropic(base_url="http://mock", api_key="sk-ant-test", http_client=http, retry=retry)
    return lk.OpenAI(base_url="http://mock/v1", api_key="sk-test", http_client=http, retry=retry)


@pytest.mark.parametrize("form", FORMS)
def test_stream_without_terminal_event_after_content_raises(
    truncated_bodies: dict[tuple[str, str], bytes], clean: dict[str, Seen], form: str
) -> None:
    """A clean close before ``message_stop`` / ``[DONE]`` / ``response.completed`` is a drop, not an answer."""
    api, prov = form.split("-")[0], provider(form)
    hits: list[int] = []
    client = _mock_client(prov, truncated_bodies[(api, "after")], hits, policy())
    seen = Seen(api)
    try:
        with pytest.raises(lk.StreamInterruptedError) as info:
            run(client, form, seen, {})
    finally:
        client.close()
    assert isinstance(info.value, SDK[prov].APIConnectionError)
    assert info.value.partial.text == clean[api].joined
    if form.endswith("-create"):
        assert len(hits) == 3  # nothing was shown: retried, every attempt truncated
    else:
        assert len(hits) == 1 and seen.joined == clean[api].joined
    assert client.latency.last.outcome == "interrupted"


@pytest.mark.parametrize("form", FORMS)
def test_stream_without_terminal_event_before_content_raises_the_sdk_error(
    truncated_bodies: dict[tuple[str, str], bytes], form: str
) -> None:
    """A clean close before any token is retried, then raised as the SDK's APIConnectionError."""
    api, prov = form.split("-")[0], provider(form)
    hits: list[int] = []
    client = _mock_client(prov, truncated_bodies[(api, "before")], hits, policy())
    try:
        with pytest.raises(SDK[prov].APIConnectionError) as info:
            run(client, form, Seen(api), {})
    finally:
        client.close()
    assert not isinstance(info.value, lk.StreamInterruptedError)
    assert len(hits) == 3
    rec = client.latency.last
    assert (rec.attempts, rec.outcome) == (3, "error")


# -- item 3: TTFT deadline ---------------------------------------------------------------------


@pytest.mark.parametrize("form", FORMS)
def test_ttft_deadline_hedges_a_stall(make: Make, emu: Emulator, clean: dict[str, Seen], form: str) -> None:
    """No first token within 0.3 s: the attempt is cancelled and retried; the call ends long before the 3 s stall."""
    api = form.split("-")[0]
    client = make(provider(form), retry=policy(ttft_deadline=0.3))
    sent = Requests(emu)
    start = time.perf_counter()
    seen = run(client, form, Seen(api), headers(stall_ms=3000, fault_times=1, fault_id=fault_id()))
    assert time.perf_counter() - start < 1.5
    assert seen.joined == clean[api].joined and seen.starts == 1
    rec = client.latency.last
    assert (rec.attempts, rec.ttft_deadline_hits, rec.retry_reasons, rec.outcome) == (2, 1, ("ttft_deadline",), "completed")
    assert sent.count == 2


@pytest.mark.parametrize("form", ["messages-create", "messages-stream", "chat-helper", "responses-create", "responses-stream"])
def test_ttft_deadline_hedges_once(make: Make, emu: Emulator, clean: dict[str, Seen], form: str) -> None:
    """The hedge fires once: a second slow attempt is waited out, not cancelled and not retried again."""
    api = form.split("-")[0]
    client = make(provider(form), retry=policy(ttft_deadline=0.3, max_attempts=5))
    sent = Requests(emu)
    start = time.perf_counter()
    seen = run(client, form, Seen(api), headers(stall_ms=1000, fault_times=2, fault_id=fault_id()))
    assert time.perf_counter() - start >= 1.0
    assert seen.joined == clean[api].joined
    rec = client.latency.last
    assert (rec.attempts, rec.ttft_deadline_hits, rec.outcome) == (2, 1, "completed")
    assert sent.count == 2


@pytest.mark.parametrize("form", ["messages-create", "chat-stream", "responses-helper"])
def test_ttft_deadline_without_a_retry_left_raises_the_sdk_error(make: Make, emu: Emulator, form: str) -> None:
    """With one attempt the cancelled stall surfaces as the SDK's APIConnectionError, quickly."""
    client = make(provider(form), retry=policy(ttft_deadline=0.3, max_attempts=1))
    start = time.perf_counter()
    with pytest.raises(SDK[provider(form)].APIConnectionError):
        run(client, form, Seen(form.split("-")[0]), headers(stall_ms=3000))
    assert time.perf_counter() - start < 1.5
    rec = client.latency.last
    assert (rec.attempts, rec.ttft_deadline_hits, rec.outcome) == (1, 1, "error")


# -- item 4: bad input -------------------------------------------------------------------------


def test_sdk_argument_errors_reach_the_caller_unchanged(make: Make, emu: Emulator) -> None:
    """The SDKs' own TypeErrors for missing arguments come through unchanged, and nothing is sent."""
    ant, oai = make("anthropic"), make("openai")
    raw_ant = anthropic.Anthropic(base_url=emu.base_url, api_key="sk-ant-test")
    raw_oai = openai.OpenAI(base_url=emu.base_url + "/v1", api_key="sk-test")
    no_max_tokens = {k: v for k, v in ANT_REQ.items() if k != "max_tokens"}
    no_messages = {k: v for k, v in CHAT_REQ.items() if k != "messages"}
    sent = Requests(emu)
    try:
        for lk_call, raw_call in (
            (lambda: ant.messages.create(**no_max_tokens), lambda: raw_ant.messages.create(**no_max_tokens)),
            (lambda: ant.messages.stream(**no_max_tokens).__enter__(), lambda: raw_ant.messages.stream(**no_max_tokens).__enter__()),
            (lambda: oai.chat.completions.create(**no_messages), lambda: raw_oai.chat.completions.create(**no_messages)),
        ):
            with pytest.raises(TypeError) as ours:
                lk_call()
            with pytest.raises(TypeError) as theirs:
                raw_call()
            assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)
    finally:
        raw_ant.close()
        raw_oai.close()
    assert sent.count == 0


@pytest.mark.parametrize("mode", ["create", "stream"])
@pytest.mark.parametrize("api", sorted(INVALID))
def test_server_validation_error_reaches_the_caller_unchanged(make: Make, emu: Emulator, api: str, mode: str) -> None:
    """A request the server rejects raises the SDK's BadRequestError with the server's body, once."""
    prov = provider(api)
    client = make(prov)
    sent = Requests(emu)
    with pytest.raises(SDK[prov].BadRequestError) as info:
        run(client, f"{api}-{mode}", Seen(api), {}, **INVALID[api])
    assert type(info.value) is SDK[prov].BadRequestError and info.value.status_code == 400
    assert "'many'" in str(info.value.body)
    assert sent.count == 1 and client.latency.last.attempts == 1


@pytest.mark.parametrize(("api", "name", "odd"), ODD, ids=[f"{a}-{n}" for a, n, _ in ODD])
def test_planner_never_raises_on_odd_shapes(
    make: Make, emu: Emulator, caplog: pytest.LogCaptureFixture, api: str, name: str, odd: dict[str, Any]
) -> None:
    """Odd request shapes go to the server as given (cache markers aside); only the server may object."""
    prov = provider(api)
    client = make(prov)
    sent = Requests(emu)
    caplog.set_level(logging.DEBUG, logger="latencykit")
    try:
        run(client, f"{api}-create", Seen(api), {}, **odd)
    except SDK[prov].APIStatusError as exc:
        assert exc.status_code == 400  # the emulator's own validation, not latencykit
    assert sent.count == 1
    body = emu.requests[-1].body
    for key, value in odd.items():
        assert strip_cache_control(body[key]) == json.loads(json.dumps(value))
    assert not [r for r in caplog.records if r.name.startswith("latencykit") and r.levelno >= logging.WARNING]


@pytest.mark.parametrize(("kwargs", "bad"), INVALID_POLICIES)
def test_invalid_retry_policy_names_the_value(kwargs: dict[str, Any], bad: str) -> None:
    """A bad RetryPolicy field raises ValueError naming the field and the value."""
    with pytest.raises(ValueError) as info:
        lk.RetryPolicy(**kwargs)
    (field,) = kwargs
    assert field in str(info.value) and bad in str(info.value)


@pytest.mark.parametrize("bad", ["yes", 3, {"max_attempts": 2}])
def test_invalid_retry_option_names_the_value(emu: Emulator, bad: Any) -> None:
    """``retry=`` accepts a RetryPolicy, True/None or False; anything else is a ValueError naming it."""
    for build in (
        lambda: lk.Anthropic(base_url=emu.base_url, api_key="sk-ant-test", retry=bad),
        lambda: lk.OpenAI(base_url=emu.base_url, api_key="sk-test", retry=bad),
        lambda: lk.wrap(anthropic.Anthropic(base_url=emu.base_url, api_key="sk-ant-test"), retry=bad),
        lambda: lk.wrap(openai.OpenAI(base_url=emu.base_url, api_key="sk-test"), retry=bad),
    ):
        with pytest.raises(ValueError, match=re.escape(repr(bad))):
            build()


@pytest.mark.parametrize("api", ["messages", "chat", "responses"])
def test_next_on_a_stream_without_terminal_event_raises(truncated_bodies: dict[tuple[str, str], bytes], api: str) -> None:
    """Driving a truncated stream with next() raises at its end too, as iterating it does."""
    prov = "anthropic" if api == "messages" else "openai"
    client = _mock_client(prov, truncated_bodies[(api, "after")], [], policy())
    try:
        if api == "messages":
            stream = client.messages.create(stream=True, **REQUESTS[api])
        elif api == "chat":
            stream = client.chat.completions.create(stream=True, **REQUESTS[api])
        else:
            stream = client.responses.create(stream=True, **REQUESTS[api])
        with pytest.raises(lk.StreamInterruptedError):
            while True:
                next(stream)
    finally:
        client.close()
    assert client.latency.last is not None and client.latency.last.outcome == "interrupted"
