"""OpenAI's prompt caching from GPT-5.6 on, as the emulator serves it (see ``docs/emulator.md``).

From the openai SDK 3.60 types (``PromptCacheOptions``, ``prompt_cache_breakpoint``,
``cache_write_tokens``, ``prompt_cache_diagnostics``) and api-facts §3:

- a request's prompt is a sequence of blocks: each tool, Responses ``instructions``, then each
  content part of each item (a string content is one block); an entry is an exact prefix,
  keyed by model and ``prompt_cache_key``, ending at a block;
- breakpoints: explicit ones on content parts (``{"mode": "explicit", "ttl"?}``), and in
  ``mode: "implicit"`` (the default) one of OpenAI's own at the end of the prompt; a request
  *writes* the implicit one and its latest three explicit ones (``mode: "explicit"``: the
  latest four; none at all: nothing is cached), each prefix of at least 1,024 tokens, for its
  TTL (the breakpoint's ``ttl``, else the request's ``prompt_cache_options.ttl``, ``30m`` by
  default; ``12h`` also on Responses and per breakpoint), refreshed when read;
- matching looks back from the request's breakpoints without a block limit, over the latest
  80 breakpoints of the conversation: the request's own, and the places where earlier
  requests sharing its prefix wrote breakpoints (entries, live or expired); the read is the
  furthest live one, exact to the token (no 128-token steps); the tokens reported written are
  the furthest written prefix beyond it (``cache_write_tokens``, ``12h`` part in Responses'
  ``cache_write_tokens_details``); writes are reported even when 0;
- ``prompt_cache_options.prewarm: true`` (Responses) writes without generating;
  ``comparison_response_id`` (Responses) asks for ``prompt_cache_diagnostics`` against an
  earlier response of this emulator: ``cache_hit`` when the request read all it shared with
  that response's reusable prefix, else ``cache_miss`` with the first difference
  (``model_changed``, ``prompt_cache_key_changed``, ``tools_changed``, ``input_changed``),
  ``comparison_response_not_found``, or ``unavailable`` (nothing differs, yet nothing was read);
- a model before GPT-5.6 answers 400 ``unknown_parameter`` to either field, as does Chat to
  ``prewarm`` / ``comparison_response_id``; bad values answer 400 ``invalid_value``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple, Optional, Protocol

from ..core._cache_facts import (
    OPENAI_BREAKPOINT_TTLS, OPENAI_BREAKPOINT_WINDOW, OPENAI_DEFAULT_TTL, OPENAI_MAX_BREAKPOINTS, OPENAI_MIN_TOKENS,
    accepts_breakpoints,
)  # fmt: skip
from ._cache import CacheResult, Provider
from ._errors import BadRequest
from ._text import PER_MESSAGE_TOKENS, PER_REQUEST_TOKENS, _walk



class PromptCache(Protocol):
    """What the rules need of `_prompt_cache.PromptCache` (which imports this module: a protocol, no circle)."""

    _lock: Any
    _entries: Any

    def now(self) -> float: ...
    def _live(self, key: bytes, now: float) -> bool: ...
    def _put(self, key: bytes, ttl: float, now: float) -> None: ...

__all__ = ["Fingerprint", "check_cache_fields", "lookup", "response_fields", "write_details"]

BREAKPOINT = "prompt_cache_breakpoint"
_PARTS = {"openai-chat": frozenset({"text", "image_url", "input_audio", "file"}),
          "openai-responses": frozenset({"input_text", "input_image", "input_file"})}  # fmt: skip
_OPTIONS = {"openai-chat": ("mode", "ttl"), "openai-responses": ("mode", "ttl", "prewarm", "comparison_response_id")}
_REQUEST_TTLS = {"openai-chat": ("30m",), "openai-responses": ("30m", "12h")}
RESPONSES_KEPT = 10_000
"""Responses remembered for ``comparison_response_id`` (oldest dropped first)."""


class _Block(NamedTuple):
    kind: str
    """``"tool"``, ``"instructions"`` or ``"input"``."""
    tag: str
    text: str
    chars: int
    fixed: int
    breakpoint: Optional[Mapping[str, Any]]


class Fingerprint(NamedTuple):
    """What the emulator keeps of a Responses request, for a later ``comparison_response_id``."""

    model: str
    key: Optional[str]
    digests: tuple[bytes, ...]
    kinds: tuple[str, ...]
    tokens: tuple[int, ...]
    reusable: int
    """Tokens of its furthest written breakpoint (0: it wrote none)."""


def _unknown(name: str) -> BadRequest:
    return BadRequest(f"Unknown parameter: '{name}'.", param=name, code="unknown_parameter")


def _invalid(name: str, value: Any, allowed: tuple[str, ...]) -> BadRequest:
    quoted = ", ".join(f"'{v}'" for v in allowed)
    return BadRequest(f"Invalid value: {value!r}. Supported values are: {quoted}.", param=name, code="invalid_value")


def _parts(api: Provider, body: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """``(parameter path, part)`` of every content part a breakpoint could sit on."""
    name = "messages" if api == "openai-chat" else "input"
    items = body.get(name)
    for i, item in enumerate(items if isinstance(items, list) else []):
        if not isinstance(item, Mapping):
            continue
        for field in ("content", "output"):
            parts = item.get(field)
            for j, part in enumerate(parts if isinstance(parts, list) else []):
                yield f"{name}[{i}].{field}[{j}]", part


def check_cache_fields(api: Provider, body: Mapping[str, Any]) -> None:
    """Raise `BadRequest` (400) for prompt-cache fields the model or the API does not take, or bad values."""
    if api == "anthropic":
        return
    new = accepts_breakpoints(body.get("model") if isinstance(body.get("model"), str) else None)
    options = body.get("prompt_cache_options")
    if options is not None:
        if not new:
            raise _unknown("prompt_cache_options")
        if not isinstance(options, Mapping):
            raise BadRequest(f"Invalid type for 'prompt_cache_options': expected an object, but got {options!r} instead.",
                             param="prompt_cache_options", code="invalid_type")  # fmt: skip
        for key in options:
            if key not in _OPTIONS[api]:
                raise _unknown(f"prompt_cache_options.{key}")
        if options.get("mode", "implicit") not in ("implicit", "explicit"):
            raise _invalid("prompt_cache_options.mode", options.get("mode"), ("implicit", "explicit"))
        if "ttl" in options and options["ttl"] not in _REQUEST_TTLS[api]:
            raise _invalid("prompt_cache_options.ttl", options["ttl"], _REQUEST_TTLS[api])
    for path, part in _parts(api, body):
        if not isinstance(part, Mapping) or BREAKPOINT not in part:
            continue
        name = f"{path}.{BREAKPOINT}"
        if not new or part.get("type") not in _PARTS[api]:
            raise _unknown(name)
        bp = part[BREAKPOINT]
        if not isinstance(bp, Mapping) or bp.get("mode") != "explicit":
            raise _invalid(f"{name}.mode", bp.get("mode") if isinstance(bp, Mapping) else bp, ("explicit",))
        if "ttl" in bp and bp["ttl"] not in OPENAI_BREAKPOINT_TTLS:
            raise _invalid(f"{name}.ttl", bp["ttl"], tuple(OPENAI_BREAKPOINT_TTLS))


def _text(value: Any) -> str:
    """What a block contributes to the prompt: a plain text part renders as its text (so a string
    content and the one text part standing for it are the same prompt), anything else as JSON."""
    if isinstance(value, Mapping):
        value = {k: v for k, v in value.items() if k != BREAKPOINT}
        if value.get("type") in ("text", "input_text") and isinstance(value.get("text"), str) and set(value) <= {"type", "text"}:
            return str(value["text"])
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))


def _size(value: Any) -> tuple[int, int]:
    chars = fixed = 0
    for c, f in _walk(value):
        chars, fixed = chars + c, fixed + f
    return chars, fixed


def _blocks(api: Provider, body: Mapping[str, Any]) -> list[_Block]:
    out = [_Block("tool", f"tool{i}", _text(t), len(json.dumps(t, sort_keys=True)) + 2, 0, None) for i, t in enumerate(body.get("tools") or [])]
    if api == "openai-responses" and isinstance(body.get("instructions"), str):
        out.append(_Block("instructions", "instructions", body["instructions"], len(body["instructions"]), 0, None))
    items = body.get("messages") if api == "openai-chat" else body.get("input")
    if isinstance(items, str):
        return [*out, _Block("input", "m0:user", items, len(items), PER_MESSAGE_TOKENS, None)]
    for m, item in enumerate(items or []):
        if not isinstance(item, Mapping):
            continue
        role = item.get("role")
        field = "content" if "content" in item else "output"
        content = item.get(field)
        rest = _text({k: v for k, v in item.items() if k not in ("role", field)})
        head = f"m{m}:{role}:{rest}"
        if isinstance(content, list) and content:
            for j, part in enumerate(content):
                chars, fixed = _size(part)
                bp = part.get(BREAKPOINT) if isinstance(part, Mapping) else None
                out.append(_Block("input", f"{head}:{j}", _text(part), chars, fixed + (PER_MESSAGE_TOKENS if j == 0 else 0), bp))
        else:  # a string content is part 0; an item without content (a tool call) is its other keys
            chars, fixed = _size(item.get("content", item))
            out.append(_Block("input", f"{head}:0", _text(content) if content else "", chars, fixed + PER_MESSAGE_TOKENS, None))
    return out


def lookup(cache: PromptCache, api: Provider, body: Mapping[str, Any], prompt_tokens: int) -> CacheResult:
    """Apply the GPT-5.6+ rules (module docstring) to one request against ``cache``'s entries."""
    blocks = _blocks(api, body)
    options = body.get("prompt_cache_options") or {}
    explicit_mode = options.get("mode") == "explicit"
    request_ttl = str(options.get("ttl") or OPENAI_DEFAULT_TTL)
    model, key = str(body.get("model")), body.get("prompt_cache_key")
    state = hashlib.sha256(f"{model}\x1f{key}".encode()).digest()
    chars, fixed = 0, PER_REQUEST_TOKENS
    digests: list[bytes] = []
    tokens: list[int] = []
    for block in blocks:
        chars, fixed = chars + block.chars, fixed + block.fixed
        state = hashlib.sha256(state + block.tag.encode() + b"\x1f" + block.text.encode()).digest()
        digests.append(b"p" + state)
        tokens.append(min(math.ceil(chars / 4) + fixed, prompt_tokens))
    explicit = [i for i, b in enumerate(blocks) if b.breakpoint is not None]
    ttls = {i: str(blocks[i].breakpoint.get("ttl") or request_ttl) for i in explicit}  # type: ignore[union-attr]
    writes = OPENAI_MAX_BREAKPOINTS if explicit_mode else OPENAI_MAX_BREAKPOINTS - 1
    written = {i: ttls[i] for i in explicit[-writes:]}
    if not explicit_mode and blocks:
        written[len(blocks) - 1] = request_ttl
    every = sorted({*explicit, *written})
    cached = new = new_12h = 0
    reusable = 0
    if every:
        last = every[-1]
        with cache._lock:
            now = cache.now()
            entries = cache._entries
            known = [q for q in range(last + 1) if digests[q] in entries]
            considered = sorted({*known, *every})[-OPENAI_BREAKPOINT_WINDOW:]
            read = max((q for q in considered if cache._live(digests[q], now)), default=-1)
            if read >= 0:
                _, ttl = entries[digests[read]]
                entries[digests[read]] = (now + ttl, ttl)
                cached = tokens[read]
            for p, ttl_name in sorted(written.items()):
                if tokens[p] < OPENAI_MIN_TOKENS:
                    continue
                cache._put(digests[p], OPENAI_BREAKPOINT_TTLS[ttl_name], now)
                reusable = max(reusable, tokens[p])
                if p > read:
                    new = max(new, tokens[p] - cached)
                    if ttl_name == "12h":
                        new_12h = max(new_12h, tokens[p] - cached)
    kinds = tuple(b.kind for b in blocks)
    fp = Fingerprint(model, key if isinstance(key, str) else None, tuple(digests), kinds, tuple(tokens), reusable)
    return CacheResult(cached_tokens=cached, written_tokens=new, written_12h_tokens=new_12h, reports_writes=True, fingerprint=fp)


def write_details(result: CacheResult) -> dict[str, Any]:
    """Responses' ``input_tokens_details.cache_write_tokens_details`` (GPT-5.6+ only; ``{}`` before)."""
    if not result.reports_writes:
        return {}
    return {"cache_write_tokens_details": {"ttl_30m_tokens": result.written_tokens - result.written_12h_tokens,
                                           "ttl_12h_tokens": result.written_12h_tokens}}  # fmt: skip


def response_fields(cache: Any, body: Mapping[str, Any], result: CacheResult, response_id: str) -> dict[str, Any]:
    """The Response's ``prompt_cache_options`` and, when asked, ``prompt_cache_diagnostics`` (GPT-5.6+)."""
    fp = result.fingerprint
    if not isinstance(fp, Fingerprint):
        return {}
    options = body.get("prompt_cache_options") or {}
    compare = options.get("comparison_response_id")
    applied = {"mode": options.get("mode", "implicit"), "ttl": options.get("ttl", OPENAI_DEFAULT_TTL), "comparison_response_id": compare}
    kept: Optional[OrderedDict[str, Fingerprint]] = getattr(cache, "responses", None)
    if kept is None:
        return {"prompt_cache_options": applied}
    out: dict[str, Any] = {"prompt_cache_options": applied}
    if compare is not None:
        out["prompt_cache_diagnostics"] = _diagnose(kept.get(str(compare)), fp, result.cached_tokens)
    kept[response_id] = fp
    kept.move_to_end(response_id)
    while len(kept) > RESPONSES_KEPT:
        kept.popitem(last=False)
    return out


def _diagnose(old: Optional[Fingerprint], new: Fingerprint, read: int) -> dict[str, Any]:
    if old is None:
        return {"type": "comparison_response_not_found"}
    reason: Optional[str] = None
    if old.model != new.model:
        reason, shared = "model_changed", 0
    elif old.key != new.key:
        reason, shared = "prompt_cache_key_changed", 0
    else:
        n = next((k for k, (a, b) in enumerate(zip(old.digests, new.digests)) if a != b), min(len(old.digests), len(new.digests)))
        shared = old.tokens[n - 1] if n else 0
        if read > 0 and read >= min(shared, old.reusable):
            return {"type": "cache_hit"}
        if shared >= old.reusable:
            return {"type": "unavailable"}  # nothing differs within what it wrote, yet nothing was read (expired)
        at = {kinds[n] for kinds in (old.kinds, new.kinds) if n < len(kinds)}
        reason = "tools_changed" if "tool" in at else "input_changed"
    if read > 0 and reason is None:
        return {"type": "cache_hit"}
    return {"type": "cache_miss", "reason": reason, "cache_missed_tokens": max(old.reusable - shared, 0),
            "comparison_reusable_tokens": old.reusable}  # fmt: skip
