"""Requests the real APIs reject with 400, checked before anything is generated.

Only shapes the real services are known to reject, with their wording where it is known
(OpenAI's "Invalid value: ... Supported values are: ..." / Anthropic's
"messages.0.role: Input should be ..."), so a client bug shows up against the emulator as
it would in production: an empty ``messages`` list, an unknown role, an empty message
before the last one (Anthropic), out-of-range token limits or (OpenAI) ``temperature``, and a
``max_tokens: 0`` cache pre-warm sent as a stream (Anthropic), and OpenAI prompt-cache fields a model
or an API does not take (`_openai_cache_rules`). The per-API ``prepare``
functions check the remaining field types.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ._errors import BadRequest
from ._openai_cache_rules import check_cache_fields

__all__ = ["check_request"]

ANTHROPIC_ROLES = ("user", "assistant", "system")  # "system" mid-conversation (Opus 4.8+), per api-facts §2
CHAT_ROLES = ("system", "assistant", "user", "function", "tool", "developer")
RESPONSES_ROLES = ("assistant", "system", "developer", "user")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _supported(values: tuple[str, ...]) -> str:
    quoted = [f"'{v}'" for v in values]
    return ", ".join(quoted[:-1]) + f", and {quoted[-1]}"


def _openai_range(name: str, value: Any, lo: float, hi: float | None = None, kind: str = "decimal") -> None:
    if value is None:
        return
    if not _is_number(value):
        raise BadRequest(f"Invalid type for '{name}': expected a {kind}, but got {value!r} instead.", param=name)
    if value < lo:
        raise BadRequest(
            f"Invalid '{name}': {kind} below minimum value. Expected a value >= {lo:g}, but got {value!r} instead.",
            param=name,
        )
    if hi is not None and value > hi:
        raise BadRequest(
            f"Invalid '{name}': {kind} above maximum value. Expected a value <= {hi:g}, but got {value!r} instead.",
            param=name,
        )


def _anthropic(body: Mapping[str, Any]) -> None:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return  # prepare() names the missing field
    if not messages:
        raise BadRequest("messages: at least one message is required")
    last = len(messages) - 1
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise BadRequest(f"messages.{i}: Input should be a valid dictionary (got {message!r})")
        if message.get("role") not in ANTHROPIC_ROLES:
            raise BadRequest(f"messages.{i}.role: Input should be 'user' or 'assistant' (got {message.get('role')!r})")
        content = message.get("content")
        if content in ("", []) and not (i == last and message.get("role") == "assistant"):
            raise BadRequest(
                f"messages.{i}: all messages must have non-empty content except for the optional final assistant message"
            )
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, int) and max_tokens < 0:
        raise BadRequest(f"max_tokens: Input should be greater than or equal to 0 (got {max_tokens})")
    if max_tokens == 0 and body.get("stream") is True:
        raise BadRequest("max_tokens: 0 (a cache pre-warm) cannot be combined with stream: true")


def _role_errors(items: list[Any], name: str, roles: tuple[str, ...], required: bool) -> None:
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            if required:
                raise BadRequest(f"Invalid type for '{name}[{i}]': expected an object, but got {item!r} instead.")
            continue
        if "role" not in item:
            if required:
                raise BadRequest(f"Missing required parameter: '{name}[{i}].role'.", param=f"{name}[{i}].role")
            continue  # a Responses item that is not a message (function_call_output, ...)
        if item["role"] not in roles:
            raise BadRequest(
                f"Invalid value: {item['role']!r}. Supported values are: {_supported(roles)}.", param=f"{name}[{i}].role"
            )


def _chat(body: Mapping[str, Any]) -> None:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return
    if not messages:
        raise BadRequest(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
            param="messages",
            code="empty_array",
        )
    _role_errors(messages, "messages", CHAT_ROLES, required=True)
    _openai_range("temperature", body.get("temperature"), 0, 2)
    for name in ("max_completion_tokens", "max_tokens"):
        _openai_range(name, body.get(name), 1, kind="integer")


def _responses(body: Mapping[str, Any]) -> None:
    items = body.get("input")
    if isinstance(items, list):
        _role_errors(items, "input", RESPONSES_ROLES, required=False)
    _openai_range("temperature", body.get("temperature"), 0, 2)


_CHECKS: dict[str, Callable[[Mapping[str, Any]], None]] = {
    "anthropic": _anthropic,
    "openai-chat": _chat,
    "openai-responses": _responses,
}


def check_request(api: str, body: Mapping[str, Any]) -> None:
    """Raise `BadRequest` for a ``body`` that API ``api`` (``ProviderAPI.name``) would reject; other APIs pass."""
    check = _CHECKS.get(api)
    if check is not None:
        check(body)
        if api != "anthropic":
            check_cache_fields(api, body)  # type: ignore[arg-type]
