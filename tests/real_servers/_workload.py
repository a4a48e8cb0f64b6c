"""Workload pieces shared by the real-server tests: prompts of a known token length, cold/warm runs."""

from __future__ import annotations

import random
import statistics
import uuid
from typing import Any, Callable, Optional

from latencykit import CallRecord

WORDS = ("the server model token cache prefix prompt stream client answer question user assistant system time "
         "first fast slow data test value list key word line code").split()  # fmt: skip
IGNORE_EOS = {"ignore_eos": True}


def words(n: int, rng: random.Random) -> str:
    """``n`` random words (a never-seen text for each new ``rng``)."""
    return " ".join(rng.choice(WORDS) for _ in range(n))


def calibrated_text(target: int, count: Callable[[str], int], rng: random.Random) -> tuple[str, int]:
    """Random words whose token count (by the server's own tokenizer) is within 2 % of ``target``."""
    n = target
    text, k = "", 0
    for _ in range(6):
        text = words(n, rng)
        k = count(text)
        if abs(k - target) <= target * 0.02:
            break
        n = max(1, int(n * target / k))
    return text, k


def chat(system: str, question: str) -> list[dict[str, str]]:
    """A system prompt (the shared prefix) and a user turn."""
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def cold_warm(
    client: Any,
    count: Callable[[str], int],
    target: int,
    reps: int = 3,
    max_tokens: int = 16,
    server_time: Optional[Callable[[Callable[[], Any]], Optional[float]]] = None,
) -> dict[str, Any]:
    """One warm-up call, then per rep a cold call on a fresh random prefix and a warm call on the same prefix.

    Returns the records, the medians of client TTFT, and ``ratio``: the fastest cold over the
    fastest warm call. On a shared 2-core box another process only ever adds time, so the minima
    are the stable estimate of each kind's cost (medians of 3 swung 1.6x-6.6x between runs).
    ``server_time``, when given, wraps each call and returns the server's own time for it (vLLM:
    the engine's prefill time from ``/metrics``); its cold and warm lists and ``server_ratio``
    (sum over sum) are added.
    """
    client.chat.completions.create(messages=[{"role": "user", "content": "warm up"}], max_tokens=4, extra_body=IGNORE_EOS)
    rng = random.Random(uuid.uuid4().int)  # fresh prefixes, even against a server that saw an earlier run
    cold: list[CallRecord] = []
    warm: list[CallRecord] = []
    server: dict[str, list[float]] = {"cold": [], "warm": []}
    prefix_tokens: list[int] = []

    def call(system: str, question: str, kind: list[CallRecord], name: str) -> None:
        def create() -> Any:
            return client.chat.completions.create(messages=chat(system, question), max_tokens=max_tokens, extra_body=IGNORE_EOS)

        if server_time is None:
            create()
        else:
            seconds = server_time(create)
            assert seconds is not None, "the server reported no time for the call"
            server[name].append(seconds)
        kind.append(client.latency.last)

    for _ in range(reps):
        system, k = calibrated_text(target, count, rng)
        prefix_tokens.append(k)
        call(system, "Question one?", cold, "cold")
        call(system, "A different question two?", warm, "warm")
    cold_ttft = statistics.median(r.ttft for r in cold if r.ttft is not None)
    warm_ttft = statistics.median(r.ttft for r in warm if r.ttft is not None)
    out = {
        "cold": cold, "warm": warm, "prefix_tokens": prefix_tokens, "max_tokens": max_tokens,
        "cold_ttft_ms": [round((r.ttft or 0) * 1000, 1) for r in cold],
        "warm_ttft_ms": [round((r.ttft or 0) * 1000, 1) for r in warm],
        "cold_ttft_median_ms": round(cold_ttft * 1000, 1), "warm_ttft_median_ms": round(warm_ttft * 1000, 1),
        "median_ratio": round(cold_ttft / warm_ttft, 2),
        "ratio": round(min(r.ttft for r in cold if r.ttft is not None) / min(r.ttft for r in warm if r.ttft is not None), 2),
    }  # fmt: skip
    if server_time is not None:
        out["server_cold_ms"] = [round(x * 1000, 1) for x in server["cold"]]
        out["server_warm_ms"] = [round(x * 1000, 1) for x in server["warm"]]
        out["server_ratio"] = round(sum(server["cold"]) / sum(server["warm"]), 2)
    return out


def timeline(records: list[CallRecord], scrapes: Any) -> dict[str, Any]:
    """When each call started, got its first token and ended, and when each scrape was taken
    (seconds from the first call's start): what to read when a doctor test fails."""
    t0 = min(r.started_at for r in records)
    calls = [
        {"start": round(r.started_at - t0, 3), "first_token": round(r.started_at + (r.ttft or 0) - t0, 3),
         "end": round(r.started_at + (r.e2e or 0) - t0, 3), "server_ttft": r.extra.get("server_ttft")}
        for r in sorted(records, key=lambda r: r.started_at)
    ]  # fmt: skip
    waits = [(s.wall - t0, s.gauge("waiting"), s.gauge("running")) for s in scrapes]
    return {"calls": calls, "scrapes": [(round(t, 2), w, r) for t, w, r in waits]}
