"""The doctor's words: how its figures, findings and engines read in a terminal and in ``str(diagnosis)``.

`Diagnosis.to_dict` (``latencykit doctor --json``) keeps the snake_case keys (``waiting_max``,
``not_exposed``, ``kv_cache_pressure``); what a person reads says them as a person would —
"most waiting 0", "not exposed by TGI: KV-cache usage, preemptions, ...", "queue pressure" — with
units ("2.71 s", "480 ms", "43.12 %") and numbers as plain decimals, never e-notation. The engine's own
metric names (``tgi_queue_size``) and flags stay as the engine spells them.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from ._metrics import AtLeast, AtMost

__all__ = ["ENGINES", "KIND_WORDS", "engine_name", "evidence_text", "figure", "label", "not_exposed_text", "number"]

ENGINES = {"vllm": "vLLM", "sglang": "SGLang", "tgi": "TGI", "triton": "Triton", "triton-trtllm": "Triton (TensorRT-LLM)",
           "trtllm": "TensorRT-LLM", "llamacpp": "llama.cpp", "unknown": "this server"}  # fmt: skip
"""`Scrape.server` names (and the advice's ``triton-trtllm``) as people write them."""

KIND_WORDS = {
    "kv_cache_pressure": "KV-cache pressure",
    "queue_pressure": "queue pressure",
    "weak_speculative_decoding": "weak speculative decoding",
    "low_prefix_cache_hit_rate": "low prefix-cache hit rate",
    "time_outside_engine": "time lost outside the engine",
    "gpu_memory_near_full": "GPU memory near full",
    "unknown_engine": "unknown engine",
    "healthy": "healthy",
}
"""Every ``Finding.kind`` in words."""

_FIGURES = {
    "kv_cache_usage": "KV-cache usage",
    "running": "running requests",
    "waiting": "waiting requests",
    "preemptions": "preemptions",
    "spec_accepted_per_step": "speculative-decoding acceptance",
    "prefix_cache_hit_rate": "prefix-cache hit rate",
    "server_ttft_mean_s": "server TTFT",
    "server_queue_time_mean_s": "server queue time",
    "server_e2e_mean_s": "server request time",
    "gpu_memory_usage": "GPU memory",
}
"""`latencykit.engines._window.FIELDS` (what an engine may not expose) in words."""

_LABELS = {
    # the window (MetricsWindow.summary) and the client's view
    "server": "engine",
    "not_exposed": "not exposed",
    "scrapes": "scrapes",
    "elapsed_s": "window",
    "kv_cache_usage_max": "most KV-cache usage",
    "kv_cache_usage_mean": "mean KV-cache usage",
    "running_max": "most running",
    "waiting_max": "most waiting",
    "waiting_mean": "mean waiting",
    "preemptions": "preemptions",
    "kv_cache_tokens": "KV-cache size (tokens)",
    "prompt_tokens_mean": "mean prompt (tokens)",
    "prompt_tokens_per_s": "prompt tokens per second",
    "generation_tokens_per_s": "generated tokens per second",
    "requests_finished": "requests finished",
    "prefix_cache_hit_rate": "prefix-cache hit rate",
    "spec_acceptance_rate": "draft acceptance rate",
    "spec_accepted_per_step": "draft tokens accepted per step",
    "server_ttft_mean_s": "mean server TTFT",
    "server_ttft_p50_s": "server TTFT p50",
    "server_ttft_p95_s": "server TTFT p95",
    "server_itl_mean_s": "mean server inter-token latency",
    "server_itl_p95_s": "server inter-token latency p95",
    "server_queue_time_mean_s": "mean server queue time",
    "server_queue_time_p95_s": "server queue time p95",
    "server_e2e_mean_s": "mean server request time",
    "server_backend_request_mean_s": "mean backend request time",
    "gpu_memory_usage_max": "most GPU memory in use",
    "calls": "calls",
    "client_ttft_mean_s": "mean client TTFT",
    "server_slots": "server slots",
    "calls_in_flight_max": "most calls in flight",
    "calls_contended": "calls while all slots were busy",
    "calls_waited_for_slot": "calls that waited for a slot",
    # the findings' evidence
    "kv_cache_usage": "KV-cache usage",
    "running": "running",
    "waiting": "waiting",
    "kv_free": "KV cache free",
    "kv_need_per_sequence": "KV cache needed for one more sequence",
    "waiting_for_capacity_max": "most waiting for capacity",
    "swapped_max": "most swapped out",
    "kv_room_sequences_min": "least room in the KV cache (sequences)",
    "client_calls_in_flight_max": "most client calls in flight",
    "client_calls_waited_for_slot": "client calls that waited for a slot",
    "client_slot_wait_mean_s": "mean wait for a slot",
    "batch_token_budget_used_max": "most batch token budget used",
    "spec_drafts": "drafts",
    "spec_draft_tokens": "draft tokens",
    "queried_tokens": "prompt tokens looked up",
    "calls_with_shared_prefix": "calls sharing a prefix",
    "client_expected_tokens": "cached tokens the client expected",
    "client_read_tokens": "cached tokens read",
    "prefix_caching_enabled": "prefix caching",
    "main_miss_reason": "main reason for the misses",
    "gap_s": "gap",
    "samples": "metrics on the page",
    "first_names": "first of them",
    "metrics": "metrics",
}

_MISS_REASONS = {
    "prefix_changed": "the client changed the prefix",
    "not_changed_locally": "the server dropped a prefix the client resent",
    "below_minimum": "a prefix shorter than one KV block",
    "ttl_expired": "calls too far apart",
}
_SHARES = ("kv_cache_usage", "hit_rate", "gpu_memory_usage", "acceptance_rate", "kv_free", "kv_need_per_sequence")


def engine_name(server: Optional[str]) -> str:
    """``"tgi"`` -> ``"TGI"``; a name this module does not know is returned as it is."""
    return ENGINES.get(server or "unknown", server or "this server")


def label(key: str) -> str:
    """A figure's key in words (``waiting_max`` -> ``most waiting``); an unknown key with its underscores as spaces."""
    return _LABELS.get(key) or key.replace("_", " ")


def number(value: Any, key: str = "") -> str:
    """Plain decimals, never e-notation: shares (KV-cache usage, hit rates) as percentages, ``n/a`` for no value."""
    if value is None:
        return "n/a"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if any(k in key for k in _SHARES):
        return f"{value * 100:.{3 if 0 < abs(value) < 0.0001 else 2}f} %"
    if isinstance(value, int) or round(float(value), 9).is_integer():  # (13.999999999999986 from bucket arithmetic: "14")
        return f"{value:,.0f}"
    v = abs(value)
    digits = 0 if v >= 100 else 1 if v >= 10 else 2 if v >= 1 else 3 if v >= 0.01 else 5
    return f"{value:,.{digits}f}"


def figure(key: str, value: Any) -> str:
    """A figure's value as a person reads it: `number` with its unit (a ``*_s`` duration in s or ms; a
    ``*_per_s`` rate bare, its label saying "per second"), words for flags and reasons, the not-exposed list
    in words."""
    if key == "not_exposed":
        return not_exposed_text(value)
    if isinstance(value, bool):
        return "on" if value else "off"
    if key == "server" and isinstance(value, str):
        return engine_name(value)
    if key == "main_miss_reason" and isinstance(value, str):
        return _MISS_REASONS.get(value, value.replace("_", " "))
    if key.endswith("_per_s"):  # a rate: its label says "per second"
        return number(value, key)
    if key.endswith("_s") and isinstance(value, (int, float)):
        if isinstance(value, AtMost):  # a quantile in the first bucket: known only to be at most its bound
            return f"at most {_duration(value.bound)}"
        text = _duration(value)
        return f"over {text}" if isinstance(value, AtLeast) else text  # a quantile in the +Inf bucket
    return number(value, key)


def _duration(seconds: float) -> str:
    return f"{number(seconds * 1000)} ms" if 0 < abs(seconds) < 1 else f"{number(seconds)} s"


def not_exposed_text(value: Any) -> str:
    """``"kv_cache_usage, server_ttft_mean_s"`` -> ``"KV-cache usage, server TTFT"``; ``none`` for nothing."""
    keys = [k.strip() for k in str(value or "").split(",") if k.strip()]
    return ", ".join(_FIGURES.get(k, k.replace("_", " ")) for k in keys) or "none"


def evidence_text(evidence: Mapping[str, Any], server: Optional[str] = None) -> str:
    """A finding's numbers in words, ``; `` between them (the metric names, last, as the engine spells them)."""
    parts = []
    for key, value in evidence.items():
        if value is None:
            continue
        name = f"not exposed by {engine_name(server)}" if key == "not_exposed" and server else label(key)
        parts.append(f"{name}: {figure(key, value)}")
    return "; ".join(parts)
