"""Spans and metrics exported over OTLP/HTTP (protobuf) to a local receiver that decodes them."""

from __future__ import annotations

import gzip
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest
import requests
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest, ExportMetricsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import latencykit as lk
from latencykit.emulator import Emulator
from latencykit.telemetry._semconv import DURATION_BUCKETS, TOKEN_BUCKETS

from conftest import ANT_REQ, CHAT_REQ

ANT_KEY = "sk-ant-otlp-canary"
OAI_KEY = "sk-otlp-canary-openai"
SERVICE = "latencykit-otlp-test"


class Receiver:
    """An OTLP/HTTP receiver on 127.0.0.1: decodes ``/v1/traces`` and ``/v1/metrics`` protobuf bodies."""

    def __init__(self) -> None:
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.bodies: list[bytes] = []  # every body as received and as decompressed
        self.encodings: dict[str, set[str]] = {}
        self.content_types: set[str] = set()
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, name="otlp-receiver", daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        """The endpoint for ``path`` (``/v1/traces`` or ``/v1/metrics``)."""
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                encoding = self.headers.get("Content-Encoding", "identity")
                body = gzip.decompress(raw) if encoding == "gzip" else zlib.decompress(raw) if encoding == "deflate" else raw
                decoded: Any
                if self.path == "/v1/traces":
                    decoded, reply = ExportTraceServiceRequest.FromString(body), ExportTraceServiceResponse()
                elif self.path == "/v1/metrics":
                    decoded, reply = ExportMetricsServiceRequest.FromString(body), ExportMetricsServiceResponse()
                else:
                    self.send_error(404)
                    return
                with receiver._lock:
                    receiver.bodies += [raw, body]
                    receiver.encodings.setdefault(self.path, set()).add(encoding)
                    receiver.content_types.add(self.headers.get("Content-Type", ""))
                    (receiver.traces if self.path == "/v1/traces" else receiver.metrics).append(decoded)
                out = reply.SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def close(self) -> None:
        """Stop serving and release the port."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A running OTLP/HTTP receiver for one test."""
    r = Receiver()
    yield r
    r.close()


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def _attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs if isinstance(kv, KeyValue)}


def _points(receiver: Receiver, name: str) -> list[Any]:
    """The data points of metric ``name`` in the last metrics export (cumulative, so it holds every call)."""
    last = receiver.metrics[-1]
    metrics: list[Metric] = [m for rm in last.resource_metrics for sm in rm.scope_metrics for m in sm.metrics if m.name == name]
    assert len(metrics) == 1, f"{name}: {len(metrics)} metrics"
    kind = metrics[0].WhichOneof("data")
    assert kind is not None
    return list(getattr(metrics[0], kind).data_points)


def test_spans_and_metrics_arrive_over_otlp_http_with_genai_attributes(emu: Emulator, receiver: Receiver) -> None:
    """Two Anthropic and one OpenAI chat call arrive as CLIENT spans and semconv histograms, with no API key anywhere."""
    resource = Resource.create({"service.name": SERVICE})
    session = requests.Session()
    session.trust_env = False  # loopback only, whatever *_proxy the environment sets
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.url("/v1/traces"), compression=Compression.Gzip, session=session))
    )
    reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=receiver.url("/v1/metrics"), session=session), export_interval_millis=60_000)
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    telemetry = lk.Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
    try:
        with lk.Anthropic(base_url=emu.base_url, api_key=ANT_KEY, max_retries=0, telemetry=telemetry) as ant:
            messages = [ant.messages.create(**ANT_REQ) for _ in range(2)]
            ant_records = ant.latency.calls
        with lk.OpenAI(base_url=emu.base_url + "/v1", api_key=OAI_KEY, max_retries=0, telemetry=telemetry) as oai:
            completion = oai.chat.completions.create(**CHAT_REQ)
            oai_record = oai.latency.last
        assert tracer_provider.force_flush(10_000)
    finally:
        tracer_provider.shutdown()
        meter_provider.shutdown()  # the reader's final collection: one cumulative export

    assert receiver.traces and len(receiver.metrics) == 1
    assert receiver.content_types == {"application/x-protobuf"}
    assert receiver.encodings == {"/v1/traces": {"gzip"}, "/v1/metrics": {"identity"}}

    # -- spans ---------------------------------------------------------------------------
    ours: list[tuple[dict[str, Any], Span]] = [
        (_attrs(rs.resource.attributes), span)
        for req in receiver.traces
        for rs in req.resource_spans
        for ss in rs.scope_spans
        if ss.scope.name == "latencykit"
        for span in ss.spans
    ]
    assert len(ours) == 3
    assert all(res["service.name"] == SERVICE for res, _ in ours)
    by_model: dict[str, list[Span]] = {"claude-sonnet-5": [], "gpt-4o-mini": []}
    for _, span in ours:
        by_model[_attrs(span.attributes)["gen_ai.request.model"]].append(span)
    expected = [(span, "anthropic", msg.usage.input_tokens, msg.usage.output_tokens, rec) for span, msg, rec in zip(by_model["claude-sonnet-5"], messages, ant_records)]
    assert completion.usage is not None and oai_record is not None
    expected.append((by_model["gpt-4o-mini"][0], "openai", completion.usage.prompt_tokens, completion.usage.completion_tokens, oai_record))
    for span, provider, input_tokens, output_tokens, rec in expected:
        attrs = _attrs(span.attributes)
        model = attrs["gen_ai.request.model"]
        assert rec.ttft is not None
        assert span.name == f"chat {model}"
        assert span.kind == Span.SpanKind.SPAN_KIND_CLIENT
        assert attrs["gen_ai.provider.name"] == provider
        assert attrs["gen_ai.operation.name"] == "chat"
        # Anthropic's cached tokens are added in; these short prompts are never cached.
        assert attrs["gen_ai.usage.input_tokens"] == input_tokens == rec.input_tokens
        assert attrs["gen_ai.usage.output_tokens"] == output_tokens > 0
        assert isinstance(attrs["latencykit.ttft"], float) and attrs["latencykit.ttft"] > 0
        assert attrs["latencykit.ttft"] == pytest.approx(rec.ttft)
        (event,) = [e for e in span.events if e.name == "latencykit.first_token"]
        assert _attrs(event.attributes)["latencykit.ttft"] == attrs["latencykit.ttft"]
        assert event.time_unix_nano == span.start_time_unix_nano + int(rec.ttft * 1e9)
        assert span.start_time_unix_nano < event.time_unix_nano <= span.end_time_unix_nano

    # -- metrics -------------------------------------------------------------------------
    duration = _points(receiver, "gen_ai.client.operation.duration")
    assert sum(p.count for p in duration) == 3
    assert {_attrs(p.attributes)["gen_ai.provider.name"]: p.count for p in duration} == {"anthropic": 2, "openai": 1}
    assert all(list(p.explicit_bounds) == list(DURATION_BUCKETS) for p in duration)
    usage = _points(receiver, "gen_ai.client.token.usage")
    assert all(list(p.explicit_bounds) == list(TOKEN_BUCKETS) for p in usage)
    totals: dict[str, float] = {}
    for p in usage:
        kind = _attrs(p.attributes)["gen_ai.token.type"]
        totals[kind] = totals.get(kind, 0) + p.sum
    expected_input = sum(r.input_tokens or 0 for r in [*ant_records, oai_record])
    expected_output = sum(m.usage.output_tokens for m in messages) + completion.usage.completion_tokens
    assert totals == {"input": expected_input, "output": expected_output}
    ttft = _points(receiver, "latencykit.client.time_to_first_token")
    assert sum(p.count for p in ttft) == 3

    # -- no secrets ----------------------------------------------------------------------
    for body in receiver.bodies:
        assert ANT_KEY.encode() not in body and OAI_KEY.encode() not in body
