"""``--cluster`` addresses with Ray installed: ``auto`` and a head's ``HOST:PORT`` join a live cluster (the address
check lets it through and finds it as Ray does), and an address where something listens but no Ray answers (a
silent port, an HTTP server, a gRPC server of another kind, the head's GCS given as ``ray://``) ends in a second
or two on latencykit's one line saying what is there — not after Ray's own 20-30 s, nor with its warnings."""

from __future__ import annotations

import contextlib
import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from latencykit.bench import BenchRun
from latencykit.fleet._cluster import LocalRayCluster, _raylet_gcs_addresses, auto_address, check_cluster, parse_cluster, ray_env

pytestmark = pytest.mark.usefixtures("no_ray_left")


def _bench(args: list[str], tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **ray_env(), "PYTHONUNBUFFERED": "1", "COLUMNS": "160", **env}
    return subprocess.run([sys.executable, "-m", "latencykit", "bench", *args], cwd=tmp, env=full, text=True,
                          capture_output=True, timeout=300)  # fmt: skip


@pytest.fixture
def head() -> Iterator[str]:
    """A one-node Ray cluster on 127.0.0.1 (the ``local:N`` helper, stopped by its PIDs); its GCS address."""
    cluster = LocalRayCluster(1, 2)
    try:
        address = cluster.start().address
        assert address is not None
        yield address
    finally:
        cluster.stop()


def test_auto_and_the_head_address_join_a_live_cluster(head: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the raylet is found as Ray's `auto` finds it (its --gcs-address), and the address check lets it through
    raylets = _raylet_gcs_addresses() or []
    assert head in raylets
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert auto_address()[0] == head or len(raylets) > 1  # another cluster here: Ray would pick by its own file
    check_cluster(parse_cluster(head))
    # the head's GCS given as a Ray Client address: said in a second, with the form that works
    t0 = time.perf_counter()
    with pytest.raises(ValueError) as err:
        check_cluster(parse_cluster(f"ray://{head}"))
    assert time.perf_counter() - t0 < 10  # Ray Client itself waits 30 s here
    port = head.rpartition(":")[2]
    assert str(err.value) == (f"--cluster ray://{head}: port {port} at host {head.rpartition(':')[0]} is a Ray head's GCS, "
                              f"not Ray Client: give it as --cluster {head} (without ray://)")  # fmt: skip
    for n, (cluster, env) in enumerate([("auto", {"RAY_ADDRESS": head}), (head, {})]):
        out = tmp_path / f"run{n}.json"
        p = _bench(["--cluster", cluster, "--requests", "8", "--concurrency", "2", "--quiet", "--out", str(out)], tmp_path, **env)
        assert p.returncode == 0, p.stderr[-2000:]
        assert "Warning" not in p.stderr and "rpc_client" not in p.stderr
        run = BenchRun.load(out)
        assert len(run.cells[0].samples) == 8 and run.env["cluster"]["nodes"]


@pytest.fixture
def mute() -> Iterator[int]:
    """A loopback port that accepts TCP connections and never says a word (not a Ray Client server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield int(s.getsockname()[1])


@pytest.fixture
def http_port() -> Iterator[int]:
    """A plain HTTP/1.1 server on loopback (what Ray's dashboard, 8265, is to a gRPC client)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextlib.contextmanager
def _grpc_server(services: dict[str, list[str]]) -> Iterator[int]:
    """A gRPC server on loopback whose methods (service name → method names) answer empty bytes; its port."""
    from concurrent import futures

    import grpc  # installed with Ray

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handler = grpc.unary_unary_rpc_method_handler(lambda request, context: b"")
    for service, methods in services.items():
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {m: handler for m in methods}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield port
    finally:
        server.stop(None).wait(5)


@pytest.fixture
def fake_ray_client() -> Iterator[int]:
    """A gRPC server with Ray Client's service (its ClusterInfo method) and nothing else."""
    with _grpc_server({"ray.rpc.RayletDriver": ["ClusterInfo"]}) as port:
        yield port


@pytest.fixture
def other_grpc() -> Iterator[int]:
    """A gRPC server that is neither Ray Client nor a GCS (no services at all)."""
    with _grpc_server({}) as port:
        yield port


def _one_line(p: subprocess.CompletedProcess[str], elapsed: float) -> str:
    assert p.returncode == 2, p.stderr[-2000:]
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr[-2000:]
    assert elapsed < 10, f"{elapsed:.1f} s"  # ~1.4 s here at worst; Ray waits 20-30 s (a loose bound: shared CI cores)
    return lines[0]


def _timed_bench(address: str, tmp: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.perf_counter()
    p = _bench(["--cluster", address, "--requests", "5", "--quiet", "--out", str(tmp / "r.json")], tmp)
    return p, time.perf_counter() - t0


@pytest.mark.parametrize("form", ["ray://127.0.0.1:{port}", "127.0.0.1:{port}"])
def test_a_port_that_accepts_and_stays_silent_ends_on_one_line(mute: int, tmp_path: Path, form: str) -> None:
    """Ray Client gives up on such a port after its own ~30 s, a GCS address after ~20 s; the check asks for one
    second, and the terminal shows latencykit's line only, not Ray's warning."""
    address = form.format(port=mute)
    p, elapsed = _timed_bench(address, tmp_path)
    what = "Ray Client" if address.startswith("ray://") else "a Ray head's GCS"
    assert _one_line(p, elapsed) == (f"latencykit bench: --cluster {address}: host 127.0.0.1 port {mute} accepts connections "
                                     f"but gives no answer (none within 1 s), so it is not {what}; is it the right port "
                                     "(Ray Client listens on 10001, the head's GCS on 6379)?")  # fmt: skip
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("form", ["ray://127.0.0.1:{port}", "127.0.0.1:{port}"])
def test_an_http_server_is_named_as_such(http_port: int, tmp_path: Path, form: str) -> None:
    """The commonest wrong port: the dashboard's (an HTTP server)."""
    address = form.format(port=http_port)
    p, elapsed = _timed_bench(address, tmp_path)
    line = _one_line(p, elapsed)
    assert line.startswith(f"latencykit bench: --cluster {address}: host 127.0.0.1 port {http_port} answers, but not over gRPC")
    assert "dashboard on 8265" in line and "Ray Client listens on 10001" in line


def test_ray_client_given_as_a_gcs_address_says_the_form_that_works(fake_ray_client: int, other_grpc: int, tmp_path: Path) -> None:
    p, elapsed = _timed_bench(f"127.0.0.1:{fake_ray_client}", tmp_path)
    assert _one_line(p, elapsed) == (f"latencykit bench: --cluster 127.0.0.1:{fake_ray_client}: port {fake_ray_client} at host "
                                     f"127.0.0.1 is Ray Client, not a Ray head's GCS: give it as --cluster ray://127.0.0.1:{fake_ray_client}")  # fmt: skip
    check_cluster(parse_cluster(f"ray://127.0.0.1:{fake_ray_client}"))  # the form it names passes
    with pytest.raises(ValueError, match=rf"port {other_grpc} speaks gRPC, but is neither Ray Client nor a Ray head's GCS"):
        check_cluster(parse_cluster(f"ray://127.0.0.1:{other_grpc}"))


def test_a_cluster_on_tls_is_not_asked(mute: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over TLS (RAY_USE_TLS) a plain gRPC question would fail on a good cluster: only the TCP check is made."""
    monkeypatch.setenv("RAY_USE_TLS", "1")
    check_cluster(parse_cluster(f"ray://127.0.0.1:{mute}"))
