"""Expose latencykit's metrics on /metrics for Prometheus (runs offline against the emulator).

    pip install "latencykit[bench]" opentelemetry-exporter-prometheus prometheus-client
    python examples/prometheus_exporter.py                # calls until Ctrl-C, /metrics on :9464
    python examples/prometheus_exporter.py --calls 20     # 20 calls, print the key series, exit
    ANTHROPIC_API_KEY=... OPENAI_API_KEY=... python examples/prometheus_exporter.py --real

The OpenTelemetry Prometheus exporter turns dots into underscores and adds the unit
(``latencykit.client.time_to_first_token``, unit ``s`` →
``latencykit_client_time_to_first_token_seconds_{bucket,count,sum}``; counters get
``_total``; ``{token}`` units add nothing). Scrape config and PromQL are in ``SCRAPE`` and
``QUERIES`` below and printed at start.
"""

from __future__ import annotations

import argparse
import itertools
import urllib.request

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from prometheus_client import start_http_server
from prometheus_client.parser import text_string_to_metric_families

import latencykit as lk

SCRAPE = """\
# prometheus.yml
scrape_configs:
  - job_name: my-llm-service
    scrape_interval: 15s
    static_configs:
      - targets: ["127.0.0.1:{port}"]
"""

TTFT = "latencykit_client_time_to_first_token_seconds"
QUERIES = {
    "P99 TTFT per model, last 5 min": f"histogram_quantile(0.99, sum by (le, gen_ai_request_model) (rate({TTFT}_bucket[5m])))",
    "P99 end-to-end duration": "histogram_quantile(0.99, sum by (le) (rate(gen_ai_client_operation_duration_seconds_bucket[5m])))",
    "calls per second by provider": "sum by (gen_ai_provider_name) (rate(gen_ai_client_operation_duration_seconds_count[5m]))",
    # gen_ai.usage.input_tokens includes cached tokens (Anthropic's too: latencykit adds them in),
    # so cache reads over input tokens is the share of the prompt served from cache.
    "prompt-cache hit ratio (token-weighted)": (
        "sum(rate(latencykit_client_cache_read_input_tokens_total[5m]))"
        ' / sum(rate(gen_ai_client_token_usage_sum{gen_ai_token_type="input"}[5m]))'
    ),
    "unexpected cache misses by reason": "sum by (latencykit_cache_miss_reason) (increase(latencykit_client_cache_misses_total[1h]))",
}
# With OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental the token histogram is
# replaced by counters; the hit ratio is then
#   sum(rate(gen_ai_client_inference_usage_cache_read_input_tokens_total[5m]))
#     / sum(rate(gen_ai_client_inference_usage_input_tokens_total[5m]))

SYSTEM = "You are a meticulous support agent for a bicycle shop. " * 300  # long enough to be cached


def make_calls(ant: lk.Anthropic, oai: lk.OpenAI, calls: int) -> None:
    """Alternate Anthropic and OpenAI chat calls sharing a long, cacheable system prompt."""
    for i in itertools.count() if calls == 0 else range(calls):
        question = f"Question {i}: how do I true a wheel?"
        if i % 2:
            oai.chat.completions.create(
                model="gpt-4o-mini", max_tokens=64, messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
            )
        else:
            ant.messages.create(model="claude-sonnet-5", max_tokens=64, system=SYSTEM, messages=[{"role": "user", "content": question}])


def main() -> None:
    """Serve /metrics, print how to scrape and query it, make calls."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9464, help="port for /metrics on 127.0.0.1 (9464 is the exporter's usual one)")
    parser.add_argument("--calls", type=int, default=0, help="stop after this many calls and print the key series (0: until Ctrl-C)")
    parser.add_argument("--real", action="store_true", help="call the real APIs (keys from the environment)")
    args = parser.parse_args()

    start_http_server(args.port, addr="127.0.0.1")
    provider = MeterProvider(resource=Resource.create({"service.name": "my-llm-service"}), metric_readers=[PrometheusMetricReader()])
    telemetry = lk.Telemetry(meter_provider=provider)
    print(f"metrics on http://127.0.0.1:{args.port}/metrics\n\n{SCRAPE.format(port=args.port)}")
    for title, promql in QUERIES.items():
        print(f"# {title}\n{promql}\n")

    try:
        if args.real:
            with lk.Anthropic(telemetry=telemetry) as ant, lk.OpenAI(telemetry=telemetry) as oai:
                make_calls(ant, oai, args.calls)
        else:
            from latencykit.emulator import Emulator, TimingModel

            with Emulator(timing=TimingModel(time_scale=0.2), seed=1) as emu:
                print("(latencies are EMULATED)")
                with lk.Anthropic(base_url=emu.base_url, api_key="emulator", telemetry=telemetry) as ant, lk.OpenAI(
                    base_url=emu.base_url + "/v1", api_key="emulator", telemetry=telemetry
                ) as oai:
                    make_calls(ant, oai, args.calls)
    except KeyboardInterrupt:
        pass
    if args.calls:  # what a scrape sees now, summed over label sets
        with urllib.request.urlopen(f"http://127.0.0.1:{args.port}/metrics") as resp:
            text = resp.read().decode()
        totals: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name.startswith(("gen_ai", "latencykit")) and sample.name.endswith(("_count", "_sum", "_total")):
                    totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
        for name, value in totals.items():
            print(f"{name:60} {value:g}")
    provider.shutdown()


if __name__ == "__main__":
    main()
