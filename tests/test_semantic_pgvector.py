"""PgVectorStore against a real PostgreSQL + pgvector started on 127.0.0.1 (tests/_pg_server.py).

Threshold, partitions (exact and HNSW branches), TTL, LRU, upserts, concurrency in threads
and across processes, exact SDK types through the cache, and ``latencykit semantic init``.
Without a server binary or the drivers: skipped here, a failure under CI.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
from anthropic.types import Message
from openai.types.chat import ChatCompletion

import latencykit as lk
from latencykit.emulator import Emulator
from latencykit.semantic import SemanticCache, StoreHit, semantic_cacheable

from _pg_server import PgServer, unavailable_reason
from test_semantic_sync import CANARIES, canary_calls, holds

REASON = unavailable_reason()
if REASON is not None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the pgvector store tests must run under CI: {REASON}", pytrace=False)
    pytest.skip(REASON, allow_module_level=True)

from latencykit.semantic import PgVectorStore  # noqa: E402  (needs psycopg: after the check)
from latencykit.semantic._scope import stored_scope  # noqa: E402

DIM = 16
SECRET = b"s" * 32
QUESTION = "What is the return policy for shoes?"


@pytest.fixture(scope="module")
def pg() -> Iterator[PgServer]:
    """One PostgreSQL + pgvector for this module, stopped by its PID at the end."""
    server = PgServer()
    yield server
    server.stop()


def make(pg: PgServer, dim: int = DIM, **kw: Any) -> PgVectorStore:
    """A store on a fresh table."""
    kw.setdefault("maintain_every", 1e9)
    return PgVectorStore(pg.dsn, dim, table=f"t_{uuid.uuid4().hex[:12]}", **kw)


@pytest.fixture
def store(pg: PgServer) -> Iterator[PgVectorStore]:
    s = make(pg, ttl=60, lru_resolution=0)
    yield s
    s.close()


def rows(pg: PgServer, query: str) -> list[tuple[Any, ...]]:
    """The rows of one query, over a connection of its own."""
    import psycopg

    with psycopg.connect(pg.dsn) as conn:
        return conn.execute(query).fetchall()  # type: ignore[arg-type]


def unit(seed: int, dim: int = DIM) -> Any:
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def near(v: Any, cos: float, seed: int) -> Any:
    r = np.random.default_rng(seed).standard_normal(v.shape[0]).astype(np.float32)
    r -= (r @ v) * v
    r /= np.linalg.norm(r)
    return (cos * v + np.sqrt(1 - cos**2) * r).astype(np.float32)


def sealed(text: str, size: int = 0) -> bytes:
    """A payload that proves it was read whole: its text, filler, and a digest of both."""
    body = text.encode() + b"|" + os.urandom(size)
    return body + hashlib.sha256(body).digest()


def opened(payload: bytes) -> str:
    body, digest = payload[:-32], payload[-32:]
    assert hashlib.sha256(body).digest() == digest, "a partial or mixed payload was read"
    return body.split(b"|", 1)[0].decode()


def test_threshold_best_match_and_exact_types(store: PgVectorStore) -> None:
    """The best entry at cosine >= threshold wins; payload bytes, similarity float, meta dict come back."""
    v = unit(1)
    for i, cos in enumerate((0.91, 0.99, 0.95)):
        store.add(("s", b"fp"), near(v, cos, 50 + i), f"a{i}".encode(), {"api": "messages", "n": i})
    hit = store.search(("s", b"fp"), v, 0.9)
    assert isinstance(hit, StoreHit) and type(hit.payload) is bytes and type(hit.similarity) is float
    assert hit.payload == b"a1" and hit.meta == {"api": "messages", "n": 1}
    assert hit.similarity == pytest.approx(0.99, abs=1e-4)
    assert store.search(("s", b"fp"), v, 0.995) is None
    assert store.search(("s", b"fp"), -v, 0.5) is None
    assert len(store) == 3


def test_partitions_never_mix_in_either_branch(pg: PgServer) -> None:
    """The same vector under another scope or fingerprint is never found: exact scan and HNSW alike."""
    for exact_limit in (1000, 5):  # small partitions scanned exactly; above 5 rows, the HNSW index
        with make(pg, exact_limit=exact_limit) as s:
            v = unit(2)
            for i in range(20):
                s.add(("tenant-a", b"fp"), near(v, 0.5, 100 + i), b"other", {})
            s.add(("tenant-a", b"fp"), v, b"a", {})
            s.add(("tenant-b", b"fp"), near(v, 0.999, 7), b"b", {})
            s.add(("tenant-a", b"fp2"), near(v, 0.999, 8), b"c", {})
            hit = s.search(("tenant-a", b"fp"), v, 0.9)
            assert hit is not None and hit.payload == b"a"
            assert s.search(("tenant-c", b"fp"), v, 0.0) is None
            hit = s.search(("tenant-b", b"fp"), v, 0.0)
            assert hit is not None and hit.payload == b"b"
            s.clear("tenant-a")
            assert s.search(("tenant-a", b"fp"), v, 0.0) is None and len(s) == 1


def test_hnsw_branch_finds_the_nearest(pg: PgServer) -> None:
    """A partition above exact_limit is searched through the HNSW index and still finds its entry."""
    with make(pg, exact_limit=50, ttl=None) as s:
        rng = np.random.default_rng(3)
        m = rng.standard_normal((400, DIM)).astype(np.float32)
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        for i, v in enumerate(m):
            s.add(("big", b"fp"), v, str(i).encode(), {})
        found = [s.search(("big", b"fp"), near(m[i], 0.97, i), 0.9) for i in range(0, 400, 20)]
        assert [h.payload if h else None for h in found] == [str(i).encode() for i in range(0, 400, 20)]


def test_ttl(pg: PgServer) -> None:
    """An entry is found before its TTL, never after; maintain() deletes it and counts it."""
    with make(pg, ttl=0.5) as s:
        s.add(("s", b"fp"), unit(4), b"A", {})
        assert s.search(("s", b"fp"), unit(4), 0.99) is not None
        time.sleep(0.6)
        assert s.search(("s", b"fp"), unit(4), 0.99) is None
        assert len(s) == 0
        assert s.maintain() == (1, 0) and s.expirations == 1


def test_lru_bound(pg: PgServer) -> None:
    """Above max_entries, maintenance drops the least recently used entry: a hit refreshes it."""
    with make(pg, max_entries=3, lru_resolution=0, maintain_every=0) as s:
        for i in range(3):
            s.add(("s", b"fp"), unit(10 + i), f"e{i}".encode(), {})
        assert s.search(("s", b"fp"), unit(10), 0.99) is not None  # e0 used: e1 is now the oldest
        s.add(("s", b"fp"), unit(13), b"e3", {})
        assert s.evictions == 1 and len(s) == 3
        assert s.search(("s", b"fp"), unit(11), 0.99) is None
        assert all(s.search(("s", b"fp"), unit(10 + i), 0.99) is not None for i in (0, 2, 3))


def test_same_answer_is_one_row(store: PgVectorStore) -> None:
    """Storing the same question again (or at cosine >= 0.9999) replaces the answer: one row."""
    v = unit(5)
    store.add(("s", b"fp"), v, b"first", {})
    store.add(("s", b"fp"), v, b"second", {"k": 2})
    store.add(("s", b"fp"), near(v, 0.99995, 1), b"third", {"k": 3})
    assert len(store) == 1
    hit = store.search(("s", b"fp"), v, 0.99)
    assert hit is not None and hit.payload == b"third" and hit.meta == {"k": 3}


def test_threads_scopes_duplicates_and_whole_payloads(pg: PgServer) -> None:
    """Threads of eight scopes store and look up at once: only their own scope's answers, read whole;
    eight threads storing the same answer leave one row."""
    with make(pg, lru_resolution=0) as s:
        errors: list[BaseException] = []
        v = unit(6)

        def tenant(t: int) -> None:
            try:
                for i in range(12):
                    q = near(v, 0.999, 5000 + 100 * t + i)
                    s.add((f"tenant-{t}", b"fp"), q, sealed(f"tenant-{t}", 3000 * (i % 3)), {"t": t})
                    s.add(("shared", b"fp"), v, sealed("same", 50_000), {})  # the same answer from every thread
                    hit = s.search((f"tenant-{t}", b"fp"), v, 0.9)
                    assert hit is not None and opened(hit.payload) == f"tenant-{t}" and hit.meta == {"t": t}
                    shared = s.search(("shared", b"fp"), v, 0.99)
                    assert shared is not None and opened(shared.payload) == "same"
            except BaseException as exc:  # noqa: BLE001  (reported by the main thread)
                errors.append(exc)

        threads = [threading.Thread(target=tenant, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not errors, errors[0]
        assert rows(pg, f"SELECT count(*) FROM {s.table} WHERE scope = 'shared'") == [(1,)]


CHILD = """
import json, sys
import latencykit as lk
from latencykit.semantic import PgVectorStore, SemanticCache, semantic_cacheable
dsn, table, base_url, question = sys.argv[1:5]
store = PgVectorStore(dsn, 384, table=table)
client = lk.Anthropic(base_url=base_url, api_key="k", max_retries=0, semantic=SemanticCache(store=store, secret=b"s" * 32))
msg = client.messages.create(model="claude-sonnet-5", max_tokens=32, messages=[{"role": "user", "content": question}],
                             extra_headers=semantic_cacheable("tenant-x"))
print(json.dumps({"id": msg.id, "hit": client.latency.last.semantic_hit}))
client.close()
store.close()
"""


def test_two_processes_share_answers(pg: PgServer, emu: Emulator) -> None:
    """Two processes miss the same question at once and both store it: one row remains, and the answer
    is a hit here (a third process) as the SDK's own Message; another scope stays a miss."""
    table = f"t_{uuid.uuid4().hex[:12]}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen([sys.executable, "-c", CHILD, pg.dsn, table, emu.base_url, QUESTION], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    children = [json.loads(out) for out, _ in outs]
    with PgVectorStore(pg.dsn, 384, table=table) as store:
        assert len(store) == 1
        client = lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=SemanticCache(store=store, secret=SECRET))
        msg = client.messages.create(model="claude-sonnet-5", max_tokens=32, messages=[{"role": "user", "content": QUESTION}], extra_headers=semantic_cacheable("tenant-x"))
        assert type(msg) is Message and msg.id in {c["id"] for c in children}
        assert client.latency.last is not None and client.latency.last.semantic_hit is True
        other = client.messages.create(model="claude-sonnet-5", max_tokens=32, messages=[{"role": "user", "content": QUESTION}], extra_headers=semantic_cacheable("tenant-y"))
        assert client.latency.last.semantic_hit is False and type(other) is Message
        assert len(store) == 2
        client.close()


def test_cache_types_through_openai(pg: PgServer, emu: Emulator) -> None:
    """A hit answered from PostgreSQL is the SDK's own ChatCompletion, equal to the stored one."""
    with make(pg, dim=384) as store:
        client = lk.OpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, semantic=SemanticCache(store=store, secret=SECRET))
        req: dict[str, Any] = {"model": "gpt-4o-mini", "max_tokens": 32, "messages": [{"role": "user", "content": QUESTION}]}
        first = client.chat.completions.create(**req, extra_headers=semantic_cacheable("t"))
        again = client.chat.completions.create(**req, extra_headers=semantic_cacheable("t"))
        assert type(again) is ChatCompletion and again == first
        assert client.latency.last is not None and client.latency.last.semantic_hit is True
        client.close()


def _everything(pg: PgServer, table: str) -> bytes:
    """Every column of every row of the store's two tables, as PostgreSQL's binary COPY writes them."""
    import psycopg

    out = bytearray()
    with psycopg.connect(pg.dsn) as conn, conn.cursor() as cur:
        for name in (table, f"{table}_used"):
            with cur.copy(f"COPY {name} TO STDOUT (FORMAT binary)") as copy:
                for block in copy:
                    out += block
    return bytes(out)


@pytest.mark.parametrize("encrypt", [True, False])
def test_holds_no_canary_when_encrypted(pg: PgServer, emu: Emulator, encrypt: bool) -> None:
    """Two caches sharing the table with encryption on: no canary of instructions, system prompt, question
    or scope in any row (raw, hex, compressed), and they still share answers; unencrypted (the control),
    the echoed instructions are there."""
    with make(pg, dim=384) as store:
        secret = b"pg-canary-secret-0123456789abcdef"
        one = SemanticCache(store=store, secret=secret, encrypt=encrypt)
        two = SemanticCache(store=store, secret=secret, encrypt=encrypt)
        question = f"What does {CANARIES['question']} mean for my order?"
        clients = [
            lk.OpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, semantic=one),
            lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=one),
            lk.OpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, semantic=two),
            lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0, semantic=two),
        ]
        canary_calls(clients[0], clients[1], question)
        canary_calls(clients[2], clients[3], question.lower())
        assert [r.semantic_hit for r in clients[2].latency.calls + clients[3].latency.calls] == [True, True, True]
        found = {name for name, canary in CANARIES.items() if holds(_everything(pg, store.table), canary)}
        assert found == set() if encrypt else {"instructions", "scope"} <= found
        for client in clients:
            client.close()


def test_a_pool_passed_in_is_used_and_left_open(pg: PgServer) -> None:
    """With the caller's pool (not autocommit), lookups set their HNSW settings per transaction and close() leaves the pool open."""
    from psycopg_pool import ConnectionPool

    with ConnectionPool(pg.dsn, min_size=1, max_size=2, open=True) as pool:
        s = PgVectorStore(pool, DIM, table=f"t_{uuid.uuid4().hex[:12]}", exact_limit=2)
        for i in range(5):  # above exact_limit: the HNSW branch, with SET LOCAL hnsw.ef_search
            s.add(("s", b"fp"), unit(20 + i), f"e{i}".encode(), {})
        hit = s.search(("s", b"fp"), unit(22), 0.99)
        assert hit is not None and hit.payload == b"e2"
        s.close()
        with pool.connection() as conn:
            assert conn.execute("SHOW statement_timeout").fetchone() == ("0",)  # the store set it LOCAL only
            assert conn.execute("SELECT count(*) FROM " + s.table).fetchone() == (5,)


def test_validation_and_dimension_check(pg: PgServer) -> None:
    """Bad names and settings are refused; a table made for another dimension is named in the error."""
    with pytest.raises(ValueError, match="table must be"):
        PgVectorStore(pg.dsn, DIM, table="x; DROP TABLE y")
    with pytest.raises(ValueError, match="m=1"):
        PgVectorStore(pg.dsn, DIM, m=1)
    with pytest.raises(ValueError, match="dsn_or_pool"):
        PgVectorStore(42, DIM)
    with make(pg) as s:
        s.add(("s", b"fp"), unit(1), b"x", {})
        with PgVectorStore(pg.dsn, DIM + 1, table=s.table) as wrong:
            with pytest.raises(RuntimeError, match=rf"vector\({DIM + 1}\)"):
                wrong.search(("s", b"fp"), unit(1, DIM + 1), 0.5)


def test_cli_init_creates_the_schema(pg: PgServer, capsys: pytest.CaptureFixture[str]) -> None:
    """``latencykit semantic init --dsn`` creates the extension, tables and indexes, idempotently."""
    from latencykit.cli import main

    table = f"t_{uuid.uuid4().hex[:12]}"
    for _ in range(2):
        assert main(["semantic", "init", "--dsn", pg.dsn, "--dim", "24", "--table", table]) == 0
    out = capsys.readouterr().out
    assert table in out and "pgvector" in out
    with PgVectorStore(pg.dsn, 24, table=table, create=False) as s:
        indexes = {r[0] for r in rows(pg, f"SELECT indexdef FROM pg_indexes WHERE tablename = '{table}'")}
        assert any("hnsw (embedding vector_cosine_ops)" in i for i in indexes)
        assert any("(scope, fingerprint, vkey)" in i for i in indexes)
        assert len(s) == 0
    assert main(["semantic", "init", "--dsn", "host=127.0.0.1 port=1 connect_timeout=1", "--dim", "8"]) == 1
    capsys.readouterr()
    # a table name the store refuses is bad input, as argparse's own refusals: exit 2, one line, nothing sent
    assert main(["semantic", "init", "--dsn", pg.dsn, "--dim", "8", "--table", "a;drop"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "table must be a name or schema.name" in err and "'a;drop'" in err


def test_odd_scopes_are_stored_safely(store: PgVectorStore, pg: PgServer, emu: Emulator) -> None:
    """NUL, newline, 10 000 characters, a lone surrogate: each a scope of its own, as in the other stores (psycopg
    refused the NUL and the surrogate, and the 10 000 characters outgrew a B-tree row); the column holds the
    plain scopes as given and a hash for the rest."""
    from _odd_scopes import GONE, SCOPES, check_cache_scopes, check_scopes

    check_scopes(store, DIM)
    column = sorted(r[0] for r in rows(pg, f"SELECT scope FROM {store.table}"))
    plain = ["a", "a\ufffd", "acme", "line", "line\nbreak"]
    assert column == sorted(plain + [stored_scope(s) for s in SCOPES if s not in GONE and s not in plain])
    assert all(c in plain or (c.startswith("sha256:") and len(c) == 71) for c in column)
    with make(pg, 384) as shared:
        check_cache_scopes(emu.base_url, lambda: SemanticCache(store=shared, secret=SECRET, encrypt=False))


def test_server_stops_by_pid() -> None:
    """The fixture's server leaves no process and no folder behind."""
    server = PgServer()
    pid, folder = server.proc.pid if server.proc else -1, server.dir
    server.stop()
    assert not Path(f"/proc/{pid}").exists() and not folder.exists()


def test_a_dead_server_costs_one_call_its_pool_timeout_not_every_call(emu: Emulator, caplog: pytest.LogCaptureFixture) -> None:
    """PostgreSQL gone (nothing listens at the DSN's port): the first marked call waits the pool's ``timeout``
    and answers from the provider; the next ones skip the paused cache at once, and nothing raises."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = PgVectorStore(f"postgresql://latencykit@127.0.0.1:{port}/none", 8, timeout=0.5)
    cache = SemanticCache(lk.semantic.HashedEmbedder(8), store=store)
    client = lk.OpenAI(base_url=emu.base_url + "/v1", api_key="sk-test", max_retries=0, semantic=cache)
    ask = {"model": "gpt-4o-mini", "max_tokens": 8, "messages": [{"role": "user", "content": "Where is my order?"}]}
    try:
        t0 = time.perf_counter()
        client.chat.completions.create(**ask, extra_headers=semantic_cacheable("shop"))
        first = time.perf_counter() - t0
        for _ in range(3):
            client.chat.completions.create(**ask, extra_headers=semantic_cacheable("shop"))
            assert client.latency.last.semantic_hit is None
        stats = cache.stats()
    finally:
        client.close()
        store.close()
    assert first >= 0.5  # the one call that asked the store waited for its pool
    assert (stats.store_errors, stats.skipped["store_unavailable"], stats.entries) == (1, 3, None)
    assert any("PgVectorStore failed (PoolTimeout" in r.getMessage() for r in caplog.records if r.name == "latencykit")
