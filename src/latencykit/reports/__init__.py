"""Views of run files: the terminal, markdown, JSON, HTML and SVG reports of bench and experiment runs.

```python
from latencykit.reports import print_report, render_html

print_report(run)                                   # what run.report() prints
Path("run.html").write_text(render_html(run))       # what run.to_html() returns
```

What this package owns: the bench run's terminal / markdown / JSON report and its comparison
tables (``_report``, ``_grid``), its standalone HTML page with inline SVG plots (``_html``,
``_svg``), the experiment's terminal table (``_exp_report``) and HTML page (``_exp_html``), and
the demo's latency tables (``_table``). A view reads a run model and never changes it; it may
import the bench, the experiment and every layer below them; no model imports a view. Importing
this package registers the views that `BenchRun.report()`, ``.to_html()`` and ``._repr_html_()``
(and `ExperimentRun`'s) call (`latencykit.bench._views`). Each view module is imported on its
first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Optional

from ..bench._views import register_view

if TYPE_CHECKING:
    from ._exp_html import render_experiment
    from ._exp_report import print_experiment
    from ._html import render_html
    from ._report import print_report, report_json, report_markdown

__all__ = ["print_report", "report_markdown", "report_json", "render_html", "print_experiment", "render_experiment"]

_LAZY = {
    "print_report": "._report", "report_markdown": "._report", "report_json": "._report", "render_html": "._html",
    "print_experiment": "._exp_report", "render_experiment": "._exp_html",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    """Public names on first use (a view module loads rich, or the SVG helpers, only when it is used)."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _bench_report(run: Any, console: Optional[Any] = None) -> None:
    from ._report import print_report

    print_report(run, console)


def _bench_html(run: Any, standalone: bool = True) -> str:
    from ._html import render_html

    return render_html(run, standalone)


def _experiment_report(run: Any, console: Optional[Any] = None) -> None:
    from ._exp_report import print_experiment

    print_experiment(run, console)


def _experiment_html(run: Any, standalone: bool = True) -> str:
    from ._exp_html import render_experiment

    return render_experiment(run, standalone)


register_view("bench.report", _bench_report)
register_view("bench.html", _bench_html)
register_view("experiment.report", _experiment_report)
register_view("experiment.html", _experiment_html)
