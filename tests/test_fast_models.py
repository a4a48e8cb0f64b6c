"""Stream events a latencykit client builds directly (`providers._fast_models`) are the SDK's own.

Every event a caller gets must be exactly the object the raw SDK would have built: same class,
same field order, same ``__pydantic_fields_set__`` / ``__pydantic_extra__`` / ``__pydantic_private__``,
at every level. These tests stream the same answers through latencykit and through the raw SDK
(text, tool input, streamed thinking; messages and beta.messages; sync and async), compare them
state by state, and check that the direct path really ran; then the refusals: a payload of
another shape, a value of another type, an SDK that builds differently, a strict client.
"""

from __future__ import annotations

from typing import Any, Iterator

import anthropic
import pytest
from anthropic.types import RawMessageStreamEvent

import latencykit as lk
from latencykit.providers import _fast_models
from conftest import ANT_REQ, WEATHER_TOOL_ANT, Emulator

REQUESTS = {
    "text": {**ANT_REQ, "max_tokens": 200},
    "tool": {**ANT_REQ, "tools": [WEATHER_TOOL_ANT], "tool_choice": {"type": "any"}},
    "thinking": {**ANT_REQ, "max_tokens": 4096, "thinking": {"type": "enabled", "budget_tokens": 2048},
                 "extra_headers": {"x-emulator-reasoning": "streamed"}},  # fmt: skip
}
DELTAS = {"text": "text_delta", "tool": "input_json_delta", "thinking": "thinking_delta"}


def state(obj: Any) -> Any:
    """Everything an SDK object is made of, nested models included (dict order kept)."""
    fields = getattr(obj, "__dict__", None)
    if fields is None:
        return (type(obj), obj)
    return (
        type(obj),
        [(k, state(v)) for k, v in fields.items()],
        obj.__pydantic_fields_set__,
        type(obj.__pydantic_extra__),
        obj.__pydantic_extra__,
        obj.__pydantic_private__,
    )


@pytest.fixture
def built() -> Iterator[list[Any]]:
    """The objects the direct path built during a test."""
    made: list[Any] = []
    build = _fast_models.Plan.build

    def counting(self: _fast_models.Plan, data: Any) -> Any:
        obj = build(self, data)
        if obj is not None and type(obj).__name__.endswith("ContentBlockDeltaEvent"):
            made.append(obj)
        return obj

    _fast_models.Plan.build = counting  # type: ignore[method-assign]
    try:
        yield made
    finally:
        _fast_models.Plan.build = build  # type: ignore[method-assign]


@pytest.mark.parametrize("kind", list(REQUESTS))
@pytest.mark.parametrize("beta", [False, True], ids=["messages", "beta"])
def test_sync_events_are_the_sdks_own(emu: Emulator, kind: str, beta: bool, built: list[Any]) -> None:
    request = REQUESTS[kind]
    with lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0) as mine, anthropic.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0) as raw:
        ours = list((mine.beta.messages if beta else mine.messages).create(**request, stream=True))
        theirs = list((raw.beta.messages if beta else raw.messages).create(**request, stream=True))
    assert [state(e) for e in ours] == [state(e) for e in theirs]
    deltas = [e for e in ours if e.type == "content_block_delta" and e.delta.type == DELTAS[kind]]
    assert len(deltas) >= 3 and all(any(e is b for b in built) for e in deltas)


@pytest.mark.parametrize("kind", list(REQUESTS))
async def test_async_events_are_the_sdks_own(emu: Emulator, kind: str, built: list[Any]) -> None:
    request = REQUESTS[kind]
    mine = lk.AsyncAnthropic(base_url=emu.base_url, api_key="k", max_retries=0)
    raw = anthropic.AsyncAnthropic(base_url=emu.base_url, api_key="k", max_retries=0)
    try:
        ours = [e async for e in await mine.messages.create(**request, stream=True)]
        theirs = [e async for e in await raw.messages.create(**request, stream=True)]
        async with mine.messages.stream(**request) as stream:
            final = await stream.get_final_message()
        expected = await raw.messages.create(**request)
    finally:
        await mine.close()
        await raw.close()
    assert [state(e) for e in ours] == [state(e) for e in theirs]
    assert final.to_dict() == expected.to_dict()  # the SDK's helper accumulates the built events as its own
    assert sum(1 for e in ours if e.type == "content_block_delta" and any(e is b for b in built)) >= 3


def test_a_wrapped_sdk_client_builds_them_too(emu: Emulator, built: list[Any]) -> None:
    client = lk.wrap(anthropic.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0))
    events = list(client.messages.create(**REQUESTS["text"], stream=True))
    assert any(e is b for e in events for b in built)


def test_a_strict_client_leaves_every_event_to_the_sdk(emu: Emulator, built: list[Any]) -> None:
    with lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0, _strict_response_validation=True) as strict:
        events = list(strict.messages.create(**REQUESTS["text"], stream=True))
        record = strict.latency.last
    assert not built
    assert sum(1 for e in events if e.type == "content_block_delta") >= 3 and record.outcome == "completed"


PROBE = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}


def sdk_build(data: dict[str, Any]) -> Any:
    client = anthropic.Anthropic(api_key="k", base_url="http://127.0.0.1:9")
    return client._process_response_data(data=data, cast_to=RawMessageStreamEvent, response=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "payload",
    [
        {**PROBE, "extra": 1},  # a field a newer API adds: the SDK keeps it in __pydantic_extra__
        {**PROBE, "delta": {"type": "text_delta", "text": None}},  # a null
        {**PROBE, "delta": {"type": "text_delta", "text": "x", "more": True}},
        {**PROBE, "delta": {"type": "thinking_delta", "text": "x"}},  # another discriminator
        {**PROBE, "index": "0"},  # a value of another type
        {"type": "content_block_stop", "index": 0},
        [PROBE],
    ],
    ids=["extra-key", "null", "nested-extra-key", "other-type", "str-index", "other-event", "not-a-dict"],
)
def test_a_payload_of_another_shape_goes_to_the_sdk(payload: Any) -> None:
    plan = _fast_models.plan(sdk_build, [PROBE, {**PROBE, "delta": {"type": "text_delta", "text": ""}}])
    assert plan is not None and plan.build(payload) is None
    assert state(plan.build({**PROBE, "index": 5})) == state(sdk_build({**PROBE, "index": 5}))


def test_an_sdk_that_builds_differently_gets_no_plan() -> None:
    def odd(data: dict[str, Any]) -> Any:
        obj = sdk_build(data)
        if data["delta"]["text"] == "":
            object.__setattr__(obj, "__pydantic_fields_set__", {"type"})  # differs on one probe only
        return obj

    assert _fast_models.plan(odd, [PROBE, {**PROBE, "delta": {"type": "text_delta", "text": ""}}]) is None

    def transforms(data: dict[str, Any]) -> Any:
        obj = sdk_build(data)
        obj.delta.__dict__["text"] = data["delta"]["text"].upper()  # the SDK changed a value
        return obj

    assert _fast_models.plan(transforms, [PROBE]) is None
    assert _fast_models.plan(lambda data: 1 / 0, [PROBE]) is None
