"""latencykit: drop-in Anthropic and OpenAI clients that always stream and time every call.

```python
import latencykit as lk

client = lk.Anthropic()                       # same arguments as anthropic.Anthropic
msg = client.messages.create(model=..., max_tokens=..., messages=[...])  # a real Message
client.latency.last.ttft                      # seconds to the first generated token
print(client.latency.summary())               # P50/P90/P95/P99 per metric
```

The public names are imported on first use (PEP 562 ``__getattr__``): ``import latencykit``
itself costs a few milliseconds, and the SDKs, numpy and OpenTelemetry load when a client or
another public name is first touched (``benchmarks/startup.py`` measures both).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time each name loads on first use
    from .core._errors import IncompleteStreamError, PartialOutput, StreamInterruptedError
    from .core._retry import RetryPolicy
    from .core._record import OUTCOMES, CallRecord, Outcome
    from .core._timing import CallTimer
    from .core._breakpoints import BreakpointPlanner, PlanContext
    from .core._ledger import Ledger
    from .core._verify import MISS_REASONS, VERDICTS
    from .providers._caching import CachePolicy
    from .telemetry._cache_report import CacheReport
    from .providers._wrap import wrap
    from .providers.anthropic import Anthropic, AsyncAnthropic
    from .providers.openai import AsyncOpenAI, OpenAI
    from .telemetry._otel import Telemetry
    from .telemetry._recorder import Recorder
    from .telemetry._views import exponential_views
    from .telemetry._slo import BATCH_E2E, CHAT_TTFT, CODE_COMPLETION_TTFT, SLO, Violation
    from .telemetry._plots import plot_cache_hit_rate, plot_cdf, plot_histogram
    from .telemetry._sketch import PercentileSketch
    from .telemetry._summary import GroupSummary, MetricSummary, Summary
    from .semantic import (
        FastEmbedEmbedder,
        HashedEmbedder,
        MemoryStore,
        OpenAIEmbedder,
        PgVectorStore,
        RedisStore,
        SemanticCache,
        SemanticStats,
        SentenceTransformerEmbedder,
        VectorStore,
        semantic_cacheable,
        semantic_skip,
    )

__all__ = [
    "Anthropic",
    "AsyncAnthropic",
    "OpenAI",
    "AsyncOpenAI",
    "wrap",
    "Recorder",
    "CallRecord",
    "CallTimer",
    "Outcome",
    "OUTCOMES",
    "Summary",
    "MetricSummary",
    "GroupSummary",
    "PercentileSketch",
    "plot_cdf",
    "plot_histogram",
    "plot_cache_hit_rate",
    "SLO",
    "Violation",
    "CHAT_TTFT",
    "CODE_COMPLETION_TTFT",
    "BATCH_E2E",
    "IncompleteStreamError",
    "StreamInterruptedError",
    "PartialOutput",
    "RetryPolicy",
    "CachePolicy",
    "BreakpointPlanner",
    "PlanContext",
    "Ledger",
    "CacheReport",
    "VERDICTS",
    "MISS_REASONS",
    "Telemetry",
    "exponential_views",
    "SemanticCache",
    "SemanticStats",
    "semantic_cacheable",
    "semantic_skip",
    "HashedEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "FastEmbedEmbedder",
    "VectorStore",
    "MemoryStore",
    "RedisStore",
    "PgVectorStore",
]

_LAZY: dict[str, str] = {
    "IncompleteStreamError": ".core._errors",
    "PartialOutput": ".core._errors",
    "StreamInterruptedError": ".core._errors",
    "RetryPolicy": ".core._retry",
    "OUTCOMES": ".core._record",
    "CallRecord": ".core._record",
    "Outcome": ".core._record",
    "CallTimer": ".core._timing",
    "BreakpointPlanner": ".core._breakpoints",
    "PlanContext": ".core._breakpoints",
    "Ledger": ".core._ledger",
    "MISS_REASONS": ".core._verify",
    "VERDICTS": ".core._verify",
    "CachePolicy": ".providers._caching",
    "CacheReport": ".telemetry._cache_report",
    "wrap": ".providers._wrap",
    "Anthropic": ".providers.anthropic",
    "AsyncAnthropic": ".providers.anthropic",
    "AsyncOpenAI": ".providers.openai",
    "OpenAI": ".providers.openai",
    "Telemetry": ".telemetry._otel",
    "Recorder": ".telemetry._recorder",
    "exponential_views": ".telemetry._views",
    "BATCH_E2E": ".telemetry._slo",
    "CHAT_TTFT": ".telemetry._slo",
    "CODE_COMPLETION_TTFT": ".telemetry._slo",
    "SLO": ".telemetry._slo",
    "Violation": ".telemetry._slo",
    "plot_cache_hit_rate": ".telemetry._plots",
    "plot_cdf": ".telemetry._plots",
    "plot_histogram": ".telemetry._plots",
    "PercentileSketch": ".telemetry._sketch",
    "GroupSummary": ".telemetry._summary",
    "MetricSummary": ".telemetry._summary",
    "Summary": ".telemetry._summary",
    "FastEmbedEmbedder": ".semantic",
    "HashedEmbedder": ".semantic",
    "MemoryStore": ".semantic",
    "OpenAIEmbedder": ".semantic",
    "PgVectorStore": ".semantic",
    "RedisStore": ".semantic",
    "SemanticCache": ".semantic",
    "SemanticStats": ".semantic",
    "SentenceTransformerEmbedder": ".semantic",
    "VectorStore": ".semantic",
    "semantic_cacheable": ".semantic",
    "semantic_skip": ".semantic",
}
"""Public name → the module that defines it (relative to this package)."""

__version__ = "0.1.0.dev0"


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use and cache the name here."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'latencykit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
