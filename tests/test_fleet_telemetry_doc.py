"""What docs/fleet-telemetry.md claims, checked on a small seeded run of benchmarks/exponential_accuracy.py.

A platform team reading the page wants to know three things: that a P99 read from the
exported exponential histogram is within the stated bound at latencykit's default
``max_size``; that a smaller ``max_size`` only ever costs resolution (a coarser scale, never a
finer one); and that merging the fleet's histograms is exact. The script's
``histogram_quantile`` is also checked against expected values from Prometheus' own test
suite, so the figures in the page are what Prometheus would answer.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("opentelemetry.sdk.metrics")

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "exponential_accuracy.py"
SAMPLES = 4_000
SEED = 3


@pytest.fixture(scope="module")
def ea() -> ModuleType:
    """The benchmark script, imported as a module."""
    spec = importlib.util.spec_from_file_location("exponential_accuracy", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


def test_default_max_size_keeps_p99_within_the_bucket_bound(ea: ModuleType) -> None:
    import latencykit.telemetry._views as views

    sizes = (20, 80, views.EXPONENTIAL_MAX_SIZE)
    result = ea.measure_distribution(ea.distribution("ttft"), samples=SAMPLES, seed=SEED, max_sizes=sizes)
    rows = {r.max_size: r for r in result.rows if r.max_size is not None}
    p99 = ea.QUANTILES.index(0.99)

    default = rows[views.EXPONENTIAL_MAX_SIZE]
    assert default.scale == views.EXPONENTIAL_MAX_SCALE  # 2048 buckets never force a downscale here
    assert default.bound == pytest.approx(2 ** (1 / 64) - 1)  # 1.09 %
    for r in rows.values():
        assert abs(r.errors[p99]) <= r.bound + 1e-12, r
    # A smaller max_size gives a coarser scale, never a finer one.
    scales = [rows[s].scale for s in sizes]
    assert scales == sorted(scales) and scales[0] < scales[-1]
    # The sketch keeps its 1 % promise on the same values.
    (sketch,) = [r for r in result.rows if r.max_size is None]
    assert max(abs(e) for e in sketch.errors) <= ea.SKETCH_ALPHA + 1e-9


def test_merged_fleet_histograms_equal_one_histogram_of_every_sample(ea: ModuleType) -> None:
    results = ea.measure_merge(samples=SAMPLES, seed=SEED, instances=4, max_sizes=(20, 160))
    for r in results:
        assert r.merged_scale == min(r.instance_scales)
        assert r.exact_merge, r
        assert abs(r.p99_error) <= r.bound + 1e-12


def test_histogram_quantile_matches_prometheus(ea: ModuleType) -> None:
    # promql/promqltest/testdata/native_histograms.test, `histogram_quantile_1`:
    # {{schema:0 count:12 z_bucket:2 z_bucket_w:0.001 buckets:[2 3 0 1 4]}}. Prometheus indexes
    # buckets by upper bound (its offset 0 is (0.5, 1]); OTel by lower bound, hence offset -1.
    h = ea.ExpHistogram(scale=0, offset=-1, counts=(2, 3, 0, 1, 4), zero_count=2, zero_threshold=0.001)
    expected = {
        1.0: 16.0,
        0.99: 15.67072476139083,
        0.9: 12.99603834169977,
        0.6: 4.594793419988138,
        0.5: 1.5874010519681994,
        0.1: 0.0006,  # in the zero bucket [0, 0.001]: linear interpolation there
        0.0: 0.0,
    }
    for q, want in expected.items():
        assert ea.histogram_quantile(h, q) == pytest.approx(want, rel=1e-12, abs=1e-15), q
    # Exponential interpolation: the middle of the (1, 2] bucket is sqrt(2), linear would say 1.5.
    single = ea.ExpHistogram(scale=0, offset=0, counts=(2,))
    assert ea.histogram_quantile(single, 0.5) == pytest.approx(math.sqrt(2))
    assert ea.histogram_quantile(single, 0.5, interpolation="linear") == pytest.approx(1.5)


def test_downscale_then_merge_is_what_one_coarser_histogram_counts(ea: ModuleType) -> None:
    fine = ea.ExpHistogram(scale=2, offset=-3, counts=(1, 2, 3, 4, 5))  # indices -3..1
    coarse = fine.downscale(0)  # 4 fine buckets per coarse one: -3, -2, -1 -> -1; 0, 1 -> 0
    assert (coarse.offset, coarse.counts) == (-1, (1 + 2 + 3, 4 + 5))
    assert ea.merge([fine, coarse]).counts == (12, 18)
    with pytest.raises(ValueError):
        coarse.downscale(1)
