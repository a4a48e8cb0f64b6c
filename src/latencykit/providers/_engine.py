"""Attempts: send, wait for the first token holding events back, retry what is safe (tenacity).

Two drivers, each with a sync and an async shell around the same decisions:

- `open_stream_retrying` — the caller iterates the stream. Events before the first token
  are read and held back; a failure there (HTTP error, ``error`` event, drop, TTFT
  deadline) is retried on a fresh request, so the caller never sees a second
  ``message_start``. Once the first token is in, the stream is handed over (held events
  first) and nothing is retried again: what the caller saw is never repeated.
- `complete_retrying` — a non-streaming call that latencykit streams: the whole stream
  is consumed here, so a failure even after content can be retried transparently
  (``RetryPolicy.retry_interrupted``); the caller only ever gets the final object.

One `CallTimer` spans all attempts: E2E and TTFT are from the first attempt's start.
Each attempt is sent with the SDK's own retries off (see `sdk_target`), so attempts
never multiply.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator, NoReturn, Optional, Protocol, TypeVar

from ..core._retry import PreContentDrop, RetryPolicy, TTFTDeadlineExceeded, backoff, classify
from ._calls import sending
from ..core._errors import EndedEarly, _is_sdk_error, incomplete_error, interrupted_error
from ._streams import item_reader, observe_stream
from ._tap import Tap, not_event_stream

if TYPE_CHECKING:
    from tenacity import RetryCallState

__all__ = ["open_stream_retrying", "aopen_stream_retrying", "complete_retrying", "acomplete_retrying", "Accumulator"]

T = TypeVar("T")
S = TypeVar("S")


class Accumulator(Protocol):
    """Folds stream events into the object a non-streaming call returns."""

    def feed(self, event: Any) -> None: ...
    def result(self, complete: bool) -> Any: ...


class _Retries:
    """The attempts after a first one failed: ``retries = _Retries(...)``; ``retries.take(exc)``
    says whether the first failure is retried; then ``for attempt in retries: with attempt: ...``
    (``async for`` in async code) runs the rest, waiting as the policy says, by tenacity.

    Made only when a first attempt fails: a call that succeeds at once (nearly all) runs its
    attempt inline and builds nothing here. That is not only the objects saved: every function
    a call runs is code and data the CPU must bring back into its caches, which the SDK's own
    work between two calls has evicted (`benchmarks/overhead_instructions.py`).
    """

    def __init__(
        self, policy: RetryPolicy, attempts: int, tap: Tap, may_retry: Callable[[BaseException], bool], started: float
    ) -> None:
        self.policy = policy
        self.attempts = attempts
        self.timer = tap.timer
        self.may_retry = may_retry
        self.first_error: Optional[BaseException] = None
        self._hedged = False
        self._started = started
        """``time.monotonic()`` when the call started: the policy's deadline counts from there."""
        self._step = 0
        self._retries: Any = None

    def take(self, exc: BaseException) -> bool:
        """Whether the first attempt's failure ``exc`` is retried (if not, the caller re-raises it)."""
        if self.attempts > 1 and self.should_retry(exc):
            self.first_error = exc
            return True
        return False

    def should_retry(self, exc: BaseException) -> bool:
        """Whether ``exc`` may be retried now (the TTFT deadline hedges once, then never again)."""
        reason = classify(exc)
        if reason is None or not self.may_retry(exc):
            return False
        if reason == "ttft_deadline":
            if self._hedged:
                return False
            self._hedged = True
        return True

    def _note(self, exc: BaseException) -> None:
        self.timer.record.retry_reasons = (*self.timer.record.retry_reasons, classify(exc) or "unknown")

    def _retrying(self, is_async: bool) -> Any:
        # tenacity is imported here, at the first retry: the first attempt runs without it, and
        # importing it also imports asyncio and, where installed (Jupyter), tornado (~0.1 s).
        from tenacity import AsyncRetrying, Retrying, retry_if_exception, stop_after_attempt, stop_before_delay

        policy = self.policy

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome is not None else None
            # tenacity counts from the second attempt; backoff from the first retry
            return backoff(policy, state.attempt_number + 1, exc) if exc is not None else 0.0

        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            if exc is not None:
                self._note(exc)

        stop: Any = stop_after_attempt(self.attempts - 1)
        if policy.deadline is not None:
            stop = stop | stop_before_delay(max(policy.deadline - (time.monotonic() - self._started), 0.0))
        kwargs: dict[str, Any] = {
            "stop": stop,
            "wait": wait,
            "retry": retry_if_exception(self.should_retry),
            "before_sleep": before_sleep,
            "reraise": True,
        }
        return AsyncRetrying(**kwargs) if is_async else Retrying(sleep=policy.sleep, **kwargs)

    def _first_wait(self) -> Optional[float]:
        """Seconds to wait before the first retry, or ``None`` when the deadline leaves no room."""
        assert self.first_error is not None
        self._note(self.first_error)
        wait = backoff(self.policy, 1, self.first_error)
        deadline = self.policy.deadline
        if deadline is not None and time.monotonic() - self._started + wait > deadline:
            return None
        return wait

    def __iter__(self) -> Iterator[Any]:
        wait = self._first_wait()
        if wait is None:
            raise self.first_error  # type: ignore[misc]
        self.policy.sleep(wait)
        yield from self._retrying(is_async=False)

    # Async: an iterator object, not an async generator (no generator for the event loop to track).
    def __aiter__(self) -> "_Retries":
        return self

    async def __anext__(self) -> Any:
        if self._step == 0:
            self._step = 1
            wait = self._first_wait()
            if wait is None:
                raise self.first_error  # type: ignore[misc]
            await asyncio.sleep(wait)
            self._retries = self._retrying(is_async=True).__aiter__()
        return await self._retries.__anext__()


def _always(exc: BaseException) -> bool:
    return True


class _Watchdog:
    """Closes an attempt's response if no first token arrives within the TTFT deadline (sync)."""

    def __init__(self, tap: Tap, seconds: Optional[float], response: Any) -> None:
        self.fired = False
        self._timer: Optional[threading.Timer] = None
        if seconds is not None:
            remaining = max(seconds - tap.timer.attempt_elapsed(), 0.0)
            self._timer = threading.Timer(remaining, self._fire, args=(response,))
            self._timer.daemon = True
            self._timer.start()

    def _fire(self, response: Any) -> None:
        self.fired = True
        # Closing a socket from another thread does not wake a blocked recv(); shutting it
        # down does, so the caller's read fails at once instead of waiting for the server.
        try:
            stream = response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
        except Exception:
            pass
        try:
            response.close()
        except Exception:
            pass

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _hold_back(raw: Any, tap: Tap) -> list[Any]:
    """Read until the first token (or the end); returns the events read, for replay."""
    held: list[Any] = []
    timer = tap.timer
    see = tap.__call__
    read = item_reader(raw)
    while True:
        try:
            event = read()
        except StopIteration:
            tap.ended()
            if timer.saw_terminal:
                return held
            raise _early_end(tap, raw) from None
        try:
            keep = see(event)
        except Exception:
            keep = True
        if keep:
            held.append(event)
        if timer.saw_token or timer.saw_terminal:
            return held


async def _ahold_back(raw: Any, tap: Tap) -> list[Any]:
    held: list[Any] = []
    timer = tap.timer
    see = tap.__call__
    read = item_reader(raw)
    while True:
        try:
            event = await read()
        except StopAsyncIteration:
            tap.ended()
            if timer.saw_terminal:
                return held
            raise _early_end(tap, raw) from None
        try:
            keep = see(event)
        except Exception:
            keep = True
        if keep:
            held.append(event)
        if timer.saw_token or timer.saw_terminal:
            return held


def _request_of(raw: Any) -> Any:
    return getattr(getattr(raw, "response", None), "request", None)


def _early_end(tap: Tap, raw: Any) -> BaseException:
    """A stream that ended before any content without its terminal event: the error the
    server reported in an event (Responses ``error`` / ``response.failed``), an answer that
    was no event stream at all (not retried), else a drop (retried)."""
    reported = tap.stream_error(_request_of(raw))
    if reported is not None:
        return reported
    wrong = not_event_stream(tap, getattr(raw, "response", None))
    return wrong if wrong is not None else PreContentDrop("the stream ended before any content")


def _raise_reported(tap: Tap, raw: Any) -> None:
    """After a stream consumed without its terminal event: raise the error the server
    reported, or say the answer was not an event stream, if so."""
    tap.ended()
    if not tap.timer.saw_terminal:
        reported = tap.stream_error(_request_of(raw))
        if reported is None and not tap.timer.saw_token:
            reported = not_event_stream(tap, getattr(raw, "response", None))
        if reported is not None:
            raise reported


def _ttft_deadline(policy: RetryPolicy, tap: Tap) -> Optional[float]:
    """This attempt's TTFT deadline: the hedge fires once, so the attempt after it may take its time."""
    return policy.ttft_deadline if tap.timer.record.ttft_deadline_hits == 0 else None


def _sdk_error(tap: Tap, exc: BaseException, raw: Any) -> BaseException:
    """The error for a failure before content: SDK errors as they are; one the SDK has no
    class for (a bare transport error, a clean early end, the TTFT deadline) becomes the
    SDK's ``APIConnectionError``, with the original as ``__cause__`` (a clean early end: an
    `IncompleteStreamError`)."""
    if not isinstance(exc, Exception) or _is_sdk_error(exc):
        return exc
    if isinstance(exc, (PreContentDrop, EndedEarly)):
        return incomplete_error(tap.partial(), tap.connection_error, _request_of(raw), after_content=False)
    if classify(exc) not in ("connection", "timeout", "dropped", "ttft_deadline"):
        return exc
    err: BaseException = tap.connection_error(message=f"{type(exc).__name__}: {exc}", request=_request_of(raw))
    return err


def _close_quietly(raw: Any) -> None:
    try:
        raw.close()
    except Exception:
        pass


async def _aclose_quietly(raw: Any) -> None:
    try:
        await raw.close()
    except Exception:
        pass


# -- the caller iterates -------------------------------------------------------------------
#
# Each driver runs its first attempt inline and makes a `_Retries` only when that attempt fails
# with something worth retrying; the attempt itself is one function, run the same way both times.
# ``seen`` holds the last attempt's raw stream (and accumulator), for the error of a failed call.


def _stream_attempt(tap: Tap, send: Callable[[], S], policy: RetryPolicy, raw_of: Optional[Callable[[S], Any]], seen: list[Any]) -> tuple[S, Any, list[Any]]:
    """One attempt: send, then hold events back until the first token (within the TTFT deadline)."""
    timer = tap.timer
    if timer.new_attempt():  # a retry: the tap forgets the abandoned attempt
        tap.new_attempt()
    with sending(timer):
        obj = send()
    raw = seen[0] = obj if raw_of is None else raw_of(obj)
    tap.opened(raw)
    watchdog = _Watchdog(tap, _ttft_deadline(policy, tap), getattr(raw, "response", None))
    try:
        return obj, raw, _hold_back(raw, tap)
    except Exception as exc:
        _close_quietly(raw)
        if watchdog.fired:
            timer.record.ttft_deadline_hits += 1
            raise TTFTDeadlineExceeded(f"no first token within {policy.ttft_deadline} s") from exc
        raise
    finally:
        watchdog.cancel()


def open_stream_retrying(
    tap: Tap, send: Callable[[], S], policy: RetryPolicy, attempts: int, raw_of: Optional[Callable[[S], Any]] = None
) -> S:
    """Send, hold events back until the first token, retry failures before it; then hand over."""
    started = time.monotonic()
    seen: list[Any] = [None]
    try:
        retries = None
        try:
            obj, raw, held = _stream_attempt(tap, send, policy, raw_of, seen)
        except Exception as exc:
            retries = _Retries(policy, attempts, tap, _always, started)
            if not retries.take(exc):
                raise
        if retries is not None:  # (outside the except block: a later failure is not chained to the first)
            for attempt in retries:
                with attempt:
                    obj, raw, held = _stream_attempt(tap, send, policy, raw_of, seen)
    except BaseException as exc:
        _fail(tap, exc, seen[0])
    observe_stream(raw, tap, held)
    return obj


async def _astream_attempt(
    tap: Tap, send: Callable[[], Awaitable[S]], policy: RetryPolicy, raw_of: Optional[Callable[[S], Any]], seen: list[Any]
) -> tuple[S, Any, list[Any]]:
    """Async twin of `_stream_attempt` (the TTFT deadline is an ``asyncio`` timeout)."""
    timer = tap.timer
    if timer.new_attempt():  # a retry: the tap forgets the abandoned attempt
        tap.new_attempt()
    with sending(timer):
        obj = await send()
    raw = seen[0] = obj if raw_of is None else raw_of(obj)
    tap.opened(raw)
    deadline = _ttft_deadline(policy, tap)
    try:
        if deadline is None:
            return obj, raw, await _ahold_back(raw, tap)
        remaining = max(deadline - timer.attempt_elapsed(), 0.0)
        try:
            return obj, raw, await asyncio.wait_for(_ahold_back(raw, tap), remaining)
        except asyncio.TimeoutError as exc:
            timer.record.ttft_deadline_hits += 1
            raise TTFTDeadlineExceeded(f"no first token within {policy.ttft_deadline} s") from exc
    except BaseException:
        await _aclose_quietly(raw)
        raise


async def aopen_stream_retrying(
    tap: Tap, send: Callable[[], Awaitable[S]], policy: RetryPolicy, attempts: int, raw_of: Optional[Callable[[S], Any]] = None
) -> S:
    """Async twin of `open_stream_retrying`."""
    started = time.monotonic()
    seen: list[Any] = [None]
    try:
        retries = None
        try:
            obj, raw, held = await _astream_attempt(tap, send, policy, raw_of, seen)
        except Exception as exc:
            retries = _Retries(policy, attempts, tap, _always, started)
            if not retries.take(exc):
                raise
        if retries is not None:
            async for attempt in retries:
                with attempt:
                    obj, raw, held = await _astream_attempt(tap, send, policy, raw_of, seen)
    except BaseException as exc:
        _fail(tap, exc, seen[0])
    observe_stream(raw, tap, held)
    return obj


def _fail(tap: Tap, exc: BaseException, raw: Any) -> NoReturn:
    """End the call with the error the caller gets (an SDK class where it has one), and raise it."""
    err = _sdk_error(tap, exc, raw)
    tap.timer.fail(err)  # the record names what the caller gets
    if err is exc:
        raise exc
    raise err from exc


# -- latencykit consumes the stream for a non-streaming caller -----------------------------


def _complete_attempt(tap: Tap, send: Callable[[], Any], policy: RetryPolicy, new_acc: Callable[[], Accumulator], seen: list[Any]) -> Any:
    """One attempt of a non-streaming call: stream it to the end, return the reassembled object."""
    timer = tap.timer
    if timer.new_attempt():  # a retry: the tap forgets the abandoned attempt
        tap.new_attempt()
    with sending(timer):
        raw = seen[0] = send()
    tap.opened(raw)
    acc = seen[1] = new_acc()
    watchdog: Optional[_Watchdog] = _Watchdog(tap, _ttft_deadline(policy, tap), getattr(raw, "response", None))
    see = tap.__call__
    try:
        with raw:
            for event in raw:
                try:
                    see(event)
                except Exception:
                    pass
                if watchdog is not None and timer.saw_token:
                    watchdog.cancel()
                    watchdog = None
                acc.feed(event)
    except Exception as exc:
        if watchdog is not None and watchdog.fired:
            timer.record.ttft_deadline_hits += 1
            raise TTFTDeadlineExceeded(f"no first token within {policy.ttft_deadline} s") from exc
        raise
    finally:
        if watchdog is not None:
            watchdog.cancel()
    _raise_reported(tap, raw)
    return acc.result(timer.saw_terminal)


def complete_retrying(tap: Tap, send: Callable[[], Any], policy: RetryPolicy, attempts: int, new_acc: Callable[[], Accumulator]) -> Any:
    """Stream the call to the end and return the reassembled object; retry what is safe."""
    started = time.monotonic()
    seen: list[Any] = [None, None]
    try:
        retries = None
        try:
            result = _complete_attempt(tap, send, policy, new_acc, seen)
        except Exception as exc:
            retries = _Retries(policy, attempts, tap, _may_retry_complete(tap, policy), started)
            if not retries.take(exc):
                raise
        if retries is not None:
            for attempt in retries:
                with attempt:
                    result = _complete_attempt(tap, send, policy, new_acc, seen)
    except BaseException as exc:
        _fail_complete(tap, exc, seen)
    tap.timer.exhausted()
    return result


async def _acomplete_attempt(
    tap: Tap, send: Callable[[], Awaitable[Any]], policy: RetryPolicy, new_acc: Callable[[], Accumulator], seen: list[Any]
) -> Any:
    """Async twin of `_complete_attempt`."""
    timer = tap.timer
    if timer.new_attempt():  # a retry: the tap forgets the abandoned attempt
        tap.new_attempt()
    with sending(timer):
        raw = seen[0] = await send()
    tap.opened(raw)
    acc = seen[1] = new_acc()
    consume = _aconsume(raw, tap, acc)
    deadline = _ttft_deadline(policy, tap)
    if deadline is None:
        await consume
    else:
        await _with_ttft_deadline(consume, tap, deadline)
    _raise_reported(tap, raw)
    return acc.result(timer.saw_terminal)


async def acomplete_retrying(
    tap: Tap, send: Callable[[], Awaitable[Any]], policy: RetryPolicy, attempts: int, new_acc: Callable[[], Accumulator]
) -> Any:
    """Async twin of `complete_retrying`."""
    started = time.monotonic()
    seen: list[Any] = [None, None]
    try:
        retries = None
        try:
            result = await _acomplete_attempt(tap, send, policy, new_acc, seen)
        except Exception as exc:
            retries = _Retries(policy, attempts, tap, _may_retry_complete(tap, policy), started)
            if not retries.take(exc):
                raise
        if retries is not None:
            async for attempt in retries:
                with attempt:
                    result = await _acomplete_attempt(tap, send, policy, new_acc, seen)
    except BaseException as exc:
        _fail_complete(tap, exc, seen)
    tap.timer.exhausted()
    return result


def _may_retry_complete(tap: Tap, policy: RetryPolicy) -> Callable[[BaseException], bool]:
    """A non-streaming call is retried after content only if the policy says so: the caller saw none of it."""
    timer = tap.timer
    return lambda exc: policy.retry_interrupted or not timer.saw_token


def _fail_complete(tap: Tap, exc: BaseException, seen: list[Any]) -> NoReturn:
    err = _final_error(tap, exc, seen[0], seen[1])
    tap.timer.fail(err)  # the record names what the caller gets
    if err is exc:
        raise exc
    raise err from exc


async def _aconsume(raw: Any, tap: Tap, acc: Accumulator) -> None:
    see = tap.__call__
    async with raw:
        async for event in raw:
            try:
                see(event)
            except Exception:
                pass
            acc.feed(event)


async def _with_ttft_deadline(consume: Awaitable[None], tap: Tap, deadline: float) -> None:
    task = asyncio.ensure_future(consume)
    remaining = max(deadline - tap.timer.attempt_elapsed(), 0.0)
    done, _ = await asyncio.wait({task}, timeout=remaining)
    if not done and not tap.timer.saw_token:
        task.cancel()
        try:
            await task
        except BaseException:
            pass
        tap.timer.record.ttft_deadline_hits += 1
        raise TTFTDeadlineExceeded(f"no first token within {deadline} s")
    await task


def _final_error(tap: Tap, exc: BaseException, raw: Any, acc: Optional[Accumulator] = None) -> BaseException:
    """After the last attempt: the SDK error as is, or — after content — with the partial output."""
    request = getattr(getattr(raw, "response", None), "request", None)
    if isinstance(exc, EndedEarly):
        reported = tap.stream_error(request)
        if reported is not None:
            exc = reported
    if not isinstance(exc, Exception) or not tap.timer.saw_token:
        return _sdk_error(tap, exc, raw)
    partial = tap.partial()
    snapshot = getattr(acc, "snapshot", None)
    if snapshot is not None:
        try:
            partial.message = snapshot()
        except Exception:  # a cut-short stream need not fold into a complete object
            partial.message = None
    return interrupted_error(None if isinstance(exc, EndedEarly) else exc, partial, tap.connection_error, request)
