"""The experiment's terminal report (rich): the article's strategy table, measured, in three parts
that fit 80 columns.

1. latency: per strategy and load level, TTFT P50/P95/P99, TPOT P50/P99 and E2E P99 in ms, each
   with its speed-up against the baseline (``*`` = beyond noise: the 95 % intervals do not
   overlap);
2. throughput, goodput under the SLO, and the claim's verdict;
3. cost: cold start (spawn → ready, spawn → first token, that first request's TTFT against the
   same request warm), peak memory (RSS of the process tree, GPU per device);
4. quality: task accuracy on prompts with known answers, and the answers against the
   baseline's (exact match, prefix / edit agreement, the scorer's mean);
5. decode against the physical limit: bytes read per token, the roofline TPOT at the measured
   bandwidth, the measured single-stream TPOT and the share of the limit reached, beside the
   speculative strategies' drafted and accepted tokens.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..bench._compare import Comparison
from ..experiment._run import ExperimentRun, Row
from ._report import ms

__all__ = ["cost_table", "latency_table", "limit_table", "load_table", "print_experiment", "quality_table"]

LEGEND = ("ms; under each figure its speed-up = baseline / strategy (> 1× is faster), * = beyond noise (the 95% "
          "intervals do not overlap); ~ = too few samples for that percentile; TTFT/E2E count from the intended send")  # fmt: skip


def speed(c: Optional[Comparison]) -> str:
    """``1.52×*`` (``*`` beyond noise), or ``-``."""
    if c is None or c.speedup is None:
        return "-"
    return f"{c.speedup:.2f}×" + ("*" if c.significant else "")


def _pct(row: Row, key: str) -> str:
    if row.cell is None:
        return "-"
    from ..experiment._run import _mq

    metric, q = _mq(key)
    value = row.cell.value(metric, q)
    text = short_ms(value)
    if value is not None and row.cell.sketches[metric].count < 10 / (1 - q):
        text = "~" + text
    return text if row.baseline else f"{text}\n{speed(row.comparisons.get(key))}"


def short_ms(v: Optional[float]) -> str:
    """Seconds as ms text in at most 6 characters: one decimal below 100 ms, none above."""
    if v is None:
        return "-"
    m = v * 1000
    return f"{m:.1f}" if m < 100 else f"{m:.0f}"


def gib(v: Optional[float]) -> str:
    """Bytes as MiB text (``n/a`` for none)."""
    return "n/a" if v is None else f"{v / 2**20:,.0f} MiB"


def _table(title: str, columns: Sequence[str], caption: str = "") -> Table:
    t = Table(title=escape(title), title_justify="left", caption=escape(caption) or None, caption_justify="left", box=box.SIMPLE_HEAD,
              pad_edge=False)  # fmt: skip
    for i, name in enumerate(columns):
        t.add_column(name, justify="left" if i == 0 else "right", no_wrap=i == 0)
    return t


def _name(run: ExperimentRun, row: Row, levels: int) -> str:
    name = row.strategy.name + (" (base)" if row.baseline else "")
    return name + (f"\n{row.cell.level}" if levels > 1 and row.cell is not None else "")


def latency_table(run: ExperimentRun) -> Table:
    """Part 1: latency percentiles with their speed-ups."""
    tag = "EMULATED " if run.emulated else ""
    rows = run.rows()
    levels = sorted({r.cell.level for r in rows if r.cell is not None})
    at = f" at {levels[0]}" if len(levels) == 1 else ""
    t = _table(f"{tag}{run.spec.get('name')}: latency{at}, against {run.baseline}",
               ("strategy", "TTFT P50", "P95", "P99", "TPOT P50", "P99", "E2E P99"), LEGEND)  # fmt: skip
    for row in rows:
        if row.cell is None:
            t.add_row(row.strategy.name, f"[red]failed: {escape(row.strategy.failed or 'no data')}[/red]", *([""] * 5))
            continue
        t.add_row(_name(run, row, len(levels)), *(_pct(row, k) for k in ("ttft:p50", "ttft:p95", "ttft:p99", "tpot:p50", "tpot:p99", "e2e:p99")))
    return t


def load_table(run: ExperimentRun) -> Table:
    """Part 2: throughput, goodput under the SLO, and the claim's verdict."""
    rows = run.rows()
    levels = sorted({r.cell.level for r in rows if r.cell is not None})
    slo = run.slo()
    t = _table("throughput, goodput, claim", ("strategy", "req/s", "out tok/s", "goodput", "claim"),
               f"goodput: share of requests meeting {slo.label}; claim: the measured speed-up [its 95% range]: ✓ within "
               "the claimed range, ~ outside but within noise, ✗ outside beyond noise")  # fmt: skip
    for row in rows:
        if row.cell is None:
            continue
        tp = row.throughput
        good = "-" if row.goodput is None or row.goodput["attainment"] is None else f"{row.goodput['attainment'] * 100:.0f}%"
        claim = "-" if row.claim is None else row.claim.text.replace(" (claimed", "\n(claimed")
        t.add_row(_name(run, row, len(levels)), f"{tp.get('completed_rps') or 0:.1f}", f"{tp.get('output_tps') or 0:,.0f}", good,
                  escape(claim))  # fmt: skip
    return t


def cost_table(run: ExperimentRun) -> Table:
    """Part 3: cold start and memory per strategy."""
    notes = sorted({r.gpu_note for s in run.strategies for r in s.rounds if r.gpu_note and not r.gpu})
    caption = ("ready: s from spawn to the ready path's 200; 1st tok: s from spawn to the first token of the first "
               "request; 1st/warm: ms, that request's TTFT, then the same request's after the traffic (median of 3); "
               "RSS, GPU: MiB, peak of the server's process tree") + (f"; GPU {notes[0]}" if notes else "")  # fmt: skip
    t = _table("cold start, memory", ["strategy", "ready", "1st tok", "1st/warm", "RSS", "GPU"], caption)
    for s in sorted(run.strategies, key=lambda x: x.name != run.baseline):
        f, w = s.median("first_ttft_s"), s.median("warm_ttft_s")
        cold = "-" if f is None else f"{f * 1000:.0f}/" + ("-" if w is None else f"{w * 1000:.0f}")
        gpu = s.gpu_peak()
        ready, first, rss = s.median("ready_s"), s.median("first_token_s"), s.peak("rss_peak")
        t.add_row(s.name + (" [red]failed[/red]" if s.failed else ""), "-" if ready is None else f"{ready:.2f}",
                  "-" if first is None else f"{first:.2f}", cold, "n/a" if rss is None else f"{rss / 2**20:,.0f}",
                  "/".join(f"{g / 2**20:,.0f}" for g in gpu) if gpu else "n/a")  # fmt: skip
    return t


def quality_table(run: ExperimentRun) -> Table:
    """Part 4: task accuracy and agreement with the baseline per strategy."""
    scorer = any(s.quality is not None and s.quality.score is not None for s in run.strategies)
    graded = any(s.quality is not None and s.quality.accuracy is not None for s in run.strategies)
    cols = ["strategy"] + (["accuracy"] if graded else []) + ["exact", "prefix", "edit"] + (["score"] if scorer else [])
    caption = (("accuracy: prompts answered right / prompts with a known answer; " if graded else "")
               + "exact: answers identical to the baseline's; prefix: share of the baseline's tokens matched before "
               "the first divergence; edit: 1 − edit distance / longer answer")  # fmt: skip
    t = _table("quality", cols, caption)
    for s in sorted(run.strategies, key=lambda x: x.name != run.baseline):
        q = s.quality
        cells = [s.name + (" (base)" if s.name == run.baseline else "")]
        if graded:
            cells.append("-" if q is None or q.accuracy is None else f"{q.correct:g}/{q.graded} {q.accuracy:.0%}")
        if q is None or q.exact_match is None:
            cells += ["-", "-", "-"]
        elif s.name == run.baseline:
            cells += ["base", "base", "base"]
        else:
            exact = f"{q.exact_match * 100:.0f}%"
            if s.lossless and q.exact_match < 1:
                exact = f"[bold yellow]{exact}![/bold yellow]"
            cells += [exact, f"{q.prefix_agreement or 0:.2f}", f"{q.edit_agreement or 0:.2f}"]
        if scorer:
            cells.append("-" if q is None or q.score is None else f"{q.score:.2f}")
        t.add_row(*cells)
    return t


def _acceptance(s: Any) -> str:
    spec = s.speculation() or {}
    parts = []
    for key in ("traffic", "greedy"):
        d = spec.get(key)
        if d and d.get("drafted"):
            parts.append(f"{d['rate']:.0%} of {d['drafted']:,}")
        elif d is not None:
            parts.append("0 drafted")
    return " / ".join(parts) or "-"


def limit_table(run: ExperimentRun) -> Optional[Table]:
    """Part 5: the roofline TPOT against the measured one, and speculative decoding's acceptance; ``None`` without figures."""
    rows = run.limits()
    if not any(r["bytes"] for r in rows) and not any(s.speculation() for s in run.strategies):
        return None
    bw = ((run.spec.get("machine") or {}).get("bandwidth") or {})
    where = f"{bw['bytes_per_s'] / 1e9:.1f} GB/s measured ({bw.get('threads')} thread(s) of a numpy copy)" if bw else "no bandwidth"
    t = _table("decode against the physical limit", ("strategy", "MB/tok", "limit", "1-seq", "of limit", "spec accepted"),
               f"MB/tok: weights + KV read per token; limit: ms per token at {where}; 1-seq: ms, the warm single-stream "
               "TPOT (median of 3); of limit: limit / 1-seq; spec accepted: draft tokens accepted of those drafted, over "
               "the traffic (/metrics) / at temperature 0 (the quality answers)")  # fmt: skip
    by_name = {s.name: s for s in run.strategies}
    for r in rows:
        s = by_name[r["strategy"]]
        name = r["strategy"] + (" (base)" if r["baseline"] else "")
        if r["bytes"] is None:
            t.add_row(name, "n/a", "n/a", short_ms(r["tpot_s"]), "-", _acceptance(s))
            continue
        t.add_row(name, f"{r['bytes'] / 1e6:,.1f}", short_ms(r["roofline_s"]), short_ms(r["tpot_s"]),
                  "-" if r["share"] is None else f"{r['share']:.0%}", _acceptance(s))  # fmt: skip
    return t


def print_experiment(run: ExperimentRun, console: Optional[Console] = None) -> None:
    """The whole report."""
    console = console or Console()
    head = "[bold]EMULATED[/bold] (the servers are the latencykit emulator: a timing model, not an engine); " if run.emulated else ""
    cfg = run.bench.config
    target = cfg.get("target") or {}
    loads = ", ".join(sorted({c.level for c in run.bench.cells})) or "-"
    console.print(f"latencykit experiment — {head}{len(run.strategies)} strategies, baseline {run.baseline}; traffic "
                  f"{cfg.get('traffic')} ×{cfg.get('request_count') or cfg.get('requests')} seed {cfg.get('seed')}, warm-up {cfg.get('warmup')}, "
                  f"load {loads}; target {target.get('kind')} (model {target.get('model')})", highlight=False)  # fmt: skip
    console.print(latency_table(run))
    console.print(load_table(run))
    console.print(cost_table(run))
    q = run.spec.get("quality") or {}
    if q.get("enabled", True):
        console.print(quality_table(run))
        first = next((s.quality for s in run.strategies if s.quality is not None), None)
        tokens = "the server's tokens (logprobs)" if first is not None and first.tokens == "server" else "words and punctuation of the text"
        console.print(f"[dim]quality: {q.get('prompts')} fixed prompts, one at a time, temperature {q.get('temperature')}, "
                      f"max_tokens {q.get('max_tokens')}, not streamed; tokens = {tokens}. "
                      "The first request's figures include the client's first-call cost (tens of ms).[/dim]",
                      highlight=False)  # fmt: skip
    limits = limit_table(run)
    if limits is not None:
        console.print(limits)
        for line in run.limit_lines():
            console.print(f"limit {escape(line)}", highlight=False, soft_wrap=True)
    mach = run.spec.get("machine")
    if mach:
        console.print(f"[dim]machine: {escape(str(mach.get('cpu')))}, {mach.get('cores')} cores, {mach.get('date')}; GPU: "
                      f"{escape(', '.join(g['name'] for g in mach.get('gpus') or []) or str(mach.get('gpu_note') or 'none'))}[/dim]",
                      highlight=False)  # fmt: skip
    unread: set[str] = set()
    for s in run.strategies:
        for r in s.rounds:
            m = r.metrics
            if m and not m.get("error"):
                console.print(f"server /metrics, {s.name} round {r.round + 1}: " + _metrics_line(m), highlight=False)
            elif m and m.get("error") not in unread:
                unread.add(m["error"])
                console.print(f"server /metrics not read ({s.name} round {r.round + 1}): {escape(str(m['error']))}", highlight=False)
    for line in run.findings():
        console.print(f"[bold yellow]finding[/bold yellow] {escape(line)}", highlight=False, soft_wrap=True)
    for s in run.failed:
        r = next(r for r in s.rounds if r.failed)
        if r.log_tail:
            console.print(f"[red]{escape(s.name)}: last {len(r.log_tail)} log lines ({escape(str(r.log))}):[/red]")
            for line in r.log_tail:
                console.print(f"  | {escape(line)}", highlight=False, soft_wrap=True)
    if run.spec.get("interrupted"):
        console.print("[bold red]interrupted[/bold red]: the figures above are partial")


def _metrics_line(m: dict[str, Any]) -> str:
    parts = []
    for key, name, fmt in (("prefix_cache_hit_rate", "prefix-cache hit rate", "{:.0%}"),
                           ("spec_acceptance_rate", "spec acceptance", "{:.0%}"),
                           ("spec_accepted_per_step", "accepted per step", "{:.2f}"),
                           ("spec_draft_tokens", "drafted tokens", "{:,.0f}"),
                           ("spec_accepted_tokens", "accepted tokens", "{:,.0f}"),
                           ("kv_cache_usage_max", "KV usage max", "{:.1%}"), ("running_max", "running max", "{:g}"),
                           ("waiting_max", "waiting max", "{:g}"), ("generation_tokens_per_s", "gen tok/s", "{:,.0f}"),
                           ("preemptions", "preemptions", "{:g}")):  # fmt: skip
        v = m.get(key)
        if v is not None:
            parts.append(f"{name} {fmt.format(v)}")
    return ", ".join(parts) or "no figures"
