"""Reasoning models through the real async SDKs over HTTP, against the emulator (async mirror)."""

from __future__ import annotations

import anthropic
import openai
import pytest

import latencykit as lk
from latencykit.emulator import Emulator

from _reasoning_shapes import HEADERS, SHAPES, Shape, Truth, check, resource

# The shapes name the real models that stream thinking that way (Claude 3.7: whole; Sonnet 4.5: summarized); older
# anthropic SDKs (the floor, 2.5.0) warn that those names are deprecated: the SDK's word to its user, not ours.
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")]


def _clients(emu: Emulator, shape: Shape, recorder: lk.Recorder) -> tuple[object, object]:
    if shape.api == "messages":
        return (lk.AsyncAnthropic(base_url=emu.base_url, api_key="k", max_retries=0, recorder=recorder, default_headers=HEADERS),
                anthropic.AsyncAnthropic(base_url=emu.base_url, api_key="k", max_retries=0, default_headers=HEADERS))  # fmt: skip
    base = emu.base_url + "/v1"
    return (lk.AsyncOpenAI(base_url=base, api_key="k", max_retries=0, recorder=recorder, default_headers=HEADERS),
            openai.AsyncOpenAI(base_url=base, api_key="k", max_retries=0, default_headers=HEADERS))  # fmt: skip


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
@pytest.mark.parametrize("streamed", [True, False], ids=["stream", "create"])
async def test_reasoning_shape_timing(emu: Emulator, recorder: lk.Recorder, shape: Shape, streamed: bool) -> None:
    """TTFT unchanged, TTFO at the answer's first token, TPOT over what was streamed (async; truth as in the sync file)."""
    client, raw = _clients(emu, shape, recorder)
    try:
        truth = Truth()
        if streamed:
            async for event in await resource(client, shape.api).create(stream=True, **shape.request):
                truth.see(shape.api, event)
        else:
            async for event in await resource(raw, shape.api).create(stream=True, **shape.request):
                truth.see(shape.api, event)
            result = await resource(client, shape.api).create(**shape.request)
            assert result.usage is not None
        rec = recorder.calls[-1]
    finally:
        await client.close()  # type: ignore[attr-defined]
        await raw.close()  # type: ignore[attr-defined]
    check(rec, shape, truth, same_call=streamed)
