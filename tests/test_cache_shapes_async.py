"""Every prompt shape of issues 9 and 29 (async): the planner reads ≥ 95% of a hindsight oracle's tokens
from the third call on (rotating system prompts: from the second sight of each prompt on)."""

from __future__ import annotations

import copy
import logging
from typing import Any

import anthropic
import openai
import pytest

import latencykit as lk
from latencykit.emulator import Emulator

from _cache_shapes import (  # noqa: F401
    SHAPES, Clock, cemu, count_markers, learning_calls, measured, oracle_openai, oracle_requests, rare, rotation, shape_calls,
    shape_gap, shape_requests, unread_writes, without_markers,
)

CALLS = 6


def prompt(body: dict[str, Any]) -> Any:
    """What the model reads: tools, system and messages, without markers, strings as text blocks."""
    return without_markers({k: body.get(k) for k in ("tools", "system", "messages")})


async def oracle_reads(emu: Emulator, clock: Clock, api: str, requests: list[dict[str, Any]], gap: float) -> list[int]:
    """Cache reads of the oracle's requests through the raw SDK (a fresh cache first), ``gap`` seconds apart."""
    emu.cache.clear()  # type: ignore[attr-defined]
    reads = []
    if api == "messages":
        async with anthropic.AsyncAnthropic(base_url=emu.base_url, api_key="x") as raw:
            for req in oracle_requests(requests, gap):
                reads.append((await raw.messages.create(**req)).usage.cache_read_input_tokens or 0)
                clock.advance(gap)
    else:
        async with openai.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="x") as oai:
            for req in oracle_openai(requests):
                usage = (await oai.chat.completions.create(**req)).usage
                assert usage is not None and usage.prompt_tokens_details is not None
                reads.append(usage.prompt_tokens_details.cached_tokens or 0)
    emu.cache.clear()  # type: ignore[attr-defined]
    return reads


@pytest.mark.parametrize("shape", SHAPES)
async def test_shape_reads_what_the_oracle_reads(cemu: Emulator, shape: str, caplog: pytest.LogCaptureFixture) -> None:
    """≥ 95% of the oracle's cache reads on every judged call, ≤ 4 markers, caller's objects untouched, content as written;
    prompts that come back (in time or not) are never said to change on every call."""
    caplog.set_level(logging.WARNING, logger="latencykit")
    calls, gap, clock = shape_calls(shape, CALLS), shape_gap(shape), Clock(cemu)
    api, requests = shape_requests(shape, calls)
    oracle = await oracle_reads(cemu, clock, api, requests, gap)
    judged = measured(shape, calls)
    assert all(oracle[i] > 1000 for i in judged)
    reads, writes = [], []
    if api == "messages":
        async with lk.AsyncAnthropic(base_url=cemu.base_url, api_key="x", cache=lk.CachePolicy(clock=clock)) as c:
            for req in requests:
                before = copy.deepcopy(req)
                await c.messages.create(**req)
                assert req == before
                sent = cemu.requests[-1].body
                assert count_markers(sent) <= 4
                assert prompt(sent) == prompt(req)
                assert c.latency.last is not None
                reads.append(c.latency.last.cache_read_tokens or 0)
                writes.append(c.latency.last.cache_write_tokens or 0)
                clock.advance(gap)
    else:
        async with lk.AsyncOpenAI(base_url=cemu.base_url + "/v1", api_key="x") as o:
            for req in requests:
                before = copy.deepcopy(req)
                await o.chat.completions.create(**req)
                assert req == before
                sent = cemu.requests[-1].body
                assert sent["prompt_cache_key"].startswith("lk-")
                assert prompt(sent) == prompt(req)
                assert o.latency.last is not None
                reads.append(o.latency.last.cache_read_tokens or 0)
    assert all(reads[i] >= 0.95 * oracle[i] for i in judged), (reads, oracle)
    if rotation(shape) is not None:
        assert not [r for r in caplog.records if "changes on every call" in r.getMessage()]
    if rare(shape):  # past the first two prompts (where it learns), nothing written that expires unread
        unread = [i for i in unread_writes(shape, writes) if i not in learning_calls(shape, calls)]
        assert not unread, (unread, writes)
