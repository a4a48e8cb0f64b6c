"""`SemanticCache`: which calls it answers, how it looks them up, what it stores (sans-I/O).

The transport (``_transport.py``) asks `plan` for every request, embeds the query text
itself (sync or async), then calls `lookup`; on a miss it hands the finished response body
to `store`. A stored answer is the provider's complete response stream (SSE bytes, zlib-
compressed), so a hit is parsed by the SDK itself into exactly the objects a miss yields.

What a lookup searches is a partition ``(scope, key)``: the key is the keyed fingerprint of
everything but the newest user message (``_request``), mixed — when a guard is on — with
what that message must share exactly (``_guards``: its numbers; the embedder's
``match_key``, the folded text for `HashedEmbedder`). So a guard holds by construction, in
every store, and never costs a second-best answer. With encryption on (``_crypto``) the
bytes handed to the store are AES-GCM sealed, bound to their partition; the scope is kept
as a keyed digest; and a keyable embedder (`HashedEmbedder`) hashes with a secret key.
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
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from ..core._segments import Fingerprinter
from . import _crypto
from ._embedders import Embedder, HashedEmbedder, normalize_rows
from ._guards import NUMBERS_VERSION, numbers
from ._options import parse_mark
from ._request import Ineligible, Pending, Query, analyze, api_of
from ._scope import scope_bytes
from ._store import MemoryStore, Partition, StoreHit, VectorStore, write_atomic

__all__ = ["SemanticCache", "SemanticStats", "Pending"]

logger = logging.getLogger("latencykit")

_TERMINAL = {
    "messages": (b"message_stop",),
    "chat.completions": (b"data: [DONE]", b"data:[DONE]"),
    "responses": (b"response.completed",),
}
STORE_PAUSE_S = 5.0
"""After a store call fails, requests skip the cache (``skipped["store_unavailable"]``) for this long, then the
store is tried again; each failure in a row doubles the pause, up to `STORE_PAUSE_MAX_S`. An unreachable store
then costs one call its own timeout (`PgVectorStore`'s ``timeout``, the Redis client's), not every call."""
STORE_PAUSE_MAX_S = 120.0
_ENCRYPTION = "aes-256-gcm/1"
_FILE_AAD = b"latencykit.semantic/file/2"
_warned_readable = False
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
    entries: Optional[int]
    """Entries in the store; ``None`` when the store could not say (it failed, or is paused after failing)."""
    evictions: int
    expirations: int
    store_errors: int = 0
    """Store calls that failed (an unreachable Redis or PostgreSQL): each pauses the cache (`STORE_PAUSE_S`)."""

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

    ``embedder``: any `Embedder` (default `HashedEmbedder`, which matches only the folded
    text: repeats that differ in case, punctuation or spacing); ``threshold``: cosine
    similarity for a hit (default: the embedder's ``default_threshold``); ``store``: a
    `VectorStore` (default `MemoryStore` bounded by ``max_entries``, ``max_bytes`` and
    ``ttl`` seconds); ``secret``: the fingerprint key (default ``$LATENCYKIT_CACHE_SECRET``,
    else random per process — `save` / `load` need a stable one).

    ``match_numbers`` (default ``True``): a hit also needs the same numbers, in the same
    order, in both questions (`_guards.numbers`: digits, amounts, dates, ids, number
    words) — "size 43" never answers "size 44", whatever the similarity.

    ``encrypt``: seal every stored answer with AES-256-GCM under a key derived from the
    secret (and `save` the whole file so), keep scopes as keyed digests, key the hashed
    embedder. ``None`` (default): on when a secret is configured (``secret=`` or
    ``$LATENCYKIT_CACHE_SECRET`` — the cases where entries outlive the process or leave it:
    `save`, a shared store) and ``cryptography`` is installed; ``True`` requires it
    (``pip install "latencykit[encrypt]"``); ``False``: answers are kept as sent.
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
        match_numbers: bool = True,
        encrypt: Optional[bool] = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.embedder: Embedder = embedder if embedder is not None else HashedEmbedder()
        if not callable(self.embedder):
            raise ValueError(f"embedder must be callable (texts -> matrix), got {embedder!r}")
        if not isinstance(match_numbers, bool):
            raise ValueError(f"match_numbers must be a bool, got {match_numbers!r}")
        if encrypt is not None and not isinstance(encrypt, bool):
            raise ValueError(f"encrypt must be True, False or None (on when a secret is configured), got {encrypt!r}")
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
        self.encrypt = self._encryption(encrypt)
        """Whether stored answers (and saved files) are encrypted."""
        self._sealer: Optional[_crypto.Sealer] = None
        if self.encrypt:
            self._sealer = _crypto.Sealer(self._key_material(), b"answer")
            keyed = getattr(self.embedder, "keyed", None)
            if callable(keyed):  # a hashed vector would give away its n-grams to a dictionary
                self.embedder = keyed(self._fp.digest(b"semantic-embedder-key", size=32))
        self.match_numbers = match_numbers
        kind, key_of = getattr(self.embedder, "match_kind", None), getattr(self.embedder, "match_key", None)
        self._match_key: Optional[Callable[[str], Optional[str]]] = key_of if isinstance(kind, str) and callable(key_of) else None
        self.match = ";".join(
            part for part, on in ((NUMBERS_VERSION, match_numbers), (str(kind), self._match_key is not None), (_ENCRYPTION, self.encrypt)) if on
        )
        """What a hit needs besides similarity (``"numbers/1;fold/1;aes-256-gcm/1"``; saved with the entries)."""
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
        self._clock = clock
        self._pause = 0.0
        """The current pause after store failures in a row (0: the store answers)."""
        self._paused_until = 0.0

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
        if self._paused():  # the store failed a moment ago: no embedding, no lookup, nothing stored
            self._skip("store_unavailable")
            return None
        return Pending(self._guarded(query), self._store_scope(scope))

    def _guarded(self, query: Query) -> Query:
        """``query`` with what its text must share exactly mixed into its fingerprint (a keyed digest: no text kept)."""
        exact: list[bytes] = []
        if self.match_numbers:
            exact.append("\x1f".join(numbers(query.text)).encode())
        if self._match_key is not None:
            exact.append((self._match_key(query.text) or "").encode())
        if not exact:
            return query
        return replace(query, fingerprint=self._fp.digest(b"semantic-match", self.match.encode(), query.fingerprint, *exact))

    def _store_scope(self, scope: str) -> str:
        """The scope as the store keeps it: a keyed digest when encrypting (a tenant id can be personal data)."""
        return "#" + self._fp.digest(b"semantic-scope", scope_bytes(scope)).hex() if self.encrypt else scope

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
        partition = (pending.scope, pending.query.fingerprint)
        hit: Optional[StoreHit] = self._asking(self.store.search, partition, pending.vector, self.threshold)
        if hit is not None:
            hit = self._opened(partition, hit)
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
        partition = (pending.scope, pending.query.fingerprint)
        payload = zlib.compress(body, 1)
        if self._sealer is not None:
            payload = self._sealer.seal(payload, _associated(partition))
        self._asking(self.store.add, partition, pending.vector, payload, {"api": api})
        with self._lock:
            self._counts["stored"] += 1
        return True

    def _asking(self, call: Callable[..., Any], *args: Any) -> Any:
        """``call(*args)`` on the store; a failure pauses the cache (`STORE_PAUSE_S`) and is raised on."""
        try:
            result = call(*args)
        except Exception as exc:
            self._store_failed(exc)
            raise
        if self._pause:
            self._store_answers()
        return result

    def _paused(self) -> bool:
        return bool(self._pause) and self._clock() < self._paused_until

    def _store_failed(self, exc: BaseException) -> None:
        with self._lock:
            first = not self._pause
            self._pause = STORE_PAUSE_S if first else min(self._pause * 2, STORE_PAUSE_MAX_S)
            self._paused_until = self._clock() + self._pause
            self._counts["store_errors"] += 1
            pause = self._pause
        if first:  # once per outage: a WARNING, then the pauses go on quietly (DEBUG)
            detail = " ".join(str(exc).split())[:200]
            logger.warning("latencykit: the semantic cache's %s failed (%s%s); requests go to the provider without the "
                           "cache, and the store is tried again in %g s", type(self.store).__name__, type(exc).__name__,
                           f": {detail}" if detail else "", pause)  # fmt: skip
        else:
            logger.debug("latencykit: the semantic cache's store failed again; tried again in %g s", pause, exc_info=True)

    def _store_answers(self) -> None:
        with self._lock:
            was, self._pause, self._paused_until = self._pause, 0.0, 0.0
        if was:
            logger.warning("latencykit: the semantic cache's %s answers again", type(self.store).__name__)

    def _entries(self) -> Optional[int]:
        """Entries in the store, or ``None`` where it cannot say now (paused, or failing)."""
        if self._paused():
            return None
        try:
            return int(self._asking(len, self.store))
        except Exception:
            return None

    @staticmethod
    def answer_bytes(hit: StoreHit) -> bytes:
        """The response body of a hit (as `lookup` returns it: opened), as the provider sent it."""
        return zlib.decompress(hit.payload)

    def _opened(self, partition: Partition, hit: StoreHit) -> Optional[StoreHit]:
        """``hit`` with its payload decrypted; ``None`` (a miss) for one that does not open here."""
        if self._sealer is None:
            if _crypto.is_sealed(hit.payload):
                logger.warning("latencykit: an encrypted semantic cache entry met by a cache with encrypt=False; treated as a miss")
                return None
            return hit
        try:
            return StoreHit(self._sealer.open(hit.payload, _associated(partition)), hit.similarity, hit.meta)
        except _crypto.SealError as exc:
            logger.warning("latencykit: a semantic cache entry did not decrypt (%s); treated as a miss", exc)
            return None

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
            stored=counts.get("stored", 0), skipped=skipped, entries=self._entries(),
            evictions=int(getattr(self.store, "evictions", 0)), expirations=int(getattr(self.store, "expirations", 0)),
            store_errors=counts.get("store_errors", 0),
        )  # fmt: skip

    def clear(self, scope: Optional[str] = None) -> None:
        """Forget every stored answer, or those of one scope."""
        self.store.clear(None if scope is None else self._store_scope(scope))

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Persist a `MemoryStore` to ``path`` (npz + JSON, no pickle; AES-GCM sealed whole when
        encrypting). Needs an explicit ``secret`` (or ``$LATENCYKIT_CACHE_SECRET``): with a
        per-process key the entries could never match again."""
        store = self._memory_store("save")
        if not self._explicit_secret:
            raise ValueError("save() needs SemanticCache(secret=...) or $LATENCYKIT_CACHE_SECRET: fingerprints made with a random per-process key never match after a restart")
        data = store.dumps(check=self._fp.digest(b"semantic-cache-file"), match=self.match)
        if self.encrypt:
            data = self._file_sealer().seal(data, _FILE_AAD)
        write_atomic(path, data)

    def load(self, path: Union[str, "os.PathLike[str]"]) -> int:
        """Add the entries saved in ``path``; returns how many (expired ones are skipped).

        Reads files of every version; refuses (``ValueError``) one made with another secret or
        other guards (`match`), whose entries could never match here."""
        store = self._memory_store("load")
        name = repr(os.fspath(path))
        with open(os.fspath(path), "rb") as f:
            data = f.read()
        if _crypto.is_sealed(data, _crypto.FILE_MAGIC):
            try:
                data = self._file_sealer().open(data, _FILE_AAD)
            except _crypto.SealError:
                raise ValueError(f"{name} was saved with another fingerprint secret, or is damaged: it does not decrypt") from None
        return store.loads(data, check=self._fp.digest(b"semantic-cache-file"), match=self.match, name=name)

    def _file_sealer(self) -> _crypto.Sealer:
        return _crypto.Sealer(self._key_material(), b"file", _crypto.FILE_MAGIC)

    def _key_material(self) -> bytes:
        return self._fp.digest(b"semantic-encryption-key", size=32)

    def _encryption(self, encrypt: Optional[bool]) -> bool:
        if encrypt is not None:
            return encrypt
        if not self._explicit_secret:
            return False  # the key dies with the process, and so do the entries
        if _crypto.available():
            return True
        global _warned_readable
        if not _warned_readable:
            _warned_readable = True
            logger.warning(
                "latencykit: the semantic cache keeps stored answers readable (they may echo the system prompt): "
                "%s to encrypt them, or SemanticCache(encrypt=False) to say so",
                _crypto.INSTALL,
            )
        return False

    def _memory_store(self, what: str) -> MemoryStore:
        if not isinstance(self.store, MemoryStore):
            raise ValueError(f"{what}() works with the in-memory store; {type(self.store).__name__} persists on its own")
        return self.store

    def _skip(self, reason: str) -> None:
        with self._lock:
            self._skipped[reason] += 1
        return None

    def __repr__(self) -> str:
        entries = self._entries()
        return f"<SemanticCache threshold={self.threshold} match={self.match!r} entries={'?' if entries is None else entries}>"


def _associated(partition: Partition) -> bytes:
    """Associated data of a sealed answer: the partition it belongs to, so it cannot be moved."""
    scope = scope_bytes(partition[0])
    return b"latencykit.semantic/answer/1" + len(scope).to_bytes(4, "big") + scope + partition[1]


def embed_many(cache: SemanticCache, texts: Sequence[str]) -> Any:
    """Embeddings of ``texts`` with the cache's embedder (normalized rows)."""
    return normalize_rows(np.asarray(cache.embedder(list(texts)), dtype=np.float32))
