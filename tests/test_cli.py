"""The `latencykit` command: demo and emulator, as a newcomer runs them."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request

import anthropic
import pytest

import latencykit as lk
from latencykit.bench._strategies import DEMO_NAMES
from latencykit.commands._demo import run_demo
from latencykit.cli import main


def _number(text: str) -> float:
    return float(text.strip().replace(",", "").rstrip("×"))


def test_demo_prints_labelled_emulated_percentiles(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo runs both providers sync and async, prints TTFT/TPOT/E2E percentiles labelled emulated,
    and ends with the strategy comparison: real TTFT P50/P99 figures and speed-ups per strategy."""
    recorder = run_demo(conversations=1, parallel=2)
    out = capsys.readouterr().out
    assert "EMULATED" in out and "TTFT" in out and "TPOT" in out and "E2E" in out and "P99" in out
    assert "anthropic" in out and "openai" in out
    calls = recorder.calls
    assert {c.provider for c in calls} == {"anthropic", "openai"}
    assert {c.api for c in calls} == {"messages", "chat.completions", "responses"}
    assert all(c.outcome == "completed" and c.streamed and c.ttft is not None for c in calls)
    assert len(calls) == 3 * 2 * 1 + 3 * 2 * 2

    # Three reasoning models: TTFO after TTFT where reasoning streamed first, equal where it was hidden.
    table = out[out.index("EMULATED reasoning models"):out.index("EMULATED latencies")]
    rows = {cells[0]: cells for line in table.splitlines()
            if len(cells := [c.strip() for c in line.strip("│ ").split("│")]) == 6 and cells[1] in ("hidden", "streamed", "summary")}  # fmt: skip
    assert [r[1] for r in rows.values()] == ["hidden", "streamed", "summary"], table
    ttft, ttfo = ({r[1]: float(r[k]) for r in rows.values()} for k in (2, 3))
    assert ttfo["hidden"] == ttft["hidden"] and ttfo["streamed"] > ttft["streamed"] + 100 and ttfo["summary"] > ttft["summary"]

    # The comparison comes last (before the closing "emulated" line), labelled emulated, one row per strategy.
    tail = out[out.index("EMULATED strategy comparison"):]
    assert out.index("prompt cache") < out.index("EMULATED strategy comparison")
    rows: dict[str, list[str]] = {}
    for line in tail.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) == 4 and cells[0] in DEMO_NAMES:
            rows[cells[0]] = cells
    assert list(rows) == list(DEMO_NAMES), tail
    ttft = {name: [_number(v) for v in row[1].split("/")] for name, row in rows.items()}
    raw, off, on = (ttft[n] for n in DEMO_NAMES)
    for p50, p99 in (raw, off, on):
        assert 50 < p50 <= p99 < 5000  # milliseconds, from real calls
    # Non-streamed: the first token arrives with the whole answer (40 tokens × 16 ms of decode after it).
    assert raw[0] > 2 * off[0] and raw[0] > 2 * on[0]
    assert rows[DEMO_NAMES[0]][2] == "baseline"
    for name, (p50, p99) in ((DEMO_NAMES[1], off), (DEMO_NAMES[2], on)):
        s50, s99 = (_number(v) for v in rows[name][2].split("/"))
        assert s50 == pytest.approx(raw[0] / p50, rel=0.02) and s99 == pytest.approx(raw[1] / p99, rel=0.02)
        assert s50 > 2
    hits = {name: row[3] for name, row in rows.items()}
    assert hits[DEMO_NAMES[0]] == "0/8" and hits[DEMO_NAMES[1]] == "0/8"
    assert int(hits[DEMO_NAMES[2]].split("/")[0]) >= 4  # the planner caches each document after its first sight
    assert "speed-up" in tail and "These latencies are emulated" in tail


def test_cli_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    """Bad options exit with status 2 and name the bad value."""
    with pytest.raises(SystemExit) as info:
        main(["emulator", "--port", "99999"])
    assert info.value.code == 2 and "99999" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["demo", "--parallel", "0"])


def test_emulator_command_serves_real_sdk_calls() -> None:
    """`latencykit emulator --port N` serves an SDK client until terminated."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "latencykit.cli", "emulator", "--port", str(port), "--time-scale", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "emulator did not start"
                time.sleep(0.1)
        with lk.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="k") as client:
            msg = client.messages.create(model="claude-sonnet-5", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
        assert isinstance(msg, anthropic.types.Message) and client.latency.last is not None
    finally:
        proc.terminate()
        proc.wait(10)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()
