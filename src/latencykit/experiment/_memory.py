"""A server's process tree and its memory: resident set from ``/proc``, GPU memory through NVML.

The tree is the root, its descendants (by parent PID, so one that left the group still counts)
and every process in its process group; zombies are left out. Its resident set is the sum of
``/proc/<pid>/statm``'s resident pages per sample (Linux; ``None`` elsewhere), so shared pages
count once per process (an upper bound: vLLM's four processes share libraries). GPU memory is
read per device through NVML (``pynvml``, the ``gpu`` extra) when a GPU is there: the device's
used memory and the tree's own processes' share; without one, a note says why.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Optional, Sequence

__all__ = ["MemorySampler", "proc_stat", "tree_pids", "tree_rss"]

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def proc_stat(pid: int) -> Optional[tuple[int, int, str]]:
    """(ppid, pgid, state) of ``pid``; ``None`` if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = text[text.rfind(")") + 2 :].split()  # the name may hold spaces and parentheses
    return int(rest[1]), int(rest[2]), rest[0]


def _all_stats() -> dict[int, tuple[int, int, str]]:
    out = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    for name in names:
        if name.isdigit():
            st = proc_stat(int(name))
            if st is not None:
                out[int(name)] = st
    return out


def tree_pids(root: int, pgid: Optional[int] = None) -> list[int]:
    """Live (not zombie) processes of ``root``'s tree: itself, its descendants, and its process group."""
    stats = _all_stats()
    group = root if pgid is None else pgid
    mine = {p for p, (_, g, _) in stats.items() if g == group}
    mine.add(root)
    grew = True
    while grew:
        kids = {p for p, (pp, _, _) in stats.items() if pp in mine and p not in mine}
        mine |= kids
        grew = bool(kids)
    return sorted(p for p in mine if p in stats and stats[p][2] != "Z")


def marked_pids(var: str, value: str) -> list[int]:
    """Live (not zombie) processes whose environment holds ``var=value``: a server's descendants
    carry it even after they left its session and were re-parented (empty where /proc cannot tell)."""
    needle = f"{var}={value}".encode() + b"\0"
    out = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
        except OSError:  # gone, or another user's
            continue
        if (env.startswith(needle) or b"\0" + needle in env) and (st := proc_stat(int(name))) is not None and st[2] != "Z":
            out.append(int(name))
    return sorted(out)


def tree_rss(pids: Sequence[int]) -> Optional[int]:
    """Summed resident set of ``pids`` in bytes (``None`` where /proc cannot tell)."""
    total, seen = 0, False
    for pid in pids:
        try:
            resident = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        total += resident * _PAGE
        seen = True
    return total if seen else None


class _Gpu:
    """NVML, when ``pynvml`` imports and a GPU answers; otherwise ``note`` says why not."""

    def __init__(self) -> None:
        self.nvml: Any = None
        self.handles: list[Any] = []
        self.note = ""
        try:
            import pynvml  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            self.note = 'n/a (no pynvml: pip install "latencykit[gpu]")'
            return
        try:
            pynvml.nvmlInit()
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception as exc:  # no driver, no device
            self.note = f"n/a (NVML: {exc})"
            return
        self.nvml = pynvml
        if not self.handles:
            self.note = "n/a (no GPU)"

    def sample(self, pids: set[int]) -> list[tuple[int, Optional[int]]]:
        """Per device: (memory used on the device, memory used by ``pids``), bytes."""
        out: list[tuple[int, Optional[int]]] = []
        for h in self.handles:
            try:
                used = int(self.nvml.nvmlDeviceGetMemoryInfo(h).used)
                procs = self.nvml.nvmlDeviceGetComputeRunningProcesses(h)
                mine = sum(int(p.usedGpuMemory or 0) for p in procs if p.pid in pids)
                out.append((used, mine if any(p.pid in pids for p in procs) else None))
            except Exception:
                out.append((0, None))
        return out


class MemorySampler:
    """Samples a server's tree RSS (and GPU memory) on a thread; keeps the peaks."""

    def __init__(self, root: int, interval: float = 0.25) -> None:
        self.root = root
        self.interval = interval
        self.peak_rss: Optional[int] = None
        self.last_rss: Optional[int] = None
        self.max_processes = 0
        self.gpu = _Gpu()
        self.gpu_peak: list[dict[str, Optional[int]]] = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def sample(self) -> None:
        """One sample now."""
        pids = tree_pids(self.root)
        self.max_processes = max(self.max_processes, len(pids))
        rss = tree_rss(pids)
        if rss is not None:
            self.last_rss = rss
            self.peak_rss = rss if self.peak_rss is None else max(self.peak_rss, rss)
        if self.gpu.handles:
            for i, (used, mine) in enumerate(self.gpu.sample(set(pids))):
                if i >= len(self.gpu_peak):
                    self.gpu_peak.append({"device_used": None, "server": None})
                peak = self.gpu_peak[i]
                peak["device_used"] = max(peak["device_used"] or 0, used)
                if mine is not None:
                    peak["server"] = max(peak["server"] or 0, mine)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def start(self) -> "MemorySampler":
        """Sample now, then every ``interval`` seconds until `stop`."""
        self.sample()
        self._thread = threading.Thread(target=self._run, name="latencykit-memory", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling (one last sample first)."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=5)
        self._thread = None

    def gpu_text(self) -> str:
        """``"device 0: 1,234 MiB (server 1,100)"`` per device, or why not."""
        if not self.gpu.handles:
            return self.gpu.note
        parts = []
        for i, p in enumerate(self.gpu_peak):
            server = "" if p["server"] is None else f" (server {p['server'] / 2**20:,.0f})"
            parts.append(f"device {i}: {(p['device_used'] or 0) / 2**20:,.0f} MiB{server}")
        return "; ".join(parts) or "n/a"
