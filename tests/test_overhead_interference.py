"""`benchmarks/overhead.py --only interference`: what it runs before each planning call, and its table."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import latencykit as lk
from latencykit.emulator import Emulator
from latencykit.providers._calls import prepare

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import overhead  # noqa: E402
from overhead_async import ASYNC_OUTPUT_TOKENS  # noqa: E402
from overhead_interference import SWEEP_BYTES, _Interference, interference_axis  # noqa: E402


def test_what_runs_before_planning_does_what_its_row_says(emu: Emulator) -> None:
    things = _Interference(emu.base_url)
    try:
        assert things.nothing() == 0
        assert things.sweep() == SWEEP_BYTES
        # Both SDK rows stream a whole answer: one event per output token, and the events around them.
        replayed, live = things.sdk_replayed(), things.sdk_call()
        assert replayed == live
        assert replayed >= ASYNC_OUTPUT_TOKENS + 5
    finally:
        things.close()


def test_the_measured_call_plans_the_agent_prompt_in_full(emu: Emulator) -> None:
    # Not the short-prompt shortcut: the request comes back with cache breakpoints placed.
    client = lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0)
    try:
        sent, finish = prepare(client, "messages", overhead.agent_prompt(1.0, "messages", 0))
    finally:
        client.close()
    assert finish is not None
    assert "cache_control" in repr(sent)


def test_the_table_has_every_row_against_back_to_back(emu: Emulator, capsys: pytest.CaptureFixture[str]) -> None:
    result = interference_axis(emu.base_url, 2, overhead._orders)
    out = capsys.readouterr().out
    names = ["nothing (back to back)", f"an {SWEEP_BYTES >> 20} MB memory copy", "a 1 ms sleep", "a raw SDK call, replayed",
             "a raw SDK call (30-token stream)"]  # fmt: skip
    assert list(result) == names
    for name in names:
        line = next(line for line in out.splitlines() if line.startswith(name))
        us, ratio, low, high = (float(x) for x in re.findall(r"\d+\.\d+|\d+", line[len(name):]))
        assert us > 0 and low <= ratio <= high
        assert result[name][0] == pytest.approx(us, abs=0.5)
    assert result[names[0]][1] == (1.0, 1.0, 1.0)  # the baseline against itself
