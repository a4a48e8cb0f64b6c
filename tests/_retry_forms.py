"""Every call form of the three APIs as one function: run it, return what the caller saw.

Used by the retry tests (sync and async mirror each other). A `Seen` collects the text
and the "stream start" events (``message_start``, the chat role chunk,
``response.created``) as they reach the caller, so a test can check after a failure
exactly what had already been shown, and that a retried attempt never shows a second start.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai

from conftest import ANT_REQ, CHAT_REQ, RESP_REQ

import latencykit as lk

# Small backoffs keep the suite fast; three attempts in all.
FAST = {"initial_backoff": 0.01, "max_backoff": 0.05, "max_attempts": 3}

APIS = ("messages", "chat", "responses")
MODES = ("create", "stream", "helper")
"""``create``: non-streaming (latencykit streams it); ``stream``: ``create(stream=True)``;
``helper``: ``messages.stream()`` / ``chat.completions.stream()`` / ``responses.stream()``."""
FORMS = [f"{api}-{mode}" for api in APIS for mode in MODES]
STREAM_FORMS = [f for f in FORMS if not f.endswith("-create")]
CREATE_FORMS = [f for f in FORMS if f.endswith("-create")]
REQUESTS: dict[str, dict[str, Any]] = {"messages": ANT_REQ, "chat": CHAT_REQ, "responses": RESP_REQ}


def provider(form: str) -> str:
    """``"anthropic"`` or ``"openai"`` for a form name."""
    return "anthropic" if form.startswith("messages") else "openai"


def fault_id() -> str:
    """A fresh ``x-emulator-fault-id``: fault counters never leak between calls."""
    return uuid.uuid4().hex


def policy(**kw: Any) -> lk.RetryPolicy:
    """`FAST` with overrides."""
    return lk.RetryPolicy(**{**FAST, **kw})


@dataclass
class Seen:
    """What reached the caller: the text pieces, the stream-start events, the final object."""

    api: str
    text: list[str] = field(default_factory=list)
    starts: int = 0
    result: Any = None

    @property
    def joined(self) -> str:
        """All text the caller saw, in order."""
        return "".join(self.text)

    def feed(self, event: Any) -> None:
        """Note one event the caller received (raw SDK events and helper events alike)."""
        kind = getattr(event, "type", None)
        if self.api == "messages":
            if kind == "message_start":
                self.starts += 1
            elif kind == "content_block_delta" and event.delta.type == "text_delta":
                self.text.append(event.delta.text)
        elif self.api == "chat":
            chunk = event.chunk if kind == "chunk" else event if kind is None else None
            for choice in getattr(chunk, "choices", None) or ():
                if choice.delta.role:
                    self.starts += 1
                if choice.delta.content:
                    self.text.append(choice.delta.content)
        else:
            if kind == "response.created":
                self.starts += 1
            elif kind == "response.output_text.delta":
                self.text.append(event.delta)

    def take(self, result: Any) -> None:
        """The object a non-streaming call returned."""
        self.result = result
        self.starts = 1
        if self.api == "messages":
            self.text = [b.text for b in result.content if b.type == "text"]
        elif self.api == "chat":
            self.text = [result.choices[0].message.content or ""]
        else:
            self.text = [result.output_text]


def _kwargs(api: str, extra_headers: dict[str, str], overrides: dict[str, Any]) -> dict[str, Any]:
    return {**REQUESTS[api], **overrides, "extra_headers": extra_headers}


def _methods(client: Any, api: str) -> tuple[Any, Any]:
    """The API's ``create`` and ``stream`` helper on ``client``."""
    res = client.messages if api == "messages" else client.chat.completions if api == "chat" else client.responses
    return res.create, res.stream


def run(client: Any, form: str, seen: Seen, extra_headers: dict[str, str], **overrides: Any) -> Seen:
    """Call ``form`` on a sync client, feeding ``seen`` as events arrive; errors propagate."""
    api, mode = form.split("-")
    kw = _kwargs(api, extra_headers, overrides)
    create, helper = _methods(client, api)
    if mode == "create":
        seen.take(create(**kw))
    elif mode == "stream":
        with create(stream=True, **kw) as stream:
            for event in stream:
                seen.feed(event)
    else:
        with helper(**kw) as stream:
            for event in stream:
                seen.feed(event)
    return seen


async def arun(client: Any, form: str, seen: Seen, extra_headers: dict[str, str], **overrides: Any) -> Seen:
    """Async twin of `run`."""
    api, mode = form.split("-")
    kw = _kwargs(api, extra_headers, overrides)
    create, helper = _methods(client, api)
    if mode == "create":
        seen.take(await create(**kw))
    elif mode == "stream":
        async with await create(stream=True, **kw) as stream:
            async for event in stream:
                seen.feed(event)
    else:
        async with helper(**kw) as stream:
            async for event in stream:
                seen.feed(event)
    return seen


# -- shared test data ----------------------------------------------------------------------

SDK = {"anthropic": anthropic, "openai": openai}

# fault name -> (emulator headers, the retry reason it is recorded as)
PRE_CONTENT_FAULTS: dict[str, tuple[dict[str, Any], str]] = {
    "429": ({"status": 429, "retry_after": 0}, "rate_limited"),
    "429-no-retry-after": ({"status": 429}, "rate_limited"),
    "529": ({"status": 529}, "overloaded"),
    "500": ({"status": 500}, "server_error"),
    "502": ({"status": 502}, "server_error"),
    "503": ({"status": 503}, "server_error"),
    "drop-before-content": ({"drop_after_chunks": 0}, "connection"),
    "error-event-before-content": ({"error_after_chunks": 0}, "error_event"),
}


def reason(fault: str, api: str) -> str:
    # The emulator's Anthropic `error` event is an `overloaded_error`, classified as such.
    if fault == "error-event-before-content" and api == "messages":
        return "overloaded"
    return PRE_CONTENT_FAULTS[fault][1]


INVALID: dict[str, dict[str, Any]] = {
    "messages": {"max_tokens": "many"},
    "chat": {"max_tokens": "many"},
    "responses": {"max_output_tokens": "many"},
}



LONG_SYSTEM = "You are a careful assistant. " * 900  # far above every minimum cacheable prefix

_ODD_MESSAGES: dict[str, dict[str, Any]] = {
    "unknown-block-type": {"messages": [{"role": "user", "content": [{"type": "hologram", "data": 1}]}]},
    "non-string-text": {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
    "none-content": {"messages": [{"role": "user", "content": None}]},
    "bare-string-message": {"messages": ["hello"]},
    "numeric-system": {"system": 42},
    "system-block-without-text": {"system": [{"type": "text"}], "messages": [{"role": "user", "content": "hi"}]},
    "long-system-odd-tail": {"system": LONG_SYSTEM, "messages": [{"role": "user", "content": [{"type": "x"}, 7, None]}]},
    "odd-tools": {"system": LONG_SYSTEM, "tools": [{"weird": True}, 3]},
}
_ODD_CHAT: dict[str, dict[str, Any]] = {
    "unknown-part-type": {"messages": [{"role": "user", "content": [{"type": "hologram"}]}]},
    "numeric-content": {"messages": [{"role": "system", "content": 42}, {"role": "user", "content": "hi"}]},
    "bare-string-message": {"messages": ["hello"]},
    "long-system-odd-tail": {"messages": [{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": [None, 3]}]},
}
_ODD_RESPONSES: dict[str, dict[str, Any]] = {
    "odd-items": {"input": [{"type": "hologram"}, 5]},
    "long-instructions-odd-input": {"instructions": LONG_SYSTEM, "input": [{"role": "user", "content": [{"type": "x"}]}]},
    "numeric-instructions": {"instructions": 42},
}
ODD = (
    [("messages", k, v) for k, v in _ODD_MESSAGES.items()]
    + [("chat", k, v) for k, v in _ODD_CHAT.items()]
    + [("responses", k, v) for k, v in _ODD_RESPONSES.items()]
)


def strip_cache_control(value: Any) -> Any:
    """``value`` without any ``cache_control`` keys (the markers the planner may add)."""
    if isinstance(value, dict):
        return {k: strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_cache_control(v) for v in value]
    return value



INVALID_POLICIES: list[tuple[dict[str, Any], str]] = [
        ({"max_attempts": 0}, "0"),
        ({"max_attempts": -2}, "-2"),
        ({"max_attempts": 2.5}, "2.5"),
        ({"max_attempts": True}, "True"),
        ({"initial_backoff": -1}, "-1"),
        ({"max_backoff": "slow"}, "'slow'"),
        ({"max_retry_after": -0.5}, "-0.5"),
        ({"deadline": 0}, "0"),
        ({"ttft_deadline": -3}, "-3"),
        ({"retry_interrupted": "no"}, "'no'"),
]
"""Bad `RetryPolicy` fields, with the repr the ValueError must name."""

PATHS = {"messages": "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}
# The events latencykit treats as terminal (chat: the finish_reason chunk, see the report on [DONE]).
_TERMINAL = {"messages": b"event: message_stop", "chat": b'"finish_reason":"', "responses": b"event: response.completed"}
_FIRST_CONTENT = {
    "messages": re.compile(rb'"text_delta"'),
    "chat": re.compile(rb'"content":"[^"]'),
    "responses": re.compile(rb"response\.output_text\.delta"),
}



def truncations(api: str, body: bytes) -> tuple[bytes, bytes]:
    """A clean SSE ``body`` cut before its terminal event, and before its first token."""
    events = body.split(b"\n\n")
    terminal = next(i for i, e in enumerate(events) if _TERMINAL[api] in e)
    first = next(i for i, e in enumerate(events) if _FIRST_CONTENT[api].search(e))
    return b"\n\n".join(events[:terminal]) + b"\n\n", b"\n\n".join(events[:first]) + b"\n\n"
