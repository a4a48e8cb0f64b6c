"""latencykit.vllm clients (async), mirroring test_vllm_clients_sync.py. Emulated latencies."""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from openai.types.chat import ChatCompletion

import latencykit as lk
from latencykit.emulator import Emulator, TimingModel, VLLMConfig
from latencykit.llamacpp import AsyncLlamaCpp
from latencykit.vllm import AsyncVLLM, async_anthropic_client

from _replay import Replay, recorded_body

TIMING = TimingModel(time_scale=0.02, output_tokens=32)
HI = [{"role": "user", "content": "Hello there"}]


@pytest.fixture(scope="module")
def vemu() -> Iterator[Emulator]:
    """An emulator in vLLM mode serving model "tiny"; speculative decoding that accepts every draft."""
    with Emulator(timing=TIMING, vllm=VLLMConfig(model="tiny", spec_tokens=3, spec_acceptance=1.0)) as emu:
        yield emu


@pytest.fixture
async def client(vemu: Emulator) -> Any:
    """An AsyncVLLM client on the emulator, model not given."""
    c = AsyncVLLM(vemu.base_url, max_retries=0)
    yield c
    await c.close()


async def test_model_detected_and_continuous_usage_requested(client: AsyncVLLM, vemu: Emulator) -> None:
    """No model= and no stream_options: the request names the served model and asks for continuous usage."""
    await client.chat.completions.create(messages=HI, max_tokens=8)
    body = vemu.requests[-1].body
    assert await client.detect_model() == "tiny" and body["model"] == "tiny"
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}


async def test_tokens_per_step_with_speculative_decoding(client: AsyncVLLM) -> None:
    """Every draft accepted: each decode step brings 4 tokens; the record says so per call."""
    completion = await client.chat.completions.create(messages=HI, max_tokens=32)
    rec = client.latency.last
    assert isinstance(completion, ChatCompletion) and rec is not None
    assert rec.output_tokens == 32
    assert rec.extra["decode_steps"] == 9
    assert rec.extra["tokens_per_step"] == pytest.approx(31 / 8)


async def test_stream_chunks_carry_running_usage(client: AsyncVLLM) -> None:
    """A caller's stream sees vLLM's running usage on each chunk."""
    stream = await client.chat.completions.create(messages=HI, max_tokens=9, stream=True)
    counts = [c.usage.completion_tokens async for c in stream if c.usage]
    assert counts == sorted(counts) and counts[-1] == 9


async def test_continuous_usage_off(vemu: Emulator) -> None:
    """``continuous_usage=False`` sends no continuous_usage_stats, also from a with_options() copy."""
    client = AsyncVLLM(vemu.base_url, model="tiny", continuous_usage=False, max_retries=0)
    await client.with_options(timeout=10).chat.completions.create(messages=HI, max_tokens=4)
    assert vemu.requests[-1].body["stream_options"] == {"include_usage": True}
    await client.close()


async def test_anthropic_client_on_the_messages_endpoint(vemu: Emulator) -> None:
    """``async_anthropic_client(url)`` is a latencykit AsyncAnthropic client on the server root."""
    client = async_anthropic_client(vemu.base_url, max_retries=0)
    assert isinstance(client, lk.AsyncAnthropic)
    msg = await client.messages.create(model="tiny", max_tokens=8, messages=HI)  # type: ignore[list-item]
    rec = client.latency.last
    assert rec is not None and rec.provider == "anthropic" and rec.output_tokens == msg.usage.output_tokens
    await client.close()


async def test_recorded_llama_server_stream_gives_server_timings() -> None:
    """The real llama-server stream: its final chunk's timings go to the record."""
    with Replay().serve(recorded_body("real-llama-server-sse.txt")) as replay:
        client = AsyncLlamaCpp(replay.base_url, model="tiny", max_retries=0)
        await client.chat.completions.create(messages=HI, max_tokens=4)
        rec = client.latency.last
        assert rec is not None and rec.output_tokens == 4
        assert rec.extra["server_timings"]["prompt_n"] == 21
        assert rec.extra["server_ttft"] == pytest.approx(rec.extra["server_timings"]["prompt_ms"] / 1000)
        await client.close()


async def test_caller_stream_still_gives_steps_and_server_timings(client: AsyncVLLM) -> None:
    """``stream=True`` from the caller: the figures on the hidden usage-only chunk reach the record."""
    chunks = [c async for c in await client.chat.completions.create(messages=HI, max_tokens=32, stream=True)]
    rec = client.latency.last
    assert rec is not None and rec.output_tokens == 32 and all(c.choices for c in chunks)
    assert rec.extra["decode_steps"] == 9 and rec.extra["itl_per_token_mean"] > 0
    with Replay().serve(recorded_body("real-llama-server-sse.txt")) as replay:
        llama = AsyncLlamaCpp(replay.base_url, model="tiny", max_retries=0)
        chunks = [c async for c in await llama.chat.completions.create(messages=HI, max_tokens=4, stream=True)]
        rec = llama.latency.last
        assert rec is not None and rec.output_tokens == 4 and all(c.choices for c in chunks)
        assert rec.extra["server_timings"]["prompt_n"] == 21
        assert rec.extra["server_ttft"] == pytest.approx(rec.extra["server_timings"]["prompt_ms"] / 1000)
        await llama.close()
