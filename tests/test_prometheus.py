"""A real Prometheus scrapes latencykit's metrics through the OpenTelemetry Prometheus exporter.

Needs Debian's ``prometheus`` binary (``.ci/run`` installs it). Without it the test is
skipped locally but fails when ``CI`` is set, so CI cannot pass by skipping.
"""

from __future__ import annotations

import json
import math
import os
import select
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import IO, Any, Optional

import pytest
from prometheus_client.parser import text_string_to_metric_families

CALLS = 60
SEED = 11
TTFT_FAMILY = "latencykit_client_time_to_first_token"  # OTel name with dots → underscores
WORKER = Path(__file__).with_name("_prom_worker.py")
_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via an *_proxy from the environment


@pytest.fixture
def prometheus_binary() -> str:
    """Path of the ``prometheus`` binary; skip without one, but fail under CI."""
    path = shutil.which("prometheus")
    if path is None:
        reason = "the `prometheus` binary is not installed (Debian: apt-get install prometheus; .ci/run does this)"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {reason}")
        pytest.skip(reason)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _get(url: str, timeout: float = 2.0) -> str:
    with _LOOPBACK.open(url, timeout=timeout) as resp:
        body: bytes = resp.read()
        return body.decode()


def _query(base: str, promql: str) -> list[dict[str, Any]]:
    """An instant query's result vector (empty when there are no samples yet)."""
    data = json.loads(_get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})))
    assert data["status"] == "success", data
    result: list[dict[str, Any]] = data["data"]["result"]
    return result


def _read_line(stream: IO[str], timeout: float) -> str:
    ready, _, _ = select.select([stream], [], [], timeout)
    return stream.readline() if ready else ""


def _start_prometheus(binary: str, target_port: int, tmp_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start Prometheus scraping ``127.0.0.1:target_port`` every second; returns it and its URL once ready."""
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: latencykit\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
    )
    log = tmp_path / "prometheus.log"
    for _attempt in range(3):  # the port picked may be taken by the time Prometheus binds it
        port = _free_port()
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                _get(f"{base}/-/ready", timeout=0.5)
                return proc, base
            except OSError:
                time.sleep(0.1)
        proc.kill()
        proc.wait()
    raise AssertionError(f"Prometheus did not become ready; log:\n{log.read_text()}")


def _reap(proc: subprocess.Popen[Any]) -> None:
    """Wait for a process told to stop; kill it if it has not within 10 s."""
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _bucket_index(value: float, bounds: list[float]) -> int:
    """Index of the bucket ``(bounds[i-1], bounds[i]]`` holding ``value`` (``len(bounds)`` for +Inf)."""
    return sum(1 for b in bounds if b < value)


def test_prometheus_scrape_matches_in_process_count_and_p99(prometheus_binary: str, tmp_path: Path) -> None:
    """Prometheus's request count equals the calls made and its P99 TTFT agrees with the in-process P99 to a bucket.

    The two P99s are estimated differently: in process, DDSketch (1 % relative error) of
    the sorted TTFTs at the nearest rank ``ceil(0.99·n)``; in Prometheus, ``histogram_quantile``
    finds the bucket holding rank ``0.99·n`` and interpolates linearly inside it. With n = 60
    both estimate the 60th smallest TTFT, but a 1 % error can cross a bucket boundary, and
    within a bucket Prometheus cannot know where the value lies (a factor of 2 with these
    doubling boundaries). So the tolerance is bucket resolution: the two estimates lie in
    the same or adjacent buckets. Exactly,
    Prometheus's estimate must lie in the bucket holding the ``ceil(0.99·n)``-th TTFT the
    worker measured, and every cumulative bucket count must equal the count of measured
    TTFTs at or below its ``le``.
    """
    with (tmp_path / "worker.log").open("wb") as err:
        worker = subprocess.Popen(
            [sys.executable, str(WORKER), str(CALLS), str(SEED)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
        )  # fmt: skip
    prometheus: Optional[subprocess.Popen[bytes]] = None
    try:
        assert worker.stdout is not None
        line = _read_line(worker.stdout, timeout=30)
        assert line, f"worker printed no report; log:\n{(tmp_path / 'worker.log').read_text()}"
        report = json.loads(line)
        assert report["calls"] == CALLS and len(report["ttfts"]) == CALLS

        # The exporter's name for latencykit.client.time_to_first_token, and its `le` labels.
        exposition = _get(f"http://127.0.0.1:{report['port']}/metrics")
        families = [f for f in text_string_to_metric_families(exposition) if f.name.startswith(TTFT_FAMILY)]
        assert [f.type for f in families] == ["histogram"], [f.name for f in families]
        name = families[0].name
        assert name == TTFT_FAMILY + "_seconds"  # unit "s" becomes the `_seconds` suffix
        les = {s.labels["le"] for s in families[0].samples if s.name == name + "_bucket"}
        bounds = sorted(float(le) for le in les if le != "+Inf")
        assert len(bounds) >= 5

        prometheus, base = _start_prometheus(prometheus_binary, report["port"], tmp_path)
        deadline = time.monotonic() + 20
        count: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            count = _query(base, f"sum({name}_count)")
            if count and _query(base, 'up{job="latencykit"} == 1'):
                break
            time.sleep(0.25)
        assert count, f"no samples of {name} in Prometheus; log:\n{(tmp_path / 'prometheus.log').read_text()}"
        assert float(count[0]["value"][1]) == CALLS

        ttfts = sorted(report["ttfts"])
        buckets = {r["metric"]["le"]: float(r["value"][1]) for r in _query(base, f"sum by (le) ({name}_bucket)")}
        for le, cumulative in buckets.items():
            assert cumulative == sum(1 for t in ttfts if t <= float(le)), (le, buckets)

        (p99_row,) = _query(base, f"histogram_quantile(0.99, sum by (le) ({name}_bucket))")
        prom_p99 = float(p99_row["value"][1])
        local_p99 = report["p99"]
        prom_i, local_i = _bucket_index(prom_p99, bounds), _bucket_index(local_p99, bounds)
        print(f"\n{name}: Prometheus P99 {prom_p99:.4f} s (bucket {prom_i}), in-process P99 {local_p99:.4f} s "
              f"(bucket {local_i}), bounds {bounds[max(0, min(prom_i, local_i) - 1):max(prom_i, local_i) + 1]}")  # fmt: skip
        assert prom_i == _bucket_index(ttfts[math.ceil(0.99 * CALLS) - 1], bounds)
        assert abs(prom_i - local_i) <= 1
    finally:
        if prometheus is not None:
            prometheus.terminate()
            _reap(prometheus)
        if worker.stdin is not None:
            worker.stdin.close()  # the worker serves until its stdin closes
        _reap(worker)
        if worker.stdout is not None:
            worker.stdout.close()
