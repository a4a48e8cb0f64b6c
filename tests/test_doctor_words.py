"""The doctor speaks words, not keys: on every recorded engine page (tests/fixtures/recorded) and every
HAND-WRITTEN pressure page (tests/_engine_pages.py), with every finding kind among them, the terminal report
(`latencykit doctor`'s rich panels) and ``str(diagnosis)`` (what ``print(client.doctor())`` shows) hold no
snake_case key of the diagnosis. The snake_case tokens left are the engine's own: its metric names (found on
the page) and the names its advice quotes (``max_batch_size``, ``--kv-cache-dtype fp8_e5m2``). ``--json``
(`Diagnosis.to_dict`) keeps the keys."""

from __future__ import annotations

import re
from typing import Any, Iterator

import pytest
from rich.console import Console

from latencykit.core._record import CallRecord
from latencykit.vllm import KINDS, Diagnosis, MetricsWindow, Scrape, diagnose, parse_metrics
from latencykit.commands._doctor import render
from latencykit.engines._window import FIELDS

import _engine_pages as pages
from test_metrics_reader import text

RECORDED = [
    "real-vllm-cpu-metrics.txt", "real-vllm-cpu-metrics-midload.txt", "vllm-metrics-v0-gpu-cache-usage.yaml",
    "vllm-metrics-v1-families-datadog-fixture.yaml", "real-llama-server-metrics.txt", "real-llama-server-metrics-midload.txt",
    "sglang-metrics-docs-llama31-8b-loaded.yaml", "sglang-metrics-datadog-fixture.yaml", "tgi-metrics-datadog-payload-excerpt.yaml",
    "triton-metrics-datadog-densenet-excerpt.yaml", "triton-trtllm-backend-metrics-readme.yaml", "trtllm-serve-metrics-dynamo-docs.yaml",
    "real-triton-pytriton-decoupled-metrics.txt",
]  # fmt: skip
VLLM = '{engine="0",model_name="m"}'


def _call(ttft: float, **kw: Any) -> CallRecord:
    return CallRecord("openai", "chat", "m", started_at=0.0, ttft=ttft, e2e=ttft + 0.4, outcome="completed", **kw)


def _vllm_prefix_page(caching: str) -> str:
    """HAND-WRITTEN: a vLLM page whose prefix cache found 100 of 5,000 queried tokens (caching on or off)."""
    return (f'vllm:cache_config_info{{block_size="16",enable_prefix_caching="{caching}",engine="0"}} 1.0\n'
            f"vllm:num_requests_waiting{VLLM} 0\nvllm:num_requests_running{VLLM} 1\nvllm:kv_cache_usage_perc{VLLM} 0.2\n"
            f"vllm:prefix_cache_queries_total{VLLM} 5000\nvllm:prefix_cache_hits_total{VLLM} 100\n")  # fmt: skip


def cases() -> Iterator[tuple[str, str, Diagnosis]]:
    """(name, the page's text, its diagnosis) for every page, with records where a rule needs them."""
    for name in RECORDED:
        page = text(name)
        yield name, page, diagnose(MetricsWindow([parse_metrics(page)]))
    hand: list[tuple[str, Scrape, list[CallRecord]]] = [
        ("sglang KV full, retracting", pages.sglang(0.99, 10, 5, retracted=3), []),
        ("sglang queue", pages.sglang(0.3, 8, 40), []),
        ("sglang weak speculation", pages.sglang(0.3, 8, 0, accept_length=1.3), []),
        ("sglang time outside", pages.sglang(0.2, 2, 0), [_call(0.6) for _ in range(5)]),
        ("tgi queue and speculation", pages.tgi(12, 4, skipped=120), []),
        ("triton trtllm KV and GPU full", pages.triton_trtllm(0.98, 6, 32, 2, 0.97), []),
        ("trtllm weak speculation", pages.trtllm(0.2, 0, 4, 1.2), []),
        ("trtllm unprefixed KV full", pages.trtllm(0.96, 5, 16, 0.0, prefixed=False), []),
        ("vllm low prefix hit rate", Scrape.parse(_vllm_prefix_page("True")),
         [_call(0.05, cache_expected_tokens=900, cache_read_tokens=0, cache_miss_reason="prefix_changed") for _ in range(4)]),
        ("vllm prefix caching off", Scrape.parse(_vllm_prefix_page("False")), []),
        ("unknown page", Scrape.parse("# TYPE foo_requests gauge\nfoo_requests 3\n"), []),
    ]  # fmt: skip
    for name, scrape, records in hand:
        yield name, " ".join(sorted(scrape.names)), diagnose(pages.window(scrape), records)


def _keys(d: Diagnosis) -> set[str]:
    """The snake_case keys and coded values of one diagnosis: what `to_dict` (``--json``) carries."""
    doc = d.to_dict()
    keys = set(doc["window"]) | set(doc["client"]) | set(FIELDS) | set(KINDS)
    for f in doc["findings"]:
        coded = {k: v for k, v in f["evidence"].items() if k not in ("metrics", "first_names")}  # those two hold the page's names
        keys |= set(f["evidence"]) | {v for v in coded.values() if isinstance(v, str) and re.fullmatch(r"[a-z]+(_[a-z]+)+", v)}
    return {k for k in keys if "_" in k}


_TOKEN = re.compile(r"[A-Za-z0-9_:.{}=\"\-/]*[a-z0-9]_[A-Za-z0-9_:.{}=\"\-/]*")


def _terminal(d: Diagnosis, width: int = 100) -> str:
    console = Console(record=True, width=width, color_system=None)
    console.print(render(d, "http://127.0.0.1:8000"))
    return console.export_text()


PAGES = list(cases())


def test_every_finding_kind_is_scanned() -> None:
    seen = {k for _, _, d in PAGES for k in d.kinds}
    assert seen == set(KINDS), set(KINDS) - seen


@pytest.mark.parametrize(("name", "page", "d"), PAGES, ids=[c[0] for c in PAGES])
def test_no_snake_case_key_in_the_terminal_report(name: str, page: str, d: Diagnosis) -> None:
    keys = _keys(d)
    advice = " ".join(f.advice for f in d.findings)
    for where, shown in (("terminal", _terminal(d)), ("str(diagnosis)", str(d))):
        flat = re.sub(r"\s*│\s*", " ", shown)  # the panels' borders wrap long lines: join them again
        for token in _TOKEN.findall(flat):
            token = token.strip(".,;:)(\"'")
            bare = token.lstrip("-")
            assert bare not in keys, f"{name}: {where} shows the key {bare!r}:\n{shown}"
            # any other snake_case word is the engine's own: a metric name on the page, or a name its advice quotes
            assert bare in page or bare in advice or any(bare in m for m in _metric_names(d)), f"{name}: {where}: {token!r}\n{shown}"


def _metric_names(d: Diagnosis) -> list[str]:
    return [str(f.evidence.get("metrics") or "") + str(f.evidence.get("first_names") or "") for f in d.findings]


def test_the_tgi_head_says_what_tgi_does_not_expose_in_words() -> None:
    """The issue's case: Datadog's TGI page."""
    d = diagnose(MetricsWindow([parse_metrics(text("tgi-metrics-datadog-payload-excerpt.yaml"))]))
    shown = _terminal(d, width=200)
    assert "not exposed by TGI  KV-cache usage, preemptions, prefix-cache hit rate, server TTFT, GPU memory" in re.sub(r" {2,}", "  ", shown)
    assert "most waiting: 0; mean waiting: 0; most running: 0; mean server queue time: 2.71 s" in re.sub(r"\s*│\s*", " ", shown)
    assert "queue pressure" in shown and "queue_pressure" not in shown
    # --json keeps the keys
    doc = d.to_dict()
    assert doc["window"]["not_exposed"] == "kv_cache_usage, preemptions, prefix_cache_hit_rate, server_ttft_mean_s, gpu_memory_usage"
    assert doc["findings"][0]["kind"] == "queue_pressure" and doc["findings"][0]["evidence"]["waiting_max"] == 0


def test_times_and_shares_carry_units() -> None:
    from latencykit.engines._words import figure

    assert figure("server_queue_time_mean_s", 2.709) == "2.71 s" and figure("server_ttft_p50_s", 0.48) == "480 ms"
    assert figure("client_slot_wait_mean_s", 0.000123) == "0.123 ms" and figure("elapsed_s", 0) == "0 s"
    assert figure("kv_cache_usage_max", 0.4312) == "43.12 %" and figure("kv_cache_tokens", 200000.0) == "200,000"
    assert figure("prefix_caching_enabled", False) == "off" and figure("main_miss_reason", "prefix_changed") == "the client changed the prefix"



def test_kv_pressure_evidence_reads_as_a_sentence_part() -> None:
    """The KV-pressure evidence names what one more sequence needs as a person would say it."""
    from latencykit.engines._words import evidence_text

    text = evidence_text({"kv_free": 0.0898, "kv_need_per_sequence": 0.0977}, "vllm")
    assert text == "KV cache free: 8.98 %; KV cache needed for one more sequence: 9.77 %", text


def test_rates_are_not_read_as_durations() -> None:
    """``*_per_s`` figures are rates, their labels say "per second": never "450 s", nor "500 ms" for half a token."""
    from latencykit.engines._words import figure, label

    assert label("generation_tokens_per_s") == "generated tokens per second"
    assert figure("generation_tokens_per_s", 450.0) == "450" and figure("generation_tokens_per_s", 0.5) == "0.500"
    assert figure("prompt_tokens_per_s", 12345.6) == "12,346" and figure("generation_tokens_per_s", 0) == "0"
    assert figure("generation_tokens_per_s", None) == "n/a"


def test_the_terminal_report_gives_a_rate_without_a_time_unit() -> None:
    """The whole report of a loaded vLLM page: the generation rate reads as a number, not as seconds."""
    from latencykit.engines._words import figure

    first = Scrape.parse(text("real-vllm-cpu-metrics.txt"), at=0.0)
    second = Scrape.parse(text("real-vllm-cpu-metrics-midload.txt"), at=10.0)
    d = diagnose(MetricsWindow([first, second]))
    rate = d.window["generation_tokens_per_s"]
    assert isinstance(rate, float) and rate > 0  # the midload page has generated more tokens
    line = next(x for x in _terminal(d).splitlines() if "generated tokens per second" in x)
    assert line.split("generated tokens per second")[1].strip(" │") == figure("generation_tokens_per_s", rate), line
    assert not re.search(r"\d (s|ms)\b", line), line



def test_a_quantile_above_every_finite_bucket_reads_as_over() -> None:
    """TGI's queue time: 90 of 100 requests waited longer than its largest finite bucket (0.5 s). The report
    says the p95 is "over 500 ms", never that it is 500 ms; ``--json`` keeps PromQL's 0.5."""
    from latencykit.engines._metrics import AtLeast
    from latencykit.engines._words import figure

    assert figure("server_queue_time_p95_s", AtLeast(0.5)) == "over 500 ms" and figure("server_ttft_p95_s", AtLeast(2.0)) == "over 2 s"
    d = diagnose(pages.window(pages.tgi(12, 4)))
    flat = re.sub(r"\s*│\s*", " ", _terminal(d, 160))
    assert re.search(r"server queue time p95 +over 500 ms", flat) and "server queue time p95: over 500 ms" in flat, flat
    assert d.to_dict()["window"]["server_queue_time_p95_s"] == 0.5


def test_a_histogram_without_finite_buckets_has_no_quantile_in_the_report() -> None:
    """SGLang's TTFT histogram with a +Inf bucket only: its p50 and p95 are unknown (n/a), not "0 s"."""
    d = diagnose(pages.window(pages.sglang(0.3, 8, 0)))
    lines = [x for x in _terminal(d, 160).splitlines() if "server TTFT p" in x]
    assert len(lines) == 2 and all(x.split("server TTFT p")[1][2:].strip(" │") == "n/a" for x in lines), lines


def _vllm_queue_page(queued_s: float) -> str:
    """HAND-WRITTEN: vLLM after six requests that each queued ``queued_s`` (its own queue-time buckets)."""
    bounds = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0)
    buckets = "".join(f'vllm:request_queue_time_seconds_bucket{{engine="0",le="{b}",model_name="m"}} {6.0 if queued_s <= b else 0.0}\n' for b in bounds)
    return (f"vllm:num_requests_waiting{VLLM} 0\nvllm:num_requests_running{VLLM} 0\nvllm:kv_cache_usage_perc{VLLM} 0.0\n"
            f'{buckets}vllm:request_queue_time_seconds_bucket{{engine="0",le="+Inf",model_name="m"}} 6.0\n'
            f"vllm:request_queue_time_seconds_sum{VLLM} {6 * queued_s}\nvllm:request_queue_time_seconds_count{VLLM} 6.0\n")  # fmt: skip


def test_a_quantile_in_the_first_bucket_reads_as_at_most_its_bound() -> None:
    """Requests that queued 2 ms: the report must not say their queue-time p95 is 285 ms (PromQL's straight line
    from 0 to the first bound, 0.3 s) but "at most 300 ms"; ``--json`` keeps PromQL's value. Past the first
    bucket a quantile reads as a number, as before."""
    from latencykit.engines import AtMost
    from latencykit.engines._words import figure, number

    assert figure("server_queue_time_p95_s", AtMost(0.285, 0.3)) == "at most 300 ms"
    assert figure("server_ttft_p50_s", AtMost(0.0005, 0.001)) == "at most 1 ms" and number(13.999999999999986) == "14"
    d = diagnose(MetricsWindow([parse_metrics(_vllm_queue_page(0.002))]))
    flat = re.sub(r"\s*│\s*", " ", _terminal(d, 160))
    assert re.search(r"server queue time p95 +at most 300 ms", flat), flat
    assert d.to_dict()["window"]["server_queue_time_p95_s"] == pytest.approx(0.285)
    slow = diagnose(MetricsWindow([parse_metrics(_vllm_queue_page(0.9))]))
    assert re.search(r"server queue time p95 +\d+ ms", re.sub(r"\s*│\s*", " ", _terminal(slow, 160)))  # in (0.8, 1.0]: a number
