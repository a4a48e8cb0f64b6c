"""Running a coroutine from sync code, wherever that code runs: a script, or a thread that already runs an event
loop (a Jupyter notebook's cells run inside one; so do sync helpers called from an async app).

``asyncio.run`` and ``loop.run_until_complete`` refuse to start a loop in a thread that runs one ("cannot be called
from a running event loop"), so there the coroutine runs on a loop of its own in a worker thread while this thread
waits. Ctrl-C while waiting (a notebook's "interrupt kernel") cancels the coroutine's task, as ``asyncio.run`` does
on SIGINT, and waits for what the task returns: code that keeps a partial result on cancellation (the bench) keeps
it either way.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Awaitable, Callable, Coroutine, Optional, TypeVar

__all__ = ["OwnLoop", "in_running_loop", "run_coroutine"]

T = TypeVar("T")
_POLL_S = 0.1
"""How often a waiting thread wakes, so that Ctrl-C reaches it (a bare wait on a lock may not be interruptible)."""


def in_running_loop() -> bool:
    """Whether this thread runs an event loop now."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _wait(future: "concurrent.futures.Future[T]", cancel: Callable[[], Any]) -> T:
    """``future``'s result; on Ctrl-C, ``cancel()`` once and wait on (a second Ctrl-C is raised)."""
    interrupted = False
    while True:
        try:
            return future.result(timeout=_POLL_S)
        except concurrent.futures.TimeoutError:
            continue
        except KeyboardInterrupt:
            if interrupted:
                raise
            interrupted = True
            cancel()


def run_coroutine(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``asyncio.run(make())``, or, where this thread runs an event loop already, the same in a worker thread."""
    if not in_running_loop():
        return asyncio.run(make())
    started: "concurrent.futures.Future[asyncio.Task[T]]" = concurrent.futures.Future()
    done: "concurrent.futures.Future[T]" = concurrent.futures.Future()

    async def main() -> T:
        task = asyncio.current_task()
        assert task is not None
        started.set_result(task)
        return await make()

    def work() -> None:
        try:
            done.set_result(asyncio.run(main()))
        except BaseException as exc:  # handed to the waiting thread, which raises it
            done.set_exception(exc)

    def cancel() -> None:
        task = started.result()
        task.get_loop().call_soon_threadsafe(task.cancel)

    thread = threading.Thread(target=work, name="latencykit-loop", daemon=True)
    thread.start()
    try:
        return _wait(done, cancel)
    except asyncio.CancelledError:  # cancelled by Ctrl-C, and it did not return a result of its own
        raise KeyboardInterrupt from None
    finally:
        if done.done():
            thread.join()


class OwnLoop:
    """An event loop of its own that outlives each coroutine it runs (a client kept open between calls): driven by
    `run` from this thread, or, where this thread runs a loop already, by a worker thread. `close` stops it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread: Optional[threading.Thread] = None
        if in_running_loop():
            self._thread = threading.Thread(target=self.loop.run_forever, name="latencykit-loop", daemon=True)
            self._thread.start()

    def run(self, awaitable: Awaitable[T]) -> T:
        """Run ``awaitable`` to its end on this loop; Ctrl-C cancels it (and is raised, as ``run_until_complete`` does)."""
        if self._thread is None:
            return self.loop.run_until_complete(awaitable)

        async def main() -> T:
            return await awaitable

        future = asyncio.run_coroutine_threadsafe(main(), self.loop)
        try:
            return _wait(future, future.cancel)
        except concurrent.futures.CancelledError:
            raise KeyboardInterrupt from None

    def close(self) -> None:
        """Stop the loop (and its thread) and close it."""
        if self._thread is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join()
            self._thread = None
        self.loop.close()
