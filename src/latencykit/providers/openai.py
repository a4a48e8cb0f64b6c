"""OpenAI Chat Completions and Responses: event taps, observed resources, and the clients.

``chat.completions.create(stream=False)`` and ``responses.create(stream=False)`` are sent as
streams and reassembled (``ChatCompletionStreamState``; the ``response.completed`` event)
into the exact ``ChatCompletion`` / ``Response``. Chat streams always ask for
``stream_options.include_usage``; when the caller did not, the usage-only chunk is hidden.
``chat.completions.stream()``, ``responses.stream()`` and ``chat.completions.parse()`` go
through the SDK's own helpers, which call the observed ``create``.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Literal, Optional, Union

import openai
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.resources.chat import AsyncChat, AsyncCompletions, Chat, Completions
from openai.resources.responses import AsyncResponses, Responses
from openai.types.chat import ChatCompletion

from .._errors import IncompleteStreamError
from ..core._record import CallRecord
from ..core._timing import CallTimer
from ..core._usage import apply_openai_chat_usage, apply_openai_responses_usage
from ..telemetry._otel import Telemetry
from ..telemetry._recorder import Recorder
from ._calls import Finish, apassthrough, begin, given, helper_method, passthrough, prepare, raw_response_requested
from ._client import client_class
from ._managers import finalize_on_close, wrap_async_manager, wrap_manager
from ._streams import aopen_stream, open_stream
from ._tap import Tap

__all__ = ["OpenAI", "AsyncOpenAI", "ChatTap", "ResponsesTap", "completion_from_state"]


# -- taps ---------------------------------------------------------------------------------


class ChatTap(Tap):
    """Marks chunks with content, refusal, reasoning or tool arguments; reads usage and finish."""

    __slots__ = ("hide_usage", "_fresh")

    def __init__(self, timer: CallTimer, hide_usage: bool) -> None:
        super().__init__(timer)
        self.hide_usage = hide_usage
        self._fresh = True

    def __call__(self, chunk: Any) -> bool:
        timer = self.timer
        rec = timer.record
        if self._fresh:
            self._fresh = False
            rec.response_model = chunk.model
            rec.response_id = chunk.id
        usage = chunk.usage
        if usage is not None:
            apply_openai_chat_usage(rec, usage)
        choices = chunk.choices
        if not choices:
            timer.event(False)
            return not (self.hide_usage and usage is not None)
        token = False
        finished = None
        for choice in choices:
            if not token:
                token = _delta_has_token(choice.delta)
            if choice.finish_reason:
                finished = choice.finish_reason
        timer.event(token)
        if finished is not None:
            rec.finish_reasons = (*rec.finish_reasons, finished)
            timer.terminal()
        return True


def _delta_has_token(delta: Any) -> bool:
    if delta.content or delta.refusal:
        return True
    calls = delta.tool_calls
    if calls:
        for call in calls:
            fn = call.function
            if fn is not None and fn.arguments:
                return True
    # OpenAI-compatible servers (vLLM, DeepSeek) stream reasoning as an extra field.
    extra = delta.model_extra
    return bool(extra) and bool(extra.get("reasoning_content") or extra.get("reasoning"))


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
    """Marks token deltas; reads model/id from ``response.created`` and usage from the terminal event."""

    __slots__ = ()

    def __call__(self, event: Any) -> bool:
        timer = self.timer
        kind = event.type
        if kind in _RESPONSE_TOKEN_EVENTS:
            timer.event(bool(event.delta))
            return True
        timer.event(False)
        if kind == "response.created":
            rec = timer.record
            rec.response_model = event.response.model
            rec.response_id = event.response.id
        elif kind in _RESPONSE_TERMINAL:
            _on_response(timer.record, event.response)
            timer.terminal()
        elif kind == "error":
            timer.record.error_type = getattr(event, "code", None) or "error"
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


def completion_from_state(state: ChatCompletionStreamState[Any]) -> ChatCompletion:
    """The plain ``ChatCompletion`` a non-streaming call returns, from the SDK's stream state.

    The SDK's snapshot adds parse-only fields (``parsed``, ``parsed_arguments``) that a
    non-streaming ``ChatCompletion`` does not have; the API's non-streaming message always
    carries ``annotations`` (``[]`` when none), which deltas never send; tool-call deltas
    carry an ``index`` the final message does not.
    """
    # The snapshot, not get_final_completion(): that one parses, and raises on finish_reason
    # "length" / "content_filter", which a plain create() must return, not raise.
    data: dict[str, Any] = state.current_completion_snapshot.to_dict()
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


class _Completions(Completions):
    """``client.chat.completions`` that always streams and times every call."""

    def create(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return super().create(**kwargs)
        kwargs, finish = prepare(self._client, "chat.completions", kwargs)
        reason = _not_streamable(kwargs)
        if reason is not None:
            timer = _begin(self._client, "chat.completions", "create", kwargs, reason, finish)
            return passthrough(timer, lambda: super(_Completions, self).create(**kwargs), _on_completion)
        caller_streams, method = _method(kwargs)
        request, wanted_usage = _chat_request(kwargs)
        timer = _begin(self._client, "chat.completions", method, kwargs, finish=finish)
        tap = ChatTap(timer, hide_usage=caller_streams and not wanted_usage)
        raw = open_stream(tap, lambda: super(_Completions, self).create(**request))
        if caller_streams:
            return raw
        state: ChatCompletionStreamState[Any] = ChatCompletionStreamState(
            input_tools=kwargs.get("tools", openai.omit), response_format=kwargs.get("response_format", openai.omit)
        )
        with raw:
            for chunk in raw:
                state.handle_chunk(chunk)
        return _final_completion(state, timer)

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
        kwargs, finish = prepare(self._client, "chat.completions", kwargs)
        reason = _not_streamable(kwargs)
        if reason is not None:
            timer = _begin(self._client, "chat.completions", "create", kwargs, reason, finish)
            return await apassthrough(timer, lambda: super(_AsyncCompletions, self).create(**kwargs), _on_completion)
        caller_streams, method = _method(kwargs)
        request, wanted_usage = _chat_request(kwargs)
        timer = _begin(self._client, "chat.completions", method, kwargs, finish=finish)
        tap = ChatTap(timer, hide_usage=caller_streams and not wanted_usage)
        raw = await aopen_stream(tap, lambda: super(_AsyncCompletions, self).create(**request))
        if caller_streams:
            return raw
        state: ChatCompletionStreamState[Any] = ChatCompletionStreamState(
            input_tools=kwargs.get("tools", openai.omit), response_format=kwargs.get("response_format", openai.omit)
        )
        async with raw:
            async for chunk in raw:
                state.handle_chunk(chunk)
        return _final_completion(state, timer)

    def stream(self, **kwargs: Any) -> Any:
        return wrap_async_manager(super().stream(**kwargs), _aenter_helper)

    async def parse(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return await super().parse(**kwargs)
        async with self.stream(**_as_helper(kwargs, "chat.completions.parse")) as stream:
            return await stream.get_final_completion()


def _final_completion(state: ChatCompletionStreamState[Any], timer: CallTimer) -> ChatCompletion:
    try:
        partial: Optional[ChatCompletion] = completion_from_state(state)
    except AssertionError:  # no chunk at all
        partial = None
    if partial is None or not timer.saw_terminal:
        raise IncompleteStreamError("the stream ended before the final chunk", partial)
    return partial


class _Responses(Responses):
    """``client.responses`` that always streams and times every call."""

    def create(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return super().create(**kwargs)
        kwargs, finish = prepare(self._client, "responses", kwargs)
        reason = _not_streamable(kwargs)
        if reason is not None:
            timer = _begin(self._client, "responses", "create", kwargs, reason, finish)
            return passthrough(timer, lambda: super(_Responses, self).create(**kwargs), _on_response)
        caller_streams, method = _method(kwargs)
        timer = _begin(self._client, "responses", method, kwargs, finish=finish)
        raw = open_stream(ResponsesTap(timer), lambda: super(_Responses, self).create(**{**kwargs, "stream": True}))
        if caller_streams:
            return raw
        final = None
        with raw:
            for event in raw:
                if event.type in _RESPONSE_TERMINAL:
                    final = event.response
        return _final_response(final)

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
        kwargs, finish = prepare(self._client, "responses", kwargs)
        reason = _not_streamable(kwargs)
        if reason is not None:
            timer = _begin(self._client, "responses", "create", kwargs, reason, finish)
            return await apassthrough(timer, lambda: super(_AsyncResponses, self).create(**kwargs), _on_response)
        caller_streams, method = _method(kwargs)
        timer = _begin(self._client, "responses", method, kwargs, finish=finish)
        tap = ResponsesTap(timer)
        raw = await aopen_stream(tap, lambda: super(_AsyncResponses, self).create(**{**kwargs, "stream": True}))
        if caller_streams:
            return raw
        final = None
        async with raw:
            async for event in raw:
                if event.type in _RESPONSE_TERMINAL:
                    final = event.response
        return _final_response(final)

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


def _final_response(final: Any) -> Any:
    if final is None:
        raise IncompleteStreamError("the stream ended before response.completed")
    return final


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


RESOURCES = {"chat": _Chat, "responses": _Responses}
ASYNC_RESOURCES = {"chat": _AsyncChat, "responses": _AsyncResponses}

if TYPE_CHECKING:
    from ._caching import CacheOption

    class OpenAI(openai.OpenAI):
        """``openai.OpenAI`` that always streams and records every call in ``client.latency``."""

        def __init__(
            self,
            *args: Any,
            recorder: Optional[Recorder] = None,
            telemetry: Union[Telemetry, Literal[False], None] = None,
            cache: CacheOption = "auto",
            **kwargs: Any,
        ) -> None: ...
        @property
        def latency(self) -> Recorder: ...

    class AsyncOpenAI(openai.AsyncOpenAI):
        """``openai.AsyncOpenAI`` that always streams and records every call in ``client.latency``."""

        def __init__(
            self,
            *args: Any,
            recorder: Optional[Recorder] = None,
            telemetry: Union[Telemetry, Literal[False], None] = None,
            cache: CacheOption = "auto",
            **kwargs: Any,
        ) -> None: ...
        @property
        def latency(self) -> Recorder: ...

else:
    OpenAI = client_class(
        openai.OpenAI,
        RESOURCES,
        "openai",
        "``openai.OpenAI`` that always streams and records every call in ``client.latency``.\n\n"
        "Takes exactly the SDK's constructor arguments, plus ``recorder=`` (a shared `Recorder`) and ``cache=`` (a `CachePolicy`, ``\"auto\"`` or ``\"off\"``).",
    )
    AsyncOpenAI = client_class(
        openai.AsyncOpenAI,
        ASYNC_RESOURCES,
        "openai",
        "``openai.AsyncOpenAI`` that always streams and records every call in ``client.latency``.\n\n"
        "Takes exactly the SDK's constructor arguments, plus ``recorder=`` (a shared `Recorder`) and ``cache=`` (a `CachePolicy`, ``\"auto\"`` or ``\"off\"``).",
    )
