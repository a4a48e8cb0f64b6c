"""Every exit path of every async streamed form finalizes the record exactly once and frees the connection."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

import latencykit as lk
from latencykit.emulator import Emulator

from _forms import ASYNC_FORMS

FORMS = sorted(ASYNC_FORMS)


@pytest.fixture
def request_clients(aant: Any, aoai: Any) -> dict[str, Any]:
    """Both async latencykit clients, by fixture name."""
    return {"aant": aant, "aoai": aoai}


async def _open(clients: dict[str, Any], form: str) -> Any:
    fixture, opener = ASYNC_FORMS[form]
    return await opener(clients[fixture])


async def _finalized_once(recorder: lk.Recorder) -> lk.CallRecord:
    for _ in range(300):
        if recorder.total_calls >= 1:
            break
        gc.collect()
        await asyncio.sleep(0.01)
    assert recorder.total_calls >= 1, "the record was never finalized"
    gc.collect()
    await asyncio.sleep(0.05)
    assert recorder.total_calls == 1, f"finalized {recorder.total_calls} times"
    rec = recorder.last
    assert rec is not None
    return rec


async def _no_open_streams(emu: Emulator) -> None:
    for _ in range(300):
        if emu.stats.active_streams == 0:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the server still streams to a closed caller")


@pytest.mark.parametrize("form", FORMS)
async def test_exhausted(request_clients: dict[str, Any], form: str, recorder: lk.Recorder, emu: Emulator) -> None:
    """Reading to the end records one completed call with TTFT, TPOT and E2E."""
    stream = await _open(request_clients, form)
    async with stream:
        events = [e async for e in stream]
    assert events
    rec = await _finalized_once(recorder)
    assert rec.outcome == "completed" and rec.ttft is not None and rec.tpot is not None and rec.e2e is not None
    await _no_open_streams(emu)


@pytest.mark.parametrize("form", FORMS)
async def test_break_then_close(request_clients: dict[str, Any], form: str, recorder: lk.Recorder, emu: Emulator) -> None:
    """break + await close() records one abandoned call."""
    stream = await _open(request_clients, form)
    i = 0
    async for _event in stream:
        i += 1
        if i == 5:
            break
    assert recorder.total_calls == 0
    await stream.close()
    rec = await _finalized_once(recorder)
    assert rec.outcome == "abandoned" and rec.ttft is not None and rec.e2e is not None and rec.e2e < 0.5
    await _no_open_streams(emu)


@pytest.mark.parametrize("form", FORMS)
async def test_leave_with_block_early(request_clients: dict[str, Any], form: str, recorder: lk.Recorder, emu: Emulator) -> None:
    """Leaving an async with block early records one abandoned call."""
    stream = await _open(request_clients, form)
    async with stream:
        i = 0
        async for _event in stream:
            i += 1
            if i == 5:
                break
    assert (await _finalized_once(recorder)).outcome == "abandoned"
    await _no_open_streams(emu)


@pytest.mark.parametrize("form", FORMS)
async def test_raise_inside_loop(request_clients: dict[str, Any], form: str, recorder: lk.Recorder, emu: Emulator) -> None:
    """An exception raised by the caller's loop body propagates unchanged; the call is abandoned."""
    stream = await _open(request_clients, form)

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        async with stream:
            i = 0
            async for _event in stream:
                i += 1
                if i == 5:
                    raise Boom()
    assert (await _finalized_once(recorder)).outcome == "abandoned"
    await _no_open_streams(emu)


@pytest.mark.parametrize("form", FORMS)
async def test_task_cancelled(request_clients: dict[str, Any], form: str, recorder: lk.Recorder, emu: Emulator) -> None:
    """Cancelling the task that reads the stream records one abandoned call and closes the stream."""
    started = asyncio.Event()

    async def consume() -> None:
        stream = await _open(request_clients, form)
        async with stream:
            async for _event in stream:
                started.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    rec = await _finalized_once(recorder)
    assert rec.outcome == "abandoned"
    await _no_open_streams(emu)


@pytest.mark.parametrize("form", FORMS)
async def test_garbage_collected_unclosed(request_clients: dict[str, Any], form: str, recorder: lk.Recorder, emu: Emulator) -> None:
    """A stream dropped without close() is finalized when collected."""
    stream = await _open(request_clients, form)
    i = 0
    async for _event in stream:
        i += 1
        if i == 5:
            break
    del stream, _event
    gc.collect()
    assert (await _finalized_once(recorder)).outcome == "abandoned"
    await _no_open_streams(emu)


@pytest.mark.parametrize("form", FORMS)
async def test_anext_until_stop(request_clients: dict[str, Any], form: str, recorder: lk.Recorder) -> None:
    """Driving the stream with __anext__ to StopAsyncIteration records one completed call."""
    stream = await _open(request_clients, form)
    n = 0
    async with stream:
        while True:
            try:
                await stream.__anext__()
            except StopAsyncIteration:
                break
            n += 1
    assert n > 0 and (await _finalized_once(recorder)).outcome == "completed"
