"""Send latencykit's spans and metrics over OTLP/HTTP to an OpenTelemetry collector (runs offline against the emulator).

    pip install "latencykit[bench]" opentelemetry-exporter-otlp-proto-http
    python examples/otlp_collector.py          # to 127.0.0.1:4318; with nothing there, a stand-in prints what arrives
    OTEL_EXPORTER_OTLP_ENDPOINT=http://otel-collector:4318 OTEL_SERVICE_NAME=checkout python examples/otlp_collector.py
    python examples/otlp_collector.py --traces-only   # straight to Jaeger's OTLP port (see jaeger.md)
    ANTHROPIC_API_KEY=... OPENAI_API_KEY=... python examples/otlp_collector.py --real

The providers are registered globally, so every latencykit client (and any other
instrumented library) reports through them without a ``telemetry=`` argument. A collector
config that forwards traces to Jaeger and metrics to Prometheus is in ``jaeger.md``.
"""

from __future__ import annotations

import gzip
import os
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional
from urllib.parse import urlsplit

from opentelemetry import metrics, trace
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import latencykit as lk


def configure(endpoint: str, service: str, *, with_metrics: bool = True) -> tuple[TracerProvider, MeterProvider]:
    """What a platform team puts in its service's start-up: OTLP/HTTP exporters on global providers."""
    resource = Resource.create({SERVICE_NAME: service})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")))
    readers = [PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=f"{endpoint}/v1/metrics"), export_interval_millis=10_000)]
    meter_provider = MeterProvider(resource=resource, metric_readers=readers if with_metrics else [])
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    return tracer_provider, meter_provider


def make_calls(ant: lk.Anthropic, oai: lk.OpenAI) -> None:
    """Two Anthropic calls and one OpenAI chat call, each one CLIENT span plus metric points."""
    for question in ["What is TTFT?", "Why track P99?"]:
        ant.messages.create(model="claude-sonnet-5", max_tokens=64, messages=[{"role": "user", "content": question}])
    oai.chat.completions.create(model="gpt-4o-mini", max_tokens=64, messages=[{"role": "user", "content": "What is prefill?"}])


def stand_in_receiver(host: str, port: int) -> Optional[ThreadingHTTPServer]:
    """If nothing listens on a loopback ``host:port``, serve a minimal OTLP/HTTP receiver there that prints what arrives."""
    if host not in ("127.0.0.1", "localhost"):
        return None
    with socket.socket() as probe:
        if probe.connect_ex((host, port)) == 0:
            return None  # a collector (or Jaeger) is already there
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path == "/v1/traces":
                for rs in ExportTraceServiceRequest.FromString(body).resource_spans:
                    for ss in rs.scope_spans:
                        for span in ss.spans:
                            attrs = {kv.key: kv.value for kv in span.attributes}
                            ttft = f" TTFT {attrs['latencykit.ttft'].double_value * 1000:.1f} ms," if "latencykit.ttft" in attrs else ""
                            print(f"  [stand-in] span {span.name!r} from {ss.scope.name}:{ttft} "
                                  f"{len(attrs)} attributes, events {[e.name for e in span.events]}")  # fmt: skip
            elif self.path == "/v1/metrics":
                for rm in ExportMetricsServiceRequest.FromString(body).resource_metrics:
                    for sm in rm.scope_metrics:
                        print(f"  [stand-in] metrics from {sm.scope.name}: {', '.join(m.name for m in sm.metrics)}")
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"(no collector on {host}:{port}: a stand-in receiver there prints what it gets)")
    return server


def main() -> None:
    """Configure OTLP, make a few calls, flush."""
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318").rstrip("/")
    service = os.environ.get("OTEL_SERVICE_NAME", "my-llm-service")
    url = urlsplit(endpoint)
    stand_in = stand_in_receiver(url.hostname or "", url.port or 4318)
    with_metrics = "--traces-only" not in sys.argv  # Jaeger stores traces only
    tracer_provider, meter_provider = configure(endpoint, service, with_metrics=with_metrics)
    print(f"exporting spans to {endpoint}/v1/traces" + (f" and metrics to {endpoint}/v1/metrics" if with_metrics else "") + f" as service {service!r}")

    if "--real" in sys.argv:
        with lk.Anthropic() as ant, lk.OpenAI() as oai:
            make_calls(ant, oai)
    else:
        from latencykit.emulator import Emulator

        with Emulator() as emu:
            print("(latencies are EMULATED)")
            with lk.Anthropic(base_url=emu.base_url, api_key="emulator") as ant, lk.OpenAI(base_url=emu.base_url + "/v1", api_key="emulator") as oai:
                make_calls(ant, oai)
    # Short-lived processes must flush: the batch processor and the metric reader export on shutdown.
    tracer_provider.shutdown()
    meter_provider.shutdown()
    if stand_in is not None:
        stand_in.shutdown()
        stand_in.server_close()


if __name__ == "__main__":
    main()
