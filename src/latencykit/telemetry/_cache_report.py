"""`CacheReport`: prompt-cache effectiveness over a set of call records.

Hit rates are aggregated the way anchors §8 asks: by tokens as ``sum(read) / sum(input)``
(not a mean of per-call ratios) and by calls, over calls whose server *reported* cache
usage; calls that reported nothing are counted apart, never as 0 %. Estimated savings are
in base-input-token equivalents, from the per-model multipliers in ``core._cache_facts``
(`cache_prices`: Anthropic writes 1.25× / 2×, OpenAI GPT-5.6+ writes 1.25×, reads 0.1×), so
they are negative when writes are never read. Writes no later call read back (the policy marks
a writer's record ``extra["cache_write_read_back"]`` False, then True when one does) and calls where the
server's own cache verdict disagrees with latencykit's (`core._diagnosis`) are counted.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from collections.abc import Mapping

from ..core._cache_facts import cache_prices
from ..core._diagnosis import diagnosis_agrees
from ..core._record import CallRecord
from ..core._verify import HIT, PARTIAL

__all__ = ["CacheReport", "cache_report"]


@dataclass(frozen=True)
class CacheReport:
    """Cache hit rate by tokens and by calls, tokens read and written, savings, verdicts, top miss reasons."""

    calls: int
    calls_reporting: int
    calls_not_reporting: int
    input_tokens: int
    tokens_read: int
    tokens_written: Optional[int]
    """Tokens written to the cache by the calls that reported a write count; ``None`` if none did
    (llama.cpp reports reads only: its writes are unknown, not 0)."""
    hit_rate_tokens: Optional[float]
    hit_rate_calls: Optional[float]
    saved_tokens: float
    """Input-token equivalents saved: reads at 0.1× minus the write premiums (Anthropic 1.25× / 2×; OpenAI GPT-5.6+ 1.25×)."""
    saved_share: Optional[float]
    """``saved_tokens`` / input tokens: the share of the uncached input cost saved."""
    verdicts: dict[str, int] = field(default_factory=dict)
    miss_reasons: list[tuple[str, int]] = field(default_factory=list)
    """Most frequent miss reasons first (``prefix_changed`` split by segment)."""
    writes_unknown: int = 0
    """Calls that reported a cache read but no write count."""
    semantic_lookups: int = 0
    """Calls looked up in the semantic response cache (``CallRecord.semantic_hit`` not ``None``)."""
    semantic_hits: int = 0
    """Calls answered from the semantic response cache; they are left out of every other field here
    (their usage is the stored call's, not a prompt-cache read)."""
    tokens_written_unread: Optional[int] = None
    """Of ``tokens_written``, those of calls whose writes no later call (of the same policy) read back, so far."""
    write_premium_tokens: float = 0.0
    """What the writes cost beyond the plain input price, in input-token equivalents (0.25× per 5m / 30m write token)."""
    diagnosed: int = 0
    """Calls with a server cache verdict to compare (``server_cache_miss_reason``: a hit or a named miss)."""
    diagnosis_disagreements: int = 0
    """Of those, calls where the server's verdict and latencykit's disagree (`core._diagnosis.diagnosis_agrees`)."""

    @property
    def semantic_hit_rate(self) -> Optional[float]:
        """Semantic hits / semantic lookups, ``None`` without lookups."""
        return self.semantic_hits / self.semantic_lookups if self.semantic_lookups else None

    def to_dict(self) -> dict[str, Any]:
        """A plain JSON-friendly dict."""
        d = asdict(self)
        d["miss_reasons"] = [list(pair) for pair in self.miss_reasons]
        return d

    def __getitem__(self, key: str) -> Any:
        """``report["hit_rate_tokens"]``, as the dict this report replaces allowed."""
        return self.to_dict()[key]

    def _rows(self) -> list[tuple[str, str]]:
        def pct(v: Optional[float]) -> str:
            return "n/a" if v is None else f"{v:.1%}"

        rows = [
            ("calls (reporting / not)", f"{self.calls} ({self.calls_reporting} / {self.calls_not_reporting})"),
            ("hit rate by tokens", pct(self.hit_rate_tokens)),
            ("hit rate by calls", pct(self.hit_rate_calls)),
            ("tokens read / written", f"{self.tokens_read:,} / {self._written()}"),
            ("input tokens", f"{self.input_tokens:,}"),
            ("est. input cost saved", f"{self.saved_tokens:,.0f} token-equivalents ({pct(self.saved_share)})"),
        ]
        if self.write_premium_tokens:
            rows.append(("write premium paid", f"{self.write_premium_tokens:,.0f} token-equivalents"))
        if self.tokens_written_unread:
            rows.append(("written, not read back (yet)", f"{self.tokens_written_unread:,} tokens"))
        if self.diagnosed:
            rows.append(("server diagnoses (disagree)", f"{self.diagnosed} ({self.diagnosis_disagreements})"))
        rows += [
            ("verdicts", ", ".join(f"{k} {v}" for k, v in self.verdicts.items()) or "-"),
        ]
        for reason, count in self.miss_reasons[:5]:
            rows.append(("miss: " + reason, str(count)))
        if self.semantic_lookups:
            rows.append(("semantic cache hits / lookups", f"{self.semantic_hits} / {self.semantic_lookups} ({pct(self.semantic_hit_rate)})"))
        return rows

    def _written(self) -> str:
        if self.tokens_written is None:
            return "unknown"
        if self.writes_unknown:
            n = self.writes_unknown
            return (f"{self.tokens_written:,} (+ writes not reported by {n} call{'s' if n != 1 else ''}: "
                    "OpenAI before GPT-5.6 and llama.cpp report cache reads only)")  # fmt: skip
        return f"{self.tokens_written:,}"

    def __str__(self) -> str:
        rows = self._rows()
        width = max(len(k) for k, _ in rows)
        return "prompt cache\n" + "\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows)

    def _repr_html_(self) -> str:
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in self._rows())
        return f"<table><caption>prompt cache</caption>{body}</table>"


def _hit(r: CallRecord) -> bool:
    if r.cache_verdict:
        return r.cache_verdict in (HIT, PARTIAL)
    return (r.cache_read_tokens or 0) > 0


def cache_report(records: Iterable[CallRecord], prices: Optional[Mapping[str, Mapping[str, float]]] = None) -> CacheReport:
    """Build a `CacheReport` from ``records``; ``prices``: model-name substring → ``read`` / ``write_5m`` /
    ``write_1h`` multipliers of the base input price, over the built-in ones (`core._cache_facts.cache_prices`)."""
    recs = list(records)
    semantic = [r.semantic_hit for r in recs if r.semantic_hit is not None]
    # A semantic hit replays a stored answer: its usage is not a prompt-cache read of this call.
    recs = [r for r in recs if not r.semantic_hit]
    reporting = [r for r in recs if r.cache_read_tokens is not None]
    read = sum(r.cache_read_tokens or 0 for r in reporting)
    known_writes = [r.cache_write_tokens for r in reporting if r.cache_write_tokens is not None]
    written = sum(known_writes) if known_writes else None
    total = sum(r.input_tokens or 0 for r in reporting)
    # A call hit when its read meant something (the verdict says; see judge()): llama.cpp's few
    # reused template tokens on a cold prompt are a read of tokens, not a hit of a call.
    hits = sum(1 for r in reporting if _hit(r))
    saved = premium = 0.0
    unread = 0
    for r in reporting:
        m = cache_prices(r.provider, r.response_model or r.request_model, prices)
        w1h = int(r.extra.get("cache_write_1h_tokens") or r.extra.get("cache_write_12h_tokens") or 0)
        w5m = max((r.cache_write_tokens or 0) - w1h, 0)
        cost = w5m * (m["write_5m"] - 1) + w1h * (m["write_1h"] - 1)
        premium += cost
        saved += (r.cache_read_tokens or 0) * (1 - m["read"]) - cost
        if r.extra.get("cache_write_read_back") is False:  # a policy tracked this write and no later call read it
            unread += r.cache_write_tokens or 0
    agreement = [a for a in map(diagnosis_agrees, recs) if a is not None]
    verdicts = Counter(r.cache_verdict for r in recs if r.cache_verdict)
    reasons: Counter[str] = Counter()
    for r in recs:
        if r.cache_miss_reason:
            seg = r.extra.get("cache_changed_segment")
            reasons[f"{r.cache_miss_reason} ({seg})" if seg else r.cache_miss_reason] += 1
    return CacheReport(
        calls=len(recs), calls_reporting=len(reporting), calls_not_reporting=len(recs) - len(reporting),
        input_tokens=total, tokens_read=read, tokens_written=written,
        hit_rate_tokens=read / total if total else None, hit_rate_calls=hits / len(reporting) if reporting else None,
        saved_tokens=saved, saved_share=saved / total if total else None,
        verdicts=dict(verdicts.most_common()), miss_reasons=reasons.most_common(),
        writes_unknown=len(reporting) - len(known_writes),
        semantic_lookups=len(semantic), semantic_hits=sum(semantic),
        tokens_written_unread=unread if written is not None else None, write_premium_tokens=premium,
        diagnosed=len(agreement), diagnosis_disagreements=agreement.count(False),
    )  # fmt: skip
