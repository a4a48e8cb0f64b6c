"""One parsed ``/metrics`` page of a self-hosted engine (`Scrape`), and its histograms.

The engine (vLLM, SGLang, TensorRT-LLM's trtllm-serve, Triton, TGI, llama.cpp) is told by
the page's metric prefixes (`Scrape.server`). Parsing is ``prometheus_client``'s text parser
(the ``vllm`` extra), imported on first use. Values are read by the logical names of
`_names` — current names first, older ones after — and summed over the ``engine`` label
(vLLM's data-parallel engines) and SGLang's ``dp_rank``; the series every tensor-parallel
rank repeats (``tp_rank``, `_names.RANK_LABELS`) count once (the largest rank's value, never a
sum). KV-cache usage takes the fullest engine instead, since a sum of fractions means
nothing. ``model=`` keeps only the series of one model (``model_name``, Triton's ``model``;
series without a model label, such as GPU gauges, stay). A logical metric the engine has no
name for is `not_exposed`; one it has but the page lacks reads ``None``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

from ._names import (
    CACHE_CONFIG_INFO,
    COUNTERS,
    ENGINE_PREFIXES,
    ENGINES,
    GAUGES,
    HISTOGRAMS,
    RANK_LABELS,
    Name,
    exposed_by,
    labels_of,
    name_of,
)

__all__ = ["Histogram", "Scrape", "parse_metrics"]

_EXTRA_HINT = 'reading /metrics needs the "vllm" extra: pip install "latencykit[vllm]"'
_MAX_OVER_ENGINES = frozenset({
    "kv_cache_usage", "prefix_cache_hit_rate", "spec_accept_length", "spec_accept_rate", "kv_cache_tokens", "kv_tokens_per_block",
})

Labels = Mapping[str, str]
_MODEL_LABELS = ("model_name", "model")


def _model_of(labels: Labels) -> Optional[str]:
    return labels.get("model_name", labels.get("model"))


def _normalized(samples: list[tuple[str, Labels, float]]) -> list[tuple[str, Labels, float]]:
    """Pages whose names lack the prefix the reader keys on: trtllm-serve's own
    ``/prometheus/metrics`` (unprefixed names, ``engine_type="trtllm"``) and SGLang behind an
    exporter that writes ``sglang_`` for ``sglang:``."""
    names = {n for n, _, _ in samples}
    if any(n.startswith(p) for n in names for p in ("vllm:", "sglang:", "trtllm_", "tgi_", "llamacpp:", "nv_inference_")):
        return samples
    if any(lab.get("engine_type") == "trtllm" for _, lab, _ in samples):
        return [(n if n.startswith(("python_", "process_")) else "trtllm_" + n, lab, v) for n, lab, v in samples]
    if any(n.startswith("sglang_") for n in names):
        return [("sglang:" + n[len("sglang_"):] if n.startswith("sglang_") else n, lab, v) for n, lab, v in samples]
    return samples


def _parser() -> Any:
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(_EXTRA_HINT) from exc
    return text_string_to_metric_families


class AtLeast(float):
    """A quantile that fell in a histogram's ``+Inf`` bucket: the largest finite bound, as PromQL's
    ``histogram_quantile`` gives it (so ``--json`` and Grafana agree), which the true quantile exceeds.
    A plain ``float`` to any arithmetic; the doctor says it "over 500 ms"."""

    __slots__ = ()  # (its repr and str are a float's: any text that shows the number shows it as before)


class AtMost(float):
    """A quantile inside a histogram's first bucket (from 0 to ``bound``): PromQL's ``histogram_quantile``
    puts it on a straight line from 0 (so ``--json`` and Grafana agree), but all the buckets say is that it
    is at most ``bound`` — a queue p95 of "285 ms" may be 2 ms. A plain ``float`` to any arithmetic; the
    doctor says "at most 300 ms"."""

    bound: float

    def __new__(cls, value: float, bound: float) -> AtMost:
        self = super().__new__(cls, value)
        self.bound = bound
        return self

    def __reduce__(self) -> tuple[Any, ...]:  # (repr and str stay a float's, as `AtLeast`'s)
        return (AtMost, (float(self), self.bound))


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
        where the quantile falls in the ``+Inf`` bucket, the largest finite bound as an `AtLeast` (the
        quantile is above it), or ``None`` when the histogram has no finite bucket (nothing is known of
        it but its mean); inside a first bucket that starts at 0, the interpolated value as an `AtMost`
        (the quantile is at most that bucket's bound)."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile must be in [0, 1], got {q!r}")
        total = self.buckets[-1][1] if self.buckets else 0.0
        if total <= 0:
            return None
        rank = q * total
        lower, below = 0.0, 0.0
        finite = False
        for bound, cumulative in self.buckets:
            if cumulative >= rank and cumulative > below:
                if math.isinf(bound):
                    return AtLeast(lower) if finite else None
                value = lower + (bound - lower) * (rank - below) / (cumulative - below)
                return AtMost(value, bound) if not finite and bound > 0 else value
            if not math.isinf(bound):
                lower, finite = bound, True
            below = cumulative
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
        for name, labels, value in _normalized([(n, dict(lab), float(v)) for n, lab, v in samples]):
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
        """The engine that wrote the page, from its metric prefixes: ``"vllm"``, ``"sglang"``,
        ``"trtllm"`` (trtllm-serve), ``"triton"``, ``"tgi"``, ``"llamacpp"``, or ``"unknown"``."""
        for engine in ENGINES:
            if any(n.startswith(ENGINE_PREFIXES[engine]) for n in self._samples):
                return engine
        return "unknown"

    @property
    def backend(self) -> Optional[str]:
        """Triton's backend where the page tells it: ``"tensorrtllm"`` (``nv_trt_llm_*`` families)."""
        return "tensorrtllm" if any(n.startswith("nv_trt_llm_") for n in self._samples) else None

    @property
    def not_exposed(self) -> frozenset[str]:
        """The logical metrics this page's engine has no metric for at all (``"unknown"``: all)."""
        every = frozenset(GAUGES) | frozenset(COUNTERS) | frozenset(HISTOGRAMS)
        return every - exposed_by(self.server, self.backend)

    @property
    def models(self) -> tuple[str, ...]:
        """The model label values seen (``model_name``; Triton's ``model`` where no ``model_name``), sorted."""
        for key in _MODEL_LABELS:
            seen = {labels[key] for rows in self._samples.values() for labels, _ in rows if key in labels}
            if seen:
                return tuple(sorted(seen))
        return ()

    def series(self, name: str, model: Optional[str] = None, **labels: str) -> list[tuple[Labels, float]]:
        """The samples called ``name`` whose labels include ``labels`` and, with ``model``, whose
        model label is ``model`` (series without a model label, e.g. GPU gauges, are kept)."""
        rows = self._samples.get(name, [])
        return [
            (lab, v) for lab, v in rows
            if all(lab.get(k) == v2 for k, v2 in labels.items()) and (model is None or _model_of(lab) in (model, None))
        ]  # fmt: skip

    def value(self, name: str, model: Optional[str] = None, *, how: str = "sum", **labels: str) -> Optional[float]:
        """The matching samples summed (``how="max"``: the largest), or ``None`` if absent.

        Series that differ only in a rank label (`_names.RANK_LABELS`: SGLang's ``tp_rank`` ...)
        are one scheduler's figure repeated: the largest of them counts, once."""
        rows = self.series(name, model, **labels)
        if not rows:
            return None
        groups: dict[tuple[tuple[str, str], ...], float] = {}
        for lab, v in rows:
            key = tuple(sorted((k, x) for k, x in lab.items() if k not in RANK_LABELS))
            groups[key] = max(groups.get(key, v), v)
        values = list(groups.values())
        return max(values) if how == "max" else sum(values)

    def info(self, name: str) -> dict[str, str]:
        """The labels of an info-style gauge (``vllm:cache_config_info``); ``{}`` if absent."""
        rows = self._samples.get(name)
        return dict(rows[0][0]) if rows else {}

    # -- logical names ---------------------------------------------------------------------
    def _first(self, table: Mapping[str, Sequence[Name]], logical: str, suffix: str = "") -> Optional[Name]:
        try:
            candidates = table[logical]
        except KeyError:
            raise ValueError(f"unknown metric {logical!r}; known: {sorted(table)}") from None
        return next((n for n in candidates if self.series(name_of(n) + suffix, **labels_of(n))), None)

    def metric_name(self, logical: str) -> Optional[str]:
        """The engine's own name this page holds for ``logical`` (with its selecting labels, as
        PromQL writes them), e.g. ``"sglang:token_usage"``; ``None`` when the page holds none."""
        for table, suffix in ((GAUGES, ""), (COUNTERS, ""), (HISTOGRAMS, "_count"), (HISTOGRAMS, "_sum")):
            if logical in table:
                name = self._first(table, logical, suffix)
                if name is not None:
                    sel = ",".join(f"{k}={v}" for k, v in labels_of(name).items())
                    return name_of(name) + (f"{{{sel}}}" if sel else "")
        return None

    def gauge(self, logical: str, model: Optional[str] = None, **labels: str) -> Optional[float]:
        """A gauge by logical name (`_names.GAUGES`), e.g. ``"kv_cache_usage"``, ``"waiting"``.

        ``kv_cache_usage`` falls back to used / max KV blocks (TensorRT-LLM) where the page has
        no fraction."""
        name = self._first(GAUGES, logical)
        if name is None:
            if logical == "kv_cache_usage":
                used, most = self.gauge("kv_used_blocks", model), self.gauge("kv_max_blocks", model)
                return used / most if used is not None and most else None
            return None
        how = "max" if logical in _MAX_OVER_ENGINES else "sum"
        return self.value(name_of(name), model, how=how, **{**labels_of(name), **labels})

    def counter(self, logical: str, model: Optional[str] = None, **labels: str) -> Optional[float]:
        """A counter's current total by logical name (`_names.COUNTERS`)."""
        name = self._first(COUNTERS, logical)
        return None if name is None else self.value(name_of(name), model, **{**labels_of(name), **labels})

    def histogram(self, logical: str, model: Optional[str] = None) -> Optional[Histogram]:
        """A histogram by logical name (`_names.HISTOGRAMS`), buckets summed over engines.

        A summary (TGI's ``tgi_request_skipped_tokens``) has no buckets: it reads as its sum and
        count alone (``buckets`` empty, so no quantile)."""
        try:
            families = HISTOGRAMS[logical]
        except KeyError:
            raise ValueError(f"unknown histogram {logical!r}; known: {sorted(HISTOGRAMS)}") from None
        for spec in families:
            family, want = name_of(spec), labels_of(spec)
            rows = self.series(family + "_bucket", model, **want)
            count = self.value(family + "_count", model, **want)
            if not rows and count is None:
                continue
            by_bound: dict[float, float] = {}
            for labels, value in rows:
                bound = float(labels.get("le", "+Inf"))
                by_bound[bound] = by_bound.get(bound, 0.0) + value
            total = self.value(family + "_sum", model, **want) or 0.0
            buckets = tuple(sorted(by_bound.items()))
            return Histogram(buckets, total, count if count is not None else buckets[-1][1])
        return None

    def gpu_memory_usage(self) -> Optional[float]:
        """The fullest GPU's used / total memory (Triton's DCGM gauges), 0-1; ``None`` if not said."""
        used = {lab.get("gpu_uuid", ""): v for lab, v in self.series("nv_gpu_memory_used_bytes")}
        total = {lab.get("gpu_uuid", ""): v for lab, v in self.series("nv_gpu_memory_total_bytes")}
        shares = [used[g] / total[g] for g in used if total.get(g)]
        return max(shares) if shares else None

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
        """Tokens per KV-cache block (vLLM's ``cache_config_info`` ``block_size``, TensorRT-LLM's
        tokens per block); ``None`` if not said."""
        size = self._cache_number("block_size")
        if size is None:
            size = self._max_gauge("kv_tokens_per_block")
        return int(size) if size else None

    def _max_gauge(self, logical: str) -> Optional[float]:
        name = self._first(GAUGES, logical)
        return None if name is None else self.value(name_of(name), how="max", **labels_of(name))

    @property
    def kv_cache_tokens(self) -> Optional[float]:
        """The KV cache's size in tokens, per engine: vLLM's ``cache_config_info``
        (``kv_cache_size_tokens``, else ``num_gpu_blocks`` x ``block_size``), SGLang's
        ``max_total_num_tokens``, TensorRT-LLM's max blocks x tokens per block; ``None`` if the
        page does not say."""
        tokens = self._cache_number("kv_cache_size_tokens")
        if tokens is not None:
            return tokens
        blocks, size = self._cache_number("num_gpu_blocks"), self.kv_block_size
        if blocks is not None and size is not None:
            return blocks * size
        pool = self._max_gauge("kv_cache_tokens")
        if pool:
            return pool
        most = self._max_gauge("kv_max_blocks")
        return most * size if most and size else None


def parse_metrics(text: str) -> Scrape:
    """Parse one ``/metrics`` page (Prometheus text format) into a `Scrape`."""
    return Scrape.parse(text)
