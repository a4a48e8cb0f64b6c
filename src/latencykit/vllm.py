"""`latencykit.vllm`: the old name of `latencykit.engines` (every self-hosted engine, not only vLLM).

Kept so that code written before the rename keeps working, with no warning on import: every
public name of `latencykit.engines` is here as the same object (``latencykit.vllm.VLLM is
latencykit.engines.VLLM``), and the clients still load on first use. New code imports
`latencykit.engines` (docs/self-hosted.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import engines as _engines
from .engines import (
    KINDS,
    PRESETS,
    Diagnosis,
    Doctor,
    EnginePreset,
    Finding,
    Histogram,
    MetricsWindow,
    Scrape,
    SlotQueue,
    Thresholds,
    adoctor,
    diagnose,
    doctor,
    fetch_metrics,
    fetch_slots,
    metrics_url,
    parse_metrics,
    slot_queue,
)

if TYPE_CHECKING:
    from .engines import VLLM, AsyncLlamaCpp, AsyncServer, AsyncVLLM, LlamaCpp, Server, anthropic_client, async_anthropic_client

__all__ = [
    "VLLM", "AsyncVLLM", "LlamaCpp", "AsyncLlamaCpp", "Server", "AsyncServer", "PRESETS", "EnginePreset",
    "anthropic_client", "async_anthropic_client", "Scrape", "Histogram", "MetricsWindow", "parse_metrics",
    "fetch_metrics", "fetch_slots", "metrics_url", "Doctor", "doctor", "adoctor", "diagnose", "slot_queue",
    "SlotQueue", "Diagnosis", "Finding", "Thresholds", "KINDS",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    """The clients (and any later public name of `latencykit.engines`), from there on first use."""
    if name in _engines.__all__:
        value = getattr(_engines, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
