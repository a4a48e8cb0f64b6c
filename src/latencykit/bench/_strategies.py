"""The demo's strategy comparison: the raw SDK as the app asked (non-streaming) against
latencykit with its request planner off and on — TTFT P50/P99 and the speed-up, emulated.

Shared-prefix RAG traffic over the Anthropic API on the embedded emulator: the app calls
``messages.create()`` without streaming. Through the plain SDK its first token reaches the
caller with the whole answer; through latencykit the same call streams, so TTFT is the real
first token; with the planner on, the long shared document is cached after its first sight.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Optional

from ._cell import BenchRun
from ._compare import strategy_table
from ._run import BenchConfig, run_bench

__all__ = ["DEMO_STRATEGIES", "demo_comparison"]

DEMO_STRATEGIES: tuple[dict[str, str], ...] = (
    {"stream": "as-asked", "call": "create"},
    {"stream": "forced", "call": "create", "cache": "off"},
    {"stream": "forced", "call": "create", "cache": "auto"},
)


def demo_comparison(
    *, requests: int = 12, concurrency: int = 4, seed: int = 0, timing: Any = None, console: Any = None
) -> BenchRun:
    """Run the three demo strategies and print TTFT P50/P99 with speed-ups (labelled emulated); returns the run."""
    from rich.console import Console
    from rich.table import Table

    from ._report import ms

    if timing is None:
        from .demo import DEMO_TIMING

        timing = DEMO_TIMING
    config = BenchConfig(target="emulator", api="anthropic", traffic="shared-prefix", documents=2, requests=requests,
                         concurrency=(concurrency,), seed=seed, matrix=DEMO_STRATEGIES, exact_output=False,
                         timing=asdict(timing))  # fmt: skip
    run = run_bench(config)
    console = console or Console()
    table = Table(title=f"EMULATED strategy comparison — {requests} shared-prefix requests, {concurrency} in flight, "
                  "app calls messages.create() without stream", title_justify="left")  # fmt: skip
    for name in ("strategy", "TTFT p50 ms", "TTFT p99 ms", "speed-up p50", "speed-up p99", "cache hits"):
        table.add_column(name, justify="left" if name == "strategy" else "right")
    rows = {r.cell: r for r in strategy_table(run, ("ttft:p50",))}
    rows99 = {r.cell: r for r in strategy_table(run, ("ttft:p99",))}
    names = ("raw SDK, non-streaming (as asked)", "latencykit, planner off", "latencykit, planner on")
    for name, cell in zip(names, run.cells):
        hits = sum(1 for s in cell.measured if (s["cache_read"] or 0) > 0)
        r50, r99 = rows.get(cell.key), rows99.get(cell.key)
        table.add_row(name, ms(cell.value("ttft", 0.5), 0), ms(cell.value("ttft", 0.99), 0),
                      "baseline" if r50 is None else _x(r50.speedup), "baseline" if r99 is None else _x(r99.speedup),
                      f"{hits}/{len(cell.measured)}")  # fmt: skip
    console.print(table)
    console.print("[dim]TTFT of a non-streamed call = when the whole answer arrived (the caller sees nothing earlier). "
                  "Emulated timing model, real SDK calls over real HTTP.[/dim]")  # fmt: skip
    return run


def _x(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.2f}×"
