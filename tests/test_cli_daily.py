"""The CLI as a daily tool (#30), through a subprocess: one-line usage errors before any work, partial results
on Ctrl-C with no process left behind, full-width output on a pipe, and help that says what each flag does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, Sequence

import pytest

from latencykit.bench._cell import BenchRun
from latencykit.emulator import Emulator, TimingModel

FAST = ("--emu-ideal", "--emu-time-scale", "0.1", "--emu-output-tokens", "8", "--no-exact-output", "--quiet")


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["TMPDIR"] = str(tmp_path)
    return env


def lk(args: Sequence[str], tmp_path: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``latencykit ARGS`` in a subprocess (stdout a pipe, not a terminal), run in ``tmp_path``."""
    return subprocess.run([sys.executable, "-m", "latencykit.cli", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=tmp_path, env=_env(tmp_path))  # fmt: skip


def _one_line_usage_error(proc: subprocess.CompletedProcess[str], words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert words in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--traffic", "replay", "--replay", "nope.jsonl"], "--replay nope.jsonl: no such file"),
        (["--out", "/nonexistent/x.json"], "--out /nonexistent/x.json: the directory /nonexistent does not exist"),
        (["--html", "/nonexistent/x.html"], "--html /nonexistent/x.html: the directory /nonexistent does not exist"),
        (["--warmup", "500", "--requests", "10"], "--warmup 500 leaves nothing to measure"),
        (["--replay", "calls.jsonl", "--traffic", "chat"], "leave --traffic out or say --traffic replay"),
        (["--matrix", "client=sdk", "--matrix", "stream=forced"], "give one of the two levers"),
    ],
)
def test_usage_errors_are_one_line_before_the_run(tmp_path: Path, args: list[str], words: str) -> None:
    """Each mistake: exit 2, one line naming the bad value, no traceback, no run file (nothing ran)."""
    (tmp_path / "calls.jsonl").write_text('{"prompt_tokens": 20, "output_tokens": 4}\n')
    proc = lk(["bench", "--requests", "4", *args, *FAST], tmp_path)
    _one_line_usage_error(proc, words)
    assert not list(tmp_path.glob("bench-*.json")) and proc.stdout == ""


def test_a_failed_write_still_prints_the_report_and_keeps_the_results(tmp_path: Path) -> None:
    """--out on a device that refuses the write (/dev/full): the report is printed, one line says where the run
    file went instead (the temporary directory), exit 2 — the measured results are not lost."""
    proc = lk(["bench", "--requests", "4", "--concurrency", "2", "--out", "/dev/full", *FAST], tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "EMULATED" in proc.stdout and "TTFT" in proc.stdout
    assert f"cannot write the run file /dev/full: No space left on device; written to {tmp_path / 'full'} instead" in proc.stderr
    assert BenchRun.load(tmp_path / "full").cells[0].completed == 4


def test_replay_without_traffic_flag_replays(tmp_path: Path) -> None:
    """--replay FILE alone replays the file (3 requests, not 200 chat ones)."""
    (tmp_path / "calls.jsonl").write_text("".join(f'{{"prompt_tokens": {20 + i}, "output_tokens": 4}}\n' for i in range(3)))
    proc = lk(["bench", "--replay", "calls.jsonl", "--concurrency", "2", "--out", "r.json", *FAST], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "traffic replay of calls.jsonl ×3 per cell" in proc.stdout
    assert len(BenchRun.load(tmp_path / "r.json").cells[0].samples) == 3


def test_piped_output_is_full_width_and_formats(tmp_path: Path) -> None:
    """On a pipe no table is cut at 80 columns; --format json prints one JSON document on stdout; --format
    markdown prints pipe tables; compare takes the same --format."""
    proc = lk(["bench", "--requests", "6", "--concurrency", "2", "--out", "a.json", *FAST], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout and max(len(line) for line in proc.stdout.splitlines()) > 80
    assert "queueing" in proc.stdout and "event-loop lag" in proc.stdout
    js = lk(["bench", "--requests", "6", "--concurrency", "2", "--out", "b.json", "--format", "json", *FAST], tmp_path)
    doc = json.loads(js.stdout)
    assert doc["emulated"] and doc["run_file"] == "b.json" and doc["cells"][0]["summary"]["ttft"]["n"] == 6
    md = lk(["bench", "--requests", "6", "--concurrency", "2", "--out", "c.json", "--format", "markdown", *FAST], tmp_path)
    assert "| metric | n | p50 ms |" in md.stdout and "run file: c.json" in md.stderr
    cmp_json = lk(["bench", "compare", "a.json", "b.json", "--format", "json"], tmp_path)
    assert cmp_json.returncode in (0, 1) and json.loads(cmp_json.stdout)["comparisons"]
    cmp_md = lk(["bench", "compare", "a.json", "b.json", "--format", "markdown"], tmp_path)
    assert "| cell | metric | base ms [CI] |" in cmp_md.stdout


def test_help_says_what_each_command_and_flag_does(tmp_path: Path) -> None:
    """bench --help lists compare, merge and emulator; bench emulator's --host/--port/--seed have help; --emu-ideal
    names the flag that exists; doctor --help shows no '(default: None)' and no required --url with a default."""
    bench = lk(["bench", "--help"], tmp_path).stdout
    for word in ("latencykit bench compare", "latencykit bench merge", "latencykit bench emulator", "--format"):
        assert word in bench, word
    assert "same as --emu-preset ideal" in bench and "same as --preset ideal" not in bench
    emulator = lk(["bench", "emulator", "--help"], tmp_path).stdout
    for flag in ("--host HOST", "--port PORT", "--seed SEED"):
        line = next(x for x in emulator.splitlines() if x.strip().startswith(flag))
        assert len(line.strip()) > len(flag) + 5, line
    doctor = " ".join(lk(["doctor", "--help"], tmp_path).stdout.split())
    assert "(default: None)" not in doctor and "(default: all) (default" not in doctor
    assert "[--url URL]" in doctor and "(default: http://127.0.0.1:8000)" in doctor  # optional, with its default
    emu = " ".join(lk(["emulator", "--help"], tmp_path).stdout.split())
    assert "--vllm" in emu and "--pressure STATE" in emu and "kv_cache_pressure" in emu and "(default: None)" not in emu


def test_emulator_vllm_mode_from_the_cli_and_the_doctor_says_emulated(tmp_path: Path) -> None:
    """`latencykit emulator --vllm --pressure queue_pressure` serves vLLM's routes; `latencykit doctor` on it
    labels the metrics EMULATED (text and --json); --pressure without --vllm is a one-line usage error."""
    _one_line_usage_error(lk(["emulator", "--pressure", "queue_pressure"], tmp_path), "add --vllm")
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "latencykit.cli", "emulator", "--vllm", "--pressure", "queue_pressure",
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                models = json.loads(urllib.request.urlopen(f"{url}/v1/models", timeout=1).read())
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "emulator did not start"
                time.sleep(0.1)
        assert models["data"][0]["owned_by"] == "vllm"
        assert "vllm:num_requests_running" in urllib.request.urlopen(f"{url}/metrics", timeout=5).read().decode()
        doc = lk(["doctor", "--url", url, "--duration", "0", "--json"], tmp_path)
        assert doc.returncode == 0 and json.loads(doc.stdout)["emulated"] is True, doc.stderr
        text = lk(["doctor", "--url", url, "--duration", "0"], tmp_path)
        assert "EMULATED" in text.stdout and "e-0" not in text.stdout and "e+" not in text.stdout
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert "vLLM mode" in out and proc.returncode == 130 and "Traceback" not in err


@pytest.fixture
def slow_emulator() -> Iterator[Emulator]:
    """An emulator whose requests take ~0.1 s, so a long bench is still running when interrupted."""
    with Emulator(timing=TimingModel(base_ttft=0.05, decode_per_token=0.005, output_tokens=8, jitter=0.0)) as emu:
        yield emu


def _finished(emu: Emulator) -> int:
    return emu.stats.requests_total - emu.stats.active_streams


def _interrupt(args: Sequence[str], emu: Emulator, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], int]:
    """Start ``latencykit bench ARGS`` in its own process group, wait for a few finished requests, send SIGINT."""
    proc = subprocess.Popen([sys.executable, "-m", "latencykit.cli", "bench", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=_env(tmp_path), start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while _finished(emu) < 6:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the bench sent nothing"
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), proc.pid


def _no_process_left(pgid: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        assert time.monotonic() < deadline, "a process of the bench outlived it"
        time.sleep(0.1)


def test_ctrl_c_keeps_what_was_measured(slow_emulator: Emulator, tmp_path: Path) -> None:
    """Ctrl-C after a few of 400 requests: exit 130, the report printed and marked PARTIAL, the run file written
    and marked partial with the finished requests, one line on stderr, no traceback, no process left."""
    args = ["--target", "emulator", "--base-url", slow_emulator.base_url, "--requests", "400", "--concurrency", "2",
            "--no-exact-output", "--quiet", "--out", "p.json"]  # fmt: skip
    proc, pgid = _interrupt(args, slow_emulator, tmp_path)
    assert proc.returncode == 130, proc.stderr
    assert "Traceback" not in proc.stderr and "interrupted (Ctrl-C)" in proc.stderr and "partial results in p.json" in proc.stderr
    assert "PARTIAL RUN" in proc.stdout and "TTFT" in proc.stdout
    run = BenchRun.load(tmp_path / "p.json")
    assert run.partial and run.cells[0].partial is not None
    # The emulator may finish a request the client has not yet read: that one is cut, the others are kept.
    assert 3 <= len(run.cells[0].samples) < 400 and run.cells[0].completed == len(run.cells[0].samples)
    _no_process_left(pgid)


@pytest.mark.slow
def test_ctrl_c_with_workers_leaves_no_worker(slow_emulator: Emulator, tmp_path: Path) -> None:
    """With --workers 2 the interrupt reaches the workers; each sends back what it measured; none outlives the run."""
    args = ["--target", "emulator", "--base-url", slow_emulator.base_url, "--requests", "400", "--concurrency", "2",
            "--workers", "2", "--no-exact-output", "--quiet", "--out", "w.json"]  # fmt: skip
    proc, pgid = _interrupt(args, slow_emulator, tmp_path)
    assert proc.returncode == 130 and "Traceback" not in proc.stderr, proc.stderr
    run = BenchRun.load(tmp_path / "w.json")
    assert run.partial and 1 <= len(run.cells[0].samples) < 400
    _no_process_left(pgid)


def test_doctor_numbers_are_plain_decimals() -> None:
    """KV-cache usage and hit rates read as percentages, small seconds as decimals: never 7.82e-05."""
    from latencykit.engines._words import number as _number

    assert _number(7.82e-05, "kv_cache_usage_max") == "0.008 %"
    assert _number(0.4312, "prefix_cache_hit_rate") == "43.12 %"
    assert _number(0.000123, "server_ttft_p50_s") == "0.00012" and _number(1234.5, "generation_tokens_per_s") == "1,234"
    assert _number(None, "waiting_max") == "n/a" and _number(3, "running_max") == "3"
