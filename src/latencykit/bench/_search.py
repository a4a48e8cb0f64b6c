"""``--find-max-rate``: the highest open-loop rate that meets every SLO, found by doubling then bisection.

Each step runs the traffic open loop at one rate for long enough that its verdict is decided with 95 %
confidence, or says it is not: for an SLO "the q-quantile of a metric is at most T", a step of n measured
requests of which k missed T (no value, a failure, or above T) **passes** when P(X ≤ k) ≤ 5 % for X ~
Binomial(n, 1 − q) — so few misses would be unlikely were the true miss share 1 − q or more — and **fails** when
P(X ≥ k) ≤ 5 %. (Equivalently: the order-statistic confidence interval of the q-quantile lies below T, or above
it.) A step starts with enough requests for a pass with no miss at all (``3 / (1 − q)``: 59 for a P95) and at
least `MIN_STEP_S` seconds; an undecided step is run again twice as long, up to `MAX_GROWTH` times longer,
after which its point estimate (k / n against 1 − q) decides and the step says so. The step holds the verdict
of all SLOs: it fails when one fails, passes when all pass.

A step must also show the server in its steady state, not the calm of its first seconds: each step starts from an
idle server, and a rate above capacity builds its queue only over many service times. So a step's first service
time (the E2E-service p50 ``W`` of the highest passing step so far; 0.2 s at least) is its warm-up, and its measured
part spans at least `SETTLE` × ``W``. A passing step is run again, sized by its own ``W``, when that was longer
than the one it was sized by (load lengthens service: batches grow); and when its last third missed an SLO
(point estimate) while that metric rose through the step (Spearman's ρ of the values against send order, one-sided
p < 1 %) — the queue was still growing — it is run again twice as long, and fails "by drift" when it still does at
`MAX_GROWTH`.

The search doubles the rate from ``--rate`` (default 1/s) until a step fails, then bisects between the highest
passing and the lowest failing rate until they are within `TOLERANCE` of each other. It stops there, or when
``--max-duration`` would be passed by the next step, or on Ctrl-C; it reports what it has either way: the
highest passing rate and the interval [highest pass, lowest fail] the knee lies in, the first failing rate
and the SLO(s) it broke, and at that rate the saturation signs (queueing in the server: TTFT service against
the first step's; fewer requests served than arrived while they arrived; the client's warnings; the server's ``/metrics``
queue and KV cache where it has them). A first step that already fails ends the search with that said.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional, Sequence

from ..telemetry._slo import SLO
from ._cell import Cell
from ._stats import percentiles

__all__ = ["MAX_GROWTH", "MIN_STEP_S", "SETTLE", "TOLERANCE", "WARM_S", "MetricsPoller", "RateSearch", "SloVerdict", "drift",
           "judge", "saturation", "served"]

ALPHA = 0.05
MIN_STEP_S = 1.0
MAX_GROWTH = 4
TOLERANCE = 0.05
SETTLE = 5.0
"""A step's measured part spans at least this many service times (E2E-service p50s)."""
MAX_RESIZE = 2
"""A passing step served slower than it was sized for is run again, resized, at most this many times."""
WARM_S = 0.2
"""A step's warm-up is at least this long (its client opens new connections), and at least one service time."""
DRIFT_Z = 2.326
"""One-sided 1 % for Spearman's ρ·√(n − 1) (normal approximation): the metric rose through the step."""


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space (n up to tens of thousands)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    lp, lq = math.log(p), math.log1p(-p)
    terms = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq for i in range(k + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


@dataclass(frozen=True)
class SloVerdict:
    """One SLO at one step: ``pass`` / ``fail`` / ``undecided``, from ``misses`` of ``n`` requests."""

    slo: str
    verdict: str
    n: int
    misses: int
    value: Optional[float]
    """The metric's q-quantile over the step (seconds), from the sketch."""
    lo: Optional[float]
    hi: Optional[float]

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly fields."""
        return {"slo": self.slo, "verdict": self.verdict, "n": self.n, "misses": self.misses, "value_s": self.value,
                "ci_s": [self.lo, self.hi]}  # fmt: skip


def judge(cell: Cell, slo: SLO, *, force: bool = False) -> SloVerdict:
    """The verdict of one SLO over a cell's measured requests; ``force`` decides an undecided one by its point estimate."""
    meas = cell.measured
    n = len(meas)
    misses = sum(1 for s in meas if _missed(s, slo))
    share = 1.0 - slo.percentile
    p = percentiles(cell.sketches[slo.metric], [slo.percentile])[slo.percentile] if slo.metric in cell.sketches else None
    value, lo, hi = (p.value, p.lo, p.hi) if p is not None else (None, None, None)
    if n == 0:
        verdict = "undecided"
    elif share <= 0:  # a P100 objective: one miss fails it, no number of requests proves it
        verdict = "fail" if misses else "undecided"
    elif _binom_cdf(misses, n, share) <= ALPHA:
        verdict = "pass"
    elif 1.0 - _binom_cdf(misses - 1, n, share) <= ALPHA:
        verdict = "fail"
    else:
        verdict = "undecided"
    if verdict == "undecided" and force and n:
        verdict = "pass" if misses / n <= share else "fail"
    return SloVerdict(slo.label, verdict, n, misses, value, lo, hi)


def _missed(s: dict[str, Any], slo: SLO) -> bool:
    return bool(s["outcome"] != "completed" or s.get(slo.metric) is None or s[slo.metric] > slo.threshold)


def _ranks(values: Sequence[float]) -> list[float]:
    """Ranks from 1, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in order[i : j + 1]:
            ranks[k] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def drift(cell: Cell, slo: SLO) -> Optional[str]:
    """Why ``slo``'s verdict over ``cell`` would not hold in a longer step, or ``None``: its last third (by send
    order) missed the SLO more often than allowed while the metric rose through the step (Spearman's ρ of the values,
    a failed request highest, against send order, one-sided p < 1 %)."""
    meas = sorted(cell.measured, key=lambda s: float(s["sched"]))
    n, share = len(meas), 1.0 - slo.percentile
    if n < 20:
        return None
    tail = meas[-(n // 3) :]
    late = sum(1 for s in tail if _missed(s, slo))
    if late <= share * len(tail):
        return None
    values = [math.inf if s["outcome"] != "completed" or s.get(slo.metric) is None else float(s[slo.metric]) for s in meas]
    x, y = [float(i + 1) for i in range(n)], _ranks(values)  # send order: ranks 1..n
    mean = (n + 1) / 2
    sxy = sum((a - mean) * (b - mean) for a, b in zip(x, y))
    sxx, syy = sum((a - mean) ** 2 for a in x), sum((b - mean) ** 2 for b in y)
    if syy == 0:
        return None
    rho = sxy / math.sqrt(sxx * syy)
    if rho * math.sqrt(n - 1) < DRIFT_Z:
        return None
    return f"{slo.label}: the last third missed it ({late} of {len(tail)}) and {slo.metric} rose through the step (ρ = {rho:.2f})"


@dataclass
class Step:
    """One measured step of the search."""

    rate: float
    cell: Cell
    verdicts: list[SloVerdict]
    verdict: str
    by: str
    """``confidence``, ``point estimate`` (undecided after `MAX_GROWTH`) or ``drift`` (still drifting then)."""
    duration: float
    server: dict[str, Any] = field(default_factory=dict)
    signs: list[str] = field(default_factory=list)
    warmup: float = 0.0
    """Seconds of arrivals before the measured part (`WARM_S`, or one service time)."""
    drifting: list[str] = field(default_factory=list)
    """Why a longer step could decide otherwise (`drift`), where it could."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly fields (the cell is in the run's cells)."""
        tp = self.cell.throughput()
        arrived, kept = served(self.cell) or (None, None)
        service = self.cell.value("e2e_service", 0.5) if "e2e_service" in self.cell.sketches else None
        return {"rate_rps": self.rate, "verdict": self.verdict, "decided_by": self.by, "duration_s": self.duration,
                "warmup_s": self.warmup, "service_s": service, "arrived_rps": arrived, "served_rps": kept,
                "n": len(self.cell.measured), "completed_rps": tp["completed_rps"], "key": self.cell.key,
                "slos": [v.to_dict() for v in self.verdicts], "server": self.server or None, "saturation": self.signs,
                "drift": self.drifting}  # fmt: skip


Measure = Callable[[float, float, float], tuple[Cell, dict[str, Any]]]
"""``measure(rate, duration, warmup) -> (cell, server signs)``: one step at ``rate``, its first ``warmup`` seconds of
arrivals a warm-up, then ``duration`` seconds measured. A ``measure(rate, duration)`` of two parameters (as before the
warm-up was the search's to size) is called so, and warms up as it sees fit."""


def _takes_warmup(measure: Callable[..., Any]) -> bool:
    import inspect

    try:
        params = list(inspect.signature(measure).parameters.values())
    except (TypeError, ValueError):
        return True
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return True
    return len([p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]) >= 3


class RateSearch:
    """Doubling then bisection over rates (module docstring); `run` drives ``measure`` and returns the result."""

    def __init__(self, slos: Sequence[SLO], *, start: float = 1.0, max_duration: float = 300.0,
                 tolerance: float = TOLERANCE, min_step_s: float = MIN_STEP_S, clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        if not slos:
            raise ValueError("--find-max-rate needs at least one --slo, e.g. --slo 'ttft:p95<=500ms'")
        if not (isinstance(start, (int, float)) and 0 < start < math.inf):
            raise ValueError(f"--rate (the search's first step) must be a positive number of requests per second, got {start!r}")
        if not (isinstance(max_duration, (int, float)) and max_duration > 0):
            raise ValueError(f"--max-duration must be a positive number of seconds, got {max_duration!r}")
        self.slos, self.start, self.max_duration = list(slos), float(start), float(max_duration)
        self.tolerance, self.min_step_s, self.clock = tolerance, min_step_s, clock
        self.steps: list[Step] = []
        self.tries: list[dict[str, Any]] = []
        """Every step measured, undecided ones run again included."""
        self.stopped = ""
        self._t0 = 0.0
        self.service_s = 0.0
        """The service time steps are sized by: the E2E-service p50 of the highest passing step (0 before one)."""
        self.unfit: Optional[dict[str, float]] = None
        """The step that did not fit in what was left of ``max_duration`` (the search stopped there)."""

    def step_seconds(self, rate: float, growth: int = 1, service: Optional[float] = None) -> float:
        """Seconds of measured arrivals for a step: enough requests for a pass with no miss, at least `min_step_s` and
        `SETTLE` service times (``service``, default `service_s`), × ``growth``."""
        share = min(1.0 - s.percentile for s in self.slos) or 0.01
        service = self.service_s if service is None else service
        return max(self.min_step_s, math.ceil(3.0 / share) / rate, SETTLE * service) * growth

    def _left(self) -> float:
        return self.max_duration - (self.clock() - self._t0)

    def _step(self, rate: float, measure: Measure) -> Optional[Step]:
        growth, service, resized = 1, self.service_s, 0
        while True:
            seconds = self.step_seconds(rate, growth, service)
            warm = max(WARM_S, service)
            if seconds + warm > self._left():
                self.stopped = "max-duration"
                self.unfit = {"rate_rps": rate, "duration_s": seconds, "warmup_s": warm}
                return None
            cell, server = measure(rate, seconds, warm)
            if cell.partial is not None:
                self.stopped = "interrupted"
                self.tries.append({"rate_rps": rate, "verdict": "interrupted", "duration_s": seconds, "key": cell.key})
                return None
            last = growth >= MAX_GROWTH
            verdicts = [judge(cell, slo, force=last) for slo in self.slos]
            states = {v.verdict for v in verdicts}
            verdict = "fail" if "fail" in states else "pass" if states == {"pass"} else "undecided"
            forced = any(judge(cell, slo).verdict == "undecided" for slo in self.slos)
            step = Step(rate, cell, verdicts, verdict, "point estimate" if last and forced else "confidence", seconds, server,
                        warmup=warm)  # fmt: skip
            own = cell.value("e2e_service", 0.5) if "e2e_service" in cell.sketches else None
            if verdict == "pass":
                step.drifting = [why for why in (drift(cell, slo) for slo in self.slos) if why]
                # sized by no service time (the first step: too short for its own?) or by a much shorter one
                slower = bool(own and (seconds < SETTLE * own if not service else own > 1.5 * service))
                if slower and resized < MAX_RESIZE and not last:
                    # served slower than the step was sized for (a bigger batch): too short, or warmed too briefly
                    step.verdict, step.by = "undecided", f"service time {own:.3g} s: sized for {service:.3g} s"
                    self.tries.append(step.to_dict())
                    service, resized = max(service, own or 0.0), resized + 1
                    continue
                if step.drifting:  # a longer step would see more: run it again, twice as long; at the end, it fails
                    step.verdict, step.by = ("fail", "drift") if last else ("undecided", "drift")
                    if last:
                        step.verdicts = [replace(v, verdict="fail") if drift(cell, slo) else v for v, slo in zip(verdicts, self.slos)]
            self.tries.append(step.to_dict())
            if step.verdict != "undecided":
                self.steps.append(step)
                if step.verdict == "pass" and own and all(s.rate <= rate for s in self.steps if s.verdict == "pass"):
                    self.service_s = own
                return step
            growth *= 2

    def run(self, measure: Measure) -> dict[str, Any]:
        """Search; the ``max_rate`` result (`result`), whatever stopped it."""
        if not _takes_warmup(measure):  # a measure(rate, seconds), as before the search sized the warm-up
            older: Callable[..., tuple[Cell, dict[str, Any]]] = measure

            def measure(rate: float, seconds: float, warm: float) -> tuple[Cell, dict[str, Any]]:
                return older(rate, seconds)

        self._t0 = self.clock()
        rate, passed, failed = self.start, None, None  # type: float, Optional[Step], Optional[Step]
        try:
            while True:
                step = self._step(rate, measure)
                if step is None:
                    break
                if step.verdict == "pass":
                    passed = step
                else:
                    failed = step
                    if passed is None:
                        self.stopped = "first step fails"
                        break
                if failed is None:
                    rate *= 2
                    continue
                assert passed is not None
                if (failed.rate - passed.rate) <= self.tolerance * passed.rate:
                    self.stopped = "converged"
                    break
                rate = (passed.rate + failed.rate) / 2
        except KeyboardInterrupt:
            self.stopped = "interrupted"
        return self.result()

    def result(self) -> dict[str, Any]:
        """The top-level ``max_rate`` object of the run file (module docstring)."""
        passes = [s for s in self.steps if s.verdict == "pass"]
        fails = [s for s in self.steps if s.verdict == "fail"]
        best = max(passes, key=lambda s: s.rate, default=None)
        above = [s for s in fails if best is None or s.rate > best.rate]
        first_fail = min(above, key=lambda s: s.rate, default=None)
        base = self.steps[0].cell.value("ttft_service", 0.5) if self.steps else None
        if first_fail is not None:
            first_fail.signs = saturation(first_fail, base)
        if best is not None:
            best.signs = saturation(best, base)
        return {
            "rps": None if best is None else best.rate,
            "interval_rps": [None if best is None else best.rate, None if first_fail is None else first_fail.rate],
            "first_failing_rps": None if first_fail is None else first_fail.rate,
            "broke": [] if first_fail is None else [v.slo for v in first_fail.verdicts if v.verdict == "fail"],
            "at_max": None if best is None else [v.to_dict() for v in best.verdicts],
            "at_first_failing": None if first_fail is None else [v.to_dict() for v in first_fail.verdicts],
            "saturation": [] if first_fail is None else first_fail.signs,
            "slos": [s.label for s in self.slos], "start_rps": self.start, "tolerance": self.tolerance,
            "max_duration_s": self.max_duration, "elapsed_s": self.clock() - self._t0, "stopped": self.stopped,
            "unfit_step": self.unfit,
            "steps": [s.to_dict() for s in self.steps], "tries": self.tries,
        }  # fmt: skip


def served(cell: Cell) -> Optional[tuple[float, float]]:
    """``(arrived, served)`` requests per second over the step's measured arrivals: the requests due (their intended
    send times: a client queue under a ``--concurrency`` cap is the system's too) between its first and last measured
    one, and the answers that ended in the same span shifted by the mean E2E service time, whatever request they
    answered. A server that keeps up serves what arrives (the shift takes the answers of the span's
    own requests, on average, so neither end of the span biases the count); an overloaded one serves its capacity.
    The cell's ``completed_rps`` is lower on any finite run: its window runs on to the last answer."""
    meas = cell.measured
    sends = sorted(float(s.get("sched", s["sent"])) for s in meas)
    if len(sends) < 2 or sends[-1] <= sends[0]:
        return None
    t0, t1 = sends[0], sends[-1]
    took = [float(s.get("e2e") or s.get("e2e_service") or 0.0) for s in meas if s["outcome"] == "completed"]
    shift = sum(took) / len(took) if took else 0.0
    ends = [float(s["sent"]) + float(s.get("e2e_service") or 0.0) for s in cell.samples
            if s.get("client") != "thin" and s["outcome"] == "completed"]  # fmt: skip
    start, stop = t0 + shift, min(t1 + shift, max(ends, default=t0))  # (an overloaded server's drain ends sooner)
    if stop <= start:
        return None
    return (len(sends) - 1) / (t1 - t0), sum(1 for e in ends if start <= e <= stop) / (stop - start)


def saturation(step: Step, base_ttft: Optional[float]) -> list[str]:
    """What says the server (or the client) ran out of room at this step."""
    cell, out = step.cell, []
    mine = cell.value("ttft_service", 0.5)
    if base_ttft and mine and mine > 1.5 * base_ttft:
        out.append(f"queueing in the server: TTFT service p50 {mine * 1000:.0f} ms, {mine / base_ttft:.1f}× the first step's "
                   f"{base_ttft * 1000:.0f} ms")  # fmt: skip
    queue = cell.value("queue", 0.5)
    if queue and queue > 0.005:
        out.append(f"queueing in the client for an in-flight slot: p50 {queue * 1000:.0f} ms")
    kept, n = served(cell), len(cell.measured)
    if kept is not None and kept[1] < 0.9 * kept[0] and (kept[0] - kept[1]) / kept[0] >= 2 / math.sqrt(n):
        # short by more than 10 %, and by more than chance explains (2 σ of a count of n: 28 % at n = 50)
        out.append(f"throughput short of the offered rate: served {kept[1]:.2f} req/s while {kept[0]:.2f} req/s arrived")
    if cell.failed:
        out.append(f"{cell.failed} of {len(cell.measured)} requests failed")
    out += [w.split(" — ")[0] for w in cell.warnings if w.startswith(("client-bound", "client-starved", "behind schedule", "server-late"))]
    s = step.server
    if s.get("waiting_max") is not None:
        out.append(f"server /metrics: up to {s['waiting_max']:g} requests waiting, {s.get('running_max') or 0:g} running, "
                   f"KV cache up to {100 * (s.get('kv_usage_max') or 0):.0f}% used")  # fmt: skip
    return out


class MetricsPoller:
    """The server's ``/metrics`` read every `every` seconds during a step (a thread), where the target serves one:
    the most requests waiting and running and the fullest KV cache seen (`latencykit.engines` names)."""

    def __init__(self, base_url: Optional[str], every: float = 0.25) -> None:
        root = (base_url or "").rstrip("/")
        self.url = (root[:-3] if root.endswith("/v1") else root) + "/metrics" if root else None
        self.every = every
        self.seen: dict[str, float] = {}
        self._stop: Any = None
        self._thread: Any = None
        if self.url is not None and self._read() is None:
            self.url = None  # no /metrics there (the emulator outside vLLM mode, a hosted API)

    def _read(self) -> Optional[Any]:
        import urllib.request

        try:
            from ..engines._metrics import Scrape

            with urllib.request.urlopen(str(self.url), timeout=2) as resp:
                scrape = Scrape.parse(resp.read().decode("utf-8", "replace"))
        except Exception:  # no page, or the "vllm" extra's parser missing: the step goes without
            return None
        for name in ("waiting", "running", "kv_cache_usage"):
            v = scrape.gauge(name)
            if v is not None:
                self.seen[name] = max(self.seen.get(name, v), v)
        return scrape

    def __enter__(self) -> "MetricsPoller":
        import threading

        self.seen = {}
        if self.url is not None:
            self._stop = threading.Event()

            def poll() -> None:
                while not self._stop.wait(self.every):
                    self._read()

            self._thread = threading.Thread(target=poll, name="latencykit-metrics", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def summary(self) -> dict[str, Any]:
        """``waiting_max``, ``running_max``, ``kv_usage_max`` (only what the page had), ``{}`` without a page."""
        names = {"waiting": "waiting_max", "running": "running_max", "kv_cache_usage": "kv_usage_max"}
        return {names[k]: v for k, v in self.seen.items()}
