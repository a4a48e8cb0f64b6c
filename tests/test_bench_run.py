"""`latencykit bench` end to end: run file, report, HTML, matrix, ITL per token, errors, merge and workers."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console
from _answering import answering

from latencykit.bench._cell import BenchRun
from latencykit.bench._run import BenchConfig, parse_matrix, run_bench
from latencykit.commands._bench import main
from latencykit.emulator._timing import IDEAL_TIMING

FAST = asdict(IDEAL_TIMING) | {"time_scale": 0.1, "output_tokens": 8}


def test_cli_run_writes_a_run_file_and_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command prints an EMULATED report with percentiles, goodput and client health, and writes JSON + HTML."""
    out, page = tmp_path / "run.json", tmp_path / "run.html"
    code = main(["--traffic", "chat", "--requests", "20", "--concurrency", "4", "--emu-ideal", "--emu-time-scale", "0.1",
                 "--emu-output-tokens", "8", "--no-exact-output", "--out", str(out), "--html", str(page), "--quiet"])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0
    for word in ("EMULATED", "TTFT", "ITL per token", "goodput", "event-loop lag", "unsent 0", "run file"):
        assert word in text, word
    run = BenchRun.load(out)
    cell = run.cells[0]
    assert run.emulated and len(cell.samples) == 20 and cell.sketches["ttft"].count == 20
    assert run.config["emulator_timing"]["base_ttft"] == 0.2 and run.env["versions"]["openai"]
    assert "sk-" not in out.read_text() and "bench" not in json.dumps(run.config["target"])  # no API key
    html = page.read_text()
    assert html.count("<svg") >= 3 and "EMULATED" in html and "CDF of TTFT" in html
    assert "<svg" in run._repr_html_()


def test_itl_per_token_recovers_the_decode_time_from_bundled_chunks() -> None:
    """4 tokens per chunk at 5 ms/token: ITL per chunk ≈ 20 ms, ITL per token ≈ TPOT-like 5 ms (per-chunk usage)."""
    timing = asdict(IDEAL_TIMING) | {"time_scale": 0.5, "tokens_per_chunk": 4, "output_tokens": 24}
    run = run_bench(BenchConfig(requests=8, concurrency=(2,), timing=timing, exact_output=False))
    cell = run.cells[0]
    chunk, token = cell.value("itl_chunk", 0.5), cell.value("itl_token", 0.5)
    assert chunk is not None and token is not None
    assert chunk == pytest.approx(0.020, rel=0.3) and token == pytest.approx(0.005, rel=0.3)
    assert cell.sketches["itl_token"].count == 4 * cell.sketches["itl_chunk"].count


def test_matrix_compares_strategies_on_the_anthropic_api() -> None:
    """cache=auto vs off on shared-prefix traffic: hits only with the planner on, TTFT split by hit and miss."""
    run = run_bench(BenchConfig(api="anthropic", traffic="shared-prefix", documents=1, requests=8, concurrency=(2,),
                                matrix=tuple(parse_matrix(["cache=off,auto"])), timing=FAST, exact_output=False))  # fmt: skip
    off, auto = run.cells
    assert (off.label, auto.label) == ("cache=off", "cache=auto")
    assert not any(s["cache_read"] for s in off.samples)
    assert sum(1 for s in auto.samples if s["cache_read"]) >= 6
    assert set(auto.split("cache")) == {"hit", "miss"} and auto.verdicts().get("hit", 0) >= 6
    # Samples are kept in the order calls finish; the first one sent is the prefix's cold start.
    first_sent = min(auto.samples, key=lambda s: s["i"])
    assert first_sent["cold"] is not None and "prefix" in first_sent["cold"]
    assert all("prefix" not in (s["cold"] or "") for s in auto.samples if s is not first_sent)
    buf = io.StringIO()
    run.report(Console(file=buf, width=150))
    assert "strategy comparison" in buf.getvalue() and "TTFT by cache" in buf.getvalue()
    with pytest.raises(ValueError, match="lever"):
        parse_matrix(["turbo=on"])


def test_prewarm_lever_fills_the_cache_before_the_timed_window() -> None:
    """``prewarm=on`` (``--prewarm``) on a GPT-5.6 target: the first request already reads; the pre-warm calls are no
    samples; the report prices the cache (writes 1.25×)."""
    run = run_bench(BenchConfig(model="gpt-5.6", traffic="shared-prefix", documents=1, requests=6, concurrency=(1,),
                                matrix=tuple(parse_matrix(["prewarm=off,on"])), timing=FAST, exact_output=False))  # fmt: skip
    off, on = run.cells
    assert (off.label, on.label) == ("prewarm=off", "prewarm=on") and len(on.samples) == 6
    first_off, first_on = (min(c.samples, key=lambda s: s["i"]) for c in (off, on))
    assert first_off["verdict"] == "write" and not first_off["cache_read"]
    assert first_on["verdict"] == "hit" and first_on["cache_read"] > 1000
    buf = io.StringIO()
    run.report(Console(file=buf, width=200))
    assert "writes 1.25×, reads 0.1× input" in buf.getvalue()


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_http_lever_runs_the_sdk_clients_on_their_aiohttp_backend(api: str) -> None:
    """``http=aiohttp`` hands the SDK client its own DefaultAioHttpClient; every request is still
    recorded through latencykit (and through the plain SDK), with the emulator's TTFT."""
    import anthropic
    import openai

    from latencykit.bench._clients import make_sender
    from latencykit.bench._targets import resolve_target

    sdk: Any = openai if api == "openai" else anthropic
    target = resolve_target("emulator", base_url="http://127.0.0.1:9", api=api)
    for client in ("latencykit", "sdk"):
        assert isinstance(make_sender(target, {"client": client, "http": "aiohttp"}).client._client, sdk.DefaultAioHttpClient)
        assert not isinstance(make_sender(target, {"client": client}).client._client, sdk.DefaultAioHttpClient)
    run = run_bench(BenchConfig(api=api, requests=6, concurrency=(2,), timing=FAST, exact_output=False,
                                matrix=tuple(parse_matrix(["client=latencykit,sdk", "http=httpx,aiohttp"]))))  # fmt: skip
    assert [c.label for c in run.cells] == ["client=latencykit http=httpx", "client=latencykit http=aiohttp",
                                            "client=sdk http=httpx", "client=sdk http=aiohttp"]  # fmt: skip
    for cell in run.cells:
        assert cell.outcomes() == {"completed": 6}, cell.label
        ttft = cell.value("ttft", 0.5)
        assert ttft is not None and 0.018 <= ttft <= 0.06, (cell.label, ttft)  # emulated 20 ms
    with pytest.raises(ValueError, match="http values"):
        parse_matrix(["http=requests"])


def test_errors_are_counted_by_kind_and_kept_out_of_latency() -> None:
    """An unreachable server: every request is an error of one kind, no TTFT recorded."""
    run = run_bench(BenchConfig(target="openai-compatible", base_url="http://127.0.0.1:9", model="m", requests=3,
                                concurrency=(1,), matrix=({"retry": "off", "client": "sdk"},)))  # fmt: skip
    cell = run.cells[0]
    assert cell.outcomes() == {"error: APIConnectionError": 3}
    assert cell.sketches["ttft"].count == 0
    assert (cell.completed, cell.failed) == (0, 3)
    assert cell.first_error == ("APIConnectionError: nothing answers at host 127.0.0.1 port 9 (connection refused); is the "
                                "server up, and is it its port?")  # where, in words: not "All connection attempts failed"
    assert sum(1 for s in cell.samples if s["message"]) == 1  # described once per kind, not per request
    old = BenchRun.from_dict(json.loads(json.dumps(run.to_dict()).replace('"message":', '"gone":')))
    assert old.cells[0].first_error == "APIConnectionError"  # a run file from before messages still reads


def test_bench_run_without_a_completed_request_exits_1_with_the_first_error(tmp_path: Path) -> None:
    """`latencykit bench` against a dead port, as a user runs it: exit 1 and one stderr line naming the error."""
    out = tmp_path / "dead.json"
    proc = subprocess.run([sys.executable, "-m", "latencykit.cli", "bench", "--target", "openai-compatible", "--base-url",
                           "http://127.0.0.1:1/v1", "--model", "m", "--requests", "2", "--concurrency", "1",
                           "--matrix", "retry=off", "--quiet", "--out", str(out)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line == ("latencykit bench: retry=off @ c=1 has no completed request (2 of 2 failed); first error: "
                    "APIConnectionError: nothing answers at host 127.0.0.1 port 1 (connection refused); is the server up, "
                    "and is it its port?"), line  # fmt: skip
    assert "first error: APIConnectionError" in proc.stdout and out.exists()  # the report says it too; the file is kept


def test_without_model_a_server_that_cannot_list_models_is_said_in_words(tmp_path: Path) -> None:
    """No --model: the server's model list is read first; where it cannot be, one line says why in words (what
    the connection met, or the HTTP status and what the server said, without the API key), exit 2."""

    def bench(base_url: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "latencykit.cli", "bench", "--target", "openai-compatible", "--base-url",
                               base_url, "--requests", "2", "--quiet", "--out", str(tmp_path / "r.json")],
                              capture_output=True, text=True, timeout=120,
                              env={**os.environ, "OPENAI_API_KEY": "sk-test-abcdefghijkl"})  # fmt: skip
        assert proc.returncode == 2, proc.stdout + proc.stderr
        (line,) = proc.stderr.splitlines()
        return line

    assert bench("http://127.0.0.1:1/v1") == ("latencykit bench: no --model given and http://127.0.0.1:1/v1/models could not "
                                             "be read: nothing answers at host 127.0.0.1 port 1 (connection refused); is the "
                                             "server up, and is it its port?")  # fmt: skip
    refusal = b'{"error":{"message":"Incorrect API key provided: sk-test-abcdefghijkl","type":"invalid_request_error"}}'
    with answering(401, "application/json", refusal) as root:
        url = root + "/v1"
        assert bench(url) == (f"latencykit bench: no --model given and {url}/models could not be read: HTTP 401: "
                              "Incorrect API key provided: ***")  # fmt: skip
    assert not (tmp_path / "r.json").exists()


def test_error_descriptions_leave_out_keys_and_prompt_text() -> None:
    """An error echoing the API key or the prompt is described without them, on one line."""
    from latencykit.bench._clients import describe_error

    prompt = "Summarize the quarterly numbers of the northern region for the board."
    try:
        try:
            raise ConnectionError("refused\nby peer")
        except ConnectionError as inner:
            raise RuntimeError(f"bad key sk-proj-abcdef123456 / secret-key-42; Bearer tok.en; input: '{prompt[:40]}'") from inner
    except RuntimeError as exc:
        text = describe_error(exc, api_key="secret-key-42", texts=[prompt])
    assert "abcdef" not in text and "secret-key-42" not in text and "tok.en" not in text and "quarterly" not in text
    assert text == "RuntimeError: bad key *** / ***; *** input: '[prompt text]'; caused by ConnectionError: refused by peer", text
    assert describe_error(ConnectionError("refused\nby peer")) == "ConnectionError: refused by peer"
    # a connection that failed at the socket is said in words, with where it went (and the rest as before)
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as inner:
            raise RuntimeError("All connection attempts failed") from inner
    except RuntimeError as exc:
        assert describe_error(exc, url="http://gpu-box:8000/v1") == (
            "RuntimeError: nothing answers at host gpu-box port 8000 (connection refused); is the server up, and is it its port?")
        assert describe_error(exc) == "RuntimeError: All connection attempts failed; caused by ConnectionRefusedError: [Errno 111] Connection refused"


def test_merge_of_three_files_equals_one_run_over_all_records(tmp_path: Path) -> None:
    """Three runs merged by `bench merge`: counts add, sketches equal one sketch over every sample,
    percentiles within the sketch's 1 % of the exact ones."""
    files = []
    for seed in range(3):
        run = run_bench(BenchConfig(requests=10, concurrency=(5,), seed=seed, timing=FAST | {"jitter": 0.3}, exact_output=False))
        files.append(str(run.save(tmp_path / f"w{seed}.json")))
    merged_path = tmp_path / "all.json"
    assert main(["merge", *files, "-o", str(merged_path)]) == 0
    merged = BenchRun.load(merged_path).cells[0]
    assert len(merged.samples) == 30 and merged.scheduled == 30 and len(merged.health) == 3
    exact = np.array(sorted(s["ttft"] for s in merged.samples))
    for q in (0.5, 0.9, 0.99):
        truth = float(np.quantile(exact, q, method="inverted_cdf"))  # the sketch's nearest rank
        assert merged.value("ttft", q) == pytest.approx(truth, rel=0.0101)
    from latencykit import PercentileSketch

    one = PercentileSketch()
    one.add_many([s["ttft"] for s in merged.samples])
    assert merged.sketches["ttft"].quantiles([0.1, 0.5, 0.9]) == one.quantiles([0.1, 0.5, 0.9])


@pytest.mark.slow  # two spawned processes each import both SDKs (seconds on a busy box)
def test_workers_split_the_load_and_merge_exactly() -> None:
    """--workers 2: two processes, each half the concurrency, every request recorded once."""
    run = run_bench(BenchConfig(requests=12, concurrency=(4,), workers=2, timing=FAST, exact_output=False))
    cell = run.cells[0]
    assert sorted(s["i"] for s in cell.samples) == list(range(12))
    assert {s["worker"] for s in cell.samples} == {0, 1} and len(cell.health) == 2
    assert all(h["max_in_flight"] == 2 for h in cell.health)
    assert cell.sketches["ttft"].count == 12


@pytest.mark.parametrize(
    ("strategy", "hint"),
    [({"client": "latencykit"}, True), ({"client": "sdk", "http": "httpx"}, True),
     ({"client": "latencykit", "http": "aiohttp"}, False), ({"client": "thin"}, False)],
)  # fmt: skip
def test_client_bound_cell_is_flagged_and_points_at_the_aiohttp_backend(strategy: dict[str, str], hint: bool) -> None:
    """Two workers each near a full core with a lagging loop: client-bound, more workers cannot
    help on this machine; an SDK client on httpx is pointed at the SDK's aiohttp backend."""
    import os

    from latencykit.bench._cell import Cell
    from latencykit.bench._run import diagnose

    cores = (os.cpu_count() or 1) / 2
    cell = Cell(strategy, {}, {"concurrency": 64},
                health=[{"cores": cores, "loop_lag_p99": 0.2, "load_average": 1.0} for _ in range(2)])  # fmt: skip
    (bound,) = [w for w in diagnose(cell) if w.startswith("client-bound")]
    assert "event-loop lag p99 200 ms" in bound and "more workers cannot help" in bound
    assert ("--matrix http=aiohttp" in bound) is hint
    quiet = Cell(strategy, {}, {"concurrency": 1}, health=[{"cores": 0.1, "loop_lag_p99": 0.001}])
    assert not [w for w in diagnose(quiet) if w.startswith("client-bound")]


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("127.0.0.1:8000", "not an http(s) URL"),  # the scheme forgotten
        ("http://127.0.0.1:99999", "port 99999 is not a TCP port (1 to 65535)"),  # the resolver would wrap it to 34463
        ("http://[::1]:0/v1", "port 0 is not a TCP port (1 to 65535)"),
        ("http://:8000", "no host"),
    ],
)
def test_a_base_url_that_is_no_server_url_is_refused_before_anything_is_sent(url: str, problem: str) -> None:
    from latencykit.bench._targets import resolve_target

    for kind in ("vllm", "openai-compatible", "emulator"):
        with pytest.raises(ValueError) as err:
            resolve_target(kind, base_url=url, model="m")
        assert str(err.value) == f"--base-url {url!r}: {problem} (e.g. http://127.0.0.1:8000)"
    assert resolve_target("vllm", base_url="http://user:pw@gpu-box/", model="m").base_url == "http://user:pw@gpu-box/v1"


def test_a_password_in_the_base_url_stays_out_of_the_run_file() -> None:
    """A server behind basic auth is given as ``http://user:password@host``: the run file (shared, compared, kept
    in CI) and the error lines carry ``user:***``."""
    run = run_bench(BenchConfig(target="openai-compatible", base_url="http://alice:s3cret@127.0.0.1:9", model="m",
                                requests=2, concurrency=(1,), matrix=({"retry": "off"},)))  # fmt: skip
    text = json.dumps(run.to_dict())
    assert "s3cret" not in text
    assert run.config["base_url"] == "http://alice:***@127.0.0.1:9"
    assert run.config["target"]["base_url"] == "http://alice:***@127.0.0.1:9/v1"
