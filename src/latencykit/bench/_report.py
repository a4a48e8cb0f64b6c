"""The terminal report (rich): per cell the headline table, throughput, goodput, cache and
cold splits, errors, the client's health and warnings; then the strategy comparison."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ._cell import BenchRun, Cell
from ._compare import Comparison, ErrorComparison, strategy_table
from ._stats import QUANTILES, Pct, parse_slo, percentiles

__all__ = ["METRIC_NAMES", "error_table", "print_comparison", "print_report"]

METRIC_NAMES = {
    "ttft": "TTFT",
    "ttft_service": "TTFT service",
    "queue": "queueing",
    "tpot": "TPOT",
    "itl_token": "ITL per token",
    "itl_chunk": "ITL per chunk",
    "e2e": "E2E",
    "e2e_service": "E2E service",
}
LEGEND = (
    "TTFT and E2E count from the intended send time (queueing included); 'service' from the actual send. "
    "ITL per token: chunk gaps / tokens in the chunk (per-chunk usage); per chunk: raw gaps. "
    "[95% CI]; ~ = too few samples for that percentile."
)


def ms(v: Optional[float], digits: int = 1) -> str:
    """Seconds as milliseconds text."""
    return "-" if v is None else f"{v * 1000:,.{digits}f}"


def _cell_pct(p: Pct, ci: bool) -> str:
    text = ms(p.value)
    if ci and p.value is not None:
        text += f" [{ms(p.lo, 0)}–{ms(p.hi, 0)}]"
    return text if p.reliable or p.value is None else "~" + text


def metrics_table(cell: Cell, title: str) -> Table:
    """Metric × P50/P90/P95/P99/P99.9 (ms, 95 % CI for P50 and P99; ~ = too few samples)."""
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    table.add_column("n", justify="right")
    for name in ("p50 ms", "p90", "p95", "p99", "p99.9", "max"):
        table.add_column(name, justify="right")
    for metric, name in METRIC_NAMES.items():
        sk = cell.sketches[metric]
        if not sk.count:
            continue
        ps = percentiles(sk)
        row = [_cell_pct(ps[q], q in (0.5, 0.99)) for q in QUANTILES]
        table.add_row(name, f"{sk.count:,}", *row, ms(sk.max))
    return table


def _rate(v: Optional[float], unit: str = "req/s") -> str:
    return "-" if v is None else f"{v:,.1f} {unit}"


def print_cell(cell: Cell, console: Console, emulated: bool, slos: Sequence[str] = ()) -> None:
    """One cell's block."""
    tag = "EMULATED " if emulated else ""
    console.print(metrics_table(cell, f"{tag}{cell.key}"))
    console.print(f"[dim]{LEGEND}[/dim]")
    tp = cell.throughput()
    meas = cell.measured
    sent = len(cell.samples)
    thin_n = sum(1 for s in cell.samples if s.get("client") == "thin")
    console.print(
        f"throughput: offered {_rate(tp['offered_rps'])}, sent {_rate(tp['sent_rps'])}, completed "
        f"{_rate(tp['completed_rps'])}, {_rate(tp['output_tps'], 'output tok/s')}; scheduled {cell.scheduled}, "
        f"sent {sent}{f' ({thin_n} by the thin control)' if thin_n else ''}, [bold]unsent {len(cell.unsent_waits)}[/bold], warm-up excluded "
        f"{sum(1 for s in cell.samples if s['warmup'])}, window {cell.window_s or 0:.1f} s"
    )
    objectives = [*cell_slos(slos)]
    good = cell.goodput(objectives) if objectives else cell.goodput()
    console.print("goodput: " + "; ".join(
        f"{g['slo']}: {(g['attainment'] or 0) * 100:.0f}% ({_rate(g['good_rps'])})" for g in good))  # fmt: skip
    for key, title in (("cache", "TTFT by cache"), ("cold", "TTFT cold vs warm")):
        groups = cell.split(key)
        if len(groups) > 1 or key == "cache" and "hit" in groups:
            parts = []
            for g, sk in sorted(groups.items()):
                p = percentiles(sk, [0.5, 0.99])
                parts.append(f"{g} n={sk.count} p50 {ms(p[0.5].value)} / p99 {ms(p[0.99].value)} ms")
            console.print(f"{title}: " + "; ".join(parts))
    verdicts = cell.verdicts()
    if verdicts:
        console.print("cache verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())))
    console.print("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(cell.outcomes().items())) + f" (of {len(meas)})")
    if cell.no_data:
        console.print(f"[bold red]{escape(cell.no_data)}[/bold red]", highlight=False)
    elif cell.first_error:
        console.print(f"first error: {escape(cell.first_error)}", highlight=False)
    for h in cell.health:
        console.print(_health_line(cell, h))
    thin = cell.control["ttft_service"]
    if thin.count:
        mine, ctl = cell.value("ttft_service", 0.5), thin.quantile(0.5)
        diff = None if mine is None or ctl is None else mine - ctl
        console.print(f"client overhead: TTFT p50 {ms(mine)} ms through the client vs {ms(ctl)} ms for the thin reader "
                      f"(n={thin.count}, interleaved): {'+' if (diff or 0) >= 0 else ''}{ms(diff)} ms")  # fmt: skip
    if cell.server:
        f, later = cell.server.get("first", {}), cell.server.get("later", {})
        console.print(f"server (emulator): chunks left late by p99 {ms(f.get('p99'))} ms (first) / "
                      f"{ms(later.get('p99'))} ms (later) against their deadlines")  # fmt: skip
    for w in cell.warnings:
        console.print(f"[bold yellow]warning[/bold yellow] {w}")


def _health_line(cell: Cell, h: dict[str, Any]) -> str:
    who = f" worker {cell.health.index(h)}:" if len(cell.health) > 1 else ":"
    return (f"client{who} {h['cpu_s']:.1f} s CPU over {h['wall_s']:.1f} s ({h['cores'] or 0:.2f} cores), event-loop lag "
            f"p50 {ms(h['loop_lag_p50'])} / p99 {ms(h['loop_lag_p99'])} ms, dispatcher late p99 "
            f"{ms(h['dispatch_late_p99'])} ms, max in flight {h['max_in_flight']}")  # fmt: skip


def cell_slos(texts: Sequence[str]) -> list[Any]:
    """Presets plus custom SLOs."""
    from ._cell import SLO_PRESETS

    return [*SLO_PRESETS, *(parse_slo(t) for t in texts)] if texts else list(SLO_PRESETS)


def comparison_table(rows: Sequence[Comparison], title: str, base_name: str = "baseline") -> Table:
    """Base vs new per metric percentile, with change, speed-up and significance."""
    table = Table(title=title, title_justify="left")
    for name, right in (("cell", False), ("metric", False), (f"{base_name} ms [CI]", True), ("new ms [CI]", True),
                        ("change", True), ("speed-up", True), ("beyond noise", False)):  # fmt: skip
        table.add_column(name, justify="right" if right else "left")
    for c in rows:
        change = "-" if c.change is None else f"{c.change * 100:+.1f}%"
        speed = "-" if c.speedup is None else f"{c.speedup:.2f}×"
        table.add_row(c.cell, f"{c.metric} {c.pct}", _cell_pct(c.base, True), _cell_pct(c.new, True), change, speed,
                      "yes" if c.significant else "no")  # fmt: skip
    return table


def error_table(rows: Sequence[ErrorComparison], title: str, base_name: str = "baseline") -> Table:
    """Failed requests per cell, base vs new: counts, shares, the rise in points and its one-sided p-value."""
    table = Table(title=title, title_justify="left")
    for name, right in (("cell", False), (f"{base_name} failed", True), ("new failed", True), ("change", True),
                        ("p (higher)", True)):  # fmt: skip
        table.add_column(name, justify="right" if right else "left")

    def share(failed: int, n: int) -> str:
        return f"{failed} of {n}" + (f" ({failed / n * 100:.1f}%)" if n else "")

    for e in rows:
        change = "-" if e.increase is None else f"{e.increase * 100:+.1f} pts"
        table.add_row(e.cell, share(e.base_failed, e.base_n), share(e.new_failed, e.new_n), change, f"{e.p_value:.2g}")
    return table


def print_comparison(rows: Sequence[Comparison], console: Console, title: str) -> None:
    """Print a comparison table."""
    console.print(comparison_table(rows, title))


def print_report(run: BenchRun, console: Optional[Console] = None) -> None:
    """The whole report for a run."""
    console = console or Console()
    cfg = run.config
    target = cfg.get("target", {})
    head = "[bold]EMULATED[/bold] latencies (latencykit emulator, seeded timing model)" if run.emulated else "measured latencies"
    console.print(f"latencykit bench — {head}; target {target.get('kind')} ({target.get('api')} API, model "
                  f"{target.get('model')}); traffic {cfg.get('traffic')} ×{cfg.get('requests')} seed {cfg.get('seed')}; "
                  f"workers {cfg.get('workers')}")  # fmt: skip
    for cell in run.cells:
        print_cell(cell, console, run.emulated, cfg.get("slos") or ())
    rows = strategy_table(run)
    if rows:
        print_comparison(rows, console, "strategy comparison (each against the first strategy at its load level)"
                         + (" — EMULATED" if run.emulated else ""))  # fmt: skip
