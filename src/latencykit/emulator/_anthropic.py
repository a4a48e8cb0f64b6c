"""Anthropic Messages API (`POST /v1/messages`): request validation and event rendering.

Stream shape follows the modern recordings (anthropic-stream-modern-basic.yaml):
`message_start` (usage with `output_tokens: 1`), `content_block_start` of the first
block and a `ping` form the preamble; deltas follow at token times; `message_delta`
carries cumulative usage, then `message_stop`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._cache import Provider
from ._errors import BadRequest, anthropic_error
from ._overrides import RequestOverrides
from ._plan import structured_output_schema, GenerationPlan, Segment, ToolSpec, Unit, group_units, plan_request
from ._state import ServerState
from ._stream import Prepared, sse
from ._text import make_id

__all__ = ["API"]

_STOP_REASONS = {"end": "end_turn", "length": "max_tokens", "tool": "tool_use"}
TEXT_BEFORE_TOOL = 3


def _event(data: dict[str, Any]) -> bytes:
    return sse(data, event=str(data["type"]))


class _Formatter:
    """Renders a plan as Anthropic SSE events or a Message body."""

    def __init__(self, plan: GenerationPlan, message_id: str, signature: str) -> None:
        self.plan = plan
        self.message_id = message_id
        self.signature = signature
        self._open: int | None = None

    def _usage_start(self) -> dict[str, Any]:
        cache = self.plan.cache
        return {
            "input_tokens": self.plan.prompt_tokens - cache.cached_tokens - cache.written_tokens,
            "cache_creation_input_tokens": cache.written_tokens,
            "cache_read_input_tokens": cache.cached_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": cache.written_tokens - cache.written_1h_tokens,
                "ephemeral_1h_input_tokens": cache.written_1h_tokens,
            },
            "output_tokens": 1,
            "service_tier": "standard",
        }

    def _block(self, seg: Segment, final: bool) -> dict[str, Any]:
        if seg.kind == "thinking":
            return {"type": "thinking", "thinking": seg.text if final else "", "signature": self.signature if final else ""}
        if seg.kind == "tool":
            return {"type": "tool_use", "id": seg.call_id, "name": seg.name, "input": json.loads(seg.text) if final else {}}
        return {"type": "text", "text": seg.text if final else ""}

    def _start(self, index: int) -> list[bytes]:
        self._open = index
        seg = self.plan.segments[index]
        out = [_event({"type": "content_block_start", "index": index, "content_block": self._block(seg, final=False)})]
        if seg.kind == "tool":
            # The real API opens every tool_use block with an empty partial_json.
            out.append(self._delta(index, ""))
        return out

    def _stop(self) -> list[bytes]:
        if self._open is None:
            return []
        index, self._open = self._open, None
        out = []
        if self.plan.segments[index].kind == "thinking":
            delta = {"type": "signature_delta", "signature": self.signature}
            out.append(_event({"type": "content_block_delta", "index": index, "delta": delta}))
        out.append(_event({"type": "content_block_stop", "index": index}))
        return out

    def _delta(self, index: int, text: str) -> bytes:
        kind = self.plan.segments[index].kind
        if kind == "thinking":
            delta = {"type": "thinking_delta", "thinking": text}
        elif kind == "tool":
            delta = {"type": "input_json_delta", "partial_json": text}
        else:
            delta = {"type": "text_delta", "text": text}
        return _event({"type": "content_block_delta", "index": index, "delta": delta})

    def preamble(self) -> list[bytes]:
        message: dict[str, Any] = {
            "id": self.message_id, "type": "message", "role": "assistant", "model": self.plan.model,
            "content": [], "stop_reason": None, "stop_sequence": None, "usage": self._usage_start(),
        }  # fmt: skip
        out = [_event({"type": "message_start", "message": message})]
        if self.plan.segments:
            out += self._start(0)
        out.append(sse({"type": "ping"}, event="ping"))
        return out

    def chunk(self, units: Sequence[Unit]) -> list[bytes]:
        out: list[bytes] = []
        for seg_index, text in group_units(units):
            if seg_index != self._open:
                out += self._stop() + self._start(seg_index)
            if text:  # (thinking generated but not streamed has no delta)
                out.append(self._delta(seg_index, text))
        return out

    def finish(self) -> list[bytes]:
        cache = self.plan.cache
        usage = {
            "input_tokens": self.plan.prompt_tokens - cache.cached_tokens - cache.written_tokens,
            "cache_creation_input_tokens": cache.written_tokens,
            "cache_read_input_tokens": cache.cached_tokens,
            "output_tokens": self.plan.output_tokens,
        }
        delta = {"stop_reason": _STOP_REASONS[self.plan.stop], "stop_sequence": None, "stop_details": None}
        return self._stop() + [
            _event({"type": "message_delta", "delta": delta, "usage": usage}),
            _event({"type": "message_stop"}),
        ]

    def error(self) -> list[bytes]:
        return [sse(anthropic_error(529), event="error")]

    def body(self) -> dict[str, Any]:
        usage = self._usage_start()
        usage["output_tokens"] = self.plan.output_tokens
        return {
            "id": self.message_id, "type": "message", "role": "assistant", "model": self.plan.model,
            "content": [self._block(seg, final=True) for seg in self.plan.segments],
            "stop_reason": _STOP_REASONS[self.plan.stop], "stop_sequence": None, "stop_details": None,
            "usage": usage,
        }  # fmt: skip



def _forced_tool(body: Mapping[str, Any], overrides: RequestOverrides) -> ToolSpec | None:
    tools = body.get("tools")
    if not isinstance(tools, list) or not tools:
        return None
    choice = body.get("tool_choice")
    kind = choice.get("type") if isinstance(choice, Mapping) else None
    if not (overrides.tool_call or kind in ("any", "tool")):
        return None
    named = choice.get("name") if isinstance(choice, Mapping) and kind == "tool" else None
    for tool in tools:
        if isinstance(tool, Mapping) and (named is None or tool.get("name") == named):
            schema = tool.get("input_schema")
            return ToolSpec(str(tool.get("name", "tool")), schema if isinstance(schema, Mapping) else {})
    raise BadRequest(f"tool_choice names tool {named!r}, which is not in tools")


class AnthropicAPI:
    """The Messages API as the server sees it."""

    name: Provider = "anthropic"
    request_id_header = "request-id"
    midstream_status = 529

    def error_body(self, status: int, message: str | None = None) -> dict[str, Any]:
        return anthropic_error(status, message)

    def prepare(self, body: Mapping[str, Any], overrides: RequestOverrides, state: ServerState) -> Prepared:
        for name, kind in (("model", str), ("max_tokens", int), ("messages", list)):
            if not isinstance(body.get(name), kind):
                raise BadRequest(f"{name}: Field required (got {body.get(name)!r})")
        # The real API rejects these shapes with a 400; the prompt-cache model assumes them.
        system = body.get("system")
        if system is not None and not isinstance(system, (str, list)):
            raise BadRequest(f"system: Input should be a valid string or list (got {system!r})")
        for i, message in enumerate(body["messages"]):
            content = message.get("content") if isinstance(message, Mapping) else None
            if not isinstance(content, (str, list)):
                raise BadRequest(f"messages.{i}.content: Input should be a valid string or list (got {content!r})")
        thinking = body.get("thinking")
        plan = plan_request(
            self.name, body, overrides, state, cap=body["max_tokens"], tool=_forced_tool(body, overrides),
            tool_id_prefix="toolu_", text_before_tool=TEXT_BEFORE_TOOL,
            thinking=isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive"),
            json_schema=structured_output_schema(_get(body, "output_config", "format")),
        )  # fmt: skip
        seed, key = state.seed, plan.key
        signature = base64.b64encode(make_id(seed, key, "signature", 48).encode()).decode()
        formatter = _Formatter(plan, "msg_" + make_id(seed, key, "msg", 24), signature)
        return Prepared(plan, formatter, stream=body.get("stream") is True)


API = AnthropicAPI()


def _get(body: Mapping[str, Any], *path: str) -> Any:
    value: Any = body
    for part in path:
        value = value.get(part) if isinstance(value, Mapping) else None
    return value
