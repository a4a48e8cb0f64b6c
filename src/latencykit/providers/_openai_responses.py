"""Responses: the event tap, the accumulator, and the observed ``responses`` resources.

``responses.create(stream=False)`` is sent as a stream and the ``Response`` of its terminal
event returned. ``responses.stream()`` goes through the SDK's own helper, which calls the
observed ``create``; ``responses.parse()`` is sent as the caller wrote it (see
`PARSE_NOT_STREAMED`).
"""

from __future__ import annotations

from typing import Any, Optional

import openai
from openai.resources.responses import AsyncResponses, Responses

from ..core._diagnosis import read_openai_diagnostics
from ..core._errors import EndedEarly, PartialOutput
from ..core._record import CallRecord
from ..core._timing import REASONING_SUMMARY, REASONING_TEXT, CallTimer
from ..core._usage import apply_openai_responses_usage
from ._calls import apassthrough, passthrough, prepare, raw_response_requested
from ._managers import wrap_async_manager, wrap_manager
from ._openai_call import OpenAIApi, acreate_call, aenter_helper, as_helper, begin_call, create_call, enter_helper
from ._openai_call import aguarded, guarded
from ._tap import Tap

__all__ = ["ResponsesTap", "ResponseAccumulator", "RESPONSES", "ObservedResponses", "AsyncObservedResponses", "on_response"]


# Responses events whose ``delta`` is generated output, on any channel.
_RESPONSE_TOKEN_EVENTS = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
        "response.function_call_arguments.delta",
        "response.custom_tool_call_input.delta",
        "response.code_interpreter_call_code.delta",
        "response.mcp_call_arguments.delta",
        "response.audio.transcript.delta",
    }
)
# The reasoning channel: the reasoning itself (open-weight models served with a reasoning
# parser) or a summary of it (OpenAI's reasoning models with ``reasoning.summary``).
_REASONING_EVENTS = {
    "response.reasoning_text.delta": REASONING_TEXT,
    "response.reasoning_summary_text.delta": REASONING_SUMMARY,
}
_RESPONSE_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})


class ResponsesTap(Tap):
    """Marks token deltas; reads model/id from ``response.created`` and usage from the terminal event.

    An ``error`` event or ``response.failed`` is a failure, not a completion: the SDK yields
    them as events, so the stream shell raises the matching ``openai.APIError`` at its end.
    """

    __slots__ = ("error_body", "final")
    connection_error = openai.APIConnectionError
    api_error = openai.APIError

    def __init__(self, timer: CallTimer) -> None:
        super().__init__(timer)
        self.error_body: Optional[dict[str, Any]] = None
        self.final: Any = None

    def new_attempt(self) -> None:
        """Forget what an abandoned attempt delivered (and any failure it reported)."""
        super().new_attempt()
        self.error_body = None
        self.final = None

    def stream_error(self, request: Any) -> Optional[BaseException]:
        """``openai.APIError`` for an ``error`` event / ``response.failed``, if one came."""
        if self.error_body is None:
            return None
        message = str(self.error_body.get("message") or "the response failed")
        return openai.APIError(message, request, body=self.error_body)

    def partial(self) -> PartialOutput:
        """Output text and function-call arguments so far; the response if a terminal event came."""
        out = super().partial()
        out.message = self.final
        return out

    def __call__(self, event: Any) -> bool:
        timer = self.timer
        kind = event.type
        if kind in _RESPONSE_TOKEN_EVENTS:
            delta = event.delta
            if delta:
                if kind == "response.output_text.delta":
                    self.texts.append(delta)
                elif kind == "response.function_call_arguments.delta":
                    self.tool_input(event.item_id).append(delta)
                reasoning = _REASONING_EVENTS.get(kind)
                if reasoning:
                    timer.reasoning(reasoning)
                else:
                    timer.token()
            else:
                timer.event(False)
            return True
        timer.event(False)
        if kind == "response.created":
            rec = timer.record
            rec.response_model = event.response.model
            rec.response_id = event.response.id
        elif kind in _RESPONSE_TERMINAL:
            response = event.response
            self.final = response
            self.usage = response.usage
            on_response(timer.record, response)
            if kind == "response.failed":
                err = getattr(response, "error", None)
                self.error_body = self.error_body or {
                    "type": "response.failed",
                    "code": getattr(err, "code", None),
                    "message": getattr(err, "message", None),
                }
            else:
                timer.terminal()
        elif kind == "error":
            code = getattr(event, "code", None)
            timer.record.error_type = code or "error"
            self.error_body = {"type": "error", "code": code, "message": getattr(event, "message", None)}
        return True


def on_response(rec: CallRecord, response: Any) -> None:
    rec.response_model = getattr(response, "model", None)
    rec.response_id = getattr(response, "id", None)
    apply_openai_responses_usage(rec, getattr(response, "usage", None))
    read_openai_diagnostics(rec, response)
    status = getattr(response, "status", None)
    details = getattr(response, "incomplete_details", None)
    reason = getattr(details, "reason", None) if details is not None else None
    finish: Optional[str] = reason or status
    if finish:
        rec.finish_reasons = (finish,)
    if status == "failed":
        err = getattr(response, "error", None)
        rec.error_type = getattr(err, "code", None) or "response.failed"


class ResponseAccumulator:
    """Keeps the ``Response`` that the terminal event carries."""

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self._final: Any = None

    def feed(self, event: Any) -> None:
        """Keep the terminal event's response."""
        if event.type in _RESPONSE_TERMINAL:
            self._final = event.response

    def snapshot(self) -> Any:
        """The response of the terminal event, if one came."""
        return self._final

    def result(self, complete: bool) -> Any:
        """The final ``Response``; raises if no terminal event arrived."""
        if self._final is None or not complete:
            raise EndedEarly("the stream ended before response.completed")
        return self._final


def _responses_request(kwargs: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    return {**kwargs, "stream": True}, True


RESPONSES = OpenAIApi(
    "responses",
    _responses_request,
    lambda timer, hide: ResponsesTap(timer),
    ResponseAccumulator,
    on_response,
    lambda client: client.responses,
)


# The SDK's streamed helper raises on `response.incomplete`, where a plain parse() returns
# the incomplete response; until that is reconciled, parse() is sent as the caller wrote it.
PARSE_NOT_STREAMED = "responses.parse is sent unstreamed (its streamed helper raises on incomplete responses)"


class ObservedResponses(Responses):
    """``client.responses`` that always streams and times every call."""

    def create(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return super().create(**kwargs)
        return create_call(RESPONSES, self, Responses.create, kwargs)

    def stream(self, **kwargs: Any) -> Any:
        return wrap_manager(super().stream(**as_helper(kwargs, "responses.stream")), enter_helper)

    def parse(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return super().parse(**kwargs)
        kwargs, finish = prepare(self._client, "responses", kwargs)
        timer = begin_call(self._client, "responses", "parse", kwargs, PARSE_NOT_STREAMED, finish)
        return passthrough(timer, guarded(self._client, finish, timer, super().parse, kwargs), on_response)


class AsyncObservedResponses(AsyncResponses):
    """Async ``client.responses`` that always streams and times every call."""

    async def create(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return await super().create(**kwargs)
        return await acreate_call(RESPONSES, self, AsyncResponses.create, kwargs)

    def stream(self, **kwargs: Any) -> Any:
        return wrap_async_manager(super().stream(**as_helper(kwargs, "responses.stream")), aenter_helper)

    async def parse(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return await super().parse(**kwargs)
        kwargs, finish = prepare(self._client, "responses", kwargs)
        timer = begin_call(self._client, "responses", "parse", kwargs, PARSE_NOT_STREAMED, finish)
        return await apassthrough(timer, aguarded(self._client, finish, timer, super().parse, kwargs), on_response)
