"""The one response driver shared by all protocols: preamble, timed chunks, faults, terminal events.

Order on the wire for a streamed request: status line and headers plus the protocol's
preamble go out as soon as the request is parsed; then the engine's timed chunks (the
first one at TTFT); then the terminal events.  Injected faults
(`x-emulator-error-after-chunks`, `x-emulator-drop-after-chunks`) fire when chunk N+1
is due, or in place of the terminal events when the answer has exactly N chunks; an
answer with fewer than N chunks completes normally.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from aiohttp import web

from ._cache import Provider
from ._overrides import RequestOverrides
from ._plan import GenerationPlan, Unit
from ._state import ServerState

__all__ = ["Formatter", "Prepared", "ProviderAPI", "json_response", "respond", "sse"]

SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"


def sse(data: Mapping[str, Any] | str, event: str | None = None) -> bytes:
    """One SSE frame; `event:` line only for protocols that name their events."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event is not None else ""
    return f"{head}data: {payload}\n\n".encode()


class Formatter(Protocol):
    """Renders one plan in one protocol; stateful across calls for a single response."""

    def preamble(self) -> list[bytes]:
        """Events sent before waiting for the first token."""

    def chunk(self, units: Sequence[Unit]) -> list[bytes]:
        """Events for one timed group of generated tokens."""

    def finish(self) -> list[bytes]:
        """Terminal events of a successful stream."""

    def error(self) -> list[bytes]:
        """The provider's mid-stream error event(s)."""

    def body(self) -> dict[str, Any]:
        """The complete non-streaming response body."""


@dataclass(frozen=True)
class Prepared:
    """A validated request turned into a plan and the formatter that renders it."""

    plan: GenerationPlan
    formatter: Formatter
    stream: bool


class ProviderAPI(Protocol):
    """What the server needs from one protocol module."""

    name: Provider
    request_id_header: str
    midstream_status: int

    def error_body(self, status: int, message: str | None = None) -> dict[str, Any]:
        """The provider's JSON error body for an HTTP status."""

    def prepare(self, body: Mapping[str, Any], overrides: RequestOverrides, state: ServerState) -> Prepared:
        """Validate `body` (raising `BadRequest`) and build its plan and formatter."""


def json_response(body: Mapping[str, Any], status: int, headers: Mapping[str, str]) -> web.Response:
    """A JSON response with the given extra headers."""
    return web.json_response(dict(body), status=status, headers=dict(headers))


def _fault(sent: int, overrides: RequestOverrides) -> Literal["error", "drop"] | None:
    if overrides.error_after_chunks is not None and sent >= overrides.error_after_chunks:
        return "error"
    if overrides.drop_after_chunks is not None and sent >= overrides.drop_after_chunks:
        return "drop"
    return None


def _drop(request: web.Request) -> None:
    # abort() rather than close(): a real network failure sends no orderly end of the body.
    if request.transport is not None:
        request.transport.abort()


async def respond(
    request: web.Request,
    api: ProviderAPI,
    prepared: Prepared,
    overrides: RequestOverrides,
    state: ServerState,
    headers: Mapping[str, str],
) -> web.StreamResponse:
    """Run the plan through the engine and send it streamed or as one JSON body."""
    plan, fmt = prepared.plan, prepared.formatter
    if "html" in overrides.wire:  # a proxy's or login wall's page where the API should answer
        page = "<!DOCTYPE html><html><head><title>Sign in</title></head><body>Please sign in.</body></html>"
        return web.Response(status=200, text=page, content_type="text/html", headers=dict(headers))
    chunks = state.engine.run(plan.units, plan.uncached_prompt_tokens, overrides)
    if not prepared.stream:
        sent = 0
        async with aclosing(chunks):
            async for _ in chunks:
                if _fault(sent, overrides) is not None:
                    break
                sent += 1
        fault = _fault(sent, overrides)
        if fault == "drop":
            _drop(request)
            return web.Response(status=200)
        if fault == "error":
            status = api.midstream_status
            return json_response(api.error_body(status), status, headers)
        return json_response(fmt.body(), 200, headers)

    resp = web.StreamResponse(status=200, headers={**headers, "Content-Type": SSE_CONTENT_TYPE})
    resp.headers["Cache-Control"] = "no-cache"
    stats = state.stats
    stats.active_streams += 1
    stats.max_active_streams = max(stats.max_active_streams, stats.active_streams)
    try:
        await resp.prepare(request)
        await resp.write(b"".join(fmt.preamble()))
        sent = 0
        async with aclosing(chunks):
            async for chunk in chunks:
                if _fault(sent, overrides) is not None:
                    break
                frames = fmt.chunk(chunk)
                if frames:  # reasoning generated but not streamed sends nothing
                    await resp.write(b"".join(frames))
                    sent += 1
        fault = _fault(sent, overrides)
        if fault == "drop":
            _drop(request)
            return resp
        await resp.write(b"".join(fmt.error() if fault == "error" else fmt.finish()))
        await resp.write_eof()
    except asyncio.CancelledError:
        # The client went away and aiohttp cancelled the handler: stop generating now.
        stats.connections_closed_early += 1
        raise
    except ConnectionError:
        # A write failed because the client went away: stop generating, and end the handler
        # quietly (raised, aiohttp logs "Error handling request" with a traceback on stderr).
        stats.connections_closed_early += 1
        return resp
    finally:
        stats.active_streams -= 1
    return resp
