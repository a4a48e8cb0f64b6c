"""Shared by test_paths_sync / test_paths_async: one-record and streamed / not-streamed assertions."""

from __future__ import annotations

from typing import Any

import pydantic

import latencykit as lk
from latencykit.emulator import Emulator

RAW = "raw response requested"
REQUEST = "client.post()/request()"


class Forecast(pydantic.BaseModel):
    """A structured answer the emulator fills from its JSON schema."""

    city: str
    days: int


def only_record(recorder: lk.Recorder) -> lk.CallRecord:
    """The one record of the test: there must be exactly one."""
    calls = recorder.calls
    assert len(calls) == 1, [(c.api, c.method) for c in calls]
    return calls[0]


def sent(emu: Emulator) -> dict[str, Any]:
    """The body of the last request the emulator received."""
    return emu.requests[-1].body


def assert_not_streamed(rec: lk.CallRecord, method: str, reason: str) -> None:
    """Sent as asked, timed as a whole: E2E, no TTFT, and the reason given."""
    assert (rec.method, rec.streamed, rec.outcome) == (method, False, "completed")
    assert reason in (rec.not_streamed_reason or "")
    assert rec.e2e is not None and rec.e2e > 0 and rec.ttft is None


def assert_streamed(rec: lk.CallRecord, method: str) -> None:
    """Streamed and timed token by token."""
    assert (rec.method, rec.streamed, rec.not_streamed_reason, rec.outcome) == (method, True, None, "completed")
    assert rec.ttft is not None and rec.e2e is not None and rec.ttft < rec.e2e and rec.chunks > 1


LITELLM_OPTIONS = {"headers": {"X-Stainless-Raw-Response": "true"}}
"""The options LiteLLM passes to ``client.post("/chat/completions", ...)``."""
