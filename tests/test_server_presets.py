"""latencykit.vllm.Server / AsyncServer: one client for every self-hosted engine, set up by its preset
(issue #26 §3). Driven against the emulator in vLLM mode (it speaks the same OpenAI API and honours
continuous_usage_stats); the engines' own ports and metrics paths are checked as configured.
Emulated latencies."""

from __future__ import annotations

from typing import Iterator

import pytest

import latencykit as lk
from latencykit.emulator import Emulator, TimingModel, VLLMConfig
from latencykit.vllm import PRESETS, AsyncServer, Server

TIMING = TimingModel(time_scale=0.02, output_tokens=16)
HI = [{"role": "user", "content": "Hello there"}]


@pytest.fixture(scope="module")
def vemu() -> Iterator[Emulator]:
    """An emulator in vLLM mode serving model "tiny"."""
    with Emulator(timing=TIMING, vllm=VLLMConfig(model="tiny")) as emu:
        yield emu


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_engines_with_continuous_usage_ask_for_it(vemu: Emulator, engine: str) -> None:
    """SGLang and trtllm-serve honour continuous_usage_stats: asked for, model detected, a latencykit OpenAI."""
    client = Server(vemu.base_url, engine=engine, max_retries=0)
    assert isinstance(client, lk.OpenAI) and client.engine == engine
    client.chat.completions.create(messages=HI, max_tokens=6)  # type: ignore[arg-type]
    body = vemu.requests[-1].body
    assert body["model"] == "tiny" and body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    rec = client.latency.last
    assert rec is not None and rec.output_tokens == 6 and rec.extra["decode_steps"] >= 1
    client.close()


@pytest.mark.parametrize("engine", ["tgi", "triton"])
def test_engines_without_continuous_usage_do_not_ask(vemu: Emulator, engine: str) -> None:
    """TGI and Triton's frontend send usage once: no continuous_usage_stats in the request; a copy keeps the preset."""
    client = Server(vemu.base_url, engine=engine, max_retries=0, metrics_url=vemu.base_url + "/metrics")
    copy = client.with_options(timeout=10)
    copy.chat.completions.create(messages=HI, max_tokens=4)  # type: ignore[arg-type]
    assert vemu.requests[-1].body["stream_options"] == {"include_usage": True}
    assert copy.engine == engine and copy.metrics_url == vemu.base_url + "/metrics"
    assert copy.metrics().server == "vllm"  # the emulator's page, wherever metrics_url points
    client.close()


def test_metrics_urls_follow_each_engine() -> None:
    """Triton keeps its metrics on its own port, trtllm-serve under /prometheus; the others on /metrics."""
    assert Server(engine="triton").metrics_url == "http://127.0.0.1:8002/metrics"
    assert Server("http://10.1.2.3:9000/v1", engine="triton").metrics_url == "http://10.1.2.3:8002/metrics"
    assert Server("http://h:8000", engine="trtllm").metrics_url == "http://h:8000/prometheus/metrics"
    assert Server("http://h:30000", engine="sglang").metrics_url == "http://h:30000/metrics"
    assert str(Server(engine="sglang").base_url).rstrip("/") == "http://127.0.0.1:30000/v1"
    assert str(Server(engine="tgi").base_url).rstrip("/") == "http://127.0.0.1:8080/v1"
    assert set(PRESETS) == {"vllm", "sglang", "tgi", "triton", "trtllm", "llamacpp"}
    assert PRESETS["sglang"].cached_tokens == "--enable-cache-report" and PRESETS["tgi"].cached_tokens is None


def test_bad_engine_and_metrics_url_name_the_value() -> None:
    """Validation at the boundary, the bad value in the message."""
    with pytest.raises(ValueError, match="'ollama'"):
        Server(engine="ollama")
    with pytest.raises(ValueError, match="'8002'"):
        Server(engine="triton", metrics_url="8002")


async def test_async_server_doctor_reads_the_page(vemu: Emulator) -> None:
    """AsyncServer: same preset logic; the doctor scrapes metrics_url with this client's records."""
    client = AsyncServer(vemu.base_url, engine="sglang", metrics_url=vemu.base_url + "/metrics", max_retries=0)
    await client.chat.completions.create(messages=HI, max_tokens=4)  # type: ignore[arg-type]
    d = client.doctor(duration=0)
    assert d.client["calls"] >= 1 and d.window["server"] == "vllm"
    await client.close()


@pytest.mark.parametrize(("engine", "per_chunk"), [("sglang", True), ("tgi", False), ("triton", False), ("trtllm", True)])
def test_bench_targets_for_each_engine(vemu: Emulator, engine: str, per_chunk: bool) -> None:
    """``latencykit bench --target sglang|tgi|triton|trtllm --base-url URL``: an OpenAI-compatible target;
    per-chunk usage asked only of the engines that honour it (here the emulator answers: EMULATED)."""
    from latencykit.bench._run import BenchConfig, run_bench
    from latencykit.bench._targets import resolve_target

    spec = resolve_target(engine, base_url="http://127.0.0.1:1")
    assert spec.api == "openai" and spec.base_url == "http://127.0.0.1:1/v1" and spec.per_chunk_usage is per_chunk
    with pytest.raises(ValueError, match="needs --base-url"):
        resolve_target(engine)
    run = run_bench(BenchConfig(target=engine, base_url=vemu.base_url, model="tiny", requests=2, concurrency=(1,), exact_output=False))
    assert run.emulated and run.config["target"]["kind"] == engine
    assert vemu.requests[-1].body["stream_options"].get("continuous_usage_stats", False) is per_chunk
