"""The emulator's prompt cache follows Anthropic's and OpenAI's rules (raw SDK clients over HTTP)."""

from __future__ import annotations

import time
from typing import Any

import anthropic
import openai
import pytest

from latencykit.emulator import Emulator, PromptCache, TimingModel

from _cache_shapes import MODEL, agent_system, agent_tools, cemu, filler  # noqa: F401

CC: dict[str, Any] = {"type": "ephemeral"}


def _ant(emu: Emulator) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=emu.base_url, api_key="x", max_retries=0)


def _oai(emu: Emulator) -> openai.OpenAI:
    return openai.OpenAI(base_url=emu.base_url + "/v1", api_key="x", max_retries=0)


def _system(ttl: str | None = None, text: str | None = None) -> list[dict[str, Any]]:
    cc = dict(CC, ttl=ttl) if ttl else CC
    return [{"type": "text", "text": text or agent_system(), "cache_control": cc}]


def _ask(client: anthropic.Anthropic, **kw: Any) -> Any:
    kw.setdefault("messages", [{"role": "user", "content": "hi"}])
    return client.messages.create(model=MODEL, max_tokens=8, **kw).usage


def test_marker_writes_then_reads(cemu: Emulator) -> None:
    """A marked system prompt is written on the first call and read on the second; totals add up."""
    with _ant(cemu) as c:
        first = _ask(c, system=_system())
        second = _ask(c, system=_system(), messages=[{"role": "user", "content": "another question"}])
    assert first.cache_read_input_tokens == 0 and first.cache_creation_input_tokens > 1024
    assert first.cache_creation.ephemeral_5m_input_tokens == first.cache_creation_input_tokens
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens == 0
    total = second.input_tokens + second.cache_read_input_tokens + second.cache_creation_input_tokens
    assert second.input_tokens < 20 and total > second.cache_read_input_tokens


def test_one_hour_writes_are_split_and_outlive_five_minutes(cemu: Emulator) -> None:
    """ttl='1h' writes are reported as ephemeral_1h and still hit after 5 minutes."""
    with _ant(cemu) as c:
        first = _ask(c, system=_system("1h"))
        cemu.cache.advance(301)  # type: ignore[attr-defined]
        second = _ask(c, system=_system("1h"))
    assert first.cache_creation.ephemeral_1h_input_tokens == first.cache_creation_input_tokens > 0
    assert first.cache_creation.ephemeral_5m_input_tokens == 0
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens


def test_ttl_expires_and_is_refreshed_by_hits(cemu: Emulator) -> None:
    """5m entries expire after 300 s without use; each hit restarts the TTL."""
    with _ant(cemu) as c:
        _ask(c, system=_system())
        cemu.cache.advance(200)  # type: ignore[attr-defined]
        assert _ask(c, system=_system()).cache_read_input_tokens > 0
        cemu.cache.advance(200)  # 400 s after the write, 200 s after the hit
        assert _ask(c, system=_system()).cache_read_input_tokens > 0
        cemu.cache.advance(301)  # type: ignore[attr-defined]
        expired = _ask(c, system=_system())
    assert expired.cache_read_input_tokens == 0 and expired.cache_creation_input_tokens > 0


def test_below_minimum_caches_nothing_silently(cemu: Emulator) -> None:
    """A marked prefix shorter than the model's minimum gives two zero counters, no error."""
    with _ant(cemu) as c:
        for _ in range(2):
            usage = _ask(c, system=_system(text="Short system prompt."))
            assert usage.cache_read_input_tokens == 0 and usage.cache_creation_input_tokens == 0


def test_five_markers_is_the_api_400(cemu: Emulator) -> None:
    """A fifth cache_control block is rejected with the API's invalid_request_error message."""
    content = [{"type": "text", "text": f"part {i}", "cache_control": CC} for i in range(5)]
    with _ant(cemu) as c, pytest.raises(anthropic.BadRequestError) as err:
        _ask(c, messages=[{"role": "user", "content": content}])
    assert err.value.status_code == 400
    assert err.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "A maximum of 4 blocks with cache_control may be provided. Found 5." in str(err.value)


def test_top_level_cache_control_uses_a_slot(cemu: Emulator) -> None:
    """Four block markers plus a top-level cache_control make five: 400."""
    content = [{"type": "text", "text": f"part {i}", "cache_control": CC} for i in range(4)]
    with _ant(cemu) as c, pytest.raises(anthropic.BadRequestError, match="Found 5"):
        _ask(c, messages=[{"role": "user", "content": content}], cache_control=CC)


def test_one_hour_after_five_minutes_is_rejected(cemu: Emulator) -> None:
    """TTL ordering: a 1h marker may not follow a 5m marker."""
    tools = agent_tools()
    tools[-1] = dict(tools[-1], cache_control=CC)
    with _ant(cemu) as c, pytest.raises(anthropic.BadRequestError, match="1h"):
        _ask(c, tools=tools, system=_system("1h"))


def test_top_level_automatic_caching_moves_forward(cemu: Emulator) -> None:
    """Top-level cache_control marks the last block, so each turn reads the previous one."""
    history: list[dict[str, Any]] = [{"role": "user", "content": filler(1500)}]
    with _ant(cemu) as c:
        first = _ask(c, system=agent_system(), messages=history, cache_control=CC)
        history += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
        second = _ask(c, system=agent_system(), messages=history, cache_control=CC)
    assert first.cache_creation_input_tokens > 0
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens > 0


def test_lookback_is_twenty_blocks(cemu: Emulator) -> None:
    """A marker finds an entry 19 blocks back but not one 20 or more blocks back."""
    base = [{"type": "text", "text": filler(1200)}]

    def turn(extra: int) -> list[dict[str, Any]]:
        blocks = [*base, *({"type": "text", "text": f"note {i}"} for i in range(extra))]
        blocks[-1] = dict(blocks[-1], cache_control=CC)
        return [{"role": "user", "content": blocks}]

    with _ant(cemu) as c:
        _ask(c, messages=turn(0))
        assert _ask(c, messages=turn(19)).cache_read_input_tokens > 0
        cemu.cache.clear()  # type: ignore[attr-defined]
        _ask(c, messages=turn(0))
        assert _ask(c, messages=turn(20)).cache_read_input_tokens == 0


def test_tools_stay_cached_when_the_system_prompt_changes(cemu: Emulator) -> None:
    """Invalidation follows the prefix order: a system change keeps the tools entry."""
    tools = agent_tools()
    tools[-1] = dict(tools[-1], cache_control=CC)
    with _ant(cemu) as c:
        first = _ask(c, tools=tools, system=_system(text="A" + agent_system()))
        second = _ask(c, tools=tools, system=_system(text="B" + agent_system()))
    assert 0 < second.cache_read_input_tokens < first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens > 0


def test_cache_hits_cut_ttft() -> None:
    """Cached tokens skip prefill: the emulated TTFT drops on a hit."""
    timing = TimingModel(base_ttft=0.005, prefill_per_token=4e-5, decode_per_token=0.001, output_tokens=2)
    with Emulator(timing=timing, seed=1, cache_model=PromptCache()) as emu, _ant(emu) as c:
        times = []
        for _ in range(2):
            start = time.perf_counter()
            with c.messages.stream(model=MODEL, max_tokens=4, system=_system(text=agent_system() * 3),
                                   messages=[{"role": "user", "content": "hi"}]) as stream:  # fmt: skip
                next(iter(stream.text_stream))
                times.append(time.perf_counter() - start)
    assert times[1] < times[0] * 0.6


def test_openai_chat_caches_automatically_in_128_token_steps(cemu: Emulator) -> None:
    """Chat prompts of 1024+ tokens are cached; cached_tokens is 1024 + k·128 and in prompt_tokens."""
    messages = [{"role": "system", "content": agent_system()}, {"role": "user", "content": "q"}]
    with _oai(cemu) as c:
        first = c.chat.completions.create(model="gpt-4o", messages=messages).usage
        second = c.chat.completions.create(model="gpt-4o", messages=messages).usage
    assert first is not None and second is not None
    assert first.prompt_tokens_details is not None and first.prompt_tokens_details.cached_tokens == 0
    cached = second.prompt_tokens_details.cached_tokens if second.prompt_tokens_details else None
    assert cached is not None and cached >= 1024 and (cached - 1024) % 128 == 0 and cached <= second.prompt_tokens


def test_openai_short_prompts_are_not_cached(cemu: Emulator) -> None:
    """Below 1024 tokens nothing is cached."""
    messages = [{"role": "user", "content": "short"}]
    with _oai(cemu) as c:
        for _ in range(2):
            usage = c.chat.completions.create(model="gpt-4o", messages=messages).usage
            assert usage is not None and usage.prompt_tokens_details is not None
            assert usage.prompt_tokens_details.cached_tokens == 0


def test_openai_prompt_cache_key_routes(cemu: Emulator) -> None:
    """The same prompt under another prompt_cache_key lands elsewhere and misses; Responses reports it too."""
    with _oai(cemu) as c:
        c.responses.create(model="gpt-4o", instructions=agent_system(), input="q", prompt_cache_key="a")
        same = c.responses.create(model="gpt-4o", instructions=agent_system(), input="q", prompt_cache_key="a")
        other = c.responses.create(model="gpt-4o", instructions=agent_system(), input="q", prompt_cache_key="b")
    assert same.usage is not None and same.usage.input_tokens_details.cached_tokens >= 1024
    assert other.usage is not None and other.usage.input_tokens_details.cached_tokens == 0


def test_capacity_is_bounded() -> None:
    """The cache holds at most `capacity` entries, evicting the least recently used."""
    cache = PromptCache(capacity=3)
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": filler(2000)}]}
    cache.lookup("openai-chat", body, 2000)
    assert len(cache) == 3
    assert cache.lookup("openai-chat", body, 2000).cached_tokens > 0
