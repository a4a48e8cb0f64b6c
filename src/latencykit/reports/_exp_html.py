"""The experiment's HTML report: its two tables, CDFs per strategy, speed-up bars with their
intervals (and the claimed range shaded), cold-start bars, then the bench report of every cell."""

from __future__ import annotations

import html
from typing import Optional, Sequence

from ..experiment._claims import speedup_interval
from ._exp_report import LEGEND, gib, speed
from ..experiment._run import ExperimentRun, Row
from ._html import _COLOURS, _cdf, _svg, render_html
from ._report import ms

__all__ = ["render_experiment"]

BAR_METRICS = ("ttft:p50", "tpot:p50", "e2e:p99")


def _bars(rows: Sequence[Row], metric: str, title: str) -> str:
    """Horizontal speed-up bars with whiskers (the interval), a line at 1×, the claimed range shaded."""
    items = [(r, c) for r in rows if not r.baseline and (c := r.comparisons.get(metric)) is not None and c.speedup is not None]
    if not items:
        return ""
    top = max([2.0] + [c.speedup or 0 for _, c in items] + [hi or 0 for _, c in items for _, hi in [speedup_interval(c)]])
    top = min(top * 1.1, 20.0)
    w, left, bar = 560, 150, 22
    h = 40 + bar * len(items) + 20

    def x(v: float) -> float:
        return left + min(max(v, 0.0), top) / top * (w - left - 20)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img"><title>{html.escape(title)}</title>',
           f'<text x="{w / 2}" y="16" text-anchor="middle" font-size="13">{html.escape(title)}</text>']  # fmt: skip
    for i, (r, c) in enumerate(items):
        y = 30 + i * bar
        claim = r.claim.claim if r.claim is not None and r.claim.claim.metric == metric else None
        if claim is not None:
            hi = claim.high if claim.high is not None else top
            out.append(f'<rect x="{x(claim.low):.1f}" y="{y}" width="{max(x(hi) - x(claim.low), 1):.1f}" height="{bar - 4}" fill="#2ca02c" opacity="0.15"/>')
        colour = _COLOURS[i % len(_COLOURS)]
        out.append(f'<rect x="{left}" y="{y + 5}" width="{x(c.speedup or 0) - left:.1f}" height="{bar - 14}" fill="{colour}"/>')
        lo, hi_ = speedup_interval(c)
        if lo is not None and hi_ is not None:
            out.append(f'<line x1="{x(lo):.1f}" y1="{y + 9}" x2="{x(hi_):.1f}" y2="{y + 9}" stroke="#000"/>')
        out.append(f'<text x="{left - 6}" y="{y + 13}" font-size="11" text-anchor="end">{html.escape(r.strategy.name)}</text>')
        out.append(f'<text x="{x(c.speedup or 0) + 4:.1f}" y="{y + 4}" font-size="10">{html.escape(speed(c))}</text>')
    one = x(1.0)
    out.append(f'<line x1="{one:.1f}" y1="26" x2="{one:.1f}" y2="{h - 16}" stroke="#888" stroke-dasharray="3,3"/>')
    out.append(f'<text x="{one:.1f}" y="{h - 4}" font-size="10" text-anchor="middle">1×</text></svg>')
    return "".join(out)


def _cold_bars(run: ExperimentRun) -> str:
    """Spawn → ready and spawn → first token per strategy (seconds)."""
    items = [(s.name, s.median("ready_s"), s.median("first_token_s")) for s in run.strategies]
    items = [(n, a, b) for n, a, b in items if a is not None or b is not None]
    if not items:
        return ""
    top = max((v or 0) for _, a, b in items for v in (a, b)) or 1.0
    w, left, bar = 560, 150, 26
    h = 40 + bar * len(items) + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img"><title>cold start</title>',
           f'<text x="{w / 2}" y="16" text-anchor="middle" font-size="13">cold start: spawn → ready (blue), → first token (orange), s</text>']  # fmt: skip
    for i, (name, ready, first) in enumerate(items):
        y = 28 + i * bar
        for k, (v, colour) in enumerate(((ready, "#1f77b4"), (first, "#ff7f0e"))):
            if v is not None:
                width = v / top * (w - left - 60)
                out.append(f'<rect x="{left}" y="{y + k * 10}" width="{width:.1f}" height="9" fill="{colour}"/>')
                out.append(f'<text x="{left + width + 4:.1f}" y="{y + k * 10 + 8}" font-size="9">{v:.2f}</text>')
        out.append(f'<text x="{left - 6}" y="{y + 13}" font-size="11" text-anchor="end">{html.escape(name)}</text>')
    out.append("</svg>")
    return "".join(out)


def _table(run: ExperimentRun) -> str:
    head = ["strategy", "load", "TTFT P50 ms", "P95", "P99", "TPOT P50", "P99", "E2E P99", "req/s", "tok/s", "goodput",
            "ready s", "1st token s", "peak RSS", "GPU", "accuracy", "exact", "prefix · edit", "claim"]  # fmt: skip
    body = []
    for r in run.rows():
        s, c = r.strategy, r.cell
        if c is None:
            body.append(f"<tr><td>{html.escape(s.name)}</td><td colspan='{len(head) - 1}' style='color:#c00;text-align:left'>"
                        f"failed: {html.escape(s.failed or 'no data')}</td></tr>")  # fmt: skip
            continue
        cells = [s.name + (" (baseline)" if r.baseline else ""), c.level]
        for key in ("ttft:p50", "ttft:p95", "ttft:p99", "tpot:p50", "tpot:p99", "e2e:p99"):
            metric, _, pct = key.partition(":")
            v = c.value(metric, {"p50": 0.5, "p95": 0.95, "p99": 0.99}[pct])
            cells.append(ms(v) + ("" if r.baseline else f" ({speed(r.comparisons.get(key))})"))
        q = s.quality
        g = r.goodput
        cells += [f"{r.throughput.get('completed_rps') or 0:.1f}", f"{r.throughput.get('output_tps') or 0:,.0f}",
                  "-" if g is None or g["attainment"] is None else f"{g['attainment'] * 100:.0f}%",
                  _f(s.median("ready_s")), _f(s.median("first_token_s")), gib(s.peak("rss_peak")),
                  " · ".join(gib(x) for x in (s.gpu_peak() or [])) or "n/a",
                  "-" if q is None or q.accuracy is None else f"{q.correct:g}/{q.graded}",
                  "baseline" if r.baseline else ("-" if q is None or q.exact_match is None else f"{q.exact_match * 100:.0f}%"),
                  "baseline" if r.baseline else ("-" if q is None or q.prefix_agreement is None else
                                                 f"{q.prefix_agreement:.2f} · {q.edit_agreement or 0:.2f}"),
                  "-" if r.claim is None else r.claim.text]  # fmt: skip
        body.append("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in cells) + "</tr>")
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table><p><small>{html.escape(LEGEND)}</small></p>"


def _limits(run: ExperimentRun) -> str:
    """The roofline table: bytes per token, the limit, the measured single-stream TPOT, the share reached."""
    rows = [r for r in run.limits() if r["bytes"] is not None]
    if not rows:
        return ""
    head = ["strategy", "MB per token", "roofline TPOT ms", "measured 1-stream TPOT ms", "share of the limit", "on"]
    body = ["<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in (
        r["strategy"], f"{r['bytes'] / 1e6:,.1f}", ms(r["roofline_s"]), ms(r["tpot_s"]),
        "-" if r["share"] is None else f"{r['share']:.0%}", str(r["on"]))) + "</tr>" for r in rows]  # fmt: skip
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    lines = "".join(f"<li>{html.escape(x)}</li>" for x in run.limit_lines())
    return f"<h3>decode against the physical limit</h3><table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table><ul>{lines}</ul>"


def _f(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.2f}"


def render_experiment(run: ExperimentRun, standalone: bool = True) -> str:
    """The report as HTML (a whole page, or a fragment for notebooks)."""
    tag = "EMULATED — " if run.emulated else ""
    parts = [f"<h2>{tag}latencykit experiment: {html.escape(str(run.spec.get('name')))}</h2>", _table(run), _limits(run)]
    for line in run.findings():
        parts.append(f'<p style="color:#b35900">finding: {html.escape(line)}</p>')
    rows = run.rows()
    first_level = next((r.cell.level for r in rows if r.cell is not None), None)
    level_rows = [r for r in rows if r.cell is not None and r.cell.level == first_level]
    for metric, name in (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "E2E")):
        series = [(r.strategy.name, _cdf([s[metric] for s in r.cell.measured if s.get(metric) is not None]), False)
                  for r in level_rows if r.cell is not None]  # fmt: skip
        parts.append(_svg(series, f"{tag}CDF of {name} per strategy ({first_level})", "ms", "share of requests"))
    for metric in BAR_METRICS:
        parts.append(_bars(level_rows, metric, f"{tag}speed-up of {metric} against {run.baseline} (95% interval; claim shaded)"))
    parts.append(_cold_bars(run))
    parts.append("<h3>every cell</h3>" + render_html(run.bench, standalone=False))
    body = "\n".join(p for p in parts if p)
    if not standalone:
        return f'<div class="latencykit-experiment">{body}</div>'
    style = "body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
    return f"<!doctype html><html><head><meta charset='utf-8'><title>latencykit experiment</title><style>{style}</style></head><body>{body}</body></html>"
