"""Anthropic Messages: the event tap, the observed ``messages`` / ``beta.messages`` resources, and the clients.

``messages.create(stream=False)`` is sent as a stream and reassembled with the SDK's own
``accumulate_event`` into the exact ``anthropic.types.Message``; ``create(stream=True)``
returns the SDK's ``Stream`` observed in place; ``messages.stream()`` returns the SDK's
``MessageStreamManager`` whose raw stream is observed when the ``with`` block opens.
``beta.messages`` is the same with the SDK's beta accumulator and ``BetaMessage`` types.
Raw responses and ``client.post()`` calls are recorded by the client's ``request()`` (`_http`).
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any, AsyncIterable, AsyncIterator, Awaitable, Callable, ClassVar, Iterable, Iterator, Mapping, Optional, Sequence

import anthropic
from anthropic.lib.streaming._beta_messages import accumulate_event as accumulate_beta_event
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.resources.beta import AsyncBeta, Beta
from anthropic.resources.beta.messages import AsyncMessages as AsyncBetaMessages, Messages as BetaMessages
from anthropic.resources.messages import AsyncMessages, Messages
from anthropic.types import Message, RawMessageStreamEvent
from anthropic.types.beta import BetaMessage, BetaRawMessageStreamEvent

from ..core._errors import EndedEarly
from ..core._record import CallRecord
from ..core._text_tokens import estimate_streamed_tokens
from ..core._timing import THINKING, CallTimer
from ..core._usage import _field, apply_anthropic_usage
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
from ._http import Endpoint
from ._managers import wrap_async_manager, wrap_manager
from ._streams import aopen_stream, open_stream
from ._tap import Tap, raise_failure, raise_if_cut, tap_failed

__all__ = ["Anthropic", "AsyncAnthropic", "AnthropicTap", "MessageAccumulator", "BetaMessageAccumulator"]

_API = "messages"

# Which attribute of a content_block_delta carries generated output, per delta type.
# signature_delta carries no token; unknown delta types are conservatively not tokens.
_TOKEN_FIELD = {
    "text_delta": "text",
    "input_json_delta": "partial_json",
    "citations_delta": "citation",
    "compaction_delta": "content",  # the server's summary of earlier context: generated output
}
# Blocks whose input streams as input_json_delta, keyed by their id in the partial output.
_TOOL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
# Blocks that hold the model's thinking, streamed in full, summarized, omitted or redacted.
_THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})


class AnthropicTap(Tap):
    """Marks token-bearing deltas, reads usage from message_start / message_delta, and the stop."""

    __slots__ = ("_tool_ids", "_thinking", "_thought")
    connection_error = anthropic.APIConnectionError
    api_error = anthropic.APIError

    def __init__(self, timer: CallTimer) -> None:
        super().__init__(timer)
        self._tool_ids: Optional[dict[int, str]] = None
        """Tool-use block index → its id (made by the first tool block)."""
        self._thinking: Optional[list[str]] = None
        """Streamed thinking text, kept only to estimate its size at the end (made by the first piece)."""
        self._thought = False

    def __call__(self, event: Any) -> bool:
        kind = event.type
        if kind == "content_block_delta":  # the hot path: nothing read that it does not need
            delta = event.delta
            dtype = delta.type
            if dtype == "text_delta":  # the common case first
                text = delta.text
                if text:
                    self.texts.append(text)
                    self._stamp(self._now())
                else:
                    self.timer.event(False)
            elif dtype == "input_json_delta":
                piece = delta.partial_json
                if piece:
                    key = (self._tool_ids or {}).get(event.index) or str(event.index)
                    self.tool_input(key).append(piece)
                self.timer.event(bool(piece))
            elif dtype == "thinking_delta":
                thought = delta.thinking
                if thought:
                    if self._thinking is None:
                        self._thinking = []
                    self._thinking.append(thought)
                    self.timer.reasoning(THINKING)
                else:
                    self.timer.event(False)
            else:
                field = _TOKEN_FIELD.get(dtype)
                self.timer.event(field is not None and bool(getattr(delta, field, None)))
            return True
        timer = self.timer
        timer.event(False)
        if kind == "content_block_start":
            block = event.content_block
            if block.type in _THINKING_BLOCKS:
                timer.reasoning_block(THINKING)
                self._thought = True
            elif block.type in _TOOL_BLOCKS:
                if self._tool_ids is None:
                    self._tool_ids = {}
                self._tool_ids[event.index] = block.id
                self.tool_input(block.id)
        elif kind == "message_start":
            rec = timer.record
            msg = event.message
            rec.response_model = msg.model
            rec.response_id = msg.id
            self.usage = msg.usage
            # message_start's output_tokens is a placeholder (1, or so): only message_delta counts.
            apply_anthropic_usage(rec, msg.usage, placeholder_output=True)
            _read_diagnostics(rec, _field(msg, "diagnostics"))
        elif kind == "message_delta":
            rec = timer.record
            # Usage on message_delta is cumulative: the last one wins.
            self.usage = event.usage
            apply_anthropic_usage(rec, event.usage)
            reason = event.delta.stop_reason
            if reason:
                rec.finish_reasons = (reason,)
        elif kind == "message_stop":
            if self._thought:
                self._estimate_streamed()
            timer.terminal()
        return True

    def _estimate_streamed(self) -> None:
        """Tell the timer how many tokens the streamed thinking and answer hold (estimated from
        their text): whether ``output_tokens`` bills more thinking than was streamed (a summary)
        can only be judged that way (`core._timing`, `core._text_tokens`)."""
        thinking = self._thinking or []
        answer = self.texts
        tools = [piece for pieces in (self.tools or {}).values() for piece in pieces]
        self.timer.streamed_estimate = (
            estimate_streamed_tokens("".join(thinking), len(thinking)),
            estimate_streamed_tokens("".join(answer) + "".join(tools), len(answer) + len(tools)),
        )

    def new_attempt(self) -> None:
        """Forget what an abandoned attempt delivered."""
        super().new_attempt()
        self._tool_ids = None
        self._thinking = None
        self._thought = False

    # The loop of `Tap.relay` with its commonest event, a text delta, handled inline (as
    # ``__call__`` handles it): nine events in ten, each spared a call. In situ, between the
    # SDK's own ~25 µs of parsing per event, that call costs more than the work it does.
    def relay(self, stream: Any, events: Iterable[Any], replay: list[Any]) -> Iterator[Any]:
        see, texts, stamp, now = self.__call__, self.texts, self._stamp, self._now
        try:
            while replay:  # handed on one by one: the caller, not the relay, holds them now
                yield replay.pop(0)
            for event in events:
                try:
                    if event.type == "content_block_delta" and (delta := event.delta).type == "text_delta" and (text := delta.text):
                        texts.append(text)
                        stamp(now())
                    elif not see(event):
                        continue
                except Exception:
                    tap_failed(self)  # logged once; the event still reaches the caller
                yield event
        except GeneratorExit:
            raise
        except BaseException as exc:
            raise_failure(self, exc, stream)
        raise_if_cut(self, stream)

    async def arelay(self, stream: Any, events: AsyncIterable[Any], replay: list[Any]) -> AsyncIterator[Any]:
        see, texts, stamp, now = self.__call__, self.texts, self._stamp, self._now
        try:
            while replay:
                yield replay.pop(0)
            async for event in events:
                try:
                    if event.type == "content_block_delta" and (delta := event.delta).type == "text_delta" and (text := delta.text):
                        texts.append(text)
                        stamp(now())
                    elif not see(event):
                        continue
                except Exception:
                    tap_failed(self)  # logged once; the event still reaches the caller
                yield event
        except GeneratorExit:
            raise
        except BaseException as exc:
            raise_failure(self, exc, stream)
        raise_if_cut(self, stream)


class MessageAccumulator:
    """Folds raw stream events into the ``Message`` a non-streaming call returns (SDK accumulator)."""

    __slots__ = ("_snapshot", "_json_bufs")
    message_type: ClassVar[Any] = Message
    """What the snapshot is built as (``BetaMessage`` for ``beta.messages``)."""

    def __init__(self) -> None:
        self._snapshot: Any = None
        self._json_bufs: dict[int, bytes] = {}

    def feed(self, event: Any) -> None:
        """Accumulate one raw event."""
        self._snapshot = accumulate_event(event=event, current_snapshot=self._snapshot, json_bufs=self._json_bufs)

    def snapshot(self) -> Optional[Message]:
        """The message so far, or ``None`` before ``message_start``."""
        if self._snapshot is None:
            return None
        # warnings=False: blocks the installed SDK does not model (compaction, MCP tool use, ...)
        # serialize as they came, as the SDK's own get_final_message() keeps them, without
        # pydantic's "unexpected value" UserWarning.
        message: Message = self.message_type.construct(**self._snapshot.to_dict(warnings=False))
        return message

    def result(self, complete: bool) -> Message:
        """The reassembled ``anthropic.types.Message``; raises if the stream was cut short."""
        partial = self.snapshot()
        if not complete or partial is None:
            raise EndedEarly("the stream ended before message_stop", partial)
        return partial


class BetaMessageAccumulator(MessageAccumulator):
    """`MessageAccumulator` for ``beta.messages``: the SDK's beta accumulator, a ``BetaMessage``."""

    __slots__ = ("_headers",)
    message_type = BetaMessage

    def __init__(self, kwargs: Mapping[str, Any]) -> None:
        super().__init__()
        # The beta accumulator reads the request's anthropic-beta header (fine-grained tool
        # streaming changes how partial tool JSON is parsed): rebuilt as the SDK sends it.
        self._headers: Any = {"anthropic-beta": _beta_header(kwargs)}

    def feed(self, event: Any) -> None:
        """Accumulate one raw event."""
        self._snapshot = accumulate_beta_event(
            event=event, current_snapshot=self._snapshot, json_bufs=self._json_bufs, request_headers=self._headers
        )


def _beta_header(kwargs: Mapping[str, Any]) -> str:
    """The ``anthropic-beta`` header a ``beta.messages`` call sends: ``betas=``, unless ``extra_headers`` sets it."""
    betas = kwargs.get("betas")
    value = ",".join(str(b) for b in betas) if given(betas) and betas is not None else ""
    extra = kwargs.get("extra_headers")
    if isinstance(extra, Mapping):
        for key, item in extra.items():
            if isinstance(key, str) and key.lower() == "anthropic-beta" and isinstance(item, str):
                value = item
    return value


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
    _read_diagnostics(rec, _field(message, "diagnostics"))
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


class _Flavor:
    """What differs between ``messages`` and ``beta.messages``: the SDK methods and the accumulator."""

    __slots__ = ("target", "create", "stream", "acreate", "astream", "accumulator")

    def __init__(self, target: Callable[[Any], Any], sync_cls: Any, async_cls: Any, accumulator: Callable[[dict[str, Any]], Any]) -> None:
        self.target = target
        self.create, self.stream = sync_cls.create, sync_cls.stream
        self.acreate, self.astream = async_cls.create, async_cls.stream
        self.accumulator = accumulator


_PLAIN = _Flavor(lambda client: client.messages, Messages, AsyncMessages, lambda kwargs: MessageAccumulator())
_BETA = _Flavor(lambda client: client.beta.messages, BetaMessages, AsyncBetaMessages, lambda kwargs: BetaMessageAccumulator(kwargs))


def _create(flavor: _Flavor, resource: Any, kwargs: dict[str, Any]) -> Any:
    """One ``create()``: streamed and reassembled, or passed through (sync)."""
    if raw_response_requested(kwargs):
        return flavor.create(resource, **kwargs)  # a raw response: recorded by the client's request()
    client: Any = resource._client
    kwargs, finish = prepare(client, _API, kwargs)
    reason = _not_streamable(kwargs)
    if reason is not None:
        timer = _begin(client, "create", kwargs, reason, finish)
        return passthrough(timer, lambda: flavor.create(resource, **kwargs), _on_message)
    caller_streams = given(kwargs.get("stream")) and bool(kwargs["stream"])
    tap = AnthropicTap(_begin(client, "create(stream=True)" if caller_streams else "create", kwargs, finish=finish))
    target = flavor.target(sdk_client(client))
    request = {**kwargs, "stream": True}
    send = lambda: flavor.create(target, **request)  # noqa: E731
    policy = client._lk.retry
    if caller_streams:
        if policy is None:
            return open_stream(tap, send)
        return open_stream_retrying(tap, send, policy, attempts(client))
    return complete_retrying(tap, send, policy or _ONCE, attempts(client), lambda: flavor.accumulator(kwargs))


async def _acreate(flavor: _Flavor, resource: Any, kwargs: dict[str, Any]) -> Any:
    """Async twin of `_create`."""
    if raw_response_requested(kwargs):
        return await flavor.acreate(resource, **kwargs)
    client: Any = resource._client
    kwargs, finish = prepare(client, _API, kwargs)
    reason = _not_streamable(kwargs)
    if reason is not None:
        timer = _begin(client, "create", kwargs, reason, finish)
        return await apassthrough(timer, lambda: flavor.acreate(resource, **kwargs), _on_message)
    caller_streams = given(kwargs.get("stream")) and bool(kwargs["stream"])
    tap = AnthropicTap(_begin(client, "create(stream=True)" if caller_streams else "create", kwargs, finish=finish))
    target = flavor.target(sdk_client(client))
    request = {**kwargs, "stream": True}
    send = lambda: flavor.acreate(target, **request)  # noqa: E731
    policy = client._lk.retry
    if caller_streams:
        if policy is None:
            return await aopen_stream(tap, send)
        return await aopen_stream_retrying(tap, send, policy, attempts(client))
    return await acomplete_retrying(tap, send, policy or _ONCE, attempts(client), lambda: flavor.accumulator(kwargs))


def _stream(flavor: _Flavor, resource: Any, kwargs: dict[str, Any], method: str = "stream") -> Any:
    """The SDK's stream manager, observed from the moment its ``with`` block opens."""
    client: Any = resource._client
    kwargs, finish = prepare(client, _API, kwargs)
    inner = flavor.stream(flavor.target(sdk_client(client)), **kwargs)
    return wrap_manager(inner, _stream_hook(client, kwargs, method, finish))


def _astream(flavor: _Flavor, resource: Any, kwargs: dict[str, Any], method: str = "stream") -> Any:
    """Async twin of `_stream`: a fresh SDK manager per attempt (an async one awaits a coroutine made once)."""
    client: Any = resource._client
    kwargs, finish = prepare(client, _API, kwargs)

    def remake() -> Any:
        return flavor.astream(flavor.target(sdk_client(client)), **kwargs)

    return wrap_async_manager(remake(), _async_stream_hook(client, kwargs, method, finish), remake)


def _parse(flavor: _Flavor, resource: Any, base: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    # Structured output through the SDK's stream helper: it parses at content_block_stop,
    # as parse() does at the end, and returns the same ParsedMessage.
    if raw_response_requested(kwargs):
        return base(resource, **kwargs)
    with _stream(flavor, resource, kwargs, "parse") as stream:
        return stream.get_final_message()


async def _aparse(flavor: _Flavor, resource: Any, base: Callable[..., Awaitable[Any]], kwargs: dict[str, Any]) -> Any:
    if raw_response_requested(kwargs):
        return await base(resource, **kwargs)
    async with _astream(flavor, resource, kwargs, "parse") as stream:
        return await stream.get_final_message()


class _Messages(Messages):
    """``client.messages`` that always streams and times every call."""

    def create(self, **kwargs: Any) -> Any:
        return _create(_PLAIN, self, kwargs)

    def stream(self, **kwargs: Any) -> Any:
        return _stream(_PLAIN, self, kwargs)

    def parse(self, **kwargs: Any) -> Any:
        return _parse(_PLAIN, self, Messages.parse, kwargs)


class _AsyncMessages(AsyncMessages):
    """Async ``client.messages`` that always streams and times every call."""

    async def create(self, **kwargs: Any) -> Any:
        return await _acreate(_PLAIN, self, kwargs)

    def stream(self, **kwargs: Any) -> Any:
        return _astream(_PLAIN, self, kwargs)

    async def parse(self, **kwargs: Any) -> Any:
        return await _aparse(_PLAIN, self, AsyncMessages.parse, kwargs)


class _BetaMessages(BetaMessages):
    """``client.beta.messages`` that always streams and times every call (``BetaMessage`` types)."""

    def create(self, **kwargs: Any) -> Any:
        return _create(_BETA, self, kwargs)

    def stream(self, **kwargs: Any) -> Any:
        return _stream(_BETA, self, kwargs)

    def parse(self, **kwargs: Any) -> Any:
        return _parse(_BETA, self, BetaMessages.parse, kwargs)


class _AsyncBetaMessages(AsyncBetaMessages):
    """Async ``client.beta.messages`` that always streams and times every call."""

    async def create(self, **kwargs: Any) -> Any:
        return await _acreate(_BETA, self, kwargs)

    def stream(self, **kwargs: Any) -> Any:
        return _astream(_BETA, self, kwargs)

    async def parse(self, **kwargs: Any) -> Any:
        return await _aparse(_BETA, self, AsyncBetaMessages.parse, kwargs)


class _Beta(Beta):
    @cached_property
    def messages(self) -> BetaMessages:
        """The observed beta Messages resource."""
        return _BetaMessages(self._client)


class _AsyncBeta(AsyncBeta):
    @cached_property
    def messages(self) -> AsyncBetaMessages:
        """The observed async beta Messages resource."""
        return _AsyncBetaMessages(self._client)


RESOURCES = {"messages": _Messages, "beta": _Beta}
ASYNC_RESOURCES = {"messages": _AsyncMessages, "beta": _AsyncBeta}
ENDPOINTS = {"/messages": Endpoint("messages", AnthropicTap, _on_message, Message)}

def _deltas(kind: str, field: str) -> list[dict[str, Any]]:
    """Probes of one ``content_block_delta`` shape: other values, an empty one, non-ASCII text."""
    return [
        {"type": "content_block_delta", "index": index, "delta": {"type": kind, field: text}}
        for index, text in ((0, "Hello"), (3, ""), (1, " naïve 世界 🙂\n\"quoted\""))
    ]


_DELTAS = [_deltas("text_delta", "text"), _deltas("input_json_delta", "partial_json"), _deltas("thinking_delta", "thinking")]
SHAPES = {RawMessageStreamEvent: _DELTAS, BetaRawMessageStreamEvent: _DELTAS}
"""The stream events built directly once checked against the SDK (`_fast_models`): the deltas of
text, tool input and thinking, nearly every event of a stream."""
"""Calls to ``…/messages`` that no observed method sent (raw responses, ``client.post()``) are recorded by ``request()``."""

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
        endpoints=ENDPOINTS,
        shapes=SHAPES,
    )
    AsyncAnthropic = client_class(
        anthropic.AsyncAnthropic,
        ASYNC_RESOURCES,
        "anthropic",
        "``anthropic.AsyncAnthropic`` that always streams and records every call in ``client.latency``.\n\n"
        "Takes exactly the SDK's constructor arguments, plus ``recorder=`` (a shared `Recorder`) and ``cache=`` (a `CachePolicy`, ``\"auto\"`` or ``\"off\"``).",
        endpoints=ENDPOINTS,
        shapes=SHAPES,
    )
