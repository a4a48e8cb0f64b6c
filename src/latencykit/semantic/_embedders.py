"""Embedders: callables from a batch of texts to a matrix of normalized float32 rows.

Any callable ``(Sequence[str]) -> array (n, dim)`` works; the classes here add ``dim``
(needed to size the store), ``default_threshold`` (the cosine at which two texts count as
the same question for that model, measured by ``benchmarks/semantic.py``) and, where the
backend has one, an async ``aembed``.

An embedder may also say what two questions must share exactly: ``match_kind`` (a
versioned name) and ``match_key(text)``; the cache mixes a keyed digest of that key into
the partition it searches, so a hit needs equal keys whatever the cosine.

- `HashedEmbedder`: hashed character n-grams and words, no model, deterministic across
  processes. Lexical: it finds rewordings that share words, not paraphrases in other
  words, so by default (``exact=True``) it matches only the folded text: repeats that
  differ in case, punctuation or spacing.
- `OpenAIEmbedder`: the embeddings API, through the client the cache is attached to (or
  one you pass).
- `SentenceTransformerEmbedder` / `FastEmbedEmbedder`: local models when those packages
  are installed (imported lazily).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import unicodedata
from typing import Any, Optional, Protocol, Sequence, runtime_checkable

import numpy as np
import numpy.typing as npt

from ._guards import FOLD_VERSION, fold

__all__ = [
    "Embedder",
    "HashedEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "FastEmbedEmbedder",
    "normalize_rows",
]

Matrix = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """``embedder(texts) -> (len(texts), dim)`` float32 matrix."""

    def __call__(self, texts: Sequence[str]) -> Any: ...


def normalize_rows(matrix: Any) -> Matrix:
    """``matrix`` as float32 with unit-length rows (zero rows stay zero)."""
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim == 1:
        m = m.reshape(1, -1)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Matrix = m / norms
    return out


_WORD = re.compile(r"[^\W_]+", re.UNICODE)


class HashedEmbedder:
    """Deterministic embedding of character n-grams and words, hashed into ``dim`` signed buckets.

    Text is NFKC-normalized and lower-cased; each word contributes its character 3- and
    4-grams (with boundary marks) and itself (weight ``word_weight``), each pair of adjacent
    words one feature, all with sublinear term frequency. BLAKE2b picks the bucket and the sign, so the vectors are the same in every
    process. About 20 µs per short question.

    ``exact=True`` (the default): the cache answers only a question whose folded text
    (`fold`: case, sentence punctuation and spacing folded; letters, digits and symbols
    exact) equals the stored one's — "What is the return policy?" matches "what is the
    return policy", never "... policy for size 44" from "... size 43", however long the
    question. The cache mixes a keyed digest of the folded text into the partition a
    lookup searches, and the vector is that of the folded text, so this holds by
    construction, at any threshold. ``exact=False``: plain lexical similarity at the
    threshold (rewordings that share most words; see ``default_threshold``).

    ``key``: keys the bucket hash (BLAKE2b), so a stored vector does not give away which
    n-grams it holds to someone without the key; the cache sets one derived from its
    secret when it encrypts (`keyed`).
    """

    default_threshold = 0.97
    """Used by ``exact=False`` only: on the project's paraphrase set no threshold gives this
    lexical embedder a precision above 0.55, near-misses reach 0.966 ("convert Celsius to
    Fahrenheit" / "... Fahrenheit to Celsius"), and a one-word change in a long question
    reaches 0.98 — hence ``exact=True`` by default."""

    def __init__(
        self, dim: int = 384, ngrams: Sequence[int] = (3, 4), word_weight: float = 2.0, *, exact: bool = True, key: Optional[bytes] = None
    ) -> None:
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 8:
            raise ValueError(f"dim must be an int >= 8, got {dim!r}")
        if not ngrams or any(not isinstance(n, int) or n < 1 for n in ngrams):
            raise ValueError(f"ngrams must be positive ints, got {ngrams!r}")
        if key is not None and not (isinstance(key, bytes) and 16 <= len(key) <= 64):
            raise ValueError(f"key must be 16 to 64 bytes or None, got {key!r}")
        self.dim = dim
        self.ngrams = tuple(ngrams)
        self.word_weight = float(word_weight)
        self.exact = bool(exact)
        self.key = key
        self._cache: dict[str, tuple[int, float]] = {}

    @property
    def match_kind(self) -> Optional[str]:
        """What `match_key` returns (versioned), ``None`` when the embedder asks for no exact match."""
        return FOLD_VERSION if self.exact else None

    def match_key(self, text: str) -> Optional[str]:
        """What two questions must share exactly for a hit: the folded text (``exact=True``), else ``None``."""
        return fold(text) if self.exact else None

    def keyed(self, key: bytes) -> "HashedEmbedder":
        """This embedder with its bucket hash keyed by ``key`` (itself when it already has a key)."""
        if self.key is not None:
            return self
        return HashedEmbedder(self.dim, self.ngrams, self.word_weight, exact=self.exact, key=key)

    def _slot(self, feature: str) -> tuple[int, float]:
        hit = self._cache.get(feature)
        if hit is None:
            digest = hashlib.blake2b(feature.encode(), digest_size=8, key=self.key or b"").digest()
            h = int.from_bytes(digest, "little")
            hit = (h % self.dim, 1.0 if (h >> 63) & 1 else -1.0)
            if len(self._cache) < 200_000:
                self._cache[feature] = hit
        return hit

    def _features(self, text: str) -> dict[str, float]:
        counts: dict[str, float] = {}
        words = _WORD.findall(unicodedata.normalize("NFKC", text).lower())
        for first, second in zip(words, words[1:]):  # word order: "C to F" is not "F to C"
            key = f"b:{first} {second}"
            counts[key] = counts.get(key, 0.0) + 1.0
        for word in words:
            counts["w:" + word] = counts.get("w:" + word, 0.0) + self.word_weight
            marked = f"<{word}>"
            for n in self.ngrams:
                for i in range(max(len(marked) - n + 1, 1)):
                    g = marked[i : i + n]
                    counts[g] = counts.get(g, 0.0) + 1.0
        return counts

    def __call__(self, texts: Sequence[str]) -> Matrix:
        """One unit row per text."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, count in self._features(fold(text) if self.exact else text).items():
                slot, sign = self._slot(feature)
                out[row, slot] += sign * (1.0 + math.log(count))
        return normalize_rows(out)


class OpenAIEmbedder:
    """The OpenAI embeddings API (``client.embeddings.create``).

    ``client=None`` uses the OpenAI client the `SemanticCache` is attached to: the request
    goes over the same connection pool and credentials. ``dim`` must match the model
    (1536 for ``text-embedding-3-small``, or what ``dimensions=`` asks for).
    """

    default_threshold = 0.90

    def __init__(self, client: Any = None, *, model: str = "text-embedding-3-small", dimensions: Optional[int] = None, dim: Optional[int] = None) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError(f"model must be a non-empty str, got {model!r}")
        self.client = client
        self.model = model
        self.dimensions = dimensions
        self.dim = dim or dimensions or 1536

    def bound(self, client: Any) -> "OpenAIEmbedder":
        """This embedder, using ``client`` when it was given none."""
        if self.client is not None:
            return self
        return OpenAIEmbedder(client, model=self.model, dimensions=self.dimensions, dim=self.dim)

    def _kwargs(self, texts: Sequence[str]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model, "input": list(texts)}
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
        return kwargs

    @staticmethod
    def _matrix(response: Any) -> Matrix:
        rows = sorted(response.data, key=lambda d: d.index)
        return normalize_rows(np.array([r.embedding for r in rows], dtype=np.float32))

    def __call__(self, texts: Sequence[str]) -> Matrix:
        """Embed with a sync client."""
        if self.client is None:
            raise ValueError("OpenAIEmbedder has no client: pass one, or attach the cache to an OpenAI client")
        return self._matrix(self.client.embeddings.create(**self._kwargs(texts)))

    async def aembed(self, texts: Sequence[str]) -> Matrix:
        """Embed with an async client (a sync one runs in a worker thread)."""
        if self.client is None:
            raise ValueError("OpenAIEmbedder has no client: pass one, or attach the cache to an OpenAI client")
        result = self.client.embeddings.create(**self._kwargs(texts))
        if asyncio.iscoroutine(result):
            return self._matrix(await result)
        return self._matrix(result)


def _missing(package: str, exc: ImportError) -> ImportError:
    command = 'pip install "latencykit[semantic]"' if package == "sentence-transformers" else f"pip install {package}"
    err = ImportError(f"{package} is not installed: {command}")
    err.__cause__ = exc
    return err


class SentenceTransformerEmbedder:
    """A sentence-transformers model (``all-MiniLM-L6-v2`` by default; a local path works offline)."""

    default_threshold = 0.80

    def __init__(self, model: Any = "sentence-transformers/all-MiniLM-L6-v2", *, device: str = "cpu", batch_size: int = 32) -> None:
        try:
            from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found,unused-ignore]
        except ImportError as exc:
            raise _missing("sentence-transformers", exc) from exc
        self.model = model if not isinstance(model, str) else SentenceTransformer(model, device=device)
        self.batch_size = batch_size
        get_dim = getattr(self.model, "get_sentence_embedding_dimension", None)
        self.dim = int(get_dim()) if callable(get_dim) else int(self(["x"]).shape[1])

    def __call__(self, texts: Sequence[str]) -> Matrix:
        """One unit row per text."""
        vectors = self.model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return normalize_rows(vectors)

    async def aembed(self, texts: Sequence[str]) -> Matrix:
        """Embed in a worker thread, off the event loop."""
        return await asyncio.to_thread(self, texts)


class FastEmbedEmbedder:
    """A fastembed (ONNX) model, ``BAAI/bge-small-en-v1.5`` by default."""

    default_threshold = 0.85

    def __init__(self, model: str = "BAAI/bge-small-en-v1.5", **options: Any) -> None:
        try:
            from fastembed import TextEmbedding  # type: ignore[import-not-found,unused-ignore]
        except ImportError as exc:
            raise _missing("fastembed", exc) from exc
        self.model = TextEmbedding(model_name=model, **options)
        self.dim = int(self(["x"]).shape[1])

    def __call__(self, texts: Sequence[str]) -> Matrix:
        """One unit row per text."""
        return normalize_rows(np.stack(list(self.model.embed(list(texts)))))

    async def aembed(self, texts: Sequence[str]) -> Matrix:
        """Embed in a worker thread, off the event loop."""
        return await asyncio.to_thread(self, texts)
