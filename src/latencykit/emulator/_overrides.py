"""Per-request behaviour overrides read from `x-emulator-*` HTTP headers.

One parser for every knob, so adding a fault kind means adding one field here.
Header times are absolute wall-clock milliseconds: they are NOT multiplied by
`TimingModel.time_scale` and get neither jitter nor batch slowdown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ._reasoning import SHOWN

__all__ = ["HEADER_PREFIX", "RequestOverrides", "WIRE_SHAPES"]

HEADER_PREFIX = "x-emulator-"

WIRE_SHAPES = {
    "azure-filter": "chat: the first event is Azure's prompt-filter object (choices [], id/model/object empty)",
    "no-finish-reason": "chat: no chunk carries a finish_reason (the usage chunk, if asked, and [DONE] still come)",
    "usage-unasked": "chat: stream_options ignored; the finish chunk carries usage, asked or not, and no usage-only chunk",
    "error-after-finish": "chat: an error event follows the finish chunk instead of [DONE]",
    "empty-deltas": "chat: every other text token arrives as an empty delta, its text in the next (partial UTF-8)",
    "html": "any API: a 200 answer with Content-Type text/html (a proxy's page), not an event stream",
}
"""``x-emulator-wire`` values (comma-separated): wire shapes real servers send, on request."""


def _number(headers: Mapping[str, str], name: str) -> float | None:
    raw = headers.get(HEADER_PREFIX + name)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"header {HEADER_PREFIX}{name} must be a number, got {raw!r}") from None
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"header {HEADER_PREFIX}{name} must be a finite number >= 0, got {raw!r}")
    return value


def _integer(headers: Mapping[str, str], name: str) -> int | None:
    value = _number(headers, name)
    if value is None:
        return None
    if value != int(value):
        raise ValueError(f"header {HEADER_PREFIX}{name} must be an integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class RequestOverrides:
    """Parsed `x-emulator-*` headers; `None` means "use the timing model"."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    output_tokens: int | None = None
    tokens_per_chunk: int | None = None
    status: int | None = None
    retry_after: str | None = None
    error_after_chunks: int | None = None
    drop_after_chunks: int | None = None
    tool_call: bool = False
    stall_ms: float | None = None
    """A fault: extra wait before the first token (on top of the TTFT)."""
    fault_times: int | None = None
    """Apply the faults (status, error/drop-after, stall) to the first N requests with this
    ``fault_id`` only, so a retry can succeed; ``None`` applies them every time."""
    fault_id: str | None = None
    wire: frozenset[str] = frozenset()
    """Wire shapes to produce (`WIRE_SHAPES`), from ``x-emulator-wire: a,b``."""
    reasoning: str | None = None
    """``x-emulator-reasoning``: ``hidden``, ``streamed``, ``summarized`` or ``none`` (`_reasoning`)."""
    reasoning_tokens: int | None = None
    """``x-emulator-reasoning-tokens``: how many reasoning tokens a reasoning request generates."""
    reasoning_tpot_ms: float | None = None
    """``x-emulator-reasoning-tpot-ms``: the decode step of reasoning tokens that are not streamed
    (hidden reasoning, the tokens between a summary's words); others use the normal step."""

    @property
    def has_faults(self) -> bool:
        """Whether any fault is requested."""
        return (
            (self.status is not None and self.status >= 400)
            or self.error_after_chunks is not None
            or self.drop_after_chunks is not None
            or self.stall_ms is not None
        )

    def without_faults(self) -> RequestOverrides:
        """The same timing, with every fault removed."""
        return replace(self, status=None, retry_after=None, error_after_chunks=None, drop_after_chunks=None, stall_ms=None)

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> RequestOverrides:
        """Parse lower-cased request headers; raises `ValueError` naming the bad header."""
        per_chunk = _integer(headers, "tokens-per-chunk")
        if per_chunk == 0:
            raise ValueError(f"header {HEADER_PREFIX}tokens-per-chunk must be >= 1, got 0")
        status = _integer(headers, "status")
        if status is not None and not 100 <= status <= 599:
            raise ValueError(f"header {HEADER_PREFIX}status must be an HTTP status, got {status}")
        tool = headers.get(HEADER_PREFIX + "tool-call", "").strip().lower()
        return cls(
            ttft_ms=_number(headers, "ttft-ms"),
            tpot_ms=_number(headers, "tpot-ms"),
            output_tokens=_integer(headers, "output-tokens"),
            tokens_per_chunk=per_chunk,
            status=status,
            retry_after=headers.get(HEADER_PREFIX + "retry-after"),
            error_after_chunks=_integer(headers, "error-after-chunks"),
            drop_after_chunks=_integer(headers, "drop-after-chunks"),
            tool_call=tool in ("1", "true", "yes"),
            stall_ms=_number(headers, "stall-ms"),
            fault_times=_integer(headers, "fault-times"),
            fault_id=headers.get(HEADER_PREFIX + "fault-id"),
            wire=_wire(headers),
            reasoning=_reasoning(headers),
            reasoning_tokens=_integer(headers, "reasoning-tokens"),
            reasoning_tpot_ms=_number(headers, "reasoning-tpot-ms"),
        )


def _reasoning(headers: Mapping[str, str]) -> str | None:
    raw = headers.get(HEADER_PREFIX + "reasoning")
    if raw is None:
        return None
    value = raw.strip().lower()
    if value not in SHOWN:
        raise ValueError(f"header {HEADER_PREFIX}reasoning must be one of {', '.join(SHOWN)}, got {raw!r}")
    return value


def _wire(headers: Mapping[str, str]) -> frozenset[str]:
    raw = headers.get(HEADER_PREFIX + "wire", "")
    shapes = frozenset(part.strip().lower() for part in raw.split(",") if part.strip())
    unknown = sorted(shapes - WIRE_SHAPES.keys())
    if unknown:
        raise ValueError(f"header {HEADER_PREFIX}wire: unknown shape(s) {unknown}; known: {sorted(WIRE_SHAPES)}")
    return shapes
