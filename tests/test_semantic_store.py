"""MemoryStore and SemanticCache policy: threshold, scopes, TTL, LRU and byte bounds, persistence."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import latencykit as lk
from latencykit.semantic import HashedEmbedder, MemoryStore, SemanticCache, semantic_cacheable, semantic_skip
from latencykit.semantic._options import HEADER, parse_mark


class FakeClock:
    """A settable clock for TTL tests."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def unit(rng: np.random.Generator, dim: int = 32) -> Any:
    v = rng.standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def near(v: Any, cos: float, rng: np.random.Generator) -> Any:
    """A unit vector at cosine ``cos`` from unit vector ``v``."""
    r = rng.standard_normal(v.shape[0]).astype(np.float32)
    r -= (r @ v) * v
    r /= np.linalg.norm(r)
    return (cos * v + np.sqrt(1 - cos**2) * r).astype(np.float32)


def test_threshold_decides_hit() -> None:
    """An entry at cosine 0.95 is found at threshold 0.9 and not at 0.97."""
    rng = np.random.default_rng(1)
    store = MemoryStore(32)
    v = unit(rng)
    store.add(("s", b"fp"), v, b"answer", {})
    q = near(v, 0.95, rng)
    hit = store.search(("s", b"fp"), q, 0.9)
    assert hit is not None and hit.payload == b"answer"
    assert hit.similarity == pytest.approx(0.95, abs=1e-4)
    assert store.search(("s", b"fp"), q, 0.97) is None


def test_best_match_wins() -> None:
    """Of several entries above the threshold, the most similar one is returned."""
    rng = np.random.default_rng(2)
    store = MemoryStore(32)
    v = unit(rng)
    for i, cos in enumerate((0.91, 0.99, 0.95)):
        store.add(("s", b"fp"), near(v, cos, rng), f"a{i}".encode(), {})
    hit = store.search(("s", b"fp"), v, 0.9)
    assert hit is not None and hit.payload == b"a1"


def test_partitions_never_mix() -> None:
    """The same vector under another scope or fingerprint is not found."""
    rng = np.random.default_rng(3)
    store = MemoryStore(32)
    v = unit(rng)
    store.add(("tenant-a", b"fp"), v, b"a", {})
    assert store.search(("tenant-b", b"fp"), v, 0.5) is None
    assert store.search(("tenant-a", b"other"), v, 0.5) is None
    assert store.search(("tenant-a", b"fp"), v, 0.5) is not None


def test_ttl_expires_entries() -> None:
    """An entry is returned before its TTL and never after; expired entries are dropped."""
    rng = np.random.default_rng(4)
    clock = FakeClock()
    store = MemoryStore(32, ttl=60, clock=clock)
    v = unit(rng)
    store.add(("s", b"fp"), v, b"a", {})
    clock.now += 59.9
    assert store.search(("s", b"fp"), v, 0.9) is not None
    clock.now += 0.2
    assert store.search(("s", b"fp"), v, 0.9) is None
    assert len(store) == 0 and store.expirations == 1


def test_purge_drops_expired() -> None:
    """purge() removes every expired entry at once and keeps the live ones."""
    rng = np.random.default_rng(5)
    clock = FakeClock()
    store = MemoryStore(32, ttl=10, clock=clock)
    for i in range(5):
        store.add((f"s{i}", b"fp"), unit(rng), b"old", {})
    clock.now += 11
    store.add(("s0", b"fp"), unit(rng), b"new", {})
    assert store.purge() == 5
    assert len(store) == 1


def test_lru_bound_on_entries() -> None:
    """Beyond max_entries the least recently *used* entry goes, across scopes."""
    rng = np.random.default_rng(6)
    store = MemoryStore(32, max_entries=3)
    vs = [unit(rng) for _ in range(4)]
    for i in range(3):
        store.add((f"s{i}", b"fp"), vs[i], f"a{i}".encode(), {})
    assert store.search(("s0", b"fp"), vs[0], 0.99) is not None  # s0 becomes most recent
    store.add(("s3", b"fp"), vs[3], b"a3", {})
    assert len(store) == 3 and store.evictions == 1
    assert store.search(("s1", b"fp"), vs[1], 0.99) is None  # s1 was least recently used
    assert store.search(("s0", b"fp"), vs[0], 0.99) is not None


def test_byte_bound() -> None:
    """The store stays within max_bytes, evicting the oldest answers."""
    rng = np.random.default_rng(7)
    store = MemoryStore(32, max_bytes=10_000)
    for i in range(20):
        store.add((f"s{i}", b"fp"), unit(rng), bytes(1000), {})
    assert store.nbytes <= 10_000
    assert 0 < len(store) < 20
    store.add(("big", b"fp"), unit(rng), bytes(20_000), {})  # larger than the budget: not stored
    assert "big" not in store.scopes()


def test_removal_keeps_rows_consistent() -> None:
    """After evictions in the middle of a partition every remaining entry is still found."""
    rng = np.random.default_rng(8)
    store = MemoryStore(32, max_entries=50)
    vs = [unit(rng) for _ in range(80)]
    for i, v in enumerate(vs):
        store.add(("s", b"fp"), v, str(i).encode(), {})
        if i % 3 == 0:
            store.search(("s", b"fp"), vs[i // 2], 0.999)  # shuffle the LRU order
    found = {int(h.payload) for v in vs if (h := store.search(("s", b"fp"), v, 0.999)) is not None}
    assert len(found) == len(store) == 50
    for i in found:
        hit = store.search(("s", b"fp"), vs[i], 0.999)
        assert hit is not None and hit.payload == str(i).encode()


def test_simhash_prefilter_matches_exact_scan() -> None:
    """Above exact_limit the SimHash prefilter finds the same best entry as a full scan."""
    rng = np.random.default_rng(9)
    dim = 64
    base = rng.standard_normal((3000, dim)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    small = MemoryStore(dim, exact_limit=100)
    exact = MemoryStore(dim, exact_limit=10_000)
    for i, v in enumerate(base):
        small.add(("s", b"fp"), v, str(i).encode(), {})
        exact.add(("s", b"fp"), v, str(i).encode(), {})
    agree = 0
    for i in range(200):
        q = near(base[i], 0.9, rng)
        a, b = small.search(("s", b"fp"), q, 0.8), exact.search(("s", b"fp"), q, 0.8)
        assert b is not None
        agree += a is not None and a.payload == b.payload
    assert agree == 200


def test_persistence_round_trip(tmp_path: Path) -> None:
    """save() then load() in a fresh cache returns the same answers, TTL ages carried over."""
    clock = FakeClock()
    cache = SemanticCache(secret=b"k" * 32, ttl=100, clock=clock, encrypt=False)  # the plain format (encrypted: test_semantic_guards)
    rng = np.random.default_rng(10)
    v = unit(rng, cache.store.dim)  # type: ignore[attr-defined]
    cache.store.add(("s", b"fp"), v, b"answer", {"api": "messages"})
    clock.now += 40
    path = tmp_path / "cache.npz"
    cache.save(path)
    with np.load(path, allow_pickle=False) as data:  # arrays and JSON only
        assert set(data.files) == {"vectors", "offsets", "payloads", "meta"}
        assert json.loads(bytes(data["meta"]))["entries"][0]["scope"] == "s"
    clock2 = FakeClock()
    fresh = SemanticCache(secret=b"k" * 32, ttl=100, clock=clock2, encrypt=False)
    assert fresh.load(path) == 1
    hit = fresh.store.search(("s", b"fp"), v, 0.99)
    assert hit is not None and hit.payload == b"answer" and hit.meta == {"api": "messages"}
    clock2.now += 61  # 40 s old when saved: expires 60 s after loading
    assert fresh.store.search(("s", b"fp"), v, 0.99) is None


def test_persistence_refuses_other_secret_and_random_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file made with another secret is refused (encrypted or not); saving with a per-process key is refused."""
    for encrypt in (True, False):
        cache = SemanticCache(secret=b"a" * 32, encrypt=encrypt)
        cache.save(tmp_path / "c.npz")
        with pytest.raises(ValueError, match="another fingerprint secret"):
            SemanticCache(secret=b"b" * 32, encrypt=encrypt).load(tmp_path / "c.npz")
    monkeypatch.delenv("LATENCYKIT_CACHE_SECRET", raising=False)
    with pytest.raises(ValueError, match="secret"):
        SemanticCache().save(tmp_path / "d.npz")


def test_concurrent_adds_and_searches_keep_scopes_apart() -> None:
    """Many threads storing and looking up under their own scope only ever see their own answers."""
    rng = np.random.default_rng(11)
    store = MemoryStore(32, max_entries=10_000)
    vectors = [unit(rng) for _ in range(50)]
    errors: list[str] = []

    def worker(t: int) -> None:
        scope = f"tenant-{t}"
        for i, v in enumerate(vectors):
            store.add((scope, b"fp"), v, f"{scope}:{i}".encode(), {})
            for j in range(i + 1):
                hit = store.search((scope, b"fp"), vectors[j], 0.999)
                if hit is None or not hit.payload.startswith(f"{scope}:".encode()):
                    errors.append(f"{scope} got {hit}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert store.scopes() == {f"tenant-{t}": 50 for t in range(8)}


def test_hashed_embedder_is_deterministic_and_normalized() -> None:
    """The same text gives the same unit vector in every embedder instance."""
    a, b = HashedEmbedder(), HashedEmbedder()
    va, vb = a(["Where is my parcel?"]), b(["Where is my parcel?"])
    assert va.shape == (1, 384) and va.dtype == np.float32
    assert np.array_equal(va, vb)
    assert float(np.linalg.norm(va[0])) == pytest.approx(1.0, abs=1e-5)


def test_marks() -> None:
    """The per-call mark is a plain extra_headers dict; scopes survive any characters."""
    mark = semantic_cacheable("tenant 42/ü;x=y")
    assert list(mark) == [HEADER]
    assert parse_mark(mark[HEADER]) == ("cacheable", "tenant 42/ü;x=y")
    assert parse_mark(semantic_skip()[HEADER]) == ("off", None)
    assert parse_mark("garbage") == ("none", None)
    with pytest.raises(ValueError, match="scope"):
        semantic_cacheable("")


def test_cache_validates_options() -> None:
    """Bad options raise ValueErrors naming the value."""
    with pytest.raises(ValueError, match="threshold"):
        SemanticCache(threshold=1.5)
    with pytest.raises(ValueError, match="default_scope"):
        SemanticCache(temperature_zero=True)
    with pytest.raises(ValueError, match="ttl"):
        MemoryStore(8, ttl=0)
    with pytest.raises(ValueError, match="semantic"):
        lk.OpenAI(api_key="x", semantic="yes")  # type: ignore[arg-type]


def _embeddings_handler(seen: list[Any]) -> Any:
    import httpx2

    def handle(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        seen.append(body)
        data = [{"object": "embedding", "index": i, "embedding": [float(i + 1), 0.0, 3.0]} for i in range(len(body["input"]))]
        return httpx2.Response(200, json={"object": "list", "data": data[::-1], "model": body["model"], "usage": {"prompt_tokens": 1, "total_tokens": 1}})

    return handle


def test_openai_embedder_sync_and_async() -> None:
    """OpenAIEmbedder calls embeddings.create through the SDK and returns unit rows in input order."""
    import asyncio

    import httpx2
    import openai

    from latencykit.semantic import OpenAIEmbedder

    seen: list[Any] = []
    client = openai.OpenAI(api_key="k", base_url="http://embed.test/v1", http_client=httpx2.Client(transport=httpx2.MockTransport(_embeddings_handler(seen))))
    emb = OpenAIEmbedder(model="text-embedding-3-small", dimensions=3).bound(client)
    rows = emb(["a", "b"])
    assert rows.shape == (2, 3)
    assert np.allclose(rows[0], np.array([1, 0, 3]) / np.sqrt(10), atol=1e-6)  # index order, not response order
    assert seen[0]["model"] == "text-embedding-3-small" and seen[0]["input"] == ["a", "b"] and seen[0]["dimensions"] == 3
    aclient = openai.AsyncOpenAI(api_key="k", base_url="http://embed.test/v1", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(_embeddings_handler(seen))))
    arows = asyncio.run(OpenAIEmbedder(aclient, dim=3).aembed(["x"]))
    assert np.allclose(arows[0], rows[0], atol=1e-6)
    with pytest.raises(ValueError, match="no client"):
        OpenAIEmbedder()(["a"])


@pytest.mark.parametrize("encrypt", [False, True])
def test_odd_scopes_are_stored_safely(emu: Any, tmp_path: Path, encrypt: bool) -> None:
    """NUL, newline, 10 000 characters, a lone surrogate: each a scope of its own, as in Redis and PostgreSQL
    (test_semantic_redis.py, test_semantic_pgvector*.py run the same check); listed and saved as given."""
    from _odd_scopes import GONE, SCOPES, check_cache_scopes, check_scopes

    store = MemoryStore(16)
    check_scopes(store, 16)
    kept = [s for s in SCOPES if s not in GONE]
    assert store.scopes() == {s: 1 for s in kept}  # the originals, not their stored form
    again = MemoryStore(16)
    assert again.loads(store.dumps()) == len(kept) and again.scopes() == store.scopes()
    shared = MemoryStore(384)
    check_cache_scopes(emu.base_url, lambda: SemanticCache(store=shared, secret=b"s" * 32, encrypt=encrypt))
    cache = SemanticCache(store=shared, secret=b"s" * 32, encrypt=encrypt)
    cache.save(tmp_path / "odd.npz")
    loaded = SemanticCache(secret=b"s" * 32, encrypt=encrypt)
    assert loaded.load(tmp_path / "odd.npz") == len(shared)


def test_redis_store_refuses_what_is_not_a_sync_redis_client_in_one_line() -> None:
    """A wrong first argument is said when the store is made, not as an AttributeError from its first call."""
    redis = pytest.importorskip("redis")
    from latencykit.semantic import RedisStore

    with pytest.raises(ValueError, match=r"^RedisStore takes a redis\.Redis client or a redis://, rediss:// or unix:// URL, got 'localhost:6379'$"):
        RedisStore("localhost:6379", 8)
    with pytest.raises(TypeError, match=r"^RedisStore takes a redis\.Redis client or a redis:// URL, got dict$"):
        RedisStore({"host": "localhost"}, 8)
    import redis.asyncio

    with pytest.raises(TypeError, match=r"not redis\.asyncio's"):
        RedisStore(redis.asyncio.Redis(), 8)  # no connection is made before a command
    store = RedisStore(redis.Redis.from_url("redis://127.0.0.1:1/0"), 8)  # made lazily: nothing connects yet
    assert store.dim == 8
