"""Helpers for the framework tier: import a framework or skip, and check the records of a call.

Each test hands a framework a latencykit client pointed at the emulator and asserts two
things a user would check: the framework's own result, and that every model request the
emulator received left exactly one completed record with the server's token counts.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Optional

import pytest

import latencykit as lk
from latencykit.emulator import Emulator

# .ci/frameworks.sh sets this: there a missing framework is an error, not a skip.
REQUIRED = os.environ.get("LATENCYKIT_REQUIRE_FRAMEWORKS") == "1"

# Emulator: a text answer is TIMING.output_tokens (24) tokens; tool arguments and JSON
# documents are cut into 10-character fragments, one token each.
TEXT_TOKENS = 24


def need(module: str, dist: str) -> ModuleType:
    """Import `module`, or skip the calling test module naming the pip distribution."""
    if REQUIRED:
        return importlib.import_module(module)
    return pytest.importorskip(
        module, reason=f"{dist} is not installed; the framework tier runs in .ci/frameworks.sh"
    )


@dataclass
class Calls:
    """What one block of framework code sent and recorded: filled in when the block exits."""

    requests: list[Any] = field(default_factory=list)
    records: list[lk.CallRecord] = field(default_factory=list)

    @property
    def only(self) -> lk.CallRecord:
        """The single record (asserts there is exactly one)."""
        assert len(self.records) == 1, [(r.operation, r.method, r.outcome) for r in self.records]
        return self.records[0]


@contextmanager
def model_calls(emu: Emulator, recorder: lk.Recorder) -> Iterator[Calls]:
    """Collect the model requests the emulator receives and the records made inside the block.

    On exit asserts one record per request, each completed and carrying the server's usage.
    """
    # The emulator keeps its last 1000 requests: count new ones by its running total.
    before_requests = emu.stats.requests_total
    before_records = len(recorder.calls)
    calls = Calls()
    yield calls
    new = emu.stats.requests_total - before_requests
    recent = emu.requests[-new:] if new else []
    calls.requests = [r for r in recent if r.path.endswith(("/messages", "/chat/completions", "/responses"))]
    calls.records = list(recorder.calls)[before_records:]
    assert calls.requests, "the framework sent no model request"
    assert len(calls.records) == len(calls.requests), (
        f"{len(calls.requests)} model requests but {len(calls.records)} records: "
        f"{[(r.operation, r.method, r.streamed) for r in calls.records]}"
    )
    for rec in calls.records:
        assert rec.outcome == "completed", (rec.outcome, rec.error_type)
        assert rec.input_tokens and rec.input_tokens > 0, rec
        assert rec.output_tokens and rec.output_tokens > 0, rec
        assert rec.e2e is not None and rec.e2e > 0


def streamed_request(calls: Calls, index: int = 0) -> bool:
    """Whether the request at `index` went over the wire as a stream."""
    body = calls.requests[index].body
    return isinstance(body, dict) and body.get("stream") is True


def check_streamed(rec: lk.CallRecord, wire_streamed: bool) -> None:
    """The record says streamed exactly when the request was sent as a stream, with TTFT then."""
    assert rec.streamed is wire_streamed, (rec.streamed, rec.not_streamed_reason)
    if wire_streamed:
        assert rec.ttft is not None and 0 < rec.ttft <= rec.e2e
    else:
        assert rec.not_streamed_reason


def usage_of(obj: Any, *names: str) -> Optional[int]:
    """The first integer attribute or key among `names` on `obj` (framework usage objects differ)."""
    for name in names:
        value = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
        if isinstance(value, int):
            return value
    return None
