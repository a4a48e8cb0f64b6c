"""Every attribute and metric name latencykit emits, in one place, for two naming generations.

Upstream (see ``shared/reference/api-facts.md`` §1):

- *v1.41* — the last ``open-telemetry/semantic-conventions`` release with GenAI
  (``model/gen-ai/*.yaml`` @ v1.41.1). ``gen_ai.client.operation.duration``: "GenAI operation
  duration", s; ``gen_ai.client.operation.time_to_first_chunk``: "from request issuance to
  first chunk received", s, streaming only; ``gen_ai.client.operation.time_per_output_chunk``:
  "for each chunk after the first ... from the end of the previous chunk to the end of the
  current one", s; ``gen_ai.client.token.usage``: {token}, with ``gen_ai.token.type``.
  ``gen_ai.usage.input_tokens`` "SHOULD include all input tokens, including cached ones".
- *latest* — ``open-telemetry/semantic-conventions-genai`` (PR #521 renames
  ``operation.*`` to ``inference.*``; PR #374 replaces ``token.usage`` with counters and
  ``operation.{input,output}_tokens`` histograms; PR #440 renames
  ``cache_creation.input_tokens`` to ``cache_write.input_tokens``).

Which one is emitted follows ``OTEL_SEMCONV_STABILITY_OPT_IN``: the value
``gen_ai_latest_experimental`` selects *latest*; otherwise *v1.41*. latencykit's own names
(``latencykit.*``) are the same in both.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

__all__ = ["SemConv", "semconv", "DURATION_BUCKETS", "TOKEN_BUCKETS", "TPOT_BUCKETS"]

# Explicit bucket boundaries from the conventions (seconds; tokens).
DURATION_BUCKETS: tuple[float, ...] = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
TOKEN_BUCKETS: tuple[float, ...] = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
# Per-token decode times are milliseconds, below the duration buckets' first boundary.
TPOT_BUCKETS: tuple[float, ...] = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.5, 1.0, 2.5)

OPT_IN_ENV = "OTEL_SEMCONV_STABILITY_OPT_IN"
LATEST = "gen_ai_latest_experimental"


@dataclass(frozen=True)
class SemConv:
    """One naming generation."""

    latest: bool
    # span attributes (identical in both generations unless noted)
    operation: str = "gen_ai.operation.name"
    provider: str = "gen_ai.provider.name"
    request_model: str = "gen_ai.request.model"
    response_model: str = "gen_ai.response.model"
    response_id: str = "gen_ai.response.id"
    finish_reasons: str = "gen_ai.response.finish_reasons"
    request_stream: str = "gen_ai.request.stream"
    request_max_tokens: str = "gen_ai.request.max_tokens"
    time_to_first_chunk: str = "gen_ai.response.time_to_first_chunk"
    input_tokens: str = "gen_ai.usage.input_tokens"
    output_tokens: str = "gen_ai.usage.output_tokens"
    reasoning_tokens: str = "gen_ai.usage.reasoning.output_tokens"
    cache_read: str = "gen_ai.usage.cache_read.input_tokens"
    cache_write: str = "gen_ai.usage.cache_creation.input_tokens"
    token_type: str = "gen_ai.token.type"
    input_messages: str = "gen_ai.input.messages"
    output_messages: str = "gen_ai.output.messages"
    system_instructions: str = "gen_ai.system_instructions"
    server_address: str = "server.address"
    server_port: str = "server.port"
    error_type: str = "error.type"
    # metrics
    duration_metric: str = "gen_ai.client.operation.duration"
    ttfc_metric: str = "gen_ai.client.operation.time_to_first_chunk"
    tpoc_metric: str = "gen_ai.client.operation.time_per_output_chunk"
    token_usage_metric: Optional[str] = "gen_ai.client.token.usage"
    input_tokens_counter: Optional[str] = None
    output_tokens_counter: Optional[str] = None
    cache_read_counter: str = "latencykit.client.cache.read.input_tokens"
    cache_write_counter: str = "latencykit.client.cache.write.input_tokens"


V1_41 = SemConv(latest=False)
LATEST_GENAI = SemConv(
    latest=True,
    cache_write="gen_ai.usage.cache_write.input_tokens",
    duration_metric="gen_ai.client.inference.duration",
    ttfc_metric="gen_ai.client.inference.time_to_first_chunk",
    tpoc_metric="gen_ai.client.inference.time_per_output_chunk",
    token_usage_metric=None,
    input_tokens_counter="gen_ai.client.inference.usage.input_tokens",
    output_tokens_counter="gen_ai.client.inference.usage.output_tokens",
    cache_read_counter="gen_ai.client.inference.usage.cache_read.input_tokens",
    cache_write_counter="gen_ai.client.inference.usage.cache_write.input_tokens",
)

# latencykit's own names (not in the conventions).
LK_TTFT = "latencykit.ttft"
LK_TTFB = "latencykit.ttfb"
LK_TTFO = "latencykit.ttfo"
LK_REASONING_TIME = "latencykit.reasoning_time"
LK_REASONING_TIME_BASIS = "latencykit.reasoning_time.basis"
LK_TPOT_BASIS = "latencykit.tpot.basis"
LK_TPOT = "latencykit.tpot"
LK_E2E = "latencykit.e2e"
LK_CHUNKS = "latencykit.chunks"
LK_OUTCOME = "latencykit.outcome"
LK_STREAMED = "latencykit.streamed"
LK_API = "latencykit.api"
LK_CACHE_VERDICT = "latencykit.cache.verdict"
LK_CACHE_MISS_REASON = "latencykit.cache.miss_reason"
LK_CACHE_EXPECTED = "latencykit.cache.expected_tokens"
LK_TTFT_METRIC = "latencykit.client.time_to_first_token"
LK_TPOT_METRIC = "latencykit.client.time_per_output_token"
# No upstream convention measures the answer's first token apart from reasoning; named like
# the TTFT histogram beside it (and like aiperf's "time to first output token").
LK_TTFO_METRIC = "latencykit.client.time_to_first_output_token"
LK_MISS_METRIC = "latencykit.client.cache.misses"
LK_RETRY_METRIC = "latencykit.client.retries"
LK_RETRY_REASON = "latencykit.retry.reason"
LK_ATTEMPTS = "latencykit.attempts"
LK_RETRY_REASONS = "latencykit.retry.reasons"
LK_TTFT_DEADLINE_HITS = "latencykit.ttft_deadline.hits"
# latencykit's own (no upstream convention for response caches): calls looked up in the
# semantic response cache, by whether they were answered from it (docs/semantic.md).
LK_SEMANTIC_METRIC = "latencykit.client.semantic_cache.lookups"
LK_SEMANTIC_HIT = "latencykit.semantic_cache.hit"
EVENT_FIRST_TOKEN = "latencykit.first_token"
EVENT_FIRST_OUTPUT_TOKEN = "latencykit.first_output_token"
EVENT_CACHE_MISS = "latencykit.cache.unexpected_miss"


_CHOSEN: dict[str, SemConv] = {}
"""The generation for each value of the opt-in variable seen (a handful at most)."""


def semconv(env: Optional[str] = None) -> SemConv:
    """The generation selected by ``OTEL_SEMCONV_STABILITY_OPT_IN`` (or by ``env`` when given).

    Read on every call (a process may set the variable after creating clients); the value is
    parsed once.
    """
    value = os.environ.get(OPT_IN_ENV, "") if env is None else env
    chosen = _CHOSEN.get(value)
    if chosen is None:
        chosen = LATEST_GENAI if LATEST in {v.strip() for v in value.split(",")} else V1_41
        if len(_CHOSEN) < 64:
            _CHOSEN[value] = chosen
    return chosen
