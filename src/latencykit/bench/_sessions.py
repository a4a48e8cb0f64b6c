"""Conversations, not independent requests: the ``sessions`` traffic shape, its think times, and its runner.

A session is one user's conversation of ``turns`` turns. Everything a session will say is drawn
ahead of time from the seed — the shared system prompt (the app's, ~1,200 tokens, the same for
every user), the opening message, which brings the user's own context (a document, a log, code: the
``rag`` profile's lengths, 200-8,000 tokens, so it is mostly new to the server), the follow-ups (20-150 tokens), the
asked answer lengths (50-300 tokens) and the think time before each later turn — but the
**answers are the server's**: turn k+1 is sent only when turn k's answer has arrived and the
think time has passed, with that answer, verbatim, in its history (so a prefix cache sees the
prefixes an app would send). Think times are drawn from a stated distribution (`parse_think`):
``2s`` (constant), ``exp:5s`` (exponential with that mean), ``uniform:1s-3s``.

Load: sessions arrive open loop at ``--rate`` (sessions per second, the arrival process of
``--arrivals``), or ``--concurrency`` users run sessions back to back (closed loop); within a
session the loop is closed. A turn's TTFT and E2E count from its intended send time — the
previous answer's end plus the think time — so a client that sends late is not excused. A
session whose turn fails ends there (its later turns cannot be written without the answer),
and with ``--duration`` a turn due after the cut-off is not sent; both are counted per session.
Every turn of a session goes to one client worker (`deal_key`).
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import statistics
from dataclasses import dataclass, replace
from typing import Any, Awaitable, Callable, Optional, Sequence

from ._text import CHARS_PER_TOKEN, prose
from ._traffic import PROFILES, TrafficRequest

__all__ = ["THINK_FORMS", "Think", "deal_key", "generate_sessions", "parse_think", "run_sessions", "session_stats",
           "with_history"]  # fmt: skip

THINK_FORMS = "2s, 500ms, exp:5s (exponential, that mean) or uniform:1s-3s"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s)?\s*$")


def _seconds(text: str, whole: str) -> float:
    m = _DURATION.match(text)
    if not m or (m[2] is None and float(m[1]) != 0):
        raise ValueError(f"--think takes {THINK_FORMS}; got {whole!r}")
    return float(m[1]) / (1000.0 if m[2] == "ms" else 1.0)


@dataclass(frozen=True)
class Think:
    """A think-time distribution: ``constant`` (``a`` seconds), ``exp`` (mean ``a``) or ``uniform`` (``a`` to ``b``)."""

    kind: str
    a: float
    b: float = 0.0
    text: str = ""

    @property
    def mean(self) -> float:
        """The distribution's mean, seconds."""
        return (self.a + self.b) / 2 if self.kind == "uniform" else self.a

    def draw(self, rng: random.Random) -> float:
        """One think time, seconds."""
        if self.kind == "exp":
            return rng.expovariate(1.0 / self.a) if self.a > 0 else 0.0
        if self.kind == "uniform":
            return rng.uniform(self.a, self.b)
        return self.a

    def cdf(self, x: float) -> float:
        """P(think <= x): what a measured think time is tested against."""
        if self.kind == "exp":
            return 0.0 if x < 0 else 1.0 - math.exp(-x / self.a) if self.a > 0 else 1.0
        if self.kind == "uniform":
            return min(max((x - self.a) / (self.b - self.a), 0.0), 1.0) if self.b > self.a else float(x >= self.a)
        return float(x >= self.a)


def parse_think(text: str) -> Think:
    """``2s`` / ``500ms`` / ``0`` (constant), ``exp:5s``, ``uniform:1s-3s`` → `Think`; ``ValueError`` names the forms."""
    t = str(text).strip().lower()
    kind, sep, rest = t.partition(":")
    if not sep:
        return Think("constant", _seconds(t, text), text=str(text).strip())
    if kind == "exp":
        mean = _seconds(rest, text)
        if mean <= 0:
            raise ValueError(f"--think exp: needs a mean above 0, got {text!r}")
        return Think("exp", mean, text=str(text).strip())
    if kind == "uniform":
        lo, dash, hi = rest.partition("-")
        if not dash:
            raise ValueError(f"--think takes {THINK_FORMS}; got {text!r}")
        a, b = _seconds(lo, text), _seconds(hi, text)
        if b < a:
            raise ValueError(f"--think uniform: the low end must not exceed the high end, got {text!r}")
        return Think("uniform", a, b, text=str(text).strip())
    raise ValueError(f"--think takes {THINK_FORMS}; got {text!r}")


_SYSTEM = ("You are the assistant of a software company's customer portal. Answer the user's questions about "
           "their account, orders and the product; keep answers short and concrete.\n")  # fmt: skip
_OVERHEAD = 3 + 4 + 4


def _tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def generate_sessions(n: int, *, turns: int, think: Think, seed: int = 0) -> list[TrafficRequest]:
    """``n`` turns in all, as ``ceil(n / turns)`` sessions of ``turns`` turns (the last one shorter when ``n`` is not
    a multiple), session by session; each request carries only its own new user message (`with_history` adds the
    conversation so far at run time), its session (``u0``, ``u1``, ...) and ``extra`` ``turn`` (1-based),
    ``turns`` (its session's) and ``think`` (seconds before it; 0 for the first turn)."""
    if not isinstance(turns, int) or isinstance(turns, bool) or turns < 1:
        raise ValueError(f"--turns must be a positive int, got {turns!r}")
    rng = random.Random(f"latencykit-bench:sessions:{seed}")
    system = _SYSTEM + prose(rng, 1200)
    buckets, _ = PROFILES["rag"]
    out: list[TrafficRequest] = []
    sessions = -(-n // turns)
    for s in range(sessions):
        mine = min(turns, n - s * turns)
        history_tokens = _tokens(system) + 3
        for k in range(1, mine + 1):
            if k == 1:
                r, acc = rng.random(), 0.0
                bucket = next((b for b in buckets if (acc := acc + b[3]) > r), buckets[-1])
                size = rng.randint(bucket[1], bucket[2] - 1)
            else:
                size = rng.randint(20, 150)
            text = prose(rng, size)
            asked = rng.randint(50, 300)
            wait = think.draw(rng) if k > 1 else 0.0
            history_tokens += _tokens(text) + 4
            out.append(TrafficRequest(len(out), "sessions", history_tokens, asked, system, ({"role": "user", "content": text},),
                                      bucket=f"turn{k}", prefix_id="sessions", session=f"u{s}",
                                      extra={"turn": k, "turns": mine, "think": wait}))  # fmt: skip
            history_tokens += asked + 4
    return out


def deal_key(req: TrafficRequest) -> int:
    """What a request is dealt to workers by: its session's number for a session turn (so a session stays on one
    worker), else its index."""
    if req.shape == "sessions" and req.session is not None:
        return int(req.session.lstrip("u"))
    return req.index


def with_history(req: TrafficRequest, history: Sequence[dict[str, Any]]) -> TrafficRequest:
    """The turn as sent: the conversation so far (user messages and the server's answers) before its new message."""
    if not history:
        return req
    messages = (*history, *req.messages)
    prompt = _tokens(req.system) + sum(_tokens(str(m["content"])) + 4 for m in messages) + 3
    return replace(req, messages=messages, prompt_tokens=prompt)


Send = Callable[[TrafficRequest, float], Awaitable[tuple[Any, float]]]
"""``send(request, intended send time) -> (Observed, end time)`` (times on the load runner's clock)."""


async def run_sessions(sessions: Sequence[Sequence[TrafficRequest]], arrivals: Optional[Sequence[float]],
                       users: Optional[int], send: Send, *, start: float, cutoff: Optional[float],
                       clock: Callable[[], float], on_arrival: Optional[Callable[[float], None]] = None) -> int:  # fmt: skip
    """Run each session's turns in order: open loop (``arrivals``: each session's offset from ``start``) or
    ``users`` sessions at a time back to back (closed loop). Returns the turns not sent (cut off or after a failed
    turn). ``on_arrival(lateness)`` is told how late each session's dispatch woke (open loop)."""
    left = [0]

    async def one_session(turns: Sequence[TrafficRequest], due: float) -> None:
        history: list[dict[str, Any]] = []
        when = due
        for k, req in enumerate(turns):
            if k:
                when += float(req.extra.get("think") or 0.0)
                delay = when - clock()
                if delay > 0:
                    await asyncio.sleep(delay)
            if cutoff is not None and when >= cutoff:
                left[0] += len(turns) - k
                return
            obs, end = await send(with_history(req, history), when)
            if obs.outcome != "completed" or obs.text is None:
                left[0] += len(turns) - k - 1
                return
            history += [*req.messages, {"role": "assistant", "content": obs.text}]
            when = end

    tasks: list[asyncio.Future[None]] = []
    try:
        if arrivals is not None:
            for turns, off in zip(sessions, arrivals):
                due = start + off
                if cutoff is not None and due >= cutoff:
                    left[0] += len(turns)
                    continue
                delay = due - clock()
                if delay > 0:
                    await asyncio.sleep(delay)
                if on_arrival is not None:
                    on_arrival(max(clock() - due, 0.0))
                tasks.append(asyncio.ensure_future(one_session(turns, due)))
        else:
            pending = iter(sessions)

            async def user() -> None:
                for turns in pending:
                    await one_session(turns, clock())

            tasks.extend(asyncio.ensure_future(user()) for _ in range(max(users or 1, 1)))
        await asyncio.gather(*tasks)
    except asyncio.CancelledError:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return left[0]


def group_sessions(requests: Sequence[TrafficRequest]) -> list[list[TrafficRequest]]:
    """Requests grouped by session, in order of each session's first appearance, each sorted by turn."""
    groups: dict[str, list[TrafficRequest]] = {}
    for r in requests:
        groups.setdefault(str(r.session), []).append(r)
    return [sorted(g, key=lambda r: int(r.extra.get("turn", 1))) for g in groups.values()]


def _q(values: Sequence[float], q: float) -> Optional[float]:
    if not values:
        return None
    xs = sorted(values)
    return xs[max(0, math.ceil(q * len(xs)) - 1)]


def session_stats(samples: Sequence[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """Per turn and per session figures of a sessions cell (``None`` for other traffic): per turn number and for
    ``first`` (turn 1) vs ``later`` (turns 2+) the count, TTFT P50/P95 and cached share of the prompt; sessions
    started, completed (every planned turn completed) and their time (first intended send → last answer's end);
    and the think time measured from each answer's end to the next turn's actual send."""
    turns = [s for s in samples if s.get("turn") is not None and not s.get("warmup") and s.get("client") != "thin"]
    if not turns:
        return None

    def group(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
        ttft = [s["ttft"] for s in rows if s.get("ttft") is not None]
        prompt = sum(s.get("in_tok") or 0 for s in rows)
        read = sum(s.get("cache_read") or 0 for s in rows)
        return {"n": len(rows), "ttft_p50_s": _q(ttft, 0.5), "ttft_p95_s": _q(ttft, 0.95),
                "cached_share": read / prompt if prompt else None}  # fmt: skip

    by_turn: dict[int, list[dict[str, Any]]] = {}
    by_session: dict[str, list[dict[str, Any]]] = {}
    for s in turns:
        by_turn.setdefault(int(s["turn"]), []).append(s)
        by_session.setdefault(str(s["session"]), []).append(s)
    times, thinks = [], []
    complete = 0
    for rows in by_session.values():
        rows.sort(key=lambda s: s["turn"])
        done = [s for s in rows if s["outcome"] == "completed"]
        if len(done) == int(rows[0].get("turns") or 0):
            complete += 1
            times.append(max(float(s["end"]) for s in rows) - float(rows[0]["sched"]))
        for a, b in zip(rows, rows[1:]):
            if b["turn"] == a["turn"] + 1 and a.get("end") is not None:
                thinks.append(float(b["sent"]) - float(a["end"]))
    return {
        "turns": {str(k): group(v) for k, v in sorted(by_turn.items())},
        "first": group(by_turn.get(1, [])),
        "later": group([s for k, v in by_turn.items() if k > 1 for s in v]),
        "sessions": len(by_session), "complete": complete,
        "session_p50_s": _q(times, 0.5), "session_p95_s": _q(times, 0.95),
        "think_n": len(thinks), "think_mean_s": statistics.fmean(thinks) if thinks else None,
        "think_p50_s": _q(thinks, 0.5),
    }  # fmt: skip
