"""latencykit's own exceptions (only where the SDKs have none)."""

from __future__ import annotations

from typing import Any

__all__ = ["IncompleteStreamError"]


class IncompleteStreamError(Exception):
    """A stream latencykit reassembled for a non-streaming call ended without its terminal event.

    The raw SDKs would hand back a silently truncated answer here; latencykit raises instead.
    ``partial`` holds what had been assembled so far (an SDK object, or ``None``).
    """

    def __init__(self, message: str, partial: Any = None) -> None:
        super().__init__(message)
        self.partial = partial
