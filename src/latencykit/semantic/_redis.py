"""`RedisStore`: a `VectorStore` in Redis, shared by every process that uses the same server.

Plain Redis (no modules: Debian's ``redis-server`` works). Each entry is a hash
``{prefix}e:{scope}:{fingerprint}:{id}`` holding the float32 vector, the stored answer and
its metadata, with a Redis TTL; each partition is a set of its entry keys. A lookup reads the
partition's vectors in one pipeline and scores them with one matrix product here, so it
suits partitions of up to a few thousand entries; entries whose TTL has passed are gone from
Redis and are dropped from the set when met. Scopes (their `stored_scope` form: any ``str``, a
NUL, a lone surrogate or 10 000 characters alike) and fingerprints are stored hex-encoded in the
keys. Needs ``pip install redis``.
"""

from __future__ import annotations

import inspect
import json
import uuid
from typing import Any, Optional

import numpy as np

from ._scope import stored_scope
from ._store import Partition, StoreHit, Vector

__all__ = ["RedisStore"]

_SAME = 0.9999
"""Cosine at which an add gives its answer to the stored entry (as `MemoryStore` and `PgVectorStore`)."""
_ADD_TRIES = 8
"""Optimistic tries of an add before it stores a new entry without looking (a partition written to that often)."""


def _errors() -> tuple[type[BaseException], type[BaseException]]:
    """redis-py's ``WatchError`` (the watched key changed) and ``RedisError`` (any error of the client)."""
    import redis

    return redis.WatchError, redis.RedisError


class RedisStore:
    """`VectorStore` over a ``redis.Redis`` client (``decode_responses`` must be off), or over a
    ``redis://`` / ``rediss://`` / ``unix://`` URL (the store makes the client, as `PgVectorStore` takes
    a connection string)."""

    def __init__(self, client: Any, dim: int, *, ttl: Optional[float] = 24 * 3600.0, prefix: str = "latencykit:semantic:") -> None:
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        if ttl is not None and (not isinstance(ttl, (int, float)) or isinstance(ttl, bool) or not ttl > 0):
            raise ValueError(f"ttl must be a positive number of seconds or None, got {ttl!r}")
        client = _client(client)
        if getattr(getattr(client, "connection_pool", None), "connection_kwargs", {}).get("decode_responses"):
            raise ValueError("RedisStore needs a redis client with decode_responses=False (vectors are bytes)")
        self.redis = client
        self.dim = dim
        self.ttl = ttl
        self.prefix = prefix

    def _part_key(self, partition: Partition) -> str:
        scope, fingerprint = partition
        return f"{self.prefix}p:{_hex(scope)}:{fingerprint.hex()}"

    def search(self, partition: Partition, vector: Vector, threshold: float) -> Optional[StoreHit]:
        """The most similar live entry of ``partition`` at cosine ≥ ``threshold``."""
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise ValueError(f"vector has {q.shape[0]} dimensions, the store has dim={self.dim}")
        nearest = self._nearest(self._part_key(partition), q)
        if nearest is None or nearest[1] < threshold:
            return None
        payload, meta = self.redis.hmget(nearest[0], "a", "m")
        if payload is None:  # expired between the two reads
            return None
        return StoreHit(bytes(payload), nearest[1], json.loads(meta or b"{}"))

    def _nearest(self, part: str, q: Any) -> Optional[tuple[Any, float]]:
        """The key of the partition's live entry most similar to ``q``, and that cosine; expired keys leave the set."""
        keys = sorted(self.redis.smembers(part))
        if not keys:
            return None
        pipe = self.redis.pipeline(transaction=False)
        for key in keys:
            pipe.hget(key, "v")
        blobs = pipe.execute()
        gone = [k for k, b in zip(keys, blobs) if b is None]
        if gone:
            self.redis.srem(part, *gone)
        live = [(k, b) for k, b in zip(keys, blobs) if b is not None and len(b) == 4 * self.dim]
        if not live:
            return None
        sims = np.frombuffer(b"".join(b for _, b in live), dtype=np.float32).reshape(len(live), self.dim) @ q
        best = int(np.argmax(sims))
        return live[best][0], float(sims[best])

    def add(self, partition: Partition, vector: Vector, payload: bytes, meta: dict[str, Any]) -> None:
        """Store an answer with the store's TTL; an entry of the partition with a near-identical vector (cosine ≥
        0.9999, as in `MemoryStore` and `PgVectorStore`) gets it instead, so calls that missed the same question at
        once (from threads, tasks or processes) leave one entry. Optimistic: the partition's set is watched while its
        vectors are read, and the write is tried again when another writer changed the set meanwhile."""
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise ValueError(f"vector has {q.shape[0]} dimensions, the store has dim={self.dim}")
        part = self._part_key(partition)
        mapping = {"v": q.tobytes(), "a": payload, "m": json.dumps(meta)}
        changed, failed = _errors()
        for _ in range(_ADD_TRIES):
            with self.redis.pipeline(transaction=True) as pipe:
                try:
                    pipe.watch(part)
                except failed:  # a client without WATCH (Redis Cluster's pipelines): add without looking
                    break
                try:
                    nearest = self._nearest(part, q)
                    if nearest is not None and nearest[1] >= _SAME:  # its entry takes the answer: no duplicate can come
                        pipe.unwatch()
                        self._write_now(part, nearest[0], mapping)
                        return
                    pipe.multi()  # a new entry: only if no writer added one since the partition was read
                    self._write(pipe, part, self._new_key(part), mapping)
                    pipe.execute()
                    return
                except changed:
                    continue  # another writer added to (or emptied) the partition meanwhile: read it again
        self._write_now(part, self._new_key(part), mapping)  # still contended, or no WATCH: a new entry

    def _new_key(self, part: str) -> str:
        return f"{self.prefix}e:{part[len(self.prefix) + 2 :]}:{uuid.uuid4().hex}"

    def _write_now(self, part: str, key: Any, mapping: dict[str, Any]) -> None:
        pipe = self.redis.pipeline(transaction=True)
        self._write(pipe, part, key, mapping)
        pipe.execute()

    def _write(self, pipe: Any, part: str, key: Any, mapping: dict[str, Any]) -> None:
        pipe.hset(key, mapping=mapping)
        pipe.sadd(part, key)
        if self.ttl is not None:
            ms = max(int(self.ttl * 1000), 1)
            pipe.pexpire(key, ms)
            pipe.pexpire(part, ms)  # the set lives as long as its newest entry

    def clear(self, scope: Optional[str] = None) -> None:
        """Drop every entry of this prefix, or those of one scope."""
        patterns = [f"{self.prefix}*"] if scope is None else [f"{self.prefix}{kind}:{_hex(scope)}:*" for kind in ("p", "e")]
        for pattern in patterns:
            batch = list(self.redis.scan_iter(match=pattern, count=500))
            if batch:
                self.redis.delete(*batch)

    def __len__(self) -> int:
        return sum(1 for _ in self.redis.scan_iter(match=f"{self.prefix}e:*", count=500))


def _client(client: Any) -> Any:
    """A ``redis.Redis`` for ``client`` (itself, or made from a URL); a clear error for anything else."""
    if isinstance(client, str):
        if not client.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(f"RedisStore takes a redis.Redis client or a redis://, rediss:// or unix:// URL, got {client!r}")
        try:
            import redis
        except ImportError:
            raise ImportError('RedisStore needs the redis package: pip install "redis>=5.0"') from None
        return redis.Redis.from_url(client)
    if not all(callable(getattr(client, name, None)) for name in ("pipeline", "smembers", "hmget", "scan_iter")):
        raise TypeError(f"RedisStore takes a redis.Redis client or a redis:// URL, got {type(client).__name__}")
    if inspect.iscoroutinefunction(getattr(client, "execute_command", None)):
        raise TypeError("RedisStore needs a synchronous redis.Redis client, not redis.asyncio's: the semantic cache "
                        "calls its store synchronously (in a worker thread for async clients)")  # fmt: skip
    return client


def _hex(scope: str) -> str:
    """The scope in a key: its stored form, hex-encoded (``scope.encode().hex()`` for a plain scope, as before)."""
    return stored_scope(scope).encode().hex()
