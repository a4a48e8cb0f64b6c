"""What of a request the semantic cache matches exactly, and what it matches by meaning.

Everything in the request body except the text of the newest user message must match
exactly: model, system / instructions, tools, sampling parameters, response format, the
earlier turns, any non-text part of the newest message. That part is canonicalized (sorted
JSON, without ``stream`` / ``stream_options`` / ``prompt_cache_key`` and without
``cache_control`` markers, which do not change the answer) and reduced to a keyed BLAKE2b
fingerprint (`Fingerprinter`, as for prompt-cache segments), together with the API and
the scope. Only the text of the newest user message is kept, long enough to embed it.

A request is *not* eligible (`Ineligible` with a reason) when the newest message is not
a user message or has no text, or — unless allowed — when any message carries a tool
result or an image / audio / file part.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from ..core._segments import Fingerprinter
from ._scope import scope_bytes
from ._store import StoreHit

__all__ = ["Query", "Ineligible", "Pending", "analyze", "api_of"]

_DROPPED_KEYS = frozenset({"stream", "stream_options", "prompt_cache_key"})
_TOOL_RESULT_TYPES = frozenset(
    {"tool_result", "function_call_output", "custom_tool_call_output", "computer_call_output", "mcp_tool_result", "web_search_tool_result"}
)
_MEDIA_TYPES = frozenset(
    {"image", "document", "image_url", "input_image", "input_audio", "input_file", "file", "audio", "search_result"}
)
_TEXT_TYPES = frozenset({"text", "input_text"})


@dataclass(frozen=True)
class Query:
    """An eligible request: its exact-match fingerprint and the text to match by meaning."""

    api: str
    fingerprint: bytes
    text: str
    temperature: Optional[float]


@dataclass(frozen=True)
class Ineligible:
    """Why a request is never answered from (nor stored in) the semantic cache."""

    reason: str


def api_of(path: str) -> Optional[str]:
    """The API of a request path: ``messages``, ``chat.completions``, ``responses`` or ``None``."""
    if path.endswith("/messages"):
        return "messages"
    if path.endswith("/chat/completions"):
        return "chat.completions"
    if path.endswith("/responses"):
        return "responses"
    return None


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _parts(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _kinds(value: Any, out: set[str]) -> None:
    """Every ``type`` and ``role`` found anywhere in ``value``."""
    if isinstance(value, dict):
        for key in ("type", "role"):
            v = value.get(key)
            if isinstance(v, str):
                out.add(v)
        for v in value.values():
            _kinds(v, out)
    elif isinstance(value, list):
        for v in value:
            _kinds(v, out)


def _turns(api: str, body: dict[str, Any]) -> Union[list[Any], str, None]:
    if api == "responses":
        given = body.get("input")
        return given if isinstance(given, (list, str)) else None
    messages = body.get("messages")
    return messages if isinstance(messages, list) else None


def analyze(
    api: str,
    body: dict[str, Any],
    scope: str,
    fp: Fingerprinter,
    *,
    allow_tool_results: bool = False,
    allow_images: bool = False,
) -> Union[Query, Ineligible]:
    """Split ``body`` (the JSON the SDK sends) into fingerprint and query text, or say why not."""
    turns = _turns(api, body)
    if turns is None:
        return Ineligible("no messages")
    if isinstance(turns, str):  # Responses: input="..." is one user message
        turns = [{"role": "user", "content": turns}]
    if not turns or not isinstance(turns[-1], dict):
        return Ineligible("no messages")
    kinds: set[str] = set()
    _kinds(turns, kinds)
    roles = {t.get("role") for t in turns if isinstance(t, dict)}
    if not allow_tool_results and (kinds & _TOOL_RESULT_TYPES or roles & {"tool", "function"}):
        return Ineligible("tool_results")
    if not allow_images and kinds & _MEDIA_TYPES:
        return Ineligible("images")
    last = turns[-1]
    if last.get("role", "user" if last.get("type") in (None, "message") else None) != "user":
        return Ineligible("last_turn_not_user")
    texts: list[str] = []
    rest: list[Any] = []
    for part in _parts(last.get("content")):
        if isinstance(part, dict) and part.get("type") in _TEXT_TYPES and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            rest.append(part)
    text = "\n".join(t for t in texts if t.strip())
    if not text:
        return Ineligible("no_text")
    exact = {k: v for k, v in body.items() if k not in _DROPPED_KEYS and k not in ("messages", "input")}
    exact["turns"] = turns[:-1]
    exact["last"] = {k: v for k, v in last.items() if k != "content"}
    exact["last_parts"] = rest
    canonical = json.dumps(_strip(exact), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    digest = fp.digest(b"semantic", api.encode(), scope_bytes(scope), canonical.encode())
    temperature = body.get("temperature")
    return Query(api, digest, text, float(temperature) if isinstance(temperature, (int, float)) else None)


@dataclass
class Pending:
    """One eligible request between `SemanticCache.plan` and `lookup` / `store`."""

    query: Query
    scope: str
    vector: Any = None
    hit: Optional[StoreHit] = None
    similarity: Optional[float] = field(default=None)
