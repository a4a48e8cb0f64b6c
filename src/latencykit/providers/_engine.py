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
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator, Optional, Protocol, TypeVar

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


def _identity(x: Any) -> Any:
    return x


class _FirstAttempt:
    """The first attempt, without tenacity: most calls succeed, and then no retry machinery
    (whose objects form reference cycles the garbage collector would have to chase) is built."""

    __slots__ = ("owner",)

    def __init__(self, owner: "_Attempts") -> None:
        self.owner = owner

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> bool:
        if exc is None:
            return False
        if isinstance(exc, Exception) and self.owner.attempts > 1 and self.owner.should_retry(exc):
            self.owner.first_error = exc
            return True  # swallowed here; tenacity takes over for the next attempts
        return False


class _Attempts:
    """``for attempt in _Attempts(...): with attempt: ...`` — the first try inline, retries by tenacity."""

    def __init__(self, policy: RetryPolicy, attempts: int, tap: Tap, may_retry: Callable[[BaseException], bool]) -> None:
        self.policy = policy
        self.attempts = attempts
        self.timer = tap.timer
        self.may_retry = may_retry
        self.first_error: Optional[BaseException] = None
        self._hedged = False
        self._started = time.monotonic()
        self._step = 0
        self._retries: Any = None

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
        yield _FirstAttempt(self)
        if self.first_error is None:
            return
        wait = self._first_wait()
        if wait is None:
            raise self.first_error
        self.policy.sleep(wait)
        yield from self._retrying(is_async=False)

    # Async: an iterator object, not an async generator, so a call that succeeds first time
    # builds no generator for the event loop to track (asyncgen hooks, a weak set entry).
    def __aiter__(self) -> "_Attempts":
        return self

    async def __anext__(self) -> Any:
        step = self._step
        if step == 0:
            self._step = 1
            return _FirstAttempt(self)
        if step == 1:
            self._step = 2
            if self.first_error is None:
                raise StopAsyncIteration
            wait = self._first_wait()
            if wait is None:
                raise self.first_error
            await asyncio.sleep(wait)
            self._retries = self._retrying(is_async=True).__aiter__()
        if self._retries is None:
            raise StopAsyncIteration
        return await self._retries.__anext__()


def _controller(policy: RetryPolicy, attempts: int, tap: Tap, may_retry: Callable[[BaseException], bool], is_async: bool) -> Any:
    return _Attempts(policy, attempts, tap, may_retry)


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


def open_stream_retrying(
    tap: Tap, send: Callable[[], S], policy: RetryPolicy, attempts: int, raw_of: Callable[[S], Any] = _identity
) -> S:
    """Send, hold events back until the first token, retry failures before it; then hand over."""
    timer = tap.timer
    controller = _controller(policy, attempts, tap, lambda exc: True, is_async=False)
    try:
        for attempt in controller:
            with attempt:
                if timer.new_attempt():  # a retry: the tap forgets the abandoned attempt
                    tap.new_attempt()
                with sending(timer):
                    obj = send()
                raw = raw_of(obj)
                tap.opened(raw)
                watchdog = _Watchdog(tap, _ttft_deadline(policy, tap), getattr(raw, "response", None))
                try:
                    held = _hold_back(raw, tap)
                except Exception as exc:
                    _close_quietly(raw)
                    if watchdog.fired:
                        timer.record.ttft_deadline_hits += 1
                        raise TTFTDeadlineExceeded(f"no first token within {policy.ttft_deadline} s") from exc
                    raise
                finally:
                    watchdog.cancel()
    except BaseException as exc:
        err = _sdk_error(tap, exc, raw if "raw" in locals() else None)
        timer.fail(err)  # the record names what the caller gets
        if err is exc:
            raise
        raise err from exc
    observe_stream(raw, tap, held)
    return obj


async def aopen_stream_retrying(
    tap: Tap, send: Callable[[], Awaitable[S]], policy: RetryPolicy, attempts: int, raw_of: Callable[[S], Any] = _identity
) -> S:
    """Async twin of `open_stream_retrying` (the TTFT deadline is an ``asyncio`` timeout)."""
    timer = tap.timer
    controller = _controller(policy, attempts, tap, lambda exc: True, is_async=True)
    try:
        async for attempt in controller:
            with attempt:
                if timer.new_attempt():  # a retry: the tap forgets the abandoned attempt
                    tap.new_attempt()
                with sending(timer):
                    obj = await send()
                raw = raw_of(obj)
                tap.opened(raw)
                deadline = _ttft_deadline(policy, tap)
                try:
                    if deadline is None:
                        held = await _ahold_back(raw, tap)
                    else:
                        remaining = max(deadline - timer.attempt_elapsed(), 0.0)
                        try:
                            held = await asyncio.wait_for(_ahold_back(raw, tap), remaining)
                        except asyncio.TimeoutError as exc:
                            timer.record.ttft_deadline_hits += 1
                            raise TTFTDeadlineExceeded(f"no first token within {policy.ttft_deadline} s") from exc
                except BaseException:
                    await _aclose_quietly(raw)
                    raise
    except BaseException as exc:
        err = _sdk_error(tap, exc, raw if "raw" in locals() else None)
        timer.fail(err)  # the record names what the caller gets
        if err is exc:
            raise
        raise err from exc
    observe_stream(raw, tap, held)
    return obj


# -- latencykit consumes the stream for a non-streaming caller -----------------------------


def complete_retrying(tap: Tap, send: Callable[[], Any], policy: RetryPolicy, attempts: int, new_acc: Callable[[], Accumulator]) -> Any:
    """Stream the call to the end and return the reassembled object; retry what is safe."""
    timer = tap.timer
    may_retry = lambda exc: policy.retry_interrupted or not timer.saw_token  # noqa: E731
    controller = _controller(policy, attempts, tap, may_retry, is_async=False)
    try:
        for attempt in controller:
            with attempt:
                if timer.new_attempt():  # a retry: the tap forgets the abandoned attempt
                    tap.new_attempt()
                with sending(timer):
                    raw = send()
                tap.opened(raw)
                acc = new_acc()
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
                result = acc.result(timer.saw_terminal)
    except BaseException as exc:
        err = _final_error(tap, exc, raw if "raw" in locals() else None, acc if "acc" in locals() else None)
        timer.fail(err)  # the record names what the caller gets
        if err is exc:
            raise
        raise err from exc
    timer.exhausted()
    return result


async def acomplete_retrying(
    tap: Tap, send: Callable[[], Awaitable[Any]], policy: RetryPolicy, attempts: int, new_acc: Callable[[], Accumulator]
) -> Any:
    """Async twin of `complete_retrying`."""
    timer = tap.timer
    may_retry = lambda exc: policy.retry_interrupted or not timer.saw_token  # noqa: E731
    controller = _controller(policy, attempts, tap, may_retry, is_async=True)
    raw: Any = None
    try:
        async for attempt in controller:
            with attempt:
                if timer.new_attempt():  # a retry: the tap forgets the abandoned attempt
                    tap.new_attempt()
                with sending(timer):
                    raw = await send()
                tap.opened(raw)
                acc = new_acc()
                consume = _aconsume(raw, tap, acc)
                deadline = _ttft_deadline(policy, tap)
                if deadline is None:
                    await consume
                else:
                    await _with_ttft_deadline(consume, tap, deadline)
                _raise_reported(tap, raw)
                result = acc.result(timer.saw_terminal)
    except BaseException as exc:
        err = _final_error(tap, exc, raw, acc if "acc" in locals() else None)
        timer.fail(err)  # the record names what the caller gets
        if err is exc:
            raise
        raise err from exc
    timer.exhausted()
    return result


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
