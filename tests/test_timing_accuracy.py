"""A server that waits a known 300 ms before the first token and 20 ms between tokens is measured as such.

Each case runs three calls against its own emulator and checks the median, with the
garbage collector held off during the calls: the subject is latencykit's clocks, not the
pauses a shared 2-core CI machine (or a gen-2 collection left over from the 1000-stream
load test) can add to any single call.
"""

from __future__ import annotations

import gc
import statistics
from typing import Any, Awaitable, Callable, Iterator

import pytest

import latencykit as lk
from latencykit.emulator import Emulator, TimingModel

from conftest import ANT_REQ, CHAT_REQ, RESP_REQ, headers

KNOWN = headers(ttft_ms=300, tpot_ms=20, output_tokens=25)
RUNS = 3


@pytest.fixture(scope="module")
def quiet_emu() -> Iterator[Emulator]:
    """An emulator of its own, so no other test's streams share its loop."""
    with Emulator(timing=TimingModel(time_scale=0.02), seed=3) as emulator:
        yield emulator


def _median_record(recorder: lk.Recorder) -> dict[str, float]:
    calls = recorder.calls[-RUNS:]
    assert len(calls) == RUNS and all(c.outcome == "completed" and c.output_tokens == 25 for c in calls)
    return {m: statistics.median(getattr(c, m) for c in calls) for m in ("ttft", "tpot", "chunk_gap_mean", "ttfb")}


def _check(recorder: lk.Recorder) -> None:
    rec = _median_record(recorder)
    assert rec["ttft"] == pytest.approx(0.300, abs=0.020), f"TTFT {rec['ttft'] * 1000:.1f} ms (emulated 300 ms)"
    assert rec["tpot"] == pytest.approx(0.020, abs=0.002), f"TPOT {rec['tpot'] * 1000:.2f} ms (emulated 20 ms)"
    assert rec["chunk_gap_mean"] == pytest.approx(0.020, abs=0.002)
    assert rec["ttfb"] < 0.1  # the preamble (message_start / role chunk) comes at once; TTFT did not stop there


def _runs(call: Callable[[], Any]) -> None:
    for _ in range(RUNS):
        gc.collect()
        gc.disable()
        try:
            call()
        finally:
            gc.enable()


async def _aruns(call: Callable[[], Awaitable[Any]]) -> None:
    for _ in range(RUNS):
        gc.collect()
        gc.disable()
        try:
            await call()
        finally:
            gc.enable()


def test_anthropic_create(quiet_emu: Emulator) -> None:
    """Anthropic messages.create (forced stream): TTFT ±20 ms, TPOT ±2 ms of the emulated values."""
    with lk.Anthropic(base_url=quiet_emu.base_url, api_key="k", max_retries=0) as client:
        _runs(lambda: client.messages.create(**ANT_REQ, extra_headers=KNOWN))
    _check(client.latency)


def test_chat_create(quiet_emu: Emulator) -> None:
    """OpenAI chat.completions.create: the role-only first chunk does not stop the TTFT clock."""
    with lk.OpenAI(base_url=quiet_emu.base_url + "/v1", api_key="k", max_retries=0) as client:
        _runs(lambda: client.chat.completions.create(**CHAT_REQ, extra_headers=KNOWN))
    _check(client.latency)


def test_responses_stream(quiet_emu: Emulator) -> None:
    """OpenAI responses.stream(): response.created does not stop the TTFT clock."""
    with lk.OpenAI(base_url=quiet_emu.base_url + "/v1", api_key="k", max_retries=0) as client:

        def call() -> None:
            with client.responses.stream(**RESP_REQ, extra_headers=KNOWN) as stream:
                stream.until_done()

        _runs(call)
    _check(client.latency)


async def test_async_anthropic_stream(quiet_emu: Emulator) -> None:
    """Async Anthropic messages.stream(): same accuracy from the async shell."""
    async with lk.AsyncAnthropic(base_url=quiet_emu.base_url, api_key="k", max_retries=0) as client:

        async def call() -> None:
            async with client.messages.stream(**ANT_REQ, extra_headers=KNOWN) as stream:
                await stream.until_done()

        await _aruns(call)
    _check(client.latency)


async def test_async_chat_stream_true(quiet_emu: Emulator) -> None:
    """Async OpenAI create(stream=True): same accuracy."""
    async with lk.AsyncOpenAI(base_url=quiet_emu.base_url + "/v1", api_key="k", max_retries=0) as client:

        async def call() -> None:
            async for _ in await client.chat.completions.create(stream=True, **CHAT_REQ, extra_headers=KNOWN):
                pass

        await _aruns(call)
    _check(client.latency)
