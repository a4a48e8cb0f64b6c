"""A server's descendant that leaves its process group just as the stop comes is still stopped."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

from _procs import alive

from latencykit.experiment._memory import marked_pids
from latencykit.experiment._servers import ServerProcess, free_port

# A "server" that, on SIGTERM, starts a child in a session of its own and only then exits: the
# child is in neither the group nor the tree the stop read before signalling.
ESCAPES_ON_TERM = r"""
import signal, subprocess, sys, time
def term(*_):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    print("escaped", child.pid, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
print("ready", flush=True)
time.sleep(300)
"""


def test_a_child_spawned_on_sigterm_in_its_own_session_is_stopped(tmp_path: Path) -> None:
    server = ServerProcess([sys.executable, "-c", ESCAPES_ON_TERM], free_port(), tmp_path / "server.log")
    server.start()
    try:
        deadline = time.monotonic() + 30
        while "ready" not in server.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.02)
        result = server.stop(grace=20)
        [escaped] = [int(line.split()[1]) for line in server.log.read_text().splitlines() if line.startswith("escaped")]
        assert not alive(escaped), "the escaped child was left running"
        assert result["left"] == [] and result["how"] == "SIGTERM"
        assert result["seconds"] < 10  # found by its mark and sent SIGTERM at once, not after the 20 s grace
        assert marked_pids("LATENCYKIT_SERVER", server.mark) == []
    finally:  # whatever failed above, nothing of it outlives the test
        for pid in marked_pids("LATENCYKIT_SERVER", server.mark):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
