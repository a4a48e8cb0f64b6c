"""The report of a run: per cell the headline table, throughput, goodput, cache and cold splits,
errors, the client's health and warnings; then the strategy comparison against its named baseline.

Built once as `Grid` and `Line` blocks (`report_blocks`), printed by rich on a terminal
(`print_report`), or rendered as Markdown (`report_markdown`) or JSON (`report_json`) for
``latencykit bench --format``. A confidence interval is printed with its estimate's precision.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from ..bench._cell import BenchRun, Cell
from ..bench._compare import Comparison, ErrorComparison, strategy_table
from ._grid import Grid, Line, make_console, markdown
from ..bench._stats import QUANTILES, Pct, parse_slo, percentiles

__all__ = [
    "METRIC_NAMES", "baseline_name", "cell_slos", "cluster_lines", "comparison_grid", "error_grid", "header_text", "health_text",
    "limiting_node", "limiting_text", "max_rate_lines", "node_health",
    "metrics_grid", "ms", "partial_text", "pct_text", "print_report", "rate", "report_blocks", "report_json",
    "report_markdown", "sessions_lines", "split_text", "throughput_line",
]  # fmt: skip

METRIC_NAMES = {
    "ttft": "TTFT",
    "ttft_service": "TTFT service",
    "ttfo": "TTFO",
    "queue": "queueing",
    "tpot": "TPOT",
    "itl_token": "ITL per token",
    "itl_chunk": "ITL per chunk",
    "e2e": "E2E",
    "e2e_service": "E2E service",
}
LEGEND = (
    "TTFT and E2E count from the intended send time (queueing included); 'service' from the actual send. "
    "TTFO: the answer's first token (after any reasoning). "
    "ITL per token: chunk gaps / tokens in the chunk (per-chunk usage); per chunk: raw gaps. "
    "[95% CI]; ~ = too few samples for that percentile."
)


def ms(v: Optional[float], digits: int = 1) -> str:
    """Seconds as milliseconds text (``-`` for no value)."""
    return "-" if v is None else f"{v * 1000:,.{digits}f}"


def pct_text(p: Pct, ci: bool) -> str:
    """``6.8 [6.7–6.9]``: the estimate and its 95 % interval at the same precision; ``~`` when n is too small.

    A side the sample does not bound reads ``≤``/``≥`` the extreme value seen: ``~267.6 [267.6–≥267.6]``."""
    text = ms(p.value)
    if ci and p.value is not None:
        text += f" [{'≤' if p.lo_open else ''}{ms(p.lo)}–{'≥' if p.hi_open else ''}{ms(p.hi)}]"
    return text if p.reliable or p.value is None else "~" + text


def rate(v: Optional[float], unit: str = "req/s") -> str:
    """A rate with sensible digits (``2.00``, ``16.3``, ``1,839``), never ``-``-padded: ``None`` gives ``n/a``."""
    if v is None:
        return "n/a"
    digits = 0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2
    return f"{v:,.{digits}f} {unit}"


def metrics_grid(cell: Cell, title: str) -> Grid:
    """Metric × P50/P90/P95/P99/P99.9/max (ms, 95 % CI for P50 and P99; ~ = too few samples)."""
    grid = Grid(title, ("metric", "n", "p50 ms", "p90", "p95", "p99", "p99.9", "max"), right=frozenset(range(1, 8)))
    for metric, name in METRIC_NAMES.items():
        sk = cell.sketches[metric]
        if not sk.count or (metric == "ttfo" and not reasoned(cell)):
            continue
        ps = percentiles(sk)
        grid.rows.append((name, f"{sk.count:,}", *(pct_text(ps[q], q in (0.5, 0.99)) for q in QUANTILES), ms(sk.max)))
    return grid


def reasoned(cell: Cell) -> bool:
    """Whether some request reasoned before answering (its answer began after its first token, or
    it billed reasoning tokens): only then is a TTFO row more than a copy of the TTFT row."""
    return any(s.get("reasoning_tok") or (s.get("ttfo") is not None and s.get("ttfo") != s.get("ttft")) for s in cell.samples)


def throughput_line(cell: Cell) -> str:
    """Offered / drawn / sent / completed rates and the request counts, each over its window (`_rates`)."""
    tp = cell.throughput()
    load = cell.load
    parts = []
    if load.get("mode") == "open":
        sched = cell.schedule or {}
        drawn = (f"{sched.get('arrivals')} arrivals drawn over {sched.get('window_s') or 0:.1f} s = {rate(tp['drawn_rps'])}"
                 if sched else "")  # fmt: skip
        if load.get("arrivals") == "recorded":
            speed = load.get("rate") or 1
            parts.append(f"offered the recorded times at {speed:g}× speed" + (f" ({drawn})" if drawn else ""))
        elif load.get("sessions"):
            parts.append(f"sessions arriving at {rate(load.get('rate'), 'sessions/s')} (each turn sent on the answer before it)")
        else:
            parts.append(f"offered {rate(tp['offered_rps'])}" + (f" ({drawn})" if drawn else ""))
        parts.append(f"sent {rate(tp['sent_rps'])}")
    parts.append(f"completed {rate(tp['completed_rps'])}")
    parts.append(rate(tp["output_tps"], "output tok/s"))
    thin_n = sum(1 for s in cell.samples if s.get("client") == "thin")
    counts = (f"scheduled {cell.scheduled}, sent {len(cell.samples)}{f' ({thin_n} by the thin control)' if thin_n else ''}, "
              f"unsent {len(cell.unsent_waits)}, warm-up excluded {sum(1 for s in cell.samples if s['warmup'])}, "
              f"window {tp['window_s'] or 0:.1f} s")  # fmt: skip
    return "throughput: " + ", ".join(parts) + "; " + counts


def cell_slos(texts: Sequence[str]) -> list[Any]:
    """Presets plus custom SLOs."""
    from ..bench._cell import SLO_PRESETS

    return [*SLO_PRESETS, *(parse_slo(t) for t in texts)] if texts else list(SLO_PRESETS)


def split_text(cell: Cell, key: str) -> Optional[str]:
    """``hit n=6 p50 … / p99 … ms; miss …`` for ``key`` ``"cache"`` or ``"cold"``, or ``None`` when not split."""
    groups = cell.split(key)
    if not (len(groups) > 1 or key == "cache" and "hit" in groups):
        return None
    parts = []
    for g, sk in sorted(groups.items()):
        p = percentiles(sk, [0.5, 0.99])
        parts.append(f"{g} n={sk.count} p50 {ms(p[0.5].value)} / p99 {ms(p[0.99].value)} ms")
    return "; ".join(parts)


def sessions_lines(cell: Cell, think: Optional[str] = None) -> list[str]:
    """Sessions traffic: TTFT of turn 1 against turns 2+ (with the share of their prompts read from the cache), per
    turn, the sessions' time and completeness, and the think time measured against the stated one; ``[]`` otherwise."""
    st = cell.sessions()
    if st is None:
        return []

    def group(g: dict[str, Any]) -> str:
        share = g.get("cached_share")
        cached = "" if share is None else f", {share:.0%} of the prompt cached"
        return f"n={g['n']} p50 {ms(g['ttft_p50_s'])} / p95 {ms(g['ttft_p95_s'])} ms{cached}"

    out = [f"TTFT by turn (from the intended send: the previous answer's end + think time): turn 1 {group(st['first'])}; "
           f"turns 2+ {group(st['later'])}"]  # fmt: skip
    if 2 < len(st["turns"]) <= 12:
        out.append("per turn: " + "; ".join(f"{k}: p50 {ms(g['ttft_p50_s'])} ms" + (
            "" if g.get("cached_share") is None else f" ({g['cached_share']:.0%} cached)") for k, g in st["turns"].items()))
    span = ("" if st["session_p50_s"] is None else
            f"; session time p50 {st['session_p50_s']:.2f} s / p95 {st['session_p95_s']:.2f} s (first intended send → last answer)")
    out.append(f"sessions: {st['sessions']} started, {st['complete']} completed every turn{span}; "
               f"{st['turns_not_sent']} turn(s) not sent (cut off by --duration, or after a failed turn)")  # fmt: skip
    if st["think_n"]:
        stated = ""
        if think:
            from ..bench._sessions import parse_think

            stated = f"stated {think} (mean {ms(parse_think(think).mean, 0)} ms); "
        out.append(f"think time: {stated}measured from each answer's end to the next turn's send: mean "
                   f"{ms(st['think_mean_s'], 0)} ms, p50 {ms(st['think_p50_s'], 0)} ms (n={st['think_n']})")  # fmt: skip
    return out


def max_rate_lines(run: BenchRun) -> list[str]:
    """``--find-max-rate``: the highest rate meeting every SLO with the interval the knee lies in, the first failing
    rate and what it broke, the saturation signs there, how the search stopped; ``[]`` for other runs."""
    m = run.sections.get("max_rate")
    if not isinstance(m, dict):
        return []
    slos = ", ".join(m.get("slos") or [])
    steps = m.get("steps") or []
    how = (f"{len(steps)} step(s) in {m.get('elapsed_s') or 0:.0f} s, stopped: {m.get('stopped')}"
           f" (bound {m.get('max_duration_s') or 0:g} s, tolerance {100 * (m.get('tolerance') or 0):g}%)")  # fmt: skip
    out = []
    if m.get("rps") is None:
        unfit = m.get("unfit_step") if not steps else None
        if m.get("stopped") == "first step fails":
            why = f"the first step, {m.get('start_rps'):g} req/s, already fails; start lower with --rate"
        elif unfit:
            why = (f"the first step, {unfit['rate_rps']:g} req/s, needs {unfit['duration_s'] + unfit['warmup_s']:.1f} s, "
                   "more than the bound; raise --rate or --max-duration")  # fmt: skip
        else:
            why = "no step passed"
        out.append(f"max rate meeting every SLO ({slos}): none found — {why}; {how}")
    else:
        lo, hi = m.get("interval_rps") or [None, None]
        where = f"the knee lies in [{lo:g}, {hi:g}] req/s" if hi is not None else f"no failing rate found above it"
        out.append(f"max rate meeting every SLO ({slos}): {m['rps']:g} req/s — {where}; {how}")
    if m.get("first_failing_rps") is not None:
        broke = "; ".join(f"{v['slo']}: {v['misses']} of {v['n']} missed, value {ms(v['value_s'])} ms "
                          f"[{ms(v['ci_s'][0])}–{ms(v['ci_s'][1])}]" for v in m.get("at_first_failing") or [] if v["verdict"] == "fail")
        out.append(f"first failing rate: {m['first_failing_rps']:g} req/s broke {broke}")
        signs = m.get("saturation") or []
        out.append("saturation there: " + ("; ".join(signs) if signs else "none seen (the SLO is tighter than the server's room)"))
    for step in steps:
        slo_text = "; ".join(f"{v['slo']} {v['verdict']} ({v['misses']}/{v['n']} missed, value {ms(v['value_s'])} ms)"
                             for v in step["slos"])  # fmt: skip
        warm = step.get("warmup_s")
        span = f"{step['duration_s']:.1f} s" + (f" after {warm:.1f} s of warm-up" if warm else "")
        kept = (f"served {rate(step['served_rps'])} of {rate(step['arrived_rps'])} arriving" if step.get("served_rps") is not None
                else f"completed {rate(step['completed_rps'])}")  # (run files before served_rps)
        out.append(f"  step {step['rate_rps']:g} req/s: {step['verdict'].upper()} by {step['decided_by']}, "
                   f"{span}, {kept} — {slo_text}")  # fmt: skip
        if step.get("drift"):
            out.append("    still drifting: " + "; ".join(step["drift"]))
    return out


def health_text(cell: Cell, h: dict[str, Any]) -> str:
    """One client process's CPU, event-loop lag, dispatcher lateness (open loop only) and peak in flight."""
    if h.get("node") is not None:  # a cluster worker: its node first
        who = f" node {h['node']} ({h.get('host')}) worker {h.get('worker')}:"
    else:
        who = f" worker {cell.health.index(h)}:" if len(cell.health) > 1 else ":"
    if not h:
        return f"client{who} no health figures (lost before it measured)"
    late = h.get("dispatch_late_p99")
    dispatch = f", dispatcher late p99 {ms(late)} ms" if late is not None else ""
    return (f"client{who} {h['cpu_s']:.1f} s CPU over {h['wall_s']:.1f} s ({h['cores'] or 0:.2f} cores), event-loop lag "
            f"p50 {ms(h['loop_lag_p50'])} / p99 {ms(h['loop_lag_p99'])} ms{dispatch}, max in flight {h['max_in_flight']}")  # fmt: skip


def partial_text(cell: Cell, total: Optional[int]) -> Optional[str]:
    """``PARTIAL: interrupted (Ctrl-C): 34 of 200 requests finished, 2 in flight cut`` or ``None``; for cluster
    workers lost mid-cell also their finished-but-lost and unsent requests."""
    if cell.partial is None:
        return None
    cut = cell.partial.get("cut") or 0
    of = f" of {total}" if total else ""
    text = f"PARTIAL: {cell.partial.get('reason', 'partial')}: {len(cell.samples)}{of} requests finished" + (
        f", {cut} in flight cut (not measured)" if cut else "")
    lost, unsent = cell.partial.get("finished_lost") or 0, cell.partial.get("unsent") or 0
    if cell.partial.get("workers_lost"):
        text += f", {lost} finished on the lost worker(s) and lost with them, {unsent} never sent"
    return text


def node_health(cell: Cell) -> dict[int, dict[str, Any]]:
    """Cluster runs: per node, its workers' worst event-loop lag p99, cores used and load average."""
    out: dict[int, dict[str, Any]] = {}
    for h in cell.health:
        if h.get("node") is None or "loop_lag_p99" not in h:
            continue
        n = out.setdefault(int(h["node"]), {"node": int(h["node"]), "host": h.get("host"), "workers": 0, "loop_lag_p99": 0.0,
                                             "cores": 0.0, "load_average": h.get("load_average")})  # fmt: skip
        n["workers"] += 1
        n["loop_lag_p99"] = max(n["loop_lag_p99"], h.get("loop_lag_p99") or 0.0)
        n["cores"] = max(n["cores"], h.get("cores") or 0.0)
    return out


def limiting_node(cell: Cell) -> Optional[dict[str, Any]]:
    """The node whose client fell furthest behind (worst event-loop lag p99, then busiest core), when workers ran
    on more than one node; ``None`` otherwise."""
    nodes = node_health(cell)
    if len(nodes) < 2:
        return None
    return max(nodes.values(), key=lambda n: (n["loop_lag_p99"], n["cores"]))


def limiting_text(cell: Cell) -> Optional[str]:
    """``node that limited the run: node 1 (vm): event-loop lag p99 41 ms, 0.93 cores — client-bound`` or ``None``."""
    n = limiting_node(cell)
    if n is None:
        return None
    verdict = " — client-bound there" if cell.client_bound else " (within its means: no node was client-bound)"
    return (f"node that limited the run: node {n['node']} ({n['host']}): event-loop lag p99 {ms(n['loop_lag_p99'])} ms, "
            f"{n['cores']:.2f} cores{verdict}")  # fmt: skip


def cluster_lines(run: BenchRun) -> list[str]:
    """Cluster runs: the address, then one line per node (host, address, workers, clock offset ± uncertainty)."""
    c = run.env.get("cluster")
    if not c:
        return []
    nodes = c.get("nodes") or []
    workers = sum(len(n.get("workers") or []) for n in nodes)
    up = f"; local cluster up in {c['local_start_s']:.1f} s" if c.get("local_start_s") else ""
    out = [f"cluster {c.get('address')}: {len(nodes)} node(s), {workers} worker(s){up}"]
    for n in nodes:
        clock = n.get("clock") or {}
        skewed = [w for w in c.get("workers") or [] if w.get("node") == n.get("node")
                  and abs((w.get("offset_s") or 0.0) - (clock.get("offset_s") or 0.0)) > 0.001]  # fmt: skip
        extra = "".join(f"; worker {w['worker']} clock {_offset(w)}" for w in skewed)
        out.append(f"  node {n.get('node')}: {n.get('host')} {n.get('ip')}, {len(n.get('workers') or [])} worker(s), "
                   f"{n.get('cpus') or 0:g} CPU; clock offset {_offset(clock)}{extra}")  # fmt: skip
    for x in c.get("lost") or []:
        out.append(f"  LOST worker {x['worker']} (node {x['node']}): {x['error']} — {x['finished_lost']} finished and lost, "
                   f"{x['in_flight']} in flight, {x['unsent']} unsent")  # fmt: skip
    return out


def _offset(clock: dict[str, Any]) -> str:
    off, unc = clock.get("offset_s"), clock.get("uncertainty_s")
    if off is None:
        return "n/a"
    return f"{off * 1000:+.1f} ± {(unc or 0) * 1000:.1f} ms"


def cache_cost_text(cell: Cell, target: dict[str, Any]) -> Optional[str]:
    """``cache: read … / written … tokens (writes 1.25×, reads 0.1×): est. input cost saved …`` over the
    measured requests, priced for the target's model (`core._cache_facts.cache_prices`); ``None`` without cache usage."""
    from ..core._cache_facts import cache_prices

    samples = [s for s in cell.measured if s.get("cache_read") is not None]
    if not samples:
        return None
    read, written = sum(s["cache_read"] for s in samples), sum(s.get("cache_write") or 0 for s in samples)
    # OpenAI's usage says what was read from the cache, never what was written: "not reported", as cache_report()'s "unknown"
    reported = any(s.get("cache_write") is not None for s in samples)
    total = sum(s.get("in_tok") or 0 for s in samples)
    m = cache_prices("anthropic" if target.get("api") == "anthropic" else "openai", target.get("model"))
    saved = read * (1 - m["read"]) - written * (m["write_5m"] - 1)
    share = f" ({saved / total:.0%})" if total else ""
    amounts = f"read {read:,} / written {written:,} tokens" if reported else f"read {read:,} tokens, written not reported by the API"
    return (f"cache: {amounts} (writes {m['write_5m']:g}×, reads {m['read']:g}× input): "
            f"est. input cost saved {saved:,.0f} token-equivalents{share}")


def cell_blocks(cell: Cell, emulated: bool, slos: Sequence[str] = (), total: Optional[int] = None,
                target: Optional[dict[str, Any]] = None, think: Optional[str] = None) -> list[Any]:
    """One cell's blocks."""
    tag = "EMULATED " if emulated else ""
    out: list[Any] = [metrics_grid(cell, f"{tag}{cell.key}" + (" — PARTIAL" if cell.partial else "")), Line(LEGEND, "dim")]
    partial = partial_text(cell, total)
    if partial:
        out.append(Line(partial, "error"))
    out.append(Line(throughput_line(cell)))
    good = cell.goodput(cell_slos(slos))
    out.append(Line("goodput: " + "; ".join(f"{g['slo']}: {(g['attainment'] or 0) * 100:.0f}% ({rate(g['good_rps'])})" for g in good)))
    for key, title in (("cache", "TTFT by cache"), ("cold", "TTFT cold vs warm")):
        text = split_text(cell, key)
        if text:
            out.append(Line(f"{title}: {text}"))
    out += [Line(text) for text in sessions_lines(cell, think)]
    verdicts = cell.verdicts()
    if verdicts:
        out.append(Line("cache verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items()))))
    cost = cache_cost_text(cell, target or {})
    if cost:
        out.append(Line(cost))
    n = len(cell.measured)
    if n:
        out.append(Line("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(cell.outcomes().items())) + f" (of {n} measured)"))
    if cell.no_data:
        out.append(Line(cell.no_data, "error"))
    elif cell.first_error:
        out.append(Line(f"first error: {cell.first_error}"))
    out += [Line(health_text(cell, h)) for h in cell.health]
    limit = limiting_text(cell)
    if limit:
        out.append(Line(limit, "warning" if cell.client_bound else ""))
    thin = cell.control["ttft_service"]
    if thin.count:
        mine, ctl = cell.value("ttft_service", 0.5), thin.quantile(0.5)
        diff = None if mine is None or ctl is None else mine - ctl
        out.append(Line(f"client overhead: TTFT p50 {ms(mine)} ms through the client vs {ms(ctl)} ms for the thin reader "
                        f"(n={thin.count}, interleaved): {'+' if (diff or 0) >= 0 else ''}{ms(diff)} ms"))  # fmt: skip
    if cell.server:
        f, later = cell.server.get("first", {}), cell.server.get("later", {})
        if f.get("p99") is not None or later.get("p99") is not None:
            out.append(Line(f"server (emulator): chunks left late by p99 {ms(f.get('p99'))} ms (first) / "
                            f"{ms(later.get('p99'))} ms (later) against their deadlines"))  # fmt: skip
    out += [Line(w, "warning") for w in cell.warnings]
    return out


def comparison_grid(rows: Sequence[Comparison], title: str, base_name: str = "baseline") -> Grid:
    """Base vs new per metric percentile, with change, speed-up and significance."""
    grid = Grid(title, ("cell", "metric", f"{base_name} ms [CI]", "new ms [CI]", "change", "speed-up", "beyond noise"),
                right=frozenset({2, 3, 4, 5}))  # fmt: skip
    for c in rows:
        change = "n/a" if c.change is None else f"{c.change * 100:+.1f}%"
        speed = "n/a" if c.speedup is None else f"{c.speedup:.2f}×"
        grid.rows.append((c.cell, f"{c.metric} {c.pct}", pct_text(c.base, True), pct_text(c.new, True), change, speed,
                          "yes" if c.significant else "no"))  # fmt: skip
    return grid


def error_grid(rows: Sequence[ErrorComparison], title: str, base_name: str = "baseline") -> Grid:
    """Failed requests per cell, base vs new: counts, shares, the rise in points and its one-sided p-value."""
    grid = Grid(title, ("cell", f"{base_name} failed", "new failed", "change", "p (higher)"), right=frozenset({1, 2, 3, 4}))

    def share(failed: int, n: int) -> str:
        return f"{failed} of {n}" + (f" ({failed / n * 100:.1f}%)" if n else "")

    for e in rows:
        change = "n/a" if e.increase is None else f"{e.increase * 100:+.1f} pts"
        grid.rows.append((e.cell, share(e.base_failed, e.base_n), share(e.new_failed, e.new_n), change, f"{e.p_value:.2g}"))
    return grid


def baseline_name(run: BenchRun) -> str:
    """The baseline cell(s) of the strategy comparison: the first strategy measured at each load level."""
    firsts: dict[str, Cell] = {}
    for c in run.cells:
        firsts.setdefault(c.level, c)
    return " / ".join(dict.fromkeys(c.label for c in firsts.values()))


def header_text(run: BenchRun) -> str:
    """The run's first line: emulated or measured, target, traffic and how many requests per cell."""
    cfg = run.config
    target = cfg.get("target", {})
    head = "EMULATED latencies (latencykit emulator, seeded timing model)" if run.emulated else "measured latencies"
    n = cfg.get("request_count", cfg.get("requests"))
    traffic = f"replay of {cfg.get('replay')}" if cfg.get("traffic") == "replay" else cfg.get("traffic")
    text = (f"latencykit bench — {head}; target {target.get('kind')} ({target.get('api')} API, model {target.get('model')}); "
            f"traffic {traffic} ×{n} per cell, seed {cfg.get('seed')}; " + _workers_text(run))  # fmt: skip
    if cfg.get("forced"):
        text += "; FORCED MERGE of runs that differ: " + " | ".join(cfg["forced"])
    return text


def _workers_text(run: BenchRun) -> str:
    c = run.env.get("cluster")
    if not c:
        return f"workers {run.config.get('workers')}"
    return f"workers {len(c.get('workers') or [])} on {len(c.get('nodes') or [])} node(s) of --cluster {c.get('address')}"


def report_blocks(run: BenchRun) -> list[Any]:
    """The whole report as `Grid` / `Line` blocks."""
    cfg = run.config
    out: list[Any] = [Line(header_text(run), "strong")]
    out += [Line(text) for text in cluster_lines(run)]
    if run.partial:
        out.append(Line(f"PARTIAL RUN: {run.partial}", "error"))
    total = cfg.get("request_count", cfg.get("requests"))
    for cell in run.cells:
        out += cell_blocks(cell, run.emulated, cfg.get("slos") or (), total, cfg.get("target"),
                           cfg.get("think") if cfg.get("traffic") == "sessions" else None)  # fmt: skip
    found = max_rate_lines(run)
    if found:
        out += [Line(found[0], "strong"), *(Line(t) for t in found[1:])]
    rows = strategy_table(run)
    if rows:
        out.append(comparison_grid(rows, f"strategy comparison: each cell against the baseline cell '{baseline_name(run)}' "
                                         "at its load level" + (" — EMULATED" if run.emulated else ""), "baseline"))  # fmt: skip
    return out


def print_report(run: BenchRun, console: Optional[Any] = None) -> None:
    """The whole report for a run, on a rich console (full width when not a terminal: `make_console`)."""
    console = console or make_console()
    for block in report_blocks(run):
        if isinstance(block, Grid):
            console.print(block.rich())
        else:
            console.print(block.rich(), highlight=False)


def report_markdown(run: BenchRun) -> str:
    """The report as Markdown (``--format markdown``)."""
    return markdown(report_blocks(run))


def report_json(run: BenchRun) -> dict[str, Any]:
    """The report's figures as JSON-friendly data (``--format json``): per cell the summary (seconds), rates,
    goodput, outcomes, cache verdicts and warnings; the strategy comparison with its baseline."""
    cfg = run.config
    cells = []
    for c in run.cells:
        cells.append({
            "key": c.key, "label": c.label, "level": c.level, "partial": c.partial, "summary": c.summary(),
            "throughput": c.throughput(), "goodput": c.goodput(cell_slos(cfg.get("slos") or ())), "outcomes": c.outcomes(),
            "cache_verdicts": c.verdicts(), "warnings": c.warnings, "no_data": c.no_data, "schedule": c.schedule,
            "sessions": c.sessions(),
            "nodes": list(node_health(c).values()) or None, "limiting_node": limiting_node(c),
        })  # fmt: skip
    rows = strategy_table(run)
    return {"emulated": run.emulated, "partial": run.partial, "header": header_text(run), "cluster": run.env.get("cluster"), "cells": cells,
            "max_rate": run.sections.get("max_rate"),
            "comparison": {"baseline": baseline_name(run), "rows": [r.to_dict() for r in rows]} if rows else None}  # fmt: skip
