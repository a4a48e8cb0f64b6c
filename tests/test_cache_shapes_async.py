"""Every prompt shape of issue 9 (async): the planner reads ≥ 95% of a hindsight oracle's tokens from the third call on."""

from __future__ import annotations

import copy
from typing import Any

import anthropic
import openai
import pytest

import latencykit as lk
from latencykit.emulator import Emulator

from _cache_shapes import SHAPES, cemu, count_markers, oracle_openai, oracle_requests, shape_requests, without_markers  # noqa: F401

CALLS = 6


def prompt(body: dict[str, Any]) -> Any:
    """What the model reads: tools, system and messages, without markers, strings as text blocks."""
    return without_markers({k: body.get(k) for k in ("tools", "system", "messages")})


async def oracle_reads(emu: Emulator, api: str, requests: list[dict[str, Any]]) -> list[int]:
    """Cache reads of the oracle's requests through the raw SDK (a fresh cache first)."""
    emu.cache.clear()  # type: ignore[attr-defined]
    reads = []
    if api == "messages":
        async with anthropic.AsyncAnthropic(base_url=emu.base_url, api_key="x") as raw:
            for req in oracle_requests(requests):
                reads.append((await raw.messages.create(**req)).usage.cache_read_input_tokens or 0)
    else:
        async with openai.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="x") as oai:
            for req in oracle_openai(requests):
                usage = (await oai.chat.completions.create(**req)).usage
                assert usage is not None and usage.prompt_tokens_details is not None
                reads.append(usage.prompt_tokens_details.cached_tokens or 0)
    emu.cache.clear()  # type: ignore[attr-defined]
    return reads


@pytest.mark.parametrize("shape", SHAPES)
async def test_shape_reads_what_the_oracle_reads(cemu: Emulator, shape: str) -> None:
    """From the third call on: ≥ 95% of the oracle's cache reads, ≤ 4 markers, caller's objects untouched, content as written."""
    api, requests = shape_requests(shape, CALLS)
    oracle = await oracle_reads(cemu, api, requests)
    assert all(r > 1000 for r in oracle[2:])
    reads = []
    if api == "messages":
        async with lk.AsyncAnthropic(base_url=cemu.base_url, api_key="x") as c:
            for req in requests:
                before = copy.deepcopy(req)
                await c.messages.create(**req)
                assert req == before
                sent = cemu.requests[-1].body
                assert count_markers(sent) <= 4
                assert prompt(sent) == prompt(req)
                assert c.latency.last is not None
                reads.append(c.latency.last.cache_read_tokens or 0)
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
    assert all(mine >= 0.95 * best for mine, best in zip(reads[2:], oracle[2:])), (reads, oracle)
