"""The reader and the doctor on every engine the sources name (issue #26): SGLang, TGI, Triton (with
and without the TensorRT-LLM backend) and trtllm-serve — on recorded real pages where they exist
(tests/fixtures/recorded, provenance in its README) and on HAND-WRITTEN pressure pages
(tests/_engine_pages.py) for the states no real page shows."""

from __future__ import annotations

import pytest

from latencykit.core._record import CallRecord
from latencykit.vllm import Diagnosis, MetricsWindow, Scrape, diagnose, parse_metrics

import _engine_pages as pages
from test_metrics_reader import grep, text

NOT = "not exposed by "


def _one(name: str) -> tuple[str, Scrape, MetricsWindow, Diagnosis]:
    page = text(name)
    s = parse_metrics(page)
    w = MetricsWindow([s])
    return page, s, w, diagnose(w)


# -- real pages --------------------------------------------------------------------------------------


def test_real_sglang_docs_page_under_load_is_queue_pressure_in_sglang_terms() -> None:
    """SGLang's docs page (162 running, 2826 queued, token_usage 0.28): the pool has room, so a queue."""
    page, s, w, d = _one("sglang-metrics-docs-llama31-8b-loaded.yaml")
    assert s.server == "sglang" and s.models == ("meta-llama/Llama-3.1-8B-Instruct",)
    f = w.fields()
    assert f["kv_cache_usage"] == grep(page, "sglang:token_usage") == 0.28
    assert f["running"] == 162 and f["waiting"] == 2826
    assert f["prefix_cache_hit_rate"] == grep(page, "sglang:cache_hit_rate")
    assert f["server_ttft_mean_s"] == pytest.approx(2.3518979474117756e6 / 11008)
    # held by SGLang, not on this (older) page: the reader says None, not 0
    assert f["preemptions"] is None and f["spec_accepted_per_step"] is None and f["server_queue_time_mean_s"] is None
    assert f["gpu_memory_usage"] == NOT + "sglang"
    assert d.kinds == ("queue_pressure",), str(d)
    ev, advice = d.findings[0].evidence, d.findings[0].advice
    assert ev["waiting_max"] == 2826 and ev["kv_cache_usage_max"] == 0.28 and ev["kv_room_sequences_min"] > 400
    assert ev["metrics"] == "sglang:num_queue_reqs, sglang:num_running_reqs, sglang:token_usage"
    assert "--max-running-requests" in advice and "--max-num-seqs" not in advice


def test_real_sglang_datadog_page_reads_new_families_and_is_healthy() -> None:
    """Datadog's v0.5.10 page: tp_rank labels, retracted 0, spec off (accept length 0), one request."""
    page, s, w, d = _one("sglang-metrics-datadog-fixture.yaml")
    f = w.fields()
    assert f["kv_cache_usage"] == 0.25 and f["running"] == 0 and f["waiting"] == 0 and f["preemptions"] == 0
    assert f["spec_accepted_per_step"] is None  # spec_accept_length 0: speculation off, not "weak"
    assert f["server_queue_time_mean_s"] == 0 and f["server_e2e_mean_s"] == pytest.approx(0.07)
    assert w.kv_cache_tokens == grep(page, "sglang:max_total_num_tokens") == 430839
    assert w.prompt_tokens_mean == 5
    assert s.metric_name("preempted_now") == "sglang:num_retracted_reqs"
    assert d.kinds == ("healthy",), str(d)


def test_real_tgi_page_reads_summary_and_queue_time_and_says_what_tgi_lacks() -> None:
    """Datadog's TGI page: 109 requests waited 2.71 s on average in the queue; no TTFT, no KV usage."""
    page, s, w, d = _one("tgi-metrics-datadog-payload-excerpt.yaml")
    assert s.server == "tgi"
    f = w.fields()
    assert f["waiting"] == grep(page, "tgi_queue_size") == 0 and f["running"] == grep(page, "tgi_batch_current_size") == 0
    assert f["server_queue_time_mean_s"] == pytest.approx(295.275961956 / 109)
    assert f["server_e2e_mean_s"] == pytest.approx(541.2140316159999 / 109)
    for missing in ("kv_cache_usage", "preemptions", "prefix_cache_hit_rate", "server_ttft_mean_s", "gpu_memory_usage"):
        assert f[missing] == NOT + "tgi", missing
    skipped = w.histogram("spec_skipped_tokens")
    assert skipped is not None and skipped.sum == 0 and skipped.count == 3423 and skipped.buckets == ()
    assert f["spec_accepted_per_step"] is None  # nothing speculated on this page
    # the mean time per token includes the prefill: never read as TPOT or ITL
    assert w.mean("tpot") is None and w.mean("itl") is None and w.mean("tgi_mean_time_per_token") == pytest.approx(8.643160945 / 109)
    assert d.kinds == ("queue_pressure",), str(d)
    finding = d.findings[0]
    assert "TGI exposes no KV-cache usage" in finding.title and finding.evidence["server_queue_time_mean_s"] > 2.7
    assert "tgi_request_queue_duration" in finding.evidence["metrics"]
    assert "--max-batch-total-tokens" in finding.advice and "--max-concurrent-requests" in finding.advice


def test_real_triton_page_reads_microsecond_counters_and_gpu_gauges() -> None:
    """Datadog's Triton page (densenet, no LLM backend): queue time from µs counters, GPU memory, the
    request-duration counter read as backend time only; everything LLM-shaped not exposed."""
    page, s, w, d = _one("triton-metrics-datadog-densenet-excerpt.yaml")
    assert s.server == "triton" and s.backend is None and "densenet_onnx" in s.models
    f = w.fields()
    assert f["server_queue_time_mean_s"] == pytest.approx(145 / 3 / 1e6)
    assert w.backend_request_mean == pytest.approx(1327965 / 3 / 1e6)
    assert f["gpu_memory_usage"] == pytest.approx(266338304 / 16106127360)
    assert f["waiting"] == 0
    for missing in ("kv_cache_usage", "running", "preemptions", "spec_accepted_per_step", "server_ttft_mean_s", "server_e2e_mean_s"):
        assert f[missing] == NOT + "triton", missing
    assert d.kinds == ("healthy",)
    assert d.window["server_ttft_mean_s"] is None and d.window["server_backend_request_mean_s"] == pytest.approx(0.442655)
    # one model's series; the GPU gauges (no model label) stay
    one = MetricsWindow([s], model="densenet_onnx")
    assert one.backend_request_mean == pytest.approx(0.442655) and one.gpu_memory_usage_max() == f["gpu_memory_usage"]


def test_real_trtllm_backend_readme_page_reads_labelled_figures() -> None:
    """The TensorRT-LLM backend's README page: KV fraction, waiting and active requests out of labelled families."""
    page, s, w, d = _one("triton-trtllm-backend-metrics-readme.yaml")
    assert s.server == "triton" and s.backend == "tensorrtllm"
    f = w.fields()
    assert f["kv_cache_usage"] == grep(page, "nv_trt_llm_kv_cache_block_metrics", kv_cache_block_type="fraction") == 0.4875
    assert f["waiting"] == 1 and f["running"] == 0
    assert w.kv_cache_tokens == 6239 * 64 and s.kv_block_size == 64
    assert s.metric_name("kv_cache_usage") == "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=fraction}"
    assert f["server_ttft_mean_s"] == NOT + "triton"
    # one request waiting with half the cache free: a queue, in TensorRT-LLM's words
    assert d.kinds == ("queue_pressure",) and "max_batch_size" in d.findings[0].advice
    # an older backend without the fraction row: used / max blocks
    older = Scrape.parse(text("triton-trtllm-backend-metrics-readme.yaml").replace('kv_cache_block_type="fraction"', 'kv_cache_block_type="x"'))
    assert older.gauge("kv_cache_usage") == pytest.approx(1 / 6239)


def test_real_trtllm_serve_docs_page_reads_histograms_and_lacks_gauges() -> None:
    """Dynamo's trtllm page (abridged by its authors): TTFT, queue time and E2E from histograms."""
    page, s, w, d = _one("trtllm-serve-metrics-dynamo-docs.yaml")
    assert s.server == "trtllm"
    f = w.fields()
    assert f["server_ttft_mean_s"] == pytest.approx(8.75 / 150) and f["server_queue_time_mean_s"] == pytest.approx(32.1 / 150)
    assert f["server_e2e_mean_s"] == pytest.approx(45.2 / 150)
    assert f["kv_cache_usage"] is None and f["running"] is None and f["gpu_memory_usage"] == NOT + "trtllm"
    assert s.counter("requests_finished") == 155
    assert d.kinds == ("queue_pressure",) and "--max_batch_size" in d.findings[0].advice  # 0.21 s mean queue time
    assert "this page holds no KV-cache usage" in d.findings[0].title  # trtllm-serve has one; this page lacks it


# -- hand-written pressure pages -----------------------------------------------------------------------


def test_sglang_kv_full_with_retractions_on_two_ranks_counts_once() -> None:
    """HAND-WRITTEN: SGLang TP=2, pool 97 % used, 20 waiting, 3 retracted: memory pressure; rank series once."""
    w = pages.window(pages.sglang(0.5, 40, 0, at=0.0), pages.sglang(0.97, 48, 20, retracted=3, generated=50000, at=5.0))
    assert w.gauge_max("running") == 48 and w.gauge_max("waiting") == 20  # not 96 / 40
    assert w.delta("generation_tokens") == 10000  # not 20000
    assert w.kv_cache_tokens == 200000 and w.prompt_tokens_mean == 4000
    d = diagnose(w)
    assert d.kinds == ("kv_cache_pressure",), str(d)
    ev, advice = d.findings[0].evidence, d.findings[0].advice
    assert ev["preemptions"] == 3 and ev["kv_cache_usage"] == 0.97 and ev["waiting"] == 20
    assert "sglang:token_usage" in ev["metrics"] and "sglang:num_retracted_reqs" in ev["metrics"]
    assert "--mem-fraction-static" in advice and "lower --max-running-requests" in advice and "--gpu-memory-utilization" not in advice


def test_sglang_dp_ranks_are_summed_and_tp_ranks_are_not() -> None:
    """HAND-WRITTEN: with DP attention each dp_rank is a scheduler of its own (summed); tp_rank repeats."""
    lines = [f'sglang:num_queue_reqs{{dp_rank="{dp}",model_name="m",tp_rank="{dp * 2 + tp}"}} {dp + 1}' for dp in (0, 1) for tp in (0, 1)]
    lines += [f'sglang:token_usage{{dp_rank="{dp}",model_name="m",tp_rank="{dp}"}} {0.2 + dp / 10}' for dp in (0, 1)]
    s = Scrape.parse("\n".join(lines) + "\n")
    assert s.gauge("waiting") == 3 and s.gauge("kv_cache_usage") == pytest.approx(0.3)


def test_weak_speculation_on_sglang_tgi_and_trtllm() -> None:
    """HAND-WRITTEN: acceptance length 1.3 (SGLang), 120 speculated of 2000 generated tokens (TGI), 1.2 (trtllm)."""
    sg = diagnose(pages.window(pages.sglang(0.3, 8, 0, accept_length=1.3)))
    assert sg.kinds == ("weak_speculative_decoding",), str(sg)
    assert sg.findings[0].evidence["spec_accepted_per_step"] == pytest.approx(0.3)
    assert "sglang:spec_accept_length" in sg.findings[0].evidence["metrics"] and "--speculative-num-draft-tokens" in sg.findings[0].advice
    good = diagnose(pages.window(pages.sglang(0.3, 8, 0, accept_length=3.1)))
    assert good.kinds == ("healthy",)
    t = diagnose(pages.window(pages.tgi(0, 2, skipped=120, generated=2000)), thresholds=None)
    assert "weak_speculative_decoding" in t.kinds
    spec = t.findings[t.kinds.index("weak_speculative_decoding")]
    assert spec.evidence["spec_accepted_per_step"] == pytest.approx(120 / 1880) and "--speculate" in spec.advice
    tr = diagnose(pages.window(pages.trtllm(0.2, 0, 4, 1.2)))
    assert tr.kinds == ("weak_speculative_decoding",) and "max_draft_len" in tr.findings[0].advice


def test_tgi_queue_and_no_ttft_means_no_time_outside_finding() -> None:
    """HAND-WRITTEN: TGI with 12 queued; client records with a long TTFT cannot be compared (no server TTFT)."""
    records = [CallRecord("openai", "chat", "m", started_at=0.0, ttft=2.0, e2e=3.0, outcome="completed") for _ in range(5)]
    d = diagnose(pages.window(pages.tgi(12, 4)), records)
    assert d.kinds == ("queue_pressure",), str(d)
    assert d.findings[0].evidence["waiting_max"] == 12 and d.findings[0].evidence["batch_token_budget_used_max"] == 15800
    assert d.client["server_ttft_mean_s"] is None


def test_triton_trtllm_kv_full_and_gpu_memory_in_tensorrt_llm_terms() -> None:
    """HAND-WRITTEN: Triton + TensorRT-LLM, KV blocks 98 % used, 6 waiting, 2 paused, GPU 97 % used."""
    w = pages.window(pages.triton_trtllm(0.98, 6, 32, 2, 0.97))
    d = diagnose(w)
    assert d.kinds == ("kv_cache_pressure", "gpu_memory_near_full"), str(d)
    kv, gpu = d.findings
    assert kv.evidence["preemptions"] == 2 and "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=fraction}" in kv.evidence["metrics"]
    assert "kv_cache_free_gpu_mem_fraction" in kv.advice and "max_batch_size" in kv.advice
    assert gpu.evidence["gpu_memory_usage_max"] == pytest.approx(0.97) and "kv_cache_free_gpu_mem_fraction" in gpu.advice
    # the request-duration counter is backend time: never a TTFT or an E2E
    assert w.backend_request_mean == pytest.approx(0.0005) and d.window["server_ttft_mean_s"] is None
    assert w.fields()["server_e2e_mean_s"] == NOT + "triton"


def test_trtllm_serve_kv_full_and_unprefixed_page() -> None:
    """HAND-WRITTEN: trtllm-serve with the KV cache 96 % used and 5 waiting; the same page without the
    ``trtllm_`` prefix (trtllm-serve's own /prometheus/metrics) reads the same."""
    for prefixed in (True, False):
        s = pages.trtllm(0.96, 5, 16, 0.0, prefixed=prefixed)
        assert s.server == "trtllm" and s.gauge("kv_cache_usage") == 0.96
        d = diagnose(MetricsWindow([s]))
        assert d.kinds == ("kv_cache_pressure",), str(d)
        assert "kv_cache_free_gpu_memory_fraction" in d.findings[0].advice and "trtllm_kv_cache_utilization" in d.findings[0].evidence["metrics"]


def test_time_outside_engine_on_sglang_names_its_ttft() -> None:
    """HAND-WRITTEN: SGLang's TTFT histogram says 50 ms; the client saw 600 ms: time outside the engine."""
    records = [CallRecord("openai", "chat", "m", started_at=0.0, ttft=0.6, e2e=1.0, outcome="completed") for _ in range(5)]
    d = diagnose(pages.window(pages.sglang(0.2, 2, 0)), records)
    assert d.kinds == ("time_outside_engine",), str(d)
    assert d.findings[0].evidence["metrics"] == "sglang:time_to_first_token_seconds"


def test_unknown_page_is_not_called_healthy() -> None:
    """A page of no engine latencykit knows: the doctor says it cannot tell, not "healthy"."""
    d = diagnose(MetricsWindow([Scrape.parse("# TYPE foo_requests gauge\nfoo_requests 3\n")]))
    assert d.kinds == ("unknown_engine",) and not d.healthy and "foo_requests" in str(d)
    assert d.window["not_exposed"] is not None


def test_real_triton_decoupled_page_recorded_here_gives_backend_time_only() -> None:
    """Recorded from the real tritonserver 2.51 of the Triton tier after 6 streamed requests (the
    client saw 0.26-0.35 s each): 8,677 µs of "request duration" in all, 1.4 ms a request — backend
    time; the doctor shows it as such and reports no server TTFT or E2E."""
    page, s, w, d = _one("real-triton-pytriton-decoupled-metrics.txt")
    assert s.server == "triton" and s.models == ("echo",)
    assert w.backend_request_mean == pytest.approx(grep(page, "nv_inference_request_duration_us") / 6 / 1e6)
    assert w.fields()["server_queue_time_mean_s"] == pytest.approx(3245 / 6 / 1e6)
    assert w.fields()["server_ttft_mean_s"] == w.fields()["server_e2e_mean_s"] == NOT + "triton"
    assert d.kinds == ("healthy",) and d.window["server_backend_request_mean_s"] < 0.01
