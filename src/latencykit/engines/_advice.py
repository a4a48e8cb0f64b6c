"""What to change, in each engine's own vocabulary: the doctor's advice per finding and engine.

The diagnosis is the same whatever the engine (`_findings`); the knob is not. vLLM's
``--max-num-seqs`` is SGLang's ``--max-running-requests``, TensorRT-LLM's ``max_batch_size``;
vLLM's ``--gpu-memory-utilization`` is SGLang's ``--mem-fraction-static`` and TensorRT-LLM's
``kv_cache_free_gpu_mem_fraction``; TGI sizes its batches by tokens (``--max-batch-total-tokens``).
An engine is a `Scrape.server` name, with Triton split by backend: ``"triton-trtllm"`` (the
TensorRT-LLM backend) and ``"triton"`` (any other model).
"""

from __future__ import annotations

__all__ = ["kv_pressure", "queue_pressure", "weak_spec", "prefix_note", "outside_note", "gpu_memory"]

_KV = {
    "vllm": (
        "Memory admits no further sequence, so raising --max-num-seqs cannot help. Give the KV "
        "cache more room: a higher --gpu-memory-utilization, --kv-cache-dtype fp8 (twice the "
        "tokens in the same memory), quantized weights (FP8/INT8/INT4) to leave it more memory, "
        "or the model split over more GPUs (--tensor-parallel-size), or add replicas.",
        " Preempted requests recompute their prompt: until the cache grows, fewer concurrent "
        "sequences (a lower --max-num-seqs) stop that waste.",
        " If a few very long requests fill it, a smaller --max-model-len caps them.",
    ),
    "sglang": (
        "Memory admits no further sequence, so raising --max-running-requests cannot help. Give the "
        "KV pool more room: a higher --mem-fraction-static (the share of GPU memory for weights and "
        "the KV pool), --kv-cache-dtype fp8_e5m2 (twice the tokens), quantized weights "
        "(--quantization fp8, awq, gptq), the model split over more GPUs (--tp-size), or more "
        "replicas (--dp-size, sglang-router).",
        " Retracted requests (sglang:num_retracted_reqs) go back to the queue and recompute their "
        "prompt: until the pool grows, a lower --max-running-requests stops that waste.",
        " If a few very long requests fill it, a smaller --context-length caps them.",
    ),
    "trtllm": (
        "Memory admits no further sequence, so raising max_batch_size cannot help. Give the KV cache "
        "more room: a higher kv_cache_free_gpu_memory_fraction (--kv_cache_free_gpu_memory_fraction, "
        "or kv_cache_config.free_gpu_memory_fraction in the LLM API options; the share of free GPU "
        "memory the KV cache takes, default 0.9), an FP8 KV cache (kv_cache_config.dtype: fp8), "
        "quantized weights, the model over more GPUs (--tp_size), or replicas.",
        " Paused requests are evicted and resumed later: until the cache grows, a lower "
        "max_batch_size stops that churn.",
        " If a few very long requests fill it, a smaller max_seq_len caps them.",
    ),
    "triton-trtllm": (
        "Memory admits no further sequence, so raising max_batch_size cannot help. Give the KV cache "
        "more room: a higher kv_cache_free_gpu_mem_fraction in the tensorrt_llm model's config.pbtxt "
        "parameters (the share of free GPU memory the KV cache takes), an FP8 KV cache and quantized "
        "weights built into the engine (trtllm-build), the model over more GPUs, or more replicas.",
        " Paused requests are evicted and resumed later: until the cache grows, a lower "
        "max_batch_size stops that churn.",
        " If a few very long requests fill it, a lower max_seq_len when the engine is built caps them.",
    ),
}


def kv_pressure(engine: str, preempted: bool) -> str:
    """Advice for a KV cache that admits no further sequence (requests wait or are preempted)."""
    base, evicted, long_requests = _KV.get(engine, _KV["vllm"])
    return base + (evicted if preempted else "") + long_requests


_QUEUE = {
    "vllm": "Compute or the scheduler limits this server, not memory: the KV cache holds more sequences "
    "than run. Batch more: raise --max-num-seqs and --max-num-batched-tokens (chunked prefill); or add "
    "replicas behind a load balancer.",
    "llamacpp": "All slots are busy and requests are deferred: start llama-server with more slots (-np) "
    "if memory allows, or add replicas.",
    "sglang": "Compute or the scheduler limits this server, not memory: the KV pool holds more sequences "
    "than run. Batch more: raise --max-running-requests (and --cuda-graph-max-bs with it) and "
    "--chunked-prefill-size; or add replicas (--dp-size, or sglang-router in front of several servers).",
    "trtllm": "Compute or the scheduler limits this server, not memory: the KV cache holds more sequences "
    "than run. Batch more: raise max_batch_size and max_num_tokens (--max_batch_size, --max_num_tokens); "
    "or add replicas behind a load balancer.",
    "triton-trtllm": "Compute or the scheduler limits this server, not memory: the KV cache holds more "
    "sequences than run. Batch more: raise max_batch_size (the engine's build limit, trtllm-build "
    "--max_batch_size, and the model's max_batch_size in config.pbtxt) and max_num_tokens; or add "
    "replicas.",
    "triton": "Requests wait for a model instance: run more instances (instance_group count in the "
    "model's config.pbtxt), batch them (dynamic_batching, with max_queue_delay_microseconds), or add "
    "replicas. Triton's metrics do not say whether memory or compute is short.",
    "tgi": "TGI admits a request only while the prompt plus max_new_tokens of every request in the batch "
    "fit in --max-batch-total-tokens (sized at start-up from the KV memory left after the weights), so a "
    "queue here is usually that token budget: ask for fewer max_new_tokens, leave the KV cache more "
    "memory (--cuda-memory-fraction, --quantize, --kv-cache-dtype fp8) and let TGI size a larger budget, "
    "or add replicas. --max-concurrent-requests bounds how many may wait (beyond it, 429 errors).",
}


def queue_pressure(engine: str) -> str:
    """Advice for requests that wait while memory has room (or where the engine cannot tell)."""
    return _QUEUE.get(engine, _QUEUE["vllm"])


_SPEC = {
    "vllm": "propose fewer tokens (num_speculative_tokens)",
    "llamacpp": "propose fewer tokens (--draft-max)",
    "sglang": "propose fewer tokens (--speculative-num-draft-tokens, --speculative-num-steps)",
    "trtllm": "propose fewer tokens (max_draft_len in speculative_config)",
    "triton-trtllm": "propose fewer tokens (max_draft_len when the engine is built)",
    "tgi": "speculate fewer tokens (--speculate)",
}


def weak_spec(engine: str, threshold: float) -> str:
    """Advice for speculative decoding that accepts few drafts."""
    fewer = _SPEC.get(engine, _SPEC["vllm"])
    return (
        f"Fewer than {threshold:g} accepted tokens per step: each rejected draft costs a verification "
        f"pass. Use a draft closer to the target (same family, distilled, or EAGLE/MTP heads), {fewer}, "
        "or turn speculative decoding off for this traffic."
    )


_PREFIX = {
    "sglang": " SGLang's radix cache is on unless the server runs with --disable-radix-cache.",
    "trtllm": " TensorRT-LLM reuses KV blocks only with kv_cache_config.enable_block_reuse on; it caches "
    "whole blocks (tokens_per_block).",
}


def prefix_note(engine: str) -> str:
    """A sentence on the engine's prefix cache to add to the miss advice ('' for vLLM)."""
    return _PREFIX.get(engine, "")


def outside_note(engine: str) -> str:
    """Where the engine's own TTFT starts, for the time-outside-the-engine advice."""
    if engine == "vllm":
        return (
            "the server's own API process: vLLM's TTFT starts only after the prompt was rendered and "
            "tokenized, so an API server starved of CPU (on a CPU build it shares the cores with the "
            "engine) loses its time here; give it a core of its own or more API servers "
            "(--api-server-count)."
        )
    return (
        "the server's HTTP front end and tokenizer, which the engine's own TTFT may leave out "
        f"({engine}); give them CPU of their own or more front-end workers."
    )


def gpu_memory(engine: str) -> str:
    """Advice for a GPU whose memory is nearly all in use (Triton's DCGM gauges)."""
    if engine == "triton-trtllm":
        return (
            "Most of it is likely the KV cache the TensorRT-LLM backend reserves at start-up "
            "(kv_cache_free_gpu_mem_fraction of the memory left after the weights): that is by design, "
            "and nv_trt_llm_kv_cache_block_metrics tells how full it is. It is a problem when another "
            "model or process on this GPU fails to load or runs out of memory: lower "
            "kv_cache_free_gpu_mem_fraction, or give that model its own GPU."
        )
    return (
        "The models on this GPU leave almost no memory free: a larger batch or another instance will "
        "fail to allocate. Run fewer instances per GPU (instance_group count), smaller max_batch_size, "
        "quantized models, or spread the models over more GPUs."
    )
