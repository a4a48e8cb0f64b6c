"""Worker for test_prometheus.py: ``python tests/_prom_worker.py N SEED`` makes N calls, serves /metrics until stdin closes.

It starts an in-process emulator, wires latencykit into an OpenTelemetry ``MeterProvider``
whose only reader is the Prometheus exporter (served by ``prometheus_client`` on a free
127.0.0.1 port), makes N streamed calls — alternately Anthropic and OpenAI chat, so the TTFT
histogram has two label sets — with per-request ``x-emulator-ttft-ms`` drawn from a seeded
log-uniform 50–800 ms, then prints one JSON line (port, calls, in-process P99 TTFT, every
call's TTFT) and serves until stdin is closed.
"""

from __future__ import annotations

import json
import math
import random
import sys
from concurrent.futures import ThreadPoolExecutor

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import start_http_server

import latencykit as lk
from latencykit.emulator import Emulator, TimingModel

TTFT_MS = (50.0, 800.0)
THREADS = 16


def ttfts_ms(n: int, seed: int) -> list[int]:
    """N TTFTs in ms, log-uniform over ``TTFT_MS``, so each doubling bucket gets a similar share."""
    rng = random.Random(seed)
    lo, hi = (math.log(v) for v in TTFT_MS)
    return [round(math.exp(rng.uniform(lo, hi))) for _ in range(n)]


def main(n: int, seed: int) -> None:
    """Make the calls, report, serve."""
    server, _thread = start_http_server(0, addr="127.0.0.1")
    provider = MeterProvider(metric_readers=[PrometheusMetricReader()])
    telemetry = lk.Telemetry(meter_provider=provider)
    recorder = lk.Recorder()
    with Emulator(timing=TimingModel(time_scale=0.05, output_tokens=8), seed=seed) as emu:
        ant = lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0, telemetry=telemetry, recorder=recorder)
        oai = lk.OpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, telemetry=telemetry, recorder=recorder)

        def call(i: int, ttft_ms: int) -> None:
            question = f"Question {i}?"
            headers = {"x-emulator-ttft-ms": str(ttft_ms)}
            if i % 2:
                oai.chat.completions.create(model="gpt-4o-mini", max_tokens=16, messages=[{"role": "user", "content": question}], extra_headers=headers)
            else:
                ant.messages.create(model="claude-sonnet-5", max_tokens=16, messages=[{"role": "user", "content": question}], extra_headers=headers)

        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(call, range(n), ttfts_ms(n, seed)))
        ant.close()
        oai.close()
    summary = recorder.summary()
    report = {
        "port": server.server_port,
        "calls": summary.calls,
        "p99": summary["ttft"].p99,
        "ttfts": sorted(r.ttft for r in recorder.calls if r.ttft is not None),
    }
    print(json.dumps(report), flush=True)
    sys.stdin.read()  # serve /metrics until the test closes our stdin
    server.shutdown()
    provider.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
