"""Where the semantic cache meets the wire: an HTTP transport in front of the client's own.

A latencykit client with ``semantic=`` sends its model calls through a twin SDK client
(`semantic_client`) whose HTTP client has `SemanticTransport` (or the async one). For each
request the transport removes the latencykit mark header, asks the cache whether the call
is eligible, embeds the newest user message and looks it up:

- hit: it answers with the stored response body (the provider's own SSE stream) at once,
  so the SDK parses it into its own types — ``Message``, ``ChatCompletion``, ``Response``,
  ``Stream`` / ``AsyncStream`` events, the ``.stream()`` helpers — and latencykit times it
  like any call (its TTFT includes the embedding and the lookup);
- miss: it sends the request through the client's original HTTP client (same pool,
  hooks, auth) and tees the response body; once the body was read to the end and is a
  complete, error-free answer, it is stored.

The call's `CallRecord` gets ``semantic_hit`` (``True`` / ``False``; ``None`` when the
cache stayed out) and ``extra["semantic_similarity"]`` on a hit. Any failure inside the
cache is logged and the request goes to the provider unchanged.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, Optional, Protocol

import httpx2

from ..core._hooks import current_record
from ._embedders import HashedEmbedder, normalize_rows
from ._request import Pending
from ._store import MemoryStore, StoreHit
from ._options import HEADER

__all__ = ["SemanticTransport", "AsyncSemanticTransport", "semantic_client"]

logger = logging.getLogger("latencykit")

_TWIN_ATTR = "_lk_semantic_twin"
INLINE_EMBED_CHARS = 2048
"""An async client's `HashedEmbedder` embeds a question up to this long on the event loop (~0.8 ms),
a longer one in a worker thread (20 000 characters take ~8 ms)."""
_DROPPED_RESPONSE_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class _Policy(Protocol):
    """What the transport asks of the cache (`SemanticCache`, which hands it out in ``client_for``)."""

    embedder: Any
    store: Any
    max_answer_bytes: int

    def plan(self, path: str, body: bytes, mark: Optional[str]) -> Optional[Pending]: ...
    def lookup(self, pending: Pending) -> Optional[StoreHit]: ...
    def store_answer(self, pending: Pending, body: bytes) -> bool: ...
    def answer_bytes(self, hit: StoreHit) -> bytes: ...


def _bind(embedder: Any, client: Any) -> Any:
    bound = getattr(embedder, "bound", None)
    return bound(client) if callable(bound) else embedder


class _Shared:
    """What the sync and async transports share: planning, marking the record, building responses."""

    def __init__(self, cache: _Policy, http: Any, embedder: Any) -> None:
        self.cache = cache
        self.http = http
        self.embedder = embedder

    def _plan(self, request: httpx2.Request) -> Optional[Pending]:
        mark = request.headers.get(HEADER)
        if mark is not None:
            del request.headers[HEADER]
        for key, value in self.http.headers.items():  # the original client's own defaults
            if key not in request.headers:
                request.headers[key] = value
        try:
            return self.cache.plan(request.url.path, request.content, mark)
        except Exception:
            logger.debug("latencykit: semantic cache planning failed; sending the request", exc_info=True)
            return None

    def _embedding_of(self, text: str) -> Any:
        return normalize_rows(self.embedder([text]))[0]

    def _embed_and_look_up(self, pending: Pending) -> Optional[StoreHit]:
        if pending.vector is None:
            pending.vector = self._embedding_of(pending.query.text)
        return self.cache.lookup(pending)

    def _answer(self, hit: Optional[StoreHit], request: httpx2.Request) -> Optional[httpx2.Response]:
        """The replayed response on a hit (and the call's record marked either way)."""
        rec = current_record()
        if rec is not None:
            rec.semantic_hit = hit is not None
            if hit is not None:
                rec.extra["semantic_similarity"] = round(hit.similarity, 4)
        if hit is None:
            return None
        body = self.cache.answer_bytes(hit)
        return httpx2.Response(200, headers={"content-type": "text/event-stream; charset=utf-8"}, content=body, request=request)

    def _store(self, pending: Optional[Pending]) -> Optional[Callable[[bytes], None]]:
        if pending is None or pending.vector is None:
            return None
        cache = self.cache

        def store(body: bytes) -> None:
            try:
                cache.store_answer(pending, body)
            except Exception:
                logger.debug("latencykit: could not store a semantic cache entry", exc_info=True)

        return store

    def _wrap(self, response: httpx2.Response, request: httpx2.Request, stream: Any) -> httpx2.Response:
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _DROPPED_RESPONSE_HEADERS]
        return httpx2.Response(response.status_code, headers=headers, stream=stream, request=request, extensions=response.extensions)


class _Tee(httpx2.SyncByteStream):
    """The response body on its way to the SDK, kept to be stored when it is closed.

    The SDK may stop reading at the terminal event (OpenAI's ``[DONE]``), so the end of the
    body is not required; `SemanticCache.store_answer` keeps only a body that holds the
    terminal event and no error event, so a stream the caller abandoned is never stored.
    """

    def __init__(self, response: httpx2.Response, store: Optional[Callable[[bytes], None]], limit: int) -> None:
        self._response = response
        self._store = store
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._response.iter_bytes():
            if self._store is not None:
                self._size += len(chunk)
                if self._size > self._limit:
                    self._store, self._parts = None, []
                else:
                    self._parts.append(chunk)
            yield chunk

    def close(self) -> None:
        try:
            self._response.close()
        finally:
            store, self._store = self._store, None
            if store is not None:  # the cache keeps only a body that holds its terminal event
                store(b"".join(self._parts))
            self._parts = []


class _AsyncTee(httpx2.AsyncByteStream):
    """Async twin of `_Tee` (its ``store`` is awaited: it may run in a worker thread)."""

    def __init__(self, response: httpx2.Response, store: Optional[Callable[[bytes], Awaitable[None]]], limit: int) -> None:
        self._response = response
        self._store = store
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._response.aiter_bytes():
            if self._store is not None:
                self._size += len(chunk)
                if self._size > self._limit:
                    self._store, self._parts = None, []
                else:
                    self._parts.append(chunk)
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._response.aclose()
        finally:
            store, self._store = self._store, None
            if store is not None:  # the cache keeps only a body that holds its terminal event
                await store(b"".join(self._parts))
            self._parts = []


class SemanticTransport(_Shared, httpx2.BaseTransport):
    """Sync transport: answer from the cache, or send through the original HTTP client and keep the answer."""

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        pending = self._plan(request)
        if pending is not None:
            try:
                replay = self._answer(self._embed_and_look_up(pending), request)
            except Exception:
                logger.debug("latencykit: semantic cache lookup failed; sending the request", exc_info=True)
                pending, replay = None, None
            if replay is not None:
                return replay
        response = self.http.send(request, stream=True, follow_redirects=False)
        store = self._store(pending) if response.status_code == 200 else None
        return self._wrap(response, request, _Tee(response, store, self.cache.max_answer_bytes))

    def close(self) -> None:
        """The original HTTP client belongs to the latencykit client, which closes it."""


class AsyncSemanticTransport(_Shared, httpx2.AsyncBaseTransport):
    """Async twin of `SemanticTransport`. What could block runs off the event loop, so the other
    calls in flight go on meanwhile: the embedder's ``aembed`` is awaited when it has one; a sync
    embedder runs in a worker thread, except `HashedEmbedder` on a question of up to
    `INLINE_EMBED_CHARS` (in process, under a millisecond); and so do the store's calls (a Redis
    or PostgreSQL round trip, or the store's timeout when its server is gone), except a
    `MemoryStore`'s."""

    def __init__(self, cache: _Policy, http: Any, embedder: Any) -> None:
        super().__init__(cache, http, embedder)
        self._store_inline = type(cache.store) is MemoryStore  # exactly: a subclass may do I/O
        self._aembed = getattr(embedder, "aembed", None)
        self._embed_inline = self._aembed is None and type(embedder) is HashedEmbedder

    async def _look_up(self, pending: Pending) -> Optional[StoreHit]:
        if self._aembed is not None:
            pending.vector = normalize_rows(await self._aembed([pending.query.text]))[0]
        elif self._embed_inline and len(pending.query.text) <= INLINE_EMBED_CHARS:
            pending.vector = self._embedding_of(pending.query.text)
        if self._store_inline and pending.vector is not None:
            return self.cache.lookup(pending)
        return await asyncio.to_thread(self._embed_and_look_up, pending)  # one hop for whatever is left

    def _astore(self, pending: Optional[Pending]) -> Optional[Callable[[bytes], Awaitable[None]]]:
        store = self._store(pending)
        if store is None:
            return None
        inline = self._store_inline

        async def astore(body: bytes) -> None:
            if inline:
                store(body)
            else:
                await asyncio.to_thread(store, body)

        return astore

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        pending = self._plan(request)
        if pending is not None:
            try:
                replay = self._answer(await self._look_up(pending), request)
            except Exception:
                logger.debug("latencykit: semantic cache lookup failed; sending the request", exc_info=True)
                pending, replay = None, None
            if replay is not None:
                return replay
        response = await self.http.send(request, stream=True, follow_redirects=False)
        store = self._astore(pending) if response.status_code == 200 else None
        return self._wrap(response, request, _AsyncTee(response, store, self.cache.max_answer_bytes))

    async def aclose(self) -> None:
        """The original HTTP client belongs to the latencykit client, which closes it."""


def semantic_client(cache: _Policy, client: Any) -> Any:
    """The twin of latencykit ``client`` that sends through the semantic cache (made once per client).

    It shares the client's options and credentials; its HTTP client only holds the
    transport, which sends misses through ``client``'s own HTTP client. With latencykit
    retries on, its SDK retries are off (as for the plain twin).
    """
    twin = client.__dict__.get(_TWIN_ATTR)
    if twin is not None:
        return twin
    http = client._client
    embedder = _bind(cache.embedder, client)
    options: dict[str, Any] = {"follow_redirects": http.follow_redirects, "timeout": http.timeout}
    if isinstance(http, httpx2.AsyncClient):
        outer: Any = httpx2.AsyncClient(transport=AsyncSemanticTransport(cache, http, embedder), **options)
    else:
        outer = httpx2.Client(transport=SemanticTransport(cache, http, embedder), **options)
    copy_kwargs: dict[str, Any] = {"http_client": outer}
    if client._lk.retry is not None:
        copy_kwargs["max_retries"] = 0
    twin = type(client)._lk_sdk_base.copy(client, **copy_kwargs)
    client.__dict__[_TWIN_ATTR] = twin
    return twin
