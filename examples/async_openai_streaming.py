"""Stream OpenAI chat completions concurrently and look at the tail (offline, emulator).

    python examples/async_openai_streaming.py
"""

from __future__ import annotations

import asyncio

import latencykit as lk
from latencykit.emulator import Emulator, TimingModel


async def main() -> None:
    """Twenty concurrent streamed calls; the emulator slows each when many decode at once."""
    with Emulator(TimingModel(max_concurrency=8, batch_slowdown=0.05, jitter=0.3)) as emu:
        async with lk.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="emulator") as client:

            async def one(i: int) -> str:
                stream = await client.chat.completions.create(
                    model="gpt-5-mini", stream=True,
                    messages=[{"role": "user", "content": f"Question {i}"}],
                )
                return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

            await asyncio.gather(*(one(i) for i in range(20)))
            s = client.latency.summary()
            print("EMULATED:", s)
            print(f"TTFT p50 {s['ttft'].p50 * 1000:.0f} ms vs p99 {s['ttft'].p99 * 1000:.0f} ms — queueing shows in the tail")


if __name__ == "__main__":
    asyncio.run(main())
