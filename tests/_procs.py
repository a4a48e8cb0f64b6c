"""Processes an experiment started: found by the ``LATENCYKIT_EXPERIMENT`` mark in their environment."""

from __future__ import annotations

import os
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def marked() -> set[int]:
    """PIDs of live processes an experiment started (``LATENCYKIT_EXPERIMENT`` in their environment)."""
    out = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            env = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue
        if b"LATENCYKIT_EXPERIMENT=" in env and alive(int(name)):
            out.add(int(name))
    return out
