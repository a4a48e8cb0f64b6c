"""OpenTelemetry spans and metrics from real calls to the emulator, exported in memory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any, Iterator

import anthropic
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ExponentialHistogram, HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import latencykit as lk
from latencykit.emulator import Emulator
from latencykit.telemetry._semconv import DURATION_BUCKETS

from conftest import ANT_REQ, CHAT_REQ, RESP_REQ, headers

CANARY = "zebra-canary-prompt-7731"


class OTel:
    """An in-memory trace exporter and metric reader wired into a latencykit Telemetry."""

    def __init__(self, semconv: str | None = None, capture_content: bool = False, views: Any = (), chunk_metrics: bool = True) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader], views=list(views))
        self.telemetry = lk.Telemetry(
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            semconv=semconv,
            capture_content=capture_content,
            chunk_metrics=chunk_metrics,
        )

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def metrics(self) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    out.setdefault(m.name, []).extend(m.data.data_points)
                    out.setdefault("__data__" + m.name, []).append(m.data)
        return out

    def close(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


@pytest.fixture
def otel() -> Iterator[OTel]:
    """In-memory OTel providers for one test."""
    o = OTel()
    yield o
    o.close()


def _ours(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return [s for s in spans if s.instrumentation_scope is not None and s.instrumentation_scope.name == "latencykit"]


def test_one_client_span_per_call_with_genai_attributes(emu: Emulator, otel: OTel) -> None:
    """Each call gives one CLIENT span `chat {model}` with GenAI usage, cache and timing attributes."""
    with lk.Anthropic(base_url=emu.base_url, api_key="sk-ant-secret", telemetry=otel.telemetry) as client:
        msg = client.messages.create(**ANT_REQ)
    (span,) = _ours(otel.finished())
    rec = client.latency.last
    assert rec is not None
    a = dict(span.attributes or {})
    assert span.name == f"chat {ANT_REQ['model']}" and span.kind is SpanKind.CLIENT
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "anthropic"
    assert a["gen_ai.request.model"] == ANT_REQ["model"] and a["gen_ai.response.model"] == msg.model
    assert a["gen_ai.response.id"] == msg.id and list(a["gen_ai.response.finish_reasons"]) == ["end_turn"]
    u = msg.usage
    assert a["gen_ai.usage.input_tokens"] == u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0)
    assert a["gen_ai.usage.output_tokens"] == u.output_tokens
    assert a["gen_ai.usage.cache_read.input_tokens"] == (u.cache_read_input_tokens or 0)
    assert a["gen_ai.usage.cache_creation.input_tokens"] == (u.cache_creation_input_tokens or 0)
    assert a["gen_ai.request.stream"] is True and a["gen_ai.response.time_to_first_chunk"] == pytest.approx(rec.ttfb)
    assert a["server.address"] == "127.0.0.1" and a["server.port"] == emu.port
    assert a["latencykit.ttft"] == pytest.approx(rec.ttft) and a["latencykit.tpot"] == pytest.approx(rec.tpot)
    assert [e.name for e in span.events] == ["latencykit.first_token"]
    assert span.end_time is not None and span.start_time is not None
    assert (span.end_time - span.start_time) / 1e9 == pytest.approx(rec.e2e, abs=1e-3)


def test_error_span_has_error_type_and_status(emu: Emulator, otel: OTel) -> None:
    """A failed call's span carries error.type and an ERROR status; the duration metric carries error.type."""
    with lk.OpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, telemetry=otel.telemetry) as client:
        with pytest.raises(Exception):
            client.chat.completions.create(**CHAT_REQ, extra_headers=headers(status=429))
    (span,) = _ours(otel.finished())
    assert span.status.status_code is StatusCode.ERROR and (span.attributes or {})["error.type"] == "RateLimitError"
    (point,) = otel.metrics()["gen_ai.client.operation.duration"]
    assert point.attributes["error.type"] == "RateLimitError"


def test_sdk_span_nests_inside_ours(emu: Emulator, otel: OTel) -> None:
    """The Anthropic SDK's own call span is a child of latencykit's span, not a sibling."""
    with lk.Anthropic(
        base_url=emu.base_url, api_key="k", telemetry=otel.telemetry, open_telemetry={"tracer_provider": otel.tracer_provider}
    ) as client:
        client.messages.create(**ANT_REQ)
        with client.messages.stream(**ANT_REQ) as stream:
            stream.until_done()
    spans = otel.finished()
    ours = _ours(spans)
    sdk = [s for s in spans if s not in ours]
    assert len(ours) == 2 and len(sdk) == 2
    for parent, child in zip(sorted(ours, key=lambda s: s.start_time or 0), sorted(sdk, key=lambda s: s.start_time or 0)):
        assert child.parent is not None and child.parent.span_id == parent.context.span_id
        assert child.context.trace_id == parent.context.trace_id


def test_metrics_with_convention_buckets(emu: Emulator, otel: OTel) -> None:
    """Duration, time to first chunk, per-chunk time, TTFT and token usage histograms are recorded per call."""
    with lk.OpenAI(base_url=emu.base_url + "/v1", api_key="k", telemetry=otel.telemetry) as client:
        for _ in range(3):
            client.chat.completions.create(**CHAT_REQ)
        client.responses.create(**RESP_REQ)
    m = otel.metrics()
    calls = client.latency.calls
    duration = m["gen_ai.client.operation.duration"]
    assert sum(p.count for p in duration) == 4
    assert all(isinstance(p, HistogramDataPoint) and tuple(p.explicit_bounds) == DURATION_BUCKETS for p in duration)
    assert sum(p.count for p in m["gen_ai.client.operation.time_to_first_chunk"]) == 4
    assert sum(p.count for p in m["gen_ai.client.operation.time_per_output_chunk"]) == sum(c.chunks - 1 for c in calls)
    assert sum(p.count for p in m["latencykit.client.time_to_first_token"]) == 4
    usage = m["gen_ai.client.token.usage"]
    by_type = {t: sum(p.sum for p in usage if p.attributes["gen_ai.token.type"] == t) for t in ("input", "output")}
    assert by_type == {"input": sum(c.input_tokens or 0 for c in calls), "output": sum(c.output_tokens or 0 for c in calls)}
    attrs = duration[0].attributes
    assert attrs["gen_ai.provider.name"] == "openai" and attrs["gen_ai.operation.name"] == "chat"


def test_latest_semconv_names(emu: Emulator) -> None:
    """With the latest GenAI names: inference.* histograms and usage counters instead of token.usage."""
    o = OTel(semconv="gen_ai_latest_experimental")
    try:
        with lk.Anthropic(base_url=emu.base_url, api_key="k", telemetry=o.telemetry) as client:
            client.messages.create(**ANT_REQ)
        m = o.metrics()
        assert "gen_ai.client.inference.duration" in m and "gen_ai.client.operation.duration" not in m
        assert "gen_ai.client.token.usage" not in m
        rec = client.latency.last
        assert rec is not None
        assert sum(p.value for p in m["gen_ai.client.inference.usage.output_tokens"]) == rec.output_tokens
        (span,) = _ours(o.finished())
        assert "gen_ai.usage.cache_write.input_tokens" in (span.attributes or {})
    finally:
        o.close()


def test_exponential_views_give_exponential_histograms(emu: Emulator) -> None:
    """exponential_views() switches the latency histograms to base-2 exponential aggregation."""
    o = OTel(views=lk.exponential_views())
    try:
        with lk.Anthropic(base_url=emu.base_url, api_key="k", telemetry=o.telemetry) as client:
            client.messages.create(**ANT_REQ)
        data = o.metrics()["__data__latencykit.client.time_to_first_token"][0]
        assert isinstance(data, ExponentialHistogram) and data.data_points[0].scale <= 6
    finally:
        o.close()


def test_no_prompt_text_or_key_unless_opted_in(emu: Emulator) -> None:
    """Prompt text and API keys never reach spans; capture_content=True adds the messages, capped."""
    req = {**ANT_REQ, "messages": [{"role": "user", "content": CANARY + " " + "x" * 50_000}]}
    for capture in (False, True):
        o = OTel(capture_content=capture)
        try:
            with lk.Anthropic(base_url=emu.base_url, api_key="sk-ant-KEY-canary", telemetry=o.telemetry) as client:
                client.messages.create(**req)
            text = repr([(s.name, dict(s.attributes or {}), [e.attributes for e in s.events]) for s in o.finished()])
            assert "sk-ant-KEY-canary" not in text
            assert (CANARY in text) is capture
            if capture:
                (span,) = _ours(o.finished())
                assert len(str((span.attributes or {})["gen_ai.input.messages"]).encode()) <= 16_384 + 20
        finally:
            o.close()


def test_telemetry_off_and_bad_option(emu: Emulator, otel: OTel) -> None:
    """telemetry=False emits nothing; a wrong telemetry value is a ValueError naming it."""
    with lk.Anthropic(base_url=emu.base_url, api_key="k", telemetry=False) as client:
        client.messages.create(**ANT_REQ)
    assert client.latency.total_calls == 1
    with pytest.raises(ValueError, match="telemetry"):
        lk.Anthropic(api_key="k", telemetry="yes")


def test_nothing_is_started_until_a_provider_is_set(emu: Emulator) -> None:
    """With no SDK configured a call starts no span and records no metric (the Recorder still
    gets it); a global MeterProvider set later gets the next call's metrics, spans stay off."""
    code = textwrap.dedent(
        f"""
        from opentelemetry import trace
        import latencykit as lk
        started = []
        real = trace.ProxyTracer.start_span
        trace.ProxyTracer.start_span = lambda self, name, *a, **k: (name.startswith("chat") and started.append(name)) or real(self, name, *a, **k)
        client = lk.Anthropic(base_url={emu.base_url!r}, api_key="k")
        telemetry = lk.Telemetry()
        assert not telemetry.tracing and not telemetry.metering
        req = dict(model="claude-sonnet-5", max_tokens=8, messages=[{{"role": "user", "content": "hi"}}])
        client.messages.create(**req)
        assert started == [], started
        assert client.latency.total_calls == 1 and client.latency.last.ttft is not None
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        assert telemetry.metering and not telemetry.tracing
        client.messages.create(**req)
        assert started == [], started
        data = reader.get_metrics_data()
        names = {{m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}}
        assert "gen_ai.client.operation.duration" in names, names
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_a_provider_named_by_the_environment_is_followed(emu: Emulator) -> None:
    """``OTEL_PYTHON_TRACER_PROVIDER`` / ``…_METER_PROVIDER`` name the SDK's providers: the API
    loads them on first use, so the calls are traced and metered, even when the variables are
    set after import (the gate reads the live environment, as the API does)."""
    code = textwrap.dedent(
        f"""
        import os
        import latencykit as lk
        from opentelemetry import metrics, trace
        telemetry = lk.Telemetry()
        assert not telemetry.tracing and not telemetry.metering
        os.environ["OTEL_PYTHON_TRACER_PROVIDER"] = "sdk_tracer_provider"
        os.environ["OTEL_PYTHON_METER_PROVIDER"] = "sdk_meter_provider"
        assert telemetry.tracing and telemetry.metering
        client = lk.Anthropic(base_url={emu.base_url!r}, api_key="k")
        client.messages.create(model="claude-sonnet-5", max_tokens=8, messages=[{{"role": "user", "content": "hi"}}])
        assert type(trace.get_tracer_provider()).__module__.startswith("opentelemetry.sdk"), trace.get_tracer_provider()
        assert type(metrics.get_meter_provider()).__module__.startswith("opentelemetry.sdk"), metrics.get_meter_provider()
        del os.environ["OTEL_PYTHON_TRACER_PROVIDER"], os.environ["OTEL_PYTHON_METER_PROVIDER"]
        assert telemetry.tracing and telemetry.metering  # loaded once, set for good (as the API does)
        print("ok")
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_global_provider_configured_after_import(emu: Emulator) -> None:
    """With no providers passed, spans go to a global TracerProvider set after latencykit was imported."""
    code = textwrap.dedent(
        f"""
        import latencykit as lk
        client = lk.Anthropic(base_url={emu.base_url!r}, api_key="k")
        client.messages.create(model="claude-sonnet-5", max_tokens=8, messages=[{{"role": "user", "content": "hi"}}])
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        exporter = InMemorySpanExporter()
        provider = TracerProvider(); provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        client.messages.create(model="claude-sonnet-5", max_tokens=8, messages=[{{"role": "user", "content": "hi"}}])
        names = [s.name for s in exporter.get_finished_spans() if s.instrumentation_scope.name == "latencykit"]
        print(names)
        assert names == ["chat claude-sonnet-5"], names
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


async def test_async_client_spans(emu: Emulator, otel: OTel) -> None:
    """Async calls produce the same spans, and the async SDK's span nests inside ours too."""
    async with lk.AsyncAnthropic(
        base_url=emu.base_url, api_key="k", telemetry=otel.telemetry, open_telemetry={"tracer_provider": otel.tracer_provider}
    ) as client:
        stream = await client.messages.create(stream=True, **ANT_REQ)
        async for _ in stream:
            pass
    spans = otel.finished()
    (ours,) = _ours(spans)
    sdk = [s for s in spans if s is not ours]
    assert len(sdk) == 1 and sdk[0].parent is not None and sdk[0].parent.span_id == ours.context.span_id
    assert (ours.attributes or {})["latencykit.outcome"] == "completed"
    assert isinstance(client, anthropic.AsyncAnthropic)


def test_retries_in_span_and_metrics(emu: Emulator, otel: OTel) -> None:
    """A retried call's span carries its attempts and reasons, and the retries counter counts them by reason."""
    policy = lk.RetryPolicy(initial_backoff=0.01, max_backoff=0.02)
    with lk.Anthropic(base_url=emu.base_url, api_key="k", telemetry=otel.telemetry, retry=policy) as client:
        client.messages.create(**ANT_REQ, extra_headers=headers(status=529, fault_times=1, fault_id="otel-retry-1"))
    (span,) = _ours(otel.finished())
    attrs = span.attributes or {}
    assert attrs["latencykit.attempts"] == 2 and list(attrs["latencykit.retry.reasons"]) == ["overloaded"]
    (point,) = otel.metrics()["latencykit.client.retries"]
    assert point.value == 1 and point.attributes["latencykit.retry.reason"] == "overloaded"
