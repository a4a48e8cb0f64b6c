"""OpenTelemetry SDK Views that switch latencykit's latency histograms to base-2 exponential buckets.

Explicit buckets (0.01 … 81.92 s, doubling) are what the conventions advise, but between
two boundaries a quantile can be off by up to 2×. A base-2 exponential histogram at scale
``s`` has bucket ratio ``2**(2**-s)``; reporting a bucket's midpoint bounds the relative
error by ``(r - 1) / (r + 1)``: scale 6 gives 0.54 %, so ≤ 1 %. Covering 1 ms – 1 h
(ratio 3.6·10⁶, 21.8 doublings) at scale 6 takes 21.8 × 64 ≈ 1,400 buckets, so
``max_size=2048`` keeps scale 6 over that whole range (the SDK lowers the scale only if a
wider range arrives).

Needs ``opentelemetry-sdk`` (imported when called); the library itself never imports it.
"""

from __future__ import annotations

from typing import Any

from . import _semconv as sc

__all__ = ["exponential_views", "EXPONENTIAL_MAX_SCALE", "EXPONENTIAL_MAX_SIZE"]

EXPONENTIAL_MAX_SCALE = 6
EXPONENTIAL_MAX_SIZE = 2048


def exponential_views(*, max_scale: int = EXPONENTIAL_MAX_SCALE, max_size: int = EXPONENTIAL_MAX_SIZE) -> list[Any]:
    """Views for a ``MeterProvider(views=...)`` making every latencykit latency histogram exponential.

    Both naming generations are covered, so the views work whatever
    ``OTEL_SEMCONV_STABILITY_OPT_IN`` says.
    """
    if not isinstance(max_scale, int) or not -10 <= max_scale <= 20:
        raise ValueError(f"max_scale must be an int in -10..20, got {max_scale!r}")
    if not isinstance(max_size, int) or max_size < 2:
        raise ValueError(f"max_size must be an int >= 2, got {max_size!r}")
    try:
        from opentelemetry.sdk.metrics.view import ExponentialBucketHistogramAggregation, View
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError('exponential_views() needs the OpenTelemetry SDK: pip install "latencykit[bench]"') from exc
    names = {sc.LK_TTFT_METRIC, sc.LK_TPOT_METRIC}
    for gen in (sc.V1_41, sc.LATEST_GENAI):
        names |= {gen.duration_metric, gen.ttfc_metric, gen.tpoc_metric}
    return [
        View(instrument_name=name, aggregation=ExponentialBucketHistogramAggregation(max_size=max_size, max_scale=max_scale))
        for name in sorted(names)
    ]
