"""`diagnose`: the warnings of a finished cell — client-bound or starved, server late, unsent, behind schedule."""

from __future__ import annotations

from ._cell import Cell
from ._config import resolve_levers

__all__ = ["diagnose"]


def diagnose(cell: Cell) -> list[str]:
    """Warnings for a finished cell: client-bound, server late, unsent, behind schedule."""
    out: list[str] = []
    bound: list[str] = []
    ttft50 = cell.value("ttft_service", 0.5) or 0.0
    starved: list[str] = []
    for h in cell.health:
        at = f"node {h['node']}: " if h.get("node") is not None else ""  # a cluster worker says where it ran
        lag = h.get("loop_lag_p99")
        cores = h.get("cores")
        if lag is not None and lag > max(0.02, 0.1 * ttft50):
            if cores is not None and cores < 0.5:
                load = h.get("load_average")
                starved.append(f"{at}event-loop lag p99 {lag * 1000:.0f} ms while using only {cores:.2f} cores"
                               + (f" (machine load average {load:.1f})" if load is not None else ""))  # fmt: skip
            else:
                bound.append(f"{at}event-loop lag p99 {lag * 1000:.0f} ms")
        if cores is not None and cores > 0.85:
            bound.append(f"{at}a client process used {cores:.2f} cores (one event loop can use one)")
        late = h.get("dispatch_late_p99")
        if late is not None and late > 0.05:
            bound.append(f"{at}the dispatcher woke {late * 1000:.0f} ms late (p99)")
    if bound:
        import os

        used = sum(h.get("cores") or 0.0 for h in cell.health)
        cpus = os.cpu_count() or 1
        if any(h.get("node") is not None for h in cell.health):  # a cluster: this machine's cores are not the question
            advice = "more nodes (--cluster), more workers on the bound node (--per-node), or fewer streams"
        elif used < 0.6 * cpus:
            advice = "use --workers N or fewer streams"
        else:
            advice = (f"the client processes used {used:.2f} of this machine's {cpus} cores, so more workers cannot help "
                      "here: fewer streams, or a machine with more cores")  # fmt: skip
        levers = resolve_levers(cell.strategy)
        if levers["client"] != "thin" and levers["http"] == "httpx":
            advice += ("; the SDK's own aiohttp backend (--matrix http=aiohttp) reads streams with about a third "
                       "less client CPU")  # fmt: skip
        out.append("client-bound: " + "; ".join(dict.fromkeys(bound)) +
                   " — the client, not the server, limits these figures; " + advice)  # fmt: skip
    if starved:
        out.append("client-starved: " + "; ".join(dict.fromkeys(starved)) +
                   " — other processes took the CPU from the client, so its clocks ran late; rerun on a quieter machine")  # fmt: skip
    first = (cell.server or {}).get("first") or {}
    if first.get("p99") is not None and first["p99"] > 0.02:
        out.append(f"server-late: the emulator released first chunks {first['p99'] * 1000:.0f} ms late (p99) — "
                   "it shares the CPU with the client")  # fmt: skip
    if cell.unsent_waits:
        waits = sorted(cell.unsent_waits)
        out.append(f"unsent: {len(waits)} of {cell.scheduled} scheduled requests never left the client "
                   f"(they had waited {waits[len(waits) // 2]:.1f} s p50 at the cut-off)")  # fmt: skip
    tp = cell.throughput()
    drawn, sent = tp["drawn_rps"], tp["sent_rps"]
    if drawn and sent is not None and sent < 0.9 * drawn:
        q50 = cell.value("queue", 0.5) or 0.0
        sched = cell.schedule or {}
        nominal = f" (nominal {tp['offered_rps']:g} req/s)" if tp["offered_rps"] else ""
        out.append(f"behind schedule: sent {sent:.2f} req/s against the {drawn:.2f} req/s drawn{nominal} — "
                   f"{sched.get('arrivals')} arrivals over {sched.get('window_s') or 0:.1f} s; requests queued "
                   f"{q50:.2f} s (p50) in the client, and that wait is in the headline TTFT/E2E")  # fmt: skip
    return out
