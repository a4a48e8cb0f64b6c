"""The doctor end to end: the emulator in vLLM mode put into each pressure state, driven through
the real OpenAI SDK (latencykit.vllm clients), scraped over HTTP. Emulated latencies."""

from __future__ import annotations

import asyncio
import socket
import urllib.error
from typing import Any, Iterator

import pytest
from _answering import answering

import latencykit.vllm as lkv
from latencykit.emulator import Emulator, TimingModel, VLLMConfig, count_tokens
from latencykit.vllm import Diagnosis, Doctor, Finding, MetricsWindow, Scrape, Thresholds, diagnose

# Fast decode, no prefill cost to speak of: the states come from the scheduler, not from slowness.
TIMING = TimingModel(base_ttft=0.01, prefill_per_token=0.0, decode_per_token=0.002, output_tokens=400)
WORDS = "alpha beta gamma delta server token cache prefix stream client".split()


def words(n: int, seed: int) -> str:
    """``n`` words, different for each seed."""
    return " ".join(WORDS[(i * 7 + seed * 13 + i // 5) % len(WORDS)] + str(seed) for i in range(n))


def messages(system: str, question: str) -> list[dict[str, str]]:
    """System prompt + user turn."""
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


async def _sample(doc: Doctor, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await doc.ascrape()
        await asyncio.sleep(0.02)


async def run_state(kind: str, calls: list[tuple[str, int]], concurrent: bool, **changes: Any) -> tuple[Diagnosis, Any]:
    """Serve ``kind``, send ``calls`` (system prompt, max_tokens), scrape meanwhile, diagnose."""
    with Emulator(timing=TIMING, vllm=VLLMConfig.pressure(kind, **changes)) as emu:
        client = lkv.AsyncVLLM(emu.base_url, max_retries=0)
        await client.chat.completions.create(messages=[{"role": "user", "content": "warm up"}], max_tokens=2)
        doc = Doctor(emu.base_url, records=client.latency)
        await doc.ascrape()
        stop = asyncio.Event()
        sampler = asyncio.create_task(_sample(doc, stop))

        async def one(i: int, system: str, max_tokens: int) -> None:
            await client.chat.completions.create(messages=messages(system, f"question {i}"), max_tokens=max_tokens)

        if concurrent:
            await asyncio.gather(*(one(i, s, m) for i, (s, m) in enumerate(calls)))
        else:
            for i, (s, m) in enumerate(calls):
                await one(i, s, m)
        stop.set()
        await sampler
        await doc.ascrape()
        records = client.latency.calls
        await client.close()
        return doc.diagnose(), records


async def test_healthy_when_nothing_limits() -> None:
    """Short sequential calls on a roomy server: healthy, and only healthy."""
    d, _ = await run_state("healthy", [(words(30, i), 16) for i in range(4)], concurrent=False)
    assert d.kinds == ("healthy",), str(d)
    assert d.healthy and d.findings[0].advice


async def test_queue_pressure_with_more_streams_than_max_num_seqs() -> None:
    """6 concurrent streams on 2 sequence slots: requests wait while the KV cache is nearly empty."""
    d, records = await run_state("queue_pressure", [(words(30, i), 64) for i in range(6)], concurrent=True)
    assert "queue_pressure" in d.kinds and "kv_cache_pressure" not in d.kinds, str(d)
    finding = d.findings[d.kinds.index("queue_pressure")]
    assert finding.evidence["waiting_max"] >= 1 and finding.evidence["running_max"] == 2
    assert (finding.evidence["kv_cache_usage_max"] or 0) < 0.9
    assert "--max-num-seqs" in finding.advice or "replicas" in finding.advice
    assert all(r.outcome == "completed" for r in records)


async def test_kv_cache_pressure_when_prompts_fill_the_cache() -> None:
    """4 concurrent ~1900-token prompts on a 4096-token KV cache: waits for capacity and preemptions."""
    def tokens(system: str) -> int:
        return count_tokens({"model": "tiny", "messages": messages(system, "question 0")})

    scale = max(1, round(1900 / tokens(words(1200, 0)) * 1200))
    prompts = [words(scale, i) for i in range(4)]
    assert all(1700 <= tokens(p) <= 2040 for p in prompts), [tokens(p) for p in prompts]
    d, records = await run_state("kv_cache_pressure", [(p, 200) for p in prompts], concurrent=True)
    assert "kv_cache_pressure" in d.kinds and "queue_pressure" not in d.kinds, str(d)
    finding = d.findings[d.kinds.index("kv_cache_pressure")]
    assert finding.evidence["preemptions"] >= 1
    assert "quantiz" in finding.advice.lower() and "replica" in finding.advice
    assert all(r.outcome == "completed" and r.output_tokens == 200 for r in records[1:])


async def test_weak_speculative_decoding() -> None:
    """3 drafts per step accepted with probability 0.1: under 0.5 accepted tokens per step."""
    d, records = await run_state("weak_speculative_decoding", [(words(30, i), 64) for i in range(3)], concurrent=False)
    assert "weak_speculative_decoding" in d.kinds, str(d)
    finding = d.findings[d.kinds.index("weak_speculative_decoding")]
    assert finding.evidence["spec_accepted_per_step"] < 0.5
    # the client sees the same thing per call: about one token per step
    assert all(r.extra["tokens_per_step"] < 1.5 for r in records[1:])


async def test_good_speculative_decoding_is_not_flagged() -> None:
    """The same drafts accepted with probability 0.9: healthy, and several tokens per step per call."""
    d, records = await run_state(
        "weak_speculative_decoding", [(words(30, i), 64) for i in range(3)], concurrent=False, spec_acceptance=0.9
    )
    assert "weak_speculative_decoding" not in d.kinds, str(d)
    assert all(r.extra["tokens_per_step"] > 2.5 for r in records[1:])


async def test_low_prefix_cache_hit_rate_despite_shared_prefixes() -> None:
    """Prefix caching off, the same ~1500-token system prompt three times: low hit rate, and the fix."""
    system = words(1500, 1)
    d, records = await run_state("low_prefix_cache_hit_rate", [(system, 8)] * 3, concurrent=False)
    assert "low_prefix_cache_hit_rate" in d.kinds, str(d)
    finding = d.findings[d.kinds.index("low_prefix_cache_hit_rate")]
    assert finding.evidence["prefix_cache_hit_rate"] == 0 and finding.evidence["calls_with_shared_prefix"] >= 2
    assert "--enable-prefix-caching" in finding.advice


async def test_same_traffic_with_prefix_caching_on_is_not_flagged() -> None:
    """The same calls on a server that caches: the shared prefix is read, no finding."""
    system = words(1500, 1)
    d, records = await run_state("healthy", [(system, 8)] * 3, concurrent=False)
    assert "low_prefix_cache_hit_rate" not in d.kinds, str(d)
    assert (records[-1].cache_read_tokens or 0) > 1000


async def test_time_outside_engine() -> None:
    """A 0.3 s delay before the engine sees each request: client TTFT far above the server's."""
    d, _ = await run_state("time_outside_engine", [(words(30, i), 8) for i in range(4)], concurrent=False)
    assert "time_outside_engine" in d.kinds, str(d)
    finding = d.findings[d.kinds.index("time_outside_engine")]
    assert finding.evidence["gap_s"] >= 0.25
    assert finding.evidence["server_ttft_mean_s"] < finding.evidence["client_ttft_mean_s"]


def test_doctor_function_and_client_shortcut() -> None:
    """``lkv.doctor(url, duration=...)`` scrapes over a window; ``client.doctor()`` adds its records."""
    with Emulator(timing=TIMING, vllm=VLLMConfig()) as emu:
        d = lkv.doctor(emu.base_url + "/v1", duration=0.1, interval=0.05)
        assert d.kinds == ("healthy",) and d.window["scrapes"] >= 2
        client = lkv.VLLM(emu.base_url, max_retries=0)
        client.chat.completions.create(messages=[{"role": "user", "content": "hi"}], max_tokens=4)
        d2 = client.doctor(duration=0)
        assert d2.client["calls"] == 1 and d2.window["scrapes"] == 1
        client.close()


def _page(usage: float, waiting: float, running: float, extra: str = "") -> MetricsWindow:
    labels = '{engine="0",model_name="m"}'
    page = (
        f"vllm:kv_cache_usage_perc{labels} {usage}\n"
        f"vllm:num_requests_waiting{labels} {waiting}\n"
        f"vllm:num_requests_running{labels} {running}\n"
    ) + extra
    return MetricsWindow([Scrape.parse(page)])


def test_rules_on_a_synthetic_window_and_thresholds() -> None:
    """The rules read only the window: requests waiting while the free KV cannot hold one more sequence
    of the running ones' size is memory pressure, whatever the usage; with room, a queue."""
    # the case: one sequence holds 86 %, three wait; usage is below 0.9, and a second cannot fit
    one = diagnose(_page(0.86, 3, 1))
    assert one.kinds == ("kv_cache_pressure",), str(one)
    ev = one.findings[0].evidence
    assert ev["running"] == 1 and ev["kv_free"] == pytest.approx(0.14) and ev["kv_need_per_sequence"] == pytest.approx(0.86)
    assert "cannot help" in one.findings[0].advice and "raise --max-num-seqs" not in one.findings[0].advice
    # 8 running at 95 %: ~12 % each, 5 % free
    assert diagnose(_page(0.95, 3, 8)).kinds == ("kv_cache_pressure",)
    # real vLLM-CPU mid-load (--max-num-seqs 2): 0.5 % used, room for hundreds more: a queue
    queue = diagnose(_page(0.0048, 4, 2))
    assert queue.kinds == ("queue_pressure",) and queue.findings[0].evidence["kv_room_sequences_min"] > 400
    assert "raise --max-num-seqs" in queue.findings[0].advice
    # 40 short sequences at 95 %: room for two more; kv_cache_high draws the "full anyway" line
    crowded = _page(0.95, 3, 40)
    assert diagnose(crowded).kinds == ("kv_cache_pressure",)
    assert diagnose(crowded, thresholds=Thresholds(kv_cache_high=0.99)).kinds == ("queue_pressure",)
    assert diagnose(crowded, thresholds=Thresholds(kv_cache_high=0.99, kv_free_sequences=3)).kinds == ("kv_cache_pressure",)
    # the mean prompt (request_prompt_tokens) over the cache size (cache_config_info) bounds the need
    # from below: 4 running long chats at 80 %, but the prompts waiting are 100 tokens of 10,240
    info = 'vllm:cache_config_info{block_size="16",engine="0",kv_cache_size_tokens="10240",num_gpu_blocks="640"} 1.0\n'
    prompts = 'vllm:request_prompt_tokens_sum{engine="0",model_name="m"} 1000\nvllm:request_prompt_tokens_count{engine="0",model_name="m"} 10\n'
    prompts += 'vllm:request_prompt_tokens_bucket{engine="0",le="+Inf",model_name="m"} 10\n'
    assert diagnose(_page(0.8, 2, 4)).kinds == ("kv_cache_pressure",)
    assert diagnose(_page(0.8, 2, 4, info + prompts)).kinds == ("queue_pressure",)
    # a preemption is memory pressure even if no scrape caught the cache full
    preempted = _page(0.1, 0, 1, 'vllm:num_preemptions_total{engine="0",model_name="m"} 2\n')
    assert diagnose(preempted).kinds == ("kv_cache_pressure",)
    assert "fewer concurrent" in diagnose(preempted).findings[0].advice
    with pytest.raises(ValueError, match="-1"):
        Thresholds(waiting=-1)
    assert "[KV-cache pressure]" in str(one)


def test_finding_text_names_kind_evidence_and_advice() -> None:
    """A finding prints its kind, its numbers and the advice, in words (tests/test_doctor_words.py)."""
    f = Finding("queue_pressure", "Requests queue", {"waiting_max": 4.0, "kv": None}, "Add replicas.")
    assert str(f) == "[queue pressure] Requests queue (most waiting: 4)\n  -> Add replicas."


@pytest.fixture
def vllm_emu() -> Iterator[Emulator]:
    """An emulator in vLLM mode, healthy."""
    with Emulator(timing=TIMING, vllm=VLLMConfig()) as emu:
        yield emu


def test_pressure_state_can_change_at_run_time(vllm_emu: Emulator) -> None:
    """``emu.vllm.config`` reassigned: the next requests see the new state."""
    vllm_emu.vllm.config = VLLMConfig.pressure("low_prefix_cache_hit_rate")
    page = Scrape.parse(vllm_emu.vllm.render_metrics())
    assert page.prefix_caching_enabled is False
    with pytest.raises(ValueError, match="kv_pressure"):
        VLLMConfig.pressure("kv_pressure")


def test_cli_doctor_prints_findings(vllm_emu: Emulator, capsys: pytest.CaptureFixture[str]) -> None:
    """``latencykit doctor --url URL`` prints the window and the findings; an unreachable server exits 1."""
    from latencykit.cli import main

    assert main(["doctor", "--url", vllm_emu.base_url + "/v1", "--duration", "0.1", "--interval", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "latencykit doctor" in out and "healthy" in out and "most KV-cache usage" in out and "kv_cache_usage_max" not in out
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SystemExit) as exit_info:
        main(["doctor", "--url", f"http://127.0.0.1:{port}", "--duration", "0.1"])
    assert exit_info.value.code == 1
    assert capsys.readouterr().err == (f"latencykit: cannot scrape http://127.0.0.1:{port}/metrics: nothing answers at host "
                                       f"127.0.0.1 port {port} (connection refused); is the server up, and is it its port?\n")  # fmt: skip


def test_cli_doctor_says_in_words_what_the_connection_met() -> None:
    """No errno numbers: a host that does not resolve (urllib's error as it raises it: no lookup here, tests
    stay on loopback), and a port that accepts but never answers."""
    from latencykit._net_words import failure_words as _why

    unknown = urllib.error.URLError(socket.gaierror(-2, "Name or service not known"))
    assert _why(unknown, "http://no-such-host.invalid:8000/metrics") == "host 'no-such-host.invalid' not found (Name or service not known)"
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen(4)
        port = mute.getsockname()[1]
        doc = lkv.Doctor(f"http://127.0.0.1:{port}", timeout=0.3)
        with pytest.raises(OSError) as err_info:
            doc.scrape()
        assert _why(err_info.value, f"http://127.0.0.1:{port}/metrics") == f"host 127.0.0.1 port {port} gave no answer in time (timed out)"


# -- llama.cpp slot queueing from the client's own records (no scrape caught the deferral) --------

LLAMA_PAGE = "llamacpp:requests_processing 0\nllamacpp:requests_deferred 0\nllamacpp:prompt_tokens_total 0\n"


def _llama_call(start: float, ttft: float, e2e: float, server_ttft: float = 0.012) -> Any:
    from latencykit import CallRecord

    return CallRecord(
        "openai", "chat", "tiny", started_at=start, ttft=ttft, e2e=e2e,
        extra={"server": "llamacpp", "server_ttft": server_ttft},
    )  # fmt: skip


def _llama_window(t0: float, t1: float) -> MetricsWindow:
    return MetricsWindow([Scrape.parse(LLAMA_PAGE, at=0.0, wall=t0), Scrape.parse(LLAMA_PAGE, at=t1 - t0, wall=t1)])


def _four_on_two(t0: float = 1000.0) -> list[Any]:
    """4 streams at once on 2 slots (as measured on a real llama-server): two start at once, the
    other two get their first token when a slot frees, 0.6 s later; prompt_ms stays ~12 ms."""
    return [
        _llama_call(t0, 0.02, 0.62), _llama_call(t0 + 0.001, 0.02, 0.63),
        _llama_call(t0 + 0.002, 0.64, 1.24), _llama_call(t0 + 0.003, 0.65, 1.25),
    ]  # fmt: skip


def test_slot_queue_from_records_when_scrapes_missed_the_deferral() -> None:
    """More calls open than slots, the late ones' TTFT above prompt_ms: queue pressure, not time outside."""
    records = _four_on_two()
    d = diagnose(_llama_window(999.0, 1002.0), records, capacity=2)
    assert d.kinds == ("queue_pressure",), str(d)
    ev = d.findings[0].evidence
    assert ev["server_slots"] == 2 and ev["client_calls_in_flight_max"] == 4
    assert ev["client_calls_waited_for_slot"] == 2 and ev["client_slot_wait_mean_s"] == pytest.approx(0.62, abs=0.01)
    assert d.client["calls_waited_for_slot"] == 2
    assert "-np" in d.findings[0].advice
    q = lkv.slot_queue(records, 2)
    assert q is not None and len(q.contended) == 4 and len(q.waited) == 2


def test_no_slot_queue_without_over_subscription() -> None:
    """The same records on a 4-slot server are not a slot queue: the gap is time outside the engine.
    Unknown slot count: no claim either way from the records."""
    records = _four_on_two()
    d = diagnose(_llama_window(999.0, 1002.0), records, capacity=4)
    assert "queue_pressure" not in d.kinds and "time_outside_engine" in d.kinds, str(d)
    assert lkv.slot_queue(records, None) is None
    assert "queue_pressure" not in diagnose(_llama_window(999.0, 1002.0), records).kinds
    # one call at a time, each slow to its first token: never contended, even on one slot
    serial = [_llama_call(1000.0 + 2 * i, 0.5, 1.0) for i in range(4)]
    d1 = diagnose(_llama_window(999.0, 1010.0), serial, capacity=1)
    assert d1.kinds == ("time_outside_engine",), str(d1)
    with pytest.raises(ValueError, match="capacity"):
        diagnose(_llama_window(999.0, 1002.0), records, capacity=0)


def test_outside_time_still_seen_on_calls_that_had_a_slot() -> None:
    """Queueing does not hide a slow path: calls that never waited for a slot still count."""
    t0 = 1000.0
    queued = [_llama_call(t0 + 0.001 * i, 0.02 if i < 2 else 0.64, 0.62 if i < 2 else 1.24) for i in range(4)]
    slow_alone = [_llama_call(t0 + 5 + 2 * i, 0.8, 1.2) for i in range(4)]
    d = diagnose(_llama_window(999.0, 1015.0), queued + slow_alone, capacity=2)
    assert "queue_pressure" in d.kinds and "time_outside_engine" in d.kinds, str(d)


def test_sampling_window_starts_before_the_block(vllm_emu: Emulator) -> None:
    """The first scrape is taken on entering the block, not whenever the thread gets the CPU:
    the block's first requests fall inside the window (on a loaded machine they did not)."""
    doc = Doctor(vllm_emu.base_url)
    with doc.sampling(60.0):  # the thread's own next scrape is a minute away
        assert len(doc.scrapes) == 1 and doc.scrape_errors == 0
        first = doc.scrapes[0].at
    assert len(doc.scrapes) == 2 and doc.scrapes[0].at == first  # and one more on leaving


def test_sampling_thread_scrapes_while_the_caller_blocks(vllm_emu: Emulator) -> None:
    """``Doctor.sampling`` scrapes from its own thread: a blocked caller (or event loop) does not starve it."""
    import time

    doc = Doctor(vllm_emu.base_url)
    with doc.sampling(0.02):
        time.sleep(0.4)  # what a busy event loop looks like to an asyncio sampler
    assert len(doc.scrapes) >= 5 and doc.scrape_errors == 0
    assert doc.capacity is None  # not llama.cpp: no /slots asked
    with pytest.raises(ValueError, match="interval"):
        with doc.sampling(0):
            pass
    with pytest.raises(ValueError, match="capacity"):
        Doctor(vllm_emu.base_url, capacity=True)  # type: ignore[arg-type]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    bad = Doctor(dead, timeout=0.5)
    with bad.sampling(0.05):
        time.sleep(0.1)
    assert bad.scrape_errors >= 1 and not bad.scrapes
    assert lkv.fetch_slots(dead, timeout=0.5) is None


# -- a server that answers /metrics with an error: what it said, not only the status's name -------------


NOT_FOUND_HINT = ("nothing serves /metrics there: is it the inference server's own address? (Triton serves its metrics "
                  "on port 8002, trtllm-serve at /prometheus/metrics; Ollama has none)")  # fmt: skip


@pytest.mark.parametrize(
    ("status", "ctype", "body", "said"),
    [
        # llama-server (build 11434) started without --metrics, as recorded from it by hand
        (501, "application/json; charset=utf-8",
         b'{"error":{"code":501,"message":"This server does not support metrics endpoint. Start it with `--metrics`",'
         b'"type":"not_supported_error"}}',
         "HTTP 501 Not Implemented: This server does not support metrics endpoint. Start it with `--metrics`"),
        # llama-server while it loads its model
        (503, "application/json; charset=utf-8", b'{"error":{"message":"Loading model","type":"unavailable_error","code":503}}',
         "HTTP 503 Service Unavailable: Loading model"),
        # a FastAPI server (an OpenAI-compatible proxy) with no /metrics route: its body only repeats the status
        (404, "application/json", b'{"detail":"Not Found"}', f"HTTP 404 Not Found; {NOT_FOUND_HINT}"),
        # a Go server (Ollama) with no /metrics route
        (404, "text/plain; charset=utf-8", b"404 page not found", f"HTTP 404 Not Found: 404 page not found; {NOT_FOUND_HINT}"),
        # an HTML error page from a gateway: its markup is no message
        (502, "text/html", b"<html><body><h1>502 Bad Gateway</h1></body></html>", "HTTP 502 Bad Gateway"),
    ],
)  # fmt: skip
def test_cli_doctor_says_what_the_server_answered(status: int, ctype: str, body: bytes, said: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    from latencykit.cli import main

    with answering(status, ctype, body) as url:
        with pytest.raises(SystemExit) as exit_info:
            main(["doctor", "--url", url + "/v1", "--duration", "0"])
    assert exit_info.value.code == 1
    assert capsys.readouterr().err == f"latencykit: cannot scrape {url}/metrics: {said}\n"


def test_fetch_metrics_raises_the_servers_status_with_its_message() -> None:
    """The library's error stays urllib's ``HTTPError`` (an ``OSError``), with the status and headers the
    server sent; only its message says more."""
    body = b'{"error":{"message":"This server does not support metrics endpoint. Start it with `--metrics`"}}'
    with answering(501, "application/json", body) as url:
        with pytest.raises(urllib.error.HTTPError) as err:
            lkv.fetch_metrics(url)
    assert isinstance(err.value, OSError) and err.value.code == 501
    assert err.value.headers["Content-Type"] == "application/json"
    assert err.value.url == url + "/metrics"
    assert str(err.value) == ("HTTP Error 501: Not Implemented: This server does not support metrics endpoint. "
                              "Start it with `--metrics`")  # fmt: skip


@pytest.mark.parametrize(
    ("url", "detail"),
    [
        ("127.0.0.1:8000", ""),
        ("http://127.0.0.1:99999", ": port 99999 is not a TCP port (1 to 65535)"),  # urllib would connect to 34463
        ("http://:8000/v1", ": no host"),
    ],
)
def test_a_url_that_is_no_server_url_is_refused_before_any_scrape(url: str, detail: str, capsys: pytest.CaptureFixture[str]) -> None:
    from latencykit.cli import main

    message = f"expected an http(s) URL of the server, got {url!r}{detail}"
    with pytest.raises(ValueError) as err:
        lkv.doctor(url, duration=0)
    assert str(err.value) == message
    with pytest.raises(SystemExit) as exit_info:
        main(["doctor", "--url", url, "--duration", "0"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"latencykit doctor: error: argument --url: {message}"


def test_a_metrics_endpoint_behind_basic_auth_is_scraped_and_its_password_never_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``http://user:password@host/`` is sent as HTTP basic auth, as Prometheus allows (urllib would take the
    credentials for part of the host name); the password appears in no line the doctor prints."""
    import json

    from latencykit.cli import main
    from test_metrics_reader import text

    page = text("real-vllm-cpu-metrics.txt").encode()
    with answering(200, "text/plain; version=0.0.4", page, basic_auth=("alice", "s3cr:et")) as root:
        host = root.removeprefix("http://")
        assert lkv.fetch_metrics(f"http://alice:s3cr%3Aet@{host}").server == "vllm"
        assert main(["doctor", "--url", f"http://alice:s3cr%3Aet@{host}/v1", "--duration", "0", "--json"]) == 0
        out = capsys.readouterr().out
        assert json.loads(out)["url"] == f"http://alice:***@{host}" and "s3cr" not in out
        with pytest.raises(SystemExit):
            main(["doctor", "--url", f"http://alice:wrong@{host}", "--duration", "0"])
    err = capsys.readouterr().err
    assert err == f"latencykit: cannot scrape http://alice:***@{host}/metrics: HTTP 401 Unauthorized\n"  # the body repeats it
