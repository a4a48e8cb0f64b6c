"""Plots for notebooks: TTFT/TPOT CDFs and histograms, cache hit rate over time (``latencykit[plot]``).

Every function takes a `Recorder` (or a `Summary` where noted), draws on ``ax`` when given
(else a new figure), and returns the matplotlib ``Axes``. matplotlib is imported on call.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

from ._format import plural
from ._recorder import Recorder
from ._stats import METRICS
from ._summary import Summary

__all__ = ["plot_cdf", "plot_histogram", "plot_cache_hit_rate"]


def _pyplot() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError('latencykit plots need matplotlib: pip install "latencykit[plot]"') from exc
    return plt


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    _, new = _pyplot().subplots(figsize=(7, 4))
    return new


def _check_metric(metric: str) -> None:
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}; got {metric!r}")


def plot_cdf(source: Union[Recorder, Summary], metric: str = "ttft", *, ax: Any = None, emulated: bool = False) -> Any:
    """Cumulative distribution of ``metric`` per group (from the sketches), in milliseconds."""
    _check_metric(metric)
    summary = source.summary() if isinstance(source, Recorder) else source
    ax = _axes(ax)
    qs = np.linspace(0.0, 1.0, 201)
    for g in summary.groups:
        sketch = g.sketches[metric]
        if sketch.count == 0:
            continue
        xs = [v * 1000 for v in sketch.quantiles(list(qs)) if v is not None]
        ax.plot(xs, qs[: len(xs)], label=f"{g.name} (n={sketch.count})")
    ax.set_xlabel(f"{metric.upper()} (ms)")
    ax.set_ylabel("share of calls (nearest-rank quantiles)")
    ax.set_title(f"{metric.upper()} CDF" + (" — emulated" if emulated else ""))
    ax.grid(True, alpha=0.3)
    if summary.groups:
        ax.legend(fontsize="small")
    return ax


def plot_histogram(recorder: Recorder, metric: str = "ttft", *, bins: int = 40, ax: Any = None, emulated: bool = False) -> Any:
    """Histogram of ``metric`` over the calls the Recorder still holds, in milliseconds."""
    _check_metric(metric)
    if metric == "itl":
        raise ValueError("itl is pooled per chunk; plot its CDF with plot_cdf(recorder, 'itl')")
    values = [getattr(r, metric) * 1000 for r in recorder.calls if getattr(r, metric) is not None]
    ax = _axes(ax)
    ax.hist(values, bins=bins)
    ax.set_xlabel(f"{metric.upper()} (ms)")
    ax.set_ylabel("calls")
    ax.set_title(f"{metric.upper()} histogram, {plural(len(values), 'call')}" + (" — emulated" if emulated else ""))
    return ax


def plot_cache_hit_rate(recorder: Recorder, *, window: int = 10, ax: Any = None) -> Any:
    """Rolling cache hit rate by tokens (cached input / all input) over the last calls, in call order."""
    if not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be a positive int, got {window!r}")
    calls = [r for r in recorder.calls if r.cache_read_tokens is not None and r.input_tokens]
    read = np.array([r.cache_read_tokens or 0 for r in calls], dtype=float)
    total = np.array([r.input_tokens or 0 for r in calls], dtype=float)
    kernel = np.ones(window)
    rolled_read = np.convolve(read, kernel)[: len(read)]
    rolled_total = np.convolve(total, kernel)[: len(total)]
    rate = np.divide(rolled_read, rolled_total, out=np.zeros_like(rolled_read), where=rolled_total > 0)
    ax = _axes(ax)
    ax.plot(np.arange(1, len(rate) + 1), rate * 100)
    ax.set_ylim(0, 100)
    ax.set_xlabel("call")
    ax.set_ylabel(f"cache hit rate, % of input tokens (last {plural(window, 'call')})")
    ax.set_title("Prompt-cache hit rate over time")
    ax.grid(True, alpha=0.3)
    return ax
