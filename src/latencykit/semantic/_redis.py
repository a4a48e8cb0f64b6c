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
        part = self._part_key(partition)
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
        if float(sims[best]) < threshold:
            return None
        payload, meta = self.redis.hmget(live[best][0], "a", "m")
        if payload is None:  # expired between the two reads
            return None
        return StoreHit(bytes(payload), float(sims[best]), json.loads(meta or b"{}"))

    def add(self, partition: Partition, vector: Vector, payload: bytes, meta: dict[str, Any]) -> None:
        """Store an answer with the store's TTL."""
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise ValueError(f"vector has {q.shape[0]} dimensions, the store has dim={self.dim}")
        part = self._part_key(partition)
        key = f"{self.prefix}e:{part[len(self.prefix) + 2 :]}:{uuid.uuid4().hex}"
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(key, mapping={"v": q.tobytes(), "a": payload, "m": json.dumps(meta)})
        pipe.sadd(part, key)
        if self.ttl is not None:
            ms = max(int(self.ttl * 1000), 1)
            pipe.pexpire(key, ms)
            pipe.pexpire(part, ms)  # the set lives as long as its newest entry
        pipe.execute()

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
