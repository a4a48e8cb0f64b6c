"""Semantic cache stores at scale: PgVectorStore against MemoryStore and RedisStore, in one run.

For each size (``--sizes``, default 10k and 100k; 1M on request) ``N`` random unit vectors of
``--dim`` (384) are stored twice: in ONE partition (every entry shares scope and request
fingerprint: the worst case) and spread over 1000 partitions (the realistic one). Then
``--queries`` lookups through each store's own ``search``, half at cosine 0.92 from a stored
entry (hits), half random (misses), at threshold 0.86:

- latency: wall time of ``search`` in this process, P50 / P99 in ms (for PostgreSQL and Redis
  it includes the round trips to the local server);
- recall: of the hit lookups, how many returned the true nearest neighbour of the partition
  (computed exactly with numpy); false hits: misses that returned anything.

PostgreSQL + pgvector is started here on 127.0.0.1 (``tests/_pg_server.py``: the ``pgserver``
wheel, or ``$LATENCYKIT_PG_BIN``) unless ``--dsn`` is given. Its tables are filled with binary
COPY and the HNSW index is built after the load (``m``, ``ef_construction``; its build time is
printed); ``ef_search`` is swept on the one-partition table, and up to 100k entries the same
partition is also scanned exactly (200 lookups), for comparison. The 1000-partition tables hold
≤ ``exact_limit`` rows per partition, so their lookups take the exact branch: their HNSW index
is not built (it is never consulted). redis-server is started here when installed. Skipped,
with the reason printed: MemoryStore in one partition above 100k (each add scans the partition
for a duplicate), Redis in one partition above 100k (a lookup reads the whole partition).

    python benchmarks/semantic.py --store pgvector                  # the same as:
    python benchmarks/semantic_stores.py --sizes 10000,100000
    python benchmarks/semantic_stores.py --sizes 100000 --layouts 1 --stores pgvector --ef-search 100,200,400,1000 --queries 500
    python benchmarks/semantic_stores.py --sizes 1000000 --layouts 1000   # what docs/semantic.md shows
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from latencykit.semantic import MemoryStore, PgVectorStore, RedisStore  # noqa: E402
from semantic import _near, _pct, _unit_rows  # noqa: E402  (benchmarks/semantic.py: the same vectors and percentiles)

THRESHOLD = 0.86
PARTS = 1000
EXACT_LIMIT = 2000  # PgVectorStore's default

def _fp(i: int, parts: int) -> bytes:
    return (i % parts).to_bytes(4, "little")


class Case:
    """The queries of one (size, layout) and their exact answers."""

    def __init__(self, vectors: Any, parts: int, queries: int, rng: np.random.Generator) -> None:
        n = len(vectors)
        self.parts = parts
        self.items: list[tuple[Any, bytes, Optional[int]]] = []  # (query, fingerprint, true nearest id or None)
        part_of = np.arange(n) % parts
        for k in range(queries):
            if k % 2 == 0:
                i = int(rng.integers(0, n))
                q = _near(rng, vectors[i], 0.92)
            else:
                i = int(rng.integers(0, n))
                q = _unit_rows(rng, 1, vectors.shape[1])[0]
            members = np.flatnonzero(part_of == i % parts)
            sims = vectors[members] @ q
            best = int(np.argmax(sims))
            truth = int(members[best]) if sims[best] >= THRESHOLD else None
            self.items.append((q, _fp(i, parts), truth))

    def run(self, search: Callable[[bytes, Any], Optional[bytes]], limit: Optional[int] = None) -> tuple[list[float], int, int, int]:
        times: list[float] = []
        found = expected = false_hits = 0
        for q, fp, truth in self.items[:limit]:
            t = time.perf_counter()
            payload = search(fp, q)
            times.append(time.perf_counter() - t)
            if truth is None:
                false_hits += payload is not None
            else:
                expected += 1
                found += payload is not None and int.from_bytes(payload, "little") == truth
        return times, found, expected, false_hits


def _row(store: str, n: int, parts: int, setting: str, result: tuple[list[float], int, int, int], note: str = "") -> None:
    times, found, expected, false_hits = result
    recall = f"{found / expected:.3f}" if expected else "-"
    print(
        f"| {store} | {n:,} | {'1' if parts == 1 else f'{parts:,}'} | {setting} | {_pct(times, 0.5) * 1e3:.2f} | {_pct(times, 0.99) * 1e3:.2f}"
        f" | {recall} ({found}/{expected}) | {false_hits} | {len(times)} | {note} |",
        flush=True,
    )


def _skip(store: str, n: int, parts: int, why: str) -> None:
    print(f"| {store} | {n:,} | {'1' if parts == 1 else f'{parts:,}'} | - | - | - | - | - | 0 | skipped: {why} |", flush=True)


# -- PostgreSQL ---------------------------------------------------------------------------------
def _pg_load(dsn: str, table: str, vectors: Any, parts: int, m: int, ef_construction: int, index: bool) -> tuple[PgVectorStore, float, float]:
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    dim = vectors.shape[1]
    store = PgVectorStore(
        dsn, dim, table=table, ttl=None, max_entries=10**9, m=m, ef_construction=ef_construction, maintain_every=1e9, lru_resolution=60, exact_limit=EXACT_LIMIT
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        store._run_schema(conn)
        register_vector(conn)
        conn.execute(f"DROP INDEX {table}_hnsw")
        t = time.perf_counter()
        with conn.cursor() as cur, cur.copy(f"COPY {table} (scope, fingerprint, vkey, embedding, payload, meta) FROM STDIN (FORMAT binary)") as copy:
            copy.set_types(["text", "bytea", "bytea", "vector", "bytea", "jsonb"])
            meta = Jsonb({})
            for i, v in enumerate(vectors):
                key = i.to_bytes(8, "little")
                copy.write_row(("bench", _fp(i, parts), key, v, key, meta))
        conn.execute(f"INSERT INTO {table}_used (id) SELECT id FROM {table}")
        conn.execute(f"VACUUM ANALYZE {table}")
        conn.execute(f"VACUUM ANALYZE {table}_used")
        load = time.perf_counter() - t
        build = 0.0
        if index:
            t = time.perf_counter()
            conn.execute(f"CREATE INDEX {table}_hnsw ON {table} USING hnsw (embedding vector_cosine_ops) WITH (m = {m}, ef_construction = {ef_construction})")
            build = time.perf_counter() - t
    return store, load, build


def _pg_search(store: PgVectorStore) -> Callable[[bytes, Any], Optional[bytes]]:
    def search(fp: bytes, q: Any) -> Optional[bytes]:
        hit = store.search(("bench", fp), q, THRESHOLD)
        return None if hit is None else hit.payload

    return search


# -- Redis --------------------------------------------------------------------------------------
class _Redis:
    def __init__(self) -> None:
        import redis

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        self.dir = tempfile.mkdtemp(prefix="latencykit-redis-")
        server = shutil.which("redis-server")
        assert server is not None
        self.proc = subprocess.Popen(
            [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.client = redis.Redis(host="127.0.0.1", port=port)
        for _ in range(200):
            try:
                self.client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated entry counts (default 10000,100000)")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dsn", help="an existing PostgreSQL with pgvector (default: start one here)")
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construction", type=int, default=64)
    ap.add_argument("--ef-search", default="10,40,100,200,400,1000", help="values swept on the one-partition table")
    ap.add_argument("--stores", default="memory,redis,pgvector")
    ap.add_argument("--layouts", default=f"1,{PARTS}", help=f"partition counts to measure (default 1,{PARTS})")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    stores = set(args.stores.split(","))
    server = None
    dsn = args.dsn
    if "pgvector" in stores and dsn is None:
        from _pg_server import PgServer

        gb = max(1, int(max(sizes) * args.dim * 4 * 2.5 / 2**30) + 1)  # table + index in shared buffers
        server = PgServer(settings=[f"shared_buffers={gb}GB", f"maintenance_work_mem={min(gb + 1, 8)}GB", "max_parallel_maintenance_workers=1", "max_wal_size=8GB", "checkpoint_timeout=30min"])
        dsn = server.dsn
    redis_server = _Redis() if "redis" in stores and shutil.which("redis-server") else None
    try:
        import psycopg

        if dsn:
            with psycopg.connect(dsn) as conn:
                pg_version = conn.execute("SHOW server_version").fetchone()
                ext = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").fetchone()
            print(f"## PostgreSQL {pg_version[0] if pg_version else '?'}, pgvector {ext[0] if ext else '?'}; HNSW m={args.m} ef_construction={args.ef_construction}")
        print(f"## load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs; {args.queries} lookups per case, half hits at cos 0.92, threshold {THRESHOLD}")
        print("\n| store | entries | partitions | setting | P50 ms | P99 ms | recall | false hits | lookups | note |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for n in sizes:
            rng = np.random.default_rng(args.seed)
            vectors = _unit_rows(rng, n, args.dim)
            for parts in [int(x) for x in args.layouts.split(",")]:
                case = Case(vectors, parts, args.queries, np.random.default_rng(args.seed + parts))
                if "pgvector" in stores and dsn:
                    table = f"bench_{n}_{parts}"
                    hnsw = -(-n // parts) > EXACT_LIMIT  # smaller partitions take the exact branch: the index is never read
                    store, load, build = _pg_load(dsn, table, vectors, parts, args.m, args.ef_construction, index=hnsw)
                    note = f"COPY+vacuum {load:.0f} s" + (f", HNSW build {build:.0f} s" if hnsw else ", exact branch (no HNSW index)")
                    for ef in [int(x) for x in args.ef_search.split(",")] if hnsw else [store.ef_search]:  # no rebuild needed
                        store.ef_search = ef
                        case.run(_pg_search(store), limit=20)  # warm the connection and the plan cache
                        _row("PgVectorStore", n, parts, f"ef_search={ef}" if hnsw else f"exact_limit={store.exact_limit}", case.run(_pg_search(store)), note)
                    if hnsw and n <= 100_000:  # the same partition scanned exactly, for comparison
                        store.exact_limit = n
                        case.run(_pg_search(store), limit=5)
                        _row("PgVectorStore", n, parts, f"exact scan (exact_limit={n})", case.run(_pg_search(store), limit=200), "B-tree + sort, no HNSW")
                    with store._sync_pool().connection() as conn:
                        conn.execute(f"DROP TABLE {table}_used, {table}")
                    store.close()
                if "memory" in stores:
                    if parts == 1 and n > 100_000:
                        _skip("MemoryStore", n, parts, "each add scans the one partition for a duplicate: the fill alone would take hours")
                    else:
                        mem = MemoryStore(args.dim, max_entries=n + 1, max_bytes=1 << 40, ttl=None)
                        t = time.perf_counter()
                        for i, v in enumerate(vectors):
                            mem.add(("bench", _fp(i, parts)), v, i.to_bytes(8, "little"), {})
                        fill = time.perf_counter() - t

                        def msearch(fp: bytes, q: Any, mem: MemoryStore = mem) -> Optional[bytes]:
                            hit = mem.search(("bench", fp), q, THRESHOLD)
                            return None if hit is None else hit.payload

                        _row("MemoryStore", n, parts, "SimHash above 4096 rows" if parts == 1 else "exact", case.run(msearch), f"fill {fill:.0f} s")
                        del mem
                if "redis" in stores:
                    if redis_server is None:
                        _skip("RedisStore", n, parts, "redis-server not installed")
                    elif parts == 1 and n > 100_000:
                        _skip("RedisStore", n, parts, f"a lookup reads the whole partition ({n * args.dim * 4 / 2**20:.0f} MiB)")
                    else:
                        rs = RedisStore(redis_server.client, args.dim, ttl=None, prefix=f"bench{n}-{parts}:")
                        t = time.perf_counter()
                        for i, v in enumerate(vectors):
                            rs.add(("bench", _fp(i, parts)), v, i.to_bytes(8, "little"), {})
                        fill = time.perf_counter() - t

                        def rsearch(fp: bytes, q: Any, rs: RedisStore = rs) -> Optional[bytes]:
                            hit = rs.search(("bench", fp), q, THRESHOLD)
                            return None if hit is None else hit.payload

                        limit = (40 if n >= 100_000 else 100) if parts == 1 else None  # each reads the whole partition
                        _row("RedisStore", n, parts, "client-side scan", case.run(rsearch, limit=limit), f"fill {fill:.0f} s")
                        redis_server.client.flushall()
        print(f"\n## load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        if redis_server is not None:
            redis_server.stop()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
