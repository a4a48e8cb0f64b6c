"""Client CPU per streamed call: raw SDK vs latencykit, side by side in one run.

The emulator runs in a *separate process* (``latencykit emulator``) with zero server delay,
so this process's CPU time (``time.process_time``) is the client's alone: SDK parsing plus,
for latencykit, its per-event tap. Calls of each client type are interleaved in rounds so
machine noise hits both alike; the reported figure is the ratio of medians of per-round
CPU time per call.

    python benchmarks/overhead.py                 # 500-token streams, 20 rounds × 10 calls
    python benchmarks/overhead.py --rounds 5      # quicker

Goal (issue #2): ratio ≤ 1.05 with telemetry unconfigured.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from typing import Any, Callable, Iterator

import anthropic
import openai

import latencykit as lk

OUTPUT_TOKENS = 500


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def emulator_process() -> Iterator[str]:
    """Start ``latencykit emulator`` in its own process with no delays; yield its base URL."""
    port = _free_port()
    cmd = [sys.executable, "-m", "latencykit.cli", "emulator", "--port", str(port), "--time-scale", "0",
           "--output-tokens", str(OUTPUT_TOKENS)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(base + "/health", timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the emulator did not start") from None
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(10)


ANT_REQ: dict[str, Any] = {"model": "claude-sonnet-5", "max_tokens": 1024, "messages": [{"role": "user", "content": "Write a story."}]}
CHAT_REQ: dict[str, Any] = {"model": "gpt-5-mini", "max_completion_tokens": 1024, "messages": [{"role": "user", "content": "Write a story."}]}


def _anthropic_call(client: Any) -> Callable[[], int]:
    def call() -> int:
        n = 0
        for _ in client.messages.create(stream=True, **ANT_REQ):
            n += 1
        return n

    return call


def _chat_call(client: Any) -> Callable[[], int]:
    def call() -> int:
        n = 0
        for _ in client.chat.completions.create(stream=True, **CHAT_REQ):
            n += 1
        return n

    return call


def _cpu_per_call(call: Callable[[], int], calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        call()
    return (time.process_time() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=10, help="calls per client per round")
    args = parser.parse_args()
    if args.rounds < 1 or args.calls < 1:
        parser.error("--rounds and --calls must be >= 1")

    with emulator_process() as base:
        ant_raw = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0)
        ant_lk = lk.Anthropic(base_url=base, api_key="k", max_retries=0, recorder=lk.Recorder(max_calls=100))
        oai_raw = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
        oai_lk = lk.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0, recorder=lk.Recorder(max_calls=100))
        pairs = {
            "anthropic messages.create(stream=True)": (_anthropic_call(ant_raw), _anthropic_call(ant_lk)),
            "openai chat.completions.create(stream=True)": (_chat_call(oai_raw), _chat_call(oai_lk)),
        }
        for raw, ours in pairs.values():  # warm up imports, pools and caches
            raw(), ours(), raw(), ours()
        print(f"client CPU per streamed call, {OUTPUT_TOKENS} output tokens, zero server delay, "
              f"{args.rounds} rounds × {args.calls} calls, emulator in a separate process (pid {os.getpid()} measured)")
        print(f"{'call':46} {'raw SDK ms':>11} {'latencykit ms':>14} {'ratio':>7}")
        ratios = []
        for name, (raw, ours) in pairs.items():
            raw_t, lk_t = [], []
            for i in range(args.rounds):
                order = [(raw, raw_t), (ours, lk_t)] if i % 2 == 0 else [(ours, lk_t), (raw, raw_t)]
                for call, sink in order:
                    sink.append(_cpu_per_call(call, args.calls))
            r, l = statistics.median(raw_t), statistics.median(lk_t)
            ratios.append(l / r)
            print(f"{name:46} {r * 1000:11.2f} {l * 1000:14.2f} {l / r:7.3f}")
        print(f"{'overall (geometric mean)':46} {'':11} {'':14} {statistics.geometric_mean(ratios):7.3f}   goal <= 1.05")
        for c in (ant_raw, ant_lk, oai_raw, oai_lk):
            c.close()


if __name__ == "__main__":
    main()
