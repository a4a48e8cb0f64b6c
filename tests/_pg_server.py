"""A throwaway PostgreSQL + pgvector on 127.0.0.1, for the pgvector store's tests and benchmark.

The binaries come from the ``pgserver`` wheel (PostgreSQL 16.2, pgvector 0.6.2; the test
extra installs it) or, with ``$LATENCYKIT_PG_BIN``, from any PostgreSQL ``bin/`` folder whose
installation has pgvector (used to test other versions by hand). The server is started here
with ``postgres`` itself (not ``pg_ctl``), so its PID is ours: `PgServer.stop` sends it
SIGINT (fast shutdown), waits, and checks that none of its processes is left. Its data
folder is a fresh temporary one, removed on stop. PostgreSQL refuses to run as root: as
root, the server runs as ``nobody`` (no user is created).
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

__all__ = ["PgServer", "pg_bin", "unavailable_reason"]


def pg_bin() -> Optional[Path]:
    """The ``bin/`` folder of a PostgreSQL with pgvector, or ``None``."""
    explicit = os.environ.get("LATENCYKIT_PG_BIN")
    if explicit:
        return Path(explicit)
    spec = importlib.util.find_spec("pgserver")  # located, not imported: its import has side effects
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


def unavailable_reason() -> Optional[str]:
    """Why no server can be started here, or ``None`` when one can."""
    for module in ("psycopg", "psycopg_pool", "pgvector"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install -e '.[test]')"
    bin_dir = pg_bin()
    if bin_dir is None:
        return "no PostgreSQL with pgvector: pip install pgserver (in the test extra), or set $LATENCYKIT_PG_BIN"
    for exe in ("initdb", "postgres"):
        if not os.access(bin_dir / exe, os.X_OK):
            return f"{bin_dir / exe} is not an executable"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pid: int) -> list[int]:
    """Every process below ``pid`` (read from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents[int(entry)] = ppid
    found, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        found += kids
        frontier += kids
    return found


def _open_to_others(path: Path) -> bool:
    """Whether a user other than the owner can reach ``path`` (every folder above it searchable)."""
    for p in [path, *path.parents]:
        try:
            if not os.stat(p).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


class PgServer:
    """One PostgreSQL server: initdb in a temporary folder, ``postgres`` on 127.0.0.1:``port``."""

    def __init__(self, settings: Sequence[str] = (), bin_dir: Optional[Path] = None) -> None:
        reason = unavailable_reason() if bin_dir is None else None
        if reason is not None:
            raise RuntimeError(reason)
        self.bin = bin_dir or pg_bin()
        assert self.bin is not None
        self.port = _free_port()
        self.user = "nobody" if os.geteuid() == 0 else None
        tmp = tempfile.gettempdir()
        if self.user is not None and not _open_to_others(Path(tmp)):
            tmp = "/tmp"
        self.dir = Path(tempfile.mkdtemp(prefix="latencykit-pg-", dir=tmp))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        if self.user is not None:
            if not _open_to_others(self.bin / "postgres"):
                # A checkout under /root: `nobody` cannot reach the wheel's binaries; a copy can.
                # PostgreSQL finds lib/ and share/ relative to bin/, and the wheel's bundled
                # libraries (pgserver.libs/) through the rpath $ORIGIN/../../../: copy that shape.
                install, package, site = self.bin.parent, self.bin.parent.parent, self.bin.parent.parent.parent
                copy = self.dir / "site" / package.name / install.name
                shutil.copytree(install, copy, symlinks=True)
                for libs in site.glob("pgserver*.libs"):
                    shutil.copytree(libs, self.dir / "site" / libs.name, symlinks=True)
                self.bin = copy / self.bin.name
            pw = pwd.getpwnam(self.user)
            os.chmod(self.dir, 0o755)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.started_in = 0.0
        t0 = time.perf_counter()
        try:
            subprocess.run(
                [str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C"],
                check=True, capture_output=True, user=self.user, cwd=self.dir, timeout=120,
            )  # fmt: skip
            args = [
                str(self.bin / "postgres"), "-D", str(self.data), "-h", "127.0.0.1", "-p", str(self.port),
                "-c", "unix_socket_directories=", "-c", "fsync=off", "-c", "full_page_writes=off",
                "-c", "synchronous_commit=off", "-c", "max_connections=60",
            ]  # fmt: skip
            for setting in settings:
                args += ["-c", setting]
            with open(self.log, "wb") as log:
                self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, user=self.user, cwd=self.dir, start_new_session=True)
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.started_in = time.perf_counter() - t0

    @property
    def dsn(self) -> str:
        """A libpq connection string for the ``postgres`` database."""
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres connect_timeout=10"

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + 60
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.proc.returncode}: {self.log.read_text(errors='replace')[-2000:]}")
            try:
                with psycopg.connect(self.dsn, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"postgres did not accept connections in 60 s: {self.log.read_text(errors='replace')[-2000:]}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        """Fast shutdown by PID; check no server process is left; remove the data folder."""
        proc, self.proc = self.proc, None
        try:
            if proc is not None and proc.poll() is None:
                kids = _children(proc.pid)
                proc.send_signal(signal.SIGINT)  # "fast" shutdown: roll back, disconnect, exit
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.send_signal(signal.SIGQUIT)  # immediate shutdown
                    proc.wait(timeout=10)
                deadline = time.monotonic() + 10
                while any(_alive(k) for k in kids) and time.monotonic() < deadline:
                    time.sleep(0.02)
                left = [k for k in kids if _alive(k)]
                if left:
                    raise RuntimeError(f"postgres processes left after stopping {proc.pid}: {left}")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "PgServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
