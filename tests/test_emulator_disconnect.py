"""A client that leaves mid-stream: the emulator stops generating and logs no error (a Ctrl-C prints one line)."""

from __future__ import annotations

import json
import logging
import socket
import struct
import time
from urllib.parse import urlsplit

import pytest

from latencykit.emulator import Emulator, TimingModel


def _reset_after_first_chunk(base_url: str) -> None:
    """Ask for a stream over a raw socket, read its first bytes, then reset the connection (RST)."""
    url = urlsplit(base_url)
    body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}).encode()
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))  # fmt: skip
        seen = b""
        while b"data:" not in seen:
            seen += sock.recv(65536)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with RST


def test_a_client_leaving_mid_stream_is_no_server_error(caplog: pytest.LogCaptureFixture) -> None:
    """Reset the connection after the first chunk: counted as closed early, and aiohttp logs no 'Error handling request'."""
    timing = TimingModel(base_ttft=0.01, decode_per_token=0.02, output_tokens=200, tokens_per_chunk=1)
    with caplog.at_level(logging.DEBUG), Emulator(timing=timing) as emu:
        for _ in range(3):
            _reset_after_first_chunk(emu.base_url)
        deadline = time.monotonic() + 10
        while (emu.stats.active_streams or emu.stats.connections_closed_early < 3) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert emu.stats.active_streams == 0 and emu.stats.connections_closed_early == 3
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]


def test_a_write_to_a_closing_transport_ends_the_handler_quietly(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The race a loaded machine hits (seen in CI): the transport is closing when a chunk is written, before aiohttp
    cancels the handler. aiohttp raises ClientConnectionResetError from the write; the emulator ends the stream
    without the 'Error handling request' traceback that made a Ctrl-C print more than one line."""
    from aiohttp import web
    from aiohttp.client_exceptions import ClientConnectionResetError

    real_write = web.StreamResponse.write
    writes = {"n": 0}

    async def write(self: web.StreamResponse, data: bytes) -> None:
        writes["n"] += 1
        if writes["n"] == 3:  # the preamble and one chunk went out; the client is gone
            raise ClientConnectionResetError("Cannot write to closing transport")
        await real_write(self, data)

    monkeypatch.setattr(web.StreamResponse, "write", write)
    timing = TimingModel(base_ttft=0.0, decode_per_token=0.001, output_tokens=20, tokens_per_chunk=1)
    with caplog.at_level(logging.DEBUG), Emulator(timing=timing) as emu:
        with socket.create_connection(("127.0.0.1", urlsplit(emu.base_url).port), timeout=10) as sock:
            body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}).encode()
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))  # fmt: skip
            while sock.recv(65536):
                pass
        deadline = time.monotonic() + 10
        while emu.stats.active_streams and time.monotonic() < deadline:
            time.sleep(0.02)
        assert emu.stats.connections_closed_early == 1 and emu.stats.active_streams == 0
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]


@pytest.mark.parametrize("vllm", [False, True])
async def test_a_queued_request_cancelled_as_a_slot_frees_leaves_cleanly(vllm: bool) -> None:
    """A client gone while its request waits for a slot, in the same instant a slot frees (a Ctrl-C under queueing):
    the waiter is passed over once and its handler ends without an error; the slot count stays right."""
    import asyncio

    from latencykit.emulator import VLLMConfig
    from latencykit.emulator._timing import Engine
    from latencykit.emulator._vllm import VLLMEngine
    from latencykit.emulator._vllm_metrics import VLLMMetrics

    timing = TimingModel(max_concurrency=1)
    engine: Engine = (VLLMEngine(timing, 0, VLLMConfig(max_num_seqs=1), VLLMMetrics(8192)) if vllm else Engine(timing, 0))
    take, give = ((lambda: engine._admit(1)), (lambda: engine._free(1))) if vllm else (engine.acquire, engine.release)  # type: ignore[attr-defined]
    await take()
    queued = asyncio.ensure_future(take())
    await asyncio.sleep(0)  # it waits for the slot
    queued.cancel()
    give()  # the slot frees before the cancelled waiter runs again
    with pytest.raises(asyncio.CancelledError):
        await queued
    assert engine.active == 0
    await take()  # the slot is free for the next request
    assert engine.active == 1
