"""Traffic, demo and benchmark commands (the ``bench`` extra: emulator, rich, OTel SDK).

Owns the traffic shapes, the load runner, run files (the model: ``_cell``, ``_run``) and their
views (``_report``, ``_html``, ``_compare``), the demo, server-strategy experiments
(``experiment``: ``_expfile``, ``_servers``, ``_quality``, ``_claims``, ``_experiment``, ``_exp_*``),
and the Ray placement of the workers (``--cluster``: ``_cluster``, ``_local_ray``, ``_clock``,
``_fleet``, ``_ray_worker``; Ray imported only there, lazily).

Layer: below the CLI only. May import every other layer; nothing in the library imports it.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BenchConfig", "BenchRun", "Cell", "ExperimentFileError", "ExperimentRun", "GateResult", "demo_comparison",
    "experiment", "gate_runs", "generate", "load_experiment", "load_replay", "run_bench",
]  # fmt: skip

_LAZY = {
    "BenchConfig": "._run", "run_bench": "._run", "BenchRun": "._cell", "Cell": "._cell",
    "GateResult": "._compare", "gate_runs": "._compare",
    "demo_comparison": "._strategies", "generate": "._traffic", "load_replay": "._traffic",
    "experiment": "..experiment._experiment", "ExperimentRun": "..experiment._run",
    "load_experiment": "..experiment._file", "ExperimentFileError": "..experiment._file",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    """Lazy public names, so ``import latencykit.bench.demo`` stays light."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
