"""Inline SVG charts for the HTML report (no plotting library): lines, dots, confidence bands, labelled
markers, and horizontal bars with whiskers.

Axes carry round-number ticks (1, 2, 2.5 or 5 × 10^k) printed in plain decimals, never ``2.12e+03``;
`time_axis` picks milliseconds or seconds so a latency axis reads 0, 50, 100 ms or 0, 1, 2 s. Every
legend sits below the plot area, outside the data. Tick labels carry ``class="tick"`` and the plot
area ``class="plot"`` so tests (and scripts/html_screenshot.py) can check them.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

__all__ = ["COLOURS", "Rule", "Series", "bars", "chart", "fmt_tick", "nice_ticks", "time_axis"]

W, PLOT_H = 640, 240
LEFT, RIGHT, TOP = 64, 24, 30
BOTTOM = 44  # x tick labels and the axis label
LEGEND_ROW = 16
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round-number ticks covering [lo, hi]: steps of 1, 2, 2.5 or 5 × 10^k, about ``count`` of them."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0, 1.0]
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(count - 1, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks = []
    t = first
    while t < hi + step * 0.5:
        ticks.append(round(t, 12))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(ticks[-1] + step, 12))
    return ticks


def fmt_tick(value: float, ticks: Sequence[float]) -> str:
    """A tick in plain decimals with just the digits its step needs (``0``, ``2.5``, ``1,000``)."""
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else 1.0
    exp = math.floor(math.log10(step)) if step > 0 else 0
    mantissa = round(step / 10**exp, 6)
    digits = min(6, max(0, -exp + (1 if mantissa == 2.5 else 0)))
    text = f"{value:,.{digits}f}"
    return "0" if float(text.replace(",", "")) == 0 else text


def time_axis(max_ms: float) -> tuple[str, float]:
    """(unit, factor) for a latency axis whose data reach ``max_ms``: milliseconds up to 2 s, then seconds."""
    return ("s", 0.001) if max_ms >= 2000 else ("ms", 1.0)


@dataclass
class Series:
    """One data series: ``line``, ``dots`` or ``markers`` (dots joined by a line, each with an optional label);
    ``band`` = (x, lo, hi) points of a shaded confidence band drawn beneath it."""

    name: str
    points: Sequence[tuple[float, float]]
    kind: str = "line"
    band: Sequence[tuple[float, float, float]] = ()
    labels: Sequence[str] = ()
    dashed: bool = False
    colour: Optional[str] = None


@dataclass
class _Frame:
    x0: float
    x1: float
    y0: float
    y1: float
    xt: list[float] = field(default_factory=list)
    yt: list[float] = field(default_factory=list)

    def sx(self, x: float) -> float:
        return LEFT + (x - self.x0) / (self.x1 - self.x0) * (W - LEFT - RIGHT)

    def sy(self, y: float) -> float:
        return TOP + PLOT_H - (y - self.y0) / (self.y1 - self.y0) * PLOT_H


def _frame(xs: Sequence[float], ys: Sequence[float], y_max: Optional[float], x_zero: bool) -> _Frame:
    xlo = 0.0 if x_zero else min(xs)
    xt = nice_ticks(min(xlo, min(xs)), max(xs))
    yt = nice_ticks(0.0, y_max if y_max is not None else max(max(ys), 0.0))
    return _Frame(xt[0], xt[-1], yt[0], yt[-1], xt, yt)


def _axes(f: _Frame, title: str, xlabel: str, ylabel: str, legend_rows: int) -> list[str]:
    height = TOP + PLOT_H + BOTTOM + legend_rows * LEGEND_ROW + 6
    esc = html.escape
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" viewBox="0 0 {W} {height}" role="img" '
           f'font-family="system-ui, sans-serif"><title>{esc(title)}</title>',
           f'<text x="{LEFT}" y="18" font-size="13" font-weight="600">{esc(title)}</text>',
           f'<rect class="plot" x="{LEFT}" y="{TOP}" width="{W - LEFT - RIGHT}" height="{PLOT_H}" fill="none" stroke="#bbb"/>']  # fmt: skip
    for t in f.xt:
        x = f.sx(t)
        out.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + PLOT_H}" stroke="#eee"/>')
        out.append(f'<text class="tick" x="{x:.1f}" y="{TOP + PLOT_H + 14}" font-size="10" text-anchor="middle">{fmt_tick(t, f.xt)}</text>')
    for t in f.yt:
        y = f.sy(t)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text class="tick" x="{LEFT - 5}" y="{y + 3:.1f}" font-size="10" text-anchor="end">{fmt_tick(t, f.yt)}</text>')
    out.append(f'<text x="{LEFT + (W - LEFT - RIGHT) / 2}" y="{TOP + PLOT_H + 32}" font-size="11" text-anchor="middle">{esc(xlabel)}</text>')
    mid = TOP + PLOT_H / 2
    out.append(f'<text x="14" y="{mid}" font-size="11" transform="rotate(-90 14 {mid})" text-anchor="middle">{esc(ylabel)}</text>')
    return out


def _legend(entries: Sequence[tuple[str, str, bool]]) -> list[str]:
    """Legend rows below the x axis label: outside the plot area, never over the data."""
    out = []
    y0 = TOP + PLOT_H + BOTTOM + 4
    for i, (name, colour, dashed) in enumerate(entries):
        y = y0 + i * LEGEND_ROW
        dash = ' stroke-dasharray="4 3"' if dashed else ""
        out.append(f'<line x1="{LEFT}" y1="{y}" x2="{LEFT + 22}" y2="{y}" stroke="{colour}" stroke-width="2.5"{dash}/>')
        out.append(f'<text class="legend" x="{LEFT + 28}" y="{y + 4}" font-size="11">{html.escape(name)}</text>')
    return out


@dataclass
class Rule:
    """A reference line across the plot: horizontal at ``y`` (an SLO's threshold) or vertical at ``x`` (a found rate)."""

    name: str
    x: Optional[float] = None
    y: Optional[float] = None
    colour: str = "#444"


def chart(series: Sequence[Series], title: str, xlabel: str, ylabel: str, *, y_max: Optional[float] = None,
          x_zero: bool = True, rules: Sequence[Rule] = ()) -> str:  # fmt: skip
    """Series in one chart; axes from the data (y from 0; ``y_max`` shares a y scale between charts); ``rules`` are
    labelled reference lines (``class="rule"``), in the legend too."""
    xs = [p[0] for s in series for p in s.points] + [b[0] for s in series for b in s.band] + [r.x for r in rules if r.x is not None]
    ys = [p[1] for s in series for p in s.points] + [b[2] for s in series for b in s.band] + [r.y for r in rules if r.y is not None]
    if not xs or not any(s.points for s in series):
        return ""
    f = _frame(xs, ys, y_max, x_zero)
    out = _axes(f, title, xlabel, ylabel, len(series) + len(rules))
    for r in rules:
        if r.y is not None:
            y = f.sy(r.y)
            out.append(f'<line class="rule" x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" stroke="{r.colour}" '
                       'stroke-width="1.5" stroke-dasharray="6 3"/>')  # fmt: skip
        else:
            x = f.sx(float(r.x or 0.0))
            out.append(f'<line class="rule" x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + PLOT_H}" stroke="{r.colour}" '
                       'stroke-width="1.5" stroke-dasharray="6 3"/>')  # fmt: skip
    legend = []
    for k, s in enumerate(series):
        colour = s.colour or COLOURS[k % len(COLOURS)]
        legend.append((s.name, colour, s.dashed))
        if s.band:
            upper = " ".join(f"{f.sx(x):.1f},{f.sy(hi):.1f}" for x, _, hi in s.band)
            lower = " ".join(f"{f.sx(x):.1f},{f.sy(lo):.1f}" for x, lo, _ in reversed(s.band))
            out.append(f'<polygon class="band" points="{upper} {lower}" fill="{colour}" fill-opacity="0.15" stroke="none"/>')
        if s.kind == "dots":
            out += [f'<circle cx="{f.sx(x):.1f}" cy="{f.sy(y):.1f}" r="1.8" fill="{colour}" fill-opacity="0.7"/>' for x, y in s.points]
            continue
        dash = ' stroke-dasharray="4 3"' if s.dashed else ""
        path = " ".join(f"{f.sx(x):.1f},{f.sy(y):.1f}" for x, y in s.points)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.8"{dash} points="{path}"/>')
        if s.kind == "markers":
            for i, (x, y) in enumerate(s.points):
                out.append(f'<circle class="level" cx="{f.sx(x):.1f}" cy="{f.sy(y):.1f}" r="3.5" fill="white" stroke="{colour}" stroke-width="2"/>')
                if i < len(s.labels) and s.labels[i]:
                    out.append(f'<text x="{f.sx(x) + 6:.1f}" y="{f.sy(y) - 6:.1f}" font-size="9" fill="{colour}">{html.escape(s.labels[i])}</text>')
    legend += [(r.name, r.colour, True) for r in rules]
    out += _legend(legend)
    out.append("</svg>")
    return "".join(out)


def bars(rows: Sequence[tuple[str, Optional[float], Optional[float], Optional[float]]], title: str, xlabel: str,
         reference: float = 1.0) -> str:  # fmt: skip
    """Horizontal bars from ``reference`` to each value, with its (lo, hi) whisker; labels left of the plot.

    An infinite ``hi`` (an interval the sample does not bound) runs the whisker to the plot's edge, without an end cap."""
    known = [r for r in rows if r[1] is not None]
    if not known:
        return ""
    label_w = min(300, 7 * max(len(r[0]) for r in rows) + 10)
    row_h = 20
    height = TOP + row_h * len(rows) + BOTTOM
    vals = [v for _, v, lo, hi in known for v in (v, lo, hi) if v is not None and math.isfinite(v)] + [reference]
    ticks = nice_ticks(min(0.0, min(vals)), max(vals))
    x0, x1 = ticks[0], ticks[-1]
    left, right = label_w, W - RIGHT - 48  # the values are printed right of the plot, clear of bars and whiskers

    def sx(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * (right - left)

    esc = html.escape
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" viewBox="0 0 {W} {height}" role="img" '
           f'font-family="system-ui, sans-serif"><title>{esc(title)}</title>',
           f'<text x="8" y="18" font-size="13" font-weight="600">{esc(title)}</text>',
           f'<rect class="plot" x="{left}" y="{TOP}" width="{right - left}" height="{row_h * len(rows)}" fill="none" stroke="#bbb"/>']  # fmt: skip
    bottom = TOP + row_h * len(rows)
    for t in ticks:
        out.append(f'<line x1="{sx(t):.1f}" y1="{TOP}" x2="{sx(t):.1f}" y2="{bottom}" stroke="#eee"/>')
        out.append(f'<text class="tick" x="{sx(t):.1f}" y="{bottom + 14}" font-size="10" text-anchor="middle">{fmt_tick(t, ticks)}</text>')
    out.append(f'<line x1="{sx(reference):.1f}" y1="{TOP}" x2="{sx(reference):.1f}" y2="{bottom}" stroke="#444" stroke-dasharray="3 2"/>')
    for i, (name, v, lo, hi) in enumerate(rows):
        y = TOP + i * row_h + row_h / 2
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{esc(name)}</text>')
        if v is None:
            out.append(f'<text x="{sx(reference) + 4:.1f}" y="{y + 4:.1f}" font-size="10" fill="#888">no data</text>')
            continue
        colour = COLOURS[2] if v >= reference else COLOURS[1]
        a, b = sorted((sx(reference), sx(v)))
        out.append(f'<rect x="{a:.1f}" y="{y - 6:.1f}" width="{max(b - a, 1):.1f}" height="12" fill="{colour}" fill-opacity="0.75"/>')
        if lo is not None and hi is not None:
            ends = [e for e in (lo, hi) if math.isfinite(e)]
            top = hi if math.isfinite(hi) else x1
            out.append(f'<line class="ci" x1="{sx(lo):.1f}" y1="{y:.1f}" x2="{sx(top):.1f}" y2="{y:.1f}" stroke="#222" stroke-width="1.2"/>')
            out += [f'<line x1="{sx(e):.1f}" y1="{y - 4:.1f}" x2="{sx(e):.1f}" y2="{y + 4:.1f}" stroke="#222" stroke-width="1.2"/>' for e in ends]
        out.append(f'<text class="value" x="{right + 6}" y="{y + 4:.1f}" font-size="10">{v:.2f}×</text>')
    out.append(f'<text x="{left + (right - left) / 2}" y="{bottom + 32}" font-size="11" text-anchor="middle">{esc(xlabel)}</text>')
    out.append("</svg>")
    return "".join(out)
