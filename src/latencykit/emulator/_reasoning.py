"""Reasoning models: which requests reason, how much, and what of it the stream shows.

Three kinds, as the real APIs have them (``docs/emulator.md``, "Reasoning models"):

- ``hidden`` — the reasoning is generated (and billed) but never streamed: OpenAI's o-series
  and GPT-5 on Chat Completions, and on Responses without a summary (an empty ``reasoning``
  item); Anthropic thinking with ``display: "omitted"`` (a thinking block with a signature only).
- ``streamed`` — every reasoning token is streamed: DeepSeek-style ``reasoning_content`` on
  Chat, ``response.reasoning_text.delta`` on Responses (open-weight models behind a reasoning
  parser), ``thinking_delta`` on Claude 3.7 Sonnet.
- ``summarized`` — the full reasoning is generated and billed, a summary of it is streamed:
  Responses with ``reasoning.summary``; Anthropic thinking on Claude 4 and later (the default
  display there). The summary here is one word per `SUMMARY_EVERY` reasoning tokens, streamed
  as the reasoning progresses.

Reasoning tokens take one decode step each, like any generated token: the first answer token
comes ``reasoning tokens × decode step`` after the first reasoning token. Usage bills them:
``completion_tokens_details.reasoning_tokens`` / ``output_tokens_details.reasoning_tokens`` on
OpenAI; within ``output_tokens`` (no separate count) on Anthropic.

Who reasons: the header ``x-emulator-reasoning: hidden|streamed|summarized|none`` decides for
any request; otherwise the request and the model name do (`reasoning_for`). GPT-5-family names
reason only when the request sets a reasoning effort, so that the emulator's many plain
``gpt-5-mini`` calls keep their timing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Optional

from ._cache import Provider

__all__ = ["Reasoning", "ReasoningShown", "SHOWN", "SUMMARY_EVERY", "reasoning_for", "shown_pieces"]

ReasoningShown = Literal["hidden", "streamed", "summarized"]
SHOWN: tuple[str, ...] = ("hidden", "streamed", "summarized", "none")
SUMMARY_EVERY = 8
"""A summarized reasoning streams one word for every this many reasoning tokens."""

# Effort scales the reasoning budget (TimingModel.reasoning_tokens at "medium").
_EFFORT = {"none": 0.0, "minimal": 0.25, "low": 0.5, "medium": 1.0, "high": 2.0, "xhigh": 4.0}
_O_SERIES = re.compile(r"^(?:openai/)?o\d(?:$|[-.])")
_GPT5 = re.compile(r"^(?:openai/)?gpt-5(?!.*-chat)")
_STREAMS_REASONING = re.compile(r"deepseek-(?:reasoner|r1)|qwq|gpt-oss|-thinking|magistral|(?:^|/)r1", re.IGNORECASE)
_CLAUDE_FULL_THINKING = re.compile(r"claude-3-7")


@dataclass(frozen=True)
class Reasoning:
    """How a request reasons: what the stream shows, and how many tokens (``None``: the protocol's default)."""

    shown: ReasoningShown
    tokens: Optional[int] = None


def _effort(body: Mapping[str, Any]) -> Optional[str]:
    effort = body.get("reasoning_effort")
    reasoning = body.get("reasoning")
    if effort is None and isinstance(reasoning, Mapping):
        effort = reasoning.get("effort")
    return effort if isinstance(effort, str) else None


def _scaled(default: int, effort: Optional[str]) -> int:
    return round(default * _EFFORT.get(effort or "medium", 1.0))


def reasoning_for(
    provider: Provider, body: Mapping[str, Any], header: Optional[str], header_tokens: Optional[int], default_tokens: int
) -> Optional[Reasoning]:
    """The reasoning a request gets, or ``None`` (no reasoning)."""
    model = str(body.get("model") or "")
    effort = _effort(body)
    if provider == "anthropic":
        thinking = body.get("thinking")
        enabled = isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")
        if header == "none" or (header is None and not enabled):
            return None
        if header is not None:
            return Reasoning(header, header_tokens)  # type: ignore[arg-type]
        display = thinking.get("display") if isinstance(thinking, Mapping) else None
        if display == "omitted":
            return Reasoning("hidden", header_tokens)
        if display == "summarized" or not _CLAUDE_FULL_THINKING.search(model):
            return Reasoning("summarized", header_tokens)
        return Reasoning("streamed", header_tokens)
    if header == "none":
        return None
    tokens = header_tokens if header_tokens is not None else _scaled(default_tokens, effort)
    if header is not None:
        return Reasoning(header, tokens) if tokens else None  # type: ignore[arg-type]
    if effort == "none":
        return None
    if _STREAMS_REASONING.search(model):
        return Reasoning("streamed", tokens) if tokens else None
    if _O_SERIES.search(model) or (_GPT5.search(model) and effort is not None):
        if not tokens:
            return None
        summary = body.get("reasoning", {}).get("summary") if isinstance(body.get("reasoning"), Mapping) else None
        if provider == "openai-responses" and summary in ("auto", "concise", "detailed"):
            return Reasoning("summarized", tokens)
        return Reasoning("hidden", tokens)
    return None


def shown_pieces(tokens: tuple[str, ...], shown: ReasoningShown) -> tuple[str, ...]:
    """Each reasoning token's streamed text: itself, nothing (hidden), or a summary word every
    `SUMMARY_EVERY` tokens. An empty piece is generated and billed, never streamed."""
    if shown == "streamed":
        return tokens
    if shown == "hidden":
        return ("",) * len(tokens)
    return tuple(t if i % SUMMARY_EVERY == 0 else "" for i, t in enumerate(tokens))
