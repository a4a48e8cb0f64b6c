"""``--traffic sessions``: conversations whose every turn waits for the answer before it, with think times.

Against an emulator whose TTFT is mostly prefill (so a prefix read shows): the planner on reads each turn's
history and turns 2+ get faster than turn 1; with it off nothing is cached and nothing gets faster; every turn
carries the answer the server gave to the turn before, verbatim (asked of the emulator again, which answers a
request deterministically); and the measured gaps between an answer's end and the next send are the drawn
think times, which follow the stated distribution.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from dataclasses import asdict
from typing import Any, Callable

import anthropic
import pytest

from latencykit.bench._cell import BenchRun
from latencykit.bench._config import parse_matrix
from latencykit.bench._run import BenchConfig, run_bench
from latencykit.bench._sessions import deal_key, generate_sessions, parse_think
from latencykit.commands._bench import main
from latencykit.emulator import Emulator, TimingModel
from latencykit.fleet._actor import WorkerInfo
from latencykit.fleet._fleet import FleetRound

# TTFT = 20 ms + 60 µs per uncached prompt token: a 3,000-token opening turn pays ~200 ms, a read history ~20 ms.
PREFILL = TimingModel(base_ttft=0.02, prefill_per_token=6e-5, decode_per_token=0.002, tokens_per_chunk=4,
                      max_concurrency=64, batch_slowdown=0.0, jitter=0.0, output_tokens=12)  # fmt: skip


def _strip(value: Any) -> Any:
    """A message without the planner's cache markers (the text is what must be verbatim)."""
    if isinstance(value, list):
        text = [b.get("text") for b in value if isinstance(b, dict) and b.get("type") == "text"]
        return "".join(t for t in text if t is not None)
    return value


def test_think_forms_and_their_one_line_errors() -> None:
    assert parse_think("2s").draw(random.Random(0)) == 2.0 and parse_think("500ms").mean == 0.5
    assert parse_think("0").mean == 0.0
    u = parse_think("uniform:1s-3s")
    assert (u.kind, u.mean) == ("uniform", 2.0)
    assert parse_think("exp:5s").mean == 5.0
    for bad in ("fast", "2", "exp:0s", "uniform:3s-1s", "uniform:1s", "gamma:2s", "-1s"):
        with pytest.raises(ValueError, match="--think") as info:
            parse_think(bad)
        assert "\n" not in str(info.value) and repr(bad) in str(info.value)


@pytest.mark.parametrize("text", ["exp:0.3s", "uniform:100ms-900ms"])
def test_drawn_think_times_follow_the_stated_distribution(text: str) -> None:
    """Kolmogorov-Smirnov against the stated CDF, 3,000 draws from the generator (critical D at 1 %: 1.63/√n)."""
    think = parse_think(text)
    reqs = generate_sessions(4000, turns=4, think=think, seed=3)
    draws = sorted(r.extra["think"] for r in reqs if r.extra["turn"] > 1)
    n = len(draws)
    d = max(max(abs((i + 1) / n - think.cdf(x)), abs(i / n - think.cdf(x))) for i, x in enumerate(draws))
    assert n == 3000 and d < 1.63 / math.sqrt(n)
    assert sum(draws) / n == pytest.approx(think.mean, rel=0.06)


def test_sessions_are_planned_whole_and_dealt_by_session() -> None:
    reqs = generate_sessions(10, turns=4, think=parse_think("1s"), seed=0)
    assert [r.session for r in reqs] == ["u0"] * 4 + ["u1"] * 4 + ["u2"] * 2  # --requests counts turns in all
    assert [r.extra["turn"] for r in reqs[:4]] == [1, 2, 3, 4] and reqs[8].extra["turns"] == 2
    assert {r.extra["think"] for r in reqs if r.extra["turn"] > 1} == {1.0} and reqs[0].extra["think"] == 0.0
    assert len({r.system for r in reqs}) == 1 and all(len(r.messages) == 1 for r in reqs)
    assert {deal_key(r) % 2 for r in reqs if r.session == "u1"} == {1}
    assert generate_sessions(10, turns=4, think=parse_think("exp:1s"), seed=0) == generate_sessions(
        10, turns=4, think=parse_think("exp:1s"), seed=0)


def test_prefix_caching_shows_from_turn_two_with_the_planner_and_not_without() -> None:
    """4 users, 12 sessions of 3 turns each, planner off then on; history verbatim on the wire; think times kept.
    The first 4 sessions (12 turns) are the warm-up: their first turns open the client's connections."""
    with Emulator(timing=PREFILL, seed=5) as emu:
        config = BenchConfig(target="emulator", base_url=emu.base_url, api="anthropic", traffic="sessions", turns=3,
                             think="exp:80ms", requests=36, warmup=12, concurrency=(4,), exact_output=False,
                             matrix=tuple(parse_matrix(["cache=off,auto"])))  # fmt: skip
        run = run_bench(config)
        wire = [r.body for r in emu.requests if r.path == "/v1/messages"]
        # The emulator answers a request deterministically: ask it again for what it said to a turn.
        client = anthropic.Anthropic(base_url=emu.base_url, api_key="sk-ant-test", max_retries=0)
        checked = 0
        try:
            # Both cells hold the same conversations; the planner's marked system prompt tells its turns apart.
            def key(b: dict[str, Any], msgs: list[dict[str, Any]]) -> str:
                return repr((isinstance(b["system"], str), [(m["role"], _strip(m["content"])) for m in msgs]))

            by_history = {key(b, b["messages"]): b for b in wire}
            for body in wire:
                msgs = body["messages"]
                if len(msgs) < 3 or checked >= 6:
                    continue
                before = by_history[key(body, msgs[:-2])]
                asked = {k: v for k, v in before.items() if k != "stream"}
                again = client.messages.create(**asked)
                assert msgs[-2]["role"] == "assistant" and _strip(msgs[-2]["content"]) == again.content[0].text
                checked += 1
        finally:
            client.close()
    assert checked == 6
    off, on = run.cells
    assert (off.level, on.level) == ("users=4", "users=4") and off.label == "cache=off"
    s_off, s_on = off.sessions(), on.sessions()
    assert s_off is not None and s_on is not None
    assert s_on["sessions"] == s_on["complete"] == 8 and s_on["turns_not_sent"] == 0  # the measured ones
    # Planner on: turns 2+ read their history; their TTFT drops well below turn 1's.
    assert s_on["later"]["cached_share"] > 0.7
    assert s_on["later"]["ttft_p50_s"] < 0.5 * s_on["first"]["ttft_p50_s"]
    # Planner off: nothing read, and later turns (longer prompts) are no faster.
    assert s_off["first"]["cached_share"] == 0 and s_off["later"]["cached_share"] == 0
    assert s_off["later"]["ttft_p50_s"] > 0.9 * s_off["first"]["ttft_p50_s"]
    # Each later turn left when its answer's end plus the drawn think time had passed, not before, hardly after.
    for cell in run.cells:
        rows = sorted(cell.samples, key=lambda s: (s["session"], s["turn"]))
        late = [b["sent"] - a["end"] - b["think"] for a, b in zip(rows, rows[1:]) if a["session"] == b["session"]]
        assert len(late) == 24 and min(late) > -0.001
        assert sorted(late)[len(late) // 2] < 0.01 and max(late) < 0.1
    doc = on.to_dict()["sessions"]
    assert doc["turns"]["1"]["n"] == 8 and doc["think_n"] == 16


def test_sessions_run_file_report_and_cli_errors(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s.json"
    fast = ["--emu-ideal", "--emu-time-scale", "0.05", "--emu-output-tokens", "6", "--no-exact-output", "--quiet"]
    code = main(["--traffic", "sessions", "--turns", "2", "--think", "20ms", "--requests", "6", "--rate", "20",
                 "--out", str(out), *fast])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0, text
    for words in ("sessions=20/s", "TTFT by turn", "turns 2+", "3 started, 3 completed every turn", "stated 20ms"):
        assert words in text, words
    run = BenchRun.load(out)
    assert run.cells[0].load["sessions"] is True and run.cells[0].sessions()["later"]["n"] == 3  # type: ignore[index]
    assert "TTFT by turn" in run.to_html()
    for argv, words in ((["--turns", "3"], "--turns shapes conversations: it needs --traffic sessions"),
                        (["--traffic", "sessions", "--think", "soon"], "--think takes"),
                        (["--traffic", "sessions", "--turns", "0"], "--turns must be a positive int")):  # fmt: skip
        assert main([*argv, "--requests", "4", "--concurrency", "1", "--out", str(tmp_path / "x.json"), *fast]) == 2
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.json").exists()


def test_duration_cuts_sessions_and_counts_the_turns_not_sent() -> None:
    """Sessions arriving open loop; turns due after --duration are not sent, and are counted."""
    fast = asdict(PREFILL) | {"prefill_per_token": 0.0}
    run = run_bench(BenchConfig(traffic="sessions", turns=4, think="150ms", requests=16, rate=(20.0,), duration=0.3,
                                timing=fast, exact_output=False))  # fmt: skip
    cell = run.cells[0]
    st = cell.sessions()
    assert st is not None and cell.turns_not_sent > 0
    assert len(cell.samples) + cell.turns_not_sent == 16 and st["complete"] < 4
    assert all(s["sched"] < 0.3 for s in cell.samples)


class _InProcessFleet:
    """A stand-in for `latencykit.fleet.Fleet`: deals each round to 2 workers exactly as the bench's job dealer
    does and runs the shares one after another here (the Ray lane runs them on real nodes)."""

    class spec:  # noqa: N801 - mirrors Fleet.spec
        text = "local:2"

    per_node = 1
    lost: list[dict[str, Any]] = []

    def check_reachable(self, url: Any) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        return {"address": "local:2", "nodes": [], "workers": []}

    def run(self, job: Any, deal: Callable[[int, int], tuple[dict[str, Any], int]], progress: Any) -> FleetRound:
        results = {}
        for w in range(2):
            payload, _ = deal(w, 2)
            share = job(payload, WorkerInfo(w, w, f"node{w}"))

            async def go() -> dict[str, Any]:
                await share.prepare()
                return dict(await share.run(time.perf_counter() + 0.05, lambda: None, lambda: None))

            results[w] = asyncio.run(go())
        return FleetRound(results, {0: 0.0, 1: 0.0}, [])


def test_a_session_stays_on_one_cluster_worker() -> None:
    fast = asdict(PREFILL) | {"prefill_per_token": 0.0}
    run = run_bench(BenchConfig(traffic="sessions", turns=3, think="10ms", requests=12, concurrency=(2,), timing=fast,
                                exact_output=False), cluster=_InProcessFleet())  # fmt: skip
    cell = run.cells[0]
    workers: dict[str, set[int]] = {}
    for s in cell.samples:
        workers.setdefault(s["session"], set()).add(s["worker"])
    assert len(workers) == 4 and all(len(w) == 1 for w in workers.values())
    assert {next(iter(w)) for w in workers.values()} == {0, 1}
    assert cell.sessions()["complete"] == 4  # type: ignore[index]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_every_client_and_call_puts_the_answer_verbatim_in_the_next_turn(api: str) -> None:
    """The thin reader, the plain SDK (streamed and not) and latencykit's non-streaming call each carry the answer."""
    import openai

    fast = TimingModel(base_ttft=0.005, prefill_per_token=0.0, decode_per_token=0.001, output_tokens=10, jitter=0.0)
    matrix = ({"client": "thin"}, {"client": "sdk", "call": "stream"}, {"client": "sdk", "call": "create"},
              {"client": "latencykit", "call": "create"})  # fmt: skip
    with Emulator(timing=fast, seed=2) as emu:
        run = run_bench(BenchConfig(target="emulator", base_url=emu.base_url, api=api, traffic="sessions", turns=2,
                                    requests=4, concurrency=(2,), exact_output=False, matrix=matrix))  # fmt: skip
        path = "/v1/messages" if api == "anthropic" else "/v1/chat/completions"
        wire = [r.body for r in emu.requests if r.path == path]
        seconds = [b for b in wire if len(b["messages"]) >= 3]
        assert len(wire) == 16 and len(seconds) == 8
        # The planner marks the system prompt (a list then), which makes another request of it: keep them apart.
        def key(b: dict[str, Any], text: Any) -> str:
            return repr((isinstance(b.get("system"), list), _strip(text)))

        firsts = {key(b, b["messages"][-1]["content"]): b for b in wire if len([m for m in b["messages"] if m["role"] != "system"]) == 1}
        if api == "anthropic":
            ant = anthropic.Anthropic(base_url=emu.base_url, api_key="sk-ant-test", max_retries=0)
            ask = lambda b: ant.messages.create(**{k: v for k, v in b.items() if k != "stream"}).content[0].text  # noqa: E731
        else:
            oai = openai.OpenAI(base_url=emu.base_url + "/v1", api_key="sk-test", max_retries=0)
            keep = ("model", "messages", "max_tokens", "max_completion_tokens")
            ask = lambda b: oai.chat.completions.create(**{k: v for k, v in b.items() if k in keep}).choices[0].message.content  # noqa: E731
        for b in seconds:
            msgs = [m for m in b["messages"] if m["role"] != "system"]
            first = firsts[key(b, msgs[0]["content"])]
            assert msgs[1]["role"] == "assistant" and _strip(msgs[1]["content"]) == ask(first)
    assert all(c.sessions()["complete"] == 2 for c in run.cells)  # type: ignore[index]
