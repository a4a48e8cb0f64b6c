"""The Ray lane: real local Ray clusters (``--cluster local:2``) on 127.0.0.1.

Runs where Ray is installed (``pip install -e ".[test,ray]"``; `.ci/ray.sh` does it in a cached
venv). Elsewhere its tests skip with the reason, unless ``LK_RAY_REQUIRED=1`` (set by
`.ci/ray.sh`) turns the skip into a failure, so CI cannot pass by skipping.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Iterator

import pytest

HAVE_RAY = importlib.util.find_spec("ray") is not None
REQUIRED = os.environ.get("LK_RAY_REQUIRED") == "1"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if HAVE_RAY:
        return
    for item in items:
        if Path(str(item.fspath)).parent == Path(__file__).parent:
            if REQUIRED:
                item.add_marker(pytest.mark.xfail(reason="LK_RAY_REQUIRED=1 but ray is not installed", strict=True, run=False))
            else:
                item.add_marker(pytest.mark.skip(reason='the Ray lane (.ci/ray.sh) installs latencykit[ray]'))


def ray_processes() -> set[int]:
    """Live processes of a Ray cluster or of our local-cluster helper (zombies excluded)."""
    out = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ")
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and (b"ray::" in cmd or b"gcs_server" in cmd or b"/raylet" in cmd or b"latencykit.fleet._local_ray" in cmd
                             or b"ray/dashboard" in cmd or b"ray/autoscaler" in cmd or b"log_monitor.py" in cmd):
            out.add(int(name))
    return out


@pytest.fixture(scope="module")
def emulator_url() -> Iterator[str]:
    """An emulator process of its own (ideal timing with TTFT 400 ms: 10 ms/token, 30 tokens, no jitter, no prefill
    cost) on 127.0.0.1, so the server's timing is not disturbed by the driver's Ray threads; stopped by its PID."""
    import signal
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "latencykit", "bench", "emulator", "--port", str(port), "--ideal",
                             "--ttft", "0.4", "--tokens-per-chunk", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the emulator did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def no_ray_left() -> Iterator[None]:
    """Fails the test when a Ray process it started is still alive afterwards."""
    import time

    before = ray_processes()
    yield
    deadline = time.monotonic() + 10
    left = ray_processes() - before
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = ray_processes() - before
    assert not left, f"Ray processes left running: {sorted(left)}"
