"""Which run files belong together: `BenchRun.merge` adds only runs of the same traffic, target,
model and server timing, and cells of the same strategy, labels and load.

Runs from several workers or machines that ran side by side merge exactly (sketches add); runs
that measured different things would make one meaningless cell, so they are refused with the
differences named, unless forced (the merged run then says so). Seeds, request counts, hosts
and ports may differ.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

__all__ = ["RUN_FIELDS", "run_differences", "load_differences", "overlap_note"]

RUN_FIELDS: tuple[tuple[str, str], ...] = (
    ("traffic", "traffic"),
    ("documents", "shared documents"),
    ("target.kind", "target"),
    ("target.api", "API"),
    ("target.model", "model"),
    ("target.exact_output", "exact output"),
    ("emulator_timing", "emulator timing"),
)
"""Run-file ``config`` fields that must agree (dotted paths), and what a message calls them."""

_LOAD_IGNORED = ("warmup", "ramp")


def _get(config: dict[str, Any], path: str) -> Any:
    value: Any = config
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={v}" for k, v in sorted(value.items())) + "}"
    return "none" if value is None else str(value)


def run_differences(base: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """What makes two runs' ``config`` incompatible: ``["traffic chat vs shared-prefix", ...]``."""
    out = []
    for path, name in RUN_FIELDS:
        a, b = _get(base, path), _get(other, path)
        if path == "documents" and "shared-prefix" not in (base.get("traffic"), other.get("traffic")):
            continue
        if a != b:
            if isinstance(a, dict) and isinstance(b, dict):
                keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
                out.append(f"{name} " + ", ".join(f"{k} {_show(a.get(k))} vs {_show(b.get(k))}" for k in keys))
            else:
                out.append(f"{name} {_show(a)} vs {_show(b)}")
    return out


def load_differences(base: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """How two cells' load levels differ beyond their key (duration, arrivals, burstiness ...)."""
    keys = sorted((set(base) | set(other)) - set(_LOAD_IGNORED))
    return [f"{k} {_show(base.get(k))} vs {_show(other.get(k))}" for k in keys if base.get(k) != other.get(k)]


def overlap_note(windows: Sequence[Sequence[Optional[float]]]) -> Optional[str]:
    """A note when merged parts (wall-clock windows) did not all run at the same time, or ``None``."""
    spans = [(a, b) for a, b in windows if a is not None and b is not None]
    if len(spans) < 2:
        return None
    latest_start = max(a for a, _ in spans)
    earliest_end = min(b for _, b in spans)
    if latest_start < earliest_end:
        return None
    return (f"the {len(spans)} merged runs did not all run at the same time (no instant in common); their rates "
            "are added as if they had")  # fmt: skip
