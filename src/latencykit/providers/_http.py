"""The client's ``request()``: one record for every model call no observed resource method sent.

Every SDK path ends in the client's ``request()`` — resource methods, ``with_raw_response``,
``with_streaming_response``, resources latencykit does not replace (``beta.responses``, ...),
and ``client.post()`` / ``client.request()`` as LiteLLM uses them. A latencykit client class
overrides ``request()`` (the one public method all of them share, on every SDK version), and:

- a call sent by an observed resource method (``messages.create``, ``chat.completions.stream``,
  ...) is marked in flight by `sending`, so it passes through here untouched — recorded once,
  where it was streamed;
- any other ``POST`` to a model endpoint (``…/messages``, ``…/chat/completions``,
  ``…/responses``) is planned (prompt-cache breakpoints), timed and recorded here, and sent
  exactly as the caller asked: latencykit cannot make it a stream, because the caller gets the
  HTTP body (a raw response) or chose the result type (``cast_to``) itself.

What comes back is the SDK's own object, observed in place: a ``Stream`` gets a tap, a raw
response (``APIResponse`` / ``LegacyAPIResponse``) is re-classed so the stream its ``parse()``
returns is observed and a body read later is timed (`_raw`). These calls use the SDK's own
retries (latencykit's retry policy covers the paths it streams itself).
"""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from ..core._record import CallRecord
from ..core._timing import CallTimer
from ._calls import begin, in_flight, prepare, sending
from ._raw import is_raw_response, is_sdk_stream, observe_response
from ._streams import observe_stream
from ._tap import Tap

__all__ = ["Endpoint", "Endpoints", "model_endpoint", "sync_request", "async_request", "HttpCall"]

logger = logging.getLogger("latencykit")

RAW_HEADER = "x-stainless-raw-response"

# What the raw-response header says about how the caller asked (SDK wrappers set it; LiteLLM
# sets "true" on its own client.post() calls).
_HOW = {"raw": "with_raw_response", "true": "with_raw_response", "stream": "with_streaming_response"}

NOT_STREAMED_RAW = "raw response requested for a non-streaming call (the caller reads the HTTP body); sent as asked"
NOT_STREAMED_REQUEST = "non-streaming client.post()/request() call (the caller chose the result type); sent as asked"


@dataclass(frozen=True)
class Endpoint:
    """A model endpoint: the planner's API name, its tap, and how a whole response is read."""

    api: str
    """``"messages"``, ``"chat.completions"`` or ``"responses"``."""
    tap: Callable[[CallTimer], Tap]
    on_result: Callable[[CallRecord, Any], None]
    """Reads model, id, usage and finish reason from a non-streamed result."""
    result_type: Any
    """The SDK model a non-streamed JSON body folds into (``Message``, ``ChatCompletion``, ``Response``)."""


Endpoints = Mapping[str, Endpoint]
"""Path suffix (``"/messages"``) → endpoint, per provider."""


def model_endpoint(endpoints: Endpoints, options: Any) -> Optional[Endpoint]:
    """The endpoint a request goes to, or ``None`` when it is not a model call (``GET``,
    ``/messages/count_tokens``, ``/responses/{id}``, batches, files, ...)."""
    method, url = getattr(options, "method", None), getattr(options, "url", None)
    if not isinstance(method, str) or method.lower() != "post" or not isinstance(url, str):
        return None
    path = url.split("?", 1)[0].rstrip("/")
    for suffix, endpoint in endpoints.items():
        if path.endswith(suffix):
            return endpoint
    return None


def _header(options: Any, name: str) -> Optional[str]:
    headers = getattr(options, "headers", None)
    if isinstance(headers, Mapping):
        for key, value in headers.items():
            if isinstance(key, str) and key.lower() == name and isinstance(value, str):
                return value
    return None


class HttpCall:
    """One model call caught at ``request()``: planned, timed, and its result observed."""

    __slots__ = ("endpoint", "options", "stream", "timer", "tap")

    def __init__(self, client: Any, endpoint: Endpoint, options: Any, stream: bool) -> None:
        self.endpoint = endpoint
        self.stream = stream
        body = getattr(options, "json_data", None)
        finish = None
        if isinstance(body, dict):
            planned, finish = prepare(client, endpoint.api, body)
            if planned is not body:
                options = copy.copy(options)  # the caller's options are never mutated
                options.json_data = planned
                body = planned
        self.options = options
        mode = _header(options, RAW_HEADER)
        how = _HOW.get(mode or "", "request")
        reason = None if stream else (NOT_STREAMED_RAW if mode in _HOW else NOT_STREAMED_REQUEST)
        self.timer = begin(
            client,
            api=endpoint.api,
            method=f"{how}(stream=True)" if stream else how,
            model=body.get("model") if isinstance(body, dict) else None,
            streamed=stream,
            reason=reason,
            finish=finish,
            request=body if isinstance(body, dict) else None,
        )
        self.tap: Tap = endpoint.tap(self.timer)

    # -- what the SDK returned ------------------------------------------------------------
    def observe(self, result: Any) -> Any:
        """Observe the SDK's result in place and return it; never raises."""
        try:
            if is_sdk_stream(result):
                observe_stream(result, self.tap)
            elif is_raw_response(result):
                observe_response(result, self)
            else:
                self.finish_result(result)
        except Exception:  # measurement never breaks the call
            logger.debug("latencykit: could not observe a response", exc_info=True)
            self.timer.complete()
        return result

    def finish_result(self, result: Any) -> None:
        """A whole result arrived (a parsed model, a dict, or an ``httpx`` response): record it."""
        if isinstance(result, dict):
            result = _fold(self.endpoint, result)
        elif hasattr(result, "status_code") and hasattr(result, "headers"):  # cast_to=httpx.Response
            result = _fold(self.endpoint, _json(result))
        if result is not None:
            try:
                self.endpoint.on_result(self.timer.record, result)
            except Exception:
                logger.debug("latencykit: could not read usage", exc_info=True)
        self.timer.complete()

    def finish_body(self, content: Optional[bytes]) -> None:
        """A non-streamed body has been read (``content`` is ``None`` if it was not kept)."""
        data = None
        if content is not None:
            try:
                data = json.loads(content)
            except ValueError:
                data = None
        self.finish_result(_fold(self.endpoint, data) if isinstance(data, dict) else None)


def _json(response: Any) -> Any:
    try:
        return json.loads(response.content)
    except Exception:  # not read, not JSON
        return None


def _fold(endpoint: Endpoint, data: Any) -> Any:
    """The SDK model of a JSON body (built without validation, as the SDK does), or ``None``."""
    if not isinstance(data, dict):
        return None
    try:
        return endpoint.result_type.construct(**data)
    except Exception:
        return None


def _call_for(client: Any, options: Any, kwargs: Mapping[str, Any]) -> Optional[HttpCall]:
    """The call to record, or ``None`` to pass the request through untouched."""
    if in_flight():
        return None  # an observed resource method is sending it (or a nested SDK call)
    try:
        endpoint = model_endpoint(type(client)._lk_endpoints, options)
        return None if endpoint is None else HttpCall(client, endpoint, options, bool(kwargs.get("stream")))
    except Exception:
        logger.debug("latencykit: could not set up recording for a request; sending it as given", exc_info=True)
        return None


def sync_request(self: Any, cast_to: Any, options: Any, *args: Any, **kwargs: Any) -> Any:
    """The SDK's ``request()``, recording model calls that no observed method sent."""
    base = type(self)._lk_sdk_base.request
    call = _call_for(self, options, kwargs)
    if call is None:
        return base(self, cast_to, options, *args, **kwargs)
    try:
        with sending(call.timer):
            result = base(self, cast_to, call.options, *args, **kwargs)
    except BaseException as exc:
        call.timer.fail(exc)
        raise
    return call.observe(result)


async def async_request(self: Any, cast_to: Any, options: Any, *args: Any, **kwargs: Any) -> Any:
    """Async twin of `sync_request`."""
    base = type(self)._lk_sdk_base.request
    call = _call_for(self, options, kwargs)
    if call is None:
        return await base(self, cast_to, options, *args, **kwargs)
    try:
        with sending(call.timer):
            result = await base(self, cast_to, call.options, *args, **kwargs)
    except BaseException as exc:
        call.timer.fail(exc)
        raise
    return call.observe(result)
