"""OpenAI Chat Completions (`POST /v1/chat/completions`): validation and chunk rendering.

Shapes follow openai-stream-include-usage.yaml and openai-nonstream-cache-hit.yaml: a
role-only first chunk in the preamble; `"usage": null` on every chunk plus a final
`choices: []` usage chunk only when `stream_options.include_usage` is true; `data: [DONE]`.
With `stream_options.continuous_usage_stats` as well (vLLM's option), every chunk carries the
cumulative usage so far, so a client can count the tokens in each chunk.
``x-emulator-wire`` asks for the shapes other OpenAI-compatible servers send (Azure's
prompt-filter object first, no ``finish_reason``, usage unasked, an error after the finish,
empty partial-UTF-8 deltas); see ``_overrides.WIRE_SHAPES``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._cache import Provider
from ._errors import BadRequest, openai_error
from ._overrides import RequestOverrides
from ._plan import structured_output_schema, GenerationPlan, ToolSpec, Unit, group_units, plan_request
from ._state import ServerState
from ._stream import Prepared, sse
from ._text import make_hex_id, make_id

__all__ = ["API", "chat_usage"]

_FINISH = {"end": "stop", "length": "length", "tool": "tool_calls"}


def chat_usage(plan: GenerationPlan) -> dict[str, Any]:
    """Chat Completions usage; `prompt_tokens` includes cached tokens, as in the real API."""
    details: dict[str, Any] = {"cached_tokens": plan.cache.cached_tokens, "audio_tokens": 0}
    if plan.cache.written_tokens or plan.cache.reports_writes:
        details["cache_write_tokens"] = plan.cache.written_tokens
    return {
        "prompt_tokens": plan.prompt_tokens,
        "completion_tokens": plan.output_tokens,
        "total_tokens": plan.prompt_tokens + plan.output_tokens,
        "prompt_tokens_details": details,
        "completion_tokens_details": {
            "reasoning_tokens": plan.reasoning_tokens, "audio_tokens": 0, "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }  # fmt: skip


def _reasoning_delta(shown: str, text: str) -> dict[str, Any]:
    """A reasoning delta as OpenAI-compatible servers stream it: DeepSeek's / vLLM's
    ``reasoning_content`` for the reasoning itself, OpenRouter's ``reasoning_details`` summary item
    for a summary."""
    if shown == "summarized":
        return {"content": None, "reasoning_details": [{"type": "reasoning.summary", "summary": text, "format": "unknown", "index": 0}]}
    return {"content": None, "reasoning_content": text}


class _Formatter:
    """Renders a plan as chat.completion.chunk events or a chat.completion body."""

    def __init__(
        self, plan: GenerationPlan, completion_id: str, created: int, fingerprint: str, include_usage: bool,
        continuous_usage: bool = False, wire: frozenset[str] = frozenset(),
    ) -> None:
        self.wire = wire
        self._held = ""
        self._texts = 0
        self.plan = plan
        self.id = completion_id
        self.created = created
        self.fingerprint = fingerprint
        self.include_usage = include_usage
        self.continuous_usage = include_usage and continuous_usage
        self._generated = 0
        self._opened: set[int] = set()

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return self._frame([choice], self._running_usage() if self.continuous_usage else None)

    def _running_usage(self) -> dict[str, Any]:
        prompt = self.plan.prompt_tokens
        return {"prompt_tokens": prompt, "completion_tokens": self._generated, "total_tokens": prompt + self._generated}

    def _frame(self, choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> bytes:
        data: dict[str, Any] = {
            "id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.plan.model,
            "system_fingerprint": self.fingerprint, "service_tier": "default", "choices": choices,
        }  # fmt: skip
        if self.include_usage:
            data["usage"] = usage
        return sse(data)

    def _has_text(self) -> bool:
        return any(seg.kind == "text" for seg in self.plan.segments)

    def preamble(self) -> list[bytes]:
        # A tool-only answer starts with content null, so the reassembled stream matches the JSON body.
        content: str | None = "" if self._has_text() or not self.plan.segments else None
        out = [self._chunk({"role": "assistant", "content": content, "refusal": None})]
        if "azure-filter" in self.wire:
            azure = {
                "choices": [], "created": 0, "id": "", "model": "", "object": "",
                "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {"hate": {"filtered": False, "severity": "safe"}}}],
            }  # fmt: skip
            out.insert(0, sse(azure))
        return out

    def chunk(self, units: Sequence[Unit]) -> list[bytes]:
        self._generated += len(units)
        out: list[bytes] = []
        for seg_index, text in group_units(units):
            seg = self.plan.segments[seg_index]
            if seg.kind == "thinking":
                if text:  # reasoning generated but not streamed sends nothing
                    out.append(self._chunk(_reasoning_delta(seg.shown, text)))
                continue
            if seg.kind != "tool":
                out.append(self._chunk({"content": self._text(text)}))
                continue
            call = sum(1 for s in self.plan.segments[:seg_index] if s.kind == "tool")
            if seg_index not in self._opened:
                self._opened.add(seg_index)
                head = {"index": call, "id": seg.call_id, "type": "function", "function": {"name": seg.name, "arguments": ""}}
                out.append(self._chunk({"tool_calls": [head]}))
            out.append(self._chunk({"tool_calls": [{"index": call, "function": {"arguments": text}}]}))
        return out

    def _text(self, text: str) -> str:
        """The delta text; with ``empty-deltas`` every other one is held back for the next."""
        if "empty-deltas" not in self.wire:
            return text
        self._texts += 1
        if self._texts % 2:
            self._held += text
            return ""
        text, self._held = self._held + text, ""
        return text

    def finish(self) -> list[bytes]:
        out = [self._chunk({"content": self._held})] if self._held else []
        self._held = ""
        finish = None if "no-finish-reason" in self.wire else _FINISH[self.plan.stop]
        if "usage-unasked" in self.wire:
            data = json.loads(self._chunk({}, finish)[len(b"data: "):])
            data["usage"] = chat_usage(self.plan)
            out.append(sse(data))
        else:
            if finish is not None:
                out.append(self._chunk({}, finish))
            if self.include_usage:
                out.append(self._frame([], chat_usage(self.plan)))
        out.append(sse(openai_error(500)) if "error-after-finish" in self.wire else sse("[DONE]"))
        return out

    def error(self) -> list[bytes]:
        return [sse(openai_error(500))]

    def body(self) -> dict[str, Any]:
        text = "".join(seg.text for seg in self.plan.segments if seg.kind == "text")
        message: dict[str, Any] = {
            "role": "assistant",
            "content": text if self._has_text() or not self.plan.segments else None,
            "refusal": None,
            "annotations": [],
        }
        thought = "".join(seg.text for seg in self.plan.segments if seg.kind == "thinking" and seg.shown == "streamed")
        if thought:
            message["reasoning_content"] = thought
        calls = [
            {"id": seg.call_id, "type": "function", "function": {"name": seg.name, "arguments": seg.text}}
            for seg in self.plan.segments
            if seg.kind == "tool"
        ]
        if calls:
            message["tool_calls"] = calls
        return {
            "id": self.id, "object": "chat.completion", "created": self.created, "model": self.plan.model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": _FINISH[self.plan.stop]}],
            "usage": chat_usage(self.plan), "service_tier": "default", "system_fingerprint": self.fingerprint,
        }  # fmt: skip



def forced_function(
    tools: Any, choice: Any, overrides: RequestOverrides, name_of: Any, schema_of: Any
) -> ToolSpec | None:
    """The function an OpenAI request forces ("required", a named function, or the header)."""
    if not isinstance(tools, list) or not tools:
        return None
    named = name_of(choice) if isinstance(choice, Mapping) and choice.get("type") == "function" else None
    if not (overrides.tool_call or choice == "required" or named is not None):
        return None
    for tool in tools:
        if isinstance(tool, Mapping) and (named is None or name_of(tool) == named):
            schema = schema_of(tool)
            return ToolSpec(str(name_of(tool) or "tool"), schema if isinstance(schema, Mapping) else {})
    raise BadRequest(f"tool_choice names function {named!r}, which is not in tools")


def _fn(value: Mapping[str, Any]) -> Mapping[str, Any]:
    fn = value.get("function")
    return fn if isinstance(fn, Mapping) else {}


class ChatAPI:
    """The Chat Completions API as the server sees it."""

    name: Provider = "openai-chat"
    request_id_header = "x-request-id"
    midstream_status = 500

    def error_body(self, status: int, message: str | None = None) -> dict[str, Any]:
        return openai_error(status, message)

    def prepare(self, body: Mapping[str, Any], overrides: RequestOverrides, state: ServerState) -> Prepared:
        for name, kind in (("model", str), ("messages", list)):
            if not isinstance(body.get(name), kind):
                raise BadRequest(f"Missing required parameter: '{name}'.")
        if body.get("n") not in (None, 1):
            raise BadRequest(f"n: only n=1 is supported by the emulator, got {body.get('n')!r}")
        cap = body.get("max_completion_tokens", body.get("max_tokens"))
        if cap is not None and not isinstance(cap, int):
            raise BadRequest(f"max_completion_tokens must be an integer, got {cap!r}")
        tool = forced_function(
            body.get("tools"), body.get("tool_choice"), overrides, lambda v: _fn(v).get("name"),
            lambda v: _fn(v).get("parameters"),
        )  # fmt: skip
        plan = plan_request(
            self.name, body, overrides, state, cap=cap, tool=tool, tool_id_prefix="call_",
            json_schema=structured_output_schema(body.get("response_format")),
        )  # fmt: skip
        seed, key = state.seed, plan.key
        options = body.get("stream_options")
        include_usage = isinstance(options, Mapping) and options.get("include_usage") is True
        continuous = isinstance(options, Mapping) and options.get("continuous_usage_stats") is True
        formatter = _Formatter(
            plan, "chatcmpl-" + make_id(seed, key, "chatcmpl", 29), state.timestamp(),
            "fp_" + make_hex_id(seed, "", "fingerprint", 10), include_usage, continuous, overrides.wire,
        )  # fmt: skip
        return Prepared(plan, formatter, stream=body.get("stream") is True)


API = ChatAPI()
