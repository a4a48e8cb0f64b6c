"""Anthropic Messages: the event tap, the observed ``messages`` resource, and the clients.

``messages.create(stream=False)`` is sent as a stream and reassembled with the SDK's own
``accumulate_event`` into the exact ``anthropic.types.Message``; ``create(stream=True)``
returns the SDK's ``Stream`` observed in place; ``messages.stream()`` returns the SDK's
``MessageStreamManager`` whose raw stream is observed when the ``with`` block opens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional

import anthropic
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.resources.messages import AsyncMessages, Messages
from anthropic.types import Message

from .._errors import IncompleteStreamError, PartialOutput
from ..core._record import CallRecord
from ..core._timing import CallTimer
from ..core._usage import apply_anthropic_usage
from ._calls import (
    ONCE as _ONCE,
    Finish,
    apassthrough,
    attempts,
    begin,
    given,
    passthrough,
    prepare,
    raw_response_requested,
    sdk_client,
)
from ._engine import acomplete_retrying, aopen_stream_retrying, complete_retrying, open_stream_retrying
from ._client import LatencyClientOptions, client_class
from ._managers import wrap_async_manager, wrap_manager
from ._streams import aopen_stream, open_stream
from ._tap import Tap

__all__ = ["Anthropic", "AsyncAnthropic", "AnthropicTap", "MessageAccumulator"]

_API = "messages"

# Which attribute of a content_block_delta carries generated output, per delta type.
# signature_delta carries no token; unknown delta types are conservatively not tokens.
_TOKEN_FIELD = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "input_json_delta": "partial_json",
    "citations_delta": "citation",
}


class AnthropicTap(Tap):
    """Marks token-bearing deltas, reads usage from message_start / message_delta, and the stop."""

    __slots__ = ("_tool_ids",)
    connection_error = anthropic.APIConnectionError

    def __init__(self, timer: CallTimer) -> None:
        super().__init__(timer)
        self._tool_ids: dict[int, str] = {}

    def __call__(self, event: Any) -> bool:
        timer = self.timer
        kind = event.type
        if kind == "content_block_delta":
            delta = event.delta
            dtype = delta.type
            if dtype == "text_delta":  # the common case first
                text = delta.text
                if text:
                    self.texts.append(text)
                timer.event(bool(text))
            elif dtype == "input_json_delta":
                piece = delta.partial_json
                if piece:
                    key = self._tool_ids.get(event.index) or str(event.index)
                    self.tools.setdefault(key, []).append(piece)
                timer.event(bool(piece))
            else:
                field = _TOKEN_FIELD.get(dtype)
                timer.event(field is not None and bool(getattr(delta, field, None)))
            return True
        timer.event(False)
        if kind == "content_block_start":
            block = event.content_block
            if block.type in ("tool_use", "server_tool_use"):
                self._tool_ids[event.index] = block.id
                self.tools.setdefault(block.id, [])
        elif kind == "message_start":
            rec = timer.record
            msg = event.message
            rec.response_model = msg.model
            rec.response_id = msg.id
            self.usage = msg.usage
            apply_anthropic_usage(rec, msg.usage)
            _read_diagnostics(rec, getattr(msg, "diagnostics", None))
        elif kind == "message_delta":
            rec = timer.record
            # Usage on message_delta is cumulative: the last one wins.
            self.usage = event.usage
            apply_anthropic_usage(rec, event.usage)
            reason = event.delta.stop_reason
            if reason:
                rec.finish_reasons = (reason,)
        elif kind == "message_stop":
            timer.terminal()
        return True

    def new_attempt(self) -> None:
        """Forget what an abandoned attempt delivered."""
        super().new_attempt()
        self._tool_ids = {}


class MessageAccumulator:
    """Folds raw stream events into the ``Message`` a non-streaming call returns (SDK accumulator)."""

    __slots__ = ("_snapshot", "_json_bufs")

    def __init__(self) -> None:
        self._snapshot: Any = None
        self._json_bufs: dict[int, bytes] = {}

    def feed(self, event: Any) -> None:
        """Accumulate one raw event."""
        self._snapshot = accumulate_event(event=event, current_snapshot=self._snapshot, json_bufs=self._json_bufs)

    def snapshot(self) -> Optional[Message]:
        """The message so far, or ``None`` before ``message_start``."""
        return None if self._snapshot is None else Message.construct(**self._snapshot.to_dict())

    def result(self, complete: bool) -> Message:
        """The reassembled ``anthropic.types.Message``; raises if the stream was cut short."""
        partial = self.snapshot()
        if not complete or partial is None:
            raise IncompleteStreamError("the stream ended before message_stop", partial)
        return partial


def _read_diagnostics(rec: CallRecord, diagnostics: Any) -> None:
    """Record the server's cache-diagnostics verdict when the request asked for one."""
    if diagnostics is None:
        return
    reason = getattr(diagnostics, "cache_miss_reason", None)
    rec.server_cache_miss_reason = "pending" if reason is None else str(getattr(reason, "type", "unknown"))
    missed = getattr(reason, "cache_missed_input_tokens", None)
    if isinstance(missed, int):
        rec.extra["server_cache_missed_input_tokens"] = missed


def _on_message(rec: CallRecord, message: Any) -> None:
    rec.response_model = getattr(message, "model", None)
    rec.response_id = getattr(message, "id", None)
    apply_anthropic_usage(rec, getattr(message, "usage", None))
    _read_diagnostics(rec, getattr(message, "diagnostics", None))
    reason = getattr(message, "stop_reason", None)
    if reason:
        rec.finish_reasons = (reason,)


def _not_streamable(kwargs: dict[str, Any]) -> Optional[str]:
    """Why a create() call must go as the caller sent it, or ``None`` to stream it."""
    if kwargs.get("max_tokens") == 0:
        return "max_tokens=0 (cache pre-warm) is rejected with stream=true"
    extra = kwargs.get("extra_body")
    if isinstance(extra, dict) and "stream" in extra:
        return "stream set through extra_body"
    return None


def _begin(
    client: Any, method: str, kwargs: dict[str, Any], reason: Optional[str] = None, finish: Optional[Finish] = None
) -> CallTimer:
    return begin(
        client,
        api=_API,
        method=method,
        model=kwargs.get("model"),
        streamed=reason is None,
        reason=reason,
        finish=finish,
        request=kwargs,
    )


def _stream_hook(client: Any, kwargs: dict[str, Any], method: str, finish: Optional[Finish]) -> Callable[[Callable[[], Any]], Any]:
    """Time the call from the moment the ``with`` block opens; hold back until the first token."""

    def hook(enter: Callable[[], Any]) -> Any:
        tap = AnthropicTap(_begin(client, method, kwargs, finish=finish))
        policy = client._lk.retry
        if policy is None:
            return open_stream(tap, enter, raw_of=_raw_stream)
        return open_stream_retrying(tap, enter, policy, attempts(client), raw_of=_raw_stream)

    return hook


def _async_stream_hook(
    client: Any, kwargs: dict[str, Any], method: str, finish: Optional[Finish]
) -> Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]:
    """Async twin of `_stream_hook`."""

    async def hook(enter: Callable[[], Awaitable[Any]]) -> Any:
        tap = AnthropicTap(_begin(client, method, kwargs, finish=finish))
        policy = client._lk.retry
        if policy is None:
            return await aopen_stream(tap, enter, raw_of=_raw_stream)
        return await aopen_stream_retrying(tap, enter, policy, attempts(client), raw_of=_raw_stream)

    return hook


def _raw_stream(helper: Any) -> Any:
    return helper._raw_stream


class _Messages(Messages):
    """``client.messages`` that always streams and times every call."""

    def create(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return super().create(**kwargs)
        client: Any = self._client
        kwargs, finish = prepare(client, _API, kwargs)
        reason = _not_streamable(kwargs)
        if reason is not None:
            timer = _begin(client, "create", kwargs, reason, finish)
            return passthrough(timer, lambda: super(_Messages, self).create(**kwargs), _on_message)
        caller_streams = given(kwargs.get("stream")) and bool(kwargs["stream"])
        tap = AnthropicTap(_begin(client, "create(stream=True)" if caller_streams else "create", kwargs, finish=finish))
        target = sdk_client(client).messages
        request = {**kwargs, "stream": True}
        send = lambda: Messages.create(target, **request)  # noqa: E731
        policy = client._lk.retry
        if caller_streams:
            if policy is None:
                return open_stream(tap, send)
            return open_stream_retrying(tap, send, policy, attempts(client))
        return complete_retrying(tap, send, policy or _ONCE, attempts(client), MessageAccumulator)

    def stream(self, **kwargs: Any) -> Any:
        kwargs, finish = prepare(self._client, _API, kwargs)
        inner = Messages.stream(sdk_client(self._client).messages, **kwargs)
        return wrap_manager(inner, _stream_hook(self._client, kwargs, "stream", finish))

    def parse(self, **kwargs: Any) -> Any:
        # Structured output through the SDK's stream helper: it parses at content_block_stop,
        # as parse() does at the end, and returns the same ParsedMessage.
        if raw_response_requested(kwargs):
            return super().parse(**kwargs)
        kwargs, finish = prepare(self._client, _API, kwargs)
        inner = Messages.stream(sdk_client(self._client).messages, **kwargs)
        with wrap_manager(inner, _stream_hook(self._client, kwargs, "parse", finish)) as stream:
            return stream.get_final_message()


def _remake(client: Any, kwargs: dict[str, Any]) -> Callable[[], Any]:
    """A fresh SDK stream manager per attempt: an async one awaits a coroutine made once."""

    def remake() -> Any:
        return AsyncMessages.stream(sdk_client(client).messages, **kwargs)

    return remake


class _AsyncMessages(AsyncMessages):
    """Async ``client.messages`` that always streams and times every call."""

    async def create(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return await super().create(**kwargs)
        client: Any = self._client
        kwargs, finish = prepare(client, _API, kwargs)
        reason = _not_streamable(kwargs)
        if reason is not None:
            timer = _begin(client, "create", kwargs, reason, finish)
            return await apassthrough(timer, lambda: super(_AsyncMessages, self).create(**kwargs), _on_message)
        caller_streams = given(kwargs.get("stream")) and bool(kwargs["stream"])
        tap = AnthropicTap(_begin(client, "create(stream=True)" if caller_streams else "create", kwargs, finish=finish))
        target = sdk_client(client).messages
        request = {**kwargs, "stream": True}
        send = lambda: AsyncMessages.create(target, **request)  # noqa: E731
        policy = client._lk.retry
        if caller_streams:
            if policy is None:
                return await aopen_stream(tap, send)
            return await aopen_stream_retrying(tap, send, policy, attempts(client))
        return await acomplete_retrying(tap, send, policy or _ONCE, attempts(client), MessageAccumulator)

    def stream(self, **kwargs: Any) -> Any:
        kwargs, finish = prepare(self._client, _API, kwargs)
        remake = _remake(self._client, kwargs)
        return wrap_async_manager(remake(), _async_stream_hook(self._client, kwargs, "stream", finish), remake)

    async def parse(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return await super().parse(**kwargs)
        kwargs, finish = prepare(self._client, _API, kwargs)
        remake = _remake(self._client, kwargs)
        async with wrap_async_manager(remake(), _async_stream_hook(self._client, kwargs, "parse", finish), remake) as stream:
            return await stream.get_final_message()


RESOURCES = {"messages": _Messages}
ASYNC_RESOURCES = {"messages": _AsyncMessages}

if TYPE_CHECKING:

    class Anthropic(LatencyClientOptions, anthropic.Anthropic):
        """``anthropic.Anthropic`` that always streams and records every call in ``client.latency``."""

    class AsyncAnthropic(LatencyClientOptions, anthropic.AsyncAnthropic):
        """``anthropic.AsyncAnthropic`` that always streams and records every call in ``client.latency``."""

else:
    Anthropic = client_class(
        anthropic.Anthropic,
        RESOURCES,
        "anthropic",
        "``anthropic.Anthropic`` that always streams and records every call in ``client.latency``.\n\n"
        "Takes exactly the SDK's constructor arguments, plus ``recorder=`` (a shared `Recorder`) and ``cache=`` (a `CachePolicy`, ``\"auto\"`` or ``\"off\"``).",
    )
    AsyncAnthropic = client_class(
        anthropic.AsyncAnthropic,
        ASYNC_RESOURCES,
        "anthropic",
        "``anthropic.AsyncAnthropic`` that always streams and records every call in ``client.latency``.\n\n"
        "Takes exactly the SDK's constructor arguments, plus ``recorder=`` (a shared `Recorder`) and ``cache=`` (a `CachePolicy`, ``\"auto\"`` or ``\"off\"``).",
    )
