"""OpenAI GPT-5.6 explicit prompt caching (async mirror of test_openai_breakpoints_sync)."""

from __future__ import annotations

import copy
import logging
from typing import Any

import openai
import pytest

import latencykit as lk
from latencykit.emulator import Emulator

from _cache_shapes import Clock, agent_system, cemu  # noqa: F401
from _openai_cache_shapes import (
    APIS, BP, SHAPES, arun_family, count_breakpoints, new_fields, oracle_openai, second_sight, shape_gap, shape_requests,
)
from _rejecting_server import RejectingServer

CALLS = 8


async def family(emu: Emulator, api: str, requests: list[dict[str, Any]], gap: float, cache: Any) -> tuple[list[lk.CallRecord], lk.CacheReport, list[Any]]:
    """One family through a latencykit async client (fresh cache): its records, cache report and the bodies sent."""
    emu.cache.clear()  # type: ignore[attr-defined]
    clock = Clock(emu)
    policy = cache if isinstance(cache, str) else lk.CachePolicy(clock=clock, **cache)
    first = len(emu.requests)
    async with lk.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="x", cache=policy) as c:
        records = await arun_family(c, api, requests, clock, gap)
        report = c.latency.cache_report()
    return records, report, [r.body for r in emu.requests[first:]]


async def server_usage(emu: Emulator, api: str, bodies: list[Any], gap: float) -> list[tuple[int, int]]:
    """``(cached, written)`` the server reports for ``bodies`` replayed through the raw async SDK on a fresh cache."""
    emu.cache.clear()  # type: ignore[attr-defined]
    clock = Clock(emu)
    out = []
    async with openai.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="x") as raw:
        for body in bodies:
            body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
            if api == "chat.completions":
                usage: Any = (await raw.chat.completions.create(**body)).usage
                out.append((usage.prompt_tokens_details.cached_tokens, usage.prompt_tokens_details.cache_write_tokens))
            else:
                usage = (await raw.responses.create(**body)).usage
                out.append((usage.input_tokens_details.cached_tokens, usage.input_tokens_details.cache_write_tokens))
            clock.advance(gap)
    return out


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("shape", SHAPES)
async def test_shape_reads_what_the_oracle_reads(cemu: Emulator, shape: str, api: str) -> None:
    """From the second sight of the family's prompt (so also from the 5th call), ≥ 95% of the oracle's reads on every call; ≤ 3 explicit breakpoints; records = server usage."""
    requests, gap = shape_requests(shape, api, CALLS), shape_gap(shape)
    before = copy.deepcopy(requests)
    oracle, _, _ = await family(cemu, api, oracle_openai(api, requests), gap, "off")
    records, report, bodies = await family(cemu, api, requests, gap, {})
    assert requests == before
    for i in range(second_sight(shape), CALLS):
        assert (oracle[i].cache_read_tokens or 0) > 1000
        assert (records[i].cache_read_tokens or 0) >= 0.95 * (oracle[i].cache_read_tokens or 0), (i, records[i])
    assert all(count_breakpoints(b) <= 3 for b in bodies)
    assert [(r.cache_read_tokens, r.cache_write_tokens) for r in records] == await server_usage(cemu, api, bodies, gap)
    assert report.tokens_written == sum(r.cache_write_tokens or 0 for r in records)


@pytest.mark.parametrize("api", APIS)
async def test_older_models_get_no_new_fields(cemu: Emulator, api: str) -> None:
    """gpt-4o and gpt-5-mini are planned as before: no breakpoint, no options."""
    for model in ("gpt-4o", "gpt-5-mini"):
        _, _, bodies = await family(cemu, api, shape_requests("few-shot", api, 3, model=model), 0.0, {})
        assert not any(new_fields(b) for b in bodies)


async def test_cache_off_misses_are_no_breakpoint_not_eviction(cemu: Emulator, caplog: pytest.LogCaptureFixture) -> None:
    """Breakpoints off: every miss is "no breakpoint"; no eviction warning."""
    caplog.set_level(logging.WARNING, logger="latencykit")
    records, report, _ = await family(cemu, "chat.completions", shape_requests("RAG", "chat.completions", 5), 0.0, "off")
    assert {r.cache_miss_reason for r in records} == {"no_breakpoint"} and not caplog.records
    assert report.saved_tokens < 0


async def test_diagnose_agrees_with_the_server_on_changed_tools_and_input(cemu: Emulator) -> None:
    """The server's verdict and latencykit's name the same change (tools, then input); none disagree."""
    requests = shape_requests("agent", "responses", 6)
    tools = copy.deepcopy(requests[2]["tools"])
    tools[0]["description"] = "A changed tool."
    requests[2]["tools"] = tools
    requests[4]["input"][0] = {"role": "developer", "content": agent_system("Edited. ")}
    records, report, _ = await family(cemu, "responses", requests, 0.0, {"diagnose": True})
    assert (records[2].extra["cache_changed_segment"], records[2].server_cache_miss_reason) == ("tools", "tools_changed")
    assert (records[4].extra["cache_changed_segment"], records[4].server_cache_miss_reason) == ("system", "input_changed")
    assert (report.diagnosed, report.diagnosis_disagreements) == (5, 0)


async def test_a_server_that_rejects_the_fields_is_learned_per_base_url(cemu: Emulator) -> None:
    """One 400 per base URL, resent within the same call and record; nothing new sent there afterwards."""
    requests = shape_requests("agent", "responses", 3)
    with RejectingServer(cemu.base_url) as srv:
        async with lk.AsyncOpenAI(base_url=srv.base_url + "/v1", api_key="x") as c:
            for req in requests:
                await c.responses.create(**req)
            records = c.latency.calls
        assert (srv.rejected, srv.forwarded) == (1, 3)
    assert len(records) == 3 and records[0].extra["prompt_cache_breakpoints_rejected"] is True
    assert not any(new_fields(r.body) for r in cemu.requests[-3:])


@pytest.mark.parametrize("api", APIS)
async def test_prewarm_fills_the_cache_for_the_first_call(cemu: Emulator, api: str) -> None:
    """``await client.latency.prewarm(**request)``: the first real call reads what it wrote."""
    request = shape_requests("two-part system", api, 1)[0]
    async with lk.AsyncOpenAI(base_url=cemu.base_url + "/v1", api_key="x") as c:
        warm = await c.latency.prewarm(**request)
        sent = cemu.requests[-1].body
        await (c.chat.completions.create if api == "chat.completions" else c.responses.create)(**request)
        first = c.latency.last
    assert warm is not None and warm.method == "prewarm" and (warm.cache_write_tokens or 0) > 1000
    items = sent["messages" if api == "chat.completions" else "input"]
    assert len(items) == 1 and items[0]["content"][1]["prompt_cache_breakpoint"] == BP
    assert first is not None and first.cache_read_tokens == warm.cache_write_tokens and first.cache_verdict == "hit"
