"""An OpenAI-compatible server that does not take the GPT-5.6 prompt-cache fields.

It answers 400 ``unknown_parameter`` (OpenAI's wording) to a request carrying
``prompt_cache_breakpoint`` or ``prompt_cache_options``, and forwards every other request to
an upstream server (the emulator), streaming its answer back: what an OpenAI-compatible proxy
or an older deployment does. Real HTTP on loopback, in a thread of its own, stopped on exit.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from types import TracebackType
from typing import Optional

import aiohttp
from aiohttp import web


class RejectingServer:
    """``with RejectingServer(upstream) as srv:`` — ``srv.base_url`` (no ``/v1``), ``srv.rejected`` counts the 400s."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.rejected = 0
        self.forwarded = 0
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._runner: Optional[web.AppRunner] = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        for field in ("prompt_cache_breakpoint", "prompt_cache_options"):
            if field.encode() in raw:
                self.rejected += 1
                body = {"error": {"message": f"Unknown parameter: '{field}'.", "type": "invalid_request_error",
                                  "param": field, "code": "unknown_parameter"}}  # fmt: skip
                return web.json_response(body, status=400)
        self.forwarded += 1
        headers = {"content-type": "application/json"}
        async with aiohttp.ClientSession() as session:
            async with session.post(self.upstream + request.path, data=raw, headers=headers) as upstream:
                out = web.StreamResponse(status=upstream.status, headers={"content-type": upstream.headers.get("content-type", "")})
                await out.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await out.write(chunk)
                await out.write_eof()
                return out

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()

    def __enter__(self) -> "RejectingServer":
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="rejecting-server", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), loop).result(10)
        return self

    def __exit__(self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        loop, runner = self._loop, self._runner
        assert loop is not None and self._thread is not None
        if runner is not None:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(10)
        loop.close()

