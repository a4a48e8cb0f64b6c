"""Stream shells: observe an SDK ``Stream`` / ``AsyncStream`` in place, keeping its exact type.

The SDK builds the stream object itself, so latencykit re-classes that instance to a
subclass of its own class (``Stream`` → ``Observed[Stream]``) that adds one tap per event
and finalizes the call record on every exit path: exhaustion, error, ``close()``, leaving a
``with`` block, cancellation, or garbage collection (the subclass's ``__del__``). The
subclass adds no state to the layout and overrides only public methods, so
``isinstance(s, anthropic.Stream)``, ``s.response``, the SDK helpers that wrap a raw stream
(``MessageStream``, ``ChatCompletionStream``, ``ResponseStream``) and ``with`` all keep working.
The sync and async shells only iterate; all decisions live in the tap and the timer.
"""

from __future__ import annotations

import atexit
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, Optional, Sequence, TypeVar

from ._calls import sending
from ._tap import Tap, end_of_events, raise_failure, tap_failed

__all__ = ["observe_stream", "is_observed", "open_stream", "aopen_stream", "item_reader", "TAP_ATTR"]

S = TypeVar("S")

TAP_ATTR = _TAP = "_lk_tap"
_REPLAY = "_lk_replay"
_NOTHING: list[Any] = []
"""No events to replay (shared: a relay only pops from a non-empty list, so it is never changed)."""


def _tapped(tap: Tap, item: Any) -> bool:
    """Run the tap; a measurement failure is logged once per call and never breaks the stream."""
    try:
        return tap.__call__(item)  # a method call: cheaper than calling the instance
    except Exception:
        return tap_failed(tap)


# The SDKs' own ``__iter__`` / ``__aiter__`` only re-yield ``self._iterator`` (anthropic also
# hands each item to its tracing observer when one is set). Where the installed SDK's method
# is exactly one of these, an observed stream iterates ``self._iterator`` itself: the same
# items in the same order, without a second generator and a property lookup per event
# (about 0.3 µs each). Anything else (another SDK version, a subclass that overrides
# iteration, an observer set) goes through the SDK's method.
def _reyield(self: Any) -> Any:
    for item in self._iterator:
        yield item


def _reyield_observed(self: Any) -> Any:
    for item in self._iterator:
        if (observer := self._observer) is not None:
            observer.item(item)
        yield item


async def _areyield(self: Any) -> Any:
    async for item in self._iterator:
        yield item


async def _areyield_observed(self: Any) -> Any:
    async for item in self._iterator:
        if (observer := self._observer) is not None:
            observer.item(item)
        yield item


# Likewise their ``__next__`` / ``__anext__`` (read one item: how latencykit reads the events
# it holds back until the first token): where the installed SDK's method is exactly one of
# these, the item is read from ``self._iterator`` directly, without a coroutine per event.
def _next_plain(self: Any) -> Any:
    return self._iterator.__next__()


def _next_observed(self: Any) -> Any:
    item = self._iterator.__next__()
    if (observer := self._observer) is not None:
        observer.item(item)
    return item


async def _anext_plain(self: Any) -> Any:
    return await self._iterator.__anext__()


async def _anext_observed(self: Any) -> Any:
    item = await self._iterator.__anext__()
    if (observer := self._observer) is not None:
        observer.item(item)
    return item


def _shape(fn: Any) -> Any:
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    return (code.co_code, code.co_names, code.co_varnames, code.co_consts, code.co_flags)


_PLAIN, _OBSERVED = "plain", "observed"
_UNSEEN: Any = object()
_SHAPES = {
    _shape(_reyield): _PLAIN,
    _shape(_reyield_observed): _OBSERVED,
    _shape(_areyield): _PLAIN,
    _shape(_areyield_observed): _OBSERVED,
}


_NEXT_SHAPES = {
    _shape(_next_plain): _PLAIN,
    _shape(_next_observed): _OBSERVED,
    _shape(_anext_plain): _PLAIN,
    _shape(_anext_observed): _OBSERVED,
}
_next_kinds: dict[type, Optional[str]] = {}


def item_reader(stream: Any) -> Callable[[], Any]:
    """What reads ``stream``'s next item as its own ``__next__`` / ``__anext__`` does (the async
    one returns an awaitable): its ``_iterator``'s method, where that is all the SDK's method
    does (and no observer is set), else the stream's own."""
    cls = type(stream)
    is_async = hasattr(cls, "__anext__")
    kind = _next_kinds.get(cls, _UNSEEN)
    if kind is _UNSEEN:
        kind = _next_kinds[cls] = _NEXT_SHAPES.get(_shape(cls.__anext__ if is_async else cls.__next__))
    source = stream._iterator if _forwards(stream, kind) else stream
    read: Callable[[], Any] = source.__anext__ if is_async else source.__next__
    return read


def _forwards(stream: Any, kind: Optional[str]) -> bool:
    """Whether ``stream``'s method of shape ``kind`` only forwards ``_iterator`` right now
    (anthropic's hands each item to a tracing observer while one is set)."""
    return kind is _PLAIN or (kind is _OBSERVED and stream._observer is None)


def direct_iteration(method: Any) -> Optional[str]:
    """``"plain"`` when ``method`` (a stream class's ``__iter__`` / ``__aiter__``) only re-yields
    ``self._iterator``, ``"observed"`` when it also hands each item to ``self._observer``, else ``None``."""
    return _SHAPES.get(_shape(method))


def _source(self: Any, direct: Optional[str], base: Callable[[Any], Any]) -> Any:
    """What an observed stream iterates: ``self._iterator`` where that is all the SDK's method does."""
    return self._iterator if _forwards(self, direct) else base(self)


def _sync_subclass(cls: type) -> type:
    """``cls`` plus a tap on every item and a finalization on every exit path."""
    base_iter, base_next, base_close = cls.__iter__, cls.__next__, cls.close  # type: ignore[attr-defined]
    direct = direct_iteration(base_iter)

    def __iter__(self: Any) -> Iterator[Any]:
        tap: Tap = self.__dict__[_TAP]
        return tap.relay(self, _source(self, direct, base_iter), self.__dict__.pop(_REPLAY, _NOTHING))

    def __next__(self: Any) -> Any:
        tap: Tap = self.__dict__[_TAP]
        replay = self.__dict__.get(_REPLAY)
        if replay:
            return replay.pop(0)
        while True:
            try:
                item = base_next(self)
            except StopIteration:
                truncated = end_of_events(tap, self)
                if truncated is not None:
                    raise truncated from None
                raise
            except BaseException as exc:
                raise_failure(tap, exc, self)
            if _tapped(tap, item):
                return item

    def close(self: Any) -> None:
        try:
            base_close(self)
        finally:
            self.__dict__[_TAP].timer.abandon()

    return _subclass(cls, {"__iter__": __iter__, "__next__": __next__, "close": close, "__del__": _on_collect(cls)})


def _async_subclass(cls: type) -> type:
    """Async twin of `_sync_subclass`."""
    base_aiter, base_anext, base_close = cls.__aiter__, cls.__anext__, cls.close  # type: ignore[attr-defined]
    direct = direct_iteration(base_aiter)

    def __aiter__(self: Any) -> AsyncIterator[Any]:
        tap: Tap = self.__dict__[_TAP]
        return tap.arelay(self, _source(self, direct, base_aiter), self.__dict__.pop(_REPLAY, _NOTHING))

    async def __anext__(self: Any) -> Any:
        tap: Tap = self.__dict__[_TAP]
        replay = self.__dict__.get(_REPLAY)
        if replay:
            return replay.pop(0)
        while True:
            try:
                item = await base_anext(self)
            except StopAsyncIteration:
                truncated = end_of_events(tap, self)
                if truncated is not None:
                    raise truncated from None
                raise
            except BaseException as exc:
                raise_failure(tap, exc, self)
            if _tapped(tap, item):
                return item

    async def close(self: Any) -> None:
        try:
            await base_close(self)
        finally:
            self.__dict__[_TAP].timer.abandon()

    return _subclass(cls, {"__aiter__": __aiter__, "__anext__": __anext__, "close": close, "__del__": _on_collect(cls)})


def _on_collect(cls: type) -> Callable[[Any], None]:
    """``__del__``: a stream dropped unclosed and unfinished is finalized (abandoned) when
    collected. A method of the class, not a ``weakref.finalize`` per stream: that is five
    objects and a registry entry a call, and the collector runs more often for each."""
    base_del = getattr(cls, "__del__", None)

    def __del__(self: Any) -> None:
        try:
            tap = self.__dict__.get(_TAP)
            if tap is not None:
                timer = tap.timer
                _open.pop(id(timer), None)
                timer.abandon()  # a no-op once the record is final
        except Exception:  # never raise from a finalizer (the interpreter may be shutting down)
            pass
        if base_del is not None:
            base_del(self)

    return __del__


_open: dict[int, Any] = {}
"""The timers of observed streams not yet collected (by ``id``): those still open when the
interpreter exits are finalized then (`_abandon_open`), as a ``weakref.finalize`` would."""
_exit_hook = False


def _abandon_open() -> None:
    """At interpreter exit: finalize the records of streams still alive and unfinished."""
    for timer in list(_open.values()):
        try:
            timer.abandon()
        except Exception:
            pass
    _open.clear()


def _track(timer: Any) -> None:
    global _exit_hook
    if not _exit_hook:  # registered at the first stream, after the caller set up telemetry: runs before its exit hooks
        _exit_hook = True
        atexit.register(_abandon_open)
    _open[id(timer)] = timer


def _subclass(cls: type, methods: dict[str, Any]) -> type:
    # A direct subclass with no new slots has the same layout, so __class__ may be reassigned.
    namespace = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__slots__": (), **methods}
    return type(cls.__name__, (cls,), namespace)


_classes: dict[type, type] = {}


def _observed_class(cls: type) -> type:
    sub = _classes.get(cls)
    if sub is None:
        sub = _async_subclass(cls) if hasattr(cls, "__aiter__") else _sync_subclass(cls)
        _classes[cls] = sub
    return sub


def is_observed(stream: object) -> bool:
    """Whether ``stream`` already reports to a latencykit tap."""
    return _TAP in getattr(stream, "__dict__", {})


def observe_stream(stream: S, tap: Tap, replay: Sequence[Any] = ()) -> S:
    """Make ``stream`` report every event to ``tap``; returns the same object.

    ``replay``: events already read (and timed) while waiting for the first token, which
    the caller gets first.
    """
    if is_observed(stream):
        return stream  # one record per stream, whoever asks twice
    tap.opened(stream)  # a no-op if a driver already did, before it read the first events
    stream.__class__ = _observed_class(type(stream))
    stream.__dict__[_TAP] = tap
    _track(tap.timer)
    if replay:
        # The relay hands these on one by one and lets go of each (a list the caller gave is
        # taken over, not copied).
        stream.__dict__[_REPLAY] = replay if type(replay) is list else list(replay)
    return stream


def open_stream(tap: Tap, send: Callable[[], S], raw_of: Callable[[S], Any] = lambda s: s) -> S:
    """Send the request (``send()`` returns the SDK stream) and observe the stream with ``tap``.

    A failure to get a stream at all (HTTP error, connection error, bad arguments) ends the
    call as an error and is re-raised unchanged.
    """
    try:
        with sending(tap.timer):
            stream = send()
    except BaseException as exc:
        tap.timer.fail(exc)
        raise
    observe_stream(raw_of(stream), tap)
    return stream


async def aopen_stream(tap: Tap, send: Callable[[], Awaitable[S]], raw_of: Callable[[S], Any] = lambda s: s) -> S:
    """Async twin of `open_stream`."""
    try:
        with sending(tap.timer):
            stream = await send()
    except BaseException as exc:
        tap.timer.fail(exc)
        raise
    observe_stream(raw_of(stream), tap)
    return stream
