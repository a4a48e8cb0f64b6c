"""`FastEvents`: the SDKs' own SSE decoding, with the common events read in one step.

An SDK stream turns the response body into ``ServerSentEvent`` objects through its
``SSEDecoder``: every line is decoded and handed to ``decode()`` one at a time, through two
or three generator layers (``_aiter_chunks``, ``aiter_bytes``, ``_decode_lines``). On a
30-token Anthropic stream that is ~75 µs, 5 % of the client's CPU per call over a socket (this
module: ~62 µs), for events that nearly all have one of two shapes: ``event: NAME`` + ``data:
JSON`` (Anthropic, the Responses API) or ``data: JSON`` (Chat Completions).

`FastEvents` stands in for one stream's decoder, through the SDK's own plug point for
decoders (``stream._decoder``: ``iter_bytes`` / ``aiter_bytes``, as the Bedrock client plugs in
its AWS event-stream decoder). The byte source and its error handling stay the SDK's. It reads
every block of an ``\\n``-only body up to its blank line at once, and builds the SDK's own
``ServerSentEvent`` directly where the block has one of the two shapes. Everything else goes
through the SDK decoder itself, so the result is the SDK's to the event:

- a block with any other line (a comment, ``id:``, ``retry:``, several ``data:`` lines, a
  field without a colon, bytes that are not UTF-8): each of its lines to the SDK decoder's
  ``decode()``, exactly as the SDK splits them;
- a body with a ``\\r`` in it: from that network chunk on, the SDK decoder's own
  ``iter_bytes`` / ``aiter_bytes`` (the bytes handed over start right after a block, where
  the SDK's own state is the same); likewise once an ``id:`` field was read (`_block`);
- the bytes after the last blank line: line by line to ``decode()``.

Events come out when their block's last byte arrives, as from the SDK decoder.

Whether an installed SDK's decoder agrees is *checked*, not assumed: once per decoder class,
when the first client using it is made (`check_ahead`; else at its first stream), both decode
the same bodies (the two shapes, the odd fields above, ``\\r\\n`` and ``\\r`` line ends, a
partial last line; each body whole, byte by byte and in 7-byte pieces, sync and async), and
every event's type and attributes must match, and the moment it comes out: how many chunks
had been read (`_check`).
A decoder of another make (Bedrock's), an SDK whose decoder or event differs, or anything
that fails the check keeps the SDK's own decoding: nothing changes but the speed.

``keep``: a hook that sees each event's name and data as the event goes on, in order (`ChatTap`
takes its own usage-only chunk out there, and the ``"usage":null`` the caller did not ask for).
"""

from __future__ import annotations

import itertools
import logging
import sys
from typing import Any, AsyncIterator, Callable, Iterator, Optional

__all__ = ["FastEvents", "fast_events", "check_ahead", "through", "Keep"]

logger = logging.getLogger("latencykit")

Keep = Callable[[Optional[str], str], Optional[str]]
"""``keep(event, data)``: the data the event goes on with (``data`` itself, or a changed
string), or ``None`` to drop it."""

Parse = Callable[[bytes, int, int, Any], Any]
"""``parse(buf, start, end, sdk)``: the SDK's ``ServerSentEvent`` for the block ``buf[start:end]``
(its blank line after it) where the block has one of the two common shapes, else ``None``
(``sdk``: the SDK decoder, whose last event id the event carries)."""


class FastEvents:
    """One stream's SSE decoder: the SDK decoder ``sdk``, with its common events built at once
    by ``parse`` (made for the SDK's event class by `_check`).

    Attributes other than the two methods are the SDK decoder's (its ``decode``, its state).
    """

    __slots__ = ("_sdk", "_parse", "_keep")

    def __init__(self, sdk: Any, parse: Parse, keep: Optional[Keep] = None) -> None:
        self._sdk = sdk
        self._parse = parse
        self._keep = keep

    def __getattr__(self, name: str) -> Any:
        if name in FastEvents.__slots__:  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self._sdk, name)

    # The two twins below share everything but their loops: a chunk that completes blocks is
    # read block by block (`_parse`, else `_block`), each event going on as it is read, so the
    # hook (`keep`) and the caller see them in order, one at a time, as from the SDK decoder.

    def iter_bytes(self, iterator: Iterator[bytes]) -> Iterator[Any]:
        """The events of a body read as ``iterator``'s chunks."""
        chunks = iter(iterator)
        pending: list[bytes] = []
        parse, keep, sdk = self._parse, self._keep, self._sdk
        for chunk in chunks:
            if b"\r" in chunk:
                yield from self._kept(sdk.iter_bytes(itertools.chain((b"".join(pending) + chunk,), chunks)))
                return
            if pending or not chunk:
                joined = _joined(pending, chunk)
                if joined is None:
                    continue
                chunk = joined
            start = 0
            while (end := chunk.find(b"\n\n", start)) >= 0:
                sse = parse(chunk, start, end, sdk)
                if sse is None:
                    yield from self._kept(self._block(chunk[start:end]))
                    if sdk._last_event_id:  # see `_block`
                        yield from self._kept(sdk.iter_bytes(itertools.chain((chunk[end + 2 :],), chunks)))
                        return
                elif keep is None or (sse := self._kept_one(sse)) is not None:
                    yield sse
                start = end + 2
            if start < len(chunk):
                pending.append(chunk[start:])
        if pending:
            yield from self._kept(self._tail(b"".join(pending)))

    async def aiter_bytes(self, iterator: Any) -> AsyncIterator[Any]:
        """Async twin of `iter_bytes`."""
        chunks = iterator.__aiter__()
        pending: list[bytes] = []
        parse, keep, sdk = self._parse, self._keep, self._sdk
        async for chunk in chunks:
            if b"\r" in chunk:
                async for sse in sdk.aiter_bytes(_resume(b"".join(pending) + chunk, chunks)):
                    if (sse := self._kept_one(sse)) is not None:
                        yield sse
                return
            if pending or not chunk:
                joined = _joined(pending, chunk)
                if joined is None:
                    continue
                chunk = joined
            start = 0
            while (end := chunk.find(b"\n\n", start)) >= 0:
                sse = parse(chunk, start, end, sdk)
                if sse is None:
                    for sse in self._kept(self._block(chunk[start:end])):
                        yield sse
                    if sdk._last_event_id:  # see `_block`
                        async for sse in sdk.aiter_bytes(_resume(chunk[end + 2 :], chunks)):
                            if (sse := self._kept_one(sse)) is not None:
                                yield sse
                        return
                elif keep is None or (sse := self._kept_one(sse)) is not None:
                    yield sse
                start = end + 2
            if start < len(chunk):
                pending.append(chunk[start:])
        if pending:
            for sse in self._kept(self._tail(b"".join(pending))):
                yield sse

    def _block(self, block: bytes) -> list[Any]:
        """A block of any other shape, to the SDK decoder line by line, and its blank line.

        Once such a block has set an event id, the rest of the body goes to the SDK decoder
        itself: from then on a lone blank line dispatches an event (with that id), and the
        SDKs differ in when they read one (at its own line end, or only with the next blank
        line), so only the SDK's decoder can say when it comes out."""
        events: list[Any] = []
        decode = self._sdk.decode
        for raw in block.split(b"\n"):
            sse = decode(raw.decode("utf-8"))
            if sse:
                events.append(sse)
        sse = decode("")
        if sse:
            events.append(sse)
        return events

    def _tail(self, rest: bytes) -> list[Any]:
        """The lines after the last blank line, to the SDK decoder (as the SDK's own end of body)."""
        events: list[Any] = []
        decode = self._sdk.decode
        for raw in rest.splitlines():
            sse = decode(raw.decode("utf-8"))
            if sse:
                events.append(sse)
        return events

    def _kept(self, events: Any) -> Iterator[Any]:
        for sse in events:
            kept = self._kept_one(sse)
            if kept is not None:
                yield kept

    def _kept_one(self, sse: Any) -> Any:
        keep = self._keep
        return sse if keep is None else through(keep, sse)


def through(keep: Keep, sse: Any) -> Any:
    """``sse`` (an SDK event) through ``keep``: ``None`` if dropped; changed data is set where the
    event keeps it as ``_data`` (the SDKs' ``ServerSentEvent``; an event of another make keeps
    its data)."""
    data = sse.data
    kept = keep(sse.event, data)
    if kept is None:
        return None
    if kept is not data and getattr(sse, "__dict__", _NO_STATE).get("_data") is data:
        sse._data = kept
    return sse


_NO_STATE: dict[str, Any] = {}


def _joined(pending: list[bytes], chunk: bytes) -> Optional[bytes]:
    """``pending`` + ``chunk`` once a block can end in it (``pending`` emptied), else ``None``
    (``chunk`` kept in ``pending``): an event spread over many chunks is joined once, not re-copied
    with each chunk."""
    if not chunk:
        return None
    if b"\n\n" in chunk or (chunk[:1] == b"\n" and pending and pending[-1][-1:] == b"\n"):
        pending.append(chunk)
        joined = b"".join(pending)
        pending.clear()
        return joined
    pending.append(chunk)
    return None


async def _resume(first: bytes, chunks: Any) -> AsyncIterator[bytes]:
    yield first
    async for chunk in chunks:
        yield chunk


# -- builders of the SDK's ServerSentEvent, and the check that picks one ---------------------


def _parsers(sse_class: Any) -> list[Parse]:
    """The ways an SDK's ``ServerSentEvent`` may be built from a block, newest first: with the
    block's wire lines as ``raw`` (anthropic 2.17), without (every SDK before)."""
    return [_parser(sse_class, raw=True), _parser(sse_class, raw=False)]


def _parser(sse_class: Any, raw: bool) -> Parse:
    def parse(buf: bytes, start: int, end: int, sdk: Any) -> Any:
        try:
            text = buf[start:end].decode()
        except UnicodeDecodeError:  # the SDK decodes it line by line, and raises where it does
            return None
        newline = text.find("\n")
        if newline < 0:  # data: JSON
            if not text.startswith("data:"):
                return None
            event = None
            data = text[6:] if text.startswith(" ", 5) else text[5:]
        elif text.startswith("event:") and text.startswith("data:", newline + 1) and text.find("\n", newline + 1) < 0:
            event = text[7:newline] if text.startswith(" ", 6) else text[6:newline]
            data = text[newline + 7 :] if text.startswith(" ", newline + 6) else text[newline + 6 :]
        else:
            return None
        if raw:
            lines = [text] if newline < 0 else [text[:newline], text[newline + 1 :]]
            return sse_class(event=event, data=data, id=sdk._last_event_id, retry=None, raw=lines)
        return sse_class(event=event, data=data, id=sdk._last_event_id, retry=None)

    return parse


_PROBES: tuple[bytes, ...] = (
    b'event: message_start\ndata: {"type":"message_start","n":"\xc3\xa9\xe2\x9c\x93"}\n\n'
    b'event: ping\ndata: {"type": "ping"}\n\nevent:tight\ndata:{"a":1}\n\n',
    b'data: {"id":"c","choices":[]}\n\ndata: {"x":1,"usage":null}\n\ndata: [DONE]\n\n',
    b": keep-alive\n\n\n\nid: 7\ndata: after id\n\ndata: x\n\nevent: e\ndata: y\n\nevent:\ndata:  two\n\n"
    b"retry: 50\ndata: r\n\ndata: a\ndata: b\n\nevent: only\n\ndata\n\nfield: v\ndata: z\n\nid: 8\x00\ndata: n\n\n"
    b"data: partial",
    b"data: crlf\r\n\r\nevent: cr\rdata: x\r\rdata: lf\n\ndata: mixed\n\r\n",
    b"data: a\n\nid: 7\n\n\ndata: b\n\n\n\nevent: e\ndata: c\n\n\n",
)
"""Bodies both decoders must read alike (`_check`): the two fast shapes, what goes to the SDK
decoder line by line, and ``\\r`` line ends (the hand-over to the SDK decoder)."""


def _pieces(body: bytes) -> list[list[bytes]]:
    return [[body], [body[i : i + 1] for i in range(len(body))], [body[i : i + 7] for i in range(0, len(body), 7)]]


class _Suspended(Exception):
    """The decoder awaited something real: it cannot be checked without an event loop."""


def _drain(agen: Any) -> list[Any]:
    """The items of an async iterator that never suspends, read without an event loop."""
    out: list[Any] = []
    it = agen.__aiter__()
    while True:
        step = it.__anext__()
        try:
            step.send(None)
        except StopIteration as done:
            out.append(done.value)
            continue
        except StopAsyncIteration:
            return out
        step.close()
        raise _Suspended


def _read(decoder: Any, pieces: list[bytes], is_async: bool) -> list[tuple[int, type, dict[str, Any]]]:
    """Each event ``decoder`` reads from ``pieces``: how many pieces had been read when it came
    out (an event held back would delay its token's timestamp), its class, its attributes."""
    read = 0
    out: list[tuple[int, type, dict[str, Any]]] = []

    def chunks() -> Iterator[bytes]:
        nonlocal read
        for piece in pieces:
            read += 1
            yield piece

    async def achunks() -> AsyncIterator[bytes]:
        for piece in chunks():
            yield piece

    def seen(event: Any) -> Any:
        out.append((read, type(event), dict(vars(event))))
        return event

    if is_async:
        _drain(_Seen(decoder.aiter_bytes(achunks()), seen))
    else:
        for event in decoder.iter_bytes(chunks()):
            seen(event)
    return out


class _Seen:
    """An async iterator that hands each item to ``seen`` as it comes out."""

    def __init__(self, items: Any, seen: Callable[[Any], Any]) -> None:
        self.items, self.seen = items.__aiter__(), seen

    def __aiter__(self) -> "_Seen":
        return self

    async def __anext__(self) -> Any:
        return self.seen(await self.items.__anext__())


def _agrees(decoder_class: type, parse: Parse) -> bool:
    for body in _PROBES:
        for pieces in _pieces(body):
            for is_async in (False, True):
                if _read(FastEvents(decoder_class(), parse), pieces, is_async) != _read(decoder_class(), pieces, is_async):
                    return False
    return True


def _check(decoder_class: type) -> Optional[Parse]:
    """How to build this SDK decoder's events so that `FastEvents` reads every probe body as it
    does; ``None`` if no way agrees (the SDK's own decoding is kept)."""
    module = sys.modules.get(decoder_class.__module__)
    sse_class = getattr(module, "ServerSentEvent", None)
    if sse_class is None or not all(callable(getattr(decoder_class, m, None)) for m in ("decode", "iter_bytes", "aiter_bytes")):
        return None
    for parse in _parsers(sse_class):
        try:
            if _agrees(decoder_class, parse):
                return parse
        except Exception:  # a builder that does not fit this SDK's event; the next, or none
            continue
    return None


_parses: dict[type, Optional[Parse]] = {}
"""Decoder class → how `FastEvents` builds its events (``None``: the SDK decodes them itself)."""
_UNCHECKED: Any = object()
_INSTALLED = "_lk_sse"


def check_ahead(client: Any) -> None:
    """Check the SSE decoder class of ``client`` (an SDK client being made) now, once per
    class: the first stream then does not pay the check (~2 ms) between its first bytes and its
    first event, where it would delay that stream's first token."""
    make = getattr(client, "_make_sse_decoder", None)
    if not callable(make):
        return
    try:
        cls = type(make())
    except Exception:  # a client that needs more to make one: its first stream checks it
        return
    if cls not in _parses:
        _parses[cls] = _check(cls)


def fast_events(stream: Any, keep: Optional[Keep] = None) -> bool:
    """Give ``stream`` (an SDK ``Stream`` / ``AsyncStream``) a `FastEvents` decoder over its own,
    with ``keep`` on every event; whether it has one now. Once per stream: a second call changes
    nothing. Called before anything iterates the stream (`Tap.opened`): the SDK reads its
    decoder when its iterator starts."""
    state = getattr(stream, "__dict__", None)
    if state is None:
        return False
    if _INSTALLED in state:
        return bool(state[_INSTALLED])
    decoder = state.get("_decoder")
    if decoder is None:
        state[_INSTALLED] = False
        return False
    cls = type(decoder)
    parse = _parses.get(cls, _UNCHECKED)
    if parse is _UNCHECKED:
        parse = _parses[cls] = _check(cls)
        if parse is None:
            logger.debug("latencykit: %s.%s is decoded by the SDK itself (it did not pass the check)", cls.__module__, cls.__qualname__)
    if parse is None:
        state[_INSTALLED] = False
        return False
    state["_decoder"] = FastEvents(decoder, parse, keep)
    state[_INSTALLED] = True
    return True


