"""Prompt caching end to end (sync): the agent workload with the planner on / off / top-level auto."""

from __future__ import annotations

import logging
from typing import Any

import anthropic
import pytest

import latencykit as lk
from latencykit.emulator import Emulator

from _cache_shapes import MODEL, agent_system, agent_tools, cemu, rotating_system, timestamp_system  # noqa: F401

CALLS = 50
CC: dict[str, Any] = {"type": "ephemeral"}


def run_agent(c: lk.Anthropic, *, multi_turn: bool, top_level: bool = False) -> list[lk.CallRecord]:
    """50 agent calls: single-turn with varying questions, or one growing conversation."""
    tools, system = agent_tools(), agent_system()
    history: list[dict[str, Any]] = []
    records = []
    for i in range(CALLS):
        question = {"role": "user", "content": f"Question {i}: what changed in system {i % 7}?"}
        messages = [*history, question] if multi_turn else [question]
        extra = {"cache_control": CC} if top_level else {}
        message = c.messages.create(model=MODEL, max_tokens=8, tools=tools, system=system, messages=messages, **extra)
        if multi_turn:
            history = [*messages, {"role": "assistant", "content": message.content}]
        assert c.latency.last is not None
        records.append(c.latency.last)
    return records


def static_prefix(emu: Emulator) -> int:
    """Tokens of tools + system, as the server counts them (a marked, fresh write)."""
    with anthropic.Anthropic(base_url=emu.base_url, api_key="x") as raw:
        system = [{"type": "text", "text": agent_system() + " ", "cache_control": CC}]
        usage = raw.messages.create(model=MODEL, max_tokens=8, tools=agent_tools(), system=system,
                                    messages=[{"role": "user", "content": "x"}]).usage  # fmt: skip
    emu.cache.clear()  # type: ignore[attr-defined]
    return usage.cache_creation_input_tokens or 0


@pytest.mark.parametrize("multi_turn", [False, True], ids=["single-turn", "multi-turn"])
def test_agent_workload_planner_on_reads_the_static_prefix(cemu: Emulator, multi_turn: bool) -> None:
    """Planner on: every call after the first reads ≥ 95% of tools + system from cache, verdict hit."""
    static = static_prefix(cemu)
    assert static > 4000
    with lk.Anthropic(base_url=cemu.base_url, api_key="x") as c:
        recs = run_agent(c, multi_turn=multi_turn)
    assert recs[0].cache_verdict == "write"
    assert all((r.cache_read_tokens or 0) >= 0.95 * static for r in recs[1:])
    assert all(r.cache_verdict == "hit" for r in recs[1:])
    report = c.latency.cache_report()
    assert report.hit_rate_calls == pytest.approx((CALLS - 1) / CALLS)


@pytest.mark.parametrize("multi_turn", [False, True], ids=["single-turn", "multi-turn"])
def test_agent_workload_planner_off_reads_nothing(cemu: Emulator, multi_turn: bool) -> None:
    """Planner off: no markers, no call reads anything; each is an expected miss without a breakpoint."""
    with lk.Anthropic(base_url=cemu.base_url, api_key="x", cache="off") as c:
        recs = run_agent(c, multi_turn=multi_turn)
    assert all(r.cache_read_tokens == 0 for r in recs)
    assert {r.cache_miss_reason for r in recs} == {"no_breakpoint"}


def test_agent_workload_top_level_auto_alone(cemu: Emulator) -> None:
    """API's top-level cache_control alone: single-turn never reads (marker on the dynamic message); multi-turn does."""
    static = static_prefix(cemu)
    with lk.Anthropic(base_url=cemu.base_url, api_key="x", cache="off") as c:
        single = run_agent(c, multi_turn=False, top_level=True)
        multi = run_agent(c, multi_turn=True, top_level=True)
    assert all(r.cache_read_tokens == 0 for r in single)
    assert all((r.cache_read_tokens or 0) >= 0.95 * static for r in multi[1:])


def test_timestamp_in_system_prompt_is_detected_and_tools_stay_cached(
    cemu: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    """A clock in the system prompt: warned once with its offset; the breakpoint moves and tools keep hitting."""
    with caplog.at_level(logging.WARNING, logger="latencykit"), lk.Anthropic(base_url=cemu.base_url, api_key="x") as c:
        recs = []
        for i in range(8):
            c.messages.create(model=MODEL, max_tokens=8, tools=agent_tools(), system=timestamp_system(i),
                              messages=[{"role": "user", "content": f"q{i}"}])  # fmt: skip
            assert c.latency.last is not None
            recs.append(c.latency.last)
    warnings = [r.getMessage() for r in caplog.records if "changes on every call" in r.getMessage()]
    assert len(warnings) == 1
    a, b = timestamp_system(0), timestamp_system(1)
    offset = next(i for i in range(len(a)) if a[i] != b[i])  # where the seconds change
    assert "system prompt" in warnings[0] and f"character {offset - offset % 16}" in warnings[0]
    assert recs[1].cache_miss_reason == "prefix_changed" and recs[1].extra["cache_changed_offset"] == offset - offset % 16
    # From the third call on, the system prompt is no longer marked: no more writes, tools still read.
    sent = cemu.requests[-1].body
    assert isinstance(sent["system"], str) and "cache_control" in sent["tools"][-1]
    tools_only = recs[-1].cache_read_tokens
    assert all(r.cache_read_tokens == tools_only and r.cache_write_tokens == 0 for r in recs[3:])
    assert tools_only and tools_only > 2500 and all(r.cache_verdict == "hit" for r in recs[3:])


@pytest.mark.parametrize("cache", ["auto", "off"])
def test_rotating_system_prompts_stay_cached_per_prompt(cemu: Emulator, caplog: pytest.LogCaptureFixture, cache: str) -> None:
    """Three static system prompts in turn (issue 29): no "changes on every call" warning; from the second
    sight of each on, a full read labelled hit — by the planner, or by one hand-placed marker under cache='off'."""
    recs = []
    with caplog.at_level(logging.WARNING, logger="latencykit"), lk.Anthropic(base_url=cemu.base_url, api_key="x", cache=cache) as c:
        for i in range(12):
            system: Any = rotating_system(i % 3)
            if cache == "off":
                system = [{"type": "text", "text": system, "cache_control": CC}]
            c.messages.create(model=MODEL, max_tokens=8, tools=agent_tools(), system=system,
                              messages=[{"role": "user", "content": f"q{i}"}])  # fmt: skip
            assert c.latency.last is not None
            recs.append(c.latency.last)
    assert not [r for r in caplog.records if "changes on every call" in r.getMessage()]
    assert [r.cache_verdict for r in recs[3:]] == ["hit"] * 9
    assert all(r.cache_miss_reason is None and (r.cache_read_tokens or 0) > 4500 for r in recs[3:])
    assert c.latency.cache_report().hit_rate_calls == pytest.approx(9 / 12 if cache == "off" else 11 / 12)


def test_openai_derives_a_stable_prompt_cache_key(cemu: Emulator) -> None:
    """OpenAI: a prompt_cache_key derived from the static prefix (same secret → same key); the caller's wins."""
    messages = [{"role": "system", "content": agent_system()}, {"role": "user", "content": "q"}]
    keys = []
    for _ in range(2):
        with lk.OpenAI(base_url=cemu.base_url + "/v1", api_key="x", cache=lk.CachePolicy(secret=b"shared")) as c:
            c.chat.completions.create(model="gpt-4o", messages=messages)
            keys.append(cemu.requests[-1].body["prompt_cache_key"])
            c.chat.completions.create(model="gpt-4o", messages=messages, prompt_cache_key="mine")
            assert cemu.requests[-1].body["prompt_cache_key"] == "mine"
            c.responses.create(model="gpt-4o", input=messages)
            assert c.latency.last is not None and c.latency.last.cache_verdict == "hit"
    assert keys[0] == keys[1] and keys[0].startswith("lk-")
    with lk.OpenAI(base_url=cemu.base_url + "/v1", api_key="x", cache="off") as c:
        c.chat.completions.create(model="gpt-4o", messages=messages)
        assert "prompt_cache_key" not in cemu.requests[-1].body


def test_policy_is_shared_by_copies_and_wrap(cemu: Emulator) -> None:
    """with_options()/copy() keep the client's policy; wrap(client, cache=...) sets one."""
    policy = lk.CachePolicy()
    with lk.Anthropic(base_url=cemu.base_url, api_key="x", cache=policy) as c:
        assert c.with_options(timeout=5)._lk.planner is policy and c.copy()._lk.planner is policy
        assert lk.wrap(c) is c
        assert lk.wrap(c, cache="off")._lk.planner.mode == "off"
    with anthropic.Anthropic(base_url=cemu.base_url, api_key="x") as raw:
        assert lk.wrap(raw, cache=policy)._lk.planner is policy
        assert lk.wrap(raw)._lk.planner.mode == "auto"
