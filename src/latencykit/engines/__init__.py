"""Self-hosted engines: vLLM, SGLang, TGI, Triton, TensorRT-LLM and llama.cpp clients, a ``/metrics`` reader, and a doctor.

```python
import latencykit.engines as lke

client = lke.VLLM("http://127.0.0.1:8000")          # a latencykit.OpenAI; model from /v1/models
client.chat.completions.create(messages=[{"role": "user", "content": "hi"}], max_tokens=16)
client.latency.last.extra["tokens_per_step"]         # per call, from continuous usage stats
print(lke.doctor("http://127.0.0.1:8000", records=client.latency))  # what limits the server
sg = lke.Server("http://127.0.0.1:30000", engine="sglang")   # SGLang, TGI, Triton, trtllm-serve presets
print(sg.doctor())                                           # reads sglang:* names, advises --max-running-requests
```

What this package owns: the server clients (`VLLM`, `AsyncVLLM`, `LlamaCpp`,
`AsyncLlamaCpp`, `Server`, `AsyncServer`, `anthropic_client`), the reader (`Scrape`, `MetricsWindow`,
`Histogram` and its `AtLeast` / `AtMost` quantiles; ``prometheus_client``'s parser, the ``vllm`` extra) and the doctor (`Doctor`,
`doctor`, `Diagnosis`, `Finding`, `Thresholds`, `slot_queue`). It imports the core, the providers and
the telemetry Recorder; never the emulator, the fleet, the semantic cache or anything above the
providers. Its former name `latencykit.vllm` (and `latencykit.llamacpp`, its llama.cpp face) stays
importable as an alias, with no warning. See ``docs/self-hosted.md``.

The clients are imported on first use (PEP 562 ``__getattr__``), so the reader and the doctor
(``latencykit doctor``) start without importing the OpenAI and Anthropic SDKs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._doctor import Doctor, adoctor, doctor, fetch_metrics, fetch_slots, metrics_url
from ._findings import KINDS, Diagnosis, Finding, SlotQueue, Thresholds, diagnose, slot_queue
from ._metrics import AtLeast, AtMost, Histogram, Scrape, parse_metrics  # AtLeast, AtMost: by name (the __all__ of the engines and their old alias stay as released)
from ._presets import PRESETS, EnginePreset
from ._window import MetricsWindow

if TYPE_CHECKING:
    from ._clients import VLLM, AsyncLlamaCpp, AsyncServer, AsyncVLLM, LlamaCpp, Server, anthropic_client, async_anthropic_client

_CLIENTS = frozenset({"VLLM", "AsyncVLLM", "LlamaCpp", "AsyncLlamaCpp", "Server", "AsyncServer", "anthropic_client", "async_anthropic_client"})


def __getattr__(name: str) -> Any:
    if name in _CLIENTS:
        from . import _clients

        value = getattr(_clients, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "VLLM",
    "AsyncVLLM",
    "LlamaCpp",
    "AsyncLlamaCpp",
    "Server",
    "AsyncServer",
    "PRESETS",
    "EnginePreset",
    "anthropic_client",
    "async_anthropic_client",
    "Scrape",
    "Histogram",
    "MetricsWindow",
    "parse_metrics",
    "fetch_metrics",
    "fetch_slots",
    "metrics_url",
    "Doctor",
    "doctor",
    "adoctor",
    "diagnose",
    "slot_queue",
    "SlotQueue",
    "Diagnosis",
    "Finding",
    "Thresholds",
    "KINDS",
]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
