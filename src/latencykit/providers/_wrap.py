"""`wrap()`: turn an existing SDK client (any variant) into a latencykit client."""

from __future__ import annotations

from typing import Any, Optional, TypeVar, overload

import anthropic
import openai

from ..telemetry._recorder import Recorder
from ._client import LatencyClientMixin, clone_as
from .anthropic import Anthropic, AsyncAnthropic, _AnthropicMixin, _AsyncAnthropicMixin
from .openai import AsyncOpenAI, OpenAI, _AsyncOpenAIMixin, _OpenAIMixin

__all__ = ["wrap"]

C = TypeVar("C")

# GenAI semconv provider names for SDK client variants (gen_ai.provider.name).
_PROVIDER_NAMES = {
    "AnthropicBedrock": "aws.bedrock",
    "AsyncAnthropicBedrock": "aws.bedrock",
    "AnthropicVertex": "gcp.vertex_ai",
    "AsyncAnthropicVertex": "gcp.vertex_ai",
    "AzureOpenAI": "azure.ai.openai",
    "AsyncAzureOpenAI": "azure.ai.openai",
}


def _mixin_for(client: Any) -> tuple[type, str]:
    root = type(client).__module__.split(".", 1)[0]
    name = _PROVIDER_NAMES.get(type(client).__name__)
    if root == "anthropic" and hasattr(client, "messages"):
        is_async = isinstance(client.messages, anthropic.resources.AsyncMessages)
        return (_AsyncAnthropicMixin if is_async else _AnthropicMixin), name or "anthropic"
    if root == "openai" and hasattr(client, "chat"):
        is_async = isinstance(client.chat, openai.resources.chat.AsyncChat)
        return (_AsyncOpenAIMixin if is_async else _OpenAIMixin), name or "openai"
    raise TypeError(
        f"latencykit.wrap() expects an anthropic or openai SDK client, got {type(client).__module__}.{type(client).__qualname__}"
    )


@overload
def wrap(client: anthropic.Anthropic, *, recorder: Optional[Recorder] = None) -> Anthropic: ...
@overload
def wrap(client: anthropic.AsyncAnthropic, *, recorder: Optional[Recorder] = None) -> AsyncAnthropic: ...
@overload
def wrap(client: openai.OpenAI, *, recorder: Optional[Recorder] = None) -> OpenAI: ...
@overload
def wrap(client: openai.AsyncOpenAI, *, recorder: Optional[Recorder] = None) -> AsyncOpenAI: ...
@overload
def wrap(client: C, *, recorder: Optional[Recorder] = None) -> C: ...
def wrap(client: Any, *, recorder: Optional[Recorder] = None) -> Any:
    """Return a latencykit client built on an existing SDK client (Bedrock, Vertex, Azure included).

    The result shares the original's HTTP connection pool, credentials and options; the
    original object is not modified. Wrapping an already wrapped client returns it as is,
    or, with ``recorder=``, a copy that records into that Recorder.
    """
    if isinstance(client, LatencyClientMixin):
        if recorder is None or recorder is client.latency:
            return client
        new = client.copy()
        new._lk = type(client._lk)(recorder=recorder, provider=client._lk.provider, clock=client._lk.clock)
        return new
    mixin, provider = _mixin_for(client)
    if type(client) in (anthropic.Anthropic, anthropic.AsyncAnthropic, openai.OpenAI, openai.AsyncOpenAI):
        # The exact SDK classes get the public latencykit classes, so isinstance works both ways.
        public = {
            anthropic.Anthropic: Anthropic,
            anthropic.AsyncAnthropic: AsyncAnthropic,
            openai.OpenAI: OpenAI,
            openai.AsyncOpenAI: AsyncOpenAI,
        }[type(client)]
        return clone_as(client, mixin, recorder, provider, cls=public)
    return clone_as(client, mixin, recorder, provider)
