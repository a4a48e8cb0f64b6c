"""Percentile sketch: ours vs the ``ddsketch`` package vs numpy exact, side by side in one run.

For each, on one seeded lognormal dataset (median 300 ms, σ = 1; 10⁶ values by default):

* inserts/s, scalar: a Python loop calling ``add(v)`` per value (numpy exact: ``list.append``);
* inserts/s, vectorized: ours ``add_many(array)`` into a fresh sketch; numpy exact:
  ``np.array(values)`` copy; best of 5 runs (the first pays page faults for fresh arrays).
  ddsketch has no batch insert, so its column repeats the scalar loop (one run each);
* bytes: ours ``counts.nbytes`` of the bucket store (int64 array); ddsketch
  ``sys.getsizeof(bins)`` of its DenseStore list plus ``sys.getsizeof`` of every element
  (boxed Python floats); numpy exact: ``nbytes`` of the float64 array. Fixed per-object
  overhead (mapping, attributes) is excluded for all;
* max relative error over q ∈ {0.5, 0.9, 0.95, 0.99, 0.999} against each one's own exact
  rule: latencykit's nearest rank ``np.quantile(values, q, method="inverted_cdf")``,
  ddsketch's ``method="lower"`` (rank ``floor(q·(n−1))``); numpy exact uses the former.

Goal: ours vectorized / ddsketch per-value loop ≥ 10×.

    pip install "ddsketch>=3.0"        # optional; its column is skipped if missing
    python benchmarks/sketch.py        # 10⁶ values
    python benchmarks/sketch.py -n 200000 --alpha 0.005
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any, Callable, Optional

import numpy as np

from latencykit.telemetry._sketch import PercentileSketch

QS = (0.5, 0.9, 0.95, 0.99, 0.999)


def _rate(n: int, fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """Inserts per second of the fastest of ``repeat`` runs, and that run's result."""
    best, result = math.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return n / best, result


def _max_rel_error(got: list[Optional[float]], exact: np.ndarray) -> float:
    return max(abs(float(g) - float(e)) / float(e) for g, e in zip(got, exact) if g is not None)


def _ours(values: np.ndarray, listed: list[float], alpha: float) -> dict[str, float]:
    def scalar() -> PercentileSketch:
        s = PercentileSketch(alpha)
        add = s.add
        for v in listed:
            add(v)
        return s

    def vectorized() -> PercentileSketch:
        s = PercentileSketch(alpha)
        s.add_many(values)
        return s

    scalar_rate, s1 = _rate(len(listed), scalar)
    vector_rate, s2 = _rate(values.size, vectorized, repeat=5)
    assert s1.to_dict()["counts"] == s2.to_dict()["counts"], "scalar and vectorized differ"
    return {"scalar": scalar_rate, "vector": vector_rate, "bytes": s2.nbytes, "q": s2.quantiles(QS)}


def _ddsketch(listed: list[float], alpha: float) -> Optional[dict[str, Any]]:
    try:
        from ddsketch import DDSketch
    except ImportError:
        return None

    def scalar() -> Any:
        s = DDSketch(relative_accuracy=alpha)
        add = s.add
        for v in listed:
            add(v)
        return s

    rate, s = _rate(len(listed), scalar)
    bins = s._store.bins  # DenseStore: a Python list of float counts
    size = sys.getsizeof(bins) + sum(sys.getsizeof(b) for b in bins)
    qs = [s.get_quantile_value(q) for q in QS]
    return {"scalar": rate, "vector": rate, "bytes": size, "q": qs}


def _numpy_exact(values: np.ndarray, listed: list[float]) -> dict[str, Any]:
    def scalar() -> list[float]:
        out: list[float] = []
        append = out.append
        for v in listed:
            append(v)
        return out

    scalar_rate, _ = _rate(len(listed), scalar)
    vector_rate, arr = _rate(values.size, lambda: np.array(values), repeat=5)
    t0 = time.perf_counter()
    qs = list(np.quantile(arr, QS, method="inverted_cdf"))
    quantile_s = time.perf_counter() - t0
    return {"scalar": scalar_rate, "vector": vector_rate, "bytes": arr.nbytes, "q": qs, "qs": quantile_s}


def main() -> None:
    """Run the three columns and print the table and the goal ratio."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=1_000_000, help="values (default 10⁶)")
    ap.add_argument("--alpha", type=float, default=0.01, help="relative accuracy (default 0.01)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    values = np.random.default_rng(args.seed).lognormal(np.log(0.3), 1.0, args.n)
    listed = values.tolist()
    exact = {rule: np.quantile(values, QS, method=rule) for rule in ("inverted_cdf", "lower")}

    rows: dict[str, Optional[dict[str, Any]]] = {
        "latencykit": _ours(values, listed, args.alpha),
        "ddsketch": _ddsketch(listed, args.alpha),
        "numpy exact": _numpy_exact(values, listed),
    }
    print(f"{args.n:,} lognormal values (median 0.3 s, sigma 1), alpha = {args.alpha}")
    print(f"{'':<12} {'scalar ins/s':>14} {'vector ins/s':>14} {'bytes':>10} {'max rel err':>12}")
    for name, r in rows.items():
        if r is None:
            print(f"{name:<12} skipped: ddsketch not installed (pip install \"ddsketch>=3.0\")")
            continue
        err = _max_rel_error(r["q"], exact["lower" if name == "ddsketch" else "inverted_cdf"])
        print(f"{name:<12} {r['scalar']:>14,.0f} {r['vector']:>14,.0f} {r['bytes']:>10,} {err:>12.5f}")
    print(f"numpy exact: np.quantile over {QS} took {rows['numpy exact']['qs'] * 1e3:.1f} ms")  # type: ignore[index]
    ours, dd = rows["latencykit"], rows["ddsketch"]
    assert ours is not None
    if dd is not None:
        ratio = ours["vector"] / dd["scalar"]
        verdict = "meets" if ratio >= 10 else "MISSES"
        print(f"ours vectorized / ddsketch per-value loop: {ratio:,.0f}x ({verdict} goal >= 10x)")
        print(f"ours scalar / ddsketch per-value loop: {ours['scalar'] / dd['scalar']:.2f}x")


if __name__ == "__main__":
    main()
