"""Client CPU per streamed call: raw SDK vs latencykit, side by side in one run.

The emulator runs in a *separate process* (``latencykit emulator``) with zero server delay,
so this process's CPU time (``time.process_time``) is the client's alone: SDK parsing plus,
for latencykit, its per-event tap. Calls of each client type are interleaved in rounds so
machine noise hits both alike; the reported figure is the ratio of medians of per-round
CPU time per call.

    python benchmarks/overhead.py                 # 500-token streams, 20 rounds × 10 calls
    python benchmarks/overhead.py --rounds 5      # quicker

Goals: ratio ≤ 1.05 with telemetry unconfigured (no OpenTelemetry SDK: the API's no-ops);
≤ 1.10 with the OpenTelemetry SDK and in-memory exporters on (spans + metrics).
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


def _otel_sdk_telemetry() -> lk.Telemetry:
    """latencykit Telemetry on a real OTel SDK: batch span processor + in-memory exporters."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return lk.Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)


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
        otel = _otel_sdk_telemetry()
        recorder = lambda: lk.Recorder(max_calls=100)  # noqa: E731
        ant_lk = lk.Anthropic(base_url=base, api_key="k", max_retries=0, recorder=recorder())
        ant_otel = lk.Anthropic(base_url=base, api_key="k", max_retries=0, recorder=recorder(), telemetry=otel)
        oai_raw = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
        oai_lk = lk.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0, recorder=recorder())
        oai_otel = lk.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0, recorder=recorder(), telemetry=otel)
        rows = {
            "anthropic messages.create(stream=True)": (_anthropic_call(ant_raw), _anthropic_call(ant_lk), _anthropic_call(ant_otel)),
            "openai chat.completions.create(stream=True)": (_chat_call(oai_raw), _chat_call(oai_lk), _chat_call(oai_otel)),
        }
        for calls in rows.values():  # warm up imports, pools and caches
            for call in calls * 2:
                call()
        print(f"client CPU per streamed call, {OUTPUT_TOKENS} output tokens, zero server delay, "
              f"{args.rounds} rounds × {args.calls} calls, emulator in a separate process (pid {os.getpid()} measured)")
        print(f"{'call':44} {'raw SDK ms':>10} {'lk ms':>8} {'ratio':>6} {'lk+OTel SDK ms':>15} {'ratio':>6}")
        plain, with_otel = [], []
        for name, calls in rows.items():
            samples: list[list[float]] = [[], [], []]
            for i in range(args.rounds):
                order = list(range(3)) if i % 2 == 0 else list(reversed(range(3)))
                for k in order:
                    samples[k].append(_cpu_per_call(calls[k], args.calls))
            r, l, o = (statistics.median(x) for x in samples)
            plain.append(l / r)
            with_otel.append(o / r)
            print(f"{name:44} {r * 1000:10.2f} {l * 1000:8.2f} {l / r:6.3f} {o * 1000:15.2f} {o / r:6.3f}")
        print(f"{'overall (geometric mean)':44} {'':10} {'':8} {statistics.geometric_mean(plain):6.3f} "
              f"{'':15} {statistics.geometric_mean(with_otel):6.3f}")
        print("goals: latencykit / raw <= 1.05 (telemetry unconfigured); with the OTel SDK on <= 1.10")
        for c in (ant_raw, ant_lk, ant_otel, oai_raw, oai_lk, oai_otel):
            c.close()


if __name__ == "__main__":
    main()
