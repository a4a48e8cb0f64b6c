"""OpenAI Responses API (`POST /v1/responses`): validation and event rendering.

Sequence follows openai-responses-stream-basic.yaml: `response.created`,
`response.in_progress`, `response.output_item.added` and `response.content_part.added`
form the preamble; `response.output_text.delta` (with `logprobs: []` and an
`obfuscation` pad) at token times; then the `.done` events and `response.completed`
(`response.incomplete` when `max_output_tokens` cut the answer, as the real API does).
`sequence_number` is contiguous from 0.  The non-streaming body is the same Response
object the terminal event carries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ._cache import Provider
from ._errors import BadRequest, openai_error
from ._openai_cache_rules import response_fields, write_details
from ._openai_chat import forced_function
from ._overrides import RequestOverrides
from ._plan import structured_output_schema, GenerationPlan, Unit, group_units, plan_request
from ._state import ServerState
from ._stream import Prepared, sse
from ._text import make_hex_id, make_id

__all__ = ["API"]

OBFUSCATION_PAD = 16


class _Formatter:
    """Renders a plan as Responses stream events or a Response body."""

    def __init__(self, plan: GenerationPlan, body: Mapping[str, Any], state: ServerState) -> None:
        self.plan = plan
        self.request = body
        self.state = state
        self.seed = state.seed
        self.id = "resp_" + make_hex_id(state.seed, plan.key, "resp", 50)
        self.cache_fields = response_fields(state.cache_model, body, plan.cache, self.id)  # GPT-5.6+ options and diagnostics
        self.created = state.timestamp()
        self._seq = 0
        self._open: int | None = None

    def _event(self, data: dict[str, Any]) -> bytes:
        data["sequence_number"] = self._seq
        self._seq += 1
        return sse(data, event=str(data["type"]))

    def _item_id(self, index: int) -> str:
        prefix = {"tool": "fc_", "thinking": "rs_"}.get(self.plan.segments[index].kind, "msg_")
        return prefix + make_hex_id(self.seed, self.plan.key, f"item{index}", 50)

    def _item(self, index: int, final: bool) -> dict[str, Any]:
        seg = self.plan.segments[index]
        status = "completed" if final else "in_progress"
        if seg.kind == "thinking":  # a reasoning item: empty when hidden, its summary or its text
            item: dict[str, Any] = {"id": self._item_id(index), "type": "reasoning", "summary": []}
            if final and seg.shown == "summarized":
                item["summary"] = [{"type": "summary_text", "text": seg.text}]
            if seg.shown == "streamed":
                item["content"] = [{"type": "reasoning_text", "text": seg.text}] if final else []
            return item
        if seg.kind == "tool":
            return {
                "id": self._item_id(index), "type": "function_call", "status": status,
                "arguments": seg.text if final else "", "call_id": seg.call_id, "name": seg.name,
            }  # fmt: skip
        content = [_part(seg.text)] if final else []
        return {"id": self._item_id(index), "type": "message", "status": status, "content": content, "role": "assistant"}

    def _response(self, status: str) -> dict[str, Any]:
        req, plan, done = self.request, self.plan, status != "in_progress"
        incomplete = status == "incomplete"
        usage = None
        if done:
            usage = {
                "input_tokens": plan.prompt_tokens,
                "input_tokens_details": {
                    "cached_tokens": plan.cache.cached_tokens, "cache_write_tokens": plan.cache.written_tokens,
                    **write_details(plan.cache),
                },
                "output_tokens": plan.output_tokens,
                "output_tokens_details": {"reasoning_tokens": plan.reasoning_tokens},
                "total_tokens": plan.prompt_tokens + plan.output_tokens,
            }  # fmt: skip
        return {
            "id": self.id, "object": "response", "created_at": self.created, "status": status,
            "background": False, "completed_at": self.state.timestamp() if status == "completed" else None,
            "error": None, "frequency_penalty": 0.0,
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "instructions": req.get("instructions"), "max_output_tokens": req.get("max_output_tokens"),
            "max_tool_calls": None, "model": plan.model,
            "output": [self._item(i, final=True) for i in range(len(plan.segments))] if done else [],
            "parallel_tool_calls": True, "presence_penalty": 0.0,
            "previous_response_id": req.get("previous_response_id"),
            "prompt_cache_key": req.get("prompt_cache_key"), "prompt_cache_retention": None,
            "reasoning": _reasoning(req), "safety_identifier": None,
            "service_tier": "default", "store": True, "temperature": req.get("temperature", 1.0),
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": req.get("tool_choice", "auto"), "tools": [_tool(t) for t in req.get("tools") or []],
            "top_logprobs": 0, "top_p": req.get("top_p", 1.0), "truncation": "disabled",
            "usage": usage, "user": None, "metadata": req.get("metadata") or {}, **self.cache_fields,
        }  # fmt: skip

    def _open_item(self, index: int) -> list[bytes]:
        self._open = index
        out = [self._event({"type": "response.output_item.added", "item": self._item(index, False), "output_index": index})]
        seg = self.plan.segments[index]
        if seg.kind == "thinking":
            if seg.shown == "summarized":
                out.append(self._event({
                    "type": "response.reasoning_summary_part.added", "item_id": self._item_id(index),
                    "output_index": index, "part": {"type": "summary_text", "text": ""}, "summary_index": 0,
                }))  # fmt: skip
        elif seg.kind != "tool":
            out.append(self._event({
                "type": "response.content_part.added", "content_index": 0, "item_id": self._item_id(index),
                "output_index": index, "part": _part(""),
            }))  # fmt: skip
        return out

    def _close_item(self) -> list[bytes]:
        if self._open is None:
            return []
        index, self._open = self._open, None
        seg, item_id = self.plan.segments[index], self._item_id(index)
        out: list[bytes] = []
        common = {"item_id": item_id, "output_index": index}
        if seg.kind == "thinking":
            if seg.shown == "summarized":
                summary = {**common, "summary_index": 0}
                out.append(self._event({"type": "response.reasoning_summary_text.done", **summary, "text": seg.text}))
                part = {"type": "summary_text", "text": seg.text}
                out.append(self._event({"type": "response.reasoning_summary_part.done", **summary, "part": part}))
            elif seg.shown == "streamed":
                out.append(self._event({"type": "response.reasoning_text.done", "content_index": 0, **common, "text": seg.text}))
        elif seg.kind == "tool":
            out.append(self._event({"type": "response.function_call_arguments.done", **common, "arguments": seg.text, "name": seg.name}))
        else:
            out.append(self._event({"type": "response.output_text.done", "content_index": 0, **common, "logprobs": [], "text": seg.text}))
            out.append(self._event({"type": "response.content_part.done", "content_index": 0, **common, "part": _part(seg.text)}))
        out.append(self._event({"type": "response.output_item.done", "item": self._item(index, True), "output_index": index}))
        return out

    def _delta(self, index: int, text: str) -> bytes:
        seg, item_id = self.plan.segments[index], self._item_id(index)
        # The real API pads deltas to a constant size so lengths don't leak through encryption.
        pad = make_id(self.seed, self.plan.key, f"obf{self._seq}", max(OBFUSCATION_PAD - len(text), 1))
        if seg.kind == "tool":
            return self._event({
                "type": "response.function_call_arguments.delta", "delta": text, "item_id": item_id,
                "obfuscation": pad, "output_index": index,
            })  # fmt: skip
        if seg.kind == "thinking":
            if seg.shown == "summarized":
                return self._event({
                    "type": "response.reasoning_summary_text.delta", "delta": text, "item_id": item_id,
                    "obfuscation": pad, "output_index": index, "summary_index": 0,
                })  # fmt: skip
            return self._event({
                "type": "response.reasoning_text.delta", "content_index": 0, "delta": text, "item_id": item_id,
                "obfuscation": pad, "output_index": index,
            })  # fmt: skip
        return self._event({
            "type": "response.output_text.delta", "content_index": 0, "delta": text, "item_id": item_id,
            "logprobs": [], "obfuscation": pad, "output_index": index,
        })  # fmt: skip

    def preamble(self) -> list[bytes]:
        out = [
            self._event({"type": "response.created", "response": self._response("in_progress")}),
            self._event({"type": "response.in_progress", "response": self._response("in_progress")}),
        ]
        if self.plan.segments:
            out += self._open_item(0)
        return out

    def chunk(self, units: Sequence[Unit]) -> list[bytes]:
        out: list[bytes] = []
        for index, text in group_units(units):
            if index != self._open:
                out += self._close_item() + self._open_item(index)
            if text:  # (reasoning generated but not streamed has no delta)
                out.append(self._delta(index, text))
        return out

    def _final_status(self) -> str:
        return "incomplete" if self.plan.stop == "length" else "completed"

    def finish(self) -> list[bytes]:
        status = self._final_status()
        return self._close_item() + [self._event({"type": f"response.{status}", "response": self._response(status)})]

    def error(self) -> list[bytes]:
        err = openai_error(500)["error"]
        failed = self._response("failed")
        failed["error"] = {"code": "server_error", "message": err["message"]}
        return [
            self._event({"type": "error", "code": "server_error", "message": err["message"], "param": None}),
            self._event({"type": "response.failed", "response": failed}),
        ]

    def body(self) -> dict[str, Any]:
        return self._response(self._final_status())


def _reasoning(req: Mapping[str, Any]) -> dict[str, Any]:
    asked = req.get("reasoning")
    asked = asked if isinstance(asked, Mapping) else {}
    return {"effort": asked.get("effort"), "summary": asked.get("summary")}


def _part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def _tool(tool: Any) -> Any:
    if isinstance(tool, Mapping) and tool.get("type") == "function":
        return {"strict": True, "description": None, "parameters": None, **tool}
    return tool


class ResponsesAPI:
    """The Responses API as the server sees it."""

    name: Provider = "openai-responses"
    request_id_header = "x-request-id"
    midstream_status = 500

    def error_body(self, status: int, message: str | None = None) -> dict[str, Any]:
        return openai_error(status, message)

    def prepare(self, body: Mapping[str, Any], overrides: RequestOverrides, state: ServerState) -> Prepared:
        if not isinstance(body.get("model"), str):
            raise BadRequest("Missing required parameter: 'model'.")
        if not isinstance(body.get("input", ""), (str, list)):
            raise BadRequest(f"input must be a string or a list of items, got {body.get('input')!r}")
        cap = body.get("max_output_tokens")
        if cap is not None and not isinstance(cap, int):
            raise BadRequest(f"max_output_tokens must be an integer, got {cap!r}")
        tool = forced_function(
            body.get("tools"), body.get("tool_choice"), overrides, lambda v: v.get("name"), lambda v: v.get("parameters")
        )
        text = body.get("text")
        if isinstance(body.get("prompt_cache_options"), Mapping) and body["prompt_cache_options"].get("prewarm") is True:
            overrides = replace(overrides, output_tokens=0)  # prewarm: fill the cache, generate nothing
        plan = plan_request(
            self.name, body, overrides, state, cap=cap, tool=tool, tool_id_prefix="call_",
            json_schema=structured_output_schema(text.get("format") if isinstance(text, Mapping) else None),
        )  # fmt: skip
        return Prepared(plan, _Formatter(plan, body, state), stream=body.get("stream") is True)


API = ResponsesAPI()

