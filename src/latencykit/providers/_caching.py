"""`CachePolicy`: the request planner that places prompt-cache breakpoints and verifies every call.

It is the ``Settings.planner`` of a client (``lk.Anthropic(cache="auto" | "off" | policy |
strategy)``): before each call it parses the request (`core._segments`), learns which
segments change (`core._learn`), lets the breakpoint strategy choose markers within the
budget (`core._breakpoints`; OpenAI GPT-5.6+ breakpoints in `_caching_openai`) or derives an
OpenAI ``prompt_cache_key``, and predicts the cache read from the `Ledger` (`core._verify`). The returned finish hook fills the record's
``cache_expected_tokens`` / ``cache_verdict`` / ``cache_miss_reason``, updates the ledger
and warns (rate-limited, on the ``latencykit`` logger) about unexpected misses.
Nothing here raises into the call: odd shapes are sent as given.
"""

from __future__ import annotations

import logging
import operator
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from itertools import compress, repeat
from typing import Any, Callable, Literal, Optional, Union

from ..core._breakpoints import BreakpointPlanner, PlanContext, Strategy, apply_markers, plan_markers
from ..core._cache_facts import (
    OPENAI_BREAKPOINT_TTLS, OPENAI_DEFAULT_TTL, OPENAI_MIN_TOKENS, OPENAI_TTL_SECONDS, TTL_SECONDS, accepts_breakpoints,
    min_cacheable_tokens, ttl_seconds,
)  # fmt: skip
from ..core._learn import Change, Families
from ..core._ledger import Ledger
from ..core._record import CallRecord
from ..core._segments import Fingerprinter, Shape, Unsupported, frozen, parse, texts
from ..core._tokens import CHARS_PER_TOKEN, PER_MESSAGE_TOKENS, PER_REQUEST_TOKENS, block_size
from ..core._verify import (
    BELOW_MINIMUM, NOT_CHANGED_LOCALLY, PARTIAL, PREFIX_CHANGED, UNEXPECTED_MISS, Expectation, expect_anthropic, expect_openai, judge,
)
from ._caching_openai import plan_breakpoint_call, request_options
from ._calls import Finish, given

__all__ = ["CacheOption", "CachePolicy", "resolve_cache"]

logger = logging.getLogger("latencykit")

_APIS = ("messages", "chat.completions", "responses")
_MODES = ("auto", "off")


class CachePolicy:
    """How a client places prompt-cache breakpoints and checks every call's cache usage.

    ``breakpoints``: ``"auto"`` (`BreakpointPlanner`), ``"off"`` (send markers as given),
    or any strategy callable ``(PlanContext) -> Sequence[int]``. ``derive_key``: set an
    OpenAI ``prompt_cache_key`` from the static prefix when the caller set none.
    ``min_tokens``: per-model minimum overrides (model-name substring → tokens).
    ``ledger``: share one `Ledger` between clients. ``secret``: key for fingerprints and
    derived cache keys (default ``$LATENCYKIT_CACHE_SECRET`` or per process); processes
    sharing a secret derive the same keys. ``estimator``: block → ``(characters, fixed
    tokens)``. ``diagnose`` (or ``diagnostics``): ask the server's own cache verdict —
    Anthropic's cache diagnostics, OpenAI Responses' ``comparison_response_id`` (GPT-5.6+) against
    the family's previous response — recorded in ``record.server_cache_miss_reason``.
    ``ttl``: the lifetime of the breakpoints latencykit places: ``"1h"`` (Anthropic; ``"5m"``
    the default) or ``"12h"`` (OpenAI GPT-5.6+; ``"30m"`` the default); the other provider's
    calls keep their default. ``warn_every``: seconds between unexpected-miss warnings.
    ``clock``: monotonic seconds, injectable for tests.
    """

    takes_url = True
    """The client passes its base URL (``url=``): a server that rejects OpenAI breakpoints is remembered by it."""

    def __init__(
        self,
        breakpoints: Union[str, Strategy] = "auto",
        *,
        derive_key: bool = True,
        min_tokens: Optional[Mapping[str, int]] = None,
        ledger: Optional[Ledger] = None,
        secret: Optional[bytes] = None,
        estimator: Optional[Callable[[Any], tuple[int, int]]] = None,
        diagnostics: bool = False,
        diagnose: bool = False,
        ttl: Optional[str] = None,
        warn_every: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(breakpoints, str):
            if breakpoints not in _MODES:
                raise ValueError(f"breakpoints must be 'auto', 'off' or a strategy callable, got {breakpoints!r}")
            self.strategy: Optional[Strategy] = BreakpointPlanner() if breakpoints == "auto" else None
        elif callable(breakpoints):
            self.strategy = breakpoints
        else:
            raise ValueError(f"breakpoints must be 'auto', 'off' or a strategy callable, got {breakpoints!r}")
        if ledger is not None and not isinstance(ledger, Ledger):
            raise ValueError(f"ledger must be a latencykit Ledger, got {ledger!r}")
        self.derive_key = derive_key
        self.min_tokens = _check_min_tokens(min_tokens)
        if isinstance(warn_every, bool) or not isinstance(warn_every, (int, float)) or not 0 <= warn_every < float("inf"):
            raise ValueError(f"warn_every must be a number of seconds >= 0, got {warn_every!r}")
        self.ledger = ledger if ledger is not None else Ledger(clock=clock)
        if ttl is not None and ttl not in TTL_SECONDS and ttl not in OPENAI_BREAKPOINT_TTLS:
            raise ValueError(f"ttl must be None, '5m', '1h' (Anthropic), '30m' or '12h' (OpenAI), got {ttl!r}")
        self.diagnostics = bool(diagnostics or diagnose)
        self.ttl = ttl
        self.warn_every = warn_every
        self.clock = clock
        self._fp = Fingerprinter(secret)
        self._estimate = estimator or block_size
        self._families = Families(clock=clock)
        self._warn_lock = threading.Lock()
        self._last_warning = float("-inf")
        self._suppressed = 0
        self._last_message_id: dict[bytes, str] = {}
        self._rejected: set[str] = set()
        """Base URLs whose server answered 400 to the OpenAI breakpoint fields: sent as before there."""
        self._writers: OrderedDict[bytes, CallRecord] = OrderedDict()
        """Prefix written → the record of the call that wrote it, until a later call reads it."""
        self._short_finish: dict[tuple[bool, int], Finish] = {}
        """The finish hook of a too-short request, per (implicit caching, minimum tokens)."""

    @property
    def mode(self) -> str:
        """``"auto"``, ``"off"`` or ``"custom"``."""
        if self.strategy is None:
            return "off"
        return "auto" if isinstance(self.strategy, BreakpointPlanner) else "custom"

    def __repr__(self) -> str:
        return f"CachePolicy(mode={self.mode!r}, derive_key={self.derive_key}, ledger={self.ledger!r})"

    # -- the planner seam -----------------------------------------------------------------

    def __call__(self, api: str, kwargs: dict[str, Any], url: Any = None) -> tuple[dict[str, Any], Optional[Finish]]:
        """Plan one request: ``(kwargs to send, finish hook)``; the caller's ``kwargs`` are never mutated.

        ``url``: the client's base URL (where OpenAI breakpoints were rejected, none are sent).
        """
        if api not in _APIS:
            return kwargs, None
        short = self._too_short(api, kwargs)
        if short is not None:
            return kwargs, short
        parts = self._breakpoint_ttl(api, kwargs, url)
        try:
            shape = parse(api, kwargs, self._fp, self._estimate, parts)
        except Unsupported as exc:
            logger.debug("latencykit: not planning the prompt cache for this request (%s)", exc)
            return kwargs, None
        text = texts(api, kwargs, shape)
        now = self.clock()
        learned = self._families.observe(shape, text, defer_prints=True, now=now)
        if learned.newly_dynamic is not None and self.strategy is not None:  # "off" moves no breakpoint
            _warn_dynamic(learned.newly_dynamic)
        if api == "messages":
            sent, finish, furthest = self._plan_anthropic(shape, kwargs, learned.dynamic, learned.change, learned.previous_marked, now,
                                                          learned.conversation)  # fmt: skip
        elif parts is not None:
            sent, finish, furthest = plan_breakpoint_call(self, shape, kwargs, learned, now, str(url))
        else:
            sent, finish, furthest = self._plan_openai(shape, kwargs, learned.dynamic, learned.change, learned.previous_marked, now)
        self._families.marked(shape, furthest, learned, text)
        return sent, finish

    def _breakpoint_ttl(self, api: str, kwargs: Mapping[str, Any], url: Any) -> Optional[str]:
        """The request-level TTL when this OpenAI call takes breakpoints (GPT-5.6+, a server that
        has not rejected them), else ``None``."""
        if api == "messages" or not accepts_breakpoints(kwargs.get("model") if isinstance(kwargs.get("model"), str) else None):
            return None
        if self._rejected and str(url) in self._rejected:
            return None
        ttl = request_options(kwargs).get("ttl")
        if ttl in OPENAI_BREAKPOINT_TTLS:
            return str(ttl)
        return "12h" if self.ttl == "12h" and api == "responses" else OPENAI_DEFAULT_TTL

    def reject(self, url: str) -> None:
        """The server at ``url`` refused the OpenAI breakpoint fields: plan its calls as before from now on."""
        if url not in self._rejected:
            logger.info("latencykit: %s does not take OpenAI prompt-cache breakpoints; sending its requests without them", url)
        self._rejected.add(url)

    def note_writes(self, rec: CallRecord, writes: list[tuple[bytes, float]], fresh: list[bytes], read_at: Optional[bytes]) -> None:
        """After a call that used the cache: ``writes`` (prefix, TTL) into the ledger; ``fresh``: the
        prefixes it wrote beyond what it read; ``read_at``: the prefix it read (its writer was read back)."""
        self.ledger.write_many(writes, self.clock())
        with self._warn_lock:
            writers = self._writers
            if read_at is not None:
                writer = writers.pop(read_at, None)
                if writer is not None and writer is not rec:
                    writer.extra["cache_write_read_back"] = True
            if (rec.cache_write_tokens or 0) > 0 and fresh:
                rec.extra.setdefault("cache_write_read_back", False)
                for prefix in fresh:
                    writers[prefix] = rec
                    writers.move_to_end(prefix)
                while len(writers) > _WRITERS:
                    writers.popitem(last=False)

    def log_strategy_failure(self) -> None:
        logger.debug("latencykit: the breakpoint strategy failed; no markers added", exc_info=True)

    def _too_short(self, api: str, kwargs: dict[str, Any]) -> Optional[Finish]:
        """The finish hook of a request too short for any cache to hold, or ``None``.

        A prompt of a few plain strings (no tools, blocks or markers) whose estimate stays
        below the cacheable minimum gets no marker, no key and no expected read, whatever
        the family's history: it is sent as given and judged without being parsed, learned
        or planned (~40 µs a call). Only under the built-in planner and estimator, whose
        decisions this repeats; anything else takes the full path.
        """
        if self.diagnostics or self._estimate is not block_size or not isinstance(self.strategy, (BreakpointPlanner, type(None))):
            return None
        size = _plain_size(api, kwargs)
        if size is None:
            return None
        chars, parts = size
        limit = min_cacheable_tokens(kwargs.get("model"), self.min_tokens) if api == "messages" else OPENAI_MIN_TOKENS
        # An upper bound of the estimate: the text, and twice the fixed tokens of every part.
        if -(-chars // CHARS_PER_TOKEN) + 2 * (PER_REQUEST_TOKENS + PER_MESSAGE_TOKENS * parts) >= limit:
            return None
        implicit = api != "messages"
        # One hook per (API kind, minimum), made once: this path runs for every short call.
        finish = self._short_finish.get((implicit, limit))
        if finish is None:
            finish = self._short_finish[(implicit, limit)] = _Verify(self, Expectation(0, -1, BELOW_MINIMUM, None, False, limit), implicit)
        return finish

    def _plan_anthropic(
        self, shape: Shape, kwargs: dict[str, Any], dynamic: dict[str, int], change: Optional[Change], previous: int, now: float,
        conversation: bool = False,
    ) -> tuple[dict[str, Any], Finish, int]:
        prefixes = shape.prefixes()
        states = self.ledger.states(prefixes, now)
        mins = min_cacheable_tokens(shape.model, self.min_tokens)
        wanted: list[int] = []
        if self.strategy is not None:
            written = frozenset(compress(range(len(states)), map(operator.eq, states, repeat("live"))))
            try:
                wanted = list(self.strategy(frozen(PlanContext, shape=shape, min_tokens=mins, dynamic=dynamic, written=written,
                                                   conversation=conversation)))  # fmt: skip
            except Exception:
                self.log_strategy_failure()
        plan = plan_markers(shape, wanted, self.ttl if self.ttl in TTL_SECONDS else None)
        sent = apply_markers(kwargs, shape, plan.added) if plan.added else kwargs
        exp = expect_anthropic(
            shape, states, plan.markers, mins, change=change, previous_marked=previous, limited=plan.limited
        )
        kept = [(p, ttl) for p, ttl in plan.markers if shape.blocks[p].prefix_tokens >= mins]
        if self.diagnostics and not given(kwargs.get("diagnostics")):
            sent = {**sent, "diagnostics": {"previous_message_id": self._last_message_id.get(shape.family)}}

        def finish(rec: CallRecord) -> None:
            self._verify(rec, exp, implicit=False)
            if rec.response_id and self.diagnostics:
                self._last_message_id[shape.family] = rec.response_id
            if (rec.cache_read_tokens or 0) + (rec.cache_write_tokens or 0) > 0:
                read_at = prefixes[exp.read_block] if exp.read_block >= 0 and rec.cache_read_tokens else None
                fresh = [prefixes[p] for p, _ in kept if p > exp.read_block]
                self.note_writes(rec, [(prefixes[p], ttl_seconds(ttl)) for p, ttl in kept], fresh, read_at)

        return sent, finish, max((p for p, _ in kept), default=-1)

    def _plan_openai(
        self, shape: Shape, kwargs: dict[str, Any], dynamic: dict[str, int], change: Optional[Change], previous: int, now: float
    ) -> tuple[dict[str, Any], Finish, int]:
        key = kwargs.get("prompt_cache_key")
        sent = kwargs
        # Below OpenAI's 1,024-token minimum nothing is cached, so a key could only change the
        # request (Responses echoes it back) without any benefit: send as given.
        if not given(key) and shape.prompt_tokens >= OPENAI_MIN_TOKENS:
            key = self.derived_key(shape, dynamic) if self.derive_key else None
            if key is not None:
                sent = {**kwargs, "prompt_cache_key": key}
        prefixes = shape.prefixes(key if isinstance(key, str) else "")
        exp = expect_openai(shape, self.ledger.states(prefixes, now), change=change, previous_marked=previous)
        eligible = [i for i, b in enumerate(shape.blocks) if b.prefix_tokens >= OPENAI_MIN_TOKENS]

        def finish(rec: CallRecord) -> None:
            self._verify(rec, exp, implicit=True)
            if rec.cache_read_tokens is not None:
                self.ledger.write_many([(prefixes[i], OPENAI_TTL_SECONDS) for i in eligible], self.clock())

        return sent, finish, max(eligible, default=-1)

    def derived_key(self, shape: Shape, dynamic: Mapping[str, int]) -> Optional[str]:
        """``lk-`` + a keyed digest of the model and the static prefix, or ``None``.

        The static prefix is the tools and the system prompt (unless learned dynamic) and,
        once learned, the messages before the first one that changes from call to call
        (few-shot examples); a growing conversation's messages are left out, so its key
        stays the same turn after turn.
        """
        if "tools" in dynamic:
            return None
        parts: list[Any] = [shape.model]
        learned = any(n.startswith("message") for n in dynamic)
        for seg in shape.segments[1:]:
            if seg.name in dynamic:
                if seg.name.startswith("message") and dynamic[seg.name] > 0:
                    parts.append(seg.blocks[: dynamic[seg.name]])
                break
            if seg.name.startswith("message") and not learned:
                break
            parts.append(seg.blocks)
        if len(parts) == 1:
            return None
        memo = self._fp._links
        key = tuple(parts)
        derived: Optional[str] = memo.get(key)
        if derived is None:
            digests = [self._fp.digest(*blocks) for blocks in parts[1:]]
            derived = "lk-" + self._fp.digest(shape.model.encode(), *digests, size=12).hex()
            memo.put(key, derived)
        return derived

    # -- verification -----------------------------------------------------------------------

    def _verify(self, rec: CallRecord, exp: Expectation, *, implicit: bool) -> None:
        rec.cache_expected_tokens = exp.expected_tokens
        if rec.outcome == "error" and rec.cache_read_tokens is None:
            return
        verdict, reason = judge(exp, rec.cache_read_tokens, rec.cache_write_tokens, implicit)
        rec.cache_verdict, rec.cache_miss_reason = verdict, reason
        if reason == PREFIX_CHANGED and exp.change is not None:
            rec.extra["cache_changed_segment"] = exp.change.segment
            rec.extra["cache_changed_offset"] = exp.change.offset
            rec.extra["cache_miss_detail"] = exp.change.describe()
        if verdict == UNEXPECTED_MISS or (verdict == PARTIAL and reason == NOT_CHANGED_LOCALLY):
            self._warn_miss(rec, exp)

    def _warn_miss(self, rec: CallRecord, exp: Expectation) -> None:
        now = self.clock()
        with self._warn_lock:
            if now - self._last_warning < self.warn_every:
                self._suppressed += 1
                return
            suppressed, self._suppressed, self._last_warning = self._suppressed, 0, now
        logger.warning(
            "latencykit: unexpected prompt-cache miss (%s, model %s): expected about %d cached tokens, the server "
            "read %s; nothing changed locally, so the entry was evicted or the request reached another replica%s",
            rec.cache_verdict, rec.request_model, exp.expected_tokens, rec.cache_read_tokens,
            f" ({suppressed} similar warnings suppressed)" if suppressed else "",
        )  # fmt: skip


class _Verify:
    """``finish(rec)``: `CachePolicy._verify` of ``rec`` against one fixed expectation."""

    __slots__ = ("policy", "exp", "implicit")

    def __init__(self, policy: CachePolicy, exp: Expectation, implicit: bool) -> None:
        self.policy, self.exp, self.implicit = policy, exp, implicit

    def __call__(self, rec: CallRecord) -> None:
        self.policy._verify(rec, self.exp, implicit=self.implicit)


_WRITERS = 4096
"""Unread writes whose writer record is remembered (to mark it read back when a later call reads it)."""
_MAX_PLAIN_MESSAGES = 64
_PLAIN_OPTIONS = frozenset(
    {
        "model", "messages", "input", "system", "instructions", "stream", "stream_options", "max_tokens",
        "max_completion_tokens", "max_output_tokens", "temperature", "top_p", "top_k", "n", "seed", "stop",
        "stop_sequences", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs",
        "metadata", "user", "safety_identifier", "service_tier", "store", "thinking", "reasoning",
        "reasoning_effort", "verbosity", "prompt_cache_key", "prompt_cache_retention", "extra_headers",
        "extra_query", "timeout",
    }
)  # fmt: skip
"""Request options that add nothing to the prompt (tools, ``extra_body``, a previous response... do)."""


def _plain_size(api: str, kwargs: Mapping[str, Any]) -> Optional[tuple[int, int]]:
    """``(characters, parts)`` of a prompt made only of plain strings, or ``None``.

    Plain: only options that add nothing to the prompt (no tools, response format, marker,
    previous response or ``extra_body``); the system prompt / instructions a string if
    given; at most 64 messages, each ``{"role": ..., "content": str}``. Anything else
    (blocks, images, tool calls) is ``None``.
    """
    if not _PLAIN_OPTIONS.issuperset(kwargs):
        # The SDKs' helpers (``chat.completions.stream()``, ``messages.stream()``) pass every option, the unused
        # ones as NOT_GIVEN / omit (``extra_body`` as None): those add nothing to the prompt either.
        for name in kwargs.keys() - _PLAIN_OPTIONS:
            value = kwargs[name]
            if value is not None and given(value):
                return None
    chars = parts = 0
    for name in ("system", "instructions"):
        value = kwargs.get(name)
        if given(value):
            if not isinstance(value, str):
                return None
            chars, parts = chars + len(value), parts + 1
    messages = kwargs.get("input") if api == "responses" else kwargs.get("messages")
    if isinstance(messages, str) and api == "responses":
        return chars + len(messages), parts + 1
    if not isinstance(messages, list) or len(messages) > _MAX_PLAIN_MESSAGES:
        return None
    for message in messages:
        if not (type(message) is dict or isinstance(message, Mapping)) or len(message) != 2:
            return None
        content = message.get("content")
        if not isinstance(content, str) or not isinstance(message.get("role"), str):
            return None
        chars, parts = chars + len(content), parts + 1
    return chars, parts


def _warn_dynamic(change: Change) -> None:
    logger.warning(
        "latencykit: the %s changes on every call (first difference at character %d), so a cache breakpoint "
        "after it is rewritten each time; breakpoints now stop before it so the earlier parts stay cached. "
        "Move dynamic content (timestamps, request ids) after the static content, e.g. into the user message.",
        "system prompt" if change.segment == "system" else change.segment, change.offset,
    )  # fmt: skip


def resolve_cache(cache: Any) -> Optional[CachePolicy]:
    """A client's ``cache=`` option as a `CachePolicy`: ``"auto"`` (default), ``"off"``, a policy or a strategy."""
    if cache is None or cache == "auto":
        return CachePolicy()
    if isinstance(cache, CachePolicy):
        return cache
    if cache == "off":
        return CachePolicy("off", derive_key=False)
    if callable(cache) and not isinstance(cache, str):
        return CachePolicy(cache)
    raise ValueError(f"cache must be 'auto', 'off', a latencykit.CachePolicy or a strategy callable, got {cache!r}")


CacheOption = Union[Literal["auto", "off"], CachePolicy, Strategy]
"""What a client's ``cache=`` accepts."""


def _check_min_tokens(value: Any) -> dict[str, int]:
    """``min_tokens`` as a dict of model-name substring → positive int; ValueError naming a bad value."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"min_tokens must be a mapping of model-name substring to tokens, e.g. {{'sonnet': 1024}}, got {value!r}")
    for key, tokens in value.items():
        if not isinstance(key, str) or isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            raise ValueError(f"min_tokens entries must be str -> int >= 1, got {key!r}: {tokens!r}")
    return dict(value)
