"""Chat taps for self-hosted servers: per-step token counts (vLLM) and server timings (llama.cpp).

Both extend the OpenAI `ChatTap` (which already times the call and, with continuous usage
stats, counts a chunk whose ``completion_tokens`` grew as token-bearing) and only add
what one server tells beyond the OpenAI protocol, written to ``CallRecord.extra``:

* `StepTap` (vLLM with ``continuous_usage_stats``): every chunk carries the cumulative
  ``completion_tokens``, so a chunk is one engine step and its growth is the tokens that
  step produced. ``decode_steps``, ``tokens_per_step`` (decode steps only, after the first
  chunk; with speculative decoding 1 + accepted draft tokens), and inter-token latency
  per token: each gap between steps divided over the tokens of the later step
  (``itl_per_token_mean`` / ``_p50`` / ``_p95`` / ``_max``).
* `LlamaTap` (llama-server): the final chunk's ``timings`` — ``server_timings`` (the
  numeric fields as sent), ``server_ttft`` (``prompt_ms`` in seconds: the server's prefill
  time, which excludes HTTP and templating), ``server_tpot`` (``predicted_per_token_ms``)
  and ``server_cache_tokens`` (``cache_n``).

The figures are written when the final usage chunk arrives, so an interrupted stream has
none. Times use ``time.perf_counter`` and are differences only.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from ..core._rank import nearest_rank
from ..core._timing import CallTimer
from ..providers.openai import ChatTap

__all__ = ["LlamaTap", "StepTap"]

_TIMING_FIELDS = (
    "cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second",
    "predicted_n", "predicted_ms", "predicted_per_token_ms", "predicted_per_second", "draft_n", "draft_n_accepted",
)  # fmt: skip


class StepTap(ChatTap):
    """`ChatTap` plus per-step token counts from vLLM's continuous usage stats."""

    __slots__ = ("_count", "_steps", "_first_count", "_last_at", "_per_token")

    def __init__(self, timer: CallTimer, hide_usage: bool) -> None:
        super().__init__(timer, hide_usage)
        self._reset()

    def _reset(self) -> None:
        self._count = 0
        self._steps = 0
        self._first_count = 0
        self._last_at: Optional[float] = None
        self._per_token: list[float] = []

    def new_attempt(self) -> None:
        """Forget the steps of an abandoned attempt."""
        super().new_attempt()
        self._reset()

    def __call__(self, chunk: Any) -> bool:
        keep = super().__call__(chunk)
        usage = getattr(chunk, "usage", None)
        if usage is None:
            return keep
        count = getattr(usage, "completion_tokens", None)
        if chunk.choices and isinstance(count, int) and count > self._count:
            now = time.perf_counter()
            if self._last_at is None:
                self._first_count = count
            else:
                produced = count - self._count
                share = (now - self._last_at) / produced
                self._per_token.extend([share] * produced)
            self._steps += 1
            self._count = count
            self._last_at = now
        elif not chunk.choices:
            self._publish()
        return keep

    def read_usage_chunk(self, chunk: dict[str, Any]) -> None:
        """The final usage-only chunk, read without the SDK: the steps end here."""
        self._publish()

    def _publish(self) -> None:
        extra = self.timer.record.extra
        extra["server"] = "vllm"
        if not self._steps:
            return
        extra["decode_steps"] = self._steps
        if self._steps > 1:
            extra["tokens_per_step"] = (self._count - self._first_count) / (self._steps - 1)
        gaps = sorted(self._per_token)
        if gaps:
            extra["itl_per_token_mean"] = sum(gaps) / len(gaps)
            extra["itl_per_token_p50"] = gaps[nearest_rank(0.50, len(gaps))]
            extra["itl_per_token_p95"] = gaps[nearest_rank(0.95, len(gaps))]
            extra["itl_per_token_max"] = gaps[-1]


class LlamaTap(ChatTap):
    """`ChatTap` plus llama-server's ``timings`` (final chunk) in ``CallRecord.extra``."""

    __slots__ = ()

    def __call__(self, chunk: Any) -> bool:
        keep = super().__call__(chunk)
        extra = getattr(chunk, "model_extra", None)
        timings = extra.get("timings") if isinstance(extra, dict) else None
        if isinstance(timings, dict):
            record_timings(self.timer.record.extra, timings)
        return keep

    def read_usage_chunk(self, chunk: dict[str, Any]) -> None:
        """The final usage-only chunk, read without the SDK: its ``timings``."""
        timings = chunk.get("timings")
        if isinstance(timings, dict):
            record_timings(self.timer.record.extra, timings)


def record_timings(extra: dict[str, Any], timings: dict[str, Any]) -> None:
    """Copy llama.cpp ``timings`` into a record's ``extra`` (see the module docstring)."""
    kept = {k: timings[k] for k in _TIMING_FIELDS if isinstance(timings.get(k), (int, float))}
    extra["server"] = "llamacpp"
    extra["server_timings"] = kept
    if "prompt_ms" in kept:
        extra["server_ttft"] = kept["prompt_ms"] / 1000.0
    if "predicted_per_token_ms" in kept:
        extra["server_tpot"] = kept["predicted_per_token_ms"] / 1000.0
    if "cache_n" in kept:
        extra["server_cache_tokens"] = int(kept["cache_n"])
