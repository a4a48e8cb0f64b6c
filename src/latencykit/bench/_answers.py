"""The answer's text, kept for a session's turn (`latencykit.bench._sessions`): the next turn's history holds it verbatim.

Each sender collects it from what it reads anyway — OpenAI chunks' ``delta.content``, Anthropic ``text_delta``
events, a whole response's text, or (the thin reader) the SSE line parsed as JSON, only for a session's turn.
"""

from __future__ import annotations

from typing import Any

from ._traffic import TrafficRequest

__all__ = ["anthropic_piece", "openai_piece", "response_text", "thin_piece", "wants_text"]


def wants_text(req: TrafficRequest) -> bool:
    """A session's turn: its answer goes verbatim into the next turn's history."""
    return "turn" in req.extra


def openai_piece(chunk: Any) -> str:
    """The answer text an OpenAI chunk carries."""
    return (chunk.choices[0].delta.content or "") if chunk.choices else ""


def anthropic_piece(event: Any) -> str:
    """The answer text an Anthropic stream event carries."""
    if event.type == "content_block_delta" and event.delta.type == "text_delta":
        return str(event.delta.text)
    return ""


def response_text(resp: Any, api: str) -> str:
    """The answer text of a whole (non-streamed) response."""
    if api == "openai":
        return str(resp.choices[0].message.content or "") if resp.choices else ""
    return "".join(b.text for b in resp.content if getattr(b, "type", None) == "text")


def thin_piece(line: bytes, openai_api: bool) -> str:
    """The answer text an SSE ``data:`` line carries (parsed only for session turns)."""
    import json

    try:
        data = json.loads(line[5:])
    except ValueError:
        return ""
    if openai_api:
        choices = data.get("choices") or [{}]
        return str((choices[0].get("delta") or {}).get("content") or "")
    delta = data.get("delta") or {}
    return str(delta.get("text") or "") if data.get("type") == "content_block_delta" and delta.get("type") == "text_delta" else ""
