"""llama.cpp's ``llama-server`` behind latencykit (the same objects as in `latencykit.engines`).

```python
from latencykit.llamacpp import LlamaCpp

client = LlamaCpp("http://127.0.0.1:8080")
client.chat.completions.create(messages=[{"role": "user", "content": "hi"}], max_tokens=16)
client.latency.last.extra["server_timings"]   # prompt_ms, cache_n, predicted_per_second, ...
client.slots()                                # GET /slots
```
"""

from __future__ import annotations

from .engines import AsyncLlamaCpp, Diagnosis, Doctor, LlamaCpp, Scrape, doctor, fetch_metrics

__all__ = ["LlamaCpp", "AsyncLlamaCpp", "Scrape", "fetch_metrics", "Doctor", "doctor", "Diagnosis"]
