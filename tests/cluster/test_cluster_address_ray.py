"""``--cluster`` addresses with Ray installed: ``auto`` and a head's ``HOST:PORT`` join a live cluster (the address
check lets it through and finds it as Ray does), and an address where something listens but no Ray answers ends
on latencykit's one line — Ray's own ``UserWarning`` kept out of the terminal unless ``--verbose``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
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


def test_a_port_that_is_not_ray_ends_on_one_line(mute: int, tmp_path: Path) -> None:
    """Ray Client gives up after its own ~30 s; the terminal shows latencykit's line only, not Ray's warning."""
    p = _bench(["--cluster", f"ray://127.0.0.1:{mute}", "--requests", "5", "--quiet", "--out", str(tmp_path / "r.json")], tmp_path)
    assert p.returncode == 2, p.stderr[-2000:]
    assert p.stderr.splitlines() == [f"latencykit bench: --cluster ray://127.0.0.1:{mute}: no Ray cluster answered "
                                     "(ray client connection timeout); --verbose shows Ray's own log lines"]  # fmt: skip
    assert not (tmp_path / "r.json").exists()
