"""``--cluster`` address check, without Ray: a dead ``ray://HOST:PORT``, ``HOST:PORT`` or ``auto`` is one line naming
the host and port, said before Ray is imported (Ray Client itself waits 30 s and prints its own warning first).

The Ray lane (tests/cluster/test_cluster_address_ray.py) checks the same against a real cluster and Ray installed."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from latencykit.bench import BenchConfig, run_bench
from latencykit.fleet._cluster import _raylet_gcs_addresses, auto_address, check_cluster, parse_cluster
from latencykit.commands._bench import main as bench_main
from latencykit.emulator._flags import IDEAL_TIMING

FAST = {**IDEAL_TIMING.__dict__, "time_scale": 0.1, "output_tokens": 8}


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def listening() -> Iterator[int]:
    """A loopback port that accepts connections."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield int(s.getsockname()[1])


@pytest.fixture
def silent() -> Iterator[int]:
    """A loopback port whose accept queue is full: a new connection gets no answer (Linux drops its SYN)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    port = int(srv.getsockname()[1])
    queued = socket.create_connection(("127.0.0.1", port), timeout=2)  # fills the queue of one
    try:
        yield port
    finally:
        queued.close()
        srv.close()


@pytest.fixture
def no_ray_here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No RAY_ADDRESS, Ray's temporary folder empty (RAY_TMPDIR), and `ray` not importable; returns that folder."""
    if _raylet_gcs_addresses():
        pytest.skip("a Ray node runs on this machine: `auto` would find it")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed: the check must not need it
    monkeypatch.setitem(sys.modules, "grpc", None)  # (nor grpcio, which comes with Ray)
    return tmp_path / "ray"


@pytest.mark.parametrize("form", ["ray://127.0.0.1:{port}", "127.0.0.1:{port}"])
def test_nothing_listening_is_one_line_naming_host_and_port(form: str, no_ray_here: Path) -> None:
    port = _closed_port()
    text = form.format(port=port)
    with pytest.raises(ValueError) as err:
        check_cluster(parse_cluster(text))
    msg = str(err.value)
    assert msg.startswith(f"--cluster {text}: nothing answers at host 127.0.0.1 port {port} (connection refused)")
    assert "\n" not in msg and "10001" in msg  # and the usual ports, as a hint


def test_no_answer_within_the_timeout(silent: int) -> None:
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=rf"host 127\.0\.0\.1 port {silent} \(no answer within 0\.3 s\)"):
        check_cluster(parse_cluster(f"ray://127.0.0.1:{silent}"), timeout=0.3)
    assert time.perf_counter() - t0 < 5  # bounded by the timeout, not Ray's 30 s


def test_an_unknown_host_is_named() -> None:
    with pytest.raises(ValueError, match=r"host no-such-head\.invalid port 10001 \(no such host\)"):
        check_cluster(parse_cluster("ray://no-such-head.invalid:10001"))


def test_a_listening_address_passes_without_ray(listening: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without Ray (and its grpcio) only the TCP connection is checked: what answers there is asked over gRPC only
    where Ray is installed (the Ray lane: tests/cluster/test_cluster_address_ray.py), and ``--cluster`` then stops
    at the missing Ray anyway."""
    monkeypatch.setitem(sys.modules, "grpc", None)
    check_cluster(parse_cluster(f"ray://127.0.0.1:{listening}"))
    check_cluster(parse_cluster(f"127.0.0.1:{listening}"))
    check_cluster(parse_cluster("local:2"))  # started here: nothing to check


def test_auto_without_a_cluster_says_where_it_looked(no_ray_here: Path) -> None:
    assert auto_address() == (None, f"RAY_ADDRESS is not set, no raylet runs here and {no_ray_here / 'ray_current_cluster'} does not exist")
    with pytest.raises(ValueError) as err:
        check_cluster(parse_cluster("auto"))
    msg = str(err.value)
    assert msg.startswith("--cluster auto: no Ray cluster found on this machine (RAY_ADDRESS is not set,")
    assert "ray start --head" in msg and "\n" not in msg


def test_auto_checks_the_address_it_finds(no_ray_here: Path, monkeypatch: pytest.MonkeyPatch, listening: int) -> None:
    # `ray start` leaves the head's address in <temp>/ray/ray_current_cluster; a stopped cluster's stays behind
    port = _closed_port()
    no_ray_here.mkdir()
    (no_ray_here / "ray_current_cluster").write_text(f"127.0.0.1:{port}\n")
    with pytest.raises(ValueError, match=rf"^--cluster auto \(127\.0\.0\.1:{port}, from {no_ray_here}/ray_current_cluster\): "
                                         rf"nothing answers at host 127\.0\.0\.1 port {port} \(connection refused\)"):  # fmt: skip
        check_cluster(parse_cluster("auto"))
    # RAY_ADDRESS comes first, as in Ray
    monkeypatch.setenv("RAY_ADDRESS", f"ray://127.0.0.1:{listening}")
    assert auto_address() == (f"ray://127.0.0.1:{listening}", "from RAY_ADDRESS")
    check_cluster(parse_cluster("auto"))
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    with pytest.raises(ValueError, match=rf"\(127\.0\.0\.1:{port}, from RAY_ADDRESS\): nothing answers at host 127\.0\.0\.1 port {port}"):
        check_cluster(parse_cluster("auto"))


@pytest.mark.parametrize("port", [0, 65536, 99999])
def test_a_port_out_of_range_is_named_not_wrapped(port: int, no_ray_here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """99999 is no port: the resolver would wrap it round to 34463 and the check would report what answers
    there (or "connection refused" for a port nobody named). Given, and found in RAY_ADDRESS, alike."""
    hint = "(1 to 65535; Ray Client listens on 10001, the head's GCS on 6379)"
    for text in (f"ray://127.0.0.1:{port}", f"127.0.0.1:{port}"):
        with pytest.raises(ValueError) as err:
            parse_cluster(text)
        assert str(err.value) == f"--cluster {text}: port {port} is not a TCP port {hint}"
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    with pytest.raises(ValueError) as err:
        check_cluster(parse_cluster("auto"))
    assert str(err.value) == f"--cluster auto (127.0.0.1:{port}, from RAY_ADDRESS): port {port} is not a TCP port {hint}"
    parse_cluster("127.0.0.1:65535")  # the last port is one


def test_cli_exits_2_with_one_line_before_anything_starts(no_ray_here: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    port = _closed_port()
    for address in (f"ray://127.0.0.1:{port}", "auto"):
        rc = bench_main(["--cluster", address, "--requests", "5", "--quiet", "--out", str(tmp_path / "r.json")])
        err = capsys.readouterr().err
        assert rc == 2, err
        assert len(err.splitlines()) == 1 and err.startswith(f"latencykit bench: --cluster {address}")
        assert "pip install" not in err  # said before Ray is looked for
    assert not (tmp_path / "r.json").exists()


def test_library_run_checks_the_address_first(no_ray_here: Path) -> None:
    port = _closed_port()
    config = BenchConfig(requests=4, concurrency=(2,), timing=FAST, exact_output=False)
    with pytest.raises(ValueError, match=rf"nothing answers at host 127\.0\.0\.1 port {port}"):
        run_bench(config, cluster=f"127.0.0.1:{port}")


def test_the_command_ends_in_seconds_with_one_line(tmp_path: Path) -> None:
    """The whole command, as a user runs it: exit 2 and one line on stderr (~0.6 s here; Ray Client waits 30 s)."""
    port = _closed_port()
    env: dict[str, Any] = {"PATH": "/usr/bin:/bin", "RAY_TMPDIR": str(tmp_path)}
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "latencykit", "bench", "--cluster", f"ray://127.0.0.1:{port}", "--requests", "5",
                        "--quiet", "--out", str(tmp_path / "r.json")], capture_output=True, text=True, timeout=60, env=env)  # fmt: skip
    elapsed = time.perf_counter() - t0
    assert p.returncode == 2, p.stderr
    assert p.stderr.splitlines() == [f"latencykit bench: --cluster ray://127.0.0.1:{port}: nothing answers at host 127.0.0.1 "
                                     f"port {port} (connection refused); is the Ray head up, and is it the right port "
                                     "(Ray Client listens on 10001, the head's GCS on 6379)?"]  # fmt: skip
    assert elapsed < 15, f"{elapsed:.1f} s"  # far from Ray Client's 30 s timeout (a loose bound: shared CI cores)
