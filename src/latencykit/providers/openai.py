"""OpenAI Chat Completions and Responses: event taps, observed resources, and the clients.

``chat.completions.create(stream=False)`` and ``responses.create(stream=False)`` are sent as
streams and reassembled (``ChatCompletionStreamState``; the ``response.completed`` event)
into the exact ``ChatCompletion`` / ``Response``. Chat streams always ask for
``stream_options.include_usage``; when the caller did not, the usage-only chunk is hidden.
``chat.completions.stream()``, ``responses.stream()`` and ``chat.completions.parse()`` go
through the SDK's own helpers, which call the observed ``create``.
"""

from __future__ import annotations

import types
import weakref
from functools import cached_property
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional

import openai
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.resources.chat import AsyncChat, AsyncCompletions, Chat, Completions
from openai.resources.beta import AsyncBeta, Beta
from openai.resources.responses import AsyncResponses, Responses
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from .._errors import EndedEarly, PartialOutput
from ..core._record import CallRecord
from ..core._timing import CallTimer
from ..core._usage import apply_openai_chat_usage, apply_openai_responses_usage
from ._calls import (
    ONCE,
    Finish,
    apassthrough,
    attempts,
    begin,
    given,
    helper_method,
    passthrough,
    prepare,
    raw_response_requested,
    sdk_client,
)
from ._engine import Accumulator, acomplete_retrying, aopen_stream_retrying, complete_retrying, open_stream_retrying
from ._client import LatencyClientOptions, client_class
from ._http import Endpoint
from ._managers import finalize_on_close, wrap_async_manager, wrap_manager
from ._streams import aopen_stream, open_stream
from ._tap import Tap

__all__ = ["OpenAI", "AsyncOpenAI", "ChatTap", "ResponsesTap", "completion_from_state"]


# -- taps ---------------------------------------------------------------------------------


_CHUNK = "chat.completion.chunk"


class ChatTap(Tap):
    """Marks chunks with content, refusal, reasoning or tool arguments; reads usage and finish.

    What ends a Chat Completions stream as complete, as the raw SDK sees it: a chunk with a
    ``finish_reason``, the usage-only chunk, or ``data: [DONE]`` (some OpenAI-compatible
    servers send no ``finish_reason`` at all). ``[DONE]`` never reaches the caller — the SDK
    stops there — so `opened` watches the SSE events for it. Objects that are not
    ``chat.completion.chunk`` (Azure's prompt-filter results, ``object: ""``) reach the
    caller as the raw SDK yields them, but give neither model, id nor the first token.
    With continuous usage stats (vLLM), a chunk whose ``completion_tokens`` grew carries a
    token even when its text is empty (a partial UTF-8 character).
    """

    __slots__ = ("hide_usage", "_fresh", "_generated", "_usage_read", "sse")
    connection_error = openai.APIConnectionError
    api_error = openai.APIError

    def __init__(self, timer: CallTimer, hide_usage: bool) -> None:
        super().__init__(timer)
        self.hide_usage = hide_usage
        self._fresh = True
        self._generated = 0
        self._usage_read = False
        self.sse: Any = None
        """The SDK stream's SSE event generator, once its iterator started (see `watch_done`)."""

    def new_attempt(self) -> None:
        """Forget the events of an abandoned attempt (and read the next one's model and id)."""
        super().new_attempt()
        self._fresh = True
        self._generated = 0
        self._usage_read = False
        self.sse = None

    def opened(self, stream: Any) -> None:
        """Watch the SDK stream's SSE events for ``[DONE]`` (before anything iterates it)."""
        watch_done(stream, self)

    def ended(self) -> None:
        """The SDK's chunks ran out: at ``[DONE]``, if that is where it stopped.

        The SDK breaks out of its loop over the SSE events at ``[DONE]``, leaving their
        generator suspended, and otherwise runs it to its end (a body cut short, or ended
        without ``[DONE]``): so its state says which, with nothing watched per event.
        """
        sse, self.sse = self.sse, None  # the generator may hold the stream: no cycle kept
        if sse is not None and (sse.ag_frame if isinstance(sse, types.AsyncGeneratorType) else sse.gi_frame) is not None:
            self.timer.terminal()

    def __call__(self, chunk: Any) -> bool:
        try:  # the commonest chunk first: one piece of text (anything else takes the full path below)
            if not self._fresh and chunk.usage is None:
                choices = chunk.choices
                if choices and len(choices) == 1:
                    choice = choices[0]
                    content = choice.delta.content
                    if content and not choice.finish_reason and getattr(chunk, "object", _CHUNK) == _CHUNK:
                        self.texts.append(content)
                        self._stamp(self._now())
                        return True
        except AttributeError:  # not a chat chunk (no usage / choices): the full path reads it
            pass
        timer = self.timer
        if getattr(chunk, "object", _CHUNK) != _CHUNK:
            timer.event(False)
            return True
        rec = timer.record
        if self._fresh:
            self._fresh = False
            rec.response_model = chunk.model
            rec.response_id = chunk.id
        usage = chunk.usage
        choices = chunk.choices
        if usage is not None:
            self.usage = usage
            if not choices:
                apply_openai_chat_usage(rec, usage)
                timer.event(False)
                timer.terminal()  # the usage-only chunk comes last, after every choice finished
                return not self.hide_usage
        elif not choices:
            timer.event(False)
            return True
        token = False
        finished = None
        for choice in choices:
            delta = choice.delta
            content = delta.content
            if content:
                self.texts.append(content)
                token = True
            elif delta.tool_calls:
                for call in delta.tool_calls:
                    args = call.function.arguments if call.function is not None else None
                    if args:
                        self.tools.setdefault(f"{choice.index}:{call.index}", []).append(args)
                        token = True
            if not token:
                token = _delta_has_token(delta)
            if choice.finish_reason:
                finished = choice.finish_reason
        if usage is not None:  # continuous usage stats: the server's own count says what arrived
            generated = usage.completion_tokens
            if isinstance(generated, int):
                if generated > self._generated:
                    token = True
                self._generated = generated
            if self._usage_read and finished is None and usage.completion_tokens_details is None:
                # Mid-stream only the completion count moves (the prompt side is fixed once
                # read): one field per chunk instead of the whole usage.
                if isinstance(generated, int):
                    rec.output_tokens = generated
            else:
                self._usage_read = True
                apply_openai_chat_usage(rec, usage)
        if token:
            timer.token()
        else:
            timer.event(False)
        if finished is not None:
            rec.finish_reasons = (*rec.finish_reasons, finished)
            timer.terminal()
        return True


class _DoneWatch:
    """Stands in for one SDK stream's ``_iter_events`` until the SDK calls it (once, when its
    iterator starts), then hands the tap the real SSE event generator, whose state at the
    end says whether the SDK stopped at ``[DONE]`` (`ChatTap.ended`). Where the SDK's
    events are no generator, it watches each one instead. Holds the stream weakly and
    removes itself, so it adds no reference cycle."""

    __slots__ = ("stream", "tap")

    def __init__(self, stream: Any, tap: "ChatTap") -> None:
        self.stream = weakref.ref(stream)
        self.tap = tap

    def __call__(self) -> Any:
        stream = self.stream()
        assert stream is not None  # the SDK calls this from the stream's own iterator
        stream.__dict__.pop("_iter_events", None)
        events = stream._iter_events()
        if isinstance(events, (types.GeneratorType, types.AsyncGeneratorType)):
            self.tap.sse = events
            return events
        timer = self.tap.timer
        return _adone(events, timer) if hasattr(events, "__aiter__") else _done(events, timer)


def watch_done(stream: Any, tap: "ChatTap") -> None:
    """Let ``tap`` see whether ``stream``'s SSE events ended at ``[DONE]``."""
    state = getattr(stream, "__dict__", None)
    if state is None or "_lk_watched" in state or not callable(getattr(type(stream), "_iter_events", None)):
        return
    state["_lk_watched"] = True
    state["_iter_events"] = _DoneWatch(stream, tap)


def _done(events: Any, timer: CallTimer) -> Any:
    for sse in events:
        if sse.data.startswith("[DONE]"):
            timer.terminal()
        yield sse


async def _adone(events: Any, timer: CallTimer) -> Any:
    async for sse in events:
        if sse.data.startswith("[DONE]"):
            timer.terminal()
        yield sse


def _delta_has_token(delta: Any) -> bool:
    if delta.content or delta.refusal:
        return True
    calls = delta.tool_calls
    if calls:
        for call in calls:
            fn = call.function
            if fn is not None and fn.arguments:
                return True
    # OpenAI-compatible servers stream reasoning as an extra field: vLLM and DeepSeek as
    # reasoning_content / reasoning, OpenRouter and Snowflake as reasoning_details (a list).
    extra = delta.model_extra
    return bool(extra) and bool(extra.get("reasoning_content") or extra.get("reasoning") or extra.get("reasoning_details"))


# Responses events whose ``delta`` is generated output, on any channel.
_RESPONSE_TOKEN_EVENTS = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
        "response.function_call_arguments.delta",
        "response.custom_tool_call_input.delta",
        "response.code_interpreter_call_code.delta",
        "response.mcp_call_arguments.delta",
        "response.audio.transcript.delta",
    }
)
_RESPONSE_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})


class ResponsesTap(Tap):
    """Marks token deltas; reads model/id from ``response.created`` and usage from the terminal event.

    An ``error`` event or ``response.failed`` is a failure, not a completion: the SDK yields
    them as events, so the stream shell raises the matching ``openai.APIError`` at its end.
    """

    __slots__ = ("error_body", "final")
    connection_error = openai.APIConnectionError
    api_error = openai.APIError

    def __init__(self, timer: CallTimer) -> None:
        super().__init__(timer)
        self.error_body: Optional[dict[str, Any]] = None
        self.final: Any = None

    def new_attempt(self) -> None:
        """Forget what an abandoned attempt delivered (and any failure it reported)."""
        super().new_attempt()
        self.error_body = None
        self.final = None

    def stream_error(self, request: Any) -> Optional[BaseException]:
        """``openai.APIError`` for an ``error`` event / ``response.failed``, if one came."""
        if self.error_body is None:
            return None
        message = str(self.error_body.get("message") or "the response failed")
        return openai.APIError(message, request, body=self.error_body)

    def partial(self) -> PartialOutput:
        """Output text and function-call arguments so far; the response if a terminal event came."""
        out = super().partial()
        out.message = self.final
        return out

    def __call__(self, event: Any) -> bool:
        timer = self.timer
        kind = event.type
        if kind in _RESPONSE_TOKEN_EVENTS:
            delta = event.delta
            if delta:
                if kind == "response.output_text.delta":
                    self.texts.append(delta)
                elif kind == "response.function_call_arguments.delta":
                    self.tools.setdefault(event.item_id, []).append(delta)
            timer.event(bool(delta))
            return True
        timer.event(False)
        if kind == "response.created":
            rec = timer.record
            rec.response_model = event.response.model
            rec.response_id = event.response.id
        elif kind in _RESPONSE_TERMINAL:
            response = event.response
            self.final = response
            self.usage = response.usage
            _on_response(timer.record, response)
            if kind == "response.failed":
                err = getattr(response, "error", None)
                self.error_body = self.error_body or {
                    "type": "response.failed",
                    "code": getattr(err, "code", None),
                    "message": getattr(err, "message", None),
                }
            else:
                timer.terminal()
        elif kind == "error":
            code = getattr(event, "code", None)
            timer.record.error_type = code or "error"
            self.error_body = {"type": "error", "code": code, "message": getattr(event, "message", None)}
        return True


def _on_response(rec: CallRecord, response: Any) -> None:
    rec.response_model = getattr(response, "model", None)
    rec.response_id = getattr(response, "id", None)
    apply_openai_responses_usage(rec, getattr(response, "usage", None))
    status = getattr(response, "status", None)
    details = getattr(response, "incomplete_details", None)
    reason = getattr(details, "reason", None) if details is not None else None
    finish: Optional[str] = reason or status
    if finish:
        rec.finish_reasons = (finish,)
    if status == "failed":
        err = getattr(response, "error", None)
        rec.error_type = getattr(err, "code", None) or "response.failed"


def _on_completion(rec: CallRecord, completion: Any) -> None:
    rec.response_model = getattr(completion, "model", None)
    rec.response_id = getattr(completion, "id", None)
    apply_openai_chat_usage(rec, getattr(completion, "usage", None))
    rec.finish_reasons = tuple(c.finish_reason for c in getattr(completion, "choices", []) if c.finish_reason)


# -- request planning ---------------------------------------------------------------------


def _chat_request(kwargs: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The streamed request, and whether the caller asked for the usage chunk itself."""
    opts = kwargs.get("stream_options")
    caller_opts = opts if isinstance(opts, dict) else {}
    wanted = bool(caller_opts.get("include_usage"))
    return {**kwargs, "stream": True, "stream_options": {**caller_opts, "include_usage": True}}, wanted


def _not_streamable(kwargs: dict[str, Any]) -> Optional[str]:
    extra = kwargs.get("extra_body")
    if isinstance(extra, dict) and "stream" in extra:
        return "stream set through extra_body"
    return None


def completion_from_state(state: ChatCompletionStreamState[Any], extras: Optional[dict[str, Any]] = None) -> ChatCompletion:
    """The plain ``ChatCompletion`` a non-streaming call returns, from the SDK's stream state.

    The SDK's snapshot adds parse-only fields (``parsed``, ``parsed_arguments``) that a
    non-streaming ``ChatCompletion`` does not have; the API's non-streaming message always
    carries ``annotations`` (``[]`` when none), which deltas never send; tool-call deltas
    carry an ``index`` the final message does not.
    """
    # The snapshot, not get_final_completion(): that one parses, and raises on finish_reason
    # "length" / "content_filter", which a plain create() must return, not raise.
    data: dict[str, Any] = state.current_completion_snapshot.to_dict()
    if extras:
        data.update(extras)
    for choice in data.get("choices", []):
        message = choice.get("message", {})
        message.pop("parsed", None)
        if message.get("annotations") is None:
            message["annotations"] = []
        for key in ("audio", "function_call", "tool_calls"):
            if key in message and message[key] is None:
                del message[key]  # absent, not null, in a non-streaming message
        for call in message.get("tool_calls") or []:
            call.pop("index", None)  # a delta-only field
            fn = call.get("function")
            if isinstance(fn, dict):
                fn.pop("parsed_arguments", None)
    return ChatCompletion.construct(**data)


def _begin(
    client: Any,
    api: str,
    method: str,
    kwargs: dict[str, Any],
    reason: Optional[str] = None,
    finish: Optional[Finish] = None,
) -> CallTimer:
    return begin(
        client,
        api=api,
        method=method,
        model=kwargs.get("model"),
        streamed=reason is None,
        reason=reason,
        finish=finish,
        request=kwargs,
    )


def _method(kwargs: dict[str, Any]) -> tuple[bool, str]:
    streams = given(kwargs.get("stream")) and bool(kwargs["stream"])
    helper = helper_method(kwargs) if streams else None
    if helper is not None:  # the SDK's .stream() helpers (and our .parse()) call create(stream=True)
        return True, "parse" if helper.endswith(".parse") else "stream"
    return streams, "create(stream=True)" if streams else "create"


# -- resources ----------------------------------------------------------------------------


class ChatAccumulator:
    """Folds chunks into the ``ChatCompletion`` a non-streaming call returns (SDK stream state).

    Like the SDK's own helper, objects that are not ``chat.completion.chunk`` (Azure's
    prompt-filter results) are skipped. Server extras on later chunks (llama.cpp's
    ``timings`` on the usage chunk) are kept in the result's ``model_extra``, where a
    non-streaming response has them; the SDK's state keeps only the first chunk's.
    """

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self._state: ChatCompletionStreamState[Any] = ChatCompletionStreamState(
            input_tools=kwargs.get("tools", openai.omit), response_format=kwargs.get("response_format", openai.omit)
        )
        self._fed = False
        self._extras: dict[str, Any] = {}

    def feed(self, chunk: Any) -> None:
        """Accumulate one chunk."""
        if getattr(chunk, "object", _CHUNK) != _CHUNK:
            return
        self._state.handle_chunk(chunk)
        if self._fed:
            extra = chunk.model_extra
            if extra:
                self._extras.update((k, v) for k, v in extra.items() if v is not None)
        self._fed = True

    def snapshot(self) -> Optional[ChatCompletion]:
        """The completion so far, or ``None`` before the first chunk."""
        return completion_from_state(self._state, self._extras) if self._fed else None

    def result(self, complete: bool) -> ChatCompletion:
        """The reassembled completion; raises if the stream was cut short."""
        partial = self.snapshot()
        if partial is None or not complete:
            raise EndedEarly("the stream ended before the final chunk", partial)
        return partial


class ResponseAccumulator:
    """Keeps the ``Response`` that the terminal event carries."""

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self._final: Any = None

    def feed(self, event: Any) -> None:
        """Keep the terminal event's response."""
        if event.type in _RESPONSE_TERMINAL:
            self._final = event.response

    def snapshot(self) -> Any:
        """The response of the terminal event, if one came."""
        return self._final

    def result(self, complete: bool) -> Any:
        """The final ``Response``; raises if no terminal event arrived."""
        if self._final is None or not complete:
            raise EndedEarly("the stream ended before response.completed")
        return self._final


class _Api:
    """What differs between Chat Completions and Responses: the request, tap and accumulator."""

    def __init__(
        self,
        name: str,
        request: Callable[[dict[str, Any]], tuple[dict[str, Any], bool]],
        tap: Callable[[CallTimer, bool], Tap],
        accumulator: Callable[[dict[str, Any]], Accumulator],
        on_result: Callable[[CallRecord, Any], None],
        target: Callable[[Any], Any],
    ) -> None:
        self.name, self.request, self.tap, self.accumulator, self.on_result, self.target = (
            name,
            request,
            tap,
            accumulator,
            on_result,
            target,
        )


def _responses_request(kwargs: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    return {**kwargs, "stream": True}, True


_CHAT = _Api(
    "chat.completions",
    _chat_request,
    lambda timer, hide: ChatTap(timer, hide_usage=hide),
    ChatAccumulator,
    _on_completion,
    lambda client: client.chat.completions,
)
_RESPONSES = _Api(
    "responses",
    _responses_request,
    lambda timer, hide: ResponsesTap(timer),
    ResponseAccumulator,
    _on_response,
    lambda client: client.responses,
)


def _create(api: _Api, resource: Any, base: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """One streamed (or passed-through) call, shared by Chat Completions and Responses (sync)."""
    client: Any = resource._client
    kwargs, finish = prepare(client, api.name, kwargs)
    reason = _not_streamable(kwargs)
    if reason is not None:
        timer = _begin(client, api.name, "create", kwargs, reason, finish)
        return passthrough(timer, lambda: base(resource, **kwargs), api.on_result)
    caller_streams, method = _method(kwargs)
    request, wanted_usage = api.request(kwargs)
    tap = api.tap(_begin(client, api.name, method, kwargs, finish=finish), caller_streams and not wanted_usage)
    target = api.target(sdk_client(client))
    send = lambda: base(target, **request)  # noqa: E731
    policy = client._lk.retry
    if caller_streams:
        if policy is None:
            return open_stream(tap, send)
        return open_stream_retrying(tap, send, policy, attempts(client))
    return complete_retrying(tap, send, policy or ONCE, attempts(client), lambda: api.accumulator(kwargs))


async def _acreate(api: _Api, resource: Any, base: Callable[..., Awaitable[Any]], kwargs: dict[str, Any]) -> Any:
    """Async twin of `_create`."""
    client: Any = resource._client
    kwargs, finish = prepare(client, api.name, kwargs)
    reason = _not_streamable(kwargs)
    if reason is not None:
        timer = _begin(client, api.name, "create", kwargs, reason, finish)
        return await apassthrough(timer, lambda: base(resource, **kwargs), api.on_result)
    caller_streams, method = _method(kwargs)
    request, wanted_usage = api.request(kwargs)
    tap = api.tap(_begin(client, api.name, method, kwargs, finish=finish), caller_streams and not wanted_usage)
    target = api.target(sdk_client(client))
    send = lambda: base(target, **request)  # noqa: E731
    policy = client._lk.retry
    if caller_streams:
        if policy is None:
            return await aopen_stream(tap, send)
        return await aopen_stream_retrying(tap, send, policy, attempts(client))
    return await acomplete_retrying(tap, send, policy or ONCE, attempts(client), lambda: api.accumulator(kwargs))


class _Completions(Completions):
    """``client.chat.completions`` that always streams and times every call."""

    def create(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return super().create(**kwargs)
        return _create(_CHAT, self, Completions.create, kwargs)

    def stream(self, **kwargs: Any) -> Any:
        return wrap_manager(super().stream(**kwargs), _enter_helper)

    def parse(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return super().parse(**kwargs)
        with self.stream(**_as_helper(kwargs, "chat.completions.parse")) as stream:
            return stream.get_final_completion()


class _AsyncCompletions(AsyncCompletions):
    """Async ``client.chat.completions`` that always streams and times every call."""

    async def create(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return await super().create(**kwargs)
        return await _acreate(_CHAT, self, AsyncCompletions.create, kwargs)

    def stream(self, **kwargs: Any) -> Any:
        return wrap_async_manager(super().stream(**kwargs), _aenter_helper)

    async def parse(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return await super().parse(**kwargs)
        async with self.stream(**_as_helper(kwargs, "chat.completions.parse")) as stream:
            return await stream.get_final_completion()


class _Responses(Responses):
    """``client.responses`` that always streams and times every call."""

    def create(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return super().create(**kwargs)
        return _create(_RESPONSES, self, Responses.create, kwargs)

    def stream(self, **kwargs: Any) -> Any:
        return wrap_manager(super().stream(**_as_helper(kwargs, "responses.stream")), _enter_helper)

    def parse(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return super().parse(**kwargs)
        kwargs, finish = prepare(self._client, "responses", kwargs)
        timer = _begin(self._client, "responses", "parse", kwargs, _PARSE_NOT_STREAMED, finish)
        return passthrough(timer, lambda: super(_Responses, self).parse(**kwargs), _on_response)


class _AsyncResponses(AsyncResponses):
    """Async ``client.responses`` that always streams and times every call."""

    async def create(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return await super().create(**kwargs)
        return await _acreate(_RESPONSES, self, AsyncResponses.create, kwargs)

    def stream(self, **kwargs: Any) -> Any:
        return wrap_async_manager(super().stream(**_as_helper(kwargs, "responses.stream")), _aenter_helper)

    async def parse(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return await super().parse(**kwargs)
        kwargs, finish = prepare(self._client, "responses", kwargs)
        timer = _begin(self._client, "responses", "parse", kwargs, _PARSE_NOT_STREAMED, finish)
        return await apassthrough(timer, lambda: super(_AsyncResponses, self).parse(**kwargs), _on_response)


# The SDK's streamed helper raises on `response.incomplete`, where a plain parse() returns
# the incomplete response; until that is reconciled, parse() is sent as the caller wrote it.
_PARSE_NOT_STREAMED = "responses.parse is sent unstreamed (its streamed helper raises on incomplete responses)"


def _enter_helper(enter: Callable[[], Any]) -> Any:
    # The request (and the clock) starts inside enter(): the SDK helper calls our create().
    return finalize_on_close(enter())


async def _aenter_helper(enter: Callable[[], Awaitable[Any]]) -> Any:
    return finalize_on_close(await enter())


def _as_helper(kwargs: dict[str, Any], name: str) -> dict[str, Any]:
    # The SDK's chat helper marks its requests this way; its responses helper does not, and
    # the mark is how the record tells .stream() from create(stream=True).
    extra = kwargs.get("extra_headers")
    return {**kwargs, "extra_headers": {"X-Stainless-Helper-Method": name, **(extra if isinstance(extra, dict) else {})}}


class _Chat(Chat):
    @cached_property
    def completions(self) -> Completions:
        """The observed Chat Completions resource."""
        return _Completions(self._client)


class _AsyncChat(AsyncChat):
    @cached_property
    def completions(self) -> AsyncCompletions:
        """The observed async Chat Completions resource."""
        return _AsyncCompletions(self._client)


class _Beta(Beta):
    @cached_property
    def chat(self) -> Chat:
        """The observed Chat resource (``client.beta.chat`` is the same API)."""
        return _Chat(self._client)


class _AsyncBeta(AsyncBeta):
    @cached_property
    def chat(self) -> AsyncChat:
        """The observed async Chat resource."""
        return _AsyncChat(self._client)


RESOURCES = {"chat": _Chat, "responses": _Responses, "beta": _Beta}
ASYNC_RESOURCES = {"chat": _AsyncChat, "responses": _AsyncResponses, "beta": _AsyncBeta}
ENDPOINTS = {
    "/chat/completions": Endpoint("chat.completions", lambda timer: ChatTap(timer, hide_usage=False), _on_completion, ChatCompletion),
    "/responses": Endpoint("responses", ResponsesTap, _on_response, Response),
}
"""Model calls no observed method sent (raw responses, ``client.post()``, ``beta.responses``) are recorded by ``request()``."""

if TYPE_CHECKING:

    class OpenAI(LatencyClientOptions, openai.OpenAI):
        """``openai.OpenAI`` that always streams and records every call in ``client.latency``."""

    class AsyncOpenAI(LatencyClientOptions, openai.AsyncOpenAI):
        """``openai.AsyncOpenAI`` that always streams and records every call in ``client.latency``."""

else:
    OpenAI = client_class(
        openai.OpenAI,
        RESOURCES,
        "openai",
        "``openai.OpenAI`` that always streams and records every call in ``client.latency``.\n\n"
        "Takes exactly the SDK's constructor arguments, plus ``recorder=`` (a shared `Recorder`) and ``cache=`` (a `CachePolicy`, ``\"auto\"`` or ``\"off\"``).",
        endpoints=ENDPOINTS,
    )
    AsyncOpenAI = client_class(
        openai.AsyncOpenAI,
        ASYNC_RESOURCES,
        "openai",
        "``openai.AsyncOpenAI`` that always streams and records every call in ``client.latency``.\n\n"
        "Takes exactly the SDK's constructor arguments, plus ``recorder=`` (a shared `Recorder`) and ``cache=`` (a `CachePolicy`, ``\"auto\"`` or ``\"off\"``).",
        endpoints=ENDPOINTS,
    )
