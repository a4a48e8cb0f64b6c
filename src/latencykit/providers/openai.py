"""OpenAI: the latencykit clients (`OpenAI`, `AsyncOpenAI`) over the observed resources.

Chat Completions live in ``_openai_chat``, Responses in ``_openai_responses``, and what they
share (one streamed call, sync and async) in ``_openai_call``. ``chat.completions.create``
and ``responses.create`` are sent as streams and reassembled into the exact SDK objects; a
model call no observed method sent (raw responses, ``client.post()``, ``beta.responses``) is
recorded by the client's ``request()`` through `ENDPOINTS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import openai
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from ._client import LatencyClientOptions, client_class
from ._http import Endpoint
from ._openai_chat import (
    AsyncObservedChat, ChatAccumulator, ChatTap, ObservedChat, async_observed_beta, completion_from_state, observed_beta,
    on_completion,
)  # fmt: skip
from ._openai_responses import AsyncObservedResponses, ObservedResponses, ResponseAccumulator, ResponsesTap, on_response

__all__ = ["OpenAI", "AsyncOpenAI", "ChatTap", "ResponsesTap", "ChatAccumulator", "ResponseAccumulator", "completion_from_state"]

RESOURCES = {"chat": ObservedChat, "responses": ObservedResponses, "beta": observed_beta}
ASYNC_RESOURCES = {"chat": AsyncObservedChat, "responses": AsyncObservedResponses, "beta": async_observed_beta}
ENDPOINTS = {
    "/chat/completions": Endpoint("chat.completions", lambda timer: ChatTap(timer, hide_usage=False), on_completion, ChatCompletion),
    "/responses": Endpoint("responses", ResponsesTap, on_response, Response),
}
"""Model calls no observed method sent (raw responses, ``client.post()``, ``beta.responses``) are recorded by ``request()``."""

if TYPE_CHECKING:

    class OpenAI(LatencyClientOptions, openai.OpenAI):
        """``openai.OpenAI`` that always streams and records every call in ``client.latency``."""

    class AsyncOpenAI(LatencyClientOptions, openai.AsyncOpenAI):
        """``openai.AsyncOpenAI`` that always streams and records every call in ``client.latency``."""

else:
    OpenAI = client_class(
        openai.OpenAI,
        RESOURCES,
        "openai",
        "``openai.OpenAI`` that always streams and records every call in ``client.latency``.\n\n"
        "Takes exactly the SDK's constructor arguments, plus ``recorder=`` (a shared `Recorder`) and ``cache=`` (a `CachePolicy`, ``\"auto\"`` or ``\"off\"``).",
        endpoints=ENDPOINTS,
    )
    AsyncOpenAI = client_class(
        openai.AsyncOpenAI,
        ASYNC_RESOURCES,
        "openai",
        "``openai.AsyncOpenAI`` that always streams and records every call in ``client.latency``.\n\n"
        "Takes exactly the SDK's constructor arguments, plus ``recorder=`` (a shared `Recorder`) and ``cache=`` (a `CachePolicy`, ``\"auto\"`` or ``\"off\"``).",
        endpoints=ENDPOINTS,
    )
