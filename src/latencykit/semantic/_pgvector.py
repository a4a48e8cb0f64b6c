"""`PgVectorStore`: a `VectorStore` in PostgreSQL + pgvector, searched on the server.

Every process that points at the same table shares the answers. Schema (created on first
use under an advisory lock, or by ``latencykit semantic init --dsn ...``):

- ``{table}``: ``id``, ``scope`` (its `stored_scope` form: a NUL, a lone surrogate or a long scope
  is hashed, so every ``str`` is a scope here as in the other stores), ``fingerprint``, ``vkey`` (a digest of the vector),
  ``embedding vector(dim)``, ``payload bytea`` (opaque: compressed, or encrypted by the cache),
  ``meta jsonb``, ``created_at``; an HNSW index (``vector_cosine_ops``, ``m``,
  ``ef_construction``), the unique B-tree ``(scope, fingerprint, vkey)`` — the partition
  index, and the upsert key — and a B-tree on ``created_at`` for the TTL sweep.
- ``{table}_used``: ``id`` → ``used_at``, the LRU clock, in its own narrow table so that the
  touch of a hit is a small HOT update, never a new row version (and HNSW entry) of the
  vector table.

A lookup is one statement: the partition (scope and fingerprint) and the TTL are in its
``WHERE``, so an entry of another partition cannot be returned whatever the index does. It
counts the partition's rows up to ``exact_limit`` through the B-tree; a partition that small
is scanned exactly (recall 1), a larger one through the HNSW index with ``ef_search``
(pgvector ≥ 0.8: iterative scan, so rows of other partitions do not starve the result).
The best row at cosine ≥ threshold is returned and its ``used_at`` touched (at most once
per ``lru_resolution`` seconds). An add is one transaction holding the partition's advisory
lock: a near-identical vector (cosine ≥ 0.9999) already there gets the new answer, else the
row is inserted ``ON CONFLICT`` on the unique key — two processes storing the same answer
leave one row. ``maintain`` (run by `add` every ``maintain_every`` seconds, by one process
at a time) deletes expired rows and, above ``max_entries``, the least recently used.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Generator, Optional

import numpy as np

from ._pgsql import ITERATIVE_SCAN, MIN_PGVECTOR, SCHEMA_LOCK, Sql, lock_key, version_of
from ._scope import stored_scope
from ._store import Partition, StoreHit, Vector

if TYPE_CHECKING:
    from psycopg import AsyncConnection, Connection
    from psycopg.types import TypeInfo
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

__all__ = ["PgVectorStore", "MIN_PGVECTOR", "init_schema"]

_SAME = 0.9999  # cosine at which an add replaces the stored answer (as MemoryStore)
_INSTALL = 'PgVectorStore needs psycopg 3, psycopg-pool and pgvector: pip install "latencykit[pgvector]"'


def _imports() -> Any:
    try:
        import psycopg
        import psycopg_pool
        from pgvector.psycopg.vector import register_vector_info
    except ImportError as exc:
        raise ImportError(f"{_INSTALL} ({exc})") from exc
    return psycopg, psycopg_pool, register_vector_info


def _positive(name: str, value: Any, *, integer: bool = False, none: bool = False, zero: bool = False) -> None:
    if value is None and none:
        return
    ok = isinstance(value, int) if integer else isinstance(value, (int, float)) and math.isfinite(value)
    if not ok or isinstance(value, bool) or not (value >= 0 if zero else value > 0):
        kind = "int" if integer else "number"
        raise ValueError(f"{name} must be a {'non-negative' if zero else 'positive'} {kind}{' or None' if none else ''}, got {value!r}")


class PgVectorStore:
    """`VectorStore` in PostgreSQL + pgvector, shared by every process using the same table.

    ``dsn_or_pool``: a libpq connection string / URL (the store makes its pools: sync
    ``pool_size`` connections, async ones on first async use) or a ``psycopg_pool.ConnectionPool``
    (yours: the store never closes it). Sync methods are the `VectorStore` interface; ``asearch``,
    ``aadd``, ``aclear``, ``amaintain`` and ``acount`` are their async twins.
    """

    def __init__(
        self,
        dsn_or_pool: Any,
        dim: int,
        *,
        table: str = "latencykit_semantic",
        ttl: Optional[float] = 24 * 3600.0,
        max_entries: int = 1_000_000,
        m: int = 16,
        ef_construction: int = 64,
        ef_search: int = 100,
        exact_limit: int = 2000,
        lru_resolution: float = 1.0,
        maintain_every: float = 60.0,
        pool_size: int = 10,
        timeout: float = 5.0,
        create: bool = True,
    ) -> None:
        psycopg, psycopg_pool, self._register = _imports()
        _positive("dim", dim, integer=True)
        _positive("ttl", ttl, none=True)
        for name, value in (("max_entries", max_entries), ("m", m), ("ef_construction", ef_construction), ("ef_search", ef_search), ("exact_limit", exact_limit), ("pool_size", pool_size)):
            _positive(name, value, integer=True)
        for name, fvalue in (("lru_resolution", lru_resolution), ("maintain_every", maintain_every)):
            _positive(name, fvalue, zero=True)
        _positive("timeout", timeout)
        if not 2 <= m <= 100 or not 4 <= ef_construction <= 1000 or not 1 <= ef_search <= 1000 or ef_construction < 2 * m:
            raise ValueError(f"HNSW settings out of pgvector's range: m={m} (2..100), ef_construction={ef_construction} (4..1000, >= 2*m), ef_search={ef_search} (1..1000)")
        self.dim, self.ttl, self.max_entries = dim, (None if ttl is None else float(ttl)), max_entries
        self.ef_search, self.exact_limit, self.lru_resolution, self.maintain_every = ef_search, exact_limit, float(lru_resolution), float(maintain_every)
        self.timeout, self.create = float(timeout), create
        self._psycopg = psycopg
        self._sql = Sql(psycopg, table, dim, self.ttl, m, ef_construction)
        self.table = table
        self.evictions = 0
        """Entries this process's maintenance dropped to stay within ``max_entries``."""
        self.expirations = 0
        """Entries this process's maintenance dropped because their TTL had passed."""
        self.pgvector_version: Optional[tuple[int, ...]] = None
        self._info: Optional[TypeInfo] = None
        self._applied: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()  # connection -> its session settings
        self._lock = threading.Lock()
        self._schema_lock = threading.Lock()
        self._last_maintain = -math.inf
        self._apool: Optional[AsyncConnectionPool] = None
        self._pool: Optional[ConnectionPool] = None
        self._pool_size = pool_size
        if isinstance(dsn_or_pool, psycopg_pool.ConnectionPool):
            self._pool, self._own, self._dsn = dsn_or_pool, False, dsn_or_pool.conninfo
        elif isinstance(dsn_or_pool, str):
            self._dsn, self._own = dsn_or_pool, True  # the pool is made on first use: no connection here
        else:
            raise ValueError(f"dsn_or_pool must be a connection string or a psycopg_pool.ConnectionPool, got {type(dsn_or_pool).__name__}")

    # -- the VectorStore interface (sync) --------------------------------------------------------
    def search(self, partition: Partition, vector: Vector, threshold: float) -> Optional[StoreHit]:
        """The most similar live entry of ``partition`` at cosine ≥ ``threshold`` (its LRU time is touched)."""
        params = self._search_params(partition, vector, threshold)
        with self._connection() as conn:
            settings, local = self._settings(conn)
            with conn.transaction() if local else contextlib.nullcontext():
                if settings:
                    conn.execute(settings)
                row = conn.execute(self._sql.search, params, prepare=False).fetchone()
        return _hit(row)

    def add(self, partition: Partition, vector: Vector, payload: bytes, meta: dict[str, Any]) -> None:
        """Store an answer (a near-identical vector of the partition gets it instead); runs `maintain` when due."""
        lock, params = self._add_params(partition, vector, payload, meta)
        with self._connection() as conn, conn.transaction():
            conn.execute(self._sql.lock, (lock,))
            conn.execute(self._sql.add, params, prepare=False)
        if self._maintenance_due():
            self.maintain()

    def clear(self, scope: Optional[str] = None) -> None:
        """Drop every entry of this table, or those of one scope."""
        with self._connection() as conn:
            if scope is None:
                conn.execute(self._sql.clear_all)
            else:
                conn.execute(self._sql.clear_scope, (stored_scope(scope),))

    def maintain(self) -> tuple[int, int]:
        """Delete expired entries, then the least recently used above ``max_entries``; returns
        ``(expired, evicted)``. Skipped (``(0, 0)``) while another process is at it."""
        with self._connection() as conn, conn.transaction():
            if not conn.execute(self._sql.try_lock, (self._sql.maintain_lock,)).fetchone()[0]:
                return 0, 0
            expired = conn.execute(self._sql.expire).fetchone()[0] if self._sql.expire is not None else 0
            evicted = conn.execute(self._sql.evict, {"max": self.max_entries}).fetchone()[0]
        return self._counted(int(expired), int(evicted))

    def __len__(self) -> int:
        with self._connection() as conn:
            return int(conn.execute(self._sql.count).fetchone()[0])

    def close(self) -> None:
        """Close the sync pool if this store made it (not a pool that was passed in)."""
        pool = self._pool
        if self._own and pool is not None:
            self._pool = None
            pool.close()

    def __enter__(self) -> "PgVectorStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- async twins --------------------------------------------------------------------------
    async def asearch(self, partition: Partition, vector: Vector, threshold: float) -> Optional[StoreHit]:
        """Async `search`."""
        params = self._search_params(partition, vector, threshold)
        async with self._aconnection() as conn:
            settings, local = self._settings(conn)
            async with conn.transaction() if local else contextlib.nullcontext():
                if settings:
                    await conn.execute(settings)
                row = await (await conn.execute(self._sql.search, params, prepare=False)).fetchone()
        return _hit(row)

    async def aadd(self, partition: Partition, vector: Vector, payload: bytes, meta: dict[str, Any]) -> None:
        """Async `add`."""
        lock, params = self._add_params(partition, vector, payload, meta)
        async with self._aconnection() as conn, conn.transaction():
            await conn.execute(self._sql.lock, (lock,))
            await conn.execute(self._sql.add, params, prepare=False)
        if self._maintenance_due():
            await self.amaintain()

    async def aclear(self, scope: Optional[str] = None) -> None:
        """Async `clear`."""
        async with self._aconnection() as conn:
            if scope is None:
                await conn.execute(self._sql.clear_all)
            else:
                await conn.execute(self._sql.clear_scope, (stored_scope(scope),))

    async def amaintain(self) -> tuple[int, int]:
        """Async `maintain`."""
        async with self._aconnection() as conn, conn.transaction():
            if not (await (await conn.execute(self._sql.try_lock, (self._sql.maintain_lock,))).fetchone())[0]:
                return 0, 0
            expired = (await (await conn.execute(self._sql.expire)).fetchone())[0] if self._sql.expire is not None else 0
            evicted = (await (await conn.execute(self._sql.evict, {"max": self.max_entries})).fetchone())[0]
        return self._counted(int(expired), int(evicted))

    async def acount(self) -> int:
        """Async ``len(store)``: the live entries."""
        async with self._aconnection() as conn:
            return int((await (await conn.execute(self._sql.count)).fetchone())[0])

    async def aclose(self) -> None:
        """Close the async pool (made on first async use) and, if the store made it, the sync pool."""
        apool, self._apool = self._apool, None
        if apool is not None:
            await apool.close()
        self.close()

    # -- shared, no I/O -------------------------------------------------------------------------
    def _vector(self, vector: Any) -> Any:
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise ValueError(f"vector has {q.shape[0]} dimensions, the store has dim={self.dim}")
        return q

    def _search_params(self, partition: Partition, vector: Any, threshold: float) -> dict[str, Any]:
        scope, fp = stored_scope(partition[0]), partition[1]
        return {"scope": scope, "fp": fp, "v": self._vector(vector), "probe": self.exact_limit + 1, "maxd": 1.0 - float(threshold), "res": self.lru_resolution}

    def _add_params(self, partition: Partition, vector: Any, payload: bytes, meta: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        scope, fp = stored_scope(partition[0]), partition[1]
        q = self._vector(vector)
        Jsonb = self._psycopg.types.json.Jsonb
        params = {
            "scope": scope, "fp": fp, "v": q, "vkey": hashlib.blake2b(q.tobytes(), digest_size=16).digest(),
            "p": bytes(payload), "m": Jsonb(meta), "probe": self.exact_limit + 1, "samed": 1.0 - _SAME,
        }  # fmt: skip
        return lock_key(self.table, scope, fp), params

    def _settings(self, conn: Any) -> tuple[str, bool]:
        """The SET statements a lookup on ``conn`` needs first, and whether they need a transaction of
        their own. The store's own (autocommit) connections keep them for the session: set again only
        when they change, so a lookup is one statement, one round trip. A pool passed in is left as it
        was: ``SET LOCAL`` in the lookup's transaction."""
        iterative = self.pgvector_version is not None and self.pgvector_version >= ITERATIVE_SCAN
        if not self._own:
            return self._sql.settings(self.ef_search, iterative, int(self.timeout * 1000), "LOCAL "), True
        wanted = self._sql.settings(self.ef_search, iterative, int(self.timeout * 1000), "")
        if self._applied.get(conn) == wanted:
            return "", False
        self._applied[conn] = wanted
        return wanted, False

    def _maintenance_due(self) -> bool:
        with self._lock:
            now = time.monotonic()
            if now - self._last_maintain < self.maintain_every:
                return False
            self._last_maintain = now
            return True

    def _counted(self, expired: int, evicted: int) -> tuple[int, int]:
        with self._lock:
            self.expirations += expired
            self.evictions += evicted
        return expired, evicted

    def _schema_steps(self) -> Generator[tuple[Any, Any], Any, None]:
        """The schema transaction: yields (statement, params) and receives each result row."""
        row = yield (self._psycopg.sql.SQL("SELECT pg_advisory_xact_lock(%s)"), (SCHEMA_LOCK,))
        row = yield ("SELECT extversion FROM pg_extension WHERE extname = 'vector'", None)
        if row is None:
            if not self.create:
                raise RuntimeError('the pgvector extension is not installed in this database: run CREATE EXTENSION vector (or "latencykit semantic init")')
            yield ("CREATE EXTENSION IF NOT EXISTS vector", None)
            row = yield ("SELECT extversion FROM pg_extension WHERE extname = 'vector'", None)
        version = version_of(str(row[0]))
        if version < MIN_PGVECTOR:
            raise RuntimeError(f"pgvector {row[0]} has no HNSW index: PgVectorStore needs pgvector >= 0.5.0 (ALTER EXTENSION vector UPDATE)")
        self.pgvector_version = version
        if self.create:
            for statement in self._sql.schema:
                yield (statement, None)
        row = yield (self._sql.column_type, None)
        if row is None or row[0] != f"vector({self.dim})":
            found = "no such table" if row is None else row[0]
            raise RuntimeError(f"table {self.table!r} does not hold vector({self.dim}) embeddings ({found}): use another table= or dim=")

    # -- connections ----------------------------------------------------------------------------
    def _connection(self) -> Any:
        return _SyncCheckout(self)

    def _aconnection(self) -> Any:
        return _AsyncCheckout(self)

    def _adapt(self, conn: Any) -> None:
        if conn not in self._applied:
            self._register(conn, self._info)
            self._applied[conn] = ""

    def _sync_pool(self) -> ConnectionPool:
        with self._lock:
            if self._pool is None:
                _, psycopg_pool, _ = _imports()
                self._pool = psycopg_pool.ConnectionPool(
                    self._dsn, min_size=1, max_size=self._pool_size, timeout=self.timeout, open=True, name=f"latencykit:{self.table}",
                    kwargs={"autocommit": True},
                )
            return self._pool

    def _run_schema(self, conn: Connection[Any]) -> None:
        steps = self._schema_steps()
        with conn.transaction():
            try:
                statement, params = next(steps)
                while True:
                    cur = conn.execute(statement, params)
                    statement, params = steps.send(cur.fetchone() if cur.description else None)
            except StopIteration:
                pass
        self._info = self._psycopg.types.TypeInfo.fetch(conn, "vector")

    async def _arun_schema(self, conn: AsyncConnection[Any]) -> None:
        steps = self._schema_steps()
        async with conn.transaction():
            try:
                statement, params = next(steps)
                while True:
                    cur = await conn.execute(statement, params)
                    statement, params = steps.send(await cur.fetchone() if cur.description else None)
            except StopIteration:
                pass
        self._info = await self._psycopg.types.TypeInfo.fetch(conn, "vector")

    def __repr__(self) -> str:
        return f"<PgVectorStore table={self.table!r} dim={self.dim}>"


def _hit(row: Any) -> Optional[StoreHit]:
    if row is None:
        return None
    payload, meta, distance = row
    return StoreHit(bytes(payload), 1.0 - float(distance), dict(meta))


class _SyncCheckout:
    """A pooled connection with the schema ensured (once per store) and the vector type adapted."""

    def __init__(self, store: PgVectorStore) -> None:
        self.store = store
        self.cm: Any = None

    def __enter__(self) -> Connection[Any]:
        store = self.store
        self.cm = store._sync_pool().connection()
        conn = self.cm.__enter__()
        try:
            if store._info is None:
                with store._schema_lock:
                    if store._info is None:
                        store._run_schema(conn)
            store._adapt(conn)
        except BaseException as exc:  # the connection goes back to the pool
            self.cm.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return conn  # type: ignore[no-any-return]

    def __exit__(self, *exc: Any) -> None:
        self.cm.__exit__(*exc)


class _AsyncCheckout:
    """Async twin of `_SyncCheckout` (the async pool is made on first use, in the running loop)."""

    def __init__(self, store: PgVectorStore) -> None:
        self.store = store
        self.cm: Any = None

    async def __aenter__(self) -> AsyncConnection[Any]:
        store = self.store
        if store._apool is None:
            _, psycopg_pool, _ = _imports()
            pool = psycopg_pool.AsyncConnectionPool(store._dsn, min_size=1, max_size=store._pool_size, timeout=store.timeout, open=False, name=f"latencykit:{store.table}:async",
                kwargs={"autocommit": True},
            )
            await pool.open()
            store._apool = pool
        self.cm = store._apool.connection()
        conn = await self.cm.__aenter__()
        try:
            if store._info is None:
                await store._arun_schema(conn)
            store._adapt(conn)
        except BaseException as exc:  # the connection goes back to the pool
            await self.cm.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return conn  # type: ignore[no-any-return]

    async def __aexit__(self, *exc: Any) -> None:
        await self.cm.__aexit__(*exc)


def init_schema(dsn: str, dim: int, *, table: str = "latencykit_semantic", m: int = 16, ef_construction: int = 64) -> str:
    """Create a `PgVectorStore`'s schema over one direct connection (``latencykit semantic init``);
    returns what was found. Connection and permission errors raise ``RuntimeError`` with the server's message."""
    psycopg, _, _ = _imports()
    store = PgVectorStore(dsn, dim, table=table, m=m, ef_construction=ef_construction)
    try:
        with psycopg.connect(dsn) as conn:
            store._run_schema(conn)
            n = conn.execute(store._sql.count).fetchone()[0]
    except psycopg.Error as exc:
        raise RuntimeError(f"semantic init failed: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}") from None
    version = ".".join(map(str, store.pgvector_version or ()))
    return f"table {table!r} ready: vector({dim}), HNSW m={m} ef_construction={ef_construction}, pgvector {version}, {n} live entries"
