"""``--cluster local:2``: a real two-node Ray cluster on 127.0.0.1 driving the emulator with known timing.

What this proves: requests leave from both nodes, each is recorded once, the merged percentiles
are the pooled samples' within the sketch's accuracy and match the emulator's known TTFT, a
skewed worker clock is measured and corrected, a killed worker leaves a partial run (counted)
without a hang, Ctrl-C leaves a partial run file, and no Ray process outlives a run. What it
does not prove: scaling over a real network, or real clock skew between machines (the skew
here is injected into one worker's clock reading).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from latencykit.bench import BenchConfig, BenchRun, run_bench
from latencykit.fleet._fleet import SKEW_ENV

from .conftest import ray_processes

pytestmark = pytest.mark.usefixtures("no_ray_left")

TTFT = 0.4
"""The emulator's timing (`emulator_url`): every first token 400 ms after the request arrives (no jitter, no prefill
cost), then 30 tokens 10 ms apart: 0.7 s a request."""


def _exact_quantile_band(values: list[float], q: float) -> tuple[float, float]:
    """The sample values at the ranks a q-quantile may take (lower and upper rank)."""
    s = sorted(values)
    r = q * (len(s) - 1)
    return s[math.floor(r)], s[math.ceil(r)]


def test_two_nodes_known_timing_exact_merge(emulator_url: str) -> None:
    # A load this 2-core machine carries beside two Ray nodes and the emulator (~9 requests/s; at 200 ms and c=8 a
    # plain single-process run already adds ~15 ms at P99 here); the first request of each slot opens its
    # connection: the warm-up takes them.
    n, warm = 240, 8
    run = run_bench(BenchConfig(base_url=emulator_url, requests=n, concurrency=(6,), warmup=warm, exact_output=False),
                    cluster="local:2")  # fmt: skip
    assert run.partial is None
    cell = run.cells[0]
    # requests from both nodes, every request recorded once
    nodes = [s["node"] for s in cell.samples]
    assert set(nodes) == {0, 1} and min(nodes.count(0), nodes.count(1)) >= n // 2 - 1
    assert sorted(s["i"] for s in cell.samples) == list(range(n))
    cluster = run.env["cluster"]
    assert len({nd["node_id"] for nd in cluster["nodes"]}) == 2 and cluster["address"] == "local:2"
    for nd in cluster["nodes"]:
        assert abs(nd["clock"]["offset_s"]) <= nd["clock"]["uncertainty_s"] + 0.002  # one machine: no real skew
    # the known truth, within 5 %
    for q in (0.5, 0.99):
        v = cell.value("ttft", q)
        assert v is not None and abs(v - TTFT) / TTFT < 0.05, (q, v)
    # merged sketches = pooled samples, within the sketch's stated relative accuracy
    alpha = cell.sketches["ttft"].relative_accuracy
    pooled = [s["ttft"] for s in cell.measured if s["ttft"] is not None]
    assert cell.sketches["ttft"].count == len(pooled) == n - warm
    for q in (0.5, 0.9, 0.99):
        lo, hi = _exact_quantile_band(pooled, q)
        v = cell.value("ttft", q)
        assert v is not None and lo * (1 - alpha) - 1e-9 <= v <= hi * (1 + alpha) + 1e-9, (q, v, lo, hi)
    # both workers' health, per node
    assert sorted(h["node"] for h in cell.health) == [0, 1]
    assert all(h["cores"] is not None and h["loop_lag_p99"] is not None for h in cell.health)


def test_skewed_worker_clock_is_measured_and_corrected(monkeypatch: pytest.MonkeyPatch, emulator_url: str) -> None:
    monkeypatch.setenv(SKEW_ENV, "1=-3.0")  # worker 1's wall clock reads 3 s slow
    run = run_bench(BenchConfig(base_url=emulator_url, requests=60, concurrency=(4,), warmup=4, exact_output=False),
                    cluster="local:2")  # fmt: skip
    workers = {w["worker"]: w for w in run.env["cluster"]["workers"]}
    assert workers[1]["offset_s"] == pytest.approx(-3.0, abs=workers[1]["uncertainty_s"] + 0.005)
    assert abs(workers[0]["offset_s"]) < 0.01
    cell = run.cells[0]
    starts = {h["worker"]: h["window"][0] for h in cell.health}
    # corrected: both began together on the driver's timeline (uncorrected, worker 1 would start 3 s late)
    assert abs(starts[0] - starts[1]) < 0.25, starts
    # 56 measured requests, 4 at a time, 0.7 s each: 9.8 s; 3 s more if uncorrected
    assert cell.window_s is not None and cell.window_s < 9.8 + 1.0, cell.window_s
    for q in (0.5, 0.99):  # latencies never see the offset: each worker measures on its own monotonic clock
        v = cell.value("ttft", q)
        assert v is not None and abs(v - TTFT) / TTFT < 0.05


def _cli(args: list[str], tmp: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "160"}
    return subprocess.Popen([sys.executable, "-m", "latencykit", "bench", *args], cwd=tmp, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # gone meanwhile
        return b""


def _finish(p: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """The command's output once it exits; killed (and the test failed by its caller's asserts) if it hangs."""
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        return out, err + f"\n[killed: still running after {timeout:.0f} s]"


def _wait_for_requests(url: str, count: int, timeout: float = 120) -> None:
    """Until the emulator has released ``count`` first chunks in this cell (its lateness counters)."""
    import urllib.request

    base = url[: -len("/v1")]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        data = json.loads(urllib.request.urlopen(f"{base}/_emulator/lateness", timeout=2).read())
        if (data["lateness"]["first"].get("count") or 0) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"the emulator never saw {count} requests")


def _worker_pids(timeout: float = 90) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [pid for pid in ray_processes() if b"ray::FleetWorker" in _cmdline(pid)]
        if len(pids) >= 2:
            return sorted(pids)
        time.sleep(0.2)
    raise AssertionError("the two bench workers never started")


def test_acceptance_command_shows_both_nodes_offsets_and_health(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    p = _cli(["--cluster", "local:2", "--target", "emulator", "--traffic", "chat", "--requests", "400", "--concurrency", "32",
              "--quiet", "--out", str(out)], tmp_path)  # fmt: skip
    stdout, stderr = p.communicate(timeout=300)
    assert p.returncode == 0, stderr[-2000:]
    assert "cluster local:2: 2 node(s), 2 worker(s)" in stdout
    for node in (0, 1):
        assert f"  node {node}: " in stdout and "clock offset" in stdout
        assert f"client node {node} (" in stdout
    run = BenchRun.load(out)
    assert len(run.cells[0].samples) == 400 and {s["node"] for s in run.cells[0].samples} == {0, 1}
    assert all("offset_s" in nd["clock"] and "uncertainty_s" in nd["clock"] for nd in run.env["cluster"]["nodes"])


def test_killed_worker_leaves_a_counted_partial_run_without_a_hang(tmp_path: Path, emulator_url: str) -> None:
    out = tmp_path / "run.json"
    n = 300
    p = _cli(["--cluster", "local:2", "--target", "emulator", "--base-url", emulator_url, "--requests", str(n),
              "--concurrency", "8", "--quiet", "--out", str(out)], tmp_path)  # fmt: skip
    try:
        pids = _worker_pids()
        _wait_for_requests(emulator_url, 60)
        time.sleep(1.5)  # one more progress report from each worker
        os.kill(pids[1], signal.SIGKILL)
    finally:
        stdout, stderr = _finish(p, 180)
    assert p.returncode == 3, stderr[-2000:]
    assert "cluster workers lost" in stderr
    run = BenchRun.load(out)
    cell = run.cells[0]
    assert cell.partial is not None and len(cell.partial["workers_lost"]) == 1
    lost = cell.partial["workers_lost"][0]
    assert lost["dealt"] == n // 2 and lost["finished_lost"] + lost["in_flight"] + lost["unsent"] == lost["dealt"]
    assert lost["finished_lost"] > 0 and lost["unsent"] > 0
    # nothing silently dropped: what survived plus what was counted lost is every request
    assert len(cell.samples) + lost["dealt"] == n
    assert "LOST worker" in stdout and "never sent" in stdout


def test_ctrl_c_writes_a_partial_run_and_stops_the_cluster(tmp_path: Path, emulator_url: str) -> None:
    out = tmp_path / "run.json"
    p = _cli(["--cluster", "local:2", "--target", "emulator", "--base-url", emulator_url, "--requests", "400",
              "--concurrency", "8", "--quiet", "--out", str(out)], tmp_path)  # fmt: skip
    try:
        _worker_pids()
        _wait_for_requests(emulator_url, 40)
        p.send_signal(signal.SIGINT)
    finally:
        stdout, stderr = _finish(p, 120)
    assert p.returncode == 130, stderr[-2000:]
    data: dict[str, Any] = json.loads(out.read_text())
    assert data["partial"].startswith("interrupted")
    assert 0 < len(data["cells"][0]["samples"]) < 400
    assert {s["node"] for s in data["cells"][0]["samples"]} == {0, 1}  # both workers' finished requests came back


def test_experiment_sends_each_strategy_from_the_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``latencykit experiment --cluster local:2``: every strategy's traffic from both nodes, one cluster for all."""
    import tomllib

    # the example starts `latencykit bench emulator`: this interpreter's script, whatever PATH the lane has
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")

    from latencykit.bench import experiment
    from latencykit.commands._experiment import example

    spec = tomllib.loads(example("emulator"))
    spec["traffic"]["requests"] = 16
    spec["load"]["warmup"] = 2
    spec["quality"]["prompts"] = 2
    run = experiment(spec, out=tmp_path / "exp", only=["int8"], cluster="local:2")
    cells = run.bench.cells
    assert {c.labels["strategy"] for c in cells} == {"baseline", "int8"}
    for c in cells:
        assert {s["node"] for s in c.samples} == {0, 1} and len(c.samples) == 16
    assert len(run.bench.env["cluster"]["nodes"]) == 2
    from latencykit.bench import ExperimentRun

    saved = ExperimentRun.load(tmp_path / "exp" / "experiment.json")
    assert saved.bench.env["cluster"]["address"] == "local:2"


def test_ctrl_c_while_the_cluster_starts_leaves_no_ray_process(tmp_path: Path) -> None:
    """A Ctrl-C before the nodes are up: exit 130 and every process of the half-started cluster stopped."""
    p = _cli(["--cluster", "local:2", "--requests", "20", "--quiet", "--out", str(tmp_path / "run.json")], tmp_path)
    deadline = time.monotonic() + 60
    while not any(b"latencykit.fleet._local_ray" in _cmdline(pid) for pid in ray_processes()):
        assert time.monotonic() < deadline, "the local cluster helper never started"
        time.sleep(0.05)
    time.sleep(1.0)  # its Ray processes are starting
    p.send_signal(signal.SIGINT)
    _, stderr = _finish(p, 90)
    assert p.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr
    # the no_ray_left fixture then checks, by PID, that nothing of the cluster is left
