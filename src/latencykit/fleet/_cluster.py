"""Where ``--cluster`` points: parsing the address, importing Ray, connecting, and the throw-away
local cluster of ``local:N``.

``local:N`` starts N Ray nodes on 127.0.0.1 in a helper process of its own session
(`latencykit.fleet._local_ray`): a terminal's Ctrl-C reaches the driver only, so the driver can
still collect what its workers measured, and the helper is stopped by its process id — its
standard input closed (it shuts Ray down), then SIGTERM and SIGKILL to its process group and to
every process it started, wherever they moved. If the driver itself is killed, the helper sees
its standard input close and shuts down on its own.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

__all__ = ["ClusterSpec", "LocalRayCluster", "auto_address", "check_cluster", "import_ray", "parse_cluster", "RAY_INSTALL"]

RAY_INSTALL = 'pip install "latencykit[ray]"'
_LOCAL = re.compile(r"local:(\d+)")
_HOSTPORT = re.compile(r"[A-Za-z0-9.\-\[\]:]+:\d{1,5}")
MAX_LOCAL_NODES = 16
CONNECT_TIMEOUT_S = 1.5
"""How long `check_cluster` waits for a TCP connection to the address (Ray Client itself waits 30 s, and Ray
was still retrying a head's GCS address that nothing served after 2 minutes)."""
PROBE_TIMEOUT_S = 1.0
"""How long `check_cluster` waits for the gRPC answer of what accepted the connection (Ray Client and a head's GCS
answer in milliseconds; a port that accepts and stays silent made Ray Client wait 30 s, a GCS address 20 s)."""
_PORTS_HINT = "Ray Client listens on 10001, the head's GCS on 6379"
_SERVICES = {
    "client": ("/ray.rpc.RayletDriver/ClusterInfo", "Ray Client"),
    "gcs": ("/ray.rpc.NodeInfoGcsService/GetAllNodeInfo", "a Ray head's GCS"),
}
"""What each address form must serve: one read-only method of its gRPC service (Ray 2.6 to 2.60 alike) and its name."""


@dataclass(frozen=True)
class ClusterSpec:
    """A parsed ``--cluster`` address: ``kind`` is ``local`` (``nodes`` set), ``auto``, ``client`` (``ray://``) or ``gcs``."""

    text: str
    kind: str
    nodes: int = 0

    @property
    def ray_address(self) -> Optional[str]:
        """What ``ray.init(address=...)`` gets (``None`` for ``local``: the helper says once it is up)."""
        return None if self.kind == "local" else self.text


def parse_cluster(text: str) -> ClusterSpec:
    """``local:N``, ``auto``, ``ray://HOST:PORT`` or a head's ``HOST:PORT``; ``ValueError`` names the forms."""
    t = (text or "").strip()
    m = _LOCAL.fullmatch(t)
    if m:
        n = int(m.group(1))
        if not 1 <= n <= MAX_LOCAL_NODES:
            raise ValueError(f"--cluster local:N takes 1 to {MAX_LOCAL_NODES} nodes; got {text!r}")
        return ClusterSpec(t, "local", n)
    if t == "auto":
        return ClusterSpec(t, "auto")
    client = t.startswith("ray://")
    bare = t[len("ray://"):] if client else t
    if _HOSTPORT.fullmatch(bare):
        _check_port(int(bare.rpartition(":")[2]), f"--cluster {text}")
        return ClusterSpec(t, "client" if client else "gcs")
    raise ValueError(f"--cluster takes local:N (a throw-away cluster of N nodes on this machine), auto (the cluster this "
                     f"machine belongs to), ray://HOST:10001 (Ray Client) or HOST:PORT (a head's GCS); got {text!r}")  # fmt: skip


def _check_port(port: int, what: str) -> None:
    """``ValueError`` for a port no TCP connection can name (the resolver would wrap 99999 round to 34463)."""
    if not 1 <= port <= 65535:
        raise ValueError(f"{what}: port {port} is not a TCP port (1 to 65535; {_PORTS_HINT})")


def ray_temp_dir() -> Path:
    """Ray's temporary folder, as Ray finds it: ``$RAY_TMPDIR``, else ``$TMPDIR`` (Linux), else /tmp; then ``ray``."""
    base = os.environ.get("RAY_TMPDIR") or (os.environ.get("TMPDIR") if sys.platform.startswith("linux") else None) or "/tmp"
    return Path(base) / "ray"


def _raylet_gcs_addresses() -> Optional[list[str]]:
    """The GCS addresses that the raylets running here were started with (``--gcs-address=``), as Ray's ``auto``
    looks for them; ``None`` where there is no ``/proc`` to look in."""
    if not os.path.isdir("/proc"):
        return None
    found: list[str] = []
    for entry in os.listdir("/proc"):
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace").split("\0") if entry.isdigit() else []
        except OSError:
            continue
        if argv and "raylet" in os.path.basename(argv[0]):
            for arg in (a for part in argv for a in part.split(" ")):
                value = arg.partition("=")[2] if arg.startswith("--gcs-address=") else ""
                if value not in ("", "None") and value not in found:
                    found.append(value)
    return found


def auto_address() -> tuple[Optional[str], str]:
    """The address Ray's ``auto`` joins and where it was found, looked up as Ray 2.x does but without Ray:
    ``$RAY_ADDRESS``; else the one raylet running here; else ``ray_current_cluster`` in Ray's temporary folder
    (written by ``ray start``); else any raylet here. ``(None, what was looked at)`` when there is none."""
    env = os.environ.get("RAY_ADDRESS", "")
    if env and env != "auto":
        return env, "from RAY_ADDRESS"
    raylets = _raylet_gcs_addresses()
    current = ray_temp_dir() / "ray_current_cluster"
    try:
        written = current.read_text().strip() or None
    except OSError:
        written = None
    if raylets and (len(raylets) == 1 or written is None):
        return raylets[0], "the raylet running here"
    if written is not None:
        return written, f"from {current}"
    return None, f"RAY_ADDRESS is not set, no raylet runs here and {current} does not exist"


def _host_port(address: str) -> Optional[tuple[str, int]]:
    text = address[len("ray://"):] if address.startswith("ray://") else address
    if not _HOSTPORT.fullmatch(text):
        return None
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def check_cluster(spec: ClusterSpec, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """``ValueError`` (one line naming the host and port) unless something accepts a TCP connection at the
    cluster's address within ``timeout`` seconds and, where Ray is installed, answers as the address's form says
    (Ray Client for ``ray://``, a head's GCS for ``HOST:PORT``: `_not_ray`, at most `PROBE_TIMEOUT_S` more); for
    ``auto``, also when no cluster can be found. A wrong address is said in a second or two, before Ray's own
    connection timeouts (20-30 s) and warnings. ``local:N`` and an address that is not HOST:PORT (Ray then says
    what is wrong with it) pass."""
    source = ""
    address = spec.ray_address
    if spec.kind == "auto":
        address, source = auto_address()
        if address is None:
            raise ValueError(f"--cluster auto: no Ray cluster found on this machine ({source}); start one "
                             "(ray start --head) or give its address: ray://HOST:10001 or HOST:PORT")  # fmt: skip
        source = f" ({address}, {source})"
    where = _host_port(address) if address is not None else None
    if where is None:
        return
    host, port = where
    _check_port(port, f"--cluster {spec.text}{source}")
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except ConnectionRefusedError:
        why = "connection refused"
    except (socket.timeout, TimeoutError):
        why = f"no answer within {timeout:g} s"
    except socket.gaierror:
        why = "no such host"
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
    else:
        assert address is not None
        wrong = _not_ray("client" if address.startswith("ray://") else "gcs", address, host, port, PROBE_TIMEOUT_S)
        if wrong is None:
            return
        raise ValueError(f"--cluster {spec.text}{source}: {wrong}")
    raise ValueError(f"--cluster {spec.text}{source}: nothing answers at host {host} port {port} ({why}); is the Ray head "
                     f"up, and is it the right port ({_PORTS_HINT})?")  # fmt: skip


_HTTP_ANSWER = re.compile(r"http2 header with status:? (\d{3})\b")
"""How grpc says the peer answered HTTP/2 with a status other than 200 (a web server, a proxy): it then makes
up a status code from the HTTP one (404 → UNIMPLEMENTED, 502/503/504 → UNAVAILABLE, ...), which must not be
read as a gRPC server's own answer."""
_MAY_BE_AUTH = frozenset({401, 403, 407})
"""HTTP answers that may come from an authenticating layer in front of a real cluster: Ray is left to say."""


def _grpc_status(grpc: Any, target: str, method: str, timeout: float) -> tuple[str, Optional[int]]:
    """The status code's name of one empty call of ``method`` at ``target`` (``"OK"`` if it answered), and the
    HTTP status where the peer answered HTTP/2 instead of gRPC (``None`` where it spoke gRPC or not HTTP/2)."""
    with grpc.insecure_channel(target, options=[("grpc.enable_http_proxy", 0)]) as channel:  # straight there, as the TCP check
        try:
            channel.unary_unary(method)(b"", timeout=timeout)  # bytes in, bytes out: no Ray message types needed
        except grpc.RpcError as exc:
            http = _HTTP_ANSWER.search(str(exc.details() or ""))
            return str(exc.code().name), int(http.group(1)) if http else None
    return "OK", None


def _not_ray(kind: str, address: str, host: str, port: int, timeout: float) -> Optional[str]:
    """Why what accepted the connection at ``address`` is not what its form names (``kind``: ``client`` for
    ``ray://``, ``gcs``), asked over gRPC as Ray would; ``None`` when it is, or when that cannot be asked here.

    Ray Client and a head's GCS are both gRPC servers: one read-only call of the expected service tells them
    apart from an HTTP server (the dashboard, 8265), a port that accepts and stays silent, and from each other.
    An HTTP/2 answer that is not gRPC (a web server's or a proxy's 404 or 502, which grpc reports as made-up
    gRPC codes) is named as such. Any other answer but "no such method" (an error, an authentication refusal,
    also one made in HTTP: 401, 403, 407) means the service may be there, and Ray decides. Needs ``grpcio``,
    which Ray installs (without it ``--cluster`` cannot run anyway); a cluster on TLS (``RAY_USE_TLS``) is not asked.
    """
    if os.environ.get("RAY_USE_TLS", "0").strip().lower() in ("1", "true", "yes"):
        return None
    import importlib

    try:
        grpc = importlib.import_module("grpc")  # installed with Ray; optional, untyped for mypy
    except ImportError:
        return None
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    method, name = _SERVICES[kind]
    try:
        status, http = _grpc_status(grpc, target, method, timeout)
    except Exception:  # a target grpc cannot take, a grpcio that behaves otherwise: Ray will say
        return None
    if http is not None:
        if http in _MAY_BE_AUTH:
            return None
        return (f"host {host} port {port} answers HTTP with status {http}, not gRPC as {name} does (a web server, or a "
                f"proxy in the way?); {_PORTS_HINT}")  # fmt: skip
    if status == "DEADLINE_EXCEEDED":
        return (f"host {host} port {port} accepts connections but gives no answer (none within {timeout:g} s), so it is "
                f"not {name}; is it the right port ({_PORTS_HINT})?")  # fmt: skip
    if status == "UNAVAILABLE":
        return (f"host {host} port {port} answers, but not over gRPC as {name} does (an HTTP server, such as Ray's "
                f"dashboard on 8265?); {_PORTS_HINT}")  # fmt: skip
    if status != "UNIMPLEMENTED":
        return None
    bare = address[len("ray://"):] if address.startswith("ray://") else address
    other = "gcs" if kind == "client" else "client"
    try:
        there, there_http = _grpc_status(grpc, target, _SERVICES[other][0], timeout)
    except Exception:
        there, there_http = "", None  # could not ask
    if there_http is None and there not in ("", "UNIMPLEMENTED", "UNAVAILABLE", "DEADLINE_EXCEEDED"):
        fix = f"--cluster {bare} (without ray://)" if other == "gcs" else f"--cluster ray://{bare}"
        return f"port {port} at host {host} is {_SERVICES[other][1]}, not {name}: give it as {fix}"
    return f"host {host} port {port} speaks gRPC, but is neither Ray Client nor a Ray head's GCS; {_PORTS_HINT}"


def import_ray() -> Any:
    """``ray``, or ``ImportError`` saying which install command is missing."""
    import importlib

    try:
        ray = importlib.import_module("ray")  # optional, untyped for mypy whether installed or not
    except ImportError:
        raise ImportError(f"--cluster places the load on Ray, which is not installed here: {RAY_INSTALL}") from None
    return ray


def ray_env() -> dict[str, str]:
    """Environment for Ray processes on a local cluster: loopback only, no usage reporting."""
    return {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and fields[0] != "Z":
            out.setdefault(int(fields[1]), []).append(int(entry))
    return out


def descendants(pid: int) -> list[int]:
    """Every living process below ``pid`` (Linux ``/proc``; empty elsewhere)."""
    tree, out, todo = _children(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True


class LocalRayCluster:
    """N Ray nodes on 127.0.0.1 for one run, in a helper process of their own session; stop with `stop`."""

    def __init__(self, nodes: int, cpus_per_node: Optional[int] = None) -> None:
        self.nodes = nodes
        self.cpus_per_node = cpus_per_node or max(1, (os.cpu_count() or 1) // nodes)
        self.address: Optional[str] = None
        self.proc: Optional[subprocess.Popen[str]] = None
        self.log_path: Optional[Path] = None
        self.started_s: Optional[float] = None
        self._tree: set[int] = set()

    def start(self, timeout: float = 180.0) -> "LocalRayCluster":
        """Start the nodes; ``RuntimeError`` with the helper's log tail when they do not come up."""
        fd, name = tempfile.mkstemp(prefix="latencykit-ray-", suffix=".log")
        self.log_path = Path(name)
        t0 = time.perf_counter()
        with os.fdopen(fd, "w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "latencykit.fleet._local_ray", str(self.nodes), str(self.cpus_per_node)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True,
                env={**os.environ, **ray_env()},
            )  # fmt: skip
        found: list[dict[str, Any]] = []
        ended = threading.Event()

        def read() -> None:  # the first line that is the helper's JSON (Ray may print before it)
            out = self.proc.stdout if self.proc is not None else None
            try:
                for text in iter(out.readline, "") if out is not None else ():
                    try:
                        info = json.loads(text)
                    except ValueError:
                        continue
                    if isinstance(info, dict) and "address" in info and not found:
                        found.append(info)
                        ended.set()  # and keep draining, so the helper never blocks on a full pipe
            except (OSError, ValueError):  # `stop` closed the pipe under us
                pass
            ended.set()

        threading.Thread(target=read, daemon=True).start()
        try:
            ended.wait(timeout)
        except BaseException:  # Ctrl-C while the nodes start: they are stopped, never left behind
            self.stop()
            raise
        info = found[0] if found else None
        if info is None:
            why = "exited" if self.proc is None or self.proc.poll() is not None else "did not come up"
            tail = self.log_tail()
            self.stop()
            raise RuntimeError(f"the local Ray cluster ({self.nodes} nodes) {why} within {timeout:.0f} s; its log ends:\n{tail}")
        self.address = str(info["address"])
        self.started_s = time.perf_counter() - t0
        self.remember()
        return self

    def remember(self) -> None:
        """Note every process the helper has started so far (they are stopped by these ids)."""
        if self.proc is not None:
            self._tree.update(descendants(self.proc.pid))

    def log_tail(self, lines: int = 15) -> str:
        """The helper's log, last lines."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:]) if self.log_path else ""
        except OSError:
            return ""

    def stop(self, grace: float = 20.0) -> None:
        """Stop every process of the cluster: a clean Ray shutdown first, then signals by process id."""
        proc = self.proc
        if proc is None:
            return
        self.remember()
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            self._signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                self._signal_group(proc.pid, signal.SIGKILL)
                proc.wait(5)
        self._signal_group(proc.pid, signal.SIGKILL)  # anything left in its group
        deadline = time.monotonic() + 5
        left = [p for p in self._tree if _alive(p)]
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = [p for p in left if _alive(p)]
        if proc.stdout is not None:
            proc.stdout.close()
        self.proc = None
        if self.log_path is not None:
            try:
                self.log_path.unlink()
            except OSError:
                pass

    @staticmethod
    def _signal_group(pgid: int, sig: int) -> None:
        try:
            os.killpg(pgid, sig)
        except OSError:
            pass

    @property
    def pids(self) -> list[int]:
        """The helper and every process it started (as last seen)."""
        return ([self.proc.pid] if self.proc is not None else []) + sorted(self._tree)
