"""What each latencykit feature adds to a short async stream: ``overhead.py --only parts``.

The async rows (`overhead_async`) weigh latencykit against the raw SDK over real sockets, where
the socket and event-loop work doubles the denominator and the VM's noise is large. This table
takes both out to see the parts: every client's HTTP transport replays the bytes the emulator
sent for that request (fetched once per distinct request, over HTTP, before measuring), so each
SDK parses exactly what it would parse from the network, and only the client's own Python runs
in the measured windows. Per call, 30-token streams, 16 in flight on one event loop, for the two
raw-stream forms (``messages.create(stream=True)``, ``chat.completions.create(stream=True)``):

- ``raw SDK (A/A)``: the raw SDK against itself, the noise floor of this run;
- ``latencykit``: defaults (retries, the prompt-cache planner, telemetry, the Recorder);
- ``retry=False``, ``cache="off"``, ``telemetry=False``: one feature off each;
- ``all three off``: what is left is the core every call pays (the record, the timer, the tap
  on each event, the Recorder);
- ``bare relay (floor)``: the raw SDK's stream iterated through one plain async generator that
  reads each event's type and the clock on each token, and keeps nothing else — what observing
  a stream costs by itself, the floor under every latencykit row.

Columns: microseconds of client CPU each adds per call against the raw SDK (the median over
rounds of the paired difference) and the paired ratio with its distribution-free 95 % interval
(`overhead_async.median_interval`). The added microseconds come out somewhat below the async
rows' (over sockets latencykit's work interleaves with more of the SDK's, and costs more); the
ratios are larger here (for Anthropic about twice), the denominator lacking the socket work. A
feature's own cost is its row's distance from the ``latencykit`` row. Read a table against its
own A/A and compare variants within one run: the machine's state moves whole runs by ±20 %.

    python benchmarks/overhead.py --only parts                     # 150 rounds, ~2 minutes on 2 cores
    python benchmarks/overhead.py --only parts --parts-rounds 200  # a narrower interval
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import urllib.error
import urllib.request
from typing import Any, Callable

import anthropic
import httpx2
import openai

import latencykit as lk
from overhead_async import _ANT, _CHAT, HEADERS, IN_FLIGHT, Call, _cpu_per_call, chat_stream, median_interval, messages_stream

PARTS_ROUNDS = 150
"""Rounds by default: one window of `IN_FLIGHT` calls per variant each."""

VARIANTS: dict[str, dict[str, Any]] = {
    "latencykit": {},
    'retry=False': {"retry": False},
    'cache="off"': {"cache": "off"},
    "telemetry=False": {"telemetry": False},
    "all three off": {"retry": False, "cache": "off", "telemetry": False},
}
"""latencykit client options per row (the raw SDK runs twice besides: baseline and A/A)."""

FLOOR = "bare relay (floor)"
"""The row of the raw SDK observed by the least a relay can do (`_bare_messages`, `_bare_chat`)."""


async def _bare(events: Any, is_token: Callable[[Any], Any]) -> int:
    """Drain ``events`` through one plain async generator that stamps each token's arrival."""

    async def relay() -> Any:
        stamps: list[float] = []
        clock = time.perf_counter
        async for event in events:
            if is_token(event):
                stamps.append(clock())
            yield event

    n = 0
    async for _ in relay():
        n += 1
    return n


def _anthropic_token(event: Any) -> Any:
    return event.type == "content_block_delta" and event.delta.type == "text_delta" and event.delta.text


def _chat_token(chunk: Any) -> Any:
    return chunk.choices and chunk.choices[0].delta.content


async def _bare_messages(c: Any) -> int:
    return await _bare(await c.messages.create(stream=True, extra_headers=HEADERS, **_ANT), _anthropic_token)


async def _bare_chat(c: Any) -> int:
    return await _bare(await c.chat.completions.create(stream=True, extra_headers=HEADERS, **_CHAT), _chat_token)


FORMS: dict[str, tuple[str, Call, Call]] = {
    "anthropic messages.create(stream=True)": ("anthropic", messages_stream, _bare_messages),
    "openai chat.completions.create(stream=True)": ("openai", chat_stream, _bare_chat),
}
"""Form → (provider, the call every client runs, the floor row's call on a raw client)."""


class Replay:
    """An HTTP transport answering each request with what the emulator at ``base`` answered
    to the same method, path, emulator headers and body (asked once, then kept)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.answers: dict[tuple[str, str, str, bytes], tuple[int, str, bytes]] = {}

    def _fetch(self, request: Any, key: tuple[str, str, str, bytes]) -> tuple[int, str, bytes]:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length", "accept-encoding")}
        req = urllib.request.Request(self.base + key[1], data=key[3] or None, headers=headers, method=key[0])
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, resp.headers.get("content-type", ""), resp.read()
        except urllib.error.HTTPError as err:
            return err.code, err.headers.get("content-type", ""), err.read()

    def __call__(self, request: Any) -> Any:
        emulator = json.dumps(sorted((k, v) for k, v in request.headers.items() if k.lower().startswith("x-emulator")))
        key = (request.method, request.url.raw_path.decode(), emulator, bytes(request.content))
        answer = self.answers.get(key)
        if answer is None:
            answer = self.answers[key] = self._fetch(request, key)
        status, ctype, body = answer
        return httpx2.Response(status, headers={"content-type": ctype}, content=body)


def _clients(base: str, provider: str) -> list[tuple[str, Any]]:
    """(row name, client) for the raw SDK, its A/A twin, every variant and the floor (a raw
    client of its own), all on one replay."""

    def http() -> Any:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(replay))

    replay = Replay(base)
    if provider == "anthropic":
        raw: Callable[[], Any] = lambda: anthropic.AsyncAnthropic(base_url=base, api_key="k", max_retries=0, http_client=http())  # noqa: E731
        mine: Callable[..., Any] = lambda **kw: lk.AsyncAnthropic(  # noqa: E731
            base_url=base, api_key="k", max_retries=0, http_client=http(), recorder=lk.Recorder(max_calls=100), **kw)
    else:
        raw = lambda: openai.AsyncOpenAI(base_url=base + "/v1", api_key="k", max_retries=0, http_client=http())  # noqa: E731
        mine = lambda **kw: lk.AsyncOpenAI(  # noqa: E731
            base_url=base + "/v1", api_key="k", max_retries=0, http_client=http(), recorder=lk.Recorder(max_calls=100), **kw)
    variants = [(name, mine(**kw)) for name, kw in VARIANTS.items()]
    return [("raw SDK", raw()), ("raw SDK (A/A)", raw()), *variants, (FLOOR, raw())]


async def _form(base: str, provider: str, call: Call, floor: Call, rounds: int, calls: int, orders: Any,
                freeze: Callable[[], None]) -> list[list[float]]:  # fmt: skip
    clients = _clients(base, provider)
    runs = [floor if name == FLOOR else call for name, _ in clients]
    try:
        for _ in range(3):  # fetch every distinct answer, then warm pools, imports and caches
            for (_, c), run in zip(clients, runs):
                await _cpu_per_call(c, run, IN_FLIGHT)
        freeze()
        samples: list[list[float]] = [[] for _ in clients]
        for order in orders(len(clients), rounds):
            for k in order:
                samples[k].append(await _cpu_per_call(clients[k][1], runs[k], calls))
    finally:
        for _, c in clients:
            await c.close()
    return samples


def parts_axis(base: str, rounds: int, calls: int, orders: Any, freeze: Callable[[], None]) -> None:
    """Print, for each raw-stream form, what latencykit and each feature add per call."""
    print()
    print(f"parts: client CPU per 30-token async call, {IN_FLIGHT} in flight, {rounds} rounds × {calls} calls, "
          "the emulator's answers replayed in process (no sockets)")  # fmt: skip
    names = ["raw SDK (A/A)", *VARIANTS, FLOOR]
    for form, (provider, call, floor) in FORMS.items():
        samples = asyncio.run(_form(base, provider, call, floor, rounds, calls, orders, freeze))
        raw = samples[0]
        print(f"\n{form}: raw SDK {statistics.median(raw) * 1e6:.0f} µs per call")
        print(f"  {'client':19} {'µs added':>9} {'ratio':>6} {'95% interval':>13}")
        for name, mine in zip(names, samples[1:]):
            ratio, lo, hi = median_interval([a / b for a, b in zip(mine, raw)])
            added = statistics.median(a - b for a, b in zip(mine, raw)) * 1e6
            print(f"  {name:19} {added:+9.0f} {ratio:6.3f} {lo:6.3f}-{hi:<6.3f}")
    print("\nµs added: client CPU per call beyond the raw SDK's, paired per round (somewhat below the async rows' over")
    print("sockets; the ratios here are larger, the denominator lacking the socket work). A feature costs its row's")
    print("distance from the latencykit row; 'all three off' is the core every call pays; the floor is what a bare")
    print("relay (one generator, a clock read per token) costs the raw SDK. Compare rows within one run.")
