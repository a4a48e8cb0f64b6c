"""latencykit's own exceptions (only where the SDKs have none), and the partial output they carry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = ["IncompleteStreamError", "StreamInterruptedError", "PartialOutput", "interrupted_error"]


@dataclass
class PartialOutput:
    """What had arrived when a stream failed: never lost, never shown twice.

    ``text`` is the generated text so far (all text blocks / choices concatenated),
    ``tool_inputs`` the raw JSON argument text of each tool call so far (by call id or
    index), ``usage`` the last usage the server reported (an SDK object, or ``None``),
    ``message`` the SDK's accumulated snapshot where latencykit kept one (non-streaming
    calls; a Responses stream's final response), ``events`` how many content-bearing
    events had arrived.
    """

    text: str = ""
    tool_inputs: dict[str, str] = field(default_factory=dict)
    usage: Any = None
    message: Any = None
    events: int = 0


class IncompleteStreamError(Exception):
    """A stream latencykit reassembled for a non-streaming call ended without its terminal event.

    The raw SDKs would hand back a silently truncated answer here; latencykit raises instead.
    ``partial`` holds what had been assembled so far (an SDK object, or ``None``).
    """

    def __init__(self, message: str, partial: Any = None) -> None:
        super().__init__(message)
        self.partial = partial


class StreamInterruptedError(Exception):
    """A stream failed after content had arrived; ``partial`` is a `PartialOutput`.

    Raised as a subclass of *both* this class and the SDK's matching error (for example
    ``anthropic.APIStatusError`` for an ``overloaded_error`` event, or
    ``openai.APIConnectionError`` for a dropped connection), so existing ``except``
    clauses keep working. The SDK's original exception is ``__cause__``.
    """

    partial: PartialOutput


_subclasses: dict[type, type] = {}


def _interrupted_class(base: type) -> type:
    cls = _subclasses.get(base)
    if cls is None:
        cls = type(base.__name__, (StreamInterruptedError, base), {"__module__": "latencykit", "__qualname__": base.__qualname__})
        _subclasses[base] = cls
    return cls


def interrupted_error(exc: Optional[BaseException], partial: PartialOutput, connection_error: type, request: Any) -> BaseException:
    """A `StreamInterruptedError` for ``exc`` (``None``: the stream ended without its terminal event).

    SDK errors keep their class and fields; anything else (a transport error, a clean but
    early end) becomes the SDK's ``APIConnectionError`` with the request.
    """
    if exc is not None and isinstance(exc, Exception) and _is_sdk_error(exc):
        cls: Any = _interrupted_class(type(exc))
        new: Any = Exception.__new__(cls)
        new.__dict__.update(exc.__dict__)
        new.args = exc.args
    else:
        message = (
            "the stream ended before its terminal event (a silently truncated answer)"
            if exc is None
            else f"the stream broke after content had arrived: {type(exc).__name__}: {exc}"
        )
        new = _interrupted_class(connection_error)(message=message, request=request)
    new.partial = partial
    return new  # type: ignore[no-any-return]


def _is_sdk_error(exc: BaseException) -> bool:
    root = type(exc).__module__.split(".", 1)[0]
    return root in ("anthropic", "openai") and any(k.__name__ == "APIError" for k in type(exc).__mro__)
