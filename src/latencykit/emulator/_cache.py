"""The single decision point for prompt caching.

Every "how many prompt tokens were read from / written to the cache" question goes
through `CacheModel.lookup`.  Usage fields and prefill time are derived from its answer:
cached tokens skip prefill; written tokens are prefilled normally.  The default model
caches nothing; `PromptCache` (the emulator's default) implements the providers' rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

__all__ = ["CacheModel", "CacheResult", "Provider"]

Provider = Literal["anthropic", "openai-chat", "openai-responses"]


@dataclass(frozen=True)
class CacheResult:
    """Prompt tokens served from cache and prompt tokens newly written to it."""

    cached_tokens: int = 0
    written_tokens: int = 0
    written_1h_tokens: int = 0
    """The part of ``written_tokens`` written with a 1-hour TTL (Anthropic ``ephemeral_1h``)."""
    written_12h_tokens: int = 0
    """The part of ``written_tokens`` written with a 12-hour TTL (OpenAI GPT-5.6+ ``ttl_12h_tokens``)."""
    reports_writes: bool = False
    """OpenAI GPT-5.6+: usage reports ``cache_write_tokens`` even when 0 (writes are billed)."""
    fingerprint: Optional[Any] = field(default=None, compare=False, repr=False)
    """What the cache model keeps of the request for later diagnostics (OpenAI Responses, GPT-5.6+)."""


class CacheModel:
    """No-op prompt cache: every request is a full miss that writes nothing."""

    def lookup(self, provider: Provider, body: Mapping[str, Any], prompt_tokens: int) -> CacheResult:
        """Decide the cache outcome for one request with `prompt_tokens` total prompt tokens."""
        return CacheResult()
