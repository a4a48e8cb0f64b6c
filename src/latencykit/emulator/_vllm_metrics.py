"""The emulator's vLLM-format ``/metrics``: counters, gauges and histograms, rendered as text.

Names, labels (``engine="0"``, ``model_name``), units and bucket bounds are vLLM V1's (see
``reference/api-facts.md`` §4.1 and the real scrape ``real-vllm-cpu-metrics.txt``). Every
value describes the emulator's own modelled engine, so every HELP line says "emulated".
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["VLLMMetrics", "Hist", "token_buckets"]

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)  # fmt: skip
def token_buckets(max_model_len: int) -> tuple[float, ...]:
    """vLLM's 1-2-5 buckets up to ``max_model_len`` (``build_1_2_5_buckets``) for token counts."""
    out: list[int] = []
    scale = 1
    while True:
        for m in (1, 2, 5):
            if m * scale > max_model_len:
                return tuple(float(b) for b in out)
            out.append(m * scale)
        scale *= 10


REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip


@dataclass
class Hist:
    """A Prometheus histogram: per-bucket counts (not cumulative), sum and count."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float, times: int = 1) -> None:
        """Record ``value`` (``times`` times)."""
        self.counts[bisect.bisect_left(self.bounds, value)] += times
        self.total += value * times
        self.count += times


_COUNTERS = {
    "prompt_tokens": "Number of prefill tokens processed.",
    "generation_tokens": "Number of generation tokens processed.",
    "prefix_cache_queries": "Prefix cache queries, in terms of number of queried tokens.",
    "prefix_cache_hits": "Prefix cache hits, in terms of number of cached tokens.",
    "prompt_tokens_cached": "Number of cached prompt tokens (local + external).",
    "num_preemptions": "Cumulative number of preemption from the engine.",
    "spec_decode_num_drafts": "Number of spec decoding drafts.",
    "spec_decode_num_draft_tokens": "Number of draft tokens.",
    "spec_decode_num_accepted_tokens": "Number of accepted tokens.",
}
_HISTOGRAMS = {
    "time_to_first_token_seconds": ("Histogram of time to first token in seconds.", TTFT_BUCKETS),
    "inter_token_latency_seconds": ("Histogram of inter-token latency in seconds.", ITL_BUCKETS),
    "request_time_per_output_token_seconds": ("Histogram of time_per_output_token_seconds per request.", ITL_BUCKETS),
    "e2e_request_latency_seconds": ("Histogram of e2e request latency in seconds.", REQUEST_BUCKETS),
    "request_queue_time_seconds": ("Histogram of time spent in WAITING phase for request.", REQUEST_BUCKETS),
}
_TOKEN_HISTOGRAMS = {
    "request_prompt_tokens": "Number of prefill tokens processed.",
    "request_generation_tokens": "Number of generation tokens processed.",
}
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")


class VLLMMetrics:
    """Mutable counters and histograms of one emulated vLLM engine (server loop only)."""

    def __init__(self, max_model_len: int = 8192) -> None:
        self.counters: dict[str, float] = {name: 0.0 for name in _COUNTERS}
        self.finished: dict[str, int] = {reason: 0 for reason in FINISH_REASONS}
        self.hists: dict[str, Hist] = {name: Hist(bounds) for name, (_, bounds) in _HISTOGRAMS.items()}
        # Per finished request, in tokens; bucket bounds fixed at start-up, as vLLM's are.
        self.hists.update({name: Hist(token_buckets(max_model_len)) for name in _TOKEN_HISTOGRAMS})

    def add(self, name: str, amount: float = 1.0) -> None:
        """Increase counter ``name``."""
        self.counters[name] += amount

    def observe(self, name: str, value: float, times: int = 1) -> None:
        """Record ``value`` in histogram ``name``."""
        self.hists[name].observe(value, times)

    def render(self, model: str, gauges: Mapping[str, float], waiting_by_reason: Mapping[str, float], info: Mapping[str, str], spec: bool) -> str:
        """The page, in Prometheus text format 0.0.4."""
        base = f'engine="0",model_name="{model}"'
        out: list[str] = []

        def family(name: str, kind: str, help_text: str) -> None:
            out.append(f"# HELP vllm:{name} {help_text} (emulated by latencykit)")
            out.append(f"# TYPE vllm:{name} {kind}")

        for name, value in gauges.items():
            family(name, "gauge", name.replace("_", " ") + ".")
            out.append(f"vllm:{name}{{{base}}} {float(value)!r}")
        family("num_requests_waiting_by_reason", "gauge", "Number of requests waiting, by reason.")
        for reason, value in waiting_by_reason.items():
            out.append(f'vllm:num_requests_waiting_by_reason{{{base},reason="{reason}"}} {float(value)!r}')
        family("cache_config_info", "gauge", "Information of the LLMEngine CacheConfig.")
        labels = ",".join(f'{k}="{v}"' for k, v in sorted({**info, "engine": "0"}.items()))
        out.append(f"vllm:cache_config_info{{{labels}}} 1.0")
        for name, help_text in _COUNTERS.items():
            if name.startswith("spec_") and not spec:
                continue
            family(name, "counter", help_text)
            out.append(f"vllm:{name}_total{{{base}}} {self.counters[name]!r}")
        family("request_success", "counter", "Count of successfully processed requests.")
        for reason, n in self.finished.items():
            out.append(f'vllm:request_success_total{{engine="0",finished_reason="{reason}",model_name="{model}"}} {float(n)!r}')
        for name, (help_text, _) in _HISTOGRAMS.items():
            family(name, "histogram", help_text)
            out.extend(_histogram_lines(f"vllm:{name}", base, self.hists[name]))
        for name, help_text in _TOKEN_HISTOGRAMS.items():
            family(name, "histogram", help_text)
            out.extend(_histogram_lines(f"vllm:{name}", base, self.hists[name]))
        return "\n".join(out) + "\n"


def _histogram_lines(name: str, base: str, hist: Hist) -> Sequence[str]:
    lines = []
    cumulative = 0
    for bound, n in zip((*hist.bounds, float("inf")), hist.counts):
        cumulative += n
        le = "+Inf" if bound == float("inf") else repr(float(bound))
        lines.append(f'{name}_bucket{{{base},le="{le}"}} {float(cumulative)!r}')
    lines.append(f"{name}_count{{{base}}} {float(hist.count)!r}")
    lines.append(f"{name}_sum{{{base}}} {hist.total!r}")
    return lines
