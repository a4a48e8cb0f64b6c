"""The HTML report: everything the terminal report says, plus inline SVG plots (`_svg`).

Sections: the run's configuration (target, traffic, load levels, matrix, seed, emulator timing)
and environment (versions, machine, start time); per cell the percentile table, throughput,
goodput per SLO, cache verdicts, TTFT by cache and cold/warm, outcomes, the client's health and
warnings; then plots — CDFs of TTFT and E2E, latency against achieved throughput across the
sweep levels (each measured level marked, 95 % confidence bands), a timeline per cell on one
shared y scale, and the strategy comparison as speed-up bars with their confidence intervals.
"""

from __future__ import annotations

import html
from typing import Any, Optional, Sequence

from ..bench._cell import BenchRun, Cell
from ..bench._compare import Comparison, strategy_table
from ._grid import Grid
from ._report import (
    baseline_name, cell_slos, cluster_lines, comparison_grid, header_text, health_text, limiting_text, max_rate_lines, metrics_grid,
    partial_text, rate,
    sessions_lines, split_text, throughput_line,
)  # fmt: skip
from ..bench._stats import percentiles
from ._svg import COLOURS, Rule, Series, bars, chart, time_axis

__all__ = ["render_html"]

_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:72em;color:#222}"
    "table{border-collapse:collapse;margin:.4em 0 1em}td,th{border:1px solid #ccc;padding:2px 8px}"
    "td{text-align:right}td:first-child,th:first-child{text-align:left}caption{text-align:left;font-weight:600}"
    ".kv td{text-align:left}.warn{color:#b35900}.bad{color:#b00020;font-weight:600}.dim{color:#666;font-size:90%}"
    ".plots svg{display:block;margin:1em 0}"
)


def _e(text: Any) -> str:
    return html.escape(str(text))


def grid_html(grid: Grid) -> str:
    """A `Grid` as an HTML table with its title as caption."""
    head = "".join(f"<th>{_e(h)}</th>" for h in grid.headers)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in grid.rows)
    return f'<table class="latencykit-bench"><caption>{_e(grid.title)}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _kv(title: str, rows: Sequence[tuple[str, Any]]) -> str:
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows if v not in (None, "", [], {}))
    return f'<table class="kv"><caption>{_e(title)}</caption><tbody>{body}</tbody></table>'


def _config_rows(run: BenchRun) -> list[tuple[str, Any]]:
    cfg = run.config
    t = cfg.get("target", {})
    levels = ", ".join(dict.fromkeys(c.level for c in run.cells))
    matrix = "; ".join(" ".join(f"{k}={v}" for k, v in m.items()) or "baseline" for m in cfg.get("matrix") or [])
    timing = cfg.get("emulator_timing")
    return [
        ("target", f"{t.get('kind')} ({t.get('api')} API), model {t.get('model')}" + (" — EMULATED" if run.emulated else "")),
        ("server URL", t.get("base_url")),
        ("traffic", f"replay of {cfg.get('replay')}" if cfg.get("traffic") == "replay" else cfg.get("traffic")),
        ("requests per cell", cfg.get("request_count", cfg.get("requests"))),
        ("seed", cfg.get("seed")),
        ("load levels", levels),
        ("arrivals", cfg.get("arrivals") if cfg.get("rate") or cfg.get("arrivals") == "recorded" else None),
        ("duration", f"{cfg['duration']:g} s" if cfg.get("duration") else None),
        ("sessions", f"{cfg.get('turns')} turns each, think time {cfg.get('think')}" if cfg.get("traffic") == "sessions" else None),
        ("warm-up", cfg.get("warmup") or None),
        ("strategies", matrix),
        ("labels", ", ".join(f"{k}={v}" for k, v in (cfg.get("labels") or {}).items())),
        ("workers", cfg.get("workers")),
        ("thin control share", cfg.get("control") or None),
        ("custom SLOs", ", ".join(cfg.get("slos") or [])),
        ("emulator timing", ", ".join(f"{k}={v}" for k, v in timing.items()) if timing else None),
        ("merged from", cfg.get("merged_from")),
    ]


def _env_rows(run: BenchRun) -> list[tuple[str, Any]]:
    env = run.env
    versions = ", ".join(f"{k} {v}" for k, v in (env.get("versions") or {}).items() if v)
    return [("started (UTC)", env.get("started")), ("python", env.get("python")), ("platform", env.get("platform")),
            ("CPUs", env.get("cpus")), ("versions", versions)]  # fmt: skip


def _cell_html(cell: Cell, run: BenchRun) -> str:
    cfg = run.config
    tag = "EMULATED " if run.emulated else ""
    parts = [f"<h3>{_e(tag + cell.key)}{' — PARTIAL' if cell.partial else ''}</h3>"]
    partial = partial_text(cell, cfg.get("request_count", cfg.get("requests")))
    if partial:
        parts.append(f'<p class="bad">{_e(partial)}</p>')
    parts.append(grid_html(metrics_grid(cell, "percentiles, ms [95% CI]; ~ = too few samples")))
    parts.append(f"<p>{_e(throughput_line(cell))}</p>")
    good = cell.goodput(cell_slos(cfg.get("slos") or ()))
    grid = Grid("goodput (requests meeting each SLO, latency from the intended send)", ("SLO", "attainment", "good req/s"),
                [(g["slo"], "n/a" if g["attainment"] is None else f"{g['attainment'] * 100:.1f}%", rate(g["good_rps"], ""))
                 for g in good])  # fmt: skip
    parts.append(grid_html(grid))
    lines = []
    verdicts = cell.verdicts()
    if verdicts:
        lines.append("cache verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())))
    for key, title in (("cache", "TTFT by cache"), ("cold", "TTFT cold vs warm")):
        text = split_text(cell, key)
        if text:
            lines.append(f"{title}: {text}")
    lines += sessions_lines(cell, cfg.get("think") if cfg.get("traffic") == "sessions" else None)
    if cell.measured:
        lines.append("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(cell.outcomes().items())) + f" (of {len(cell.measured)} measured)")
    if cell.first_error and not cell.no_data:
        lines.append(f"first error: {cell.first_error}")
    lines += [health_text(cell, h) for h in cell.health]
    limit = limiting_text(cell)
    if limit:
        lines.append(limit)
    parts += [f"<p>{_e(line)}</p>" for line in lines]
    if cell.no_data:
        parts.append(f'<p class="bad">{_e(cell.no_data)}</p>')
    parts += [f'<p class="warn">warning: {_e(w)}</p>' for w in cell.warnings]
    return "\n".join(parts)


def _ms_values(values: Sequence[Optional[float]]) -> list[float]:
    return [v * 1000 for v in values if v is not None]


def _cdf_points(values: Sequence[float], factor: float) -> list[tuple[float, float]]:
    xs = sorted(values)
    n = len(xs)
    step = max(1, n // 400)
    return [(x * factor, (i + 1) / n) for i, x in enumerate(xs) if i % step == 0 or i == n - 1]


def _cdf_chart(run: BenchRun, metric: str, title: str, tag: str) -> str:
    data = [(c.key, _ms_values([s[metric] for s in c.measured])) for c in run.cells]
    top = max((max(v) for _, v in data if v), default=0.0)
    unit, factor = time_axis(top)
    series = [Series(key, _cdf_points(v, factor)) for key, v in data if v]
    return chart(series, f"{tag}{title}", f"{metric.upper()} {unit}", "share of requests", x_zero=True)


def _load_chart(run: BenchRun, tag: str) -> str:
    """TTFT P50 and P99 against achieved throughput, one line per strategy across its load levels, the levels
    marked and labelled, each percentile with its 95 % confidence band."""
    by_label: dict[str, list[Cell]] = {}
    for c in run.cells:
        by_label.setdefault(c.label, []).append(c)
    if not any(len(v) > 1 for v in by_label.values()):
        return ""
    top = max((c.pct("ttft")[0.99].hi or 0.0) * 1000 for c in run.cells)
    unit, factor = time_axis(top)
    series = []
    for k, (label, cells) in enumerate(by_label.items()):
        rows = []
        for c in cells:
            x = c.throughput()["completed_rps"]
            if x is not None and c.completed:
                rows.append((x, c))
        rows.sort(key=lambda r: r[0])
        if not rows:
            continue
        for q, dashed in ((0.5, False), (0.99, True)):
            pts, band = [], []
            for x, c in rows:
                p = c.pct("ttft")[q]
                if p.value is None:
                    continue
                pts.append((x, p.value * 1000 * factor))
                band.append((x, (p.lo or p.value) * 1000 * factor, (p.hi or p.value) * 1000 * factor))
            series.append(Series(f"{label} TTFT p{q * 100:g}", pts, "markers", band, [c.level for _, c in rows],
                                 dashed, COLOURS[k % len(COLOURS)]))  # fmt: skip
    return chart(series, f"{tag}TTFT vs achieved throughput by load level (95% CI bands)",
                 "completed requests per second", f"TTFT {unit}")  # fmt: skip


def _rate_charts(run: BenchRun, tag: str) -> list[str]:
    """``--find-max-rate``: per SLO, its percentile (95 % CI band) against the offered rate of each decided step, the
    SLO's threshold, the rate found and the first failing one."""
    m = run.sections.get("max_rate")
    if not isinstance(m, dict) or not run.cells:
        return []
    from ..bench._stats import parse_slo

    rows = sorted((c for c in run.cells if c.partial is None and c.load.get("rate")), key=lambda c: float(c.load["rate"]))
    out = []
    for text in run.config.get("slos") or []:
        slo = parse_slo(text)
        pts, band = [], []
        for c in rows:
            if slo.metric not in c.sketches:
                continue
            p = percentiles(c.sketches[slo.metric], [slo.percentile])[slo.percentile]
            if p.value is None:
                continue
            x = float(c.load["rate"])
            pts.append((x, p.value * 1000))
            band.append((x, (p.lo or p.value) * 1000, (p.hi or p.value) * 1000))
        if not pts:
            continue
        top = max([b[2] for b in band] + [slo.threshold * 1000])
        unit, factor = time_axis(top)
        rules = [Rule(f"SLO: {slo.label}", y=slo.threshold * 1000 * factor, colour="#b35900")]
        if m.get("rps") is not None:
            rules.append(Rule(f"max rate meeting every SLO: {m['rps']:g} req/s", x=float(m["rps"]), colour=COLOURS[2]))
        if m.get("first_failing_rps") is not None:
            rules.append(Rule(f"first failing: {m['first_failing_rps']:g} req/s", x=float(m["first_failing_rps"]), colour=COLOURS[1]))
        series = [Series(f"{slo.metric.upper()} p{slo.percentile * 100:g} per step", [(x, y * factor) for x, y in pts], "markers",
                         [(x, lo * factor, hi * factor) for x, lo, hi in band], [f"{x:g}/s" for x, _ in pts])]  # fmt: skip
        out.append(chart(series, f"{tag}rate search: {slo.metric.upper()} p{slo.percentile * 100:g} vs offered rate (95% CI)",
                         "offered requests per second", f"{slo.metric.upper()} {unit}", rules=rules))  # fmt: skip
    return out


def _pareto_chart(run: BenchRun, tag: str) -> str:
    """Across a sweep, per strategy: the output speed each user sees (1 / TPOT p50, tokens/s) against the total output
    throughput (tokens/s), one point per load level: the trade-off between serving more and serving each faster."""
    by_label: dict[str, list[Cell]] = {}
    for c in run.cells:
        by_label.setdefault(c.label, []).append(c)
    if not any(len(v) > 1 for v in by_label.values()):
        return ""
    series = []
    for k, (label, cells) in enumerate(by_label.items()):
        rows = []
        for c in cells:
            total, tpot = c.throughput()["output_tps"], c.value("tpot", 0.5)
            if total and tpot:
                rows.append((total, 1.0 / tpot, c.level))
        rows.sort()
        if rows:
            series.append(Series(label, [(x, y) for x, y, _ in rows], "markers", labels=[lv for _, _, lv in rows],
                                 colour=COLOURS[k % len(COLOURS)]))  # fmt: skip
    if not series:
        return ""
    return chart(series, f"{tag}throughput per user vs total throughput by load level (Pareto view)",
                 "total output tokens per second", "output tokens per second per user (1 / TPOT p50)")  # fmt: skip


def _timelines(run: BenchRun, tag: str) -> list[str]:
    """One timeline per cell (TTFT by intended send time), all on the same y scale."""
    data = [(c, [(float(s["sched"]), s["ttft"] * 1000) for s in c.measured if s["ttft"] is not None]) for c in run.cells]
    top = max((y for _, pts in data for _, y in pts), default=0.0)
    if not top:
        return []
    unit, factor = time_axis(top)
    y_max = top * factor
    return [chart([Series(c.key, [(x, y * factor) for x, y in pts], "dots")], f"{tag}timeline of {c.key}: TTFT by send time",
                  "seconds since the cell's start", f"TTFT {unit}", y_max=y_max) for c, pts in data if pts]  # fmt: skip


def _speedup_rows(rows: Sequence[Comparison]) -> list[tuple[str, Optional[float], Optional[float], Optional[float]]]:
    out: list[tuple[str, Optional[float], Optional[float], Optional[float]]] = []
    for r in rows:
        lo, hi = r.speedup_range()  # an open side (P99 from a few requests): the whisker runs to 0 or the plot's edge
        out.append((f"{r.cell}: {r.metric} {r.pct}", r.speedup, lo, hi))
    return out


# Helpers other reports build on (the experiment report): seconds in, milliseconds out, the old call shapes.
_COLOURS = COLOURS


def _cdf(values: Sequence[float]) -> list[tuple[float, float]]:
    """CDF points (ms, share) of values in seconds."""
    return _cdf_points([v * 1000 for v in values], 1.0)


def _svg(series: Sequence[tuple[str, Sequence[tuple[float, float]], bool]], title: str, xlabel: str, ylabel: str) -> str:
    """``(name, points, dots)`` series in one `chart` (round ticks, legend outside the data)."""
    return chart([Series(name, pts, "dots" if dots else "line") for name, pts, dots in series], title, xlabel, ylabel)


def render_html(run: BenchRun, standalone: bool = True) -> str:
    """The report as HTML (a whole page, or a fragment for notebooks)."""
    tag = "EMULATED — " if run.emulated else ""
    cfg = run.config
    parts = [f"<h2>{_e(tag)}latencykit bench: {_e(cfg.get('traffic'))} traffic, target {_e(cfg.get('target', {}).get('kind'))}</h2>",
             f'<p class="dim">{_e(header_text(run))}</p>']  # fmt: skip
    parts += [f"<p>{_e(line)}</p>" for line in cluster_lines(run)]
    if run.partial:
        parts.append(f'<p class="bad">PARTIAL RUN: {_e(run.partial)}</p>')
    found = max_rate_lines(run)
    if found:
        parts.append(f"<h3>{_e(found[0])}</h3>" + "".join(f"<p>{_e(t)}</p>" for t in found[1:]))
    parts.append(_kv("configuration", _config_rows(run)) + _kv("environment", _env_rows(run)))
    parts += [_cell_html(c, run) for c in run.cells]
    plots = [_cdf_chart(run, "ttft", "CDF of TTFT (from the intended send)", tag), _cdf_chart(run, "e2e", "CDF of E2E", tag),
             _load_chart(run, tag), *_rate_charts(run, tag), _pareto_chart(run, tag), *_timelines(run, tag)]  # fmt: skip
    rows = strategy_table(run)
    if rows:
        base = baseline_name(run)
        plots.append(bars(_speedup_rows(rows), f"{tag}speed-up against the baseline cell '{base}' (95% CI)",
                          "speed-up (baseline / this cell; > 1 is faster)"))  # fmt: skip
    parts.append('<div class="plots">' + "\n".join(p for p in plots if p) + "</div>")
    if rows:
        parts.append(grid_html(comparison_grid(rows, f"strategy comparison against the baseline cell '{baseline_name(run)}'")))
    body = "\n".join(parts)
    if not standalone:
        return f'<div class="latencykit-bench-run">{body}</div>'
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>latencykit bench</title><style>{_STYLE}</style>"
            f"</head><body>{body}</body></html>")  # fmt: skip
