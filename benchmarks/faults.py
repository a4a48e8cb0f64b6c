"""Fault handling under load: 1000 async calls, 10 % injected faults, nothing lost or shown twice.

An in-process emulator serves a mix of call forms (Anthropic Messages; OpenAI Chat and
Responses; non-streaming, ``create(stream=True)`` and the ``.stream()`` helpers) through one
latencykit client per provider. One call in ten gets a fault: 429 (retry-after 0), 529,
503, an ``error`` event or a drop before content, a drop or an ``error`` event after
content, or a stall with a TTFT deadline. Most faults hit once (``fault-times: 1``, so a
retry succeeds); one in five is permanent.

Every call's output is checked against a fault-free call of the same request:

- succeeded: the caller got the whole answer (``retried``: after at least one retry);
- failed with partial output: ``StreamInterruptedError`` whose ``partial.text`` is a
  non-empty prefix of the clean answer (and, for caller streams, exactly what was shown);
- failed before content: an SDK error with nothing shown;
- duplicated content: a caller whose text is not a prefix of the clean answer (a retry
  replayed output) — must be 0;
- lost records: calls made minus ``Recorder.total_calls`` — must be 0.

    python benchmarks/faults.py              # 1000 calls, < 60 s
    python benchmarks/faults.py --calls 200  # quicker

Exits 1 if anything was duplicated or lost, or an answer was wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import random
import sys
import time
import uuid
from typing import Any, Optional

import latencykit as lk
from latencykit.emulator import Emulator, TimingModel

MODELS = {"messages": "claude-sonnet-5", "chat": "gpt-4o-mini", "responses": "gpt-4.1-mini"}
FORMS = [f"{api}-{mode}" for api in MODELS for mode in ("create", "stream", "helper")]
PROMPTS = [f"Describe colour number {i}." for i in range(8)]
# kind -> x-emulator headers
FAULTS: dict[str, dict[str, Any]] = {
    "429": {"status": 429, "retry-after": 0},
    "529": {"status": 529},
    "503": {"status": 503},
    "error-before-content": {"error-after-chunks": 0},
    "drop-before-content": {"drop-after-chunks": 0},
    "drop-after-content": {"drop-after-chunks": 3},
    "error-after-content": {"error-after-chunks": 3},
    "stall": {"stall-ms": 3000},
}
POLICY = lk.RetryPolicy(initial_backoff=0.01, max_backoff=0.05, max_attempts=3, ttft_deadline=1.0)


def _request(api: str, prompt: str) -> dict[str, Any]:
    if api == "messages":
        return {"model": MODELS[api], "max_tokens": 64, "messages": [{"role": "user", "content": prompt}]}
    if api == "chat":
        return {"model": MODELS[api], "max_tokens": 64, "messages": [{"role": "user", "content": prompt}]}
    return {"model": MODELS[api], "max_output_tokens": 64, "input": prompt}


def _text_of(api: str, result: Any) -> str:
    if api == "messages":
        return "".join(b.text for b in result.content if b.type == "text")
    if api == "chat":
        return result.choices[0].message.content or ""
    return str(result.output_text)


def _delta(api: str, event: Any) -> tuple[str, bool]:
    """(text in this event, whether it starts a stream: message_start / role chunk / response.created)."""
    kind = getattr(event, "type", None)
    if api == "messages":
        if kind == "content_block_delta" and event.delta.type == "text_delta":
            return event.delta.text, False
        return "", kind == "message_start"
    if api == "chat":
        chunk = event.chunk if kind == "chunk" else event if kind is None else None
        text, start = "", False
        for choice in getattr(chunk, "choices", None) or ():
            text += choice.delta.content or ""
            start = start or bool(choice.delta.role)
        return text, start
    if kind == "response.output_text.delta":
        return event.delta, False
    return "", kind == "response.created"


async def _call(client: Any, form: str, prompt: str, extra_headers: dict[str, str], seen: list[str], starts: list[int]) -> str:
    """Run one call; ``seen`` collects the text the caller was shown as it arrives."""
    api, mode = form.split("-")
    kw = {**_request(api, prompt), "extra_headers": extra_headers}
    res = client.messages if api == "messages" else client.chat.completions if api == "chat" else client.responses
    if mode == "create":
        return _text_of(api, await res.create(**kw))
    manager: Any = res.stream(**kw) if mode == "helper" else await res.create(stream=True, **kw)
    async with manager as stream:
        async for event in stream:
            text, start = _delta(api, event)
            seen.append(text)
            starts[0] += start
    return "".join(seen)


async def main(calls: int, fault_rate: float, concurrency: int, seed: int) -> int:
    rng = random.Random(seed)
    timing = TimingModel(time_scale=0.01, max_concurrency=concurrency, batch_slowdown=0.0, output_tokens=24)
    with Emulator(timing=timing, seed=seed) as emu:
        clients = {
            "anthropic": lk.AsyncAnthropic(base_url=emu.base_url, api_key="sk-ant-bench", telemetry=False, retry=POLICY),
            "openai": lk.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="sk-bench", telemetry=False, retry=POLICY),
        }
        client_of = {form: clients["anthropic" if form.startswith("messages") else "openai"] for form in FORMS}
        clean: dict[tuple[str, str], str] = {}
        for api in MODELS:
            for prompt in PROMPTS:
                clean[(api, prompt)] = await _call(client_of[f"{api}-create"], f"{api}-create", prompt, {}, [], [0])
        warm = {name: c.latency.total_calls for name, c in clients.items()}

        counts: collections.Counter[str] = collections.Counter()
        by_kind: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        problems: list[str] = []
        sem = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            form = rng.choice(FORMS)
            api, mode = form.split("-")
            prompt = rng.choice(PROMPTS)
            kind: Optional[str] = rng.choice(sorted(FAULTS)) if rng.random() < fault_rate else None
            permanent = kind is not None and rng.random() < 0.2
            hdrs: dict[str, str] = {}
            if kind is not None:
                hdrs = {f"x-emulator-{k}": str(v) for k, v in FAULTS[kind].items()}
                hdrs["x-emulator-fault-id"] = uuid.uuid4().hex
                hdrs["x-emulator-fault-times"] = "100" if permanent else "1"
            label = "clean" if kind is None else f"{kind}{' (permanent)' if permanent else ''}"
            seen: list[str] = []
            starts = [0]
            expected = clean[(api, prompt)]
            async with sem:
                try:
                    text = await _call(client_of[form], form, prompt, hdrs, seen, starts)
                except lk.StreamInterruptedError as exc:
                    partial = exc.partial.text
                    shown = "".join(seen)
                    ok = bool(partial) and expected.startswith(partial) and (mode == "create" or partial == shown)
                    outcome = "failed, partial preserved" if ok else "failed, partial LOST"
                    if not expected.startswith(shown):
                        outcome = "duplicated content"
                    if not ok:
                        problems.append(f"call {i} {form} {label}: partial {partial!r} shown {shown!r}")
                except Exception as exc:  # noqa: BLE001 - an SDK error before content
                    shown = "".join(seen)
                    outcome = "failed before content" if not shown else "failed, partial LOST"
                    if shown:
                        problems.append(f"call {i} {form} {label}: {type(exc).__name__} after showing {shown!r}")
                else:
                    if text == expected and starts[0] <= 1:
                        outcome = "succeeded"
                    elif expected.startswith(text) and starts[0] <= 1:
                        outcome = "truncated answer"
                        problems.append(f"call {i} {form} {label}: silently truncated {text!r}")
                    else:
                        outcome = "duplicated content"
                        problems.append(f"call {i} {form} {label}: {starts[0]} starts, text {text!r}")
            counts[outcome] += 1
            by_kind[label][outcome] += 1

        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(calls)))
        elapsed = time.perf_counter() - start

        records = [rec for name, c in clients.items() for rec in c.latency.calls[warm[name]:]]
        recorded = sum(c.latency.total_calls - warm[name] for name, c in clients.items())
        retried = sum(1 for rec in records if rec.attempts > 1 and rec.outcome == "completed")
        hedges = sum(rec.ttft_deadline_hits for rec in records)
        for c in clients.values():
            await c.close()

    lost = calls - recorded
    duplicated = counts["duplicated content"]
    rows = [
        ("calls", calls),
        ("faults injected", sum(n for label, c in by_kind.items() if label != "clean" for n in c.values())),
        ("succeeded", counts["succeeded"]),
        ("  of which retried", retried),
        ("  TTFT deadline hedges", hedges),
        ("failed, partial output preserved", counts["failed, partial preserved"]),
        ("failed before content", counts["failed before content"]),
        ("failed, partial LOST", counts["failed, partial LOST"]),
        ("silently truncated", counts["truncated answer"]),
        ("duplicated content (must be 0)", duplicated),
        ("lost records (must be 0)", lost),
    ]
    print(f"latencykit fault benchmark: {calls} async calls, {fault_rate:.0%} faults, {concurrency} concurrent, {elapsed:.1f} s")
    width = max(len(k) for k, _ in rows)
    for name, value in rows:
        print(f"  {name:<{width}}  {value:>6}")
    print("\nby fault kind:")
    for label in sorted(by_kind):
        detail = ", ".join(f"{k} {v}" for k, v in sorted(by_kind[label].items()))
        print(f"  {label:<32} {detail}")
    for line in problems[:20]:
        print("PROBLEM", line)
    bad = duplicated or lost or counts["failed, partial LOST"] or counts["truncated answer"]
    return 1 if bad else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--fault-rate", type=float, default=0.10)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.calls, args.fault_rate, args.concurrency, args.seed)))
