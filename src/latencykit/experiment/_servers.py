"""Servers an experiment starts: own process group, free port, readiness, and a sure stop.

A server is started with ``start_new_session=True``, so it leads its own process group and a
Ctrl-C in the terminal reaches only the experiment, which then stops it: SIGTERM to the group
(and to any descendant that left it), SIGKILL after ``grace`` seconds, then a check that the
group is empty and the port free. SIGINT and SIGTERM are deferred while a server is spawned
and registered, so an interrupt never lands between the two (`ServerRegistry`); the registry
writes the live servers to a state file and stops them all on the way out. Each server's
environment carries a mark of its own (``LATENCYKIT_SERVER``), which its descendants inherit:
one that left the group before the tree was read (spawned just as a Ctrl-C came) is found by it
and stopped too.

The process tree (root, descendants, process group) and its memory live in `_memory`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from ._memory import marked_pids, proc_stat, tree_pids

__all__ = ["ServerFailed", "ServerProcess", "ServerRegistry", "find_executable", "free_port", "port_free"]

HOST = "127.0.0.1"
_clock = time.perf_counter
_MARK = "LATENCYKIT_SERVER"
"""Set to a value unique to each started server in its environment, which its descendants inherit:
`ServerProcess.stop` finds by it any that left the process group before the tree was last read."""


def free_port(host: str = HOST) -> int:
    """A TCP port nothing listens on now (the kernel's pick)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_free(port: int, host: str = HOST) -> bool:
    """Whether nothing listens on ``port`` (a bind succeeds; connections in TIME_WAIT do not count)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def find_executable(argv0: str, env: Optional[dict[str, str]] = None, cwd: Optional[str] = None) -> Optional[str]:
    """The program ``argv0`` would run (searched on the server's own ``PATH``); ``None`` if not found."""
    if os.sep in argv0:
        path = Path(cwd or ".") / argv0
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(argv0, path=(env or os.environ).get("PATH"))


# -- one server -----------------------------------------------------------------------------------


class ServerFailed(Exception):
    """A server did not start, did not get ready, or died; carries its exit code and log tail."""

    def __init__(self, reason: str, exit_code: Optional[int] = None, log_tail: Sequence[str] = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.exit_code = exit_code
        self.log_tail = list(log_tail)


@dataclass
class ServerProcess:
    """One server command: started in its own process group, its output in ``log``."""

    argv: list[str]
    port: int
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    cwd: Optional[str] = None
    name: str = ""
    proc: Optional["subprocess.Popen[bytes]"] = None
    spawned_at: Optional[float] = None
    """``time.perf_counter()`` just before the spawn."""
    seen: set[int] = field(default_factory=set)
    """Every process seen in its tree, so one that left the group is still stopped."""
    mark: str = ""
    """The value of ``LATENCYKIT_SERVER`` in its environment (set by `start`)."""

    @property
    def pid(self) -> Optional[int]:
        """The server's own PID (= its process group)."""
        return None if self.proc is None else self.proc.pid

    def start(self) -> None:
        """Spawn (``FileNotFoundError``/``PermissionError`` as `ServerFailed`)."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.mark = f"{os.getpid()}.{id(self):x}.{time.time_ns()}"
        with self.log.open("wb") as out:
            self.spawned_at = _clock()
            try:
                self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             env={**os.environ, **self.env, _MARK: self.mark}, cwd=self.cwd,
                                             start_new_session=True)  # fmt: skip
            except OSError as exc:
                raise ServerFailed(f"cannot run {self.argv[0]!r}: {exc.strerror or exc}") from None

    def returncode(self) -> Optional[int]:
        """The exit code once it has exited, else ``None``."""
        return None if self.proc is None else self.proc.poll()

    def log_tail(self, n: int = 30) -> list[str]:
        """The last ``n`` lines of its output."""
        try:
            with self.log.open("rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 65536))
                data = f.read().decode("utf-8", "replace")
        except OSError:
            return []
        return data.splitlines()[-n:]

    def url(self, path: str = "") -> str:
        """``http://127.0.0.1:PORT`` + path."""
        return f"http://{HOST}:{self.port}{path}"

    def wait_ready(self, path: str, timeout: float) -> float:
        """Seconds from spawn until ``GET path`` answers 200; `ServerFailed` if it exits or times out."""
        assert self.proc is not None and self.spawned_at is not None
        deadline = self.spawned_at + timeout
        pause = 0.02
        while True:
            code = self.proc.poll()
            if code is not None:
                raise ServerFailed(f"exited with code {code} before it was ready", code, self.log_tail())
            try:
                with urllib.request.urlopen(self.url(path), timeout=2) as resp:  # noqa: S310 - our own server
                    if resp.status == 200:
                        return _clock() - self.spawned_at
            except (OSError, urllib.error.URLError, ValueError):
                pass
            self.note_tree()
            if _clock() > deadline:
                raise ServerFailed(f"not ready after {timeout:g} s (GET {path} never answered 200)", None, self.log_tail())
            time.sleep(pause)
            pause = min(pause * 1.5, 0.25)

    def note_tree(self) -> list[int]:
        """The live tree now (remembered for `stop`)."""
        if self.proc is None:
            return []
        pids = tree_pids(self.proc.pid)
        self.seen.update(pids)
        return pids

    def _alive(self) -> list[int]:
        """What is left of it now (`left`; where /proc cannot tell, the group's id while the group lives)."""
        assert self.proc is not None
        self.proc.poll()  # reap the leader, so a zombie does not count
        if os.path.isdir("/proc"):
            return self.left()
        try:
            os.killpg(self.proc.pid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [self.proc.pid]

    def _group_alive(self) -> bool:
        return bool(self._alive())

    def _marked(self) -> list[int]:
        """Its descendants found by their environment (those that left the group and the tree too)."""
        return marked_pids(_MARK, self.mark) if self.mark else []

    def _signal(self, sig: int) -> None:
        assert self.proc is not None
        self.seen.update(self._marked())
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)
        for pid in self.seen:  # descendants that started their own session
            st = proc_stat(pid)
            if st is not None and st[1] != self.proc.pid and st[2] != "Z":
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)

    def stop(self, grace: float = 10.0) -> dict[str, Any]:
        """SIGTERM the group, SIGKILL after ``grace`` s; how it ended, its exit code, and whether the port is free."""
        if self.proc is None:
            return {"how": "not started", "exit_code": None, "seconds": 0.0, "port_free": port_free(self.port)}
        t0 = _clock()
        self.note_tree()
        how = "exited"
        if self._group_alive():
            how = "SIGTERM"
            self._signal(signal.SIGTERM)
            signaled = set(self.seen)  # the tree read just before, and the marked: all sent SIGTERM
            alive = self._alive()
            deadline = t0 + grace
            while alive and _clock() < deadline:
                time.sleep(0.05)
                alive = self._alive()
                # One that appeared after the signal (spawned as it came, in a session of its own,
                # found by its mark): the same SIGTERM, once.
                for pid in set(alive) - signaled:
                    signaled.add(pid)
                    self.seen.add(pid)
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGTERM)
            if alive:
                how = "SIGKILL"
                self._signal(signal.SIGKILL)
                end = _clock() + 10
                while self._group_alive() and _clock() < end:
                    time.sleep(0.05)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        free = port_free(self.port)
        for _ in range(20):  # a socket can outlive its process by a moment
            if free:
                break
            time.sleep(0.1)
            free = port_free(self.port)
        return {"how": how, "exit_code": self.proc.returncode, "seconds": _clock() - t0, "port_free": free,
                "left": self.left()}  # fmt: skip

    def left(self) -> list[int]:
        """PIDs of its tree still alive (should be none after `stop`)."""
        if self.proc is None:
            return []
        alive = [p for p in tree_pids(self.proc.pid) if p != self.proc.pid or self.proc.poll() is None]
        alive += [p for p in self.seen if p not in alive and (st := proc_stat(p)) is not None and st[2] != "Z"]
        alive += [p for p in self._marked() if p != self.proc.pid]
        return sorted(set(alive))


# -- every server of a run ------------------------------------------------------------------------


_HELD = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """SIGINT/SIGTERM arriving inside the block are delivered when it ends (main thread only).

    Python-level handlers, not a blocked signal mask: a child spawned inside inherits the mask,
    and a server with SIGTERM blocked would ignore its stop.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[signal.Signals] = []

    def hold(signum: int, frame: Any) -> None:
        got.append(signal.Signals(signum))

    old = {sig: signal.signal(sig, hold) for sig in _HELD}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(got):
            signal.raise_signal(sig)


class ServerRegistry:
    """The live servers of one experiment, mirrored to a state file; `stop_all` on any way out."""

    def __init__(self, state_file: Optional[Path] = None, grace: float = 10.0) -> None:
        self.state_file = state_file
        self.grace = grace
        self.live: list[ServerProcess] = []
        self.started: list[dict[str, Any]] = []
        """Every server ever started (pid, port, name), for the run file and for checks."""

    def _write(self) -> None:
        if self.state_file is None:
            return
        data = {"live": [{"name": s.name, "pid": s.pid, "pgid": s.pid, "port": s.port, "argv": s.argv} for s in self.live],
                "started": self.started}  # fmt: skip
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(self.state_file)

    def start(self, server: ServerProcess) -> None:
        """Spawn ``server`` and register it, with no interrupt in between."""
        with _signals_deferred():
            server.start()
            self.live.append(server)
            self.started.append({"name": server.name, "pid": server.pid, "port": server.port})
            self._write()

    def stop(self, server: ServerProcess, grace: Optional[float] = None) -> dict[str, Any]:
        """Stop ``server`` (interrupts held until it is down) and unregister it."""
        with _signals_deferred():
            result = server.stop(self.grace if grace is None else grace)
            if server in self.live:
                self.live.remove(server)
            self._write()
        return result

    def stop_all(self) -> None:
        """Stop every live server (used on interrupt and at exit)."""
        for server in list(self.live):
            with contextlib.suppress(Exception):
                self.stop(server)
