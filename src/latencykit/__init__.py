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

from ._errors import IncompleteStreamError
from .core._record import OUTCOMES, CallRecord, Outcome
from .core._timing import CallTimer
from .providers._wrap import wrap
from .providers.anthropic import Anthropic, AsyncAnthropic
from .providers.openai import AsyncOpenAI, OpenAI
from .telemetry._otel import Telemetry
from .telemetry._recorder import Recorder
from .telemetry._views import exponential_views
from .telemetry._summary import MetricSummary, Summary

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
    "IncompleteStreamError",
    "Telemetry",
    "exponential_views",
]

__version__ = "0.1.0.dev0"
