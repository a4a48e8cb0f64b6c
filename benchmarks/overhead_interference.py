"""Why latencykit's per-call work costs more inside a call than alone: ``overhead.py --only interference``.

latencykit's steps run between the SDK's, and a step costs several times more there than the
same step measured in a loop (finishing a call's record, ``CallTimer._finish``, took ~30 µs in
place in an async ``messages.create(stream=True)`` with 16 in flight, a few µs in a loop). This table isolates one step, the prompt-cache planning of the ~40k-token
agent prompt (`overhead.agent_prompt`, the same 8 requests in turn, as the size axis sends them),
and times it right after each of these:

- ``nothing``: planning back to back, each call right after the last (a microbenchmark);
- ``an 8 MB memory copy``: 8 MB copied from one buffer to another, more than the L1 and L2 data
  caches hold, so what planning reads no longer sits there;
- ``a 1 ms sleep``: the process blocks and its CPU idles (on a VM the host may run something
  else there), as a call waiting on its socket does;
- ``a raw SDK call, replayed``: the raw anthropic SDK streams a 30-token answer whose bytes its
  HTTP transport replays in process (`overhead_parts.Replay`): the SDK's own code, and no wait;
- ``a raw SDK call``: the same over a socket to the emulator: the SDK's code and the wait, as
  between two of latencykit's steps in a real call.

Columns: microseconds per planning call (the median over rounds of each round's median), and
the ratio to back to back, paired per round, with its distribution-free 95 % interval
(`overhead_async.median_interval`). Each round runs the rows in another order (`overhead._orders`).

How to read it: if the copy costs planning about what the SDK calls do, latencykit pays for
data that other work evicted, and touching fewer objects is the remedy. If the sleep does, the
cost comes from idling, not from the SDK. If the replayed SDK call costs far more than both,
what the SDK's code leaves behind is on the instruction side (instruction caches, branch
predictors, which CPython's bytecode dispatch leans on), and the remedy is fewer bytecodes run
per call.

    python benchmarks/overhead.py --only interference                          # 30 rounds, ~10 s
    python benchmarks/overhead.py --only interference --interference-rounds 60
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Iterator

import anthropic
import httpx2

import latencykit as lk
from latencykit.providers._calls import prepare
from overhead import agent_prompt
from overhead_async import _ANT, HEADERS, median_interval
from overhead_parts import Replay

INTERFERENCE_ROUNDS = 30
"""Rounds by default: in each, every row plans each request variant once."""
VARIANTS = 8
"""Distinct requests planned in turn (the question differs, as in the size axis)."""
SWEEP_BYTES = 8 << 20
"""The memory copy: more than the L1 and L2 data caches of the machines this runs on."""


class _Interference:
    """What runs just before a measured planning call."""

    def __init__(self, base: str) -> None:
        self.raw = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0)
        self._http = httpx2.Client(transport=httpx2.MockTransport(Replay(base)))
        self.replayed = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0, http_client=self._http)
        self._src = bytearray(SWEEP_BYTES)
        self._dst = bytearray(SWEEP_BYTES)

    # Each returns what it did (bytes copied, events streamed), so that a test can check it.
    def nothing(self) -> int:
        return 0

    def sweep(self) -> int:
        self._dst[:] = self._src  # one memcpy: no allocation, no page faults
        return len(self._dst)

    def sleep(self) -> int:
        time.sleep(0.001)
        return 0

    def sdk_replayed(self) -> int:
        return sum(1 for _ in self.replayed.messages.create(stream=True, extra_headers=HEADERS, **_ANT))

    def sdk_call(self) -> int:
        return sum(1 for _ in self.raw.messages.create(stream=True, extra_headers=HEADERS, **_ANT))

    def close(self) -> None:
        self.raw.close()
        self.replayed.close()
        self._http.close()


def _planning_times(client: Any, requests: list[dict[str, Any]], before: Callable[[], int]) -> float:
    """Median seconds of one planning call over the requests, ``before()`` run just before each."""
    clock = time.perf_counter
    times = []
    for request in requests:
        before()
        start = clock()
        prepare(client, "messages", request)
        times.append(clock() - start)
    return statistics.median(times)


def interference_axis(base: str, rounds: int, orders: Callable[[int, int], Iterator[tuple[int, ...]]]) -> dict[str, tuple[float, tuple[float, float, float]]]:
    """Print the table; returns, per row, (median µs, (ratio, low, high) to back to back)."""
    client = lk.Anthropic(base_url=base, api_key="k", max_retries=0, recorder=lk.Recorder(max_calls=100))
    requests = [agent_prompt(1.0, "messages", q) for q in range(VARIANTS)]
    things = _Interference(base)
    rows: list[tuple[str, Callable[[], int]]] = [
        ("nothing (back to back)", things.nothing),
        (f"an {SWEEP_BYTES >> 20} MB memory copy", things.sweep),
        ("a 1 ms sleep", things.sleep),
        ("a raw SDK call, replayed", things.sdk_replayed),
        ("a raw SDK call (30-token stream)", things.sdk_call),
    ]
    try:
        for _, before in rows:  # warm-up: the planner has seen every request, the SDK its first call
            _planning_times(client, requests, before)
        samples: list[list[float]] = [[] for _ in rows]
        for order in orders(len(rows), rounds):
            for i in order:
                samples[i].append(_planning_times(client, requests, rows[i][1]))
    finally:
        things.close()
        client.close()

    print(f"\nPlanning the ~40k-token agent prompt (Anthropic, the default cache planner; {VARIANTS} requests in turn), {rounds} rounds")
    print(f"{'what ran just before':34s} {'µs/call':>8s}  {'× back to back (95 % interval)':>32s}")
    result: dict[str, tuple[float, tuple[float, float, float]]] = {}
    baseline = samples[0]
    for (name, _), times in zip(rows, samples):
        ratio = median_interval([t / b for t, b in zip(times, baseline)])
        us = statistics.median(times) * 1e6
        result[name] = (us, ratio)
        print(f"{name:34s} {us:8.0f}  {ratio[0]:>14.2f} ({ratio[1]:.2f}-{ratio[2]:.2f})")
    return result
