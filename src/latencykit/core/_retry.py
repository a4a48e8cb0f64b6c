"""Retry policy: which failures are retried, how long to wait, and when to stop (sans-I/O).

latencykit retries only what is safe to repeat: failures **before the first content
token reached the caller** — connection errors and timeouts, HTTP 429 (honouring
``retry-after`` / ``retry-after-ms``), 500/502/503/504, 529 / ``overloaded_error``, an
``error`` event before any content, a stream that ends before any content, and an opt-in
TTFT deadline. A call whose caller sees nothing until the end (a non-streaming call that
latencykit streams) may also be retried after content, since nothing was shown yet
(``retry_interrupted``). Backoff is exponential with full jitter, capped, inside a total
deadline. The SDK's own retries are turned off for latencykit's attempts so the two never
multiply: ``max_attempts`` defaults to the client's ``max_retries + 1``.

Classification reads exceptions by duck typing (``status_code``, ``response``, ``body``),
so this module imports no SDK.
"""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ._errors import EndedEarly, IncompleteStreamError

__all__ = ["RetryPolicy", "classify", "retry_after", "backoff", "TTFTDeadlineExceeded", "PreContentDrop"]

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504, 529})
# Exception class names of connection-level failures (SDK wrappers and httpx transport errors).
_CONNECTION_NAMES = frozenset(
    {
        "APIConnectionError",
        "APITimeoutError",
        "RemoteProtocolError",
        "ReadError",
        "ReadTimeout",
        "ConnectError",
        "ConnectTimeout",
        "WriteError",
        "PoolTimeout",
        "NetworkError",
        "TransportError",
        "TimeoutException",
        "StreamClosed",
        "IncompleteRead",
    }
)


class TTFTDeadlineExceeded(Exception):
    """No first token within the TTFT deadline: the attempt was cancelled (and may be retried)."""


class PreContentDrop(Exception):
    """The stream ended before any content and without its terminal event."""


@dataclass(frozen=True)
class RetryPolicy:
    """How latencykit retries failures before content. ``lk.Anthropic(retry=lk.RetryPolicy(...))``.

    - ``max_attempts``: total attempts (``None``: the client's ``max_retries + 1``).
    - ``initial_backoff`` / ``max_backoff``: seconds; attempt n waits a random time in
      ``[0, min(max_backoff, initial_backoff * 2**n)]`` (full jitter), or the server's
      ``retry-after`` (capped at ``max_retry_after``) when it sends one.
    - ``deadline``: total seconds for all attempts and waits; no retry starts past it.
    - ``retry_interrupted``: retry a non-streaming call (streamed by latencykit) whose
      stream failed after content — the caller had seen nothing yet.
    - ``ttft_deadline``: seconds without a first token after which the attempt is
      cancelled and retried once (tail hedging); ``None`` is off.
    """

    max_attempts: Optional[int] = None
    initial_backoff: float = 0.5
    max_backoff: float = 8.0
    max_retry_after: float = 60.0
    deadline: Optional[float] = 120.0
    retry_interrupted: bool = True
    ttft_deadline: Optional[float] = None
    sleep: Callable[[float], None] = time.sleep

    def __post_init__(self) -> None:
        if self.max_attempts is not None and (
            not isinstance(self.max_attempts, int) or isinstance(self.max_attempts, bool) or self.max_attempts < 1
        ):
            raise ValueError(f"max_attempts must be a positive int or None, got {self.max_attempts!r}")
        for name in ("initial_backoff", "max_backoff", "max_retry_after"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a number of seconds >= 0, got {value!r}")
        for name in ("deadline", "ttft_deadline"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0):
                raise ValueError(f"{name} must be a positive number of seconds or None, got {value!r}")
        if not isinstance(self.retry_interrupted, bool):
            raise ValueError(f"retry_interrupted must be a bool, got {self.retry_interrupted!r}")

    def attempts_for(self, sdk_max_retries: Any) -> int:
        """Total attempts: ``max_attempts``, else the SDK client's ``max_retries + 1``."""
        if self.max_attempts is not None:
            return self.max_attempts
        return (sdk_max_retries if isinstance(sdk_max_retries, int) and sdk_max_retries >= 0 else 2) + 1


def _status(exc: BaseException) -> Optional[int]:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _error_type(exc: BaseException) -> Optional[str]:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("type"), str):
            return str(err["type"])
    return None


def classify(exc: BaseException) -> Optional[str]:
    """Why ``exc`` is worth retrying (a short reason), or ``None`` if it is not."""
    if isinstance(exc, TTFTDeadlineExceeded):
        return "ttft_deadline"
    if isinstance(exc, (PreContentDrop, EndedEarly, IncompleteStreamError)):
        return "dropped"
    status = _status(exc)
    if status is not None:
        if status == 429:
            return "rate_limited"
        if status == 529 or _error_type(exc) == "overloaded_error":
            return "overloaded"
        if status in RETRYABLE_STATUS:
            return "server_error"
        # An SSE `error` event: Anthropic raises a status error carrying the stream's 200.
        if status == 200:
            return "error_event"
        return None
    names = {k.__name__ for k in type(exc).__mro__}
    # OpenAI raises a plain APIError (no status) for an `error` payload inside the stream.
    if "APIError" in names and getattr(exc, "body", None) is not None and not names & _CONNECTION_NAMES:
        return "error_event"
    if names & _CONNECTION_NAMES:
        return "timeout" if any("Timeout" in n for n in names) else "connection"
    return None


def retry_after(exc: BaseException, now: Optional[float] = None) -> Optional[float]:
    """Seconds the server asked to wait (``retry-after-ms``, ``retry-after`` seconds or date)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(float(ms) / 1000.0, 0.0)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(float(value), 0.0)
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(value)
            return max(parsed.timestamp() - (time.time() if now is None else now), 0.0)
    except (TypeError, ValueError, AttributeError):
        return None


def backoff(policy: RetryPolicy, retry_number: int, exc: BaseException, rng: Callable[[], float] = random.random) -> float:
    """Seconds to wait before retry ``retry_number`` (1-based) after ``exc``."""
    asked = retry_after(exc)
    if asked is not None:
        return min(asked, float(policy.max_retry_after))
    cap = min(float(policy.max_backoff), float(policy.initial_backoff) * (2 ** (retry_number - 1)))
    wait: float = cap * rng()
    return wait
