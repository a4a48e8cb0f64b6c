"""Reasoning models through the real SDKs over HTTP, against the emulator with known timing (sync).

For each shape (Chat hidden, Responses hidden and summarized, Chat streamed, Anthropic summarized,
omitted and full): TTFT and TTFO within 60 ms of what the raw SDK sees on the same request, TPOT
within 15 % of the emulator's 20 ms (35 % where the answer's token count is estimated), the rule
named in the record, reasoning billed and answer returned as the raw SDK returns them.
"""

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
        return (lk.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0, recorder=recorder, default_headers=HEADERS),
                anthropic.Anthropic(base_url=emu.base_url, api_key="k", max_retries=0, default_headers=HEADERS))  # fmt: skip
    base = emu.base_url + "/v1"
    return (lk.OpenAI(base_url=base, api_key="k", max_retries=0, recorder=recorder, default_headers=HEADERS),
            openai.OpenAI(base_url=base, api_key="k", max_retries=0, default_headers=HEADERS))  # fmt: skip


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
@pytest.mark.parametrize("streamed", [True, False], ids=["stream", "create"])
def test_reasoning_shape_timing(emu: Emulator, recorder: lk.Recorder, shape: Shape, streamed: bool) -> None:
    """TTFT unchanged, TTFO at the answer's first token, TPOT over what was streamed.

    Streamed: the truth is what the caller saw on this very stream (the first reasoning / answer
    event the latencykit stream yielded). create(): the raw SDK's view of the same request, its
    reasoning span (answer − first token) against the record's TTFO − TTFT."""
    client, raw = _clients(emu, shape, recorder)
    try:
        truth = Truth()
        if streamed:
            for event in resource(client, shape.api).create(stream=True, **shape.request):
                truth.see(shape.api, event)
        else:
            for event in resource(raw, shape.api).create(stream=True, **shape.request):
                truth.see(shape.api, event)
            result = resource(client, shape.api).create(**shape.request)
            assert result.usage is not None
        rec = recorder.calls[-1]
    finally:
        client.close()  # type: ignore[attr-defined]
        raw.close()  # type: ignore[attr-defined]
    check(rec, shape, truth, same_call=streamed)


def test_reasoning_summary_row(emu: Emulator, recorder: lk.Recorder) -> None:
    """The Recorder's summary shows a TTFO row for reasoning calls, none for plain ones."""
    client = lk.OpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, recorder=recorder, default_headers=HEADERS)
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert "TTFO" not in str(recorder.summary())
    client.chat.completions.create(model="deepseek-reasoner", messages=[{"role": "user", "content": "hi"}])
    text = str(recorder.summary())
    assert "TTFO" in text and recorder.summary()["ttfo"].count == 2
    streamed = [g for g in recorder.summary().groups if g.model == "deepseek-reasoner"][0]
    assert streamed.metrics["ttfo"].p50 > streamed.metrics["ttft"].p50 + 0.5  # 60 streamed reasoning tokens × 20 ms
    client.close()
