"""The three ways a request is sent, all timed from just before the client is called:

- ``latencykit``: the app's real path, ``lk.AsyncOpenAI`` / ``lk.AsyncAnthropic``; every
  figure comes from the call's own `CallRecord` (caught through a Recorder that notes which
  task the record belongs to). ``call=stream`` iterates ``create(stream=True)``; ``call=create``
  awaits the non-streaming ``create()`` (which latencykit streams and reassembles).
- ``sdk``: the plain ``openai`` / ``anthropic`` async client, timed here. Non-streaming
  ``create()`` gives the caller nothing before the whole answer, so its TTFT is its E2E.
- ``thin``: a thin aiohttp reader that timestamps SSE lines and parses almost nothing: the
  control that shows what the client itself costs.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import time
from typing import Any, Optional, Protocol, Sequence

from ..core._record import CallRecord
from ..telemetry._recorder import Recorder
from ._targets import Observed, TargetSpec, anthropic_body, emulator_headers, openai_body
from ._answers import anthropic_piece as _anthropic_piece
from ._answers import openai_piece as _openai_piece
from ._answers import response_text as _response_text
from ._answers import thin_piece as _thin_piece
from ._answers import wants_text as _wants_text
from ._traffic import TrafficRequest

__all__ = ["CLIENTS", "Sender", "make_sender"]

CLIENTS = ("latencykit", "sdk", "thin")
CALLS = ("stream", "create")

_clock = time.perf_counter


class _Slot:
    __slots__ = ("rec", "gaps")

    def __init__(self) -> None:
        self.rec: Optional[CallRecord] = None
        self.gaps: list[float] = []


_current: contextvars.ContextVar[Optional[_Slot]] = contextvars.ContextVar("latencykit_bench_slot", default=None)


class _CaptureRecorder(Recorder):
    """Hands each finished record to the bench task that made the call (the sink runs in that task)."""

    def record(self, rec: CallRecord, gaps: Sequence[float] = ()) -> None:
        slot = _current.get()
        if slot is not None:
            slot.rec = rec
            slot.gaps = list(gaps)
        super().record(rec, gaps)


class Sender(Protocol):
    """Sends one request and reports what the client saw."""

    async def send(self, req: TrafficRequest) -> Observed: ...

    async def aclose(self) -> None: ...


def _token_gaps(marks: list[tuple[float, Optional[int]]]) -> list[float]:
    """Per-token ITL: each gap between token chunks divided by the later chunk's token count, k times."""
    out: list[float] = []
    for (t_prev, c_prev), (t, c) in zip(marks, marks[1:]):
        if c is None or c_prev is None:
            return []
        k = c - c_prev
        if k >= 1:
            out.extend([(t - t_prev) / k] * k)
    return out


def _openai_token(chunk: Any) -> bool:
    if not chunk.choices:
        return False
    d = chunk.choices[0].delta
    return bool(d.content or d.tool_calls or getattr(d, "reasoning_content", None) or getattr(d, "reasoning", None))


def _openai_answer(chunk: Any) -> bool:
    """Whether a chunk carries a token of the answer (text or tool arguments, not reasoning)."""
    d = chunk.choices[0].delta
    return bool(d.content or d.tool_calls)


def _stream_options(target: TargetSpec) -> dict[str, Any]:
    return {"include_usage": True, **({"continuous_usage_stats": True} if target.per_chunk_usage else {})}


def _error(obs: Observed, exc: BaseException) -> Observed:
    status = getattr(exc, "status_code", None)
    obs.outcome = "error" if obs.ttft is None else "interrupted"
    obs.error = type(exc).__name__ + (f" {status}" if status else "")
    return obs


_KEYLIKE = re.compile(r"\b(?:sk|pk|rk|key|api[-_]?key)[-_][A-Za-z0-9_*.-]{6,}|\bBearer\s+\S+", re.IGNORECASE)
_ECHO = 24
"""A run of this many characters shared with the request's own text is prompt text echoed back."""


def describe_error(exc: BaseException, api_key: str = "", texts: Sequence[str] = (), url: str = "") -> str:
    """One line: ``Type: message`` and up to two causes, at most 300 characters, with the API key,
    key-like tokens and any echo of ``texts`` (the request's prompt) removed. Where the connection to
    ``url`` failed (refused, no such host, timed out), ``Type: `` and what it met, in words, naming the
    host and port ("All connection attempts failed" says neither)."""
    if url:
        from .._net_words import connection_words

        words = connection_words(exc, url)
        if words is not None:
            return scrub(f"{type(exc).__name__}: {words}", api_key, texts)
    parts: list[str] = []
    e: Optional[BaseException] = exc
    while e is not None and len(parts) < 3:
        text = " ".join(str(e).split())
        part = f"{type(e).__name__}: {text}" if text else type(e).__name__
        if part not in parts:
            parts.append(part)
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    return scrub("; caused by ".join(parts), api_key, texts)


def scrub(line: str, api_key: str = "", texts: Sequence[str] = ()) -> str:
    """``line`` without the API key, key-like tokens or prompt text, cut to 300 characters."""
    if len(api_key) >= 8:
        line = line.replace(api_key, "***")
    line = _KEYLIKE.sub("***", line)[:300]
    long = [t for t in texts if len(t) >= _ECHO]
    out, i = [], 0
    while i < len(line):
        j = i + _ECHO
        if j <= len(line) and any(line[i:j] in t for t in long):
            while j < len(line) and any(line[i : j + 1] in t for t in long):
                j += 1
            out.append("[prompt text]")
            i = j
        else:
            out.append(line[i])
            i += 1
    return "".join(out)


def _texts(req: TrafficRequest) -> list[str]:
    """The request's own text (system, message contents), which an error message must not echo."""
    return [req.system, *(m["content"] for m in req.messages if isinstance(m.get("content"), str))]


class _FirstErrors:
    """Describes the first error of each kind a sender meets (one description per kind, not per request);
    ``url``: where the requests go, named when a connection to it fails."""

    def __init__(self, api_key: str, url: str = "") -> None:
        self.api_key = api_key
        self.url = url
        self.seen: set[str] = set()

    def note(self, obs: Observed, req: TrafficRequest, exc: Optional[BaseException], message: str = "") -> None:
        if obs.outcome == "completed" or obs.error in self.seen:
            return
        self.seen.add(obs.error or "")
        texts = _texts(req)
        obs.error_message = describe_error(exc, self.api_key, texts, self.url) if exc is not None else scrub(message, self.api_key, texts)


def _http_client(target: TargetSpec, http: str) -> dict[str, Any]:
    """``http_client=`` for the SDK client: none (the SDK's httpx default) or its aiohttp one."""
    if http == "httpx":
        return {}
    import anthropic
    import openai

    sdk: Any = openai if target.api == "openai" else anthropic
    return {"http_client": sdk.DefaultAioHttpClient()}


class _LatencykitSender:
    def __init__(self, target: TargetSpec, call: str, cache: str, retry: bool, http: str = "httpx") -> None:
        from ..providers.anthropic import AsyncAnthropic
        from ..providers.openai import AsyncOpenAI

        self.target, self.call = target, call
        kw: dict[str, Any] = {"api_key": target.api_key, "recorder": _CaptureRecorder(max_calls=1),
                              "telemetry": False, "cache": cache, "retry": retry, **_http_client(target, http)}  # fmt: skip
        if target.base_url:
            kw["base_url"] = target.base_url
        self.client: Any = AsyncOpenAI(**kw) if target.api == "openai" else AsyncAnthropic(**kw)
        self.errors = _FirstErrors(target.api_key, str(self.client.base_url))

    async def send(self, req: TrafficRequest) -> Observed:
        t = self.target
        body = openai_body(req, t) if t.api == "openai" else anthropic_body(req, t)
        headers = emulator_headers(req, t)
        slot = _Slot()
        token = _current.set(slot)
        marks: list[tuple[float, Optional[int]]] = []
        exc: Optional[BaseException] = None
        keep = _wants_text(req)
        pieces: list[str] = []
        try:
            if t.api == "openai":
                create = self.client.chat.completions.create
                if self.call == "create":
                    resp = await create(**body, extra_headers=headers)
                    if keep:
                        pieces.append(_response_text(resp, "openai"))
                else:
                    stream = await create(**body, stream=True, stream_options=_stream_options(t), extra_headers=headers)
                    used: Optional[int] = None
                    async for chunk in stream:
                        if chunk.usage is not None:
                            used = chunk.usage.completion_tokens
                        if _openai_token(chunk):
                            marks.append((_clock(), used if t.per_chunk_usage else None))
                            if keep:
                                pieces.append(_openai_piece(chunk))
            else:
                create = self.client.messages.create
                if self.call == "create":
                    resp = await create(**body, extra_headers=headers)
                    if keep:
                        pieces.append(_response_text(resp, "anthropic"))
                else:
                    stream = await create(**body, stream=True, extra_headers=headers)
                    async for event in stream:
                        if keep:
                            pieces.append(_anthropic_piece(event))
        except Exception as e:  # an API or connection error: recorded, never raised
            exc = e
        finally:
            _current.reset(token)
        rec = slot.rec
        obs = Observed(chunk_gaps=slot.gaps, token_gaps=_token_gaps(marks))
        if rec is not None:
            obs.ttft, obs.ttfb, obs.tpot, obs.e2e, obs.ttfo = rec.ttft, rec.ttfb, rec.tpot, rec.e2e, rec.ttfo
            obs.input_tokens, obs.output_tokens = rec.input_tokens, rec.output_tokens
            obs.reasoning_tokens = rec.reasoning_tokens
            obs.cache_read, obs.cache_write = rec.cache_read_tokens, rec.cache_write_tokens
            obs.cache_verdict, obs.cache_miss_reason = rec.cache_verdict, rec.cache_miss_reason
            obs.outcome, obs.error, obs.attempts = rec.outcome, rec.error_type, rec.attempts
        if exc is not None and (rec is None or obs.outcome == "completed"):
            _error(obs, exc)
        self.errors.note(obs, req, exc)
        if keep:
            obs.text = "".join(pieces)
        return obs

    async def prewarm(self, requests: Sequence[TrafficRequest]) -> None:
        """``client.latency.prewarm`` once per distinct system prompt (at most 64), before the timed window."""
        t, seen = self.target, set[str]()
        for req in requests:
            if req.system not in seen and len(seen) < 64:
                seen.add(req.system)
                with contextlib.suppress(Exception):  # a server that cannot pre-warm only loses the head start
                    await self.client.latency.prewarm(**(openai_body(req, t) if t.api == "openai" else anthropic_body(req, t)))

    async def aclose(self) -> None:
        await self.client.close()


class _SdkSender:
    def __init__(self, target: TargetSpec, call: str, retry: bool, http: str = "httpx") -> None:
        import anthropic
        import openai

        self.target, self.call = target, call
        kw: dict[str, Any] = {"api_key": target.api_key, "max_retries": 2 if retry else 0, **_http_client(target, http)}
        if target.base_url:
            kw["base_url"] = target.base_url
        self.client: Any = openai.AsyncOpenAI(**kw) if target.api == "openai" else anthropic.AsyncAnthropic(**kw)
        self.errors = _FirstErrors(target.api_key, str(self.client.base_url))

    async def send(self, req: TrafficRequest) -> Observed:
        t = self.target
        body = openai_body(req, t) if t.api == "openai" else anthropic_body(req, t)
        headers = emulator_headers(req, t)
        obs = Observed()
        t0 = _clock()
        first = last = answer = None
        marks: list[tuple[float, Optional[int]]] = []
        keep = _wants_text(req)
        pieces: list[str] = []
        try:
            if self.call == "create":
                if t.api == "openai":
                    resp = await self.client.chat.completions.create(**body, extra_headers=headers)
                    u = resp.usage
                    obs.input_tokens, obs.output_tokens = (u.prompt_tokens, u.completion_tokens) if u else (None, None)
                    details = getattr(u, "prompt_tokens_details", None)
                    obs.cache_read = getattr(details, "cached_tokens", None)
                else:
                    resp = await self.client.messages.create(**body, extra_headers=headers)
                    u = resp.usage
                    obs.cache_read, obs.cache_write = u.cache_read_input_tokens, u.cache_creation_input_tokens
                    obs.input_tokens = u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0)
                    obs.output_tokens = u.output_tokens
                # The caller sees the first token when the whole answer arrives.
                obs.e2e = obs.ttft = obs.ttfo = obs.ttfb = _clock() - t0
                if keep:
                    obs.text = _response_text(resp, t.api)
                return obs
            if t.api == "openai":
                stream = await self.client.chat.completions.create(
                    **body, stream=True, stream_options=_stream_options(t), extra_headers=headers
                )
                used: Optional[int] = None
                async for chunk in stream:
                    now = _clock()
                    obs.ttfb = obs.ttfb if obs.ttfb is not None else now - t0
                    if chunk.usage is not None:
                        used = chunk.usage.completion_tokens
                        obs.input_tokens, obs.output_tokens = chunk.usage.prompt_tokens, used
                        details = chunk.usage.prompt_tokens_details
                        obs.cache_read = getattr(details, "cached_tokens", None)
                    if _openai_token(chunk):
                        first = first if first is not None else now
                        last = now
                        marks.append((now, used if t.per_chunk_usage else None))
                        if answer is None and _openai_answer(chunk):
                            answer = now
                        if keep:
                            pieces.append(_openai_piece(chunk))
            else:
                stream = await self.client.messages.create(**body, stream=True, extra_headers=headers)
                async for event in stream:
                    now = _clock()
                    obs.ttfb = obs.ttfb if obs.ttfb is not None else now - t0
                    kind = event.type
                    if kind == "content_block_delta":
                        first = first if first is not None else now
                        last = now
                        marks.append((now, None))
                        if answer is None and event.delta.type in ("text_delta", "input_json_delta"):
                            answer = now
                        if keep:
                            pieces.append(_anthropic_piece(event))
                    elif kind == "message_start":
                        u = event.message.usage
                        obs.cache_read, obs.cache_write = u.cache_read_input_tokens, u.cache_creation_input_tokens
                        obs.input_tokens = u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0)
                    elif kind == "message_delta":
                        obs.output_tokens = event.usage.output_tokens
        except Exception as exc:
            _error(obs, exc)
            self.errors.note(obs, req, exc)
        end = _clock()
        obs.e2e = end - t0
        if keep:
            obs.text = "".join(pieces)
        if answer is not None:
            obs.ttfo = answer - t0
        if first is not None and last is not None:
            obs.ttft = first - t0
            n = obs.output_tokens
            obs.tpot = (last - first) / (n - 1) if n and n >= 2 else None
        obs.chunk_gaps = [b[0] - a[0] for a, b in zip(marks, marks[1:])]
        obs.token_gaps = _token_gaps(marks)
        return obs

    async def aclose(self) -> None:
        await self.client.close()


_INT = {name: re.compile(rb'"' + name.encode() + rb'":(\d+)') for name in
        ("completion_tokens", "prompt_tokens", "cached_tokens", "output_tokens", "input_tokens",
         "cache_read_input_tokens", "cache_creation_input_tokens")}  # fmt: skip


def _int(name: str, line: bytes) -> Optional[int]:
    m = _INT[name].search(line)
    return int(m.group(1)) if m else None


class _ThinSender:
    """aiohttp, one POST per request, a timestamp per SSE ``data:`` line, regexes for usage."""

    def __init__(self, target: TargetSpec) -> None:
        self.target = target
        self._session: Any = None
        if target.api == "openai":
            self.url = (target.base_url or "https://api.openai.com/v1") + "/chat/completions"
            self.headers = {"authorization": f"Bearer {target.api_key}"}
        else:
            self.url = (target.base_url or "https://api.anthropic.com") + "/v1/messages"
            self.headers = {"x-api-key": target.api_key, "anthropic-version": "2023-06-01"}
        self.errors = _FirstErrors(target.api_key, self.url)

    async def send(self, req: TrafficRequest) -> Observed:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), read_bufsize=2**20)
        t = self.target
        if t.api == "openai":
            body = openai_body(req, t)
            body.update(body.pop("extra_body", {}))
            body["stream"], body["stream_options"] = True, _stream_options(t)
        else:
            body = {**anthropic_body(req, t), "stream": True}
        obs = Observed()
        marks: list[tuple[float, Optional[int]]] = []
        t0 = _clock()
        first = last = answer = None
        openai_api = t.api == "openai"
        keep = _wants_text(req)
        pieces: list[str] = []
        try:
            async with self._session.post(self.url, json=body, headers={**self.headers, **emulator_headers(req, t)}) as resp:
                if resp.status != 200:
                    raw = await resp.read()
                    obs.outcome, obs.error = "error", f"HTTP {resp.status}"
                    obs.e2e = _clock() - t0
                    self.errors.note(obs, req, None, f"HTTP {resp.status}: {_body_message(raw)}")
                    return obs
                async for line in resp.content:
                    if not line.startswith(b"data:"):
                        continue
                    now = _clock()
                    if obs.ttfb is None:
                        obs.ttfb = now - t0
                    if openai_api:
                        said = (b'"delta":{"content":"' in line and b'"delta":{"content":""' not in line) or b'"tool_calls"' in line
                        token = said or b'"reasoning_content":"' in line
                        if said and answer is None:
                            answer = now
                        used = _int("completion_tokens", line) if b'"usage":{' in line else None
                        if used is not None:
                            obs.output_tokens = used
                            obs.input_tokens = _int("prompt_tokens", line)
                            obs.cache_read = _int("cached_tokens", line)
                        if token:
                            marks.append((now, used))
                    else:
                        token = b'"type":"content_block_delta"' in line
                        if token and answer is None and (b'"text_delta"' in line or b'"input_json_delta"' in line):
                            answer = now
                        if b'"type":"message_start"' in line:
                            obs.cache_read = _int("cache_read_input_tokens", line)
                            obs.input_tokens = (_int("input_tokens", line) or 0) + (obs.cache_read or 0) + (
                                _int("cache_creation_input_tokens", line) or 0)  # fmt: skip
                        elif b'"type":"message_delta"' in line:
                            obs.output_tokens = _int("output_tokens", line)
                        if token:
                            marks.append((now, None))
                    if token:
                        first = first if first is not None else now
                        last = now
                        if keep:
                            pieces.append(_thin_piece(line, openai_api))
        except Exception as exc:
            _error(obs, exc)
            self.errors.note(obs, req, exc)
        obs.e2e = _clock() - t0
        if keep:
            obs.text = "".join(pieces)
        if answer is not None:
            obs.ttfo = answer - t0
        if first is not None and last is not None:
            obs.ttft = first - t0
            n = obs.output_tokens
            obs.tpot = (last - first) / (n - 1) if n and n >= 2 else None
        obs.chunk_gaps = [b[0] - a[0] for a, b in zip(marks, marks[1:])]
        obs.token_gaps = _token_gaps(marks) if t.per_chunk_usage else []
        return obs

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


def _body_message(raw: bytes) -> str:
    """The error message of an API error body (``{"error": {"message": ...}}`` and kin), else its start."""
    import json

    try:
        body = json.loads(raw)
    except ValueError:
        return " ".join(raw[:300].decode("utf-8", "replace").split())
    err = body.get("error", body) if isinstance(body, dict) else body
    msg = err.get("message") or err.get("detail") if isinstance(err, dict) else None
    return " ".join(str(msg if msg is not None else body).split())


def make_sender(target: TargetSpec, strategy: dict[str, str]) -> Sender:
    """The sender for a strategy's ``client``, ``call``, ``cache``, ``retry`` and ``http`` levers."""
    client, call = strategy.get("client", "latencykit"), strategy.get("call", "stream")
    retry = strategy.get("retry", "on") == "on"
    http = strategy.get("http", "httpx")  # resolve_levers fills it; direct callers may leave it out
    if client == "latencykit":
        return _LatencykitSender(target, call, strategy.get("cache", "auto"), retry, http)
    if client == "sdk":
        return _SdkSender(target, call, retry, http)
    return _ThinSender(target)
