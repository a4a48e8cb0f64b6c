"""Does the KV cache hold one more sequence? Read per scrape, from what vLLM exposes.

vLLM admits a waiting request only when the KV blocks for its prompt are free, and preempts a
running one when decoding finds no free block. So KV-cache pressure is "requests wait **and**
the free part of the cache is smaller than the next sequence needs" — not "usage near 1": one
3,500-token sequence in a 4,096-token cache leaves 14 % free (usage 0.86) and admits no second
one, while 256 short sequences at usage 0.95 still leave room for a dozen more.

The next sequence's need, as a fraction of the cache, is estimated per scrape as the smaller of

* what each running sequence holds on average, ``usage / running`` (its prompt and its output
  so far), and
* the mean prompt of the requests that finished (``vllm:request_prompt_tokens``) over the
  cache's size in tokens (``cache_config_info``), rounded up to whole blocks: what admission
  needs.

Both are means: a queue headed by a prompt far longer than the running ones fits this estimate
and shows only through preemptions or a long queue time. The cache is *full* at a scrape when
its free part holds fewer than ``free_sequences`` such sequences, or when usage reaches
``kv_high`` whatever the estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from ._window import MetricsWindow

__all__ = ["KVSnapshot", "kv_snapshots", "next_sequence_need"]


@dataclass(frozen=True)
class KVSnapshot:
    """One scrape's KV cache against its queue (fractions of the cache, 0-1)."""

    usage: float
    running: float
    waiting: float
    need: Optional[float]
    """The next sequence's estimated share of the cache (``None``: nothing to estimate from)."""
    full: bool
    """The free part holds no further sequence of that size (or usage >= the ``kv_high`` line)."""

    @property
    def free(self) -> float:
        """The part of the cache not held by a sequence."""
        return max(0.0, 1.0 - self.usage)

    @property
    def room(self) -> Optional[float]:
        """How many more sequences of the estimated size fit (``None`` without an estimate)."""
        return self.free / self.need if self.need else None


def next_sequence_need(
    usage: float,
    running: Optional[float],
    prompt_tokens: Optional[float] = None,
    cache_tokens: Optional[float] = None,
    block_size: Optional[int] = None,
) -> Optional[float]:
    """The share of the cache the next sequence needs: the smaller of ``usage / running`` and the
    mean prompt in whole blocks over the cache's size, where each is known."""
    estimates = []
    if running is not None and running >= 1:
        estimates.append(usage / running)
    if prompt_tokens and cache_tokens:
        block = block_size or 1
        estimates.append(math.ceil(prompt_tokens / block) * block / cache_tokens)
    return min(estimates) if estimates else None


def kv_snapshots(window: MetricsWindow, *, kv_high: float, free_sequences: float) -> tuple[KVSnapshot, ...]:
    """Every scrape of ``window`` that reports KV usage, judged as in the module docstring."""
    model = window.model
    prompt, cache, block = window.prompt_tokens_mean, window.kv_cache_tokens, window.last.kv_block_size
    out = []
    for s in window.scrapes:
        usage = s.gauge("kv_cache_usage", model)
        if usage is None:
            continue
        running = s.gauge("running", model)
        need = next_sequence_need(usage, running, prompt, cache, block)
        full = usage >= kv_high or (need is not None and need > 0 and max(0.0, 1.0 - usage) < need * free_sequences)
        out.append(KVSnapshot(usage, running or 0.0, s.gauge("waiting", model) or 0.0, need, full))
    return tuple(out)
