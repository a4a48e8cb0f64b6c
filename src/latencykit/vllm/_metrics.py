"""One parsed ``/metrics`` page of a vLLM or llama.cpp server (`Scrape`), and its histograms.

Parsing is ``prometheus_client``'s text parser (the ``vllm`` extra), imported on first use.
Values are read by the logical names of `_names` — current vLLM names first, older ones
after — and summed over the ``engine`` label (data-parallel engines); KV-cache usage takes
the fullest engine instead, since a sum of fractions means nothing. ``model=`` keeps only
the series of one ``model_name`` (a server can serve several).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

from ._names import CACHE_CONFIG_INFO, COUNTERS, GAUGES, HISTOGRAMS, LLAMACPP_PREFIX, VLLM_PREFIX

__all__ = ["Histogram", "Scrape", "parse_metrics"]

_EXTRA_HINT = 'reading /metrics needs the "vllm" extra: pip install "latencykit[vllm]"'
_MAX_OVER_ENGINES = frozenset({"kv_cache_usage", "prefix_cache_hit_rate"})

Labels = Mapping[str, str]


def _parser() -> Any:
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(_EXTRA_HINT) from exc
    return text_string_to_metric_families


@dataclass(frozen=True)
class Histogram:
    """A Prometheus histogram (or the difference of two): cumulative buckets, sum and count.

    ``buckets`` are ``(upper bound, cumulative count)`` pairs sorted by bound, ``+Inf`` last.
    """

    buckets: tuple[tuple[float, float], ...]
    sum: float
    count: float

    @property
    def mean(self) -> Optional[float]:
        """``sum / count`` (exact, unlike the quantiles), or ``None`` when empty."""
        return self.sum / self.count if self.count > 0 else None

    def quantile(self, q: float) -> Optional[float]:
        """The ``q`` quantile by linear interpolation inside its bucket, as PromQL's
        ``histogram_quantile`` does: exact only to the bucket's width. ``None`` when empty;
        the largest finite bound when the quantile falls in the ``+Inf`` bucket."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile must be in [0, 1], got {q!r}")
        total = self.buckets[-1][1] if self.buckets else 0.0
        if total <= 0:
            return None
        rank = q * total
        lower, below = 0.0, 0.0
        for bound, cumulative in self.buckets:
            if cumulative >= rank and cumulative > below:
                if math.isinf(bound):
                    return lower
                return lower + (bound - lower) * (rank - below) / (cumulative - below)
            lower, below = (bound if not math.isinf(bound) else lower), cumulative
        return lower

    def minus(self, earlier: Histogram) -> Histogram:
        """What was observed since ``earlier`` (a reset server: everything in ``self``)."""
        if self.count < earlier.count or len(self.buckets) != len(earlier.buckets):
            return self
        buckets = tuple((b, c - e) for (b, c), (_, e) in zip(self.buckets, earlier.buckets))
        return Histogram(buckets, self.sum - earlier.sum, self.count - earlier.count)


class Scrape:
    """One ``/metrics`` page: every sample, indexed by name, plus when it was taken.

    ``at`` is a monotonic time (for rates), ``wall`` a ``time.time()`` (to match client records).
    """

    __slots__ = ("at", "wall", "_samples")

    def __init__(self, samples: Iterable[tuple[str, Labels, float]], *, at: Optional[float] = None, wall: Optional[float] = None) -> None:
        self.at = time.monotonic() if at is None else at
        self.wall = time.time() if wall is None else wall
        index: dict[str, list[tuple[Labels, float]]] = {}
        for name, labels, value in samples:
            index.setdefault(name, []).append((dict(labels), float(value)))
        self._samples = index

    @classmethod
    def parse(cls, text: str, *, at: Optional[float] = None, wall: Optional[float] = None) -> Scrape:
        """Parse Prometheus text exposition format (raises ``ValueError`` on a malformed page)."""
        if not isinstance(text, str):
            raise ValueError(f"metrics text must be a str, got {type(text).__name__}")
        families = _parser()(text)
        samples = [(s.name, s.labels, s.value) for family in families for s in family.samples]
        return cls(samples, at=at, wall=wall)

    # -- raw access ------------------------------------------------------------------------
    @property
    def names(self) -> frozenset[str]:
        """Every sample name on the page."""
        return frozenset(self._samples)

    @property
    def server(self) -> str:
        """``"vllm"``, ``"llamacpp"`` or ``"unknown"``, from the metric prefixes."""
        if any(n.startswith(VLLM_PREFIX) for n in self._samples):
            return "vllm"
        if any(n.startswith(LLAMACPP_PREFIX) for n in self._samples):
            return "llamacpp"
        return "unknown"

    @property
    def models(self) -> tuple[str, ...]:
        """The ``model_name`` label values seen, sorted."""
        seen = {labels["model_name"] for rows in self._samples.values() for labels, _ in rows if "model_name" in labels}
        return tuple(sorted(seen))

    def series(self, name: str, model: Optional[str] = None, **labels: str) -> list[tuple[Labels, float]]:
        """The samples called ``name`` whose labels include ``labels`` (and ``model_name=model``)."""
        want = dict(labels)
        if model is not None:
            want["model_name"] = model
        rows = self._samples.get(name, [])
        return [(lab, v) for lab, v in rows if all(lab.get(k) == v2 for k, v2 in want.items())]

    def value(self, name: str, model: Optional[str] = None, *, how: str = "sum", **labels: str) -> Optional[float]:
        """The matching samples summed (``how="max"``: the largest), or ``None`` if absent."""
        rows = self.series(name, model, **labels)
        if not rows:
            return None
        values = [v for _, v in rows]
        return max(values) if how == "max" else sum(values)

    def info(self, name: str) -> dict[str, str]:
        """The labels of an info-style gauge (``vllm:cache_config_info``); ``{}`` if absent."""
        rows = self._samples.get(name)
        return dict(rows[0][0]) if rows else {}

    # -- logical names ---------------------------------------------------------------------
    def _first(self, table: Mapping[str, Sequence[str]], logical: str) -> Optional[str]:
        try:
            candidates = table[logical]
        except KeyError:
            raise ValueError(f"unknown metric {logical!r}; known: {sorted(table)}") from None
        return next((n for n in candidates if n in self._samples), None)

    def gauge(self, logical: str, model: Optional[str] = None, **labels: str) -> Optional[float]:
        """A gauge by logical name (`_names.GAUGES`), e.g. ``"kv_cache_usage"``, ``"waiting"``."""
        name = self._first(GAUGES, logical)
        if name is None:
            return None
        return self.value(name, model, how="max" if logical in _MAX_OVER_ENGINES else "sum", **labels)

    def counter(self, logical: str, model: Optional[str] = None, **labels: str) -> Optional[float]:
        """A counter's current total by logical name (`_names.COUNTERS`)."""
        name = self._first(COUNTERS, logical)
        return None if name is None else self.value(name, model, **labels)

    def histogram(self, logical: str, model: Optional[str] = None) -> Optional[Histogram]:
        """A histogram by logical name (`_names.HISTOGRAMS`), buckets summed over engines."""
        try:
            families = HISTOGRAMS[logical]
        except KeyError:
            raise ValueError(f"unknown histogram {logical!r}; known: {sorted(HISTOGRAMS)}") from None
        for family in families:
            rows = self.series(family + "_bucket", model)
            if not rows:
                continue
            by_bound: dict[float, float] = {}
            for labels, value in rows:
                bound = float(labels.get("le", "+Inf"))
                by_bound[bound] = by_bound.get(bound, 0.0) + value
            total = self.value(family + "_sum", model) or 0.0
            count = self.value(family + "_count", model)
            buckets = tuple(sorted(by_bound.items()))
            return Histogram(buckets, total, count if count is not None else buckets[-1][1])
        return None

    def waiting_by_reason(self, model: Optional[str] = None) -> dict[str, float]:
        """``vllm:num_requests_waiting_by_reason`` per ``reason`` (``capacity``, ``deferred``); ``{}`` if absent."""
        out: dict[str, float] = {}
        for labels, value in self.series("vllm:num_requests_waiting_by_reason", model):
            reason = labels.get("reason", "")
            out[reason] = out.get(reason, 0.0) + value
        return out

    @property
    def prefix_caching_enabled(self) -> Optional[bool]:
        """From ``vllm:cache_config_info``'s ``enable_prefix_caching``; ``None`` if not said."""
        flag = self.info(CACHE_CONFIG_INFO).get("enable_prefix_caching")
        return None if flag is None else flag.lower() == "true"

    def _cache_number(self, key: str) -> Optional[float]:
        try:
            value = float(self.info(CACHE_CONFIG_INFO)[key])
        except (KeyError, ValueError):  # absent, or "None" (e.g. num_cpu_blocks)
            return None
        return value if value > 0 and math.isfinite(value) else None

    @property
    def kv_block_size(self) -> Optional[int]:
        """Tokens per KV-cache block (``cache_config_info``'s ``block_size``); ``None`` if not said."""
        size = self._cache_number("block_size")
        return int(size) if size is not None else None

    @property
    def kv_cache_tokens(self) -> Optional[float]:
        """The KV cache's size in tokens, per engine: ``cache_config_info``'s ``kv_cache_size_tokens``,
        else ``num_gpu_blocks`` x ``block_size``; ``None`` if the page does not say."""
        tokens = self._cache_number("kv_cache_size_tokens")
        if tokens is not None:
            return tokens
        blocks, size = self._cache_number("num_gpu_blocks"), self.kv_block_size
        return blocks * size if blocks is not None and size is not None else None


def parse_metrics(text: str) -> Scrape:
    """Parse one ``/metrics`` page (Prometheus text format) into a `Scrape`."""
    return Scrape.parse(text)
