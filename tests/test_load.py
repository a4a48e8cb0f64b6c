"""Load and leaks (issue 5, item 5): 1000 concurrent async streams through one client.

Every call is recorded exactly once, nothing raises, and afterwards no sockets, tasks or
unbounded history remain. The emulator runs in this process (its own thread and loop),
so its server-side sockets count in the descriptor check too: both ends must close.
"""

from __future__ import annotations

import asyncio
import gc
import os
import tracemalloc
from typing import Any, Iterator

import httpx2
import openai
import pytest

import latencykit as lk
from latencykit.emulator import Emulator, TimingModel

from conftest import CHAT_REQ

N = 1000
HISTORY = 100


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture(scope="module")
def busy_emu() -> Iterator[Emulator]:
    """An emulator that serves all 1000 streams at once (no decode-slot queueing)."""
    with Emulator(timing=TimingModel(time_scale=0.01, max_concurrency=N, batch_slowdown=0.0, output_tokens=8), seed=3) as emulator:
        yield emulator


async def _settle(baseline_tasks: set[asyncio.Task[Any]], fd_limit: int) -> tuple[int, set[asyncio.Task[Any]]]:
    """Give closed connections a moment to go; returns the fd count and the extra tasks."""
    for _ in range(200):
        gc.collect()
        extra = asyncio.all_tasks() - baseline_tasks - {asyncio.current_task()}  # type: ignore[operator]
        fds = _open_fds()
        if fds <= fd_limit and not extra:
            break
        await asyncio.sleep(0.05)
    return fds, extra


async def test_1000_concurrent_streams_one_client(busy_emu: Emulator) -> None:
    """1000 streams at once: 1000 records, no errors, no leaked sockets or tasks, bounded history."""
    gc.collect()
    fds_before = _open_fds()
    tasks_before = asyncio.all_tasks()
    recorder = lk.Recorder(max_calls=HISTORY)
    # 1000 connects at once to an emulator sharing this process (and its GIL): the SDK's 5 s
    # connect timeout measures this machine's scheduling, not latencykit; the test is about records and leaks.
    http = openai.DefaultAsyncHttpxClient(
        limits=httpx2.Limits(max_connections=N, max_keepalive_connections=N), timeout=httpx2.Timeout(120.0, connect=60.0)
    )
    client = lk.AsyncOpenAI(
        base_url=busy_emu.base_url + "/v1", api_key="sk-test", http_client=http, recorder=recorder, telemetry=False
    )
    tracemalloc.start()
    try:

        async def one(i: int) -> tuple[str, str]:
            stream = await client.chat.completions.create(
                stream=True, **{**CHAT_REQ, "messages": [{"role": "user", "content": f"request {i}"}]}
            )
            ids: set[str] = set()
            text: list[str] = []
            async with stream:
                async for chunk in stream:
                    ids.add(chunk.id)
                    if chunk.choices and chunk.choices[0].delta.content:
                        text.append(chunk.choices[0].delta.content)
            (only,) = ids
            return only, "".join(text)

        results = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(N))), timeout=150)  # httpcore's pool is O(n²) in connections; tracemalloc triples it
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        await client.close()

    assert len(results) == N and all(text for _, text in results)
    assert len({rid for rid, _ in results}) == N
    assert busy_emu.stats.max_active_streams > N // 2  # really concurrent, not serialized by a pool
    # Every call recorded exactly once; the history is capped, the sketches are not per call.
    assert recorder.total_calls == N
    assert len(recorder.calls) == HISTORY
    (stats,) = recorder.stats().values()
    assert stats.calls == N
    for metric, sketch in stats.sketches.items():
        buckets = len(sketch.to_dict()["counts"])
        assert buckets <= 2048, f"{metric} sketch holds {buckets} buckets"  # O(log range), not O(calls)
    outcomes = {rec.outcome for rec in recorder.calls}
    assert outcomes == {"completed"}
    # Peak memory while 1000 streams were open: a generous bound that a per-call leak of
    # the events (1000 × ~20 chunks kept) or unbounded history would still fit under is not
    # the point; this catches a runaway (e.g. every event of every call retained twice).
    assert peak < 400 * 1024 * 1024

    fds_after, extra_tasks = await _settle(tasks_before, fds_before + 10)
    assert not extra_tasks, f"leaked tasks: {extra_tasks}"
    assert fds_after <= fds_before + 10, f"{fds_after - fds_before} descriptors leaked"
    assert busy_emu.stats.active_streams == 0
