"""Raw responses observed in place: the SDK's ``APIResponse`` / ``LegacyAPIResponse``, re-classed.

``with_raw_response`` and ``with_streaming_response`` (and LiteLLM's ``client.post()``) hand the
caller the SDK's raw-response object, not the parsed result. latencykit keeps that object and
its exact class (re-classed to a direct subclass that adds no state, as `_streams` does for
streams) and hooks the three moments that matter:

- ``parse()`` of a streamed call returns the SDK ``Stream`` — observed with the call's tap, so
  TTFT, tokens and usage are read as the caller iterates;
- ``read()`` (which ``parse()``, ``text()`` and ``json()`` call) of a non-streamed body whose
  read was deferred (``with_streaming_response``) ends the call: E2E, usage from the body;
- ``close()`` (leaving the ``with`` block) ends a call nobody finished: abandoned if the body
  was never read or a parsed stream was left mid-way; completed (E2E only) if the caller read
  the body itself with ``iter_bytes()`` / ``iter_lines()``. A raw response dropped unread is
  finalized (abandoned) when collected.

A body the SDK has already read (``with_raw_response`` of a non-streaming call) is recorded
at once, with no re-classing.
"""

from __future__ import annotations

import inspect
import weakref
from typing import Any, Callable, Optional, Protocol

import anthropic
import openai
from anthropic._response import BaseAPIResponse as _AntBase
from openai._legacy_response import LegacyAPIResponse as _OaiLegacy
from openai._response import BaseAPIResponse as _OaiBase

from ..core._timing import CallTimer
from ._calls import safe
from ._streams import observe_stream
from ._tap import Tap



class HttpCall(Protocol):
    """What this module needs of the call `_http` caught (its ``HttpCall``)."""

    stream: bool
    timer: CallTimer
    tap: Tap

    def finish_body(self, content: Optional[bytes]) -> None: ...

__all__ = ["is_raw_response", "is_sdk_stream", "observe_response"]


_STREAMS = (anthropic.Stream, anthropic.AsyncStream, openai.Stream, openai.AsyncStream)
_RAW = (_AntBase, _OaiBase, _OaiLegacy)
_CALL = "_lk_call"
_FINALIZER = "_lk_finalizer"


def is_sdk_stream(obj: object) -> bool:
    """Whether ``obj`` is an SDK ``Stream`` / ``AsyncStream``."""
    return isinstance(obj, _STREAMS)


def is_raw_response(obj: object) -> bool:
    """Whether ``obj`` is an SDK raw response (``APIResponse``, ``AsyncAPIResponse``, ``LegacyAPIResponse``)."""
    return isinstance(obj, _RAW)


def _body(http: Any) -> Optional[bytes]:
    """The body if it has been read and kept, else ``None``."""
    try:
        content = http.content
    except Exception:  # httpx's ResponseNotRead: streamed, not read (yet)
        return None
    return bytes(content) if isinstance(content, (bytes, bytearray)) else None


def _consumed(http: Any) -> bool:
    return bool(getattr(http, "is_stream_consumed", False)) or _body(http) is not None


def observe_response(response: Any, call: HttpCall) -> Any:
    """Record ``response`` (a raw response ``call`` got back) now, or when its body is read."""
    http = response.http_response
    if not call.stream and _body(http) is not None:
        call.finish_body(_body(http))
        return response
    response.__class__ = _observed_class(type(response))
    response.__dict__[_CALL] = call
    response.__dict__[_FINALIZER] = weakref.finalize(response, call.timer.abandon)
    return response


# -- the hooks -------------------------------------------------------------------------------


def _after_parse(response: Any, parsed: Any) -> None:
    call: HttpCall = response.__dict__[_CALL]
    if call.stream and is_sdk_stream(parsed):
        observe_stream(parsed, call.tap)  # once per stream; the stream now finalizes the record
        response.__dict__[_FINALIZER].detach()


def _after_read(response: Any, content: Any) -> None:
    call: HttpCall = response.__dict__[_CALL]
    if call.timer.finished:
        return
    if call.stream:
        call.timer.complete()  # the caller read the event stream as bytes: E2E only
    else:
        call.finish_body(bytes(content) if isinstance(content, (bytes, bytearray)) else _body(response.http_response))


def _after_close(response: Any, _: Any) -> None:
    call: HttpCall = response.__dict__[_CALL]
    if call.timer.finished:
        return
    http = response.http_response
    parsed = call.stream and not response.__dict__[_FINALIZER].alive
    if parsed or not _consumed(http):
        call.timer.abandon()  # left the block mid-stream, or never read the body
    elif call.stream:
        call.timer.complete()  # read as bytes with iter_lines() / iter_bytes(): E2E only
    else:
        call.finish_body(_body(http))  # consumed with iter_bytes() / iter_lines(): E2E, no usage


_HOOKS: dict[str, Callable[[Any, Any], None]] = {"parse": _after_parse, "read": _after_read, "close": _after_close}


def _hooked(base: Callable[..., Any], after: Callable[[Any, Any], None]) -> Callable[..., Any]:
    """``base`` (sync or async) followed by ``after``; a failure of ``base`` ends the call."""

    def failed(self: Any, exc: BaseException) -> None:
        call: HttpCall = self.__dict__[_CALL]
        if not call.timer.finished:
            call.timer.fail(exc)

    if inspect.iscoroutinefunction(base):

        async def amethod(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                result = await base(self, *args, **kwargs)
            except BaseException as exc:
                failed(self, exc)
                raise
            safe(after, self, result, "observe a raw response")
            return result

        return amethod

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            result = base(self, *args, **kwargs)
        except BaseException as exc:
            failed(self, exc)
            raise
        safe(after, self, result, "observe a raw response")
        return result

    return method





_classes: dict[type, type] = {}


def _observed_class(cls: type) -> type:
    sub = _classes.get(cls)
    if sub is None:
        methods = {name: _hooked(getattr(cls, name), after) for name, after in _HOOKS.items() if hasattr(cls, name)}
        # A direct subclass with no new slots keeps the layout, so __class__ may be reassigned.
        namespace = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__slots__": (), **methods}
        sub = type(cls.__name__, (cls,), namespace)
        _classes[cls] = sub
    return sub
