"""`ExperimentRun`: what an experiment measured, the article's table built from it, and its run file.

The run file is a bench run file (``latencykit-bench/3``): one cell per strategy and load level,
labelled ``strategy=NAME`` (rounds merged exactly), so ``bench compare`` and ``bench merge``
take it. ``config["experiment"]`` holds what the file and the flags asked (name, baseline, SLO,
target, the planned rounds, the quality pass's settings, the file itself, and per strategy its
description, URL, claim and whether it is lossless); the top-level ``experiment`` section holds
what was measured (`ExperimentRun.measured`): per strategy its rounds (cold start, memory,
server metrics, how it stopped, any failure with its log tail), answers and quality, and the
figures derived from them and the cells — medians, speed-ups with their intervals, throughput,
goodput and the claim's verdict per load level (written for ``jq``, recomputed when read).
Files of ``latencykit-bench/2`` and before, which kept it all under ``config["experiment"]``,
are read as well (`from_bench`). docs/experiment.md has the layout and a ``jq`` line per figure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from ..bench._cell import BenchRun, Cell
from ._claims import ClaimVerdict, judge_claim, parse_claim, speedup_interval
from ..bench._compare import Comparison, compare_cells
from ._quality import Answers, QualityResult
from ..bench._stats import parse_slo
from ..bench._views import view

__all__ = ["ExperimentRun", "RoundResult", "Row", "StrategyResult", "TABLE_METRICS", "MEASURED_KEYS"]

TABLE_METRICS = ("ttft:p50", "ttft:p95", "ttft:p99", "tpot:p50", "tpot:p99", "e2e:p99")
"""The percentiles of the article's table, each with its speed-up against the baseline."""
MEASURED_KEYS = ("run_id", "interrupted", "targets", "machine")
"""`ExperimentRun.spec` keys that are facts of the run (the section ``experiment``), not what was asked (``config``)."""
COLD_START = ("ready_s", "first_token_s", "first_ttft_s", "warm_ttft_s", "warm_tpot_s")


@dataclass
class RoundResult:
    """One start of one strategy's server: cold start, memory, how it stopped, or why it failed."""

    round: int
    port: Optional[int] = None
    pid: Optional[int] = None
    argv: Optional[list[str]] = None
    log: Optional[str] = None
    ready_s: Optional[float] = None
    """Spawn → the ready path answered 200."""
    first_token_s: Optional[float] = None
    """Spawn → the first token of the first request."""
    first_ttft_s: Optional[float] = None
    """That first request's TTFT."""
    warm_ttft_s: Optional[float] = None
    """The same request's TTFT sent again after the traffic (median of 3)."""
    warm_tpot_s: Optional[float] = None
    """Those warm repeats' TPOT (median of 3): one stream alone, what the roofline is set against."""
    warm_context: Optional[float] = None
    """Their mean context while decoding: input tokens + half the output tokens."""
    rss_ready: Optional[int] = None
    rss_peak: Optional[int] = None
    processes: int = 0
    gpu: Optional[list[dict[str, Optional[int]]]] = None
    gpu_note: str = ""
    metrics: Optional[dict[str, Any]] = None
    """The server's ``/metrics`` over the traffic (`MetricsWindow.summary`), if a metrics path was given."""
    stop: Optional[dict[str, Any]] = None
    failed: Optional[str] = None
    exit_code: Optional[int] = None
    log_tail: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        return dict(self.__dict__)


@dataclass
class StrategyResult:
    """Everything measured for one strategy over all its rounds."""

    name: str
    description: str = ""
    base_url: Optional[str] = None
    rounds: list[RoundResult] = field(default_factory=list)
    answers: Optional[Answers] = None
    quality: Optional[QualityResult] = None
    lossless: bool = False
    claim: Optional[dict[str, Any]] = None
    roofline: Optional[dict[str, Any]] = None
    """Bytes read per token, bandwidth and the roofline TPOT (`latencykit.experiment._roofline.roofline`), or its ``error``."""

    @property
    def failed(self) -> Optional[str]:
        """Why it failed (the first failed round), or ``None``."""
        return next((r.failed for r in self.rounds if r.failed), None)

    def _values(self, attr: str) -> list[float]:
        return [v for r in self.rounds if (v := getattr(r, attr)) is not None]

    def median(self, attr: str) -> Optional[float]:
        """Median over the rounds of a `RoundResult` figure (``None`` if none)."""
        xs = sorted(self._values(attr))
        return None if not xs else xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2

    def peak(self, attr: str) -> Optional[float]:
        """Largest over the rounds."""
        xs = self._values(attr)
        return max(xs) if xs else None

    def gpu_peak(self) -> Optional[list[int]]:
        """Per device, the largest memory used by the server's processes (or on the device) over the rounds."""
        per: dict[int, int] = {}
        for r in self.rounds:
            for i, d in enumerate(r.gpu or []):
                v = d.get("server") if d.get("server") is not None else d.get("device_used")
                if v is not None:
                    per[i] = max(per.get(i, 0), v)
        return [per[i] for i in sorted(per)] or None

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        return {"name": self.name, "description": self.description, "base_url": self.base_url,
                "rounds": [r.to_dict() for r in self.rounds], "answers": None if self.answers is None else self.answers.to_dict(),
                "quality": None if self.quality is None else self.quality.to_dict(), "lossless": self.lossless,
                "claim": self.claim, "roofline": self.roofline}  # fmt: skip

    def asked(self) -> dict[str, Any]:
        """What the file asked of this strategy (the run file's ``config.experiment.strategies[i]``)."""
        return {"name": self.name, "description": self.description, "base_url": self.base_url, "lossless": self.lossless,
                "claim": self.claim}  # fmt: skip

    def measured(self) -> dict[str, Any]:
        """What was measured (the run file's ``experiment.strategies[i]``): the rounds, answers and quality as kept,
        plus ``failed`` and, derived from the rounds, ``cold_start`` (medians, seconds) and ``memory`` (peaks, bytes)."""
        d = self.to_dict()
        return {"name": self.name, "failed": self.failed, "rounds": d["rounds"], "answers": d["answers"], "quality": d["quality"],
                "cold_start": {k: self.median(k) for k in COLD_START},
                "memory": {"rss_peak": self.peak("rss_peak"), "gpu_peak": self.gpu_peak()}, "roofline": self.roofline,
                "speculation": self.speculation()}  # fmt: skip

    def speculation(self) -> Optional[dict[str, Any]]:
        """Draft tokens proposed and accepted: over the traffic (``/metrics``, summed over the rounds) and at temperature 0
        (the quality pass's answers, llama-server's ``timings``); ``None`` where the server reported neither."""
        drafted = [r.metrics.get("spec_draft_tokens") for r in self.rounds if r.metrics]
        accepted = [r.metrics.get("spec_accepted_tokens") for r in self.rounds if r.metrics]
        traffic = None
        if any(d is not None for d in drafted):
            n, a = int(sum(d or 0 for d in drafted)), int(sum(x or 0 for x in accepted))
            traffic = {"drafted": n, "accepted": a, "rate": a / n if n else None, "source": "/metrics over the traffic"}
        greedy = None if self.answers is None else self.answers.drafts()
        if greedy is not None:
            greedy = {**greedy, "source": "timings draft_n / draft_n_accepted of the quality answers (temperature 0)"}
        return None if traffic is None and greedy is None else {"traffic": traffic, "greedy": greedy}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "StrategyResult":
        """Inverse of `to_dict`."""
        return cls(d["name"], d.get("description", ""), d.get("base_url"), [RoundResult(**r) for r in d.get("rounds", [])],
                   None if d.get("answers") is None else Answers.from_dict(d["answers"]),
                   None if d.get("quality") is None else QualityResult.from_dict(d["quality"]), bool(d.get("lossless")),
                   d.get("claim"), d.get("roofline"))  # fmt: skip


@dataclass
class Row:
    """One strategy at one load level: the article's table row."""

    strategy: StrategyResult
    cell: Optional[Cell]
    baseline: bool
    comparisons: dict[str, Comparison]
    claim: Optional[ClaimVerdict]
    goodput: Optional[dict[str, Any]]
    throughput: dict[str, Optional[float]]


@dataclass
class ExperimentRun:
    """An experiment's results: the bench cells (one per strategy and level) and each strategy's extras."""

    bench: BenchRun
    strategies: list[StrategyResult]
    spec: dict[str, Any]
    """The experiment file as read, plus ``baseline``, ``slo``, ``order`` and ``interrupted``."""

    @property
    def baseline(self) -> str:
        """The baseline strategy's name."""
        return str(self.spec["baseline"])

    @property
    def emulated(self) -> bool:
        """Whether the servers were the emulator (every latency is then emulated)."""
        return self.bench.emulated or self.spec.get("target") == "emulator"

    @property
    def failed(self) -> list[StrategyResult]:
        """Strategies with a failed round."""
        return [s for s in self.strategies if s.failed]

    def result(self, name: str) -> StrategyResult:
        """The strategy called ``name``."""
        return next(s for s in self.strategies if s.name == name)

    def cells(self, name: str) -> list[Cell]:
        """The strategy's cells, one per load level."""
        return [c for c in self.bench.cells if c.labels.get("strategy") == name]

    def slo(self) -> Any:
        """The SLO of the table's goodput column: the file's first, else the bench's chat preset."""
        from ..bench._cell import SLO_PRESETS

        slos = self.spec.get("slo") or []
        return parse_slo(slos[0]) if slos else SLO_PRESETS[0]

    def rows(self) -> list[Row]:
        """Per strategy (baseline first) and level: percentiles with speed-ups, throughput, goodput, claim."""
        base_cells = {c.level: c for c in self.cells(self.baseline)}
        slo = self.slo()
        out = []
        for s in sorted(self.strategies, key=lambda s: s.name != self.baseline):
            cells: list[Optional[Cell]] = list(self.cells(s.name)) or [None]
            for cell in cells:
                base = base_cells.get(cell.level) if cell is not None else None
                comps: dict[str, Comparison] = {}
                claim = None
                if cell is not None and base is not None:
                    metrics = list(TABLE_METRICS)
                    if s.claim and s.claim["metric"] not in metrics:
                        metrics.append(s.claim["metric"])
                    comps = {f"{c.metric}:{c.pct}": c for c in compare_cells(base, cell, metrics, s.name)}
                if s.claim:
                    c = parse_claim(s.claim["text"], s.claim["metric"])
                    claim = judge_claim(c, comps.get(c.metric) if s.name != self.baseline else None)
                good = cell.goodput([slo])[0] if cell is not None else None
                out.append(Row(s, cell, s.name == self.baseline, comps, claim, good, cell.throughput() if cell else {}))
        return out

    def findings(self) -> list[str]:
        """Lines worth printing: failures, lossless strategies that drifted, claims missed, nondeterminism, ports."""
        out = []
        for s in self.strategies:
            if s.failed:
                code = next((r.exit_code for r in s.rounds if r.failed), None)
                out.append(f"{s.name} FAILED: {s.failed}" + (f" (exit code {code})" if code is not None else ""))
            q = s.quality
            if s.lossless and q is not None and q.exact_match is not None and q.exact_match < 1.0:
                d = q.diverged[0] if q.diverged else {}
                out.append(f"{s.name} is lossless in principle, yet {round((1 - q.exact_match) * q.n)} of {q.n} answers differ "
                           f"from the baseline's (first at prompt {d.get('prompt')}, token {d.get('at')}): a finding")  # fmt: skip
            if s.answers is not None and s.answers.deterministic is False:
                out.append(f"{s.name}: the same prompt at temperature 0 got two different answers — the server is not "
                           "deterministic, so its drift figures carry that noise")  # fmt: skip
            for r in s.rounds:
                if r.stop and not r.stop.get("port_free", True):
                    out.append(f"{s.name} round {r.round + 1}: port {r.port} still taken after the server stopped")
                if r.stop and r.stop.get("left"):
                    out.append(f"{s.name} round {r.round + 1}: processes {r.stop['left']} outlived the stop")
        for row in self.rows():
            spec = row.strategy.speculation() or {}
            drafts = next((d for d in (spec.get("traffic"), spec.get("greedy")) if d and d.get("drafted")), None)
            tpot = row.comparisons.get("tpot:p50")
            if drafts is not None and tpot is not None and tpot.speedup is not None and tpot.speedup < 1 and tpot.significant:
                where = "over the traffic" if drafts is spec.get("traffic") else "at temperature 0"
                out.append(f"{row.strategy.name}: drafting costs more than it saves — {drafts['accepted']:,} of "
                           f"{drafts['drafted']:,} drafted tokens accepted {where} ({(drafts['rate'] or 0):.0%}), TPOT P50 "
                           f"{tpot.speedup:.2f}× the baseline's (slower beyond noise)")  # fmt: skip
            v = row.claim
            if v is not None and v.status == "outside" and v.measured is not None and v.measured < v.claim.low:
                out.append(f"{row.strategy.name}: measured {v.measured:.2f}× against a claimed {v.claim} — below the claim "
                           "beyond noise: look for the bottleneck elsewhere (the article's §3.2: client, network, CPU "
                           "pre-processing, or a server that is not memory-bound here)")  # fmt: skip
        return out

    def limits(self) -> list[dict[str, Any]]:
        """Per strategy (baseline first) the roofline against the measured single-stream TPOT: ``bytes`` read per token,
        ``roofline_s``, ``tpot_s`` (the warm repeats' median), ``share`` = roofline / measured, and against the baseline
        ``fewer_bytes`` (its bytes / these) and ``faster`` (its TPOT / this one); ``error`` where there is no figure."""
        rows = []
        base = self.result(self.baseline) if any(s.name == self.baseline for s in self.strategies) else None
        b_roof = (base.roofline or {}) if base is not None else {}
        b_tpot = base.median("warm_tpot_s") if base is not None else None
        for s in sorted(self.strategies, key=lambda x: x.name != self.baseline):
            r = s.roofline or {}
            tpot = s.median("warm_tpot_s")
            row: dict[str, Any] = {"strategy": s.name, "baseline": s.name == self.baseline, "error": r.get("error"),
                                   "bytes": r.get("bytes_per_token"), "roofline_s": r.get("roofline_tpot_s"), "tpot_s": tpot,
                                   "on": r.get("on"), "context": r.get("context_tokens")}  # fmt: skip
            row["share"] = row["roofline_s"] / tpot if row["roofline_s"] and tpot else None
            row["fewer_bytes"] = b_roof["bytes_per_token"] / row["bytes"] if b_roof.get("bytes_per_token") and row["bytes"] else None
            row["faster"] = b_tpot / tpot if b_tpot and tpot else None
            rows.append(row)
        return rows

    def limit_lines(self) -> list[str]:
        """One sentence per strategy against the baseline: ``q4_0: 3.6× fewer bytes than f16, 1.6× faster: 44 % of the roofline``."""
        out = []
        for r in self.limits():
            if r["share"] is None:
                continue
            if r["baseline"]:
                out.append(f"{r['strategy']}: {r['bytes'] / 1e6:,.1f} MB per token, {r['tpot_s'] * 1000:.1f} ms measured against "
                           f"{r['roofline_s'] * 1000:.1f} ms at full bandwidth: {r['share']:.0%} of the roofline")  # fmt: skip
                continue
            fb, fa = r["fewer_bytes"], r["faster"]
            if fb is None or fa is None:
                continue
            words = "about the same bytes" if abs(fb - 1) < 0.02 else f"{fb:.2f}× fewer bytes" if fb > 1 else f"{1 / fb:.2f}× more bytes"
            speed = f"{fa:.2f}× faster" if fa >= 1 else f"{1 / fa:.2f}× slower"
            than = "as" if words.startswith("about") else "than"
            out.append(f"{r['strategy']}: {words} {than} {self.baseline}, {speed}: {r['share']:.0%} of the roofline")
        return out

    # -- views ---------------------------------------------------------------------------------
    def report(self, console: Any = None) -> None:
        """Print the article's table and the findings (rich; `latencykit.reports.print_experiment`)."""
        view("experiment.report")(self, console)

    def to_html(self) -> str:
        """A standalone HTML report: the tables, CDFs per strategy, speed-up and cold-start bars
        (`latencykit.reports.render_experiment`)."""
        return str(view("experiment.html")(self))

    def _repr_html_(self) -> str:
        return str(view("experiment.html")(self, standalone=False))

    def __repr__(self) -> str:
        ok = len(self.strategies) - len(self.failed)
        return f"<ExperimentRun {'EMULATED ' if self.emulated else ''}{self.spec.get('name')!r}: {ok} of {len(self.strategies)} strategies ran>"

    # -- run file ------------------------------------------------------------------------------
    def to_bench(self) -> BenchRun:
        """The bench run `save` writes: what was asked in ``config["experiment"]``, what was measured in the
        top-level ``experiment`` section (`measured`)."""
        config = dict(self.bench.config)
        config["experiment"] = {**{k: v for k, v in self.spec.items() if k not in MEASURED_KEYS},
                                "strategies": [s.asked() for s in self.strategies]}  # fmt: skip
        return BenchRun(config, self.bench.env, self.bench.cells, self.bench.partial, {**self.bench.sections, "experiment": self.measured()})

    def measured(self) -> dict[str, Any]:
        """The run file's ``experiment`` section: the run's id, whether it was interrupted, the targets as resolved,
        and per strategy `StrategyResult.measured` plus ``levels``: per load level its percentiles' speed-ups against
        the baseline with their intervals, throughput, goodput and the claim's verdict (derived from the cells)."""
        levels: dict[str, list[dict[str, Any]]] = {}
        for row in self.rows():
            if row.cell is None:
                continue
            speedups = {}
            for key, c in row.comparisons.items():
                lo, hi = speedup_interval(c)
                speedups[key] = {"speedup": c.speedup, "low": lo, "high": hi, "significant": c.significant,
                                 "base_s": c.base.value, "new_s": c.new.value}  # fmt: skip
            levels.setdefault(row.strategy.name, []).append({
                "level": row.cell.level, "cell": row.cell.key, "baseline": row.baseline, "speedups": speedups,
                "throughput": row.throughput, "goodput": row.goodput,
                "claim": None if row.claim is None else row.claim.to_dict(),
            })  # fmt: skip
        out: dict[str, Any] = {k: self.spec[k] for k in MEASURED_KEYS if k in self.spec}
        out["strategies"] = [{**s.measured(), "levels": levels.get(s.name, [])} for s in self.strategies]
        return out

    def save(self, path: Union[str, Path]) -> Path:
        """Write the run file."""
        return self.to_bench().save(path)

    @classmethod
    def from_bench(cls, run: BenchRun) -> "ExperimentRun":
        """The experiment in a bench run file, in the layout of ``latencykit-bench/3`` or of /2 and before (all of it
        under ``config["experiment"]``); ``ValueError`` if it holds none. Derived figures are recomputed, not read."""
        exp = run.config.get("experiment")
        if not isinstance(exp, dict):
            raise ValueError("not an experiment run file (no config.experiment)")
        spec = {k: v for k, v in exp.items() if k != "strategies"}
        measured = run.sections.get("experiment")
        if not isinstance(measured, dict):  # latencykit-bench/2 and before
            return cls(run, [StrategyResult.from_dict(s) for s in exp.get("strategies", [])], spec)
        spec.update((k, measured[k]) for k in MEASURED_KEYS if k in measured)
        got = {s.get("name"): s for s in measured.get("strategies", [])}
        return cls(run, [StrategyResult.from_dict({**s, **got.get(s["name"], {})}) for s in exp.get("strategies", [])], spec)

    @classmethod
    def load(cls, path: Union[str, Path]) -> "ExperimentRun":
        """Read an experiment run file (any readable format); ``ValueError`` names the file and what is wrong."""
        bench = BenchRun.load(path)
        try:
            return cls.from_bench(bench)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    def summary(self) -> dict[str, Any]:
        """The table as plain data (one dict per row), for scripts and docs."""
        rows = []
        for r in self.rows():
            s, c = r.strategy, r.cell
            q = s.quality
            rows.append({
                "strategy": s.name, "level": None if c is None else c.level, "baseline": r.baseline, "failed": s.failed,
                **{m: None if c is None else c.value(*_mq(m)) for m in TABLE_METRICS},
                **{f"{m} speedup": (r.comparisons[m].speedup if m in r.comparisons else None) for m in TABLE_METRICS},
                **{f"{m} significant": (r.comparisons[m].significant if m in r.comparisons else None) for m in TABLE_METRICS},
                "completed_rps": r.throughput.get("completed_rps"), "output_tps": r.throughput.get("output_tps"),
                "goodput": r.goodput, "ready_s": s.median("ready_s"), "first_token_s": s.median("first_token_s"),
                "first_ttft_s": s.median("first_ttft_s"), "warm_ttft_s": s.median("warm_ttft_s"),
                "rss_peak": s.peak("rss_peak"), "gpu_peak": s.gpu_peak(),
                "exact_match": None if q is None else q.exact_match, "prefix_agreement": None if q is None else q.prefix_agreement,
                "edit_agreement": None if q is None else q.edit_agreement, "score": None if q is None else q.score,
                "accuracy": None if q is None else q.accuracy, "correct": None if q is None else q.correct,
                "graded": None if q is None else q.graded,
                "claim": None if r.claim is None else r.claim.to_dict(),
                "warm_tpot_s": s.median("warm_tpot_s"), "roofline_tpot_s": (s.roofline or {}).get("roofline_tpot_s"),
                "speculation": s.speculation(),
            })  # fmt: skip
        return {"name": self.spec.get("name"), "baseline": self.baseline, "emulated": self.emulated, "rows": rows}

    def to_json(self) -> str:
        """`summary` as JSON."""
        return json.dumps(self.summary(), indent=1, default=str)


def _mq(m: str) -> tuple[str, float]:
    from ..bench._compare import parse_metric

    metric, q, _ = parse_metric(m)
    return metric, q
