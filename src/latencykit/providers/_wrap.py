"""`wrap()`: turn an existing SDK client (any variant) into a latencykit client."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, Optional, TypeVar, Union, overload

import anthropic
import openai

from ..core._hooks import AnswerHook
from ..telemetry._recorder import Recorder
from . import anthropic as _ant
from . import openai as _oai
from ..telemetry._otel import Telemetry
from ._client import client_class, clone_as, is_latency_client, make_settings
from ._http import Endpoints
from ._sse import check_ahead
from ._fast_models import Shapes, plan_models

__all__ = ["wrap"]

C = TypeVar("C")
_Tel = Union[Telemetry, Literal[False], None]

# GenAI semconv provider names (gen_ai.provider.name) for SDK client variants.
_PROVIDER_NAMES = {
    "AnthropicBedrock": "aws.bedrock",
    "AsyncAnthropicBedrock": "aws.bedrock",
    "AnthropicVertex": "gcp.vertex_ai",
    "AsyncAnthropicVertex": "gcp.vertex_ai",
    "AzureOpenAI": "azure.ai.openai",
    "AsyncAzureOpenAI": "azure.ai.openai",
}


def _plan(client: Any) -> tuple[dict[str, Any], str, Endpoints, Shapes]:
    """Which resources to observe on ``client``, its provider name, its model endpoints, and the
    stream events its ``_process_response_data`` may build directly (`_fast_models`)."""
    root = type(client).__module__.split(".", 1)[0]
    name = _PROVIDER_NAMES.get(type(client).__name__)
    if root == "anthropic" and hasattr(client, "messages"):
        is_async = isinstance(client.messages, anthropic.resources.AsyncMessages)
        return (_ant.ASYNC_RESOURCES if is_async else _ant.RESOURCES), name or "anthropic", _ant.ENDPOINTS, _ant.SHAPES
    if root == "openai" and hasattr(client, "chat") and hasattr(client, "responses"):
        is_async = isinstance(client.chat, openai.resources.chat.AsyncChat)
        return (_oai.ASYNC_RESOURCES if is_async else _oai.RESOURCES), name or "openai", _oai.ENDPOINTS, {}
    raise TypeError(
        "latencykit.wrap() expects an anthropic or openai SDK client, "
        f"got {type(client).__module__}.{type(client).__qualname__}"
    )


@overload
def wrap(client: anthropic.Anthropic, *, recorder: Optional[Recorder] = None, telemetry: _Tel = None, cache: Any = "auto", retry: Any = None, semantic: Optional[AnswerHook] = None) -> _ant.Anthropic: ...
@overload
def wrap(client: anthropic.AsyncAnthropic, *, recorder: Optional[Recorder] = None, telemetry: _Tel = None, cache: Any = "auto", retry: Any = None, semantic: Optional[AnswerHook] = None) -> _ant.AsyncAnthropic: ...
@overload
def wrap(client: openai.OpenAI, *, recorder: Optional[Recorder] = None, telemetry: _Tel = None, cache: Any = "auto", retry: Any = None, semantic: Optional[AnswerHook] = None) -> _oai.OpenAI: ...
@overload
def wrap(client: openai.AsyncOpenAI, *, recorder: Optional[Recorder] = None, telemetry: _Tel = None, cache: Any = "auto", retry: Any = None, semantic: Optional[AnswerHook] = None) -> _oai.AsyncOpenAI: ...
@overload
def wrap(client: C, *, recorder: Optional[Recorder] = None, telemetry: _Tel = None, cache: Any = "auto", retry: Any = None, semantic: Optional[AnswerHook] = None) -> C: ...
def wrap(client: Any, *, recorder: Optional[Recorder] = None, telemetry: _Tel = None, cache: Any = "auto", retry: Any = None, semantic: Optional[AnswerHook] = None) -> Any:
    """Return a latencykit client built on an existing SDK client (Bedrock, Vertex, Azure included).

    The result is an instance of the client's own class (and of ``lk.Anthropic`` etc. for
    the plain SDK classes), shares its HTTP connection pool, credentials and options, and
    records into ``recorder`` (a new `Recorder` by default) and emits spans and metrics
    through ``telemetry`` (the global providers by default; ``False`` for none). The
    original object is not
    modified. Wrapping a latencykit client returns it as is, or, with another
    ``recorder=``, a copy that records there. ``cache=`` is the prompt-cache policy:
    ``"auto"`` (default), ``"off"``, a `CachePolicy` or a breakpoint strategy; ``retry=``
    a `RetryPolicy` (default: the standard one) or ``False`` to leave retries to the SDK;
    ``semantic=`` a `SemanticCache` in front of the model calls (default: none).
    """
    if is_latency_client(client):
        if (recorder is None or recorder is client.latency) and cache == "auto" and retry is None and semantic is None:
            return client
        new = client.copy()
        fresh = make_settings(client._lk.provider, recorder or client.latency, None, cache, retry, semantic)
        planner = fresh.planner if cache != "auto" else client._lk.planner
        policy = fresh.retry if retry is not None else client._lk.retry
        new._lk = dataclasses.replace(
            client._lk, recorder=fresh.recorder, planner=planner, retry=policy, semantic=fresh.semantic if semantic is not None else client._lk.semantic
        )
        return new
    resources, provider, endpoints, shapes = _plan(client)
    settings = make_settings(provider, recorder, telemetry, cache, retry, semantic)
    wrapped = clone_as(client, client_class(type(client), resources, provider, endpoints=endpoints, shapes=shapes), settings)
    check_ahead(wrapped)
    plan_models(wrapped)
    return wrapped
