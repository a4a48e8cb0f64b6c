"""Every streamed call form, as openers returning the object the caller iterates and closes."""

from __future__ import annotations

from typing import Any, Callable

from conftest import ANT_REQ, CHAT_REQ, RESP_REQ, headers

# Slow enough (40 tokens × 15 ms) that abandoning after a few events really cuts the stream short.
SLOW = headers(tpot_ms=15, output_tokens=40)

Opener = Callable[[Any], Any]

SYNC_FORMS: dict[str, tuple[str, Opener]] = {
    "anthropic-create-stream": ("ant", lambda c: c.messages.create(stream=True, extra_headers=SLOW, **ANT_REQ)),
    "anthropic-messages-stream": ("ant", lambda c: c.messages.stream(extra_headers=SLOW, **ANT_REQ).__enter__()),
    "chat-create-stream": ("oai", lambda c: c.chat.completions.create(stream=True, extra_headers=SLOW, **CHAT_REQ)),
    "chat-stream-helper": ("oai", lambda c: c.chat.completions.stream(extra_headers=SLOW, **CHAT_REQ).__enter__()),
    "responses-create-stream": ("oai", lambda c: c.responses.create(stream=True, extra_headers=SLOW, **RESP_REQ)),
    "responses-stream-helper": ("oai", lambda c: c.responses.stream(extra_headers=SLOW, **RESP_REQ).__enter__()),
}


async def _aenter(manager: Any) -> Any:
    return await manager.__aenter__()


async def _await(coro: Any) -> Any:
    return await coro


ASYNC_FORMS: dict[str, tuple[str, Opener]] = {
    "anthropic-create-stream": ("aant", lambda c: _await(c.messages.create(stream=True, extra_headers=SLOW, **ANT_REQ))),
    "anthropic-messages-stream": ("aant", lambda c: _aenter(c.messages.stream(extra_headers=SLOW, **ANT_REQ))),
    "chat-create-stream": ("aoai", lambda c: _await(c.chat.completions.create(stream=True, extra_headers=SLOW, **CHAT_REQ))),
    "chat-stream-helper": ("aoai", lambda c: _aenter(c.chat.completions.stream(extra_headers=SLOW, **CHAT_REQ))),
    "responses-create-stream": ("aoai", lambda c: _await(c.responses.create(stream=True, extra_headers=SLOW, **RESP_REQ))),
    "responses-stream-helper": ("aoai", lambda c: _aenter(c.responses.stream(extra_headers=SLOW, **RESP_REQ))),
}
