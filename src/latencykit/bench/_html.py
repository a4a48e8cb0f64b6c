"""The HTML report: tables plus inline SVG plots (no plotting library needed).

Plots: the CDF of headline TTFT and of E2E per cell, TTFT P50/P99 against the load level
when there are several levels, and a timeline (intended send time against headline TTFT,
one dot per request) for each cell.
"""

from __future__ import annotations

import html
from typing import Optional, Sequence

from ._cell import BenchRun, Cell
from ._compare import strategy_table
from ._report import METRIC_NAMES, ms
from ._stats import QUANTILES, percentiles

__all__ = ["render_html"]

W, H, PAD = 560, 260, 44
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def _svg(series: Sequence[tuple[str, Sequence[tuple[float, float]], bool]], title: str, xlabel: str, ylabel: str) -> str:
    """Lines (or dots) in one chart; x and y in data units, axes from the data."""
    pts = [p for _, s, _ in series for p in s]
    if not pts:
        return ""
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(0.0, min(p[1] for p in pts)), max(p[1] for p in pts)
    x1, y1 = (x1 if x1 > x0 else x0 + 1), (y1 if y1 > y0 else y0 + 1)

    def sx(x: float) -> float:
        return PAD + (x - x0) / (x1 - x0) * (W - 2 * PAD)

    def sy(y: float) -> float:
        return H - PAD + (y0 - y) / (y1 - y0) * (H - 2 * PAD)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img"><title>{html.escape(title)}</title>',
           f'<text x="{W / 2}" y="16" text-anchor="middle" font-size="13">{html.escape(title)}</text>',
           f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="#888"/>',
           f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H - PAD}" stroke="#888"/>',
           f'<text x="{W / 2}" y="{H - 8}" text-anchor="middle" font-size="11">{html.escape(xlabel)}</text>',
           f'<text x="12" y="{H / 2}" font-size="11" transform="rotate(-90 12 {H / 2})" text-anchor="middle">{html.escape(ylabel)}</text>']  # fmt: skip
    for i in range(5):
        xv, yv = x0 + (x1 - x0) * i / 4, y0 + (y1 - y0) * i / 4
        out.append(f'<text x="{sx(xv):.0f}" y="{H - PAD + 14}" font-size="10" text-anchor="middle">{xv:.3g}</text>')
        out.append(f'<text x="{PAD - 4}" y="{sy(yv) + 3:.0f}" font-size="10" text-anchor="end">{yv:.3g}</text>')
    for k, (name, s, dots) in enumerate(series):
        colour = _COLOURS[k % len(_COLOURS)]
        if dots:
            out += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="1.6" fill="{colour}"/>' for x, y in s]
        else:
            path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s)
            out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{path}"/>')
        out.append(f'<text x="{W - PAD}" y="{PAD + 12 * k}" font-size="10" text-anchor="end" fill="{colour}">{html.escape(name)}</text>')
    out.append("</svg>")
    return "".join(out)


def _cdf(values: Sequence[float]) -> list[tuple[float, float]]:
    xs = sorted(values)
    n = len(xs)
    step = max(1, n // 400)
    pts = [(x * 1000, (i + 1) / n) for i, x in enumerate(xs) if i % step == 0 or i == n - 1]
    return pts


def _metrics_html(cell: Cell) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("metric", "n", "p50 ms [95% CI]", "p90", "p95", "p99 [95% CI]", "p99.9", "max"))
    rows = []
    for metric, name in METRIC_NAMES.items():
        sk = cell.sketches[metric]
        if not sk.count:
            continue
        ps = percentiles(sk)
        tds = []
        for q in QUANTILES:
            p = ps[q]
            text = ms(p.value) + (f" [{ms(p.lo, 0)}–{ms(p.hi, 0)}]" if q in (0.5, 0.99) else "")
            tds.append(f"<td>{'~' if not p.reliable else ''}{text}</td>")
        rows.append(f"<tr><td>{html.escape(name)}</td><td>{sk.count}</td>{''.join(tds)}<td>{ms(sk.max)}</td></tr>")
    return f'<table class="latencykit-bench"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _level_x(cell: Cell) -> Optional[float]:
    load = cell.load
    value = load.get("rate") if load.get("mode") == "open" else load.get("concurrency")
    return float(value) if isinstance(value, (int, float)) else None


def render_html(run: BenchRun, standalone: bool = True) -> str:
    """The report as HTML (a whole page, or a fragment for notebooks)."""
    tag = "EMULATED — " if run.emulated else ""
    cfg = run.config
    parts = [f"<h2>{tag}latencykit bench: {html.escape(str(cfg.get('traffic')))} traffic, target "
             f"{html.escape(str(cfg.get('target', {}).get('kind')))}</h2>"]  # fmt: skip
    for cell in run.cells:
        tp = cell.throughput()
        parts.append(f"<h3>{html.escape(cell.key)}</h3>{_metrics_html(cell)}")
        parts.append(f"<p>completed {tp['completed_rps'] or 0:.1f} req/s, {tp['output_tps'] or 0:.0f} output tok/s; "
                     f"scheduled {cell.scheduled}, unsent {len(cell.unsent_waits)}</p>")  # fmt: skip
        for w in cell.warnings:
            parts.append(f'<p style="color:#b35900">warning: {html.escape(w)}</p>')
    cdf = [(c.key, _cdf([s["ttft"] for s in c.measured if s["ttft"] is not None]), False) for c in run.cells]
    parts.append(_svg(cdf, f"{tag}CDF of TTFT (from intended send)", "ms", "share of requests"))
    cdf_e2e = [(c.key, _cdf([s["e2e"] for s in c.measured if s["e2e"] is not None]), False) for c in run.cells]
    parts.append(_svg(cdf_e2e, f"{tag}CDF of E2E", "ms", "share of requests"))
    by_label: dict[str, list[Cell]] = {}
    for c in run.cells:
        by_label.setdefault(c.label, []).append(c)
    if any(len(v) > 1 for v in by_label.values()):
        series: list[tuple[str, Sequence[tuple[float, float]], bool]] = []
        for label, cells in by_label.items():
            for q in (0.5, 0.99):
                pts = [(x, (c.value("ttft", q) or 0) * 1000) for c in cells if (x := _level_x(c)) is not None]
                series.append((f"{label} p{q * 100:g}", sorted(pts), False))
        open_loop = run.cells[0].load.get("mode") == "open"
        parts.append(_svg(series, f"{tag}TTFT vs {'rate' if open_loop else 'concurrency'}", "req/s" if open_loop else "streams", "ms"))
    for c in run.cells:
        pts = [(s["sched"], s["ttft"] * 1000) for s in c.measured if s["ttft"] is not None]
        parts.append(_svg([(c.key, pts, True)], f"{tag}timeline: TTFT by intended send time", "s since start", "TTFT ms"))
    rows = strategy_table(run)
    if rows:
        body = "".join(
            f"<tr><td>{html.escape(r.cell)}</td><td>{r.metric} {r.pct}</td><td>{ms(r.base.value)}</td><td>{ms(r.new.value)}</td>"
            f"<td>{'-' if r.speedup is None else f'{r.speedup:.2f}×'}</td><td>{'yes' if r.significant else 'no'}</td></tr>"
            for r in rows
        )
        parts.append("<h3>strategy comparison</h3><table><thead><tr><th>cell</th><th>metric</th><th>baseline ms</th>"
                     f"<th>ms</th><th>speed-up</th><th>beyond noise</th></tr></thead><tbody>{body}</tbody></table>")  # fmt: skip
    body = "\n".join(parts)
    if not standalone:
        return f'<div class="latencykit-bench-run">{body}</div>'
    style = "body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
    return f"<!doctype html><html><head><meta charset='utf-8'><title>latencykit bench</title><style>{style}</style></head><body>{body}</body></html>"
