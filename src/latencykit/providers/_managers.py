"""Stream-manager and helper-stream shells (``messages.stream()``, ``chat.completions.stream()``, ...).

The SDK's ``.stream()`` helpers return a manager that sends the request when its ``with``
block opens and yields a helper stream (``MessageStream``, ``ChatCompletionStream``,
``ResponseStream``) around the raw ``Stream``. latencykit returns a subclass instance of the
same manager class that delegates to the SDK's and runs one hook on the way in. The OpenAI
helper streams close the HTTP response directly rather than through the raw stream, so
their ``close()`` is also made to finalize the record.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Awaitable, Callable, Optional

from ._streams import TAP_ATTR

__all__ = ["wrap_manager", "wrap_async_manager", "finalize_on_close"]

EnterHook = Callable[[Callable[[], Any]], Any]
AsyncEnterHook = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]

_managers: dict[type, type] = {}


def _manager_class(cls: type, is_async: bool) -> type:
    sub = _managers.get(cls)
    if sub is not None:
        return sub
    if is_async:

        async def __aenter__(self: Any) -> Any:
            remake = self._lk_remake
            entered = False

            async def enter() -> Any:
                # An async SDK manager awaits one coroutine made when .stream() was called:
                # every retried attempt needs a fresh manager (and so a fresh request).
                nonlocal entered
                if entered and remake is not None:
                    self._lk_inner = remake()
                entered = True
                return await self._lk_inner.__aenter__()

            return await self._lk_hook(enter)

        async def __aexit__(
            self: Any, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
        ) -> None:
            await self._lk_inner.__aexit__(exc_type, exc, tb)

        methods: dict[str, Any] = {"__aenter__": __aenter__, "__aexit__": __aexit__}
    else:

        def __enter__(self: Any) -> Any:
            return self._lk_hook(self._lk_inner.__enter__)

        def __exit__(
            self: Any, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
        ) -> None:
            self._lk_inner.__exit__(exc_type, exc, tb)

        methods = {"__enter__": __enter__, "__exit__": __exit__}
    sub = type(cls.__name__, (cls,), {"__module__": cls.__module__, "__qualname__": cls.__qualname__, **methods})
    _managers[cls] = sub
    return sub


def wrap_manager(inner: Any, hook: EnterHook) -> Any:
    """An instance of ``type(inner)`` whose ``__enter__`` is ``hook(inner.__enter__)``."""
    new: Any = object.__new__(_manager_class(type(inner), is_async=False))
    new._lk_inner = inner
    new._lk_hook = hook
    return new


def wrap_async_manager(inner: Any, hook: AsyncEnterHook, remake: Optional[Callable[[], Any]] = None) -> Any:
    """An instance of ``type(inner)`` whose ``__aenter__`` is ``await hook(inner.__aenter__)``.

    ``remake`` builds a fresh inner manager for each retried attempt (``hook`` may call
    its ``enter`` more than once); without it, ``enter`` re-enters the same manager.
    """
    new: Any = object.__new__(_manager_class(type(inner), is_async=True))
    new._lk_inner = inner
    new._lk_hook = hook
    new._lk_remake = remake
    return new


_helpers: dict[type, type] = {}


def _abandon_raw(helper: Any) -> None:
    raw = getattr(helper, "_raw_stream", None)
    tap = getattr(raw, "__dict__", {}).get(TAP_ATTR)
    if tap is not None:
        tap.timer.abandon()


def finalize_on_close(helper: Any) -> Any:
    """Make a helper stream's ``close()`` finalize the record of the raw stream it wraps."""
    cls = type(helper)
    sub = _helpers.get(cls)
    if sub is None:
        base_close = cls.close
        if hasattr(cls, "__aiter__"):

            async def close(self: Any) -> None:
                try:
                    await base_close(self)
                finally:
                    _abandon_raw(self)

        else:

            def close(self: Any) -> None:  # type: ignore[misc]
                try:
                    base_close(self)
                finally:
                    _abandon_raw(self)

        namespace = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__slots__": (), "close": close}
        sub = type(cls.__name__, (cls,), namespace)
        _helpers[cls] = sub
    helper.__class__ = sub
    return helper
