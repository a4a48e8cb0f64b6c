"""latencykit: drop-in Anthropic and OpenAI clients that always stream and time every call.

```python
import latencykit as lk

client = lk.Anthropic()                       # same arguments as anthropic.Anthropic
msg = client.messages.create(model=..., max_tokens=..., messages=[...])  # a real Message
client.latency.last.ttft                      # seconds to the first generated token
print(client.latency.summary())               # P50/P90/P95/P99 per metric
```
"""

from __future__ import annotations

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
]

__version__ = "0.1.0.dev0"
