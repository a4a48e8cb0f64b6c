"""Prompt-cache reads and TTFT on the emulator: the planner against a hindsight oracle, off and top-level auto.

Real SDK clients over real HTTP to an in-process emulator (``latencykit.emulator``) with
its prompt cache and a timing model in which prefill costs time per *uncached* prompt
token, so TTFT falls on cache hits. All numbers are EMULATED: they show what the planner
changes in cache behaviour, not what a provider's latency will be.

    python benchmarks/caching.py              # 50 calls per family
    python benchmarks/caching.py --calls 12   # quicker

Every shape is one prompt family of ``--calls`` requests (``tests/_cache_shapes.py``):
agent single-turn and multi-turn, RAG with the documents in the user turn, few-shot
examples, a timestamp in the system prompt, tools only, a system prompt of several blocks,
OpenAI chat with a shared prefix. Modes, each on a fresh emulator, same requests:

- ``planner``: latencykit's default ``cache="auto"``;
- ``oracle``: markers placed with hindsight (the end of what a call shares with the previous
  and with the next call; for OpenAI one fixed ``prompt_cache_key``) — the most any
  placement of breakpoints can read;
- ``off``: ``cache="off"``, the requests as written;
- ``top-level auto``: ``cache="off"`` plus the API's top-level ``cache_control`` (Anthropic).

``of oracle`` is the planner's (or the mode's) cache-read tokens over the oracle's, from
the third call of the family on (the first two calls are where the planner learns).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import latencykit as lk  # noqa: E402
from latencykit.emulator import Emulator, PromptCache, TimingModel  # noqa: E402

from _cache_shapes import CC, SHAPES, oracle_openai, oracle_requests, shape_requests  # noqa: E402

# Prefill 40 µs/token (≈ 200 ms for a 5k-token prompt), 20 ms base, 5 ms/token decode.
TIMING = TimingModel(base_ttft=0.02, prefill_per_token=4e-5, decode_per_token=0.005, output_tokens=4, jitter=0.05)
MODES = ("planner", "oracle", "off", "top-level auto")
LEARNING_CALLS = 2


def run(shape: str, mode: str, calls: int) -> list[lk.CallRecord]:
    """One family of ``calls`` requests in one mode on a fresh emulator; returns the records."""
    api, requests = shape_requests(shape, calls)
    if mode == "oracle":
        requests = oracle_requests(requests) if api == "messages" else oracle_openai(requests)
    elif mode == "top-level auto":
        requests = [{**r, "cache_control": CC} for r in requests]
    cache = "auto" if mode == "planner" else "off"
    with Emulator(timing=TIMING, seed=1, cache_model=PromptCache()) as emu:
        if api == "messages":
            with lk.Anthropic(base_url=emu.base_url, api_key="x", cache=cache) as c:
                for req in requests:
                    c.messages.create(**req)
                return list(c.latency.calls)
        with lk.OpenAI(base_url=emu.base_url + "/v1", api_key="x", cache=cache) as o:
            for req in requests:
                o.chat.completions.create(**req)
            return list(o.latency.calls)


def pct(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    if args.calls <= LEARNING_CALLS:
        parser.error(f"--calls must be > {LEARNING_CALLS}")
    rows: list[tuple[Any, ...]] = []
    for shape in SHAPES:
        records = {}
        for mode in MODES:
            if mode == "top-level auto" and shape.startswith("OpenAI"):
                continue
            records[mode] = run(shape, mode, args.calls)
        oracle = sum(r.cache_read_tokens or 0 for r in records["oracle"][LEARNING_CALLS:])
        for mode, recs in records.items():
            read = sum(r.cache_read_tokens or 0 for r in recs[LEARNING_CALLS:])
            total = sum(r.input_tokens or 0 for r in recs)
            ttft = [r.ttft for r in recs if r.ttft is not None]
            share = read / oracle if oracle else float("nan")
            hit = sum(r.cache_read_tokens or 0 for r in recs) / total if total else 0.0
            rows.append((shape, mode, share, hit, statistics.median(ttft) * 1000, pct(ttft, 0.99) * 1000))
    print(f"EMULATED — {args.calls} calls per family; Anthropic Messages (claude-sonnet-5) unless OpenAI; timing {TIMING}")
    print()
    print("| shape | mode | of oracle (call 3+) | hit rate (tokens) | TTFT P50 ms | TTFT P99 ms |")
    print("|---|---|---:|---:|---:|---:|")
    for shape, mode, share, hit, p50, p99 in rows:
        print(f"| {shape} | {mode} | {share:.2f} | {hit:.0%} | {p50:.1f} | {p99:.1f} |")


if __name__ == "__main__":
    main()
