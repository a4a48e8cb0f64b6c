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
from latencykit.bench.demo import run_demo
from latencykit.cli import main


def test_demo_prints_labelled_emulated_percentiles(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo runs both providers sync and async and prints TTFT/TPOT/E2E percentiles labelled emulated."""
    recorder = run_demo(conversations=1, parallel=2)
    out = capsys.readouterr().out
    assert "EMULATED" in out and "TTFT" in out and "TPOT" in out and "E2E" in out and "P99" in out
    assert "anthropic" in out and "openai" in out
    calls = recorder.calls
    assert {c.provider for c in calls} == {"anthropic", "openai"}
    assert {c.api for c in calls} == {"messages", "chat.completions", "responses"}
    assert all(c.outcome == "completed" and c.streamed and c.ttft is not None for c in calls)
    assert len(calls) == 3 * 2 * 1 + 3 * 2 * 2


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
