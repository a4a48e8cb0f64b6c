"""Vector storage for the semantic cache: the `VectorStore` interface and `MemoryStore`.

Entries live in partitions keyed by ``(scope, fingerprint)``: a lookup only ever searches
the partition of its own scope and exact request fingerprint, so an answer cannot cross
scopes by construction. Each partition keeps its vectors as one normalized float32
matrix (rows = entries):

- up to ``exact_limit`` rows (4096 by default) a lookup is one matrix-vector product;
- above it, a 256-bit SimHash (random hyperplanes, stored column-wise as ``uint64`` words)
  picks the candidates whose Hamming distance is within ``4σ`` of what a vector at the
  threshold would have, and only those are scored exactly. For a true match at cosine
  ``t`` the Hamming distance is Binomial(256, acos(t)/π), so the bound keeps it with
  probability > 0.9999; the exact rescoring means no false hit is ever added.

Memory per entry: ``4·dim`` bytes of vector + 32 bytes of SimHash + 8 of id + the stored
answer (compressed) + about 200 bytes of bookkeeping. Bounds: ``max_entries`` and
``max_bytes`` (LRU eviction over all scopes) and ``ttl`` seconds (an expired entry is never
returned; it is dropped when met or by `purge`). Thread-safe (one lock).
"""

from __future__ import annotations

import io
import json
import math
import os
import threading
import time
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Union, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["VectorStore", "MemoryStore", "StoreHit", "Partition", "write_atomic"]

Partition = tuple[str, bytes]
"""``(scope, request fingerprint)``: the unit a lookup searches."""
Vector = npt.NDArray[np.float32]

_BITS = 256
_WORDS = _BITS // 64
_ENTRY_OVERHEAD = 200  # dict/OrderedDict slots, the entry object, per-row ids
_FORMAT = "latencykit.semantic/2"
_READS = ("latencykit.semantic/1", "latencykit.semantic/2")  # /2 adds "match"
_SAME = 0.9999  # cosine at which a new entry replaces a stored one


@dataclass(frozen=True)
class StoreHit:
    """A stored answer found for a lookup."""

    payload: bytes
    similarity: float
    meta: dict[str, Any]


@runtime_checkable
class VectorStore(Protocol):
    """Where the semantic cache keeps vectors and answers (in memory, Redis, Qdrant, ...).

    ``vector`` is normalized float32 of the store's dimension. Implementations must never
    return an entry from another partition, nor an entry older than their TTL.
    """

    def search(self, partition: Partition, vector: Vector, threshold: float) -> Optional[StoreHit]:
        """The most similar live entry of ``partition`` with cosine ≥ ``threshold``, or ``None``."""
        ...

    def add(self, partition: Partition, vector: Vector, payload: bytes, meta: dict[str, Any]) -> None:
        """Store an answer (an entry with a near-identical vector in the partition is replaced)."""
        ...

    def clear(self, scope: Optional[str] = None) -> None:
        """Drop every entry, or those of one scope."""
        ...

    def __len__(self) -> int: ...


class _Entry:
    __slots__ = ("id", "partition", "row", "payload", "meta", "created", "nbytes")

    def __init__(self, id: int, partition: Partition, payload: bytes, meta: dict[str, Any], created: float, nbytes: int) -> None:
        self.id = id
        self.partition = partition
        self.row = -1
        self.payload = payload
        self.meta = meta
        self.created = created
        self.nbytes = nbytes


class _Part:
    """One partition: a growable matrix of vectors, their SimHash words and entry ids."""

    __slots__ = ("vectors", "codes", "ids", "n")

    def __init__(self, dim: int, capacity: int = 1) -> None:  # most partitions hold one question
        self.vectors = np.empty((capacity, dim), dtype=np.float32)
        self.codes = np.empty((_WORDS, capacity), dtype=np.uint64)
        self.ids = np.empty(capacity, dtype=np.int64)
        self.n = 0

    def append(self, vector: Vector, code: npt.NDArray[np.uint64], entry_id: int) -> int:
        if self.n == len(self.ids):
            cap = 2 * len(self.ids)
            self.vectors = _grow(self.vectors, (cap, self.vectors.shape[1]))
            codes = np.empty((_WORDS, cap), dtype=np.uint64)
            codes[:, : self.n] = self.codes[:, : self.n]
            self.codes = codes
            self.ids = _grow(self.ids, (cap,))
        row = self.n
        self.vectors[row] = vector
        self.codes[:, row] = code
        self.ids[row] = entry_id
        self.n += 1
        return row

    def remove(self, row: int) -> Optional[int]:
        """Remove ``row`` by moving the last row into it; returns the id of the moved entry."""
        last = self.n - 1
        moved: Optional[int] = None
        if row != last:
            self.vectors[row] = self.vectors[last]
            self.codes[:, row] = self.codes[:, last]
            self.ids[row] = self.ids[last]
            moved = int(self.ids[row])
        self.n = last
        return moved


def _grow(a: Any, shape: tuple[int, ...]) -> Any:
    out = np.empty(shape, dtype=a.dtype)
    out[: len(a)] = a
    return out


class MemoryStore:
    """In-process `VectorStore`: a float32 matrix per partition, LRU + TTL + byte bounds.

    ``clock`` (seconds, monotonic by default) is injectable for TTL tests. `save` / `load`
    persist to one ``.npz`` file holding only arrays and JSON (read with
    ``allow_pickle=False``).
    """

    def __init__(
        self,
        dim: int,
        *,
        max_entries: int = 100_000,
        max_bytes: int = 512 * 1024 * 1024,
        ttl: Optional[float] = 24 * 3600.0,
        clock: Callable[[], float] = time.monotonic,
        exact_limit: int = 4096,
        seed: int = 0,
    ) -> None:
        for name, value in (("dim", dim), ("max_entries", max_entries), ("max_bytes", max_bytes), ("exact_limit", exact_limit)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if ttl is not None and (not isinstance(ttl, (int, float)) or isinstance(ttl, bool) or not ttl > 0):
            raise ValueError(f"ttl must be a positive number of seconds or None, got {ttl!r}")
        self.dim = dim
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl = None if ttl is None else float(ttl)
        self.exact_limit = exact_limit
        self._clock = clock
        self._planes = np.random.default_rng(seed).standard_normal((dim, _BITS)).astype(np.float32)
        self._parts: dict[Partition, _Part] = {}
        self._entries: OrderedDict[int, _Entry] = OrderedDict()  # LRU order: oldest use first
        self._next_id = 0
        self._bytes = 0
        self._lock = threading.Lock()
        self.evictions = 0
        """Entries dropped to stay within ``max_entries`` / ``max_bytes``."""
        self.expirations = 0
        """Entries dropped because their TTL had passed."""

    # -- interface --------------------------------------------------------------------------
    def search(self, partition: Partition, vector: Vector, threshold: float) -> Optional[StoreHit]:
        """The best live entry of ``partition`` at cosine ≥ ``threshold`` (it becomes most recently used)."""
        q = self._check(vector)
        with self._lock:
            part = self._parts.get(partition)
            if part is None or part.n == 0:
                return None
            rows, sims = self._candidates(part, q, threshold)
            above = np.flatnonzero(sims >= threshold)
            order = above[np.argsort(-sims[above])]
            now = self._clock()
            stale: list[_Entry] = []
            found: Optional[StoreHit] = None
            for i in order:
                sim = float(sims[i])
                entry = self._entries[int(part.ids[rows[i]])]
                if self._expired(entry, now):
                    stale.append(entry)  # dropped after the scan (removal moves rows)
                    continue
                self._entries.move_to_end(entry.id)
                found = StoreHit(entry.payload, sim, dict(entry.meta))
                break
            for entry in stale:
                self._remove(entry)
            self.expirations += len(stale)
            return found

    def add(self, partition: Partition, vector: Vector, payload: bytes, meta: dict[str, Any]) -> None:
        """Store ``payload`` under ``partition``; evicts least recently used entries beyond the bounds."""
        q = self._check(vector)
        nbytes = len(payload) + 4 * self.dim + 8 * _WORDS + 8 + _ENTRY_OVERHEAD
        if nbytes > self.max_bytes:
            return  # larger than the whole budget: never stored
        with self._lock:
            self._add(partition, q, payload, dict(meta), self._clock(), nbytes)

    def clear(self, scope: Optional[str] = None) -> None:
        """Drop every entry, or only those of ``scope``."""
        with self._lock:
            if scope is None:
                self._parts.clear()
                self._entries.clear()
                self._bytes = 0
                return
            for entry in [e for e in self._entries.values() if e.partition[0] == scope]:
                self._remove(entry)

    def purge(self) -> int:
        """Drop every expired entry now; returns how many."""
        with self._lock:
            now = self._clock()
            expired = [e for e in self._entries.values() if self._expired(e, now)]
            for entry in expired:
                self._remove(entry)
            self.expirations += len(expired)
            return len(expired)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """Bytes accounted to the stored entries (vectors, SimHash, answers, bookkeeping)."""
        return self._bytes

    def scopes(self) -> dict[str, int]:
        """Entries per scope."""
        with self._lock:
            counts: dict[str, int] = {}
            for entry in self._entries.values():
                counts[entry.partition[0]] = counts.get(entry.partition[0], 0) + 1
            return counts

    # -- persistence ------------------------------------------------------------------------
    def save(self, path: Union[str, os.PathLike[str]], check: bytes = b"", match: str = "") -> None:
        """Write every live entry to ``path`` (``.npz``: arrays + JSON, no pickle), atomically.

        Ages, not clock readings, are stored, so TTLs carry over to another process.
        ``check`` (a digest proving which fingerprint secret the entries were made with) and
        ``match`` (what besides similarity the entries' partitions require, e.g.
        ``"numbers/1;fold/1"``) are stored and compared by `load`.
        """
        write_atomic(path, self.dumps(check, match))

    def dumps(self, check: bytes = b"", match: str = "") -> bytes:
        """The bytes `save` writes."""
        with self._lock:
            now = self._clock()
            live = [e for e in self._entries.values() if not self._expired(e, now)]
            vectors = np.stack([self._parts[e.partition].vectors[e.row] for e in live]) if live else np.empty((0, self.dim), np.float32)
            offsets = np.cumsum([0] + [len(e.payload) for e in live], dtype=np.int64)
            blob = np.frombuffer(b"".join(e.payload for e in live), dtype=np.uint8)
            meta = {
                "format": _FORMAT,
                "dim": self.dim,
                "check": check.hex(),
                "match": match,
                "entries": [{"scope": e.partition[0], "fingerprint": e.partition[1].hex(), "age": now - e.created, "meta": e.meta} for e in live],
            }
        buf = io.BytesIO()
        np.savez(buf, vectors=vectors, offsets=offsets, payloads=blob, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
        return buf.getvalue()

    def load(self, path: Union[str, os.PathLike[str]], check: bytes = b"", match: str = "") -> int:
        """Add the entries saved in ``path`` (those whose TTL has not passed); returns how many."""
        with open(os.fspath(path), "rb") as f:
            return self.loads(f.read(), check, match, name=repr(os.fspath(path)))

    def loads(self, data: bytes, check: bytes = b"", match: str = "", *, name: str = "the data") -> int:
        """Add the entries of `dumps` output ``data``; returns how many. Reads format /1 (no ``match``: ``""``) and /2."""
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
                meta = json.loads(bytes(arrays["meta"]).decode())
                vectors = np.asarray(arrays["vectors"], dtype=np.float32)
                offsets = np.asarray(arrays["offsets"], dtype=np.int64)
                blob = bytes(arrays["payloads"])
        except (ValueError, OSError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise ValueError(f"{name} is not a latencykit semantic cache file ({exc})") from None
        if meta.get("format") not in _READS:
            raise ValueError(f"{name} is not a latencykit semantic cache file (format {meta.get('format')!r})")
        if meta.get("dim") != self.dim:
            raise ValueError(f"{name} holds {meta.get('dim')}-dimensional vectors, this store has dim={self.dim}")
        if meta.get("check") != check.hex():
            raise ValueError(f"{name} was saved with another fingerprint secret: its entries could never match")
        saved = meta.get("match", "")
        if saved != match:
            raise ValueError(
                f"{name} holds entries made with {saved or 'no exact guards'!r}, this cache uses {match or 'no exact guards'!r}: "
                "its entries could never match (load it into a SemanticCache with the same match_numbers, embedder and encrypt)"
            )
        entries = meta["entries"]
        if vectors.shape != (len(entries), self.dim) or len(offsets) != len(entries) + 1:
            raise ValueError(f"{name} is inconsistent: {vectors.shape[0]} vectors for {len(entries)} entries")
        loaded = 0
        with self._lock:
            now = self._clock()
            for i, item in enumerate(entries):
                age = float(item["age"])
                if self.ttl is not None and age >= self.ttl:
                    continue
                payload = blob[int(offsets[i]) : int(offsets[i + 1])]
                nbytes = len(payload) + 4 * self.dim + 8 * _WORDS + 8 + _ENTRY_OVERHEAD
                self._add((str(item["scope"]), bytes.fromhex(item["fingerprint"])), vectors[i], payload, dict(item["meta"]), now - age, nbytes)
                loaded += 1
        return loaded

    # -- internals (lock held) -----------------------------------------------------------------
    def _check(self, vector: Any) -> Vector:
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise ValueError(f"vector has {q.shape[0]} dimensions, the store has dim={self.dim}")
        return q

    def _code(self, q: Vector) -> npt.NDArray[np.uint64]:
        bits = np.packbits((q @ self._planes) > 0)
        return bits.view(np.uint64)

    def _candidates(self, part: _Part, q: Vector, threshold: float) -> tuple[Any, Any]:
        n = part.n
        if n <= self.exact_limit:
            rows = np.arange(n)
            return rows, part.vectors[:n] @ q
        code = self._code(q)
        dist = np.bitwise_count(part.codes[0, :n] ^ code[0]).astype(np.uint16)
        for w in range(1, _WORDS):
            dist += np.bitwise_count(part.codes[w, :n] ^ code[w])
        rows = np.flatnonzero(dist <= _hamming_bound(threshold))
        if len(rows) > self.exact_limit:
            rows = rows[np.argpartition(dist[rows], self.exact_limit)[: self.exact_limit]]
        return rows, part.vectors[rows] @ q

    def _add(self, partition: Partition, q: Vector, payload: bytes, meta: dict[str, Any], created: float, nbytes: int) -> None:
        part = self._parts.get(partition)
        if part is None:
            part = self._parts[partition] = _Part(self.dim)
        elif part.n:
            # The same question stored twice (two concurrent misses): keep the newer answer.
            rows, sims = self._candidates(part, q, _SAME)
            if len(rows) and float(sims.max()) >= _SAME:
                self._remove(self._entries[int(part.ids[rows[int(sims.argmax())]])])
                part = self._parts.setdefault(partition, _Part(self.dim))
        entry = _Entry(self._next_id, partition, payload, meta, created, nbytes)
        self._next_id += 1
        entry.row = part.append(q, self._code(q), entry.id)
        self._entries[entry.id] = entry
        self._bytes += nbytes
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            _, oldest = next(iter(self._entries.items()))
            self._remove(oldest)
            self.evictions += 1

    def _remove(self, entry: _Entry) -> None:
        part = self._parts[entry.partition]
        moved = part.remove(entry.row)
        if moved is not None:
            self._entries[moved].row = entry.row
        del self._entries[entry.id]
        self._bytes -= entry.nbytes
        if part.n == 0:
            del self._parts[entry.partition]

    def _expired(self, entry: _Entry, now: float) -> bool:
        return self.ttl is not None and now - entry.created >= self.ttl


def write_atomic(path: Union[str, os.PathLike[str]], data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    target = os.fspath(path)
    tmp = f"{target}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, target)


def _hamming_bound(threshold: float) -> int:
    """The largest Hamming distance (of 256 bits) a vector at cosine ``threshold`` has, at 4σ."""
    p = math.acos(min(max(threshold, -1.0), 1.0)) / math.pi
    return int(math.ceil(_BITS * p + 4.0 * math.sqrt(_BITS * p * (1.0 - p)) + 2))
