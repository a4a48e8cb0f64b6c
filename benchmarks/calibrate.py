"""Calibrate ``latencykit bench`` against the emulator with known timing, beside a thin reader.

The emulator runs in its own process with the ``ideal`` preset (TTFT 200 ms, 10 ms per token,
30 tokens, no slot limit, no slowdown, no jitter: E2E 490 ms whatever the load). At each
stream count the same traffic is sent first through the thin raw-HTTP reader, then through
latencykit's async client (``--workers`` processes), and the report shows TTFT P50/P99 of
both, their ratio, throughput against the ideal c / 0.49 s, client cores, GC pauses, the
emulator's own lateness, the machine's load and the bench's warnings (client-bound /
client-starved / server-late).

    python benchmarks/calibrate.py                        # 1, 16, 64, 256 streams
    python benchmarks/calibrate.py --streams 1,16 --rounds 4
    python benchmarks/calibrate.py --workers 64=2,256=2   # worker processes per stream count
    python benchmarks/calibrate.py --streams 64 --sdk      # the raw SDK's async client too
    python benchmarks/calibrate.py --api anthropic         # through the Anthropic SDK (cheaper per event)
    python benchmarks/calibrate.py --http aiohttp          # the SDKs' DefaultAioHttpClient backend

Harness choices, the same for both clients: the first request of every stream is warm-up
(it opens the stream's connection; excluded from the figures and from the client's health);
the slots start spread over ``--ramp`` seconds (default 0.49, one ideal request), because
against a server without jitter streams that start together stay in lock-step, every chunk
of every stream due in the same millisecond; at least ``--min-requests`` measured requests
per cell (P99 of fewer than 100 is the maximum). The heap present before a cell is frozen
(``gc.freeze()``), so a full collection does not rescan the imported SDKs.

Goal: latencykit's TTFT P50 and P99 within 5 % of the thin reader's at <= 64 streams
(with workers as needed); where the client is the limit the bench must say so.
All figures are EMULATED.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import subprocess
import sys
import time
import urllib.request
from typing import Any

from latencykit.bench._run import BenchConfig, run_bench


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_emulator(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "latencykit.cli", "bench", "emulator", "--ideal", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the emulator did not start")


def _cell(base_url: str, streams: int, client: str, workers: int, rounds: int, ramp: float, min_requests: int,
          api: str = "openai", http: str = "httpx") -> Any:
    measured = max(streams * (rounds - 1), min_requests if streams > 1 else min(min_requests, 40))
    config = BenchConfig(target="emulator", base_url=base_url, traffic="chat", requests=streams + measured,
                         concurrency=(streams,), warmup=streams, workers=workers, exact_output=False, ramp=ramp,
                         api=api, matrix=({"client": client} if client == "thin" else {"client": client, "http": http},))  # fmt: skip
    return run_bench(config).cells[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", default="1,16,64,256", help="stream counts (default 1,16,64,256)")
    parser.add_argument("--rounds", type=int, default=6, help="requests per stream, the first being warm-up (default 6)")
    parser.add_argument("--min-requests", type=int, default=200,
                        help="measured requests per cell at least (default 200; 40 at 1 stream)")  # fmt: skip
    parser.add_argument("--ramp", type=float, default=0.49, help="seconds over which the slots start (default 0.49)")
    parser.add_argument("--workers", default="64=2,256=2", help="stream=workers pairs for latencykit (default 64=2,256=2)")
    parser.add_argument("--sdk", action="store_true",
                        help="also measure the raw SDK's async client (same workers): tells latencykit's cost from the SDK's")  # fmt: skip
    parser.add_argument("--api", choices=("openai", "anthropic"), default="openai",
                        help="API spoken to the emulator, through that provider's SDK (default openai)")  # fmt: skip
    parser.add_argument("--http", choices=("httpx", "aiohttp"), default="httpx",
                        help="the SDK clients' HTTP backend: httpx (their default) or their DefaultAioHttpClient")  # fmt: skip
    args = parser.parse_args()
    streams = [int(s) for s in args.streams.split(",")]
    workers = {int(k): int(v) for k, v in (p.split("=") for p in args.workers.split(",") if p)}
    port = _free_port()
    proc = _start_emulator(port)
    base = f"http://127.0.0.1:{port}"
    print(f"api: {args.api} (the {args.api} SDK's async client, HTTP backend {args.http})")
    print(f"machine: {os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}")
    try:
        for c in streams:
            w = workers.get(c, 1)
            thin = _cell(base, c, "thin", 1, args.rounds, args.ramp, args.min_requests, args.api)
            lk = _cell(base, c, "latencykit", w, args.rounds, args.ramp, args.min_requests, args.api, args.http)
            sdk = _cell(base, c, "sdk", w, args.rounds, args.ramp, args.min_requests, args.api, args.http) if args.sdk else None
            _print_row(c, thin, lk, w, sdk)
    finally:
        proc.terminate()
        proc.wait(10)
    print("\nEMULATED. truth: TTFT 200 ms, E2E 490 ms, ideal throughput c / 0.49 s")


def _ms(v: Any) -> str:
    return "-" if v is None else f"{v * 1000:.0f}"


def _print_row(c: int, thin: Any, lk: Any, workers: int, sdk: Any = None) -> None:
    ideal = c / 0.49
    cells = [("thin reader", thin), (f"latencykit ×{workers}", lk)]
    if sdk is not None:
        cells.append((f"raw SDK ×{workers}", sdk))
    for name, cell in cells:
        p50, p99 = cell.value("ttft", 0.5), cell.value("ttft", 0.99)
        tp = cell.throughput()["completed_rps"] or 0
        cores = sum(h["cores"] or 0 for h in cell.health)
        gc_max = max((h.get("gc_max") or 0 for h in cell.health), default=0)
        load = max((h.get("load_average") or 0 for h in cell.health), default=0)
        late = (cell.server or {}).get("first", {}).get("p99")
        ratio = ""
        if cell is not thin:
            t50, t99 = thin.value("ttft", 0.5), thin.value("ttft", 0.99)
            if p50 and p99 and t50 and t99:
                ratio = f"  vs thin: p50 {p50 / t50 - 1:+.1%}, p99 {p99 / t99 - 1:+.1%}"
        print(f"c={c:<4} {name:<16} n={len(cell.measured):<4} TTFT p50 {_ms(p50):>5} / p99 {_ms(p99):>5} ms  "
              f"{tp:6.1f} req/s ({tp / ideal:.0%} of ideal)  {cores:.2f} cores  GC max {_ms(gc_max)} ms  "
              f"emulator late p99 {_ms(late)} ms  load {load:.1f}{ratio}", flush=True)  # fmt: skip
        for w in cell.warnings:
            print(f"         warning: {w}", flush=True)


if __name__ == "__main__":
    main()
