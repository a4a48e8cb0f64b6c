"""The stream shell iterates ``self._iterator`` itself only where that is all the SDK's
``__iter__`` / ``__aiter__`` does; otherwise (an overriding subclass, an SDK observer set)
every item still goes through the SDK's own method."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, AsyncIterator, Iterator

import anthropic
import openai
import pytest

from latencykit import CallRecord, CallTimer
from latencykit.providers._streams import direct_iteration, item_reader, observe_stream
from latencykit.providers._tap import Tap


class _LastIsTerminal(Tap):
    """Every item is a token; the item ``"end"`` is the terminal event."""

    __slots__ = ()

    def __call__(self, event: Any) -> bool:
        self.timer.token()
        if event == "end":
            self.timer.terminal()
        return True


ITEMS = ["a", "b", "c", "end"]


def _tap(sink: list[CallRecord]) -> _LastIsTerminal:
    return _LastIsTerminal(CallTimer(CallRecord(provider="anthropic", operation="chat", request_model="m"), clock=iter(range(100)).__next__, sink=sink.append))


class _Observer:
    def __init__(self) -> None:
        self.items: list[Any] = []

    def item(self, item: Any) -> None:
        self.items.append(item)


def _bare(cls: type, items: Any, observer: Any = None) -> Any:
    """An SDK stream object over ``items`` (no HTTP): ``_iterator`` given, ``response`` a stand-in."""
    stream = cls.__new__(cls)
    stream.__dict__["_iterator"] = items
    stream.response = SimpleNamespace(stream=SimpleNamespace(stream_observer=observer))
    return stream


@pytest.mark.parametrize(
    ("method", "shape"),
    [
        (anthropic.Stream.__iter__, "observed"),
        (anthropic.AsyncStream.__aiter__, "observed"),
        (openai.Stream.__iter__, "plain"),
        (openai.AsyncStream.__aiter__, "plain"),
    ],
)
def test_installed_sdks_take_the_direct_path(method: Any, shape: str) -> None:
    """The installed SDKs' stream iteration is recognised (so the per-event saving applies)."""
    assert direct_iteration(method) == shape


def test_a_method_that_does_more_is_not_recognised() -> None:
    def __iter__(self: Any) -> Iterator[Any]:
        for item in self._iterator:
            yield item.upper()

    assert direct_iteration(__iter__) is None
    assert direct_iteration(lambda self: iter(())) is None
    assert direct_iteration(len) is None


@pytest.mark.parametrize("cls", [anthropic.Stream, openai.Stream])
def test_direct_path_yields_every_item_and_finalizes(cls: type) -> None:
    sink: list[CallRecord] = []
    stream = observe_stream(_bare(cls, iter(ITEMS)), _tap(sink))
    assert list(stream) == ITEMS
    assert [r.outcome for r in sink] == ["completed"]
    assert sink[0].chunks == 4


def test_an_sdk_observer_still_sees_every_item() -> None:
    """anthropic's tracing observer: with one set, iteration goes through the SDK's ``__iter__``."""
    sink: list[CallRecord] = []
    observer = _Observer()
    stream = observe_stream(_bare(anthropic.Stream, iter(ITEMS), observer), _tap(sink))
    assert list(stream) == ITEMS
    assert observer.items == ITEMS
    assert [r.outcome for r in sink] == ["completed"]


def test_an_async_sdk_observer_still_sees_every_item() -> None:
    async def items() -> AsyncIterator[str]:
        for item in ITEMS:
            yield item

    async def main() -> list[str]:
        stream = observe_stream(_bare(anthropic.AsyncStream, items(), observer), _tap(sink))
        return [item async for item in stream]

    sink: list[CallRecord] = []
    observer = _Observer()
    assert asyncio.run(main()) == ITEMS
    assert observer.items == ITEMS
    assert [r.outcome for r in sink] == ["completed"]


def test_a_subclass_that_overrides_iteration_is_honoured() -> None:
    class Shouting(openai.Stream):  # type: ignore[type-arg]
        def __iter__(self) -> Iterator[Any]:
            for item in self._iterator:
                yield item if item == "end" else item.upper()

    sink: list[CallRecord] = []
    stream = observe_stream(_bare(Shouting, iter(ITEMS)), _tap(sink))
    assert list(stream) == ["A", "B", "C", "end"]
    assert [r.outcome for r in sink] == ["completed"]


@pytest.mark.parametrize("cls", [anthropic.Stream, anthropic.AsyncStream, openai.Stream, openai.AsyncStream])
def test_installed_sdks_items_are_read_from_their_iterator(cls: type) -> None:
    """How latencykit reads the events it holds back until the first token: from ``_iterator``
    directly where the SDK's ``__next__`` / ``__anext__`` only forwards it (no observer set)."""
    items: Any = iter(ITEMS) if cls in (anthropic.Stream, openai.Stream) else _aiter(ITEMS)
    read = item_reader(_bare(cls, items))  # (anthropic's observer: None on this stand-in response)
    assert read == (items.__next__ if isinstance(items, Iterator) else items.__anext__)


@pytest.mark.parametrize("is_async", [False, True])
def test_items_read_with_an_sdk_observer_set_still_reach_it(is_async: bool) -> None:
    observer = _Observer()
    cls = anthropic.AsyncStream if is_async else anthropic.Stream
    read = item_reader(_bare(cls, _aiter(ITEMS) if is_async else iter(ITEMS), observer))

    async def first_two() -> list[Any]:
        return [await read(), await read()]

    got = asyncio.run(first_two()) if is_async else [read(), read()]
    assert got == ITEMS[:2] and observer.items == ITEMS[:2]


def test_a_subclass_that_overrides_next_is_read_through_its_method() -> None:
    class Shouting(openai.Stream):  # type: ignore[type-arg]
        def __next__(self) -> Any:
            return self._iterator.__next__().upper()

    read = item_reader(_bare(Shouting, iter(ITEMS)))
    assert [read(), read()] == ["A", "B"]


async def _aiter(items: list[str]) -> AsyncIterator[str]:
    for item in items:
        yield item
