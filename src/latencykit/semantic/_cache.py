"""`SemanticCache`: which calls it answers, how it looks them up, what it stores (sans-I/O).

The transport (``_transport.py``) asks `plan` for every request, embeds the query text
itself (sync or async), then calls `lookup`; on a miss it hands the finished response body
to `store`. A stored answer is the provider's complete response stream (SSE bytes, zlib-
compressed), so a hit is parsed by the SDK itself into exactly the objects a miss yields.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import zlib
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from ..core._segments import Fingerprinter
from ._embedders import Embedder, HashedEmbedder, normalize_rows
from ._options import parse_mark
from ._request import Ineligible, Pending, analyze, api_of
from ._store import MemoryStore, StoreHit, VectorStore

__all__ = ["SemanticCache", "SemanticStats", "Pending"]

logger = logging.getLogger("latencykit")

_TERMINAL = {
    "messages": (b"message_stop",),
    "chat.completions": (b"data: [DONE]", b"data:[DONE]"),
    "responses": (b"response.completed",),
}
_ERROR_EVENT = re.compile(
    rb'^(?:event:\s*(?:error|response\.failed|response\.incomplete)\s*$|data:\s*\{\s*"(?:error|type"\s*:\s*"error)")', re.MULTILINE
)


@dataclass(frozen=True)
class SemanticStats:
    """Counters of one `SemanticCache` since creation."""

    lookups: int
    hits: int
    misses: int
    stored: int
    skipped: dict[str, int]
    """Requests not looked up, by reason (``not_marked``, ``tool_results``, ``images``, ...)."""
    entries: int
    evictions: int
    expirations: int

    @property
    def hit_rate(self) -> Optional[float]:
        """Hits / lookups, ``None`` before the first lookup."""
        return self.hits / self.lookups if self.lookups else None


class SemanticCache:
    """An opt-in response cache keyed by meaning, for ``lk.OpenAI(..., semantic=SemanticCache())``.

    A call is answered from the cache only when it is marked (``extra_headers=
    lk.semantic_cacheable(scope)``) or — with ``temperature_zero=True`` — when it sets
    ``temperature=0`` (then under ``default_scope``, which must be given), and only when
    everything but the newest user message matches a stored call exactly and that message
    is within ``threshold`` cosine similarity. Tool results and images make a call
    ineligible unless ``allow_tool_results`` / ``allow_images``.

    ``embedder``: any `Embedder` (default `HashedEmbedder`); ``threshold``: cosine
    similarity for a hit (default: the embedder's ``default_threshold``); ``store``: a
    `VectorStore` (default `MemoryStore` bounded by ``max_entries``, ``max_bytes`` and
    ``ttl`` seconds); ``secret``: the fingerprint key (default ``$LATENCYKIT_CACHE_SECRET``,
    else random per process — `save` / `load` need a stable one).
    """

    def __init__(
        self,
        embedder: Optional[Embedder] = None,
        *,
        threshold: Optional[float] = None,
        store: Optional[VectorStore] = None,
        ttl: Optional[float] = 24 * 3600.0,
        max_entries: int = 100_000,
        max_bytes: int = 512 * 1024 * 1024,
        temperature_zero: bool = False,
        default_scope: Optional[str] = None,
        allow_tool_results: bool = False,
        allow_images: bool = False,
        max_answer_bytes: int = 4 * 1024 * 1024,
        secret: Optional[bytes] = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.embedder: Embedder = embedder if embedder is not None else HashedEmbedder()
        if not callable(self.embedder):
            raise ValueError(f"embedder must be callable (texts -> matrix), got {embedder!r}")
        if threshold is None:
            threshold = float(getattr(self.embedder, "default_threshold", 0.9))
        if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be a cosine similarity in (0, 1], got {threshold!r}")
        if temperature_zero and not (isinstance(default_scope, str) and default_scope):
            raise ValueError(f"temperature_zero=True needs a default_scope (a non-empty str), got {default_scope!r}")
        if default_scope is not None and not (isinstance(default_scope, str) and default_scope):
            raise ValueError(f"default_scope must be a non-empty str or None, got {default_scope!r}")
        if not isinstance(max_answer_bytes, int) or max_answer_bytes < 1:
            raise ValueError(f"max_answer_bytes must be a positive int, got {max_answer_bytes!r}")
        self.threshold = float(threshold)
        self.temperature_zero = temperature_zero
        self.default_scope = default_scope
        self.allow_tool_results = allow_tool_results
        self.allow_images = allow_images
        self.max_answer_bytes = max_answer_bytes
        self._explicit_secret = secret is not None or bool(os.environ.get("LATENCYKIT_CACHE_SECRET"))
        self._fp = Fingerprinter(secret)
        if store is None:
            dim = getattr(self.embedder, "dim", None)
            if not isinstance(dim, int):
                raise ValueError("the embedder has no int `dim`: pass store=MemoryStore(dim, ...) explicitly")
            store = MemoryStore(dim, max_entries=max_entries, max_bytes=max_bytes, ttl=ttl, clock=clock)
        elif not isinstance(store, VectorStore):
            raise ValueError(f"store must implement latencykit.VectorStore (search/add/clear/__len__), got {store!r}")
        self.store: VectorStore = store
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._skipped: Counter[str] = Counter()

    # -- the steps the transport runs ---------------------------------------------------------
    def plan(self, path: str, body: bytes, mark: Optional[str]) -> Optional[Pending]:
        """The request as the cache sees it, or ``None`` when the cache stays out of it."""
        api = api_of(path)
        if api is None:
            return None
        kind, scope = parse_mark(mark)
        if kind == "off":
            self._skip("opted_out")
            return None
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            self._skip("unreadable_body")
            return None
        if not isinstance(data, dict) or data.get("stream") is not True:
            self._skip("not_streamed")
            return None
        if kind != "cacheable":
            temperature = data.get("temperature")
            if not (self.temperature_zero and isinstance(temperature, (int, float)) and temperature == 0):
                self._skip("not_marked")
                return None
            scope = self.default_scope
        assert scope is not None
        query = analyze(api, data, scope, self._fp, allow_tool_results=self.allow_tool_results, allow_images=self.allow_images)
        if isinstance(query, Ineligible):
            self._skip(query.reason)
            return None
        return Pending(query, scope)

    def embed(self, text: str) -> Any:
        """The normalized embedding of ``text`` (sync)."""
        return normalize_rows(self.embedder([text]))[0]

    async def aembed(self, text: str) -> Any:
        """The normalized embedding of ``text``; the embedder's ``aembed`` when it has one."""
        aembed = getattr(self.embedder, "aembed", None)
        if aembed is not None:
            return normalize_rows(await aembed([text]))[0]
        return self.embed(text)

    def lookup(self, pending: Pending) -> Optional[StoreHit]:
        """Search the pending request's partition; the hit (if any) is also kept on ``pending``."""
        hit = self.store.search((pending.scope, pending.query.fingerprint), pending.vector, self.threshold)
        pending.hit = hit
        with self._lock:
            self._counts["lookups"] += 1
            self._counts["hits" if hit is not None else "misses"] += 1
        return hit

    def store_answer(self, pending: Pending, body: bytes) -> bool:
        """Keep a finished response body (SSE) for ``pending``; only complete, error-free answers."""
        api = pending.query.api
        tail = body[-4096:]
        if not any(marker in tail for marker in _TERMINAL[api]) or _ERROR_EVENT.search(body):
            return False
        payload = zlib.compress(body, 1)
        self.store.add((pending.scope, pending.query.fingerprint), pending.vector, payload, {"api": api})
        with self._lock:
            self._counts["stored"] += 1
        return True

    @staticmethod
    def answer_bytes(hit: StoreHit) -> bytes:
        """The response body of a hit, as the provider sent it."""
        return zlib.decompress(hit.payload)

    def client_for(self, client: Any) -> Any:
        """The answer hook the clients call (`latencykit.core.AnswerHook`): the twin of latencykit
        ``client`` whose transport answers from this cache, made once per client."""
        from ._transport import semantic_client

        return semantic_client(self, client)

    # -- management ------------------------------------------------------------------------
    def stats(self) -> SemanticStats:
        """Lookups, hits, misses, stores, skips by reason, entries, evictions."""
        with self._lock:
            counts, skipped = dict(self._counts), dict(self._skipped)
        return SemanticStats(
            lookups=counts.get("lookups", 0), hits=counts.get("hits", 0), misses=counts.get("misses", 0),
            stored=counts.get("stored", 0), skipped=skipped, entries=len(self.store),
            evictions=int(getattr(self.store, "evictions", 0)), expirations=int(getattr(self.store, "expirations", 0)),
        )  # fmt: skip

    def clear(self, scope: Optional[str] = None) -> None:
        """Forget every stored answer, or those of one scope."""
        self.store.clear(scope)

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Persist a `MemoryStore` to ``path`` (npz + JSON, no pickle). Needs an explicit ``secret``
        (or ``$LATENCYKIT_CACHE_SECRET``): with a per-process key the entries could never match again."""
        store = self._memory_store("save")
        if not self._explicit_secret:
            raise ValueError("save() needs SemanticCache(secret=...) or $LATENCYKIT_CACHE_SECRET: fingerprints made with a random per-process key never match after a restart")
        store.save(path, check=self._fp.digest(b"semantic-cache-file"))

    def load(self, path: Union[str, "os.PathLike[str]"]) -> int:
        """Add the entries saved in ``path``; returns how many (expired ones are skipped)."""
        return self._memory_store("load").load(path, check=self._fp.digest(b"semantic-cache-file"))

    def _memory_store(self, what: str) -> MemoryStore:
        if not isinstance(self.store, MemoryStore):
            raise ValueError(f"{what}() works with the in-memory store; {type(self.store).__name__} persists on its own")
        return self.store

    def _skip(self, reason: str) -> None:
        with self._lock:
            self._skipped[reason] += 1
        return None

    def __repr__(self) -> str:
        return f"<SemanticCache threshold={self.threshold} entries={len(self.store)}>"


def embed_many(cache: SemanticCache, texts: Sequence[str]) -> Any:
    """Embeddings of ``texts`` with the cache's embedder (normalized rows)."""
    return normalize_rows(np.asarray(cache.embedder(list(texts)), dtype=np.float32))
