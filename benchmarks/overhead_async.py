"""The async rows of ``benchmarks/overhead.py``: short streams, many in flight.

Client CPU per 30-token call with 16 calls in flight on one event loop, for every async form
a caller uses: OpenAI ``chat.completions.create(stream=True)``, ``create()`` (latencykit streams
it and reassembles the ``ChatCompletion``), the ``.stream()`` helper, ``responses.create(stream=True)``
and ``create()``; Anthropic ``messages.create(stream=True)``, ``create()`` and ``messages.stream()``.
Short streams weigh latencykit's per-call work (planning, the record, the Recorder, task and
context bookkeeping) against little SDK parsing, so they are its hardest case.

A ``create()`` row's baseline is the raw SDK streaming the same answer and accumulating it with
its own helper (``.stream()`` + ``get_final_*()``): latencykit sends every create() as a stream,
so that is the work it does; the raw SDK's unstreamed create() (one JSON body) is printed below
the table for what streaming itself costs. Each row runs the raw async SDK, latencykit, and the raw SDK again (A/A) in rounds whose order
rotates (`overhead._orders`); in a round each client runs one window of ``calls`` calls, 16 at a
time (by default 16: one batch in flight). The ratio is the median over rounds of latencykit's
CPU per call / the raw SDK's in the same round, printed with its 95 % confidence interval
(distribution-free: the order statistics of the paired ratios around their median); the A/A
ratio beside it is what noise alone moves a ratio by in this run. A row is ``within`` the goal
when its whole interval is, ``over`` when the whole interval is above it, and ``unsure`` when
the interval straddles it (run more rounds).

Why many short windows rather than a few long ones: on a shared VM the machine's own speed
moves by about 14 % (standard deviation of the log ratio of two adjacent windows) at every
window length tried, 1.4 ms to 1.5 s, for a pure CPU loop against itself. Longer windows do
not average that out, so only the number of pairs narrows the interval: 200 pairs of 16-call
windows give about ±2.7 %; 15 pairs of 64-call windows (the earlier default) gave about ±5 %.

    python benchmarks/overhead.py --only async                      # 150 rounds × 16 calls, ~7 minutes on 2 cores
    python benchmarks/overhead.py --only async --async-rounds 400   # a narrower interval
    python benchmarks/overhead.py --only async --row 'messages.create(stream' --async-processes 6

Each fresh process lays out its memory and seeds its hashes anew, and a row moves by about
±1 % from one process to the next (the same code, A/A ≈ 1.000 in each): more than the ±0.5 %
a single run's interval shows, since paired rounds in one process cannot average that out.
``--async-processes N`` runs each row in N fresh processes, one after another, and reads the
processes' paired medians as the observations: the ratio is their median and the interval
theirs (the whole spread of the processes below 11 of them), so the verdict holds across
processes, not only within one.

With two CPUs or more the emulator runs on the last and the benchmark on the first
(``LATENCYKIT_BENCH_NO_PIN=1`` lets the scheduler place them), so that they do not share or
swap cores. Read a row against the A/A beside it, and its interval.

Goal: every row ≤ 1.05.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, NamedTuple

import anthropic
import openai

import latencykit as lk
from latencykit.bench._stats import quantile_ranks

ASYNC_OUTPUT_TOKENS = 30
IN_FLIGHT = 16
GOAL = 1.05
"""Every async row's paired ratio, latencykit / raw SDK, at most this."""
ASYNC_ROUNDS = 150
"""Rounds by default: one window of `IN_FLIGHT` calls per client each (about ±3 % at 95 % here)."""
HEADERS = {"x-emulator-output-tokens": str(ASYNC_OUTPUT_TOKENS)}
_ANT: dict[str, Any] = {"model": "claude-sonnet-5", "max_tokens": 1024, "messages": [{"role": "user", "content": "Write a story."}]}
_CHAT: dict[str, Any] = {"model": "gpt-5-mini", "max_completion_tokens": 1024, "messages": [{"role": "user", "content": "Write a story."}]}
_RESP: dict[str, Any] = {"model": "gpt-5-mini", "max_output_tokens": 1024, "input": "Write a story."}

Call = Callable[[Any], Awaitable[int]]


async def _drain(stream: Any) -> int:
    n = 0
    async for _ in stream:
        n += 1
    return n


async def chat_stream(c: Any) -> int:
    return await _drain(await c.chat.completions.create(stream=True, extra_headers=HEADERS, **_CHAT))


async def chat_create(c: Any) -> int:
    return len((await c.chat.completions.create(extra_headers=HEADERS, **_CHAT)).choices)


async def chat_streamed_whole(c: Any) -> int:
    """The raw SDK doing what latencykit's create() does: stream, and accumulate the ChatCompletion."""
    async with c.chat.completions.stream(extra_headers=HEADERS, **_CHAT) as stream:
        return len((await stream.get_final_completion()).choices)


async def chat_helper(c: Any) -> int:
    async with c.chat.completions.stream(extra_headers=HEADERS, **_CHAT) as stream:
        return await _drain(stream)


async def responses_stream(c: Any) -> int:
    return await _drain(await c.responses.create(stream=True, extra_headers=HEADERS, **_RESP))


async def responses_create(c: Any) -> int:
    return len((await c.responses.create(extra_headers=HEADERS, **_RESP)).output)


async def responses_streamed_whole(c: Any) -> int:
    """The raw SDK streaming a Response to its end and taking the terminal event's response."""
    out = 0
    async for event in await c.responses.create(stream=True, extra_headers=HEADERS, **_RESP):
        if event.type == "response.completed":
            out = len(event.response.output)
    return out


async def messages_stream(c: Any) -> int:
    return await _drain(await c.messages.create(stream=True, extra_headers=HEADERS, **_ANT))


async def messages_create(c: Any) -> int:
    return len((await c.messages.create(extra_headers=HEADERS, **_ANT)).content)


async def messages_streamed_whole(c: Any) -> int:
    """The raw SDK doing what latencykit's create() does: stream, and accumulate the Message."""
    async with c.messages.stream(extra_headers=HEADERS, **_ANT) as stream:
        return len((await stream.get_final_message()).content)


async def messages_helper(c: Any) -> int:
    async with c.messages.stream(extra_headers=HEADERS, **_ANT) as stream:
        return await _drain(stream)


ROWS: dict[str, tuple[str, Call, Call]] = {
    # (provider, what the raw SDK runs, what latencykit runs). create() is sent as a stream and
    # reassembled: its baseline is the raw SDK doing that same work with its own helper, so the
    # ratio is what latencykit adds, not the price of streaming (the raw non-streamed create()
    # parses one JSON body: `create() unstreamed` below shows that cost beside it).
    "openai chat.completions.create(stream=True)": ("openai", chat_stream, chat_stream),
    "openai chat.completions.create()": ("openai", chat_streamed_whole, chat_create),
    "openai chat.completions.stream()": ("openai", chat_helper, chat_helper),
    "openai responses.create(stream=True)": ("openai", responses_stream, responses_stream),
    "openai responses.create()": ("openai", responses_streamed_whole, responses_create),
    "anthropic messages.create(stream=True)": ("anthropic", messages_stream, messages_stream),
    "anthropic messages.create()": ("anthropic", messages_streamed_whole, messages_create),
    "anthropic messages.stream()": ("anthropic", messages_helper, messages_helper),
}
UNSTREAMED: dict[str, tuple[str, Call]] = {
    "openai chat.completions.create()": ("openai", chat_create),
    "openai responses.create()": ("openai", responses_create),
    "anthropic messages.create()": ("anthropic", messages_create),
}
"""The raw SDK's own non-streamed create(): one JSON body, no first token until the whole answer."""


def _clients(base: str, provider: str) -> tuple[Any, Any, Any]:
    """Raw async SDK, latencykit, raw again (A/A)."""
    if provider == "anthropic":
        return (anthropic.AsyncAnthropic(base_url=base, api_key="k", max_retries=0),
                lk.AsyncAnthropic(base_url=base, api_key="k", max_retries=0, recorder=lk.Recorder(max_calls=100)),
                anthropic.AsyncAnthropic(base_url=base, api_key="k", max_retries=0))  # fmt: skip
    url = base + "/v1"
    return (openai.AsyncOpenAI(base_url=url, api_key="k", max_retries=0),
            lk.AsyncOpenAI(base_url=url, api_key="k", max_retries=0, recorder=lk.Recorder(max_calls=100)),
            openai.AsyncOpenAI(base_url=url, api_key="k", max_retries=0))  # fmt: skip


async def _cpu_per_call(client: Any, call: Call, calls: int) -> float:
    """CPU seconds per call, ``calls`` calls with `IN_FLIGHT` in flight."""
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one() -> None:
        async with gate:
            await call(client)

    start = time.process_time()
    await asyncio.gather(*(one() for _ in range(calls)))
    return (time.process_time() - start) / calls


def median_interval(ratios: list[float]) -> tuple[float, float, float]:
    """The median of paired ratios and its 95 % confidence interval, distribution-free: the
    order statistics the bench reads for any percentile (`latencykit.bench._stats.quantile_ranks`,
    the sign-test ranks), so a skewed or heavy-tailed spread of rounds is not assumed away.
    With too few rounds to bound it, the interval is the whole spread."""
    xs = sorted(ratios)
    lo, hi = quantile_ranks(0.5, len(xs))
    return statistics.median(xs), xs[max(lo, 0)], xs[min(hi, len(xs) - 1)]


def verdict(lo: float, hi: float, goal: float = GOAL) -> str:
    """``within`` when the whole interval is at or under ``goal``, ``over`` when all of it is above, else ``unsure``."""
    return "within" if hi <= goal else "over" if lo > goal else "unsure"


class RowResult(NamedTuple):
    raw_s: float
    """The raw SDK's CPU seconds per call (median over rounds)."""
    mine_s: float
    """latencykit's CPU seconds per call (median over rounds)."""
    ratio: tuple[float, float, float]
    """Paired latencykit / raw SDK: median, interval low, interval high."""
    aa: tuple[float, float, float]
    """Paired raw SDK / raw SDK (A/A), likewise."""


async def _row(base: str, provider: str, raw_call: Call, call: Call, rounds: int, calls: int, orders: Any,
               freeze: Callable[[], None]) -> RowResult:
    clients = _clients(base, provider)
    runs = (raw_call, call, raw_call)
    try:
        for c, run in list(zip(clients, runs)) * 2:  # warm up pools, imports and caches
            await _cpu_per_call(c, run, IN_FLIGHT)
        samples: list[list[float]] = [[], [], []]
        freeze()
        for order in orders(3, rounds):
            for k in order:
                samples[k].append(await _cpu_per_call(clients[k], runs[k], calls))
    finally:
        for c in clients:
            await c.close()
    ratio, aa = (median_interval([a / b for a, b in zip(samples[k], samples[0])]) for k in (1, 2))
    return RowResult(statistics.median(samples[0]), statistics.median(samples[1]), ratio, aa)


def _row_in_process(base: str, name: str, rounds: int, calls: int) -> RowResult:
    """One row measured in a fresh Python process (this file run as a script); it inherits this
    process's CPU pinning and is killed if this one is interrupted."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one-row", name, "--base", base, "--rounds", str(rounds), "--calls", str(calls)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"the row {name!r} failed in its process (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return RowResult(out["raw_s"], out["mine_s"], tuple(out["ratio"]), tuple(out["aa"]))


def across_processes(results: list[RowResult]) -> RowResult:
    """One row from its runs in several processes: each process's paired median is one
    observation; the ratio is their median, the interval theirs (`median_interval`)."""
    return RowResult(
        statistics.median(r.raw_s for r in results),
        statistics.median(r.mine_s for r in results),
        median_interval([r.ratio[0] for r in results]),
        median_interval([r.aa[0] for r in results]),
    )


def async_axis(base: str, rounds: int, calls: int, orders: Any, freeze: Callable[[], None], row: str | None = None,
               processes: int = 1) -> dict[str, float]:  # fmt: skip
    """Print the async rows (those whose name contains ``row``, when given); returns each row's paired ratio.

    ``processes`` > 1: each row runs in that many fresh processes and is read across them (`across_processes`).
    """
    print()
    print(f"async: client CPU per {ASYNC_OUTPUT_TOKENS}-token call, {IN_FLIGHT} in flight, {rounds} rounds × {calls} calls, "
          "zero server delay, emulator in a separate process")  # fmt: skip
    if processes > 1:
        print(f"each row in {processes} fresh processes: ratio and A/A are the median of the processes' paired medians, "
              "the interval is over processes")  # fmt: skip
    print(f"{'call':44} {'raw SDK ms':>10} {'lk ms':>8} {'ratio':>6} {'95% interval':>13} {'A/A':>6} {'A/A interval':>13}  goal")
    ratios: dict[str, float] = {}
    for name, (provider, raw_call, call) in ROWS.items():
        if row is not None and row not in name:
            continue
        if processes > 1:
            runs = [_row_in_process(base, name, rounds, calls) for _ in range(processes)]
            res = across_processes(runs)
        else:
            res = asyncio.run(_row(base, provider, raw_call, call, rounds, calls, orders, freeze))
        (ratio, lo, hi), (aa, aa_lo, aa_hi) = res.ratio, res.aa
        ratios[name] = ratio
        print(f"{name:44} {res.raw_s * 1000:10.3f} {res.mine_s * 1000:8.3f} {ratio:6.3f} {lo:6.3f}-{hi:<6.3f} "
              f"{aa:6.3f} {aa_lo:6.3f}-{aa_hi:<6.3f}  {verdict(lo, hi)}")  # fmt: skip
        if processes > 1:
            print(f"{'':44}   per process: " + " ".join(f"{r.ratio[0]:.3f}" for r in runs))
    if ratios:
        print(f"{'overall (geometric mean)':44} {'':10} {'':8} {statistics.geometric_mean(ratios.values()):6.3f}")
    print(f"goal: every async row <= {GOAL} (within: the whole 95% interval is; unsure: it straddles the goal, run more")
    print("rounds). A/A: the raw SDK against itself (the noise floor). create(): against the raw SDK streaming the same")
    print("answer and accumulating it with its own helper (what latencykit does for you);")
    for name, (provider, call) in UNSTREAMED.items():
        if row is not None:
            break
        res = asyncio.run(_row(base, provider, call, call, max(rounds // 4, 1), calls, orders, freeze))
        print(f"  the raw SDK's unstreamed {name.split(' ', 1)[1]}: {res.raw_s * 1000:.3f} ms (one JSON body, no first token before the end)")
    return ratios


def _one_row() -> None:
    """``--one-row NAME``: measure that row in this process and print it as one JSON line (`_row_in_process`)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--one-row", required=True)
    parser.add_argument("--base", required=True)
    parser.add_argument("--rounds", type=int, required=True)
    parser.add_argument("--calls", type=int, required=True)
    args = parser.parse_args()
    from overhead import _freeze_heap, _orders  # (this folder is on the path: the script runs from it)

    provider, raw_call, call = ROWS[args.one_row]
    res = asyncio.run(_row(args.base, provider, raw_call, call, args.rounds, args.calls, _orders, _freeze_heap))
    print(json.dumps(res._asdict()))


if __name__ == "__main__":
    _one_row()
