"""A mergeable percentile sketch with relative accuracy (DDSketch, Masson et al., VLDB 2019).

Guarantee: for non-negative finite values, ``quantile(q)`` is within relative error α of the
exact quantile, ``|x̂ - x| <= α·x`` (default α = 0.01, i.e. 1 %; up to float rounding,
~1e-12 relative), where the exact quantile is the *nearest-rank* (inverse-CDF) one: the
value at 1-based rank ``ceil(q·n)`` of the sorted values, i.e.
``np.quantile(values, q, method="inverted_cdf")`` (`latencykit.core._rank`). So P99 of
fewer than 100 values is the exact maximum. The first and last ranks return the exact min
and max; other results are clamped to ``[min, max]``.

Memory: bucket k holds ``(γ^(k-1), γ^k]`` with γ = (1+α)/(1-α), so a value range
[a, b] needs ``ceil(log_γ b) - ceil(log_γ a) + 1`` int64 counters. For latencies from
1 ms to 1 h at α = 1 % (γ ≈ 1.0202) that is keys -345..410 = **756 buckets = 6,048 bytes**;
the store grows in steps of 64 buckets, so its array is at most 820 buckets (6,560 B).
Scalar `add` buffers up to 256 values (a list, ~8 KB at worst) and folds them in with the
vectorized path when full or on the next read. ``max_buckets`` (default 2048 = 16 KiB: a
6×10¹⁷ range, e.g. 1 ns to 19 years, at α = 1 %; only 60× at α = 0.1 %, so raise it with
α) hard-caps the array: when keys span more, the *lowest* buckets collapse into one and the
guarantee is lost only for quantiles that fall there (``collapsed`` becomes true).

Inputs: ``0.0`` (and ``-0.0``) is counted in a separate zero bucket and reported as 0.0;
negative, NaN and ±inf values raise ``ValueError`` naming the value (``add_many`` names the
first bad value and its index, and adds nothing). Merging sketches of equal α is exact:
bucket counts add, and the result equals one sketch fed all values (the collapse of the
lowest buckets depends only on the final highest key, so it is order independent).

Three small ideas, as in DDSketch: `LogarithmicMapping` (value <-> key), `_DenseStore`
(numpy counts with an offset), and `PercentileSketch` (zero bucket, summary stats, lock).
"""

from __future__ import annotations

import math
import threading
from array import array
from typing import Any, Optional, Sequence

import numpy as np
import numpy.typing as npt

from ..core._rank import nearest_rank

__all__ = ["LogarithmicMapping", "PercentileSketch"]

_GROW = 64  # buckets added beyond the needed range, so growing by a few keys rarely copies
_PENDING = 1024
"""Values buffered (8 bytes each, in an ``array``) before one vectorized pass: numpy's fixed
cost per call (~1 µs warm, tens cache-cold) is paid once per batch, not per value or per call."""
_FORMAT = 1

IntArray = npt.NDArray[np.int64]


class LogarithmicMapping:
    """Maps a positive value to key ``ceil(log_γ x)`` and a key back to its bucket's centre."""

    def __init__(self, relative_accuracy: float) -> None:
        """Build the mapping for relative accuracy α in (0, 1)."""
        alpha = float(relative_accuracy)
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"relative_accuracy must be in (0, 1), got {relative_accuracy!r}")
        self.relative_accuracy = alpha
        self.gamma = (1.0 + alpha) / (1.0 - alpha)
        self._ln_gamma = math.log(self.gamma)
        self._multiplier = 1.0 / self._ln_gamma
        # 2γ^k/(1+γ) is equidistant, in relative terms, from both edges γ^(k-1) and γ^k.
        self._ln_centre = math.log(2.0 / (1.0 + self.gamma))

    def keys(self, values: npt.NDArray[np.float64]) -> IntArray:
        """Keys of an array of positive values."""
        y = np.log(values)
        y *= self._multiplier
        return np.ceil(y, out=y).astype(np.int64)

    def values(self, keys: IntArray) -> npt.NDArray[np.float64]:
        """Representative value (within α of every value in the bucket) of each key."""
        with np.errstate(over="ignore"):  # beyond float max only near 1.8e308; clamped later
            out: npt.NDArray[np.float64] = np.exp(keys * self._ln_gamma + self._ln_centre)
        return out


class _DenseStore:
    """Counts per key in one numpy array starting at ``offset``; lowest keys collapse past the cap."""

    def __init__(self, max_buckets: int) -> None:
        self.max_buckets = max_buckets
        self.counts: IntArray = np.zeros(0, dtype=np.int64)
        self.offset = 0  # key of counts[0]
        self.min_key = 0  # lowest and highest non-empty key; meaningless while total == 0
        self.max_key = 0
        self.total = 0
        self.collapsed = False

    def add_dense(self, lo: int, vec: IntArray) -> None:
        """Add ``vec[i]`` values at key ``lo + i``; both ends of ``vec`` must be non-zero."""
        if vec.size == 0:
            return
        hi = lo + vec.size - 1
        new_min, new_max = (min(lo, self.min_key), max(hi, self.max_key)) if self.total else (lo, hi)
        if new_max - new_min + 1 > self.max_buckets:
            self.collapsed = True
            new_min = new_max - self.max_buckets + 1
            if hi < new_min:
                vec, lo = np.array([vec.sum()], dtype=np.int64), new_min
            elif lo < new_min:
                folded = vec[new_min - lo :].copy()
                folded[0] += vec[: new_min - lo].sum()
                vec, lo = folded, new_min
        self._cover(new_min, new_max)
        i = lo - self.offset
        self.counts[i : i + vec.size] += vec
        self.total += int(vec.sum())
        self.min_key, self.max_key = new_min, new_max

    def _cover(self, a: int, b: int) -> None:
        """Make the array span keys [a, b], folding existing counts below ``a`` into ``a``."""
        fold = 0
        if self.total and self.min_key < a:
            i0, i1 = self.min_key - self.offset, min(a - self.offset, self.counts.size)
            fold = int(self.counts[i0:i1].sum())
            self.counts[i0:i1] = 0
        off, n = self.offset, self.counts.size
        if not (off <= a and b < off + n):
            length = min(self.max_buckets, b - a + 1 + _GROW)
            new_off = b - length + 1 if n and a < off else a  # leave the slack where it grew
            new = np.zeros(length, dtype=np.int64)
            if self.total and self.max_key >= a:
                src = self.counts[max(self.min_key, a) - off : self.max_key - off + 1]
                j = max(self.min_key, a) - new_off
                new[j : j + src.size] = src
            self.counts, self.offset = new, new_off
        self.counts[a - self.offset] += fold

    def nonempty(self) -> tuple[int, IntArray]:
        """(lowest key, counts from the lowest to the highest non-empty key)."""
        if not self.total:
            return 0, np.zeros(0, dtype=np.int64)
        return self.min_key, self.counts[self.min_key - self.offset : self.max_key - self.offset + 1]


class PercentileSketch:
    """Quantiles of non-negative values within relative error α, mergeable and thread-safe."""

    def __init__(self, relative_accuracy: float = 0.01, *, max_buckets: int = 2048) -> None:
        """Empty sketch; α in (0, 1), ``max_buckets`` an int >= 2 capping the store."""
        if isinstance(max_buckets, bool) or not isinstance(max_buckets, int) or max_buckets < 2:
            raise ValueError(f"max_buckets must be an int >= 2, got {max_buckets!r}")
        self._mapping = LogarithmicMapping(relative_accuracy)
        self._store = _DenseStore(max_buckets)
        self._zero_count = 0
        self._sum = 0.0
        self._min = math.inf
        self._max = -math.inf
        self._pending = array("d")  # added values not yet counted (see _PENDING)
        self._lock = threading.Lock()

    @property
    def relative_accuracy(self) -> float:
        """α: the relative error bound of every quantile."""
        return self._mapping.relative_accuracy

    @property
    def max_buckets(self) -> int:
        """Cap on the number of buckets (the lowest collapse beyond it)."""
        return self._store.max_buckets

    def add(self, value: float) -> None:
        """Add one value (>= 0, finite)."""
        v = float(value)
        if not 0.0 <= v < math.inf:
            raise ValueError(f"values must be finite and >= 0, got {value!r}")
        with self._lock:
            self._pending.append(v)
            if len(self._pending) >= _PENDING:
                self._flush()

    def add_many(self, values: npt.ArrayLike) -> None:
        """Add an array of values (>= 0, finite) in one vectorized pass; all or nothing."""
        if isinstance(values, list) and len(values) < _PENDING:
            # A call's few hundred gaps: numpy's fixed cost per call (~30 µs) would dominate,
            # so they join the scalar buffer, checked by C loops (min, sum: a NaN or an
            # infinity makes the sum fail the comparison); a value outside is looked for
            # one by one only when that check fails (or the sum of large values overflows).
            if not values:
                return
            try:
                valid = min(values) >= 0.0 and sum(values) < math.inf
                if not valid:
                    bad = next((k for k, v in enumerate(values) if not 0.0 <= v < math.inf), None)
                    if bad is not None:
                        raise ValueError(f"values must be finite and >= 0, got {values[bad]!r} at index {bad}")
                with self._lock:
                    pending = self._pending
                    before = len(pending)
                    try:
                        pending.extend(values)  # each converted as float() does, in C
                    except TypeError:
                        del pending[before:]  # all or nothing
                        raise
                    if len(pending) >= _PENDING:
                        self._flush()
                return
            except TypeError:
                pass  # not plain numbers: numpy converts them (or says why not) below
        arr = np.asarray(values, dtype=np.float64).ravel()
        if arr.size == 0:
            return
        if not (arr.min() >= 0.0 and arr.max() < math.inf):  # NaN propagates: fails too
            i = int(np.argmax(~((arr >= 0.0) & (arr < math.inf))))
            raise ValueError(f"values must be finite and >= 0, got {float(arr[i])!r} at index {i}")
        keys = self._mapping.keys(arr[arr > 0.0])  # the costly part, outside the lock
        with self._lock:
            self._ingest(arr, keys)

    def _flush(self) -> None:
        """Fold the values buffered by `add` in (lock held)."""
        if self._pending:
            arr = np.array(self._pending, dtype=np.float64)
            del self._pending[:]
            self._ingest(arr, self._mapping.keys(arr[arr > 0.0]))

    def _ingest(self, arr: npt.NDArray[np.float64], keys: IntArray) -> None:
        """Count validated values ``arr`` whose positive ones have ``keys`` (lock held)."""
        store = self._store
        if keys.size:
            kmin, kmax = int(keys.min()), int(keys.max())
            # Clip before bincount so its length never exceeds max_buckets.
            floor = max(kmax, store.max_key if store.total else kmax) - store.max_buckets + 1
            if kmin < floor:
                keys, kmin = np.maximum(keys, floor), floor
                store.collapsed = True
            store.add_dense(kmin, np.bincount(keys - kmin).astype(np.int64))
        self._zero_count += arr.size - keys.size
        self._sum += float(arr.sum())
        self._min = min(self._min, float(arr.min()))
        self._max = max(self._max, float(arr.max()))

    def quantile(self, q: float) -> Optional[float]:
        """Value at quantile q in [0, 1] (nearest rank: 1-based rank ceil(q·n)); None when empty."""
        return self.quantiles([q])[0]

    def quantiles(self, qs: Sequence[float]) -> list[Optional[float]]:
        """`quantile` for each q, reading the store once."""
        for q in qs:
            if not 0.0 <= q <= 1.0:  # also rejects NaN
                raise ValueError(f"quantile must be in [0, 1], got {q!r}")
        with self._lock:
            self._flush()
            n = self._store.total + self._zero_count
            if n == 0:
                return [None for _ in qs]
            lo_key, counts = self._store.nonempty()
            zeros, vmin, vmax = self._zero_count, self._min, self._max
        cum = np.cumsum(counts)
        out: list[Optional[float]] = []
        for q in qs:
            rank = nearest_rank(q, n)  # 0-based
            if rank == 0 or rank == n - 1 or rank < zeros:  # the exact min, max or zero
                out.append(vmin if rank == 0 else vmax if rank == n - 1 else 0.0)
                continue
            idx = int(np.searchsorted(cum, rank - zeros, side="right"))
            x = float(self._mapping.values(np.array([lo_key + idx], dtype=np.int64))[0])
            out.append(min(max(x, vmin), vmax))
        return out

    def merge(self, other: PercentileSketch) -> None:
        """Add all of ``other``'s values (same α required); exact, bucket for bucket."""
        if not isinstance(other, PercentileSketch):
            raise TypeError(f"can only merge a PercentileSketch, got {type(other).__name__}")
        if other.relative_accuracy != self.relative_accuracy:
            raise ValueError(
                f"cannot merge sketches of different relative_accuracy: "
                f"{self.relative_accuracy!r} and {other.relative_accuracy!r}"
            )
        self._absorb(other.to_dict())  # a snapshot: never hold both locks (no lock-order deadlock)

    def _absorb(self, d: dict[str, Any]) -> None:
        """Add the state ``d`` (`to_dict` output) to this sketch; ValueError if malformed."""
        try:
            counts = np.asarray(d["counts"], dtype=np.int64)
            lo_key, zeros, total = int(d["key_offset"]), int(d["zero_count"]), float(d["sum"])
            n = int(counts.sum()) + zeros
            lo, hi = (float(d["min"]), float(d["max"])) if n else (math.inf, -math.inf)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"invalid sketch dict: {exc!r}") from None
        if counts.ndim != 1 or (counts < 0).any() or zeros < 0:
            raise ValueError(f"invalid counts {d['counts']!r} or zero_count {zeros!r}")
        nz = np.flatnonzero(counts)
        with self._lock:
            if nz.size:  # trimmed: add_dense wants non-zero ends
                self._store.add_dense(lo_key + int(nz[0]), counts[nz[0] : nz[-1] + 1])
            self._store.collapsed |= bool(d.get("collapsed", False))
            self._zero_count += zeros
            self._sum += total
            self._min, self._max = min(self._min, lo), max(self._max, hi)

    def _stats(self) -> tuple[int, float, Optional[float], Optional[float]]:
        """(count, sum, min, max), buffered adds included."""
        with self._lock:
            self._flush()
            n = self._store.total + self._zero_count
            return n, self._sum, (self._min if n else None), (self._max if n else None)

    @property
    def count(self) -> int:
        """Number of values added (zeros included)."""
        return self._stats()[0]

    @property
    def sum(self) -> float:
        """Sum of the values added (float addition; the order of batches may change the last bits)."""
        return self._stats()[1]

    @property
    def min(self) -> Optional[float]:
        """Exact smallest value; None when empty."""
        return self._stats()[2]

    @property
    def max(self) -> Optional[float]:
        """Exact largest value; None when empty."""
        return self._stats()[3]

    @property
    def mean(self) -> Optional[float]:
        """Mean (sum / count); None when empty."""
        n, total, _, _ = self._stats()
        return total / n if n else None

    @property
    def collapsed(self) -> bool:
        """True once the lowest buckets were merged to respect ``max_buckets``."""
        return self.to_dict()["collapsed"]  # type: ignore[no-any-return]

    @property
    def nbytes(self) -> int:
        """Bytes of the bucket array (the part that grows with the value range)."""
        with self._lock:
            self._flush()
            return int(self._store.counts.nbytes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable state; `from_dict` restores it exactly."""
        with self._lock:
            self._flush()
            lo_key, counts = self._store.nonempty()
            n = self._store.total + self._zero_count
            return {
                "format": _FORMAT,
                "relative_accuracy": self.relative_accuracy,
                "max_buckets": self.max_buckets,
                "key_offset": lo_key,
                "counts": counts.tolist(),
                "zero_count": self._zero_count,
                "sum": self._sum,
                "min": self._min if n else None,
                "max": self._max if n else None,
                "collapsed": self._store.collapsed,
            }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PercentileSketch:
        """Sketch from `to_dict` output; ValueError naming the bad field otherwise."""
        if d.get("format") != _FORMAT:
            raise ValueError(f"unsupported sketch format {d.get('format')!r}, expected {_FORMAT}")
        try:
            sketch = cls(d["relative_accuracy"], max_buckets=d["max_buckets"])
        except KeyError as exc:
            raise ValueError(f"invalid sketch dict: missing {exc}") from None
        sketch._absorb(d)
        return sketch

    def copy(self) -> PercentileSketch:
        """Independent copy with the same state."""
        return PercentileSketch.from_dict(self.to_dict())

    def __len__(self) -> int:
        """Number of values added."""
        return self.count

    def __repr__(self) -> str:
        """Parameters and summary."""
        d = self.to_dict()
        return (
            f"PercentileSketch(relative_accuracy={d['relative_accuracy']!r}, "
            f"count={sum(d['counts']) + d['zero_count']}, min={d['min']!r}, max={d['max']!r}, "
            f"buckets={len(d['counts'])})"
        )
