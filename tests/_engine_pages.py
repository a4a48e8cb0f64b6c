"""HAND-WRITTEN /metrics pages for pressure states no recorded real page shows (issue #26).

Every page here is written by hand, with each engine's own metric names and label sets as the
recorded real pages carry them (tests/fixtures/recorded/: SGLang's docs and Datadog's SGLang,
TGI and Triton fixtures, the TensorRT-LLM backend README, Dynamo's trtllm docs); the numbers
are invented to put the engine into one state. Tests that use them say so.
"""

from __future__ import annotations

from latencykit.vllm import MetricsWindow, Scrape

SGLANG_MODEL = 'model_name="qwen2.5-7b"'


def sglang(usage: float, running: float, queue: float, retracted: float = 0.0, *, ranks: int = 2, generated: float = 40000,
           accept_length: float = 0.0, at: float = 0.0) -> Scrape:
    """SGLang with tensor parallelism: every ``tp_rank`` repeats the scheduler's gauges and counters."""
    lines = []
    for rank in range(ranks):
        lab = f'{{engine_type="unified",{SGLANG_MODEL},pp_rank="0",tp_rank="{rank}"}}'
        lines += [
            f"sglang:token_usage{lab} {usage}",
            f"sglang:num_running_reqs{lab} {running}",
            f"sglang:num_queue_reqs{lab} {queue}",
            f"sglang:num_retracted_reqs{lab} {retracted}",
            f"sglang:max_total_num_tokens{lab} 200000",
            f"sglang:spec_accept_length{lab} {accept_length}",
            f"sglang:generation_tokens_total{lab} {generated}",
            f"sglang:prompt_tokens_total{lab} 400000",
            f"sglang:cached_tokens_total{lab} 20000",
        ]
    hist = f"{{{SGLANG_MODEL}}}"
    lines += [
        f'sglang:prompt_tokens_histogram_bucket{{le="+Inf",{SGLANG_MODEL}}} 100',
        f"sglang:prompt_tokens_histogram_sum{hist} 400000",
        f"sglang:prompt_tokens_histogram_count{hist} 100",
        f'sglang:time_to_first_token_seconds_bucket{{le="+Inf",{SGLANG_MODEL}}} 100',
        f"sglang:time_to_first_token_seconds_sum{hist} 5.0",
        f"sglang:time_to_first_token_seconds_count{hist} 100",
    ]
    return Scrape.parse("\n".join(lines) + "\n", at=at)


def tgi(queue: float, batch: float, *, skipped: float = 0.0, generated: float = 2000.0) -> Scrape:
    """TGI with a queue, a busy batch and (``skipped`` > 0) speculation on."""
    page = f"""# TYPE tgi_queue_size gauge
tgi_queue_size {queue}
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size {batch}
# TYPE tgi_batch_current_max_tokens gauge
tgi_batch_current_max_tokens 15800
# TYPE tgi_request_success counter
tgi_request_success 100
# TYPE tgi_request_queue_duration histogram
tgi_request_queue_duration_bucket{{le="0.5"}} 10
tgi_request_queue_duration_bucket{{le="+Inf"}} 100
tgi_request_queue_duration_sum 180.0
tgi_request_queue_duration_count 100
# TYPE tgi_request_duration histogram
tgi_request_duration_bucket{{le="+Inf"}} 100
tgi_request_duration_sum 400.0
tgi_request_duration_count 100
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_bucket{{le="+Inf"}} 100
tgi_request_generated_tokens_sum {generated}
tgi_request_generated_tokens_count 100
# TYPE tgi_request_skipped_tokens summary
tgi_request_skipped_tokens{{quantile="0.5"}} 1
tgi_request_skipped_tokens_sum {skipped}
tgi_request_skipped_tokens_count 100
"""
    return Scrape.parse(page)


def triton_trtllm(fraction: float, waiting: float, active: float, paused: float, gpu_used: float) -> Scrape:
    """Triton with the TensorRT-LLM backend (label sets as in the backend's README) on one 80 GB GPU."""
    m = 'model="tensorrt_llm",version="1"'
    gpu = 'gpu_uuid="GPU-00000000-0000-0000-0000-000000000000"'
    page = f"""# TYPE nv_trt_llm_request_metrics gauge
nv_trt_llm_request_metrics{{{m},request_type="waiting"}} {waiting}
nv_trt_llm_request_metrics{{{m},request_type="active"}} {active}
nv_trt_llm_request_metrics{{{m},request_type="scheduled"}} {active}
nv_trt_llm_request_metrics{{{m},request_type="max"}} 64
# TYPE nv_trt_llm_kv_cache_block_metrics gauge
nv_trt_llm_kv_cache_block_metrics{{kv_cache_block_type="fraction",{m}}} {fraction}
nv_trt_llm_kv_cache_block_metrics{{kv_cache_block_type="tokens_per",{m}}} 64
nv_trt_llm_kv_cache_block_metrics{{kv_cache_block_type="used",{m}}} {round(fraction * 4000)}
nv_trt_llm_kv_cache_block_metrics{{kv_cache_block_type="max",{m}}} 4000
# TYPE nv_trt_llm_inflight_batcher_metrics gauge
nv_trt_llm_inflight_batcher_metrics{{inflight_batcher_specific_metric="paused_requests",{m}}} {paused}
# TYPE nv_inference_request_success counter
nv_inference_request_success{{{m}}} 500
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{{{m}}} 250000
# TYPE nv_inference_queue_duration_us counter
nv_inference_queue_duration_us{{{m}}} 1000
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{{{m}}} 0
# TYPE nv_gpu_memory_total_bytes gauge
nv_gpu_memory_total_bytes{{{gpu}}} 85899345920
# TYPE nv_gpu_memory_used_bytes gauge
nv_gpu_memory_used_bytes{{{gpu}}} {gpu_used * 85899345920:.0f}
"""
    return Scrape.parse(page)


def trtllm(utilization: float, waiting: float, running: float, accept_length: float, *, prefixed: bool = True) -> Scrape:
    """trtllm-serve: with Dynamo's / newer releases' ``trtllm_`` prefix, or bare as its own
    ``/prometheus/metrics`` once served them (``engine_type="trtllm"``)."""
    p = "trtllm_" if prefixed else ""
    lab = '{model_name="llama-3.1-8b",engine_type="trtllm"}'
    page = f"""{p}kv_cache_utilization{lab} {utilization}
{p}num_requests_waiting{lab} {waiting}
{p}num_requests_running{lab} {running}
{p}num_paused_requests{lab} 0
{p}spec_decode_acceptance_length{lab} {accept_length}
{p}generation_tokens_total{lab} 30000
{p}time_to_first_token_seconds_bucket{{le="+Inf",model_name="llama-3.1-8b",engine_type="trtllm"}} 50
{p}time_to_first_token_seconds_sum{lab} 2.5
{p}time_to_first_token_seconds_count{lab} 50
"""
    return Scrape.parse(page)


def window(*scrapes: Scrape) -> MetricsWindow:
    """A window over ``scrapes``."""
    return MetricsWindow(list(scrapes))
