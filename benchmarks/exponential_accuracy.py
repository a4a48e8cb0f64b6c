"""How accurate is a fleet P99 read from OpenTelemetry exponential histograms? Measured, per ``max_size``.

For three realistic latency distributions (seeded; 10⁵ samples by default):

* ``ttft``: log-normal TTFT, median 300 ms, σ = 1 (P99 ≈ 3 s, P99.9 ≈ 6.6 s, max ≈ 20 s);
* ``cache``: bimodal TTFT, 75 % prompt-cache hits around 80 ms, 25 % misses around 900 ms;
* ``e2e``: end-to-end times spread log-uniformly over 0.5 s – 60 s,

each sample is recorded through a real SDK histogram instrument with latencykit's metric
name into a ``MeterProvider(views=lk.exponential_views(max_size=M))`` read by an
``InMemoryMetricReader`` (cumulative temporality, as exported to Prometheus), for every
``M`` in 20, 40, 80, 160 (the SDK's own default), 320 and 2048 (latencykit's default,
``EXPONENTIAL_MAX_SIZE``), all at latencykit's ``max_scale`` of 6. The script reads back the
scale the aggregation settled on and estimates P50/P90/P99/P99.9 from the buckets the way
Prometheus' ``histogram_quantile`` does for a native histogram (``histogram_quantile``
below), then prints the relative error against the exact nearest-rank quantile of the
samples, beside latencykit's ``PercentileSketch`` (α = 1 %) fed the same samples, and the
bound ``2^(2^-scale) - 1`` (one bucket's width; see ``bucket_error_bound``).

A second table splits the ``ttft`` samples over a fleet of instances (each with its own
median), records each instance into its own histogram, merges them the way Prometheus'
``sum()`` does (down to the lowest scale, then add the buckets), and checks that the merge
equals one histogram fed every sample at that scale.

    python benchmarks/exponential_accuracy.py                  # 10⁵ samples, ~20 s on one core
    python benchmarks/exponential_accuracy.py --samples 20000 --seed 7
    python benchmarks/exponential_accuracy.py --interpolation linear   # Prometheus 2.x

Needs the OpenTelemetry SDK (``pip install "latencykit[bench]"``). docs/fleet-telemetry.md
quotes this script's output.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Literal, Optional, Sequence

import numpy as np
import numpy.typing as npt

import latencykit as lk
from latencykit.core._rank import nearest_rank
from latencykit.telemetry import _semconv as sc
from latencykit.telemetry._sketch import PercentileSketch
from latencykit.telemetry._views import EXPONENTIAL_MAX_SCALE, EXPONENTIAL_MAX_SIZE

QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.99, 0.999)
MAX_SIZES: tuple[int, ...] = (20, 40, 80, 160, 320, EXPONENTIAL_MAX_SIZE)
SKETCH_ALPHA = 0.01
DEFAULT_SAMPLES = 100_000
DEFAULT_SEED = 25
DEFAULT_INSTANCES = 8
REFERENCE_MAX_SIZE = 16_384  # the SDK's largest; wide enough that the merge check's reference keeps its scale

Interpolation = Literal["exponential", "linear"]
Floats = npt.NDArray[np.float64]


# --------------------------------------------------------------------------------------------
# Distributions


@dataclass(frozen=True)
class Distribution:
    """A seeded latency generator and the latencykit metric its values are recorded under."""

    key: str
    label: str
    metric: str
    draw: Callable[[np.random.Generator, int], Floats]


def _lognormal_ttft(rng: np.random.Generator, n: int) -> Floats:
    """Log-normal TTFT: median 300 ms, σ = 1 (a heavy right tail)."""
    return rng.lognormal(mean=math.log(0.300), sigma=1.0, size=n)


def _cache_bimodal(rng: np.random.Generator, n: int) -> Floats:
    """75 % prompt-cache hits (median 80 ms, σ = 0.3), 25 % misses (median 900 ms, σ = 0.35)."""
    hit = rng.random(n) < 0.75
    hits = rng.lognormal(mean=math.log(0.080), sigma=0.30, size=n)
    misses = rng.lognormal(mean=math.log(0.900), sigma=0.35, size=n)
    return np.where(hit, hits, misses)


def _e2e_log_uniform(rng: np.random.Generator, n: int) -> Floats:
    """End-to-end times log-uniform over [0.5 s, 60 s]: every decade of that range equally busy."""
    return np.exp(rng.uniform(math.log(0.5), math.log(60.0), size=n))


DISTRIBUTIONS: tuple[Distribution, ...] = (
    Distribution("ttft", "log-normal TTFT, median 300 ms, sigma 1", sc.LK_TTFT_METRIC, _lognormal_ttft),
    Distribution("cache", "bimodal TTFT, 75 % hits ~80 ms / 25 % misses ~900 ms", sc.LK_TTFT_METRIC, _cache_bimodal),
    Distribution("e2e", "E2E log-uniform 0.5 s - 60 s", sc.V1_41.duration_metric, _e2e_log_uniform),
)


def distribution(key: str) -> Distribution:
    """The distribution named ``key`` (``ttft``, ``cache`` or ``e2e``)."""
    for d in DISTRIBUTIONS:
        if d.key == key:
            return d
    raise KeyError(key)


# --------------------------------------------------------------------------------------------
# Exponential histograms: record through the SDK, read back, merge


@dataclass(frozen=True)
class ExpHistogram:
    """The positive half of one cumulative OTel exponential-histogram data point.

    OTel bucket ``i`` at scale ``s`` holds ``(base^i, base^(i+1)]`` with ``base = 2^(2^-s)``;
    ``counts[k]`` is bucket ``offset + k``. (Prometheus numbers the same bucket ``i + 1``: it
    indexes by upper bound.) Latencies are positive, so there is no negative half. The zero
    bucket holds ``[0, zero_threshold]`` (the Python SDK's threshold is 0).
    """

    scale: int
    offset: int
    counts: tuple[int, ...]
    zero_count: int = 0
    zero_threshold: float = 0.0
    otlp_bytes: Optional[int] = field(default=None, compare=False)  # see `record_exponential`

    @property
    def count(self) -> int:
        """Number of recorded values."""
        return self.zero_count + sum(self.counts)

    @property
    def span(self) -> int:
        """Buckets from the lowest to the highest non-empty one: what ``max_size`` caps."""
        nonzero = [k for k, c in enumerate(self.counts) if c]
        return nonzero[-1] - nonzero[0] + 1 if nonzero else 0

    @property
    def populated(self) -> int:
        """Non-empty buckets: what a native histogram stores (its layout is sparse)."""
        return sum(1 for c in self.counts if c)

    def bounds(self, index: int) -> tuple[float, float]:
        """``(lower, upper]`` of OTel bucket ``index`` at this scale."""
        width = 2.0**-self.scale  # log2 of the bucket ratio
        return 2.0 ** (index * width), 2.0 ** ((index + 1) * width)

    def downscale(self, scale: int) -> ExpHistogram:
        """The same counts at a coarser ``scale``: 2^(self.scale - scale) neighbours merge into one."""
        shift = self.scale - scale
        if shift < 0:
            raise ValueError(f"cannot upscale from {self.scale} to {scale}")
        merged: dict[int, int] = {}
        for k, c in enumerate(self.counts):
            if c:
                i = (self.offset + k) >> shift  # floor division, also for negative indices
                merged[i] = merged.get(i, 0) + c
        return _from_sparse(scale, merged, self.zero_count, self.zero_threshold)


def _from_sparse(scale: int, counts: dict[int, int], zero_count: int = 0, zero_threshold: float = 0.0) -> ExpHistogram:
    """A histogram from ``{bucket index: count}``, trimmed to its lowest and highest non-empty buckets."""
    if not counts:
        return ExpHistogram(scale, 0, (), zero_count, zero_threshold)
    lo, hi = min(counts), max(counts)
    return ExpHistogram(scale, lo, tuple(counts.get(i, 0) for i in range(lo, hi + 1)), zero_count, zero_threshold)


def merge(histograms: Sequence[ExpHistogram]) -> ExpHistogram:
    """Sum histograms at their lowest common scale, as Prometheus' ``sum()`` does for native histograms."""
    scale = min(h.scale for h in histograms)
    total: dict[int, int] = {}
    for h in histograms:
        low = h.downscale(scale)
        for k, c in enumerate(low.counts):
            if c:
                total[low.offset + k] = total.get(low.offset + k, 0) + c
    return _from_sparse(scale, total, sum(h.zero_count for h in histograms), max(h.zero_threshold for h in histograms))


def record_exponential(values: Floats, metric: str, *, max_size: int, max_scale: int = EXPONENTIAL_MAX_SCALE) -> ExpHistogram:
    """Record ``values`` one by one through an SDK histogram named ``metric`` under ``lk.exponential_views``.

    Returns the cumulative data point an ``InMemoryMetricReader`` collects: what a
    ``PeriodicExportingMetricReader`` would ship over OTLP at that instant. ``otlp_bytes`` is
    the size of the OTLP/protobuf export request carrying it (uncompressed; resource and scope
    included), or None without ``opentelemetry-exporter-otlp-proto-common``.
    """
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import ExponentialHistogramDataPoint, InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], views=lk.exponential_views(max_scale=max_scale, max_size=max_size))
    try:
        histogram = provider.get_meter("latencykit.benchmarks.exponential_accuracy").create_histogram(metric, unit="s")
        record = histogram.record
        for v in values.tolist():
            record(v)
        data = reader.get_metrics_data()
    finally:
        provider.shutdown()
    assert data is not None
    metrics = [m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics if m.name == metric]
    points = [p for m in metrics for p in m.data.data_points]
    if len(points) != 1 or not isinstance(points[0], ExponentialHistogramDataPoint):
        raise RuntimeError(f"expected one exponential data point for {metric!r}, got {points!r}")
    p = points[0]
    counts = {p.positive.offset + k: int(c) for k, c in enumerate(p.positive.bucket_counts) if c}
    h = _from_sparse(p.scale, counts, int(p.zero_count))  # trimmed: the SDK may keep empty buckets at the ends
    return replace(h, otlp_bytes=_otlp_bytes(data))


def _otlp_bytes(data: object) -> Optional[int]:
    try:
        from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    return len(encode_metrics(data).SerializeToString())  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Quantiles


def histogram_quantile(h: ExpHistogram, q: float, *, interpolation: Interpolation = "exponential") -> float:
    """The q-quantile of ``h`` as PromQL's ``histogram_quantile`` estimates it on a native histogram.

    Bucket search: for q < 0.5, walk the non-empty buckets upwards until the cumulative
    count reaches ``q·n``; for q ≥ 0.5, walk downwards from the top until it reaches
    ``(1-q)·n`` (Prometheus does this to keep precision in the tail). ``fraction`` is how far
    into that bucket's count the rank lies. Interpolation within the bucket:

    * ``exponential`` (Prometheus 3.x): linear in log space,
      ``2^(log2(lower) + (log2(upper) - log2(lower))·fraction)`` — as if the bucket's values
      filled a finer exponential histogram evenly;
    * ``linear`` (Prometheus 2.x, and the zero bucket in 3.x): ``lower + (upper - lower)·fraction``.

    Either way the estimate lies inside the bucket that holds the exact quantile (or on its
    edge), so its relative error is at most ``bucket_error_bound(h.scale)``.
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {q!r}")
    n = h.count
    if n == 0:
        return math.nan
    # (lower, upper, count, is_zero_bucket), ascending, empty buckets skipped as Prometheus does.
    buckets = [(0.0, h.zero_threshold, h.zero_count, True)] if h.zero_count else []
    buckets += [(*h.bounds(h.offset + k), c, False) for k, c in enumerate(h.counts) if c]
    cumulative = 0
    if q < 0.5:
        rank = q * n
        for bucket in buckets:
            cumulative += bucket[2]
            if cumulative >= rank:
                break
        into = rank - (cumulative - bucket[2])
    else:
        rank = (1.0 - q) * n
        for bucket in reversed(buckets):
            cumulative += bucket[2]
            if cumulative >= rank:
                break
        into = cumulative - rank
    lower, upper, count, is_zero = bucket
    fraction = into / count
    if is_zero or interpolation == "linear":
        return lower + (upper - lower) * fraction
    log_lower, log_upper = math.log2(lower), math.log2(upper)
    return float(2.0 ** (log_lower + (log_upper - log_lower) * fraction))


def bucket_error_bound(scale: int) -> float:
    """Largest relative error of any estimate inside the bucket holding the exact quantile: ``2^(2^-s) - 1``.

    Both lie in one ``(lower, upper]`` with ``upper/lower = r = 2^(2^-s)``, so their ratio is
    within ``[1/r, r]``. (Reporting the bucket's midpoint instead would halve it, about
    ``(r-1)/(r+1)``; ``histogram_quantile`` interpolates, so it can land anywhere in the bucket.)
    """
    return float(2.0 ** (2.0**-scale) - 1.0)


def exact_quantiles(values: Floats, qs: Sequence[float]) -> list[float]:
    """Nearest-rank quantiles (1-based rank ``ceil(q·n)``), latencykit's rule everywhere."""
    ordered = np.sort(values)
    return [float(ordered[nearest_rank(q, len(ordered))]) for q in qs]


def sketch_quantiles(values: Floats, qs: Sequence[float], alpha: float = SKETCH_ALPHA) -> tuple[list[float], int]:
    """Quantiles from a latencykit ``PercentileSketch`` fed ``values``, and the buckets its store spans."""
    sketch = PercentileSketch(alpha)
    sketch.add_many(values)
    span = len(sketch.to_dict()["counts"])
    return [float(x) if x is not None else math.nan for x in sketch.quantiles(qs)], span


def relative_errors(estimates: Sequence[float], exact: Sequence[float]) -> tuple[float, ...]:
    """``(estimate - exact) / exact`` for each pair."""
    return tuple((e - x) / x for e, x in zip(estimates, exact))


# --------------------------------------------------------------------------------------------
# Measurements


@dataclass(frozen=True)
class AccuracyRow:
    """One histogram configuration (or the sketch, ``max_size`` None) measured on one distribution."""

    max_size: Optional[int]
    scale: Optional[int]
    span: int  # buckets between the lowest and highest non-empty one (sketch: its own buckets)
    otlp_bytes: Optional[int]  # one export request carrying the point (None for the sketch)
    bound: float  # theoretical relative-error bound
    errors: tuple[float, ...]  # relative error per quantile in QUANTILES order


@dataclass(frozen=True)
class DistributionResult:
    """Every row for one distribution, with the exact quantiles they are measured against."""

    distribution: Distribution
    samples: int
    minimum: float
    maximum: float
    exact: tuple[float, ...]
    rows: tuple[AccuracyRow, ...]


def measure_distribution(
    dist: Distribution,
    *,
    samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
    max_sizes: Sequence[int] = MAX_SIZES,
    interpolation: Interpolation = "exponential",
) -> DistributionResult:
    """Record ``samples`` seeded values of ``dist`` at each ``max_size`` and measure the quantile errors."""
    values = dist.draw(np.random.default_rng(seed), samples)
    exact = exact_quantiles(values, QUANTILES)
    rows = []
    for size in max_sizes:
        h = record_exponential(values, dist.metric, max_size=size)
        est = [histogram_quantile(h, q, interpolation=interpolation) for q in QUANTILES]
        rows.append(AccuracyRow(size, h.scale, h.span, h.otlp_bytes, bucket_error_bound(h.scale), relative_errors(est, exact)))
    est, span = sketch_quantiles(values, QUANTILES)
    rows.append(AccuracyRow(None, None, span, None, SKETCH_ALPHA, relative_errors(est, exact)))
    return DistributionResult(dist, samples, float(values.min()), float(values.max()), tuple(exact), tuple(rows))


@dataclass(frozen=True)
class MergeResult:
    """A fleet's histograms merged at one ``max_size``."""

    max_size: int
    instance_scales: tuple[int, ...]
    merged_scale: int
    exact_merge: bool  # merged buckets == one histogram fed every sample at the merged scale
    p99_error: float
    bound: float


def fleet_medians(instances: int) -> list[float]:
    """TTFT medians of the fleet's instances: evenly from 200 ms to 450 ms (regions, models, load)."""
    if instances == 1:
        return [0.300]
    return [0.200 + 0.250 * k / (instances - 1) for k in range(instances)]


def measure_merge(
    *,
    samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
    instances: int = DEFAULT_INSTANCES,
    max_sizes: Sequence[int] = MAX_SIZES,
    interpolation: Interpolation = "exponential",
) -> list[MergeResult]:
    """Split ``samples`` log-normal TTFTs over ``instances`` instances, merge their histograms, check the merge."""
    rng = np.random.default_rng(seed + 1)
    per = max(samples // instances, 1)
    parts = [rng.lognormal(mean=math.log(m), sigma=1.0, size=per) for m in fleet_medians(instances)]
    everything = np.concatenate(parts)
    exact_p99 = exact_quantiles(everything, [0.99])[0]
    results = []
    for size in max_sizes:
        hs = [record_exponential(p, sc.LK_TTFT_METRIC, max_size=size) for p in parts]
        merged = merge(hs)
        reference = record_exponential(everything, sc.LK_TTFT_METRIC, max_size=REFERENCE_MAX_SIZE, max_scale=merged.scale)
        p99 = histogram_quantile(merged, 0.99, interpolation=interpolation)
        scales = tuple(h.scale for h in hs)
        error = (p99 - exact_p99) / exact_p99
        results.append(MergeResult(size, scales, merged.scale, reference == merged, error, bucket_error_bound(merged.scale)))
    return results


# --------------------------------------------------------------------------------------------
# Report


def _pct(x: float) -> str:
    """A signed relative error in percent, 3 significant figures (``+0.0412 %``, ``-12.3 %``)."""
    if x == 0:
        return "0 %"
    digits = max(0, 2 - int(math.floor(math.log10(abs(x) * 100))))
    return f"{x * 100:+.{digits}f} %"


def _bound(x: float) -> str:
    return f"{x * 100:.3g} %"


def _seconds(x: float) -> str:
    return f"{x * 1000:.1f} ms" if x < 1 else f"{x:.2f} s"


def _table(rows: Sequence[Sequence[str]], *, first_left: bool) -> list[str]:
    """Rows of cells as aligned, indented lines: numbers right-aligned, the first column optionally left."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]

    def cell(i: int, text: str) -> str:
        return text.ljust(widths[i]) if i == 0 and first_left else text.rjust(widths[i])

    return ["  " + "  ".join(cell(i, text) for i, text in enumerate(row)) for row in rows]


def format_distribution(result: DistributionResult) -> str:
    """One distribution's table: per max_size, the scale reached, the bound and the error per quantile."""
    d = result.distribution
    head = ["source", "scale", "span", "OTLP B", "bound"] + [f"P{q * 100:g}" for q in QUANTILES]
    lines = [
        f"{d.label}  [{d.key}; metric {d.metric}]",
        f"{result.samples:,} samples, {_seconds(result.minimum)} - {_seconds(result.maximum)}; exact (nearest rank): "
        + ", ".join(f"P{q * 100:g} {_seconds(x)}" for q, x in zip(QUANTILES, result.exact)),
    ]
    table = [head]
    for r in result.rows:
        source = f"max_size {r.max_size}" if r.max_size is not None else f"sketch a={SKETCH_ALPHA:g}"
        size = "-" if r.otlp_bytes is None else f"{r.otlp_bytes:,}"
        table.append([source, "-" if r.scale is None else str(r.scale), str(r.span), size, _bound(r.bound)] + [_pct(e) for e in r.errors])
    return "\n".join(lines + _table(table, first_left=True))


def format_merge(results: Sequence[MergeResult], instances: int, samples: int) -> str:
    """The fleet-merge table."""
    lo_ms, hi_ms = (m * 1000 for m in fleet_medians(instances)[:: max(instances - 1, 1)])
    per = max(samples // instances, 1)
    title = f"fleet merge: {instances} instances x {per:,} log-normal TTFTs (medians {lo_ms:.0f}-{hi_ms:.0f} ms, sigma 1)"
    table = [["max_size", "instance scales", "merged scale", "exact merge", "P99 error", "bound"]]
    for r in results:
        lo, hi = min(r.instance_scales), max(r.instance_scales)
        scales = f"{lo}" if lo == hi else f"{lo}..{hi}"
        merged = "yes" if r.exact_merge else "NO"
        table.append([str(r.max_size), scales, str(r.merged_scale), merged, _pct(r.p99_error), _bound(r.bound)])
    return "\n".join([title] + _table(table, first_left=False))


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run every distribution and the fleet merge; print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--samples", "-n", type=int, default=DEFAULT_SAMPLES, help="values per distribution (default %(default)s)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed (default %(default)s)")
    parser.add_argument("--instances", type=int, default=DEFAULT_INSTANCES, help="instances in the fleet merge (default %(default)s)")
    parser.add_argument(
        "--interpolation",
        choices=("exponential", "linear"),
        default="exponential",
        help="within-bucket rule: Prometheus 3.x (default) or 2.x",
    )
    args = parser.parse_args(argv)
    if args.samples < 1 or args.instances < 1:
        parser.error("--samples and --instances must be >= 1")
    t0 = time.perf_counter()
    print(
        f"OTel SDK exponential histograms at max_scale {EXPONENTIAL_MAX_SCALE} vs PercentileSketch; histogram_quantile with "
        f"{args.interpolation} interpolation; relative error vs the exact quantile; seed {args.seed}\n"
    )
    for dist in DISTRIBUTIONS:
        result = measure_distribution(dist, samples=args.samples, seed=args.seed, interpolation=args.interpolation)
        print(format_distribution(result) + "\n")
    merged = measure_merge(samples=args.samples, seed=args.seed, instances=args.instances, interpolation=args.interpolation)
    print(format_merge(merged, args.instances, args.samples))
    print(f"\n{time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
