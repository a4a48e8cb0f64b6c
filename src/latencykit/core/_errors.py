"""latencykit's own exceptions (only where the SDKs have none), and the partial output they carry.

One name per failure kind, and the exported names are the ones raised:

- `StreamInterruptedError` — a stream failed after content had arrived (any cause).
- `IncompleteStreamError` — a stream ended without its terminal event (a silently truncated
  answer, before or after content). After content it is also a `StreamInterruptedError`.

Both are raised as subclasses of the SDK's matching error too (``APIConnectionError`` for a
drop or a truncation, the SDK's own class for an error the server reported), so existing
``except anthropic.APIError`` / ``except openai.APIError`` clauses keep working. The record's
``error_type`` names the same class: ``"IncompleteStreamError"`` for a truncated stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = ["IncompleteStreamError", "StreamInterruptedError", "PartialOutput", "EndedEarly", "interrupted_error", "incomplete_error"]


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


class StreamInterruptedError(Exception):
    """A stream failed after content had arrived; ``partial`` is a `PartialOutput`.

    Raised as a subclass of *both* this class and the SDK's matching error (for example
    ``anthropic.APIStatusError`` for an ``overloaded_error`` event, or
    ``openai.APIConnectionError`` for a dropped connection), so existing ``except``
    clauses keep working. The SDK's original exception is ``__cause__``.
    """

    partial: PartialOutput


class IncompleteStreamError(Exception):
    """A stream ended without its terminal event: the raw SDK would return a truncated answer.

    Raised as a subclass of both this class and the SDK's ``APIConnectionError``; when content
    had already arrived, also of `StreamInterruptedError`. ``partial`` is a `PartialOutput`
    (empty before content). The record says ``error_type="IncompleteStreamError"``.
    """

    partial: PartialOutput
    _lk_error_type = "IncompleteStreamError"  # what CallRecord.error_type says (the class name the SDK's would hide)


class EndedEarly(Exception):
    """Internal: an accumulator's stream ended without its terminal event (never reaches callers).

    ``snapshot`` is what had been assembled (an SDK object, or ``None``). It is turned into an
    `IncompleteStreamError` when the call gives up; the retry policy classifies it as a drop.
    """

    def __init__(self, message: str, snapshot: Any = None) -> None:
        super().__init__(message)
        self.snapshot = snapshot


_subclasses: dict[tuple[type, ...], type] = {}


def _mixed(bases: tuple[type, ...]) -> type:
    cls = _subclasses.get(bases)
    if cls is None:
        sdk = bases[-1]
        cls = type(sdk.__name__, bases, {"__module__": "latencykit", "__qualname__": sdk.__qualname__})
        _subclasses[bases] = cls
    return cls


def interrupted_error(exc: Optional[BaseException], partial: PartialOutput, connection_error: type, request: Any) -> BaseException:
    """A `StreamInterruptedError` for ``exc`` (``None``: the stream ended without its terminal event).

    SDK errors keep their class and fields; anything else (a transport error, a clean but
    early end) becomes the SDK's ``APIConnectionError`` with the request.
    """
    if exc is None:
        return incomplete_error(partial, connection_error, request, after_content=True)
    if isinstance(exc, Exception) and _is_sdk_error(exc):
        cls: Any = _mixed((StreamInterruptedError, type(exc)))
        new: Any = Exception.__new__(cls)
        new.__dict__.update(exc.__dict__)
        new.args = exc.args
    else:
        message = f"the stream broke after content had arrived: {type(exc).__name__}: {exc}"
        new = _mixed((StreamInterruptedError, connection_error))(message=message, request=request)
    new.partial = partial
    return new  # type: ignore[no-any-return]


def incomplete_error(partial: PartialOutput, connection_error: type, request: Any, after_content: bool) -> BaseException:
    """An `IncompleteStreamError` (and the SDK's ``APIConnectionError``): no terminal event came."""
    if after_content:
        message = "the stream ended before its terminal event (a silently truncated answer)"
        bases: tuple[type, ...] = (IncompleteStreamError, StreamInterruptedError, connection_error)
    else:
        message = "the stream ended before any content and without its terminal event"
        bases = (IncompleteStreamError, connection_error)
    new: Any = _mixed(bases)(message=message, request=request)
    new.partial = partial
    return new  # type: ignore[no-any-return]


def _is_sdk_error(exc: BaseException) -> bool:
    root = type(exc).__module__.split(".", 1)[0]
    return root in ("anthropic", "openai") and any(k.__name__ == "APIError" for k in type(exc).__mro__)
