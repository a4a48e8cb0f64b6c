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
OpenAI chat with a shared prefix, and k = 2, 3, 5, 20 static system prompts sent in turn
(in order and at random, tools before them; a call every 5 s, or for "rare" every 2 minutes,
so each prompt comes back only after its 5-minute cache lifetime; at least 2k + 5 calls).
Cache time is a hand-moved clock shared by the client's ledger and the emulator's cache.
Modes, each on a fresh emulator, same requests:

- ``planner``: latencykit's default ``cache="auto"``;
- ``oracle``: markers placed with hindsight (the end of what a call shares with the previous
  and with the next call, and of the longest prefix it shares with any call less than a
  cache lifetime before or after it; for OpenAI one fixed ``prompt_cache_key``) — the most
  any placement of breakpoints can read;
- ``off``: ``cache="off"``, the requests as written;
- ``top-level auto``: ``cache="off"`` plus the API's top-level ``cache_control`` (Anthropic).

A second table runs the OpenAI GPT-5.6 shapes (``tests/_openai_cache_shapes.py``: an agent,
three system prompts in turn, RAG, few-shot, a two-part system prompt, a growing conversation)
on Chat Completions and Responses, where the cache is read only at ``prompt_cache_breakpoint``s
(the oracle places them by hand with hindsight; ``off`` leaves OpenAI's implicit breakpoint at
the end of the prompt alone), judged from the second sight of the family's prompt (the 2nd call;
for three prompts in turn the 4th), with the tokens written and the input
cost saved at GPT-5.6 prices (reads 0.1×, writes 1.25× the input price: negative when writes
are never read).

``of oracle`` is the planner's (or the mode's) cache-read tokens over the oracle's on the
judged calls (``measured`` in ``tests/_cache_shapes.py``): from the third call of the family
on (the first two calls are where the planner learns); for rotating prompts from the second
sight of each prompt on, and for rare ones every call from the third on but the chance
returns of a random order. ``written, unread`` (planner and oracle, rare prompts) counts
the calls after the first that wrote to the cache although their system prompt is not sent
again within its lifetime.
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

from _cache_shapes import (  # noqa: E402
    CC, SHAPES, Clock, measured, oracle_openai, oracle_requests, rare, shape_calls, shape_gap, shape_requests, unread_writes,
)
import _openai_cache_shapes as gpt56  # noqa: E402

# Prefill 40 µs/token (≈ 200 ms for a 5k-token prompt), 20 ms base, 5 ms/token decode.
TIMING = TimingModel(base_ttft=0.02, prefill_per_token=4e-5, decode_per_token=0.005, output_tokens=4, jitter=0.05)
MODES = ("planner", "oracle", "off", "top-level auto")
LEARNING_CALLS = 2


def run(shape: str, mode: str, calls: int) -> list[lk.CallRecord]:
    """One family of ``calls`` requests in one mode on a fresh emulator; returns the records."""
    api, requests = shape_requests(shape, calls)
    gap = shape_gap(shape)
    if mode == "oracle":
        requests = oracle_requests(requests, gap) if api == "messages" else oracle_openai(requests)
    elif mode == "top-level auto":
        requests = [{**r, "cache_control": CC} for r in requests]
    with Emulator(timing=TIMING, seed=1, cache_model=PromptCache()) as emu:
        clock = Clock(emu)
        policy = lk.CachePolicy("auto" if mode == "planner" else "off", derive_key=mode == "planner", clock=clock)
        if api == "messages":
            with lk.Anthropic(base_url=emu.base_url, api_key="x", cache=policy) as c:
                for req in requests:
                    c.messages.create(**req)
                    clock.advance(gap)
                return list(c.latency.calls)
        with lk.OpenAI(base_url=emu.base_url + "/v1", api_key="x", cache=policy) as o:
            for req in requests:
                o.chat.completions.create(**req)
                clock.advance(gap)
            return list(o.latency.calls)


def run_gpt56(shape: str, api: str, mode: str, calls: int) -> tuple[list[lk.CallRecord], lk.CacheReport]:
    """One GPT-5.6 family (``tests/_openai_cache_shapes.py``) in one mode on a fresh emulator: records and cache report."""
    requests = gpt56.shape_requests(shape, api, calls)
    if mode == "oracle":
        requests = gpt56.oracle_openai(api, requests)
    with Emulator(timing=TIMING, seed=1, cache_model=PromptCache()) as emu:
        clock = Clock(emu)
        policy = lk.CachePolicy("auto" if mode == "planner" else "off", derive_key=mode == "planner", clock=clock)
        with lk.OpenAI(base_url=emu.base_url + "/v1", api_key="x", cache=policy) as o:
            records = gpt56.run_family(o, api, requests, clock, gpt56.shape_gap(shape))
            return records, o.latency.cache_report()


def gpt56_table(calls: int, only: str) -> None:
    """The OpenAI GPT-5.6 rows: planner, oracle and off on Chat Completions and Responses."""
    print()
    print(f"EMULATED — OpenAI gpt-5.6, explicit breakpoints; {calls} calls per family, judged from the second sight of the "
          "prompt; cost at reads 0.1×, writes 1.25× the input price")  # fmt: skip
    print()
    print("| shape | API | mode | of oracle (judged calls) | hit rate (tokens) | written | est. input cost saved | TTFT P50 ms | TTFT P99 ms |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for shape in gpt56.SHAPES:
        if only not in shape:
            continue
        for api in gpt56.APIS:
            runs = {mode: run_gpt56(shape, api, mode, calls) for mode in ("planner", "oracle", "off")}
            first = gpt56.second_sight(shape)
            oracle = sum(r.cache_read_tokens or 0 for r in runs["oracle"][0][first:])
            for mode, (recs, report) in runs.items():
                read = sum(r.cache_read_tokens or 0 for r in recs[first:])
                ttft = [r.ttft for r in recs if r.ttft is not None]
                saved = f"{report.saved_tokens:,.0f} ({report.saved_share or 0:.0%})"
                print(f"| {shape} | {'Chat' if api == 'chat.completions' else 'Responses'} | {mode} | {read / oracle if oracle else float('nan'):.2f} "
                      f"| {report.hit_rate_tokens or 0:.0%} | {report.tokens_written or 0:,} | {saved} "
                      f"| {statistics.median(ttft) * 1000:.1f} | {pct(ttft, 0.99) * 1000:.1f} |")  # fmt: skip


def pct(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--only", default="", help="run only the shapes whose name contains this text")
    parser.add_argument("--table", choices=("anthropic", "gpt-5.6", "both"), default="both", help="which table(s) to run")
    args = parser.parse_args()
    if args.calls <= LEARNING_CALLS:
        parser.error(f"--calls must be > {LEARNING_CALLS}")
    if args.table != "anthropic":
        gpt56_table(max(args.calls, gpt56.JUDGED_FROM + 2), args.only)
    if args.table == "gpt-5.6":
        return
    rows: list[tuple[Any, ...]] = []
    for shape in SHAPES:
        if args.only not in shape:
            continue
        calls = shape_calls(shape, args.calls)
        judged = measured(shape, calls)
        records = {}
        for mode in MODES:
            if mode == "top-level auto" and shape.startswith("OpenAI"):
                continue
            records[mode] = run(shape, mode, calls)
        oracle = sum(records["oracle"][i].cache_read_tokens or 0 for i in judged)
        for mode, recs in records.items():
            read = sum(recs[i].cache_read_tokens or 0 for i in judged)
            total = sum(r.input_tokens or 0 for r in recs)
            ttft = [r.ttft for r in recs if r.ttft is not None]
            share = read / oracle if oracle else float("nan")
            hit = sum(r.cache_read_tokens or 0 for r in recs) / total if total else 0.0
            writes = [r.cache_write_tokens or 0 for r in recs]
            unread = len(unread_writes(shape, writes)) if rare(shape) and mode in ("planner", "oracle") else None
            rows.append((shape, calls, mode, share, hit, unread, statistics.median(ttft) * 1000, pct(ttft, 0.99) * 1000))
    print(f"EMULATED — {args.calls} calls per family (rotating prompts: at least 2k + 5); Anthropic Messages "
          f"(claude-sonnet-5) unless OpenAI; timing {TIMING}")  # fmt: skip
    print()
    print("| shape | calls | mode | of oracle (judged calls) | hit rate (tokens) | written, unread | TTFT P50 ms | TTFT P99 ms |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for shape, calls, mode, share, hit, unread, p50, p99 in rows:
        print(f"| {shape} | {calls} | {mode} | {share:.2f} | {hit:.0%} | {'' if unread is None else unread} | {p50:.1f} | {p99:.1f} |")


if __name__ == "__main__":
    main()
