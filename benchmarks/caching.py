"""Prompt-cache hit rate and TTFT on the emulator: planner on / off / the API's top-level auto.

Real SDK clients over real HTTP to an in-process emulator (``latencykit.emulator``) with
its prompt cache and a timing model in which prefill costs time per *uncached* prompt
token, so TTFT falls on cache hits. All numbers are EMULATED: they show what the planner
changes in cache behaviour, not what a provider's latency will be.

    python benchmarks/caching.py              # 50 calls per cell
    python benchmarks/caching.py --calls 20   # quicker

Shapes: ``agent`` (≈3k tokens of tools, ≈2k of system, a varying question; single-turn
and a 50-turn conversation) and ``rag`` (≈2k-token system, ≈3k tokens of retrieved
documents shared by consecutive questions, a varying question).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import latencykit as lk  # noqa: E402
from latencykit.emulator import Emulator, PromptCache, TimingModel  # noqa: E402

from _cache_shapes import MODEL, agent_system, agent_tools, filler  # noqa: E402

# Prefill 40 µs/token (≈ 200 ms for a 5k-token prompt), 20 ms base, 5 ms/token decode.
TIMING = TimingModel(base_ttft=0.02, prefill_per_token=4e-5, decode_per_token=0.005, output_tokens=4, jitter=0.05)
CC: dict[str, Any] = {"type": "ephemeral"}
Request = Callable[[int, list[dict[str, Any]]], dict[str, Any]]


def agent(i: int, history: list[dict[str, Any]]) -> dict[str, Any]:
    """The agent request for call ``i``."""
    question = {"role": "user", "content": f"Question {i}: what changed in system {i % 7}?"}
    return {"tools": agent_tools(), "system": agent_system(), "messages": [*history, question]}


def rag(i: int, history: list[dict[str, Any]]) -> dict[str, Any]:
    """A RAG request: the same retrieved documents for 5 questions in a row, then new ones."""
    docs = [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": filler(600, f"doc{i // 5}-{d}")}} for d in range(5)]
    content = [*docs, {"type": "text", "text": f"Question {i} about these documents?"}]
    return {"system": agent_system(), "messages": [{"role": "user", "content": content}]}


def run(emu: Emulator, mode: str, make: Request, calls: int, multi_turn: bool) -> list[lk.CallRecord]:
    """``calls`` calls of one shape in one mode; returns their records."""
    cache = "auto" if mode == "planner on" else "off"
    extra = {"cache_control": CC} if mode == "top-level auto" else {}
    history: list[dict[str, Any]] = []
    with lk.Anthropic(base_url=emu.base_url, api_key="x", cache=cache) as c:
        for i in range(calls):
            req = make(i, history)
            msg = c.messages.create(model=MODEL, max_tokens=8, **req, **extra)
            if multi_turn:
                history = [*req["messages"], {"role": "assistant", "content": msg.content}]
        return c.latency.calls


def pct(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    shapes = [("agent, single-turn", agent, False), ("agent, multi-turn", agent, True), ("RAG", rag, False)]
    modes = ["planner on", "off", "top-level auto"]
    rows = []
    for shape, make, multi in shapes:
        for mode in modes:
            with Emulator(timing=TIMING, seed=1, cache_model=PromptCache()) as emu:
                recs = run(emu, mode, make, args.calls, multi)
            report = lk.Recorder()
            for r in recs:
                report.record(r)
            cache = report.cache_report()
            ttft = [r.ttft for r in recs if r.ttft is not None]
            rows.append((shape, mode, cache.hit_rate_calls or 0.0, cache.hit_rate_tokens or 0.0,
                         statistics.median(ttft) * 1000, pct(ttft, 0.99) * 1000))  # fmt: skip
    print(f"EMULATED — {args.calls} calls per row, Anthropic Messages API, model {MODEL}, timing {TIMING}")
    print()
    print("| shape | breakpoints | hit rate (calls) | hit rate (tokens) | TTFT P50 ms | TTFT P99 ms |")
    print("|---|---|---:|---:|---:|---:|")
    for shape, mode, calls, tokens, p50, p99 in rows:
        print(f"| {shape} | {mode} | {calls:.0%} | {tokens:.0%} | {p50:.1f} | {p99:.1f} |")


if __name__ == "__main__":
    main()
