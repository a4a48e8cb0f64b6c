"""Server-strategy experiments (``latencykit experiment``): each server configuration started, timed, loaded, measured, stopped.

```python
from latencykit.experiment import experiment, load_experiment

run = experiment("emulator.toml", out="runs/emu")     # an ExperimentRun
run.summary()["rows"][1]["tpot:p50 speedup"]          # the article's table as plain data
```

What this package owns: the experiment file (``_file``: `load_experiment`, `ExperimentFileError`,
its ready examples under ``examples/``), the server processes (``_servers``), their memory
(``_memory``), the quality pass (``_quality``), claimed speed-ups and their verdicts (``_claims``),
the experiment's run model (``_run``: `ExperimentRun`) and the runner (``_experiment``:
`experiment`). It may import the bench (the traffic goes through `run_bench`), the fleet (the
traffic sent from Ray workers), the engines (``/metrics`` through the doctor's reader) and every
layer below them; never the reports or the commands. See ``docs/experiment.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._experiment import experiment
    from ._file import ExperimentFileError, load_experiment
    from ._run import ExperimentRun

__all__ = ["experiment", "ExperimentRun", "load_experiment", "ExperimentFileError"]

_LAZY = {"experiment": "._experiment", "ExperimentRun": "._run", "load_experiment": "._file", "ExperimentFileError": "._file"}


def __getattr__(name: str) -> Any:
    """Public names on first use, so importing the package stays light."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
