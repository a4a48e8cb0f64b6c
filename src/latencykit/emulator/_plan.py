"""The provider-neutral generation plan: what will be generated, decided before any sleeping.

A plan is a list of segments (thinking, text, tool call), each a tuple of pieces; one
piece is one generated token for timing and usage.  The plan is a pure function of
(seed, canonical request, overrides), which is why a streamed and a non-streamed call of
the same request carry the same text, ids and usage.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ._cache import CacheResult, Provider
from ._overrides import RequestOverrides
from ._reasoning import Reasoning, reasoning_for, shown_pieces
from ._state import ServerState
from ._text import count_tokens, make_id, request_key, words

__all__ = [
    "GenerationPlan", "Segment", "ToolSpec", "Unit", "build_plan", "group_units", "plan_request",
    "structured_output_schema", "tool_arguments",
]

SegmentKind = Literal["thinking", "text", "tool"]
StopKind = Literal["end", "length", "tool"]
ARGUMENT_FRAGMENT_CHARS = 10


@dataclass(frozen=True)
class ToolSpec:
    """The tool the emulator will call: its name and JSON schema."""

    name: str
    schema: Mapping[str, Any]


@dataclass(frozen=True)
class Segment:
    """One output block; `pieces` are its tokens (argument fragments for a tool call)."""

    kind: SegmentKind
    pieces: tuple[str, ...]
    name: str = ""
    call_id: str = ""
    shown: str = "streamed"
    """A thinking segment: ``streamed``, ``hidden`` or ``summarized`` (`_reasoning`); an empty
    piece is a token generated and billed but never streamed."""

    @property
    def text(self) -> str:
        """The whole block text (the full JSON arguments for a tool call)."""
        return "".join(self.pieces)


@dataclass(frozen=True)
class Unit:
    """One generated token, tagged with the index of the segment it belongs to."""

    segment: int
    text: str


@dataclass(frozen=True)
class GenerationPlan:
    """Everything a protocol formatter needs to render a response."""

    key: str
    model: str
    segments: tuple[Segment, ...]
    prompt_tokens: int
    cache: CacheResult
    stop: StopKind

    @property
    def units(self) -> tuple[Unit, ...]:
        """All tokens in generation order."""
        return tuple(Unit(i, p) for i, seg in enumerate(self.segments) for p in seg.pieces)

    @property
    def output_tokens(self) -> int:
        """Generated tokens, thinking and tool arguments included."""
        return sum(len(seg.pieces) for seg in self.segments)

    @property
    def reasoning_tokens(self) -> int:
        """Generated reasoning (thinking) tokens, streamed or not."""
        return sum(len(seg.pieces) for seg in self.segments if seg.kind == "thinking")

    @property
    def uncached_prompt_tokens(self) -> int:
        """Prompt tokens that must be prefilled."""
        return max(self.prompt_tokens - self.cache.cached_tokens, 0)


def tool_arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Deterministic arguments (or a structured-output document) valid for a JSON schema.

    Objects get every property, recursively; ``$ref`` into ``$defs`` / ``definitions``,
    ``anyOf`` / ``oneOf`` (first non-null branch), ``enum`` and ``const`` are followed, so
    a pydantic model's schema yields a document that model accepts.
    """
    value = _value(schema, schema, 1, 0)
    return value if isinstance(value, dict) else {}


def _value(spec: Any, root: Mapping[str, Any], n: int, depth: int) -> Any:
    if not isinstance(spec, Mapping) or depth > 8:
        return None
    ref = spec.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        return _value(target, root, n, depth + 1)
    if "const" in spec:
        return spec["const"]
    enum = spec.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = spec.get(key)
        if isinstance(options, list) and options:
            usable = [o for o in options if not (isinstance(o, Mapping) and o.get("type") == "null")]
            return _value((usable or options)[0], root, n, depth + 1)
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    props = spec.get("properties")
    if kind == "object" or (kind is None and isinstance(props, Mapping)):
        if not isinstance(props, Mapping):
            return {}
        return {name: _value(sub, root, i, depth + 1) for i, (name, sub) in enumerate(props.items(), start=1)}
    if kind == "array":
        return [_value(spec.get("items"), root, n, depth + 1)]
    if kind == "string":
        return f"value-{n}"
    if kind in ("integer", "number"):
        return n
    if kind == "boolean":
        return True
    return None


def structured_output_schema(fmt: Any) -> Mapping[str, Any] | None:
    """The JSON schema a request's structured-output format asks for, if any.

    Accepts OpenAI chat ``response_format`` (``{"type": "json_schema", "json_schema":
    {"schema": ...}}`` or ``{"type": "json_object"}``), Responses ``text.format`` and
    Anthropic ``output_config.format`` (``{"type": "json_schema", "schema": ...}``).
    """
    if not isinstance(fmt, Mapping):
        return None
    if fmt.get("type") == "json_object":
        return {"type": "object", "properties": {"answer": {"type": "string"}}}
    if fmt.get("type") != "json_schema":
        return None
    inner = fmt.get("json_schema")
    schema = inner.get("schema") if isinstance(inner, Mapping) else fmt.get("schema")
    return schema if isinstance(schema, Mapping) else {}


def _fragments(text: str) -> tuple[str, ...]:
    return tuple(text[i : i + ARGUMENT_FRAGMENT_CHARS] for i in range(0, len(text), ARGUMENT_FRAGMENT_CHARS))


def build_plan(
    *,
    seed: int,
    key: str,
    model: str,
    budget: int,
    capped: bool,
    prompt_tokens: int,
    cache: CacheResult,
    thinking: bool = False,
    tool: ToolSpec | None = None,
    tool_call_id: str = "",
    text_before_tool: int = 0,
    json_schema: Mapping[str, Any] | None = None,
    reasoning: Reasoning | None = None,
    cap: int | None = None,
) -> GenerationPlan:
    """Lay out the segments for `budget` generated tokens (tool calls and JSON ignore the budget).

    ``reasoning`` with a token count puts that many reasoning tokens before the answer (they
    count against ``cap`` first, as max_completion_tokens counts them); without a count, and
    with ``thinking``, half the budget thinks (Anthropic's default here).
    """
    segments: list[Segment] = []
    if reasoning is not None and reasoning.tokens is not None:
        think = reasoning.tokens if cap is None else min(reasoning.tokens, max(cap, 0))
        if think:
            pieces = shown_pieces(words(seed, key, "thinking", think), reasoning.shown)
            segments.append(Segment("thinking", pieces, shown=reasoning.shown))
        if cap is not None and think + budget > cap:
            budget, capped = max(cap - think, 0), True
        thinking = False
    if tool is None and json_schema is not None:
        document = json.dumps(tool_arguments(json_schema))
        segments.append(Segment("text", _fragments(document)))
        return GenerationPlan(key, model, tuple(segments), prompt_tokens, cache, "end")
    if tool is not None:
        lead = min(text_before_tool, budget)
        if lead:
            segments.append(Segment("text", words(seed, key, "text", lead)))
        args = json.dumps(tool_arguments(tool.schema))
        segments.append(Segment("tool", _fragments(args), name=tool.name, call_id=tool_call_id))
        stop: StopKind = "tool"
    else:
        think = budget // 2 if thinking else 0
        if think:
            shown = reasoning.shown if reasoning is not None else "streamed"
            pieces = shown_pieces(words(seed, key, "thinking", think), shown)
            segments.append(Segment("thinking", pieces, shown=shown))
        if budget - think:
            segments.append(Segment("text", words(seed, key, "text", budget - think)))
        stop = "length" if capped else "end"
    return GenerationPlan(key, model, tuple(segments), prompt_tokens, cache, stop)


def output_budget(default: int, override: int | None, cap: int | None) -> tuple[int, bool]:
    """(tokens to generate, whether the request's cap cut them short)."""
    wanted = override if override is not None else default
    if cap is not None and cap < wanted:
        return max(cap, 0), True
    return wanted, False


def group_units(units: Sequence[Unit]) -> list[tuple[int, str]]:
    """Merge consecutive units of one segment, so a chunk renders one delta per block."""
    groups: list[tuple[int, str]] = []
    for unit in units:
        if groups and groups[-1][0] == unit.segment:
            groups[-1] = (unit.segment, groups[-1][1] + unit.text)
        else:
            groups.append((unit.segment, unit.text))
    return groups


def plan_request(
    provider: Provider,
    body: Mapping[str, Any],
    overrides: RequestOverrides,
    state: ServerState,
    *,
    cap: int | None,
    tool: ToolSpec | None,
    tool_id_prefix: str,
    text_before_tool: int = 0,
    thinking: bool = False,
    json_schema: Mapping[str, Any] | None = None,
) -> GenerationPlan:
    """The steps every protocol shares: hash, count, budget, ask the cache model, lay out."""
    key = request_key(body)
    prompt_tokens = count_tokens(body)
    reasoning = reasoning_for(
        provider, body, overrides.reasoning, overrides.reasoning_tokens, state.timing.reasoning_tokens
    )
    # OpenAI's reasoning counts against max_completion_tokens (cap applied in build_plan);
    # Anthropic's thinking counts against max_tokens the same way.
    split_cap = reasoning is not None and reasoning.tokens is not None
    budget, capped = output_budget(state.timing.output_tokens, overrides.output_tokens, None if split_cap else cap)
    return build_plan(
        seed=state.seed, key=key, model=str(body["model"]), budget=budget, capped=capped,
        prompt_tokens=prompt_tokens, cache=state.cache_model.lookup(provider, body, prompt_tokens),
        thinking=thinking or (reasoning is not None and reasoning.tokens is None), tool=tool,
        tool_call_id=tool_id_prefix + make_id(state.seed, key, tool_id_prefix, 24),
        text_before_tool=text_before_tool, json_schema=json_schema, reasoning=reasoning,
        cap=cap if split_cap else None,
    )  # fmt: skip
