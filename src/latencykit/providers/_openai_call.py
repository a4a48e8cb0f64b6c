"""What Chat Completions and Responses share: one streamed call (sync and async), its timer, the helpers.

Each API is an `OpenAIApi` (its request, tap, accumulator and result reader); `create_call` /
`acreate_call` plan the request, decide whether it can be streamed, and stream it with
latencykit's retries or pass it through.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Optional, TypeVar

from ..core._record import CallRecord
from ..core._timing import CallTimer
from ._caching_openai import REJECTED, BreakpointFinish, awith_fallback, with_fallback
from ._calls import ONCE, Finish, apassthrough, attempts, begin, given, helper_method, passthrough, prepare, sdk_client
from ._engine import Accumulator, acomplete_retrying, aopen_stream_retrying, complete_retrying, open_stream_retrying
from ._managers import finalize_on_close
from ._streams import aopen_stream, open_stream
from ._tap import Tap

__all__ = [
    "OpenAIApi", "create_call", "acreate_call", "begin_call", "enter_helper", "aenter_helper", "as_helper", "guarded", "aguarded",
]  # fmt: skip

T = TypeVar("T")


class OpenAIApi:
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


def _not_streamable(kwargs: dict[str, Any]) -> Optional[str]:
    extra = kwargs.get("extra_body")
    if isinstance(extra, dict) and "stream" in extra:
        return "stream set through extra_body"
    return None


def begin_call(
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


def create_call(api: OpenAIApi, resource: Any, base: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """One streamed (or passed-through) call, shared by Chat Completions and Responses (sync)."""
    client: Any = resource._client
    kwargs, finish = prepare(client, api.name, kwargs)
    reason = _not_streamable(kwargs)
    if reason is not None:
        timer = begin_call(client, api.name, "create", kwargs, reason, finish)
        return passthrough(timer, guarded(client, finish, timer, lambda **kw: base(resource, **kw), kwargs), api.on_result)
    caller_streams, method = _method(kwargs)
    request, wanted_usage = api.request(kwargs)
    tap = api.tap(begin_call(client, api.name, method, kwargs, finish=finish), caller_streams and not wanted_usage)
    target = api.target(sdk_client(client))
    send = lambda: base(target, **request)  # noqa: E731
    if isinstance(finish, BreakpointFinish):  # a server that rejects OpenAI breakpoints gets the request as written
        send = with_fallback(send, lambda: base(target, **finish.fallback(request)), _on_reject(client, finish, tap.timer))
    policy = client._lk.retry
    if caller_streams:
        if policy is None:
            return open_stream(tap, send)
        return open_stream_retrying(tap, send, policy, attempts(client))
    return complete_retrying(tap, send, policy or ONCE, attempts(client), lambda: api.accumulator(kwargs))


async def acreate_call(api: OpenAIApi, resource: Any, base: Callable[..., Awaitable[Any]], kwargs: dict[str, Any]) -> Any:
    """Async twin of `create_call`."""
    client: Any = resource._client
    kwargs, finish = prepare(client, api.name, kwargs)
    reason = _not_streamable(kwargs)
    if reason is not None:
        timer = begin_call(client, api.name, "create", kwargs, reason, finish)
        return await apassthrough(timer, aguarded(client, finish, timer, lambda **kw: base(resource, **kw), kwargs), api.on_result)
    caller_streams, method = _method(kwargs)
    request, wanted_usage = api.request(kwargs)
    tap = api.tap(begin_call(client, api.name, method, kwargs, finish=finish), caller_streams and not wanted_usage)
    target = api.target(sdk_client(client))
    send = lambda: base(target, **request)  # noqa: E731
    if isinstance(finish, BreakpointFinish):
        send = awith_fallback(send, lambda: base(target, **finish.fallback(request)), _on_reject(client, finish, tap.timer))
    policy = client._lk.retry
    if caller_streams:
        if policy is None:
            return await aopen_stream(tap, send)
        return await aopen_stream_retrying(tap, send, policy, attempts(client))
    return await acomplete_retrying(tap, send, policy or ONCE, attempts(client), lambda: api.accumulator(kwargs))


def _on_reject(client: Any, finish: BreakpointFinish, timer: CallTimer) -> Callable[[], None]:
    """What a rejection of the breakpoint fields does: the policy remembers the server; the record says so."""

    def on_reject() -> None:
        planner = client._lk.planner
        if planner is not None and hasattr(planner, "reject"):
            planner.reject(finish.url)
        timer.record.extra[REJECTED] = True

    return on_reject


def guarded(client: Any, finish: Optional[Finish], timer: CallTimer, call: Callable[..., T], kwargs: dict[str, Any]) -> Callable[[], T]:
    """``call(**kwargs)`` for a call sent as a whole (not streamed by latencykit), resent as the caller
    wrote it when the server rejects the breakpoint fields (see `_caching_openai.with_fallback`)."""
    if not isinstance(finish, BreakpointFinish):
        return lambda: call(**kwargs)
    bf = finish
    return with_fallback(lambda: call(**kwargs), lambda: call(**bf.fallback(kwargs)), _on_reject(client, bf, timer))


def aguarded(
    client: Any, finish: Optional[Finish], timer: CallTimer, call: Callable[..., Awaitable[T]], kwargs: dict[str, Any]
) -> Callable[[], Awaitable[T]]:
    """Async twin of `guarded`."""
    if not isinstance(finish, BreakpointFinish):
        return lambda: call(**kwargs)
    bf = finish
    return awith_fallback(lambda: call(**kwargs), lambda: call(**bf.fallback(kwargs)), _on_reject(client, bf, timer))


def enter_helper(enter: Callable[[], Any]) -> Any:
    # The request (and the clock) starts inside enter(): the SDK helper calls our create().
    return finalize_on_close(enter())


async def aenter_helper(enter: Callable[[], Awaitable[Any]]) -> Any:
    return finalize_on_close(await enter())


def as_helper(kwargs: dict[str, Any], name: str) -> dict[str, Any]:
    # The SDK's chat helper marks its requests this way; its responses helper does not, and
    # the mark is how the record tells .stream() from create(stream=True).
    extra = kwargs.get("extra_headers")
    return {**kwargs, "extra_headers": {"X-Stainless-Helper-Method": name, **(extra if isinstance(extra, dict) else {})}}
