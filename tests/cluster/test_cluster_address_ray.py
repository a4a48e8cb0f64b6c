"""``--cluster`` addresses with Ray installed: ``auto`` and a head's ``HOST:PORT`` join a live cluster (the address
check lets it through and finds it as Ray does), and an address where something listens but no Ray answers (a
silent port, an HTTP server, an HTTP/2 server or proxy, a gRPC server of another kind, the head's GCS given as
``ray://``) ends in a second or two on latencykit's one line saying what is there — not after Ray's own 20-30 s,
nor with its warnings."""

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


_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _answer_http2(conn: socket.socket, status: int) -> None:
    """Answer every request on ``conn`` with HTTP/2 ``status`` and no body, as a web server or a proxy with nothing
    routed there does (RFC 9113 framing; the status as an HPACK literal with the static table's ``:status`` name)."""
    conn.sendall(_frame(0x4, 0, 0))  # our SETTINGS (none)
    buf = b""
    while data := conn.recv(65536):
        buf += data
        if buf.startswith(_PREFACE):
            buf = buf[len(_PREFACE):]
        while len(buf) >= 9 and len(buf) >= 9 + (length := int.from_bytes(buf[:3], "big")):
            kind, flags, stream = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
            buf = buf[9 + length:]
            if kind == 0x4 and not flags & 0x1:  # the client's SETTINGS: acknowledged
                conn.sendall(_frame(0x4, 0x1, 0))
            elif kind == 0x1:  # a request's HEADERS: :status, END_HEADERS | END_STREAM
                conn.sendall(_frame(0x1, 0x5, stream, b"\x08" + bytes([len(str(status))]) + str(status).encode()))


@contextlib.contextmanager
def _http2_server(status: int) -> Iterator[int]:
    """A loopback HTTP/2 (h2c) server answering every request with ``status``; its port. What grpc meets at an
    address where a web server or a transparent proxy (one that accepts every connection) answers."""
    stop = threading.Event()
    conns: list[socket.socket] = []
    threads: list[threading.Thread] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(0.1)

        def serve() -> None:
            while not stop.is_set():
                try:
                    conn, _ = listener.accept()
                except (TimeoutError, socket.timeout):
                    continue
                conns.append(conn)
                threads.append(threading.Thread(target=_quiet, args=(conn, status), daemon=True))
                threads[-1].start()

        threads.append(threading.Thread(target=serve, daemon=True))
        threads[0].start()
        try:
            yield int(listener.getsockname()[1])
        finally:
            stop.set()
            for conn in conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            for thread in threads:
                thread.join(5)


def _quiet(conn: socket.socket, status: int) -> None:
    with contextlib.suppress(OSError):
        _answer_http2(conn, status)


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


def _line_and_form(address: str, tmp: Path) -> tuple[str, str]:
    """The one line ``bench --cluster address`` ends on, and what the address's form names."""
    p, elapsed = _timed_bench(address, tmp)
    return _one_line(p, elapsed), ("Ray Client" if address.startswith("ray://") else "a Ray head's GCS")


@pytest.mark.parametrize("form", ["ray://127.0.0.1:{port}", "127.0.0.1:{port}"])
def test_a_port_that_accepts_and_stays_silent_ends_on_one_line(mute: int, tmp_path: Path, form: str) -> None:
    """Ray Client gives up on such a port after its own ~30 s, a GCS address after ~20 s; the check asks for one
    second, and the terminal shows latencykit's line only, not Ray's warning."""
    address = form.format(port=mute)
    line, what = _line_and_form(address, tmp_path)
    assert line == (f"latencykit bench: --cluster {address}: host 127.0.0.1 port {mute} accepts connections "
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


@pytest.mark.parametrize("status", [404, 502])
@pytest.mark.parametrize("form", ["ray://127.0.0.1:{port}", "127.0.0.1:{port}"])
def test_an_http2_answer_is_not_taken_for_grpc(tmp_path: Path, form: str, status: int) -> None:
    """A web server or a proxy speaking HTTP/2 answers a gRPC call with an HTTP status, which grpc reports as a
    made-up gRPC code (404: UNIMPLEMENTED, 502: UNAVAILABLE): the line names the HTTP answer, not a gRPC server.
    (A transparent proxy that accepts every connection answered 404 so, by hand, from this machine.)"""
    with _http2_server(status) as port:
        address = form.format(port=port)
        line, what = _line_and_form(address, tmp_path)
    assert line == (f"latencykit bench: --cluster {address}: host 127.0.0.1 port {port} answers HTTP with status {status}, "
                    f"not gRPC as {what} does (a web server, or a proxy in the way?); "
                    "Ray Client listens on 10001, the head's GCS on 6379")  # fmt: skip


@pytest.mark.parametrize("status", [401, 403])
def test_an_http2_authentication_refusal_is_left_to_ray(status: int) -> None:
    """An authenticating layer may stand in front of a real cluster: the check lets it through, Ray says."""
    with _http2_server(status) as port:
        check_cluster(parse_cluster(f"ray://127.0.0.1:{port}"))
        check_cluster(parse_cluster(f"127.0.0.1:{port}"))
