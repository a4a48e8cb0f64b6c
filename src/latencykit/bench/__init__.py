"""The benchmark: traffic, targets, the load runner, run files, compare and merge (the ``bench`` extra).

```python
from latencykit.bench import BenchConfig, BenchRun, run_bench

run = run_bench(BenchConfig(requests=200, concurrency=(8, 32)))   # against the embedded emulator
run.save("run.json"); run.report()                                 # a run file; its terminal report
```

What this package owns: the traffic shapes and their text (``_traffic``, ``_text``), conversations
(``_sessions``), public traces (``_traces``), the search for the highest rate meeting SLOs (``_search``), targets and
the clients that send (``_targets``, ``_clients``), the load runner (``_config``, ``_load``,
``_workers``, ``_run``; on a Ray cluster ``_ray_worker``: the job the fleet's workers run), the run
model and run files (``_cell``: `Cell`, `BenchRun`), compare and the CI gate (``_compare``),
merge (``_merge``), rates, statistics and warnings (``_rates``, ``_stats``, ``_diagnose``), the
registry through which a run finds its views (``_views``) and the demo's strategy comparison
(``_strategies``). It may import the fleet, the providers, the emulator, telemetry and the core;
never the experiment, the reports or the commands (docs/architecture.md).

`experiment`, `ExperimentRun`, `load_experiment` and `ExperimentFileError` live in
`latencykit.experiment`; they are still found here, by name on first use, for code written
before the package split (nothing in the library imports them from here).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BenchConfig", "BenchRun", "Cell", "ExperimentFileError", "ExperimentRun", "GateResult", "demo_comparison",
    "experiment", "find_max_rate", "gate_runs", "generate", "generate_sessions", "load_experiment", "load_replay", "load_trace",
    "parse_think", "run_bench",
]  # fmt: skip

_LAZY = {
    "BenchConfig": "._run", "run_bench": "._run", "BenchRun": "._cell", "Cell": "._cell",
    "GateResult": "._compare", "gate_runs": "._compare",
    "demo_comparison": "._strategies", "generate": "._traffic", "load_replay": "._traffic", "load_trace": "._traces",
    "generate_sessions": "._sessions", "parse_think": "._sessions", "find_max_rate": "._run",
}  # fmt: skip

_MOVED = {"experiment": "latencykit.experiment", "ExperimentRun": "latencykit.experiment",
          "load_experiment": "latencykit.experiment", "ExperimentFileError": "latencykit.experiment"}  # fmt: skip
"""Names that moved up to another package, forwarded by name (a layer below never imports one above)."""


def __getattr__(name: str) -> Any:
    """Lazy public names, so importing the package stays light."""
    if name in _LAZY or name in _MOVED:
        import importlib

        module = importlib.import_module(_LAZY[name], __name__) if name in _LAZY else importlib.import_module(_MOVED[name])
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
