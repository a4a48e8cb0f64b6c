"""The `latencykit` command as a user runs it: one-line errors and exit codes, --version, defaults in --help."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import pytest

import latencykit as lk
from latencykit.cli import main

CLI = [sys.executable, "-m", "latencykit.cli"]


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


def _one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_version() -> None:
    """`latencykit --version` prints the package version and exits 0."""
    result = _run("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"latencykit {lk.__version__}"


def test_help_shows_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    """`latencykit emulator --help` shows each option's default, the timing ones from TimingModel."""
    from latencykit.emulator import TimingModel

    def help_of(command: str) -> str:
        with pytest.raises(SystemExit) as info:
            main([command, "--help"])
        assert info.value.code == 0
        return " ".join(capsys.readouterr().out.split())  # argparse wraps lines

    out, defaults = help_of("emulator"), TimingModel()
    for text in ("(default: 127.0.0.1)", "(default: 8000)", "(default: 1.0)", f"(default: {defaults.base_ttft})",
                 f"(default: {defaults.decode_per_token})", f"(default: {defaults.output_tokens})"):  # fmt: skip
        assert text in out, text
    demo = help_of("demo")
    assert "(default: 2)" in demo and "(default: 8)" in demo


def test_port_in_use_is_one_line() -> None:
    """A port held by another socket: one line naming the address, exit 1, no traceback."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = _run("emulator", "--port", str(port))
    line = _one_line(result.stderr)
    assert result.returncode == 1
    assert line == f"latencykit: cannot listen on 127.0.0.1:{port}: Address already in use"


def test_bad_host_is_one_line() -> None:
    """A host that does not resolve: one line naming it, exit 1."""
    result = _run("emulator", "--host", "no-such-host.invalid", "--port", "0")
    line = _one_line(result.stderr)
    assert result.returncode == 1 and line.startswith("latencykit: cannot listen on no-such-host.invalid:0: ")


def test_bad_option_value_names_it() -> None:
    """An option value argparse rejects: usage + one error line naming the value, exit 2."""
    result = _run("emulator", "--time-scale", "fast")
    assert result.returncode == 2 and "Traceback" not in result.stderr and "'fast'" in result.stderr


@pytest.mark.parametrize("command", [["emulator", "--port", "0", "--time-scale", "0"], ["demo"]])
def test_ctrl_c_exits_130_with_one_line(command: list[str]) -> None:
    """SIGINT while serving or while the demo runs: `latencykit: interrupted`, exit 130."""
    proc = subprocess.Popen([*CLI, *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # printed once the embedded or served emulator is up
        assert "http://127.0.0.1:" in first, first
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130
    assert _one_line(err) == "latencykit: interrupted"
