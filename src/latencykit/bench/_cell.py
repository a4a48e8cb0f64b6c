"""`Cell` (one strategy at one load level) and `BenchRun` (a run file): data, merge, derived figures.

A cell keeps every request's sample (JSON-friendly dicts) and one mergeable sketch per
`SKETCHED` metric, so run files from several workers or machines merge exactly
(`BenchRun.merge`): samples concatenate, sketches add bucket by bucket, counts add, each run
stays a part whose rates are computed over its own windows and then added (`_rates`). Only
runs of the same traffic, target, model and server timing merge, and cells of the same
strategy and load (`_merge`), unless forced.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence, Union

from ..telemetry._sketch import PercentileSketch
from ..telemetry._slo import BATCH_E2E, CHAT_TTFT, CODE_COMPLETION_TTFT, SLO
from ._load import SKETCHED, CellResult, new_sketches
from ._merge import load_differences, overlap_note, run_differences
from ._rates import add_rates, part_rates
from ._sessions import session_stats
from ._stats import Pct, percentiles
from ._views import view

__all__ = ["BenchRun", "Cell", "FORMAT", "READABLE", "SLO_PRESETS"]

FORMAT = "latencykit-bench/3"
"""Run-file format written: /2 added each cell's ``summary`` (percentiles in seconds, for ``jq``); /3 moves what an
experiment measured out of ``config`` into a top-level ``experiment`` section (`BenchRun.sections`); a bench run's
own fields are the same in /2 and /3."""
READABLE = ("latencykit-bench/1", "latencykit-bench/2", FORMAT)
"""Run-file formats read (``bench compare``, ``bench merge`` and ``experiment --report`` take any of them)."""
_CORE_KEYS = ("format", "config", "env", "cells", "partial")
SUMMARY_QUANTILES = (("p50_s", 0.5), ("p90_s", 0.9), ("p95_s", 0.95), ("p99_s", 0.99), ("p99_9_s", 0.999))
SLO_PRESETS: tuple[SLO, ...] = (CHAT_TTFT, CODE_COMPLETION_TTFT, BATCH_E2E)


@dataclass
class Cell:
    """One strategy (levers + labels) at one load level, measured by one or more workers."""

    strategy: dict[str, str]
    labels: dict[str, str]
    load: dict[str, Any]
    samples: list[dict[str, Any]] = field(default_factory=list)
    sketches: dict[str, PercentileSketch] = field(default_factory=new_sketches)
    control: dict[str, PercentileSketch] = field(default_factory=new_sketches)
    """Sketches of the thin-reader control requests interleaved in the same cell (if any)."""
    scheduled: int = 0
    unsent_waits: list[float] = field(default_factory=list)
    window: list[Optional[float]] = field(default_factory=lambda: [None, None])
    health: list[dict[str, Any]] = field(default_factory=list)
    """One entry per worker process: cpu_s, wall_s, cores, loop lag, dispatcher lateness."""
    server: Optional[dict[str, Any]] = None
    """Emulator chunk lateness (seconds) when the target is the emulator."""
    warnings: list[str] = field(default_factory=list)
    schedule: Optional[dict[str, Any]] = None
    """Open loop: the schedule drawn, ``{"arrivals": n, "window_s": T}`` (see `latencykit.bench._rates`)."""
    parts: list[dict[str, Any]] = field(default_factory=list)
    """Set by `merge`: one entry per merged run (``schedule``, ``window``); its samples carry ``part``."""
    partial: Optional[dict[str, Any]] = None
    """Set when the cell was interrupted (Ctrl-C): ``{"reason", "cut"}`` (requests in flight, not measured)."""
    turns_not_sent: int = 0
    """Sessions: turns never sent (due after ``duration``, or after a failed turn of their session)."""

    # -- identity -------------------------------------------------------------------------
    @property
    def label(self) -> str:
        """``cache=auto client=latencykit`` plus free labels: what the comparison table calls it."""
        parts = [f"{k}={v}" for k, v in sorted(self.strategy.items())] + [f"{k}={v}" for k, v in sorted(self.labels.items())]
        return " ".join(parts) or "baseline"

    @property
    def level(self) -> str:
        """``c=16``, ``rate=40/s c≤8`` ..."""
        load = self.load
        if load.get("mode") == "open":
            rate = load.get("rate")
            if load.get("arrivals") == "recorded":  # --rate is a speed factor of the recorded times here
                head = "recorded times" + (f" ×{rate:g}" if rate and rate != 1 else "")
            else:
                head = f"sessions={rate:g}/s" if load.get("sessions") else f"rate={rate:g}/s"
            return head + (f" c<={load['concurrency']}" if load.get("concurrency") else "")
        return f"users={load.get('concurrency')}" if load.get("sessions") else f"c={load.get('concurrency')}"

    @property
    def key(self) -> str:
        """Label and level: cells with equal keys merge."""
        return f"{self.label} @ {self.level}"

    # -- building ---------------------------------------------------------------------------
    def absorb(self, result: CellResult) -> None:
        """Add one worker's result."""
        self.samples.extend(result.samples)
        for m, sk in result.sketches.items():
            self.sketches[m].merge(sk)
        for m, sk in result.control.items():
            self.control[m].merge(sk)
        self.scheduled += result.scheduled
        self.unsent_waits.extend(result.unsent_waits)
        self._widen(result.window)
        self.health.append(result.health)
        self.turns_not_sent += result.turns_not_sent
        if result.interrupted:
            cut = (self.partial or {}).get("cut", 0) + result.cut
            self.partial = {"reason": "interrupted (Ctrl-C)", "cut": cut}

    def _widen(self, window: Sequence[Optional[float]]) -> None:
        a, b = window
        lo, hi = self.window
        self.window = [a if lo is None else lo if a is None else min(lo, a), b if hi is None else hi if b is None else max(hi, b)]

    def merge(self, other: "Cell") -> None:
        """Add another run's cell (same key and load): sketches exact, one `parts` entry per run, rates add."""
        if other.key != self.key:
            raise ValueError(f"cannot merge cell {other.key!r} into {self.key!r}")
        if not self.parts:
            self.parts = [self._part()]
            for s in self.samples:
                s.setdefault("part", 0)
        shift = len(self.parts)
        self.parts.extend(dict(p) for p in (other.parts or [other._part()]))
        self.samples.extend({**s, "part": shift + int(s.get("part", 0))} for s in other.samples)
        for m in SKETCHED:
            self.sketches[m].merge(other.sketches[m])
            self.control[m].merge(other.control[m])
        self.scheduled += other.scheduled
        self.unsent_waits.extend(other.unsent_waits)
        self.turns_not_sent += other.turns_not_sent
        self._widen(other.window)
        self.health.extend(other.health)
        if other.server is not None:
            self.server = self.server or other.server
        self.warnings.extend(w for w in other.warnings if w not in self.warnings)
        if other.partial is not None:
            mine = self.partial or {}
            part: dict[str, Any] = {"reason": other.partial.get("reason", "partial"),
                                    "cut": mine.get("cut", 0) + int(other.partial.get("cut", 0))}  # fmt: skip
            for k in ("unsent", "finished_lost"):  # a lost cluster worker's share, counted in both runs
                if k in mine or k in other.partial:
                    part[k] = int(mine.get(k, 0)) + int(other.partial.get(k, 0))
            if mine.get("workers_lost") or other.partial.get("workers_lost"):
                part["workers_lost"] = list(mine.get("workers_lost") or []) + list(other.partial.get("workers_lost") or [])
            self.partial = part

    def _part(self) -> dict[str, Any]:
        return {"schedule": self.schedule, "window": list(self.window)}

    # -- derived figures ----------------------------------------------------------------------
    @property
    def measured(self) -> list[dict[str, Any]]:
        """Samples outside the warm-up (and not control requests)."""
        return [s for s in self.samples if not s["warmup"] and s.get("client") != "thin"]

    def pct(self, metric: str) -> dict[float, Pct]:
        """Percentiles with CIs of a sketched metric."""
        return percentiles(self.sketches[metric])

    def value(self, metric: str, q: float) -> Optional[float]:
        """One percentile value (``None`` if no data)."""
        return percentiles(self.sketches[metric], [q])[q].value

    @property
    def window_s(self) -> Optional[float]:
        """Seconds from the first measured send to the last measured completion."""
        a, b = self.window
        return None if a is None or b is None or b <= a else b - a

    def throughput(self, slos: Sequence[SLO] = ()) -> dict[str, Any]:
        """Offered (nominal), drawn, sent and completed requests/s, output tokens/s, and good requests/s per SLO
        in ``slos`` (``good_rps``), over the windows `latencykit.bench._rates` defines; merged runs' rates add."""
        rate = self.load.get("rate") if self.load.get("mode") == "open" and self.load.get("arrivals") != "recorded" else None
        groups: dict[int, list[dict[str, Any]]] = {}
        for s in self.samples:
            groups.setdefault(int(s.get("part", 0)), []).append(s)
        parts = self.parts or [self._part()]
        return add_rates([part_rates(groups.get(i, []), p.get("schedule"), rate, [_good(groups.get(i, []), slo) for slo in slos])
                          for i, p in enumerate(parts)])  # fmt: skip

    def goodput(self, slos: Iterable[SLO] = SLO_PRESETS) -> list[dict[str, Any]]:
        """Per SLO: share of measured requests meeting it (latency from the intended send) and good requests/s."""
        objectives = list(slos)
        meas = self.measured
        rates = self.throughput(objectives)["good_rps"]
        return [{"slo": slo.label, "attainment": _good(meas, slo) / len(meas) if meas else None, "good_rps": r}
                for slo, r in zip(objectives, rates)]  # fmt: skip

    def split(self, key: str) -> dict[str, PercentileSketch]:
        """Headline TTFT sketched per group: ``key="cache"`` (hit / miss / unreported) or ``"cold"`` (cold / warm)."""
        groups: dict[str, PercentileSketch] = {}
        for s in self.measured:
            if s["ttft"] is None:
                continue
            if key == "cache":
                g = "unreported" if s["cache_read"] is None else "hit" if s["cache_read"] > 0 else "miss"
            else:
                g = "cold" if s["cold"] else "warm"
            groups.setdefault(g, PercentileSketch()).add(s["ttft"])
        return groups

    def outcomes(self) -> dict[str, int]:
        """Requests per outcome, errors by kind (``error: RateLimitError 429``)."""
        out: dict[str, int] = {}
        for s in self.measured:
            k = s["outcome"] if s["outcome"] == "completed" else f"{s['outcome']}: {s['error'] or '?'}"
            out[k] = out.get(k, 0) + 1
        return out

    @property
    def completed(self) -> int:
        """Measured requests that completed."""
        return sum(1 for s in self.measured if s["outcome"] == "completed")

    @property
    def failed(self) -> int:
        """Measured requests that did not complete (errors and interrupted streams)."""
        return sum(1 for s in self.measured if s["outcome"] != "completed")

    @property
    def first_error(self) -> Optional[str]:
        """The first error: type and message on one line, from the earliest-sent failed request that carries
        one (warm-up and control included; run files without messages give the type); ``None`` if none failed."""
        failed = sorted((s for s in self.samples if s["outcome"] != "completed"), key=lambda s: s["sent"])
        described = next((s for s in failed if s.get("message")), None)
        first = described or (failed[0] if failed else None)
        return None if first is None else str(first.get("message") or first["error"] or first["outcome"])

    @property
    def no_data(self) -> Optional[str]:
        """Why the cell has no latency to show (``no completed request (3 of 3 failed); first error: ...``), or ``None``."""
        if self.completed:
            return None
        n = len(self.measured)
        if not n:
            return f"no measured request (all {len(self.samples)} are warm-up or control)"
        first = self.first_error
        return f"no completed request ({self.failed} of {n} failed)" + (f"; first error: {first}" if first else "")

    def verdicts(self) -> dict[str, int]:
        """latencykit's cache verdict per measured request."""
        out: dict[str, int] = {}
        for s in self.measured:
            if s.get("verdict"):
                out[s["verdict"]] = out.get(s["verdict"], 0) + 1
        return out

    @property
    def client_bound(self) -> bool:
        """Whether the client limited or distorted the figures: marked client-bound or client-starved (see `warnings`)."""
        return any(w.startswith(("client-bound", "client-starved")) for w in self.warnings)

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per metric: ``n``, ``mean_s``, ``min_s``, ``p50_s`` ... ``p99_9_s``, ``max_s`` (seconds; ``None``
        where the metric has no data), computed from the sketches (1 % relative accuracy)."""
        out: dict[str, dict[str, Any]] = {}
        for m, sk in self.sketches.items():
            values = sk.quantiles([q for _, q in SUMMARY_QUANTILES])
            row: dict[str, Any] = {"n": sk.count, "mean_s": sk.mean, "min_s": sk.min}
            row.update((name, v) for (name, _), v in zip(SUMMARY_QUANTILES, values))
            row["max_s"] = sk.max
            out[m] = row
        return out

    def sessions(self) -> Optional[dict[str, Any]]:
        """Sessions traffic: per turn (turn 1 vs 2+: the cache's effect) and per session figures
        (`latencykit.bench._sessions.session_stats`), with ``turns_not_sent``; ``None`` for other traffic."""
        stats = session_stats(self.samples)
        if stats is not None:
            stats["turns_not_sent"] = self.turns_not_sent
        return stats

    # -- serialization --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly state; ``summary`` and ``sessions`` are derived (written for readers without latencykit,
        never read back)."""
        extra: dict[str, Any] = {}
        sessions = self.sessions()
        if sessions is not None:
            extra = {"sessions": sessions, "turns_not_sent": self.turns_not_sent}
        return {
            "key": self.key, "summary": self.summary(), **extra,
            "strategy": self.strategy, "labels": self.labels, "load": self.load, "scheduled": self.scheduled,
            "unsent_waits": self.unsent_waits, "window": self.window, "health": self.health, "server": self.server,
            "warnings": self.warnings, "sketches": {m: s.to_dict() for m, s in self.sketches.items()},
            "control": {m: s.to_dict() for m, s in self.control.items() if s.count},
            "schedule": self.schedule, "parts": self.parts, "partial": self.partial,
            "samples": self.samples,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Cell":
        """Inverse of `to_dict`."""
        control = new_sketches()
        control.update({m: PercentileSketch.from_dict(s) for m, s in d.get("control", {}).items()})
        sketches = new_sketches()
        sketches.update({m: PercentileSketch.from_dict(s) for m, s in d["sketches"].items()})
        return cls(dict(d["strategy"]), dict(d["labels"]), dict(d["load"]), list(d["samples"]), sketches, control,
                   int(d["scheduled"]), list(d["unsent_waits"]), list(d["window"]), list(d["health"]), d.get("server"),
                   list(d.get("warnings", [])), d.get("schedule"), list(d.get("parts") or []), d.get("partial"),
                   int(d.get("turns_not_sent", 0)))  # fmt: skip


@dataclass
class BenchRun:
    """A benchmark run: configuration, environment and cells; what ``--out`` writes and `load` reads."""

    config: dict[str, Any]
    env: dict[str, Any]
    cells: list[Cell]
    partial: Optional[str] = None
    """Why the run is incomplete (``"interrupted (Ctrl-C) ..."``), or ``None``: a partial run holds what was measured."""
    sections: dict[str, Any] = field(default_factory=dict)
    """Top-level sections of the run file beyond the bench's own, added by a layer above (``experiment``: what an
    experiment measured), written and read back unchanged; `merge` keeps the first run's."""

    @property
    def emulated(self) -> bool:
        """Whether the target was the emulator (every figure is then emulated)."""
        return bool(self.config.get("target", {}).get("emulated"))

    def cell(self, key: Optional[str] = None) -> Cell:
        """The cell with this key (or label), or the only / first one."""
        if key is None:
            return self.cells[0]
        for c in self.cells:
            if key in (c.key, c.label):
                return c
        raise KeyError(f"no cell {key!r}; cells: {[c.key for c in self.cells]}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly state."""
        out = {"format": FORMAT, "config": self.config, "env": self.env, "cells": [c.to_dict() for c in self.cells]}
        if self.partial is not None:
            out["partial"] = self.partial
        out.update((k, v) for k, v in self.sections.items() if k not in _CORE_KEYS)
        return out

    def save(self, path: Union[str, Path]) -> Path:
        """Write the run file (JSON)."""
        p = Path(path)
        p.write_text(json.dumps(self.to_dict(), separators=(",", ":")))
        return p

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "BenchRun":
        """Inverse of `to_dict`; ``ValueError`` for another format."""
        if not isinstance(d, dict) or d.get("format") not in READABLE:
            raise ValueError(f"not a latencykit bench run file (format {d.get('format') if isinstance(d, dict) else None!r}, expected one of {READABLE})")
        return cls(dict(d["config"]), dict(d["env"]), [Cell.from_dict(c) for c in d["cells"]], d.get("partial"),
                   {k: v for k, v in d.items() if k not in _CORE_KEYS})  # fmt: skip

    @classmethod
    def load(cls, path: Union[str, Path]) -> "BenchRun":
        """Read a run file."""
        try:
            data = json.loads(Path(path).read_text())
        except ValueError as exc:
            raise ValueError(f"{path}: not JSON ({exc})") from None
        try:
            return cls.from_dict(data)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    @classmethod
    def merge(cls, runs: Sequence["BenchRun"], *, force: bool = False, names: Optional[Sequence[str]] = None) -> "BenchRun":
        """One run holding every request of ``runs``, which ran side by side (workers, machines): cells with equal
        keys merge exactly and their rates add. ``ValueError`` names what differs when the runs measured different
        things (`latencykit.bench._merge`); ``force=True`` merges them anyway and records it (``config["forced"]``).
        The first run's `sections` are kept as they were (``latencykit bench merge`` recomputes an experiment's from
        the merged cells: `latencykit.experiment.ExperimentRun.from_bench`)."""
        if not runs:
            raise ValueError("nothing to merge")
        names = list(names) if names is not None else [f"run {i + 1}" for i in range(len(runs))]
        first = runs[0]
        problems: list[str] = []
        for name, run in zip(names[1:], runs[1:]):
            diff = run_differences(first.config, run.config)
            if diff:
                problems.append(f"{name} differs from {names[0]}: " + "; ".join(diff))
        out = cls(dict(first.config), dict(first.env), [Cell.from_dict(c.to_dict()) for c in first.cells], first.partial,
                  dict(first.sections))  # fmt: skip
        out.config["merged_from"] = sum(int(r.config.get("merged_from", 1)) for r in runs)
        for name, run in zip(names[1:], runs[1:]):
            for cell in run.cells:
                mine = next((c for c in out.cells if c.key == cell.key), None)
                if mine is None:
                    out.cells.append(Cell.from_dict(cell.to_dict()))
                    continue
                diff = load_differences(mine.load, cell.load)
                if diff:
                    problems.append(f"{name}: cell {cell.key} has another load (" + "; ".join(diff) + ")")
                mine.merge(cell)
            if run.partial is not None:
                out.partial = "; ".join(p for p in (out.partial, f"{name}: {run.partial}") if p)
        if problems and not force:
            raise ValueError("these runs do not belong together: " + " | ".join(problems)
                             + " (--force merges them anyway, marked as forced)")  # fmt: skip
        if problems:
            out.config["forced"] = problems
        for cell in out.cells:
            note = overlap_note([p.get("window") or (None, None) for p in cell.parts])
            if note and note not in cell.warnings:
                cell.warnings.append(note)
        return out

    def report(self, console: Any = None) -> None:
        """Print the terminal report (rich; `latencykit.reports.print_report`)."""
        view("bench.report")(self, console)

    def to_html(self) -> str:
        """A standalone HTML report with plots (CDFs, TTFT vs load, timeline; `latencykit.reports.render_html`)."""
        return str(view("bench.html")(self))

    def _repr_html_(self) -> str:
        return str(view("bench.html")(self, standalone=False))

    def __repr__(self) -> str:
        c = self.cells[0] if self.cells else None
        head = f"{len(self.cells)} cell(s)"
        if c is not None:
            p50, p99 = c.value("ttft", 0.5), c.value("ttft", 0.99)
            head += f", first {c.key}: ttft p50 {_ms(p50)} p99 {_ms(p99)} ms"
        return f"<BenchRun {'EMULATED ' if self.emulated else ''}{head}>"


def _good(samples: Iterable[dict[str, Any]], slo: SLO) -> int:
    """Measured requests that completed within the SLO's threshold."""
    return sum(1 for s in samples if not s["warmup"] and s.get("client") != "thin" and s["outcome"] == "completed"
               and s.get(slo.metric) is not None and s[slo.metric] <= slo.threshold)  # fmt: skip


def _ms(v: Optional[float]) -> str:
    return "-" if v is None else f"{v * 1000:.1f}"
