"""The emulator driven by the async SDK clients: concurrency, queueing and disconnects."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import anthropic
import openai

from latencykit.emulator import Emulator, TimingModel

from conftest import wait_for

MESSAGES: list[Any] = [{"role": "user", "content": "Say something."}]


async def _ttft(client: anthropic.AsyncAnthropic, start: float) -> float:
    """Seconds from `start` to the first text delta of one streamed request."""
    async with client.messages.stream(model="m", max_tokens=100, messages=MESSAGES) as stream:
        first = None
        async for _ in stream.text_stream:
            first = first or time.perf_counter()
    assert first is not None
    return first - start


async def test_queueing_adds_to_ttft() -> None:
    """8 concurrent streams with max_concurrency=2 queue in FIFO: later ones see larger TTFT."""
    timing = TimingModel(base_ttft=0.02, decode_per_token=0.005, output_tokens=10, max_concurrency=2)
    with Emulator(timing) as emu:
        async with anthropic.AsyncAnthropic(base_url=emu.base_url, api_key="x", max_retries=0) as client:
            start = time.perf_counter()
            ttfts = sorted(await asyncio.gather(*(_ttft(client, start) for _ in range(8))))
        assert emu.stats.max_active_streams == 8
        # The server's handler ends just after the client read the last event: settle first.
        assert wait_for(lambda: emu.stats.active_streams == 0), "a stream still open on the server"
    # Each pair of slots turns over after ~0.02 + 9 * 0.005 s; the last pair waits three turns.
    assert ttfts[0] < 0.12
    assert ttfts[-1] > ttfts[0] + 0.15


async def test_batch_slowdown_stretches_decode() -> None:
    """Concurrent requests decode slower than a lone one when batch_slowdown is set."""
    timing = TimingModel(base_ttft=0.0, decode_per_token=0.004, output_tokens=20, batch_slowdown=0.5)
    with Emulator(timing) as emu:
        async with openai.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="x", max_retries=0) as client:

            async def one() -> float:
                t0 = time.perf_counter()
                await client.chat.completions.create(model="g", messages=MESSAGES)
                return time.perf_counter() - t0

            alone = await one()
            together = await asyncio.gather(*(one() for _ in range(5)))
    # 5 active: each step is 1 + 0.5 * 4 = 3x slower.
    assert min(together) > 2 * alone


async def test_client_disconnect_frees_slot() -> None:
    """Closing a stream early is counted and frees the concurrency slot for the next request."""
    timing = TimingModel(base_ttft=0.0, decode_per_token=0.01, output_tokens=200, max_concurrency=1)
    with Emulator(timing) as emu:
        async with openai.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="x", max_retries=0) as client:
            stream = await client.chat.completions.create(model="g", messages=MESSAGES, stream=True)
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    break
            await stream.close()
            for _ in range(100):
                if emu.stats.connections_closed_early:
                    break
                await asyncio.sleep(0.01)
            assert emu.stats.connections_closed_early == 1
            t0 = time.perf_counter()
            reply = await client.chat.completions.create(
                model="g", messages=MESSAGES, extra_headers={"x-emulator-output-tokens": "2"}
            )
            assert reply.choices[0].message.content and time.perf_counter() - t0 < 0.5


async def test_async_responses_stream() -> None:
    """The async Responses stream helper reaches response.completed against the emulator."""
    with Emulator(TimingModel(time_scale=0.0)) as emu:
        async with openai.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="x", max_retries=0) as client:
            async with client.responses.stream(model="g", input=[{"role": "user", "content": "hi"}]) as stream:
                final = await stream.get_final_response()
    assert final.status == "completed" and final.output_text.endswith(".")


async def test_stop_with_open_stream() -> None:
    """stop() while a stream is still generating shuts down cleanly without warnings."""
    emu = Emulator(TimingModel(base_ttft=0.0, decode_per_token=0.05, output_tokens=100)).start()
    async with anthropic.AsyncAnthropic(base_url=emu.base_url, api_key="x", max_retries=0) as client:
        stream = await client.messages.create(model="m", max_tokens=100, messages=MESSAGES, stream=True)
        await stream.__anext__()
        await asyncio.to_thread(emu.stop)
        try:
            async for _ in stream:
                pass
        except (anthropic.APIError, Exception):  # noqa: BLE001 - any transport error is fine here
            pass
        await stream.close()
