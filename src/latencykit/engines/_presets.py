"""Where each self-hosted engine listens and what its OpenAI-compatible API honours: `Server`'s presets.

| engine | default URL | metrics | ``continuous_usage_stats`` | cached-token details |
|---|---|---|---|---|
| ``vllm`` | ``:8000`` | ``/metrics`` | yes | ``--enable-prompt-tokens-details`` |
| ``sglang`` | ``:30000`` | ``/metrics`` (``--enable-metrics``) | yes | ``--enable-cache-report`` |
| ``tgi`` | ``:8080`` | ``/metrics`` | no (usage in the last chunk) | no |
| ``triton`` | ``:9000`` (Triton's OpenAI-compatible frontend) | ``:8002/metrics`` (Triton's metrics port) | no | no |
| ``trtllm`` | ``:8000`` (``trtllm-serve``) | ``/prometheus/metrics`` (``return_perf_metrics``) | yes | no |
| ``llamacpp`` | ``:8080`` | ``/metrics`` (``--metrics``) | no | ``timings.cache_n`` (llama.cpp's own) |

Sources: each engine's OpenAI protocol module (``StreamOptions.continuous_usage_stats`` in vLLM,
SGLang and TensorRT-LLM; SGLang's ``prompt_tokens_details`` "only used to return cached tokens
when --enable-cache-report is set"), their launch docs for ports and metrics flags.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = ["PRESETS", "EnginePreset", "preset"]


@dataclass(frozen=True)
class EnginePreset:
    """One engine's defaults for `latencykit.engines.Server`."""

    engine: str
    default_url: str
    metrics: str
    """A path on the API server (``/metrics``) or an absolute URL (Triton's own metrics port)."""
    continuous_usage: bool
    """Whether chat streams may ask for ``stream_options.continuous_usage_stats`` (usage on every chunk)."""
    cached_tokens: Optional[str]
    """How the server reports cached prompt tokens in ``usage``, if it does (``None``: it does not)."""
    env: str
    """Environment prefix: ``<PREFIX>_BASE_URL`` and ``<PREFIX>_API_KEY``."""

    def metrics_url(self, server_root: str) -> str:
        """The metrics page for the API server at ``server_root`` (``http://host:port``)."""
        if self.metrics.startswith("http"):
            host = server_root.split("://", 1)[1].rsplit(":", 1)[0]
            return self.metrics.replace("127.0.0.1", host, 1)
        return server_root + self.metrics


PRESETS: dict[str, EnginePreset] = {
    "vllm": EnginePreset("vllm", "http://127.0.0.1:8000", "/metrics", True, "--enable-prompt-tokens-details", "VLLM"),
    "sglang": EnginePreset("sglang", "http://127.0.0.1:30000", "/metrics", True, "--enable-cache-report", "SGLANG"),
    "tgi": EnginePreset("tgi", "http://127.0.0.1:8080", "/metrics", False, None, "TGI"),
    "triton": EnginePreset("triton", "http://127.0.0.1:9000", "http://127.0.0.1:8002/metrics", False, None, "TRITON"),
    "trtllm": EnginePreset("trtllm", "http://127.0.0.1:8000", "/prometheus/metrics", True, None, "TRTLLM"),
    "llamacpp": EnginePreset("llamacpp", "http://127.0.0.1:8080", "/metrics", False, "timings.cache_n", "LLAMACPP"),
}


def preset(engine: str) -> EnginePreset:
    """The preset of ``engine`` (raises ``ValueError`` naming the known ones)."""
    try:
        return PRESETS[engine]
    except (KeyError, TypeError):
        raise ValueError(f"engine must be one of {', '.join(PRESETS)}; got {engine!r}") from None
