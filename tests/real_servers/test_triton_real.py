"""A real Triton Inference Server (2.51, bundled by the nvidia-pytriton wheel, CPU only) serving a
decoupled (streaming) text model (``scripts/triton_echo.py``): the reader and the doctor on its
``/metrics``, against what the client measured on the stream.

Triton's ``nv_inference_request_duration_us`` stops when the backend returns, which for a
decoupled model is long before the stream ends: the doctor must never read it as a TTFT or an
E2E, and must compare nothing with the client's TTFT (Triton has no server TTFT).

Runs with the real-server tier (``LK_REAL_SERVERS=1`` or ``LK_REAL_SERVERS_REQUIRED=triton``);
the pytriton venv comes from ``bash scripts/triton_server.sh install``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from latencykit.core._record import CallRecord
from latencykit.vllm import Doctor, MetricsWindow, fetch_metrics

from .conftest import ASKED, CACHE, REPO, REPORT, Server, _free_port, _stop, _wait_ready, unavailable

PYTRITON_VERSION = "0.7.0"
TRITON_PY = CACHE / f"venv-pytriton-{PYTRITON_VERSION}" / "bin" / "python"
PREFILL, DECODE, WORDS = 0.2, 0.02, 8


@pytest.fixture(scope="module")
def triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    """tritonserver with the ``echo`` model; yields the server (HTTP URL) and its metrics URL."""
    if not ASKED:
        unavailable("triton", "not requested")
    if not TRITON_PY.exists():
        unavailable("triton", f"no nvidia-pytriton venv at {TRITON_PY.parent.parent}")
    http, grpc, metrics = _free_port(), _free_port(), _free_port()
    log = tmp_path_factory.mktemp("logs") / "triton.log"
    argv = [str(TRITON_PY), str(REPO / "scripts" / "triton_echo.py"), "--http-port", str(http), "--grpc-port", str(grpc),
            "--metrics-port", str(metrics), "--prefill", str(PREFILL), "--decode", str(DECODE)]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server = Server("triton", f"http://127.0.0.1:{http}", "echo", proc, log)
    t0 = time.monotonic()
    try:
        # the server answers /v2/health/ready before pytriton has loaded the model: wait for the model
        _wait_ready(server, 180, path="/v2/models/echo/ready")
        REPORT["triton_startup_s"] = round(time.monotonic() - t0, 1)
        yield server, f"http://127.0.0.1:{metrics}"
    finally:
        _stop(server)


def stream(server: Server, text: str) -> CallRecord:
    """One streamed request over Triton's generate extension (SSE); the client's own record of it."""
    body = json.dumps({"text_input": text}).encode()
    req = urllib.request.Request(server.url + "/v2/models/echo/generate_stream", data=body, headers={"Content-Type": "application/json"})
    wall, t0 = time.time(), time.perf_counter()
    ttft, words = None, []
    with urllib.request.urlopen(req, timeout=60) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if line.startswith("data:"):
                words.append(json.loads(line[5:])["text_output"])
                ttft = ttft if ttft is not None else time.perf_counter() - t0
    e2e = time.perf_counter() - t0
    assert words == text.split()
    return CallRecord("triton", "generate_stream", "echo", started_at=wall, ttft=ttft, e2e=e2e, output_tokens=len(words), outcome="completed")


def test_doctor_on_real_triton_never_reads_backend_time_as_latency(triton: tuple[Server, str]) -> None:
    """Streamed requests: the request-duration counter holds milliseconds while each stream lasts
    ~0.34 s; the doctor reports it as backend time only, no server TTFT or E2E, no time-outside
    finding, and the client TTFT it reports is the records' own."""
    server, metrics = triton
    records: list[CallRecord] = []
    doc = Doctor(metrics, records=records)
    doc.scrape()
    text = " ".join(f"w{i}" for i in range(WORDS))
    for _ in range(6):
        records.append(stream(server, text))
    doc.scrape()
    d = doc.diagnose()
    w = doc.metrics_window()
    s = w.last
    assert s.server == "triton" and s.backend is None and s.models == ("echo",)
    backend = w.backend_request_mean
    client_ttft = statistics.fmean(r.ttft or 0.0 for r in records)
    client_e2e = statistics.fmean(r.e2e or 0.0 for r in records)
    REPORT["triton_backend_request_mean_s"] = backend
    REPORT["triton_client_ttft_mean_s"] = round(client_ttft, 4)
    REPORT["triton_client_e2e_mean_s"] = round(client_e2e, 4)
    REPORT["triton_doctor"] = d.to_dict()
    assert w.delta("requests_finished") == 6
    assert backend is not None and backend < 0.5 * PREFILL < client_ttft < client_e2e, (backend, client_ttft, client_e2e)
    fields = w.fields()
    assert fields["server_ttft_mean_s"] == fields["server_e2e_mean_s"] == "not exposed by triton"
    assert d.window["server_ttft_mean_s"] is None and d.window["server_e2e_mean_s"] is None
    assert d.kinds == ("healthy",), str(d)
    assert d.client["server_ttft_mean_s"] is None
    assert d.client["client_ttft_mean_s"] == pytest.approx(client_ttft) and d.client["calls"] == 6
    # queue time from the µs counters is a real (small) queue time
    assert fields["server_queue_time_mean_s"] is not None and fields["server_queue_time_mean_s"] < 0.1


def test_doctor_cli_on_real_triton(triton: tuple[Server, str]) -> None:
    """``latencykit doctor --url <metrics port>`` reads the page as Triton's and shows no server TTFT."""
    _, metrics = triton
    assert fetch_metrics(metrics).server == "triton"
    cli = str(Path(sys.executable).with_name("latencykit"))
    out = subprocess.run([cli, "doctor", "--url", metrics, "--duration", "0", "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["window"]["server"] == "triton" and report["window"]["server_ttft_mean_s"] is None
    assert "server_ttft_mean_s" in (report["window"]["not_exposed"] or "")
    assert MetricsWindow([fetch_metrics(metrics)]).backend_request_mean is not None
