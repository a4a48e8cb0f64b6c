"""Every exit path of every sync streamed form finalizes the record exactly once and frees the connection."""

from __future__ import annotations

import gc
import time
from typing import Any

import pytest

import latencykit as lk
from latencykit.emulator import Emulator

from _forms import SYNC_FORMS
from conftest import wait_for

FORMS = sorted(SYNC_FORMS)


def _open(request: pytest.FixtureRequest, form: str) -> tuple[Any, Any]:
    fixture, opener = SYNC_FORMS[form]
    client = request.getfixturevalue(fixture)
    return client, opener(client)


def _finalized_once(recorder: lk.Recorder) -> lk.CallRecord:
    assert wait_for(lambda: recorder.total_calls >= 1), "the record was never finalized"
    gc.collect()
    time.sleep(0.05)
    assert recorder.total_calls == 1, f"finalized {recorder.total_calls} times"
    rec = recorder.last
    assert rec is not None
    return rec


def _no_open_streams(emu: Emulator) -> None:
    assert wait_for(lambda: emu.stats.active_streams == 0), "the server still streams to a closed caller"


@pytest.mark.parametrize("form", FORMS)
def test_exhausted(request: pytest.FixtureRequest, form: str, recorder: lk.Recorder, emu: Emulator) -> None:
    """Reading to the end records one completed call with TTFT, TPOT and E2E."""
    _, stream = _open(request, form)
    with stream:
        events = list(stream)
    assert events
    rec = _finalized_once(recorder)
    assert rec.outcome == "completed" and rec.ttft is not None and rec.tpot is not None and rec.e2e is not None
    assert rec.output_tokens is not None
    _no_open_streams(emu)


@pytest.mark.parametrize("form", FORMS)
def test_break_then_close(request: pytest.FixtureRequest, form: str, recorder: lk.Recorder, emu: Emulator) -> None:
    """break + close() records one abandoned call whose E2E ends at the close."""
    _, stream = _open(request, form)
    for i, _event in enumerate(stream):
        if i == 5:
            break
    assert recorder.total_calls == 0  # still open: not finalized yet
    stream.close()
    rec = _finalized_once(recorder)
    assert rec.outcome == "abandoned" and rec.ttft is not None and rec.e2e is not None
    assert rec.e2e < 0.5  # far less than the 40 × 15 ms the full stream would take
    _no_open_streams(emu)


@pytest.mark.parametrize("form", FORMS)
def test_leave_with_block_early(request: pytest.FixtureRequest, form: str, recorder: lk.Recorder, emu: Emulator) -> None:
    """Leaving a with block early records one abandoned call."""
    _, stream = _open(request, form)
    with stream:
        for i, _event in enumerate(stream):
            if i == 5:
                break
    rec = _finalized_once(recorder)
    assert rec.outcome == "abandoned"
    _no_open_streams(emu)


@pytest.mark.parametrize("form", FORMS)
def test_raise_inside_loop(request: pytest.FixtureRequest, form: str, recorder: lk.Recorder, emu: Emulator) -> None:
    """An exception raised by the caller's loop body propagates unchanged; the call is abandoned."""
    _, stream = _open(request, form)

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with stream:
            for i, _event in enumerate(stream):
                if i == 5:
                    raise Boom()
    rec = _finalized_once(recorder)
    assert rec.outcome == "abandoned"
    _no_open_streams(emu)


@pytest.mark.parametrize("form", FORMS)
def test_garbage_collected_unclosed(request: pytest.FixtureRequest, form: str, recorder: lk.Recorder, emu: Emulator) -> None:
    """A stream dropped without close() is finalized when collected, and its connection released."""
    _, stream = _open(request, form)
    for i, _event in enumerate(stream):
        if i == 5:
            break
    del stream, _event
    gc.collect()
    rec = _finalized_once(recorder)
    assert rec.outcome == "abandoned"
    _no_open_streams(emu)


@pytest.mark.parametrize("form", FORMS)
def test_next_until_stop_iteration(request: pytest.FixtureRequest, form: str, recorder: lk.Recorder) -> None:
    """Driving the stream with next() to StopIteration records one completed call."""
    _, stream = _open(request, form)
    n = 0
    with stream:
        while True:
            try:
                next(stream)
            except StopIteration:
                break
            n += 1
    assert n > 0
    assert _finalized_once(recorder).outcome == "completed"


_LEFT_OPEN_AT_EXIT = """
import latencykit as lk
from latencykit.emulator import Emulator

emu = Emulator(seed=7).__enter__()
recorder = lk.Recorder()
recorder.add_listener(lambda rec: print("recorded", rec.outcome, rec.chunks > 0, flush=True))
client = lk.{cls}(base_url=emu.base_url{suffix}, api_key="sk-test", max_retries=0, recorder=recorder)
KEPT = {open}
for i, _ in enumerate(KEPT):
    if i == 3:
        break
print("exiting", recorder.total_calls, flush=True)
"""


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_stream_still_open_at_interpreter_exit_is_recorded(provider: str) -> None:
    """A stream still referenced when the program ends is finalized (abandoned) at exit, not lost."""
    import subprocess
    import sys

    if provider == "anthropic":
        code = _LEFT_OPEN_AT_EXIT.format(cls="Anthropic", suffix="", open=(
            'client.messages.create(stream=True, model="claude-sonnet-5", max_tokens=64, messages=[{"role": "user", "content": "Hi"}])'))
    else:
        code = _LEFT_OPEN_AT_EXIT.format(cls="OpenAI", suffix=' + "/v1"', open=(
            'client.chat.completions.create(stream=True, model="gpt-5-mini", messages=[{"role": "user", "content": "Hi"}])'))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert "exiting 0" in lines and "recorded abandoned True" in lines, out.stdout + out.stderr
    assert lines.index("exiting 0") < lines.index("recorded abandoned True")
