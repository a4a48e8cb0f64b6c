"""Security (issue 5, item 6): prompts and API keys never leak into telemetry, logs or reports.

Calls carry a unique canary string in their prompts (system, user and instructions) and
the clients a recognisable API key. Every span, metric point, log record (DEBUG and up,
tracebacks included) and report is captured and searched. Only with
``Telemetry(capture_content=True)`` may the canary appear, and then in spans only; the
key never. Keys latencykit puts on the wire (OpenAI ``prompt_cache_key``) are keyed
hashes: neither the text nor a plain hash of it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from typing import Any, Iterator

import anthropic
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import latencykit as lk
from latencykit.emulator import Emulator

from conftest import headers

CANARY = "CANARY-" + uuid.uuid4().hex
ANT_KEY = "sk-ant-KEYCANARY-" + uuid.uuid4().hex
OAI_KEY = "sk-proj-KEYCANARY-" + uuid.uuid4().hex
# Long enough to be cached by both providers (so the planner marks it / derives a key).
SYSTEM = f"You are a meticulous archivist. Secret tag {CANARY}. " + "Keep every answer short and precise. " * 400
USER = f"Summarise the note labelled {CANARY}."


class Captured:
    """In-memory spans and metrics behind one latencykit Telemetry."""

    def __init__(self, capture_content: bool) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.telemetry = lk.Telemetry(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, capture_content=capture_content
        )

    def span_text(self) -> str:
        return "\n".join(span.to_json() for span in self.spans.get_finished_spans())

    def metric_text(self) -> str:
        return self.reader.get_metrics_data().to_json()

    def close(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def _run_calls(emu: Emulator, telemetry: lk.Telemetry) -> list[Any]:
    """Both providers, several forms, a retried, a failing and an interrupted call; returns the clients."""
    ant = lk.Anthropic(base_url=emu.base_url, api_key=ANT_KEY, telemetry=telemetry, retry=lk.RetryPolicy(initial_backoff=0.01, max_backoff=0.02))
    oai = lk.OpenAI(base_url=emu.base_url + "/v1", api_key=OAI_KEY, telemetry=telemetry, retry=lk.RetryPolicy(initial_backoff=0.01, max_backoff=0.02))
    ant_req: dict[str, Any] = {"model": "claude-sonnet-5", "max_tokens": 32, "system": SYSTEM, "messages": [{"role": "user", "content": USER}]}
    chat_req: dict[str, Any] = {"model": "gpt-4o-mini", "max_tokens": 32, "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]}
    resp_req: dict[str, Any] = {"model": "gpt-4.1-mini", "max_output_tokens": 32, "instructions": SYSTEM, "input": USER}

    ant.messages.create(**ant_req)
    ant.messages.create(**ant_req)  # the second one reads the cache the planner marked
    with ant.messages.stream(**ant_req) as stream:
        stream.get_final_message()
    ant.messages.create(extra_headers=headers(status=529, fault_times=1, fault_id=uuid.uuid4().hex), **ant_req)
    with pytest.raises(anthropic.BadRequestError):
        ant.messages.create(extra_headers=headers(status=400), **ant_req)
    with pytest.raises(lk.StreamInterruptedError):
        for _ in ant.messages.create(stream=True, extra_headers=headers(drop_after_chunks=3), **ant_req):
            pass
    oai.chat.completions.create(**chat_req)
    for _ in oai.chat.completions.create(stream=True, **chat_req):
        pass
    oai.responses.create(**resp_req)
    with oai.responses.stream(**resp_req) as rstream:
        rstream.get_final_response()
    with pytest.raises(lk.StreamInterruptedError):
        oai.responses.create(extra_headers=headers(error_after_chunks=3), **resp_req)
    return [ant, oai]


def _reports(client: Any) -> str:
    """Every report latencykit renders for a client, concatenated."""
    recorder = client.latency
    summary = recorder.summary()
    report = recorder.cache_report()
    parts = [str(summary), summary.to_json(), summary._repr_html_(), repr(summary)]
    parts += [str(report), json.dumps(report.to_dict(), default=str), report._repr_html_(), repr(report)]
    parts += [repr(recorder), json.dumps(recorder.to_dict(), default=str)]
    for rec in recorder.calls:
        parts += [repr(rec), json.dumps(rec.to_dict(), default=str)]
    return "\n".join(parts)


def _sdk_request_log(record: logging.LogRecord) -> bool:
    # The SDKs themselves log each request's options, body included, at DEBUG
    # ("Request options: ..."); a raw SDK client does the same, so it is not latencykit's.
    return record.name.split(".")[0] in ("anthropic", "openai") and record.msg == "Request options: %s"


def _logs(caplog: pytest.LogCaptureFixture, include_sdk_requests: bool = False) -> str:
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    return "\n".join(
        formatter.format(r) + repr(r.args) for r in caplog.records if include_sdk_requests or not _sdk_request_log(r)
    )


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every log record at DEBUG and up, from the root and the latencykit loggers."""
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="latencykit")
    yield caplog


def _where(needle: str, **blobs: str) -> list[str]:
    return [name for name, blob in blobs.items() if needle in blob]


@pytest.mark.parametrize("capture_content", [False, True])
def test_canary_and_key_never_leak(emu: Emulator, debug_logs: pytest.LogCaptureFixture, capture_content: bool) -> None:
    """Neither the prompt canary nor the API key appears in spans, metrics, logs or reports
    (with content capture on, the canary appears in spans only)."""
    captured = Captured(capture_content)
    clients = _run_calls(emu, captured.telemetry)
    try:
        assert sum(c.latency.total_calls for c in clients) == 11
        blobs = {
            "spans": captured.span_text(),
            "metrics": captured.metric_text(),
            "logs": _logs(debug_logs),
            "sdk request logs": _logs(debug_logs, include_sdk_requests=True),
            "reports": "\n".join(_reports(c) for c in clients),
        }
        assert blobs["spans"] and blobs["metrics"] and blobs["reports"]
        for key in (ANT_KEY, OAI_KEY, "KEYCANARY"):
            assert _where(key, **blobs) == [], f"the API key leaked into {_where(key, **blobs)}"
        del blobs["sdk request logs"]  # the key is checked there too; the prompt is the SDK's own business
        expected = ["spans"] if capture_content else []
        assert _where(CANARY, **blobs) == expected
    finally:
        for client in clients:
            client.close()
        captured.close()


def _digests(text: str) -> set[str]:
    out = set()
    for name in ("sha256", "sha1", "md5", "sha512", "blake2b", "sha3_256"):
        h = hashlib.new(name, text.encode())
        out.add(h.hexdigest())
        out.add(h.digest().hex())
    return out


def test_prompt_cache_key_is_a_keyed_hash(emu: Emulator) -> None:
    """The derived ``prompt_cache_key`` is neither the prompt nor an unkeyed hash of any part of it."""
    client = lk.OpenAI(base_url=emu.base_url + "/v1", api_key=OAI_KEY, telemetry=False)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
    try:
        client.chat.completions.create(model="gpt-4o-mini", max_tokens=16, messages=messages)
        client.responses.create(model="gpt-4.1-mini", max_output_tokens=16, instructions=SYSTEM, input=USER)
    finally:
        client.close()
    keys = [r.body["prompt_cache_key"] for r in emu.requests[-2:] if isinstance(r.body, dict) and "prompt_cache_key" in r.body]
    assert len(keys) == 2, "latencykit derived no prompt_cache_key for a long static prefix"
    candidates = [SYSTEM, USER, SYSTEM + USER, json.dumps(messages), json.dumps(messages[:1]), json.dumps(SYSTEM)]
    candidates += [json.dumps(m, sort_keys=True) for m in messages] + [json.dumps(messages, sort_keys=True, separators=(",", ":"))]
    digests = set().union(*(_digests(c) for c in candidates))
    for key in keys:
        assert CANARY not in key and "archivist" not in key
        for run in re.findall(r"[0-9a-fA-F]{8,}", key):
            assert not any(run.lower() in d for d in digests), f"{key!r} is a plain hash of the prompt"
