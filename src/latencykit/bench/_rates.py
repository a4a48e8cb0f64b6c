"""Rates of one run's share of a cell: drawn, sent, completed and good requests per second.

Every rate is over a window that fits it. The **send window** of an open loop is the schedule
actually drawn: ``duration`` when arrivals were cut there, else the span of the drawn arrivals
plus one mean gap (``n`` arrivals cover ``n`` gaps). *drawn* = arrivals / send window (a Poisson
draw of 24 arrivals in 12 s is 2 req/s, whatever the nominal rate); *sent* = requests that left
the client / the send window, stretched by how late the last one left (a client behind its
schedule). *completed* (and output tokens, good requests) = measured completions / the
measurement window (first measured request's intended send → last completion), never shorter
than the measured part of the send window, so completed <= sent (without a warm-up). A closed loop has no schedule: its sent and
completed rates are both over the measurement window.

Cells merged from several runs (`BenchRun.merge`: workers or machines running side by side)
keep one part per run; their rates add.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

__all__ = ["schedule_of", "part_rates", "add_rates"]


def schedule_of(offsets: Sequence[float], duration: Optional[float]) -> dict[str, Any]:
    """The drawn schedule of an open loop: ``arrivals`` within the send window of ``window_s`` seconds."""
    n = sum(1 for o in offsets if duration is None or o < duration)
    cut = n < len(offsets)
    last = max((o for o in offsets[:n]), default=0.0)
    if cut and duration is not None:
        window: Optional[float] = duration
    elif n > 1 and last > 0:
        window = last * n / (n - 1)
    else:
        window = duration
    return {"arrivals": n, "window_s": window}


def _end(s: dict[str, Any]) -> float:
    return float(s["sent"]) + float(s.get("e2e_service") or 0.0)


def part_rates(samples: Sequence[dict[str, Any]], schedule: Optional[dict[str, Any]], offered: Optional[float],
               good: Iterable[int] = ()) -> dict[str, Any]:  # fmt: skip
    """Rates of one run's samples (module docstring); ``good`` = counts of measured requests meeting each SLO."""
    sends = sorted(float(s["sent"]) for s in samples)
    meas = [s for s in samples if not s["warmup"] and s.get("client") != "thin"]
    done = [s for s in meas if s["outcome"] == "completed"]
    n = len(sends)
    window = (schedule or {}).get("window_s")
    drawn = (schedule or {}).get("arrivals")
    send_window: Optional[float] = None
    if window:
        late = sends[-1] - max(float(s["sched"]) for s in samples) if samples else 0.0
        send_window = float(window) + max(late, 0.0)
    w: Optional[float] = None
    if meas:
        first = min(float(s.get("sched", s["sent"])) for s in meas)
        last = max(_end(s) for s in meas)
        if send_window is not None:
            last = max(last, send_window)
        w = last - first if last > first else None
    if send_window is None and w is not None:
        sent_rps: Optional[float] = len(meas) / w
    else:
        sent_rps = n / send_window if send_window else None
    return {
        "offered_rps": offered,
        "drawn_rps": drawn / window if window and drawn is not None else None,
        "sent_rps": sent_rps,
        "completed_rps": len(done) / w if w else None,
        "output_tps": sum(s["out_tok"] or 0 for s in done) / w if w else None,
        "good_rps": [g / w if w else None for g in good],
        "window_s": w,
    }


def _add(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return b if a is None else a if b is None else a + b


def add_rates(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The rates of runs that ran side by side: each rate adds (``None`` where no part has one)."""
    out: dict[str, Any] = {}
    for p in parts:
        for k, v in p.items():
            if k == "good_rps":
                prev = out.get(k) or [None] * len(v)
                out[k] = [_add(a, b) for a, b in zip(prev, v)]
            elif k == "window_s":
                out[k] = v if out.get(k) is None else max(out[k], v or 0.0)
            else:
                out[k] = _add(out.get(k), v)
    return out
