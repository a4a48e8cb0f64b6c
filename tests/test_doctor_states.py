"""Every pressure state of the emulator's vLLM mode at 1, 2 and 8 running sequences, through the
real OpenAI SDK (latencykit.vllm clients), scraped from the Doctor's own thread: the doctor
names the state, and only it, and its advice fits. Emulated latencies.

The KV state is the preset's 4,096-token (256-block) cache, checked with `VLLMConfig.kv_for`: prompts of about 4096 / (k + 0.6) tokens let k sequences run and leave the
next one waiting for memory — at usage 0.64 for one sequence, far from "full".

The client and the emulator share two cores and one GIL: under load (other jobs on the box) 8
streams' client TTFT runs ~0.3 s above the engine's, which the doctor rightly calls time outside
the engine. That rule has its own state here; for the others its gap line is lifted to 1 s.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import openai
import pytest

import latencykit.vllm as lkv
from latencykit import CallRecord
from latencykit.emulator import Emulator, TimingModel, VLLMConfig, count_tokens
from latencykit.vllm import Diagnosis, Doctor, Thresholds

# Fast decode, no prefill cost to speak of: the states come from the scheduler, not from slowness.
TIMING = TimingModel(base_ttft=0.01, prefill_per_token=0.0, decode_per_token=0.002, output_tokens=400, tokens_per_chunk=2)
SERVER_ONLY = Thresholds(outside_gap=1.0)
# The KV state's outputs are short (k sequences must fit with them): a slower decode keeps each
# sequence, and so the wait for memory, ~0.8 s long: all k + 3 are open together even when a busy
# client (a second test worker on the same two cores) sends them slowly.
KV_TIMING = TimingModel(base_ttft=0.01, prefill_per_token=0.0, decode_per_token=0.05, output_tokens=400, tokens_per_chunk=2)
WORDS = "alpha beta gamma delta server token cache prefix stream client".split()
KV_OUTPUT = 16
LONG = 250
RUNNING = (1, 2, 8)


def words(n: int, seed: int) -> str:
    """``n`` words, different for each seed."""
    return " ".join(WORDS[(i * 7 + seed * 13 + i // 5) % len(WORDS)] + str(seed) for i in range(n))


def messages(system: str, question: str) -> list[dict[str, str]]:
    """System prompt + user turn."""
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def prompt_tokens(system: str, i: int) -> int:
    """The emulator's prompt-token count of call ``i`` with ``system``."""
    return count_tokens({"model": "tiny", "messages": messages(system, f"question {i}")})


def system_of(tokens: int, seed: int) -> str:
    """A system prompt whose call ``seed`` has at most ``tokens`` prompt tokens (and nearly that many)."""
    n = max(1, tokens // 2)
    while prompt_tokens(words(n + 1, seed), seed) <= tokens:
        n += 1
    while n > 1 and prompt_tokens(words(n, seed), seed) > tokens:
        n -= 1
    return words(n, seed)


@dataclass
class Traffic:
    """What one state is driven with: calls (system prompt, max_tokens), how many the client keeps open."""

    config: VLLMConfig
    calls: list[tuple[str, int]]
    at_once: int
    warm: str = "warm up"
    timing: TimingModel = TIMING
    notes: dict[str, Any] = field(default_factory=dict)


def kv_traffic(k: int) -> Traffic:
    """k sequences fit the preset's 256 blocks with their output; a (k+1)th prompt does not."""
    cfg = VLLMConfig.pressure("kv_cache_pressure")
    target = int(cfg.kv_cache_tokens / (k + 0.6))
    systems = [system_of(target, i) for i in range(k + 3)]
    sizes = [prompt_tokens(s, i) for i, s in enumerate(systems)]
    blocks = [cfg.blocks(n) for n in sizes]
    # k of the largest run to the end of their output; any k + 1 prompts overflow the cache.
    assert VLLMConfig.kv_for(k, max(sizes) + KV_OUTPUT) <= cfg.kv_cache_tokens, (k, sizes)
    assert (k + 1) * min(blocks) > cfg.num_blocks, (k, sizes)
    return Traffic(cfg, [(s, KV_OUTPUT) for s in systems], at_once=k + 3, timing=KV_TIMING, notes={"prompt_tokens": sizes})


def traffic(state: str, k: int) -> Traffic:
    """Traffic that shows ``state`` with ``k`` sequences running (the server or the client limits it to k)."""
    # Where the client, not the server, limits the running count, streams last long enough
    # (~0.5 s) that all k are open together even when the client sends them slowly.
    if state == "healthy":
        return Traffic(VLLMConfig.pressure(state), [(words(30, i), LONG) for i in range(max(3, k))], at_once=k)
    if state == "queue_pressure":
        # Long enough that a loaded machine still has all k running together (60 tokens, 0.12 s,
        # once saw 3 of 8 in the floor tier).
        return Traffic(VLLMConfig.pressure(state, max_num_seqs=k), [(words(30, i), LONG) for i in range(k + 3)], at_once=k + 3)
    if state == "kv_cache_pressure":
        return kv_traffic(k)
    if state == "weak_speculative_decoding":
        return Traffic(VLLMConfig.pressure(state), [(words(30, i), LONG) for i in range(max(2, k))], at_once=k)
    if state == "low_prefix_cache_hit_rate":
        shared = words(1500, 1)
        return Traffic(VLLMConfig.pressure(state), [(shared, LONG)] * max(2, k), at_once=k, warm=shared)
    if state == "time_outside_engine":
        return Traffic(VLLMConfig.pressure(state), [(words(30, i), LONG) for i in range(max(3, k))], at_once=k)
    raise AssertionError(state)


async def drive(t: Traffic, thresholds: Optional[Thresholds] = None) -> tuple[Diagnosis, list[CallRecord]]:
    """Serve ``t.config``, send ``t.calls`` with at most ``t.at_once`` open, sample from a thread, diagnose."""
    with Emulator(timing=t.timing, vllm=t.config) as emu:
        client = lkv.AsyncVLLM(emu.base_url, max_retries=0)
        await client.chat.completions.create(messages=messages(t.warm, "warm up"), max_tokens=2)
        doc = Doctor(emu.base_url, records=client.latency, thresholds=thresholds)
        gate = asyncio.Semaphore(t.at_once)

        async def one(i: int, system: str, max_tokens: int) -> None:
            async with gate:
                await client.chat.completions.create(messages=messages(system, f"question {i}"), max_tokens=max_tokens)

        with doc.sampling(0.02):
            await asyncio.gather(*(one(i, s, m) for i, (s, m) in enumerate(t.calls)))
        records = list(client.latency.calls)
        await client.close()
        return doc.diagnose(), records


def check_advice(d: Diagnosis) -> None:
    """The advice fits the finding: memory for memory pressure, batching for a queue."""
    for f in d.findings:
        if f.kind == "kv_cache_pressure":
            assert "--gpu-memory-utilization" in f.advice and "--kv-cache-dtype fp8" in f.advice, f.advice
            assert "cannot help" in f.advice and "raise --max-num-seqs" not in f.advice, f.advice
        if f.kind == "queue_pressure":
            assert "raise --max-num-seqs" in f.advice and "--gpu-memory-utilization" not in f.advice, f.advice


STATES = ("healthy", "queue_pressure", "kv_cache_pressure", "weak_speculative_decoding", "low_prefix_cache_hit_rate", "time_outside_engine")


@pytest.mark.parametrize("k", RUNNING)
@pytest.mark.parametrize("state", STATES)
async def test_every_state_at_1_2_and_8_running_sequences(state: str, k: int) -> None:
    """The doctor names exactly the state the emulator is in, with k sequences running."""
    t = traffic(state, k)
    d, records = await drive(t, None if state == "time_outside_engine" else SERVER_ONLY)
    assert d.kinds == (state,), f"{state} at {k} running: {d}\n{d.window}"
    assert d.window["running_max"] == k, d.window
    assert all(r.outcome == "completed" for r in records)
    check_advice(d)
    ev = d.findings[0].evidence
    if state == "kv_cache_pressure":
        # waiting for memory, not for a slot: the free part is smaller than one more sequence
        assert ev["running"] == k and ev["waiting"] >= 1 and ev["preemptions"] == 0, ev
        assert ev["kv_free"] < ev["kv_need_per_sequence"], ev
        if k == 1:
            assert ev["kv_cache_usage"] < 0.9, ev  # far from "usage near 1", still no room
    if state == "queue_pressure":
        assert ev["running_max"] == k and ev["waiting_max"] >= 1 and ev["kv_room_sequences_min"] > 1, ev


def test_kv_pressure_sync_client_in_threads() -> None:
    """The same KV state (2 running) through the sync client, calls from threads: KV-cache pressure."""
    t = kv_traffic(2)
    with Emulator(timing=t.timing, vllm=t.config) as emu:
        client = lkv.VLLM(emu.base_url, max_retries=0)
        doc = Doctor(emu.base_url, records=client.latency, thresholds=SERVER_ONLY)
        with doc.sampling(0.02), concurrent.futures.ThreadPoolExecutor(t.at_once) as pool:
            calls = [pool.submit(client.chat.completions.create, messages=messages(s, f"question {i}"), max_tokens=m) for i, (s, m) in enumerate(t.calls)]
            assert all(c.result().choices[0].finish_reason == "length" for c in calls)
        d = doc.diagnose()
        client.close()
    assert d.kinds == ("kv_cache_pressure",) and d.window["running_max"] == 2, str(d)
    check_advice(d)


def test_kv_pressure_from_server_metrics_alone_plain_sdk_and_cli() -> None:
    """Plain ``openai.OpenAI`` traffic (no latencykit records) in the 1-running KV state: the CLI,
    scraping meanwhile, and the API give the same verdict, KV-cache pressure, from the server's metrics.

    The running sequence is a stream the test closes only once the CLI has answered, so the state
    (1 running, 3 waiting for memory) lasts as long as a loaded machine needs to start the CLI.
    """
    cfg = VLLMConfig.pressure("kv_cache_pressure")
    system = system_of(int(cfg.kv_cache_tokens / 1.6), 0)
    # answers up to 4,000 tokens (the emulator caps them at output_tokens); at 50 tokens/s the held
    # sequence stays under 0.9 of the cache for ~20 s
    timing = TimingModel(base_ttft=0.01, prefill_per_token=0.0, decode_per_token=0.02, output_tokens=4000)
    with Emulator(timing=timing, vllm=cfg) as emu:
        sdk = openai.OpenAI(base_url=emu.base_url + "/v1", api_key="EMPTY", max_retries=0)
        cli_done = threading.Event()

        def hold() -> None:
            stream = sdk.chat.completions.create(model="tiny", messages=messages(system, "q0"), max_tokens=4000, stream=True)
            for _ in stream:
                if cli_done.is_set():
                    break
            stream.close()  # frees its KV: the waiting requests run

        def until(ready: Callable[[], bool]) -> None:
            deadline = time.monotonic() + 30
            while not ready():
                assert time.monotonic() < deadline, "the emulator never reached the state"
                time.sleep(0.01)

        doc = Doctor(emu.base_url)
        with doc.sampling(0.05), concurrent.futures.ThreadPoolExecutor(4) as pool:
            held = pool.submit(hold)
            until(lambda: emu.vllm.engine.active == 1)
            rest = [pool.submit(sdk.chat.completions.create, model="tiny", messages=messages(system, f"q{i}"), max_tokens=8) for i in range(1, 4)]
            until(lambda: emu.vllm.engine.waiting == 3)
            try:
                cli = subprocess.run(
                    [sys.executable, "-m", "latencykit.cli", "doctor", "--url", emu.base_url, "--duration", "0.3", "--interval", "0.1", "--json"],
                    capture_output=True, text=True, timeout=120,
                )  # fmt: skip
            finally:
                cli_done.set()
            held.result()
            assert all(r.result().choices[0].finish_reason == "length" for r in rest)
        api = doc.diagnose()
    assert cli.returncode == 0, cli.stderr
    out = json.loads(cli.stdout)
    assert [f["kind"] for f in out["findings"]] == ["kv_cache_pressure"], cli.stdout
    assert api.kinds == ("kv_cache_pressure",), str(api)
    evidence = out["findings"][0]["evidence"]
    assert evidence["running"] == 1 and evidence["waiting"] == 3 and evidence["kv_cache_usage"] < 0.9, evidence
