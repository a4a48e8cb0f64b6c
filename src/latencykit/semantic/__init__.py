"""Optional semantic response cache: the same question in other words, answered from cache.

Owns: request fingerprinting for the cache (``_request``), embedders (``_embedders``), vector
storage (``_store``: the `VectorStore` interface and `MemoryStore`; ``_redis``: `RedisStore`;
``_pgvector``: `PgVectorStore`, which imports psycopg when first made, its SQL in ``_pgsql``),
the cache policy (``_cache``), the per-call mark (``_options``) and the HTTP transport that
replays stored answers (``_transport``). `SemanticCache` implements ``core._hooks.AnswerHook``: the clients
ask it for the SDK client to send through and know nothing else of this package.

Layer: above ``providers``, beside ``vllm`` (neither imports the other). May import ``core``,
``telemetry`` and ``providers``; only ``bench``, the CLI and the package face import it.

```python
import latencykit as lk

client = lk.OpenAI(semantic=lk.SemanticCache())           # off for every call by default
client.chat.completions.create(model=..., messages=[...], extra_headers=lk.semantic_cacheable("tenant-42"))
client.latency.last.semantic_hit                           # True when answered from the cache
```

See ``docs/semantic.md``.
"""

from __future__ import annotations

from ._cache import SemanticCache, SemanticStats
from ._embedders import Embedder, FastEmbedEmbedder, HashedEmbedder, OpenAIEmbedder, SentenceTransformerEmbedder
from ._options import HEADER, semantic_cacheable, semantic_skip
from ._pgvector import PgVectorStore
from ._redis import RedisStore
from ._store import MemoryStore, StoreHit, VectorStore

__all__ = [
    "SemanticCache",
    "SemanticStats",
    "semantic_cacheable",
    "semantic_skip",
    "HEADER",
    "Embedder",
    "HashedEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "FastEmbedEmbedder",
    "VectorStore",
    "MemoryStore",
    "RedisStore",
    "PgVectorStore",
    "StoreHit",
]

