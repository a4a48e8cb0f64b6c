"""The hook through which a layer above the clients may answer a model call without the network.

The clients (``providers``) know no semantic cache: they know an `AnswerHook`, which they
ask once per client for the SDK client to send through, and a context variable naming the
record of the call being sent, which the hook may mark (a hit, its similarity). The
semantic cache (``latencykit.semantic.SemanticCache``) implements the hook; anything with a
``client_for`` method does.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Optional, Protocol, runtime_checkable

from ._record import CallRecord

__all__ = ["AnswerHook", "current_record", "CURRENT_RECORD"]


@runtime_checkable
class AnswerHook(Protocol):
    """May a request be answered without the network? The hook answers per request, inside the
    SDK client it hands back: a twin of ``client`` whose transport replays a finished response
    when it has one, and otherwise sends the request over ``client``'s own HTTP client."""

    def client_for(self, client: Any) -> Any:
        """The SDK client that ``client``'s model calls are sent through (made once per client)."""
        ...


CURRENT_RECORD: ContextVar[Optional[CallRecord]] = ContextVar("latencykit_current_record", default=None)
"""Set by the clients while the SDK sends a call; read by an `AnswerHook` to mark the call."""


def current_record() -> Optional[CallRecord]:
    """The record of the call being sent on this thread / task right now (``None`` outside a call)."""
    return CURRENT_RECORD.get()
