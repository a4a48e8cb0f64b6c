"""Client CPU per streamed call: raw SDK vs latencykit, side by side in one run.

The emulator runs in a *separate process* (``latencykit emulator``) with zero server delay,
so this process's CPU time (``time.process_time``) is the client's alone: SDK parsing plus,
for latencykit, its per-event tap. Calls of each client type are interleaved in rounds so
machine noise hits both alike, each round in the next permutation of the clients (none always
follows another); the reported ratio is *paired*: the median over rounds of
(latencykit's CPU per call / the raw SDK's in the same round), so a drift in the machine's
speed between rounds (a shared VM) cancels out. After warm-up the heap is frozen
(``gc.freeze()``), so the collections that run during the windows scan what the calls
allocated, not the imported SDKs (an explicit ``gc.collect()`` per window would instead bill
each client for traversing everything it keeps alive, such as latencykit's Recorder). The ms columns are medians.
Each table also runs the raw SDK a second time: its paired ratio (A/A) is what noise alone
moves a ratio by in this run, the yardstick for reading the others.

    python benchmarks/overhead.py                 # 500-token streams, 20 rounds × 10 calls, then the size axis
    python benchmarks/overhead.py --rounds 5      # quicker
    python benchmarks/overhead.py --only sizes    # only the prompt-size axis
    python benchmarks/overhead.py --only async    # 30-token async calls, 16 in flight, every async form (150 rounds)
    python benchmarks/overhead.py --only async --async-processes 6  # each row in 6 fresh processes, read across them
    python benchmarks/overhead.py --only parts    # what each feature adds to a short async stream (no sockets)
    python benchmarks/overhead.py --only interference  # why a step costs more inside a call than alone
    python benchmarks/overhead_instructions.py         # the async calls in instructions (callgrind) beside CPU time

Goals: ratio ≤ 1.05 with telemetry unconfigured (no OpenTelemetry SDK: the API's no-ops);
≤ 1.10 with the OpenTelemetry SDK and in-memory exporters on (spans + metrics).

The prompt-size axis sends an agent-shaped prompt (tools, a long system prompt, earlier
turns, a varying question; 20 output tokens) of ~1k, ~10k, ~40k and ~150k tokens through
the raw SDK and through latencykit with its default prompt-cache planner, and reports the
CPU ratio and the milliseconds latencykit adds before the request is handed to HTTP
(create() → httpx's request hook in thread CPU time, latencykit minus raw SDK, medians). Goals: ratio ≤ 1.20
at ~40k tokens; ≤ 1 ms added per 10k prompt tokens.

The breakpoint axis (``--only breakpoints``) sends the ~40k-token agent prompt on OpenAI Chat
Completions and Responses to ``gpt-5-mini`` (a derived ``prompt_cache_key`` only) and to
``gpt-5.6`` (the prompt taken apart part by part, ``prompt_cache_breakpoint``s placed and
verified), side by side in one run, same columns.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
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
SIZE_OUTPUT_TOKENS = 20
SIZES = {"~1k": 0.025, "~10k": 0.25, "~40k": 1.0, "~150k": 3.75}
"""Prompt-size axis: label → scale of the ~40k-token agent prompt."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _pin(server_pid: int) -> None:
    """With two CPUs or more, the emulator on the last and this process on the first: the
    client's CPU time is then not shared with, or moved around by, the server it measures
    against. Where affinity cannot be set, nothing is pinned."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) >= 2 and not os.environ.get("LATENCYKIT_BENCH_NO_PIN"):
            os.sched_setaffinity(server_pid, {cpus[-1]})
            os.sched_setaffinity(0, {cpus[0]})
    except (AttributeError, OSError):
        pass


@contextlib.contextmanager
def emulator_process() -> Iterator[str]:
    """Start ``latencykit emulator`` in its own process with no delays; yield its base URL."""
    port = _free_port()
    cmd = [sys.executable, "-m", "latencykit.cli", "emulator", "--port", str(port), "--time-scale", "0",
           "--output-tokens", str(OUTPUT_TOKENS)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pin(proc.pid)
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


def agent_prompt(scale: float, api: str, question: int = 0, model: str = "gpt-5-mini") -> dict[str, Any]:
    """The agent prompt at ``scale`` (1.0: 8 tools of ~12k characters, a 30k-character system
    prompt, 24 earlier messages of ~2k characters; ~40k tokens), for ``"messages"``, ``"chat"``
    or ``"responses"`` (OpenAI ``model``)."""
    tool_chars, system_chars, turn_chars = int(12_000 * scale), int(30_000 * scale), int(2_000 * scale)

    def text(chars: int, word: str) -> str:
        return ((word + " ") * (chars // (len(word) + 1) + 1))[:max(chars, 1)]

    schema = {"type": "object", "properties": {"path": {"type": "string", "description": "File path."},
                                               "limit": {"type": "integer"}}, "required": ["path"]}  # fmt: skip
    system = text(system_chars, "You are a careful coding agent; follow the repository rules.")
    turns: list[dict[str, Any]] = []
    for k in range(12):
        turns.append({"role": "user", "content": f"step {k}: " + text(turn_chars, "please read the file and report")})
        turns.append({"role": "assistant", "content": f"step {k} done: " + text(turn_chars, "the file defines helpers")})
    ask = {"role": "user", "content": f"Question {question}: what should change next?"}
    if api == "messages":
        tools = [{"name": f"tool_{i}", "description": text(tool_chars, f"tool {i} reads files"), "input_schema": schema} for i in range(8)]
        return {"model": "claude-sonnet-5", "max_tokens": 1024, "tools": tools, "system": system, "messages": [*turns, ask]}
    if api == "responses":
        tools = [{"type": "function", "name": f"tool_{i}", "description": text(tool_chars, f"tool {i} reads files"),
                  "parameters": schema} for i in range(8)]  # fmt: skip
        return {"model": model, "max_output_tokens": 1024, "tools": tools,
                "input": [{"role": "developer", "content": system}, *turns, ask]}  # fmt: skip
    tools = [{"type": "function", "function": {"name": f"tool_{i}", "description": text(tool_chars, f"tool {i} reads files"),
                                               "parameters": schema}} for i in range(8)]  # fmt: skip
    return {"model": model, "max_completion_tokens": 1024, "tools": tools,
            "messages": [{"role": "system", "content": system}, *turns, ask]}  # fmt: skip


class _SendClock:
    """httpx request hook: when the request was handed to HTTP, in this thread's CPU time.

    CPU time rather than wall time: on a shared machine the wall clock also counts the
    moments this process was not scheduled; on an idle one the two agree.
    """

    def __init__(self) -> None:
        self.sent = 0.0

    def __call__(self, request: Any) -> None:
        self.sent = time.thread_time()


def _size_call(client: Any, api: str, scale: float, clock: _SendClock, before: list[float], model: str = "gpt-5-mini") -> Callable[[], int]:
    requests = [agent_prompt(scale, api, q, model) for q in range(8)]  # same objects each round, varying question
    headers = {"x-emulator-output-tokens": str(SIZE_OUTPUT_TOKENS)}
    state = {"i": 0}

    def call() -> int:
        req = requests[state["i"] % len(requests)]
        state["i"] += 1
        n = 0
        start = time.thread_time()
        create = {"messages": lambda: client.messages.create, "chat": lambda: client.chat.completions.create,
                  "responses": lambda: client.responses.create}[api]()  # fmt: skip
        for _ in create(stream=True, extra_headers=headers, **req):
            n += 1
        before.append(clock.sent - start)
        return n

    return call


def _measure(
    clients: tuple[Any, Any, Any], clocks: list[_SendClock], api: str, scale: float, rounds: int, calls: int, model: str = "gpt-5-mini"
) -> tuple[float, float, float, float, float]:
    """Raw SDK, latencykit and raw again on the agent prompt, interleaved: ``(raw s, lk s, ratio, added before send s, A/A)``."""
    before: list[list[float]] = [[], [], []]
    fns = [_size_call(c, api, scale, clocks[k], before[k], model) for k, c in enumerate(clients)]
    for fn in fns * 3:
        fn()
    for kept in before:
        kept.clear()
    samples: list[list[float]] = [[], [], []]
    _freeze_heap()
    for order in _orders(3, rounds):
        for k in order:
            samples[k].append(_cpu_per_call(fns[k], calls))
    r, l = (statistics.median(x) for x in samples[:2])
    added = statistics.median(before[1]) - statistics.median(before[0])
    return r, l, _paired(samples[1], samples[0]), added, _paired(samples[2], samples[0])


def size_axis(base: str, rounds: int, calls: int) -> None:
    """Client CPU and pre-send time by prompt size, raw SDK vs latencykit (cache planner on)."""
    import httpx2

    print()
    print(f"prompt-size axis: agent prompt, {SIZE_OUTPUT_TOKENS} output tokens, {rounds} rounds × {calls} calls, "
          "latencykit with cache='auto' (default planner)")  # fmt: skip
    print(f"{'call':34} {'size':>6} {'raw ms':>8} {'lk ms':>8} {'ratio':>6} {'added before send ms (CPU)':>27} {'A/A':>6}")
    for provider in ("anthropic", "openai"):
        api = "messages" if provider == "anthropic" else "chat"
        for label, scale in SIZES.items():
            clocks = [_SendClock(), _SendClock(), _SendClock()]
            https = [httpx2.Client(event_hooks={"request": [c]}) for c in clocks]
            twin = anthropic.Anthropic if provider == "anthropic" else openai.OpenAI  # the A/A control: raw again
            again: Any = twin(base_url=base if provider == "anthropic" else base + "/v1", api_key="k", max_retries=0, http_client=https[2])
            if provider == "anthropic":
                raw: Any = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0, http_client=https[0])
                lkc: Any = lk.Anthropic(base_url=base, api_key="k", max_retries=0, http_client=https[1],
                                        recorder=lk.Recorder(max_calls=100))  # fmt: skip
            else:
                raw = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0, http_client=https[0])
                lkc = lk.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0, http_client=https[1],
                                recorder=lk.Recorder(max_calls=100))  # fmt: skip
            r, l, ratio, added, aa = _measure((raw, lkc, again), clocks, api, scale, rounds, calls)
            tokens = lkc._lk.recorder.last.input_tokens if lkc._lk.recorder.last else None
            name = f"{provider} (~{tokens} input tokens)" if tokens else provider
            print(f"{name:34} {label:>6} {r * 1000:8.2f} {l * 1000:8.2f} {ratio:6.3f} {added * 1000:27.3f} {aa:6.3f}")
            for c in (raw, lkc, again):
                c.close()
    print("goals: ratio <= 1.20 at ~40k tokens; added before send <= 1 ms per 10k prompt tokens; "
          "A/A: the raw SDK against itself (the noise floor)")


def breakpoint_axis(base: str, rounds: int, calls: int) -> None:
    """~40k-token agent prompt on OpenAI Chat and Responses: gpt-5-mini (key only) vs gpt-5.6 (breakpoints)."""
    import httpx2

    print()
    print(f"breakpoint axis: the ~40k-token agent prompt, {SIZE_OUTPUT_TOKENS} output tokens, {rounds} rounds × {calls} calls, "
          "latencykit with cache='auto'")  # fmt: skip
    print(f"{'call':40} {'raw ms':>8} {'lk ms':>8} {'ratio':>6} {'added before send ms (CPU)':>27} {'A/A':>6}")
    for api in ("chat", "responses"):
        for model in ("gpt-5-mini", "gpt-5.6"):
            clocks = [_SendClock(), _SendClock(), _SendClock()]
            https = [httpx2.Client(event_hooks={"request": [c]}) for c in clocks]
            raw: Any = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0, http_client=https[0])
            lkc: Any = lk.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0, http_client=https[1], recorder=lk.Recorder(max_calls=100))
            again: Any = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0, http_client=https[2])
            r, l, ratio, added, aa = _measure((raw, lkc, again), clocks, api, 1.0, rounds, calls, model)
            last = lkc._lk.recorder.last
            name = f"{api} {model} (~{last.input_tokens if last else '?'} in, {last.cache_verdict if last else '?'})"
            print(f"{name:40} {r * 1000:8.2f} {l * 1000:8.2f} {ratio:6.3f} {added * 1000:27.3f} {aa:6.3f}")
            for c in (raw, lkc, again):
                c.close()
    print("goal: gpt-5.6 (breakpoints placed and verified) within noise of gpt-5-mini (key only): ratio <= 1.20, "
          "added before send <= 4 ms at ~40k tokens")


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


def _paired(lk_samples: list[float], raw_samples: list[float]) -> float:
    """Median over rounds of latencykit / raw SDK CPU per call, each round against its own."""
    return statistics.median(a / b for a, b in zip(lk_samples, raw_samples))


def _cpu_per_call(call: Callable[[], int], calls: int) -> float:
    """CPU seconds per call (the collector runs as it does in an app: automatically)."""
    start = time.process_time()
    for _ in range(calls):
        call()
    return (time.process_time() - start) / calls


def _orders(n: int, rounds: int) -> Iterator[tuple[int, ...]]:
    """Each round's order of the ``n`` clients: the rotations of ``0..n-1``, each followed by
    its reverse. Every ``2n`` rounds each client runs first (and last) exactly twice, and
    none always runs right after another (inheriting its cache state); for three clients
    these are all six permutations. (Permutations in lexicographic order would put client 0
    first in the first ``(n-1)!`` rounds.)"""
    for i in range(rounds):
        k = i // 2
        order = tuple((k + j) % n for j in range(n))
        yield order[::-1] if i % 2 else order


def _freeze_heap() -> None:
    """After warm-up: move everything alive to the permanent generation, so the collections
    during the measuring windows scan only what the calls themselves allocated."""
    gc.collect()
    gc.freeze()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=10, help="calls per client per round")
    parser.add_argument("--only", choices=("streams", "async", "parts", "interference", "sizes", "breakpoints"), default=None, help="run one part only")
    parser.add_argument("--async-rounds", type=int, default=None,
                        help="rounds of the async rows (default 150), each one window of 16 calls per client")
    parser.add_argument("--parts-rounds", type=int, default=None, help="rounds of the parts table (default 150)")
    parser.add_argument("--interference-rounds", type=int, default=None, help="rounds of the interference table (default 30)")
    parser.add_argument("--row", default=None, help="async rows whose name contains this text only (e.g. 'messages.create(stream')")
    parser.add_argument("--async-processes", type=int, default=1,
                        help="run each async row in this many fresh processes and read it across them (default 1: this process)")
    args = parser.parse_args()
    if args.rounds < 1 or args.calls < 1 or any(n is not None and n < 2 for n in (args.async_rounds, args.parts_rounds, args.interference_rounds)):
        parser.error("--rounds and --calls must be >= 1, --async-rounds, --parts-rounds and --interference-rounds >= 2")
    if args.async_processes < 1:
        parser.error("--async-processes must be >= 1")

    with emulator_process() as base:
        if args.only in (None, "streams"):
            streams(base, args.rounds, args.calls)
        if args.only in (None, "async"):
            from overhead_async import ASYNC_ROUNDS, IN_FLIGHT, async_axis  # (this folder: run as python benchmarks/overhead.py)

            async_axis(base, args.async_rounds or ASYNC_ROUNDS, IN_FLIGHT, _orders, _freeze_heap, args.row, args.async_processes)
        if args.only == "parts":  # a diagnosis of the async rows, on request
            from overhead_async import IN_FLIGHT
            from overhead_parts import PARTS_ROUNDS, parts_axis

            parts_axis(base, args.parts_rounds or PARTS_ROUNDS, IN_FLIGHT, _orders, _freeze_heap)
        if args.only == "interference":  # likewise: why a step costs more inside a call than alone
            from overhead_interference import INTERFERENCE_ROUNDS, interference_axis

            interference_axis(base, args.interference_rounds or INTERFERENCE_ROUNDS, _orders)
        if args.only in (None, "sizes"):
            size_axis(base, args.rounds, args.calls)
        if args.only in (None, "breakpoints"):
            breakpoint_axis(base, args.rounds, args.calls)


def streams(base: str, rounds: int, calls_per_round: int) -> None:
    """The 500-token streaming rows: raw SDK, latencykit, latencykit with the OTel SDK."""
    ant_raw = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0)
    otel = _otel_sdk_telemetry()

    def recorder() -> lk.Recorder:
        return lk.Recorder(max_calls=100)

    ant_lk = lk.Anthropic(base_url=base, api_key="k", max_retries=0, recorder=recorder())
    ant_otel = lk.Anthropic(base_url=base, api_key="k", max_retries=0, recorder=recorder(), telemetry=otel)
    oai_raw = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
    oai_lk = lk.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0, recorder=recorder())
    oai_otel = lk.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0, recorder=recorder(), telemetry=otel)
    ant_raw2 = anthropic.Anthropic(base_url=base, api_key="k", max_retries=0)
    oai_raw2 = openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
    rows = {  # the last client is the raw SDK again: its ratio (A/A) is the run's noise floor
        "anthropic messages.create(stream=True)": (_anthropic_call(ant_raw), _anthropic_call(ant_lk), _anthropic_call(ant_otel), _anthropic_call(ant_raw2)),
        "openai chat.completions.create(stream=True)": (_chat_call(oai_raw), _chat_call(oai_lk), _chat_call(oai_otel), _chat_call(oai_raw2)),
    }
    for calls in rows.values():  # warm up imports, pools and caches
        for call in calls * 2:
            call()
    print(f"client CPU per streamed call, {OUTPUT_TOKENS} output tokens, zero server delay, "
          f"{rounds} rounds × {calls_per_round} calls, emulator in a separate process (pid {os.getpid()} measured)")
    print(f"{'call':44} {'raw SDK ms':>10} {'lk ms':>8} {'ratio':>6} {'lk+OTel SDK ms':>15} {'ratio':>6} {'A/A':>6}")
    plain, with_otel = [], []
    for name, calls in rows.items():
        samples: list[list[float]] = [[], [], [], []]
        _freeze_heap()
        for order in _orders(len(calls), rounds):
            for k in order:
                samples[k].append(_cpu_per_call(calls[k], calls_per_round))
        r, l, o = (statistics.median(x) for x in samples[:3])
        lr, orr, aa = (_paired(samples[k], samples[0]) for k in (1, 2, 3))
        plain.append(lr)
        with_otel.append(orr)
        print(f"{name:44} {r * 1000:10.2f} {l * 1000:8.2f} {lr:6.3f} {o * 1000:15.2f} {orr:6.3f} {aa:6.3f}")
    print(f"{'overall (geometric mean)':44} {'':10} {'':8} {statistics.geometric_mean(plain):6.3f} "
          f"{'':15} {statistics.geometric_mean(with_otel):6.3f}")
    print("goals: latencykit / raw <= 1.05 (telemetry unconfigured); with the OTel SDK on <= 1.10; "
          "A/A: the raw SDK against itself (how far a ratio moves on this machine by noise alone)")
    for c in (ant_raw, ant_lk, ant_otel, oai_raw, oai_lk, oai_otel, ant_raw2, oai_raw2):
        c.close()


if __name__ == "__main__":
    main()
