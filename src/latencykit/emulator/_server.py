"""The aiohttp application, the threaded `Emulator` wrapper and the blocking `serve()`.

`Emulator` runs the server on its own event loop in a daemon thread, so it works the
same from synchronous code, from async tests (whose loop it never touches) and from
the CLI.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from aiohttp import web

from ._anthropic import API as ANTHROPIC
from ._cache import CacheModel
from ._prompt_cache import PromptCache
from ._errors import BadRequest, openai_error
from ._openai_chat import API as OPENAI_CHAT
from ._openai_responses import API as OPENAI_RESPONSES
from ._overrides import RequestOverrides
from ._state import EmulatorStats, RequestRecord, ServerState
from ._stream import ProviderAPI, json_response, respond
from ._text import make_id
from ._timing import TimingModel
from ._validate import check_request
from ._vllm import VLLMConfig, VLLMServer

__all__ = ["Emulator", "build_app", "serve"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# Streams still open at stop() get this long to notice cancellation before the server goes.
SHUTDOWN_TIMEOUT = 1.0
START_TIMEOUT = 10.0
BACKLOG = 2048
# Credentials the SDKs send; `Emulator.requests` keeps every other header.
SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization", "cookie"})


def _endpoint(api: ProviderAPI, state: ServerState) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        state.stats.requests_total += 1
        raw = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        kept = {k: v for k, v in headers.items() if k not in SECRET_HEADERS}  # never keep credentials
        state.requests.append(RequestRecord(request.method, request.path, body, kept))
        out = {api.request_id_header: "req_" + make_id(state.seed, str(time.time_ns()), "request", 24)}

        def error(status: int, message: str | None = None) -> web.Response:
            return json_response(api.error_body(status, message), status, out)

        try:
            overrides = RequestOverrides.from_headers(headers)
        except ValueError as exc:
            return error(400, str(exc))
        if overrides.fault_times is not None and overrides.has_faults:
            fault_key = overrides.fault_id or raw.decode("utf-8", "replace")
            seen = state.fault_counts.get(fault_key, 0)
            state.fault_counts[fault_key] = seen + 1
            if seen >= overrides.fault_times:
                overrides = overrides.without_faults()
        if overrides.status is not None and overrides.status >= 400:
            if overrides.retry_after is not None:
                out["retry-after"] = overrides.retry_after
            return error(overrides.status)
        if not isinstance(body, dict):
            return error(400, "request body must be a JSON object")
        try:
            check_request(api.name, body)
            prepared = api.prepare(body, overrides, state)
        except BadRequest as exc:
            out_body = api.error_body(400, str(exc))
            detail = out_body.get("error")
            if isinstance(detail, dict) and "param" in detail:  # OpenAI's shape names the parameter
                detail["param"], detail["code"] = exc.param, exc.code
            return json_response(out_body, 400, out)
        return await respond(request, api, prepared, overrides, state, out)

    return handle


async def _health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def _lateness(state: ServerState) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        reset = request.query.get("reset") in ("1", "true")
        return web.json_response({"lateness": state.engine.lateness(reset), "active_streams": state.stats.active_streams})

    return handle


async def _not_found(request: web.Request) -> web.Response:
    message = f"Unknown request URL: {request.method} {request.path}"
    return web.json_response(openai_error(404, message), status=404)


def build_app(state: ServerState, vllm: VLLMServer | None = None) -> web.Application:
    """The aiohttp application serving all three APIs from one state (plus vLLM's routes in vLLM mode)."""
    app = web.Application()
    app.router.add_post("/v1/messages", _endpoint(ANTHROPIC, state))
    app.router.add_post("/v1/chat/completions", _endpoint(OPENAI_CHAT if vllm is None else vllm.chat_api, state))
    app.router.add_post("/v1/responses", _endpoint(OPENAI_RESPONSES, state))
    app.router.add_get("/health", _health)
    app.router.add_get("/_emulator/lateness", _lateness(state))
    if vllm is not None:
        vllm.add_routes(app)
    app.router.add_route("*", "/{tail:.*}", _not_found)
    return app


class Emulator:
    """A local Anthropic/OpenAI-compatible server with a seeded timing model, run in a thread."""

    def __init__(
        self,
        timing: TimingModel | None = None,
        seed: int = 0,
        host: str = "127.0.0.1",
        port: int = 0,
        created: int | None = None,
        cache_model: CacheModel | None = None,
        vllm: VLLMConfig | None = None,
    ) -> None:
        self.host = host
        self._requested_port = port
        self._state = ServerState(timing or TimingModel(), seed, created, cache_model or PromptCache())
        self._vllm = VLLMServer(vllm, self._state) if vllm is not None else None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def vllm(self) -> VLLMServer:
        """vLLM mode (``Emulator(vllm=VLLMConfig(...))``): ``.config`` can be reassigned to change pressure state."""
        if self._vllm is None:
            raise RuntimeError("this Emulator is not in vLLM mode; pass vllm=VLLMConfig(...)")
        return self._vllm

    @property
    def timing(self) -> TimingModel:
        """The timing model in force."""
        return self._state.timing

    @property
    def cache(self) -> CacheModel:
        """The prompt-cache model in force (a `PromptCache` unless another was given): ``advance()``, ``clear()``."""
        return self._state.cache_model

    @property
    def port(self) -> int:
        """The bound TCP port (known once started)."""
        if self._port is None:
            raise RuntimeError("Emulator is not started; call start() or use it as a context manager")
        return self._port

    @property
    def base_url(self) -> str:
        """`http://host:port`, without a trailing slash; OpenAI clients need `+ "/v1"`."""
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 literal needs brackets
        return f"http://{host}:{self.port}"

    @property
    def requests(self) -> list[RequestRecord]:
        """A snapshot of the last (up to 1000) received requests, oldest first (credential headers left out)."""
        return list(self._state.requests)

    @property
    def stats(self) -> EmulatorStats:
        """Live counters (requests_total, active_streams, max_active_streams, connections_closed_early)."""
        return self._state.stats

    def chunk_lateness(self, reset: bool = False) -> dict[str, dict[str, float | int | None]]:
        """How late chunks left against their deadlines, in seconds: ``{"first": {...}, "later": {...}}``
        with count, p50, p99 and max (also ``GET /_emulator/lateness[?reset=1]``)."""
        return self._state.engine.lateness(reset)

    def start(self) -> Emulator:
        """Bind the port and start serving in a daemon thread; returns self."""
        if self._loop is not None:
            raise RuntimeError("Emulator already started")
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=self._run_loop, args=(loop,), name="latencykit-emulator", daemon=True)
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._start_server(), loop).result(START_TIMEOUT)
        except BaseException:
            self._shutdown_loop()
            raise
        return self

    async def _start_server(self) -> None:
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self._requested_port))
        except BaseException:
            sock.close()
            raise
        self._port = int(sock.getsockname()[1])
        runner = web.AppRunner(
            build_app(self._state, self._vllm), handler_cancellation=True, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT
        )
        try:
            await runner.setup()
            self._runner = runner
            # The site takes ownership of the socket; closing the runner closes it. A backlog
            # like real servers' (uvicorn: 2048), so a burst of connects is not dropped to SYN retries.
            await web.SockSite(runner, sock, backlog=BACKLOG).start()
        except BaseException:
            sock.close()
            raise

    @staticmethod
    def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
            # Anything still pending (a handler past the shutdown timeout) is cancelled and awaited,
            # so closing the loop never destroys a pending task.
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()

    def stop(self) -> None:
        """Stop serving, cancel open streams and join the thread; safe to call twice."""
        loop, runner = self._loop, self._runner
        if loop is None:
            return
        if runner is not None:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(START_TIMEOUT + SHUTDOWN_TIMEOUT)
            self._runner = None
        self._shutdown_loop()

    def _shutdown_loop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
        self._loop = self._thread = None
        self._port = None

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def serve(
    host: str = "127.0.0.1", port: int = 8000, timing: TimingModel | None = None, seed: int = 0,
    vllm: VLLMConfig | None = None,
) -> None:
    """Run an emulator in the foreground until interrupted (used by `latencykit emulator`); with ``vllm``,
    in vLLM mode (``/metrics``, ``/v1/models``, the toy scheduler).

    ``OSError`` if the address cannot be bound (port in use, unknown host); the
    ``KeyboardInterrupt`` that stops it propagates once the server is stopped.
    """
    emulator = Emulator(timing=timing, seed=seed, host=host, port=port, vllm=vllm).start()
    mode = f" (vLLM mode, model {vllm.model}; /metrics is emulated)" if vllm is not None else ""
    print(f"latencykit emulator listening on {emulator.base_url}{mode}", flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        emulator.stop()
