"""Where a run model finds its views without importing them: the registry behind `BenchRun.report()`,
``.to_html()`` and ``._repr_html_()`` (and `ExperimentRun`'s).

The views live above the models (`latencykit.reports`: it reads run models, never the reverse).
That package registers its views here when it is imported (`register_view`); a model asks for
one by name (`view`). When the name is not registered yet, `view` imports the package named in
`DEFAULT_VIEWS` by that name — the way pandas finds its plotting backend — so a notebook's
``run`` still shows itself without the caller importing the views, while no import statement
points from a model up to a view. Another package may register its own view under a name to
replace the default (a later registration wins).

Names: ``bench.report`` (``run, console=None``, prints), ``bench.html`` (``run, standalone=True``,
returns HTML), ``experiment.report`` and ``experiment.html`` likewise.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

__all__ = ["DEFAULT_VIEWS", "register_view", "view"]

DEFAULT_VIEWS = "latencykit.reports"
"""The package whose import registers the default views."""

_VIEWS: dict[str, Callable[..., Any]] = {}


def register_view(name: str, fn: Callable[..., Any]) -> None:
    """Make ``fn`` the view called ``name`` (replacing any before it)."""
    _VIEWS[name] = fn


def view(name: str) -> Callable[..., Any]:
    """The view called ``name``, registering the defaults first if it is not known yet; ``LookupError`` if none is."""
    fn = _VIEWS.get(name)
    if fn is None:
        importlib.import_module(DEFAULT_VIEWS)
        fn = _VIEWS.get(name)
    if fn is None:
        raise LookupError(f"no view {name!r} is registered (registered: {', '.join(sorted(_VIEWS)) or 'none'})")
    return fn
