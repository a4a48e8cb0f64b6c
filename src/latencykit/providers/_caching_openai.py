"""`CachePolicy` on OpenAI models with explicit breakpoints (GPT-5.6 and later): plan, verify, fall back.

`plan_breakpoint_call` is the OpenAI-breakpoint half of ``CachePolicy.__call__``: the strategy
(by default `BreakpointPlanner`, the same static/dynamic boundaries as on Anthropic) chooses
parts to mark, plus the furthest prefix the ledger believes cached (so a conversation reads
what its previous call wrote); `plan_breakpoints` fits them in OpenAI's budget; the request
gets a ``prompt_cache_key`` per prompt family (`family_key`) when the caller set none; on Responses, ``CachePolicy(ttl="12h")`` sets
``prompt_cache_options.ttl`` and ``CachePolicy(diagnose=True)`` asks for the server's
verdict against the family's previous response (``comparison_response_id``).

A server that does not take the new fields (an OpenAI-compatible server, a proxy, a
deployment behind the API) answers 400 naming one of them: `rejects` recognizes that answer,
the policy remembers the base URL, and `with_fallback` / `awith_fallback` resend the request
once without what latencykit added, inside the same call and record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Awaitable, Callable, Optional, TypeVar

from ..core._breakpoints import BreakpointPlanner, PlanContext
from ..core._cache_facts import OPENAI_BREAKPOINT_TTLS, OPENAI_MIN_TOKENS
from ..core._learn import Learned
from ..core._openai_breakpoints import apply_breakpoints, breakpoint_markable, plan_breakpoints, spare_breakpoints
from ..core._openai_verify import expect_breakpoints
from ..core._record import CallRecord
from ..core._segments import Shape, frozen
from ..core._verify import NO_BREAKPOINT, Expectation
from ._calls import given

# A `_caching.CachePolicy` (that module imports this one: typed loosely here, so no import circle).
CachePolicy = Any

__all__ = ["BreakpointFinish", "REJECTED", "awith_fallback", "rejects", "plan_breakpoint_call", "request_options", "with_fallback"]

T = TypeVar("T")

REJECTED = "prompt_cache_breakpoints_rejected"
"""``CallRecord.extra`` key: the server refused the breakpoint fields; the call was resent without them."""
_FIELDS = ("prompt_cache_breakpoint", "prompt_cache_options")
_ABSENT = object()


def request_options(kwargs: Mapping[str, Any]) -> Mapping[str, Any]:
    """The request's ``prompt_cache_options`` as a mapping (empty when not given)."""
    options = kwargs.get("prompt_cache_options")
    return options if isinstance(options, Mapping) else {}


class BreakpointFinish:
    """The finish hook of a planned call, with what to restore if the server rejects the new fields."""

    __slots__ = ("verify", "restore", "url")

    def __init__(self, verify: Callable[[CallRecord], None], restore: dict[str, Any], url: str) -> None:
        self.verify = verify
        self.restore = restore
        """Request field → the caller's value (``_ABSENT``: the caller had none) for every field latencykit changed."""
        self.url = url

    def __call__(self, rec: CallRecord) -> None:
        self.verify(rec)

    def fallback(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """``request`` (as sent) with every field latencykit changed put back as the caller wrote it."""
        out = {k: v for k, v in request.items() if not (k in self.restore and self.restore[k] is _ABSENT)}
        out.update({k: v for k, v in self.restore.items() if v is not _ABSENT})
        return out


def plan_breakpoint_call(
    policy: CachePolicy, shape: Shape, kwargs: dict[str, Any], learned: Learned, now: float, url: str
) -> tuple[dict[str, Any], BreakpointFinish, int]:
    """Plan one GPT-5.6+ call: ``(kwargs to send, finish hook, furthest explicit breakpoint written)``.

    A Responses call that continues a server-side conversation (``previous_response_id``,
    ``conversation``) has a prefix this process cannot see: it is sent as given (OpenAI's
    implicit breakpoint caches the conversation) and judged by what the server reports.
    """
    if shape.api == "responses" and (given(kwargs.get("previous_response_id")) or given(kwargs.get("conversation"))):
        unknown = Expectation(0, -1, None, None, True, OPENAI_MIN_TOKENS)
        return kwargs, BreakpointFinish(lambda rec: policy._verify(rec, unknown, implicit=False), {}, url), -1
    options = request_options(kwargs)
    explicit_mode = options.get("mode") == "explicit"
    key = kwargs.get("prompt_cache_key")
    sent = kwargs
    if not given(key) and shape.prompt_tokens >= OPENAI_MIN_TOKENS and policy.derive_key:
        key = family_key(policy, shape)
        sent = {**kwargs, "prompt_cache_key": key}
    prefixes = shape.prefixes(key if isinstance(key, str) else "")
    states = policy.ledger.states(prefixes, now)
    wanted: list[int] = []
    if policy.strategy is not None:
        live = frozenset([i for i, s in enumerate(states) if s == "live"])
        try:
            ctx = frozen(PlanContext, shape=shape, min_tokens=OPENAI_MIN_TOKENS, dynamic=learned.dynamic, written=live,
                         conversation=learned.conversation)  # fmt: skip
            wanted = list(policy.strategy(ctx))
        except Exception:
            policy.log_strategy_failure()
        readable = [i for i in live if breakpoint_markable(shape, i)]
        if readable:  # where the previous call of a conversation wrote: this one reads it at its own breakpoint
            wanted.append(max(readable))
        if isinstance(policy.strategy, BreakpointPlanner) and not explicit_mode:
            wanted += spare_breakpoints(shape, OPENAI_MIN_TOKENS)  # free inside the implicit write: last in line
    ttl = policy.ttl if policy.ttl in OPENAI_BREAKPOINT_TTLS else None
    plan = plan_breakpoints(shape, wanted, explicit_mode=explicit_mode, ttl=ttl)
    restore: dict[str, Any] = {}
    if plan.added:
        field = "messages" if shape.api == "chat.completions" else "input"
        restore[field] = kwargs[field]
        sent = apply_breakpoints(sent, shape, plan.added)
    new_options = dict(options)
    if shape.api == "responses":
        if ttl == "12h" and "ttl" not in options:
            new_options["ttl"] = ttl
        previous = policy._last_message_id.get(shape.family) if policy.diagnostics else None
        if previous is not None and "comparison_response_id" not in options:
            new_options["comparison_response_id"] = previous
    if new_options != options:
        restore["prompt_cache_options"] = kwargs.get("prompt_cache_options", _ABSENT)
        sent = {**sent, "prompt_cache_options": new_options}
    exp = expect_breakpoints(shape, states, plan, change=learned.change, previous_marked=learned.previous_marked)
    blocks = shape.blocks
    writes = [(prefixes[p], OPENAI_BREAKPOINT_TTLS.get(t, OPENAI_BREAKPOINT_TTLS["30m"])) for p, t in plan.written
              if blocks[p].prefix_tokens >= OPENAI_MIN_TOKENS]  # fmt: skip
    fresh = [prefixes[p] for p, _ in plan.written if p > exp.read_block and blocks[p].prefix_tokens >= OPENAI_MIN_TOKENS]
    read_at = prefixes[exp.read_block] if exp.read_block >= 0 else None

    def verify(rec: CallRecord) -> None:
        if rec.extra.get(REJECTED):  # sent as the caller wrote it: only the implicit breakpoint
            policy._verify(rec, Expectation(0, -1, NO_BREAKPOINT, None, True, OPENAI_MIN_TOKENS), implicit=False)
            return
        policy._verify(rec, exp, implicit=False)
        if rec.response_id and policy.diagnostics and shape.api == "responses":
            policy._last_message_id[shape.family] = rec.response_id
        if (rec.cache_read_tokens or 0) + (rec.cache_write_tokens or 0) > 0:
            policy.note_writes(rec, writes, fresh, read_at if (rec.cache_read_tokens or 0) > 0 else None)

    furthest = max((p for p, _ in plan.written if p != plan.implicit and blocks[p].prefix_tokens >= OPENAI_MIN_TOKENS), default=-1)
    return sent, BreakpointFinish(verify, restore, url), furthest


def family_key(policy: CachePolicy, shape: Shape) -> str:
    """``lk-`` + a keyed digest of the model and the prompt family (tool names, system layout).

    With breakpoints the cache matches exact prefixes whatever the key, so the key only routes:
    one per family keeps a family's calls together, and stays the same when a tool or the system
    prompt is edited — the server's diagnosis then names the change (``tools_changed``,
    ``input_changed``), not ``prompt_cache_key_changed``.
    """
    memo = policy._fp._links
    found: Optional[str] = memo.get(("family key", shape.model, shape.family))
    if found is None:
        found = "lk-" + policy._fp.digest(b"family key", shape.model.encode(), shape.family, size=12).hex()
        memo.put(("family key", shape.model, shape.family), found)
    return found


def rejects(exc: BaseException) -> bool:
    """Whether ``exc`` is a 400 refusing one of the breakpoint fields (``unknown_parameter`` or an
    OpenAI-compatible server's own wording naming the field)."""
    if getattr(exc, "status_code", None) != 400:
        return False
    text = " ".join(str(v) for v in (getattr(exc, "param", None), getattr(exc, "code", None), exc) if v)
    return any(field in text for field in _FIELDS)


def with_fallback(send: Callable[[], T], resend: Callable[[], T], on_reject: Callable[[], None]) -> Callable[[], T]:
    """``send``, or — when the server rejects the breakpoint fields — ``on_reject()`` and ``resend()``."""

    def call() -> T:
        try:
            return send()
        except Exception as exc:
            if not rejects(exc):
                raise
        on_reject()
        return resend()

    return call


def awith_fallback(
    send: Callable[[], Awaitable[T]], resend: Callable[[], Awaitable[T]], on_reject: Callable[[], None]
) -> Callable[[], Awaitable[T]]:
    """Async twin of `with_fallback`."""

    async def call() -> T:
        try:
            return await send()
        except Exception as exc:
            if not rejects(exc):
                raise
        on_reject()
        return await resend()

    return call
