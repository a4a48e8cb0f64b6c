"""``client.latency.prewarm(**request)``: the prompt cache filled with a request's static prefix.

The client's `CachePolicy` plans ``request`` as it would plan the call (the breakpoints at its
static boundaries, from what the family has learned, without learning from it), the request is
cut after the furthest of them (`core._prewarm`), and sent through the client — one record,
``method="prewarm"``, ``extra["prewarm"] = True``, its writes in the ledger — so the first real
call reads: on OpenAI Responses (GPT-5.6+) with ``prompt_cache_options.prewarm: true``, on Chat
Completions and Anthropic as a one-token call carrying the breakpoints.

`prewarm` is what ``client.latency.prewarm`` runs: ``client.latency`` is the client's own
`Recorder`, and `Recorder.prewarm` sends through the client that handed it out.
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any, Optional

from ..core._cache_facts import OPENAI_BREAKPOINT_TTLS, min_cacheable_tokens, ttl_seconds
from ..core._learn import Learned
from ..core._openai_breakpoints import plan_breakpoints
from ..core._openai_verify import expect_breakpoints
from ..core._prewarm import prewarm_request
from ..core._record import CallRecord
from ..core._segments import Unsupported, parse
from ..core._verify import expect_anthropic
from ..core._breakpoints import plan_markers
from ._caching_openai import plan_breakpoint_call, request_options
from ._calls import PREPLANNED, Finish

if TYPE_CHECKING:
    from ._caching import CachePolicy

__all__ = ["plan_prewarm", "prewarm"]

logger = logging.getLogger("latencykit")


def plan_prewarm(policy: CachePolicy, api: str, request: dict[str, Any], url: Any) -> Optional[tuple[dict[str, Any], Finish]]:
    """``(pre-warm request, finish hook)`` for ``request``, or ``None`` when it has no static prefix to cache."""
    parts = policy._breakpoint_ttl(api, request, url)
    if api != "messages" and parts is None:
        return None  # before GPT-5.6 there is no breakpoint to end a prefix at
    try:
        shape = parse(api, request, policy._fp, policy._estimate, parts)
    except Unsupported:
        return None
    now = policy.clock()
    dynamic = policy._families.learned(shape)
    if api == "messages":
        sent, _, upto = policy._plan_anthropic(shape, request, dynamic, None, -1, now)
    else:
        sent, _, upto = plan_breakpoint_call(policy, shape, request, Learned(None, dynamic), now, str(url))
    if upto < 0:
        return None
    warm = prewarm_request(api, sent, shape, upto)
    cut = parse(api, warm, policy._fp, policy._estimate, parts)  # our breakpoints are in it now: the cut's own markers
    key = warm.get("prompt_cache_key")
    prefixes = cut.prefixes(key if isinstance(key, str) else "")
    states = policy.ledger.states(prefixes, now)
    if api == "messages":
        mins = min_cacheable_tokens(cut.model, policy.min_tokens)
        markers = plan_markers(cut, []).markers
        exp = expect_anthropic(cut, states, markers, mins)
        kept = [(p, ttl_seconds(t)) for p, t in markers if cut.blocks[p].prefix_tokens >= mins]
    else:
        plan = plan_breakpoints(cut, [], explicit_mode=request_options(warm).get("mode") == "explicit")
        exp = expect_breakpoints(cut, states, plan)
        kept = [(p, OPENAI_BREAKPOINT_TTLS.get(t, OPENAI_BREAKPOINT_TTLS["30m"])) for p, t in plan.written
                if cut.blocks[p].prefix_tokens >= exp.min_tokens]  # fmt: skip

    def finish(rec: CallRecord) -> None:
        rec.method = "prewarm"
        rec.extra["prewarm"] = True
        policy._verify(rec, exp, implicit=False)
        if (rec.cache_read_tokens or 0) + (rec.cache_write_tokens or 0) > 0:
            fresh = [prefixes[p] for p, _ in kept if p > exp.read_block]
            policy.note_writes(rec, [(prefixes[p], ttl) for p, ttl in kept], fresh, None)

    return warm, finish


def prewarm(client: Any, request: dict[str, Any]) -> Any:
    """``client.latency.prewarm(**request)`` (`Recorder.prewarm`) on ``client``: see `Recorder.prewarm`."""
    from ._caching import CachePolicy

    policy = client._lk.planner
    if not isinstance(policy, CachePolicy):
        raise ValueError(f"prewarm needs the client's CachePolicy (cache='auto', 'off' or a policy), got {policy!r}")
    if hasattr(client, "chat"):
        api, resource = ("responses", client.responses) if "input" in request or "instructions" in request else ("chat.completions", client.chat.completions)
    else:
        api, resource = "messages", client.messages
    planned = plan_prewarm(policy, api, request, client.base_url)
    is_async = inspect.iscoroutinefunction(resource.create)
    if planned is None:
        logger.debug("latencykit: nothing to pre-warm in this request (no static prefix with a breakpoint)")
        return _none() if is_async else None
    warm, finish = planned
    records: list[CallRecord] = []

    def keep(rec: CallRecord) -> None:
        finish(rec)
        records.append(rec)

    if is_async:
        return _asend(resource, warm, keep, records)
    token = PREPLANNED.set(keep)
    try:
        resource.create(**warm)
    finally:
        PREPLANNED.reset(token)
    return records[0] if records else None


async def _asend(resource: Any, warm: dict[str, Any], keep: Finish, records: list[CallRecord]) -> Optional[CallRecord]:
    token = PREPLANNED.set(keep)
    try:
        await resource.create(**warm)
    finally:
        PREPLANNED.reset(token)
    return records[0] if records else None


async def _none() -> None:
    return None
