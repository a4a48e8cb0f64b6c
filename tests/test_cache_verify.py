"""Cache verification: every verdict and miss reason, produced against the emulator through real SDK clients."""

from __future__ import annotations

import logging
from typing import Any, Iterator

import pytest

import latencykit as lk
from latencykit.core._verify import Expectation, judge
from latencykit.emulator import Emulator

from _cache_shapes import MODEL, Clock, agent_system, agent_tools, cemu, filler  # noqa: F401

CC: dict[str, Any] = {"type": "ephemeral"}


@pytest.fixture
def clock(cemu: Emulator) -> Clock:
    """The shared fake clock."""
    return Clock(cemu)


@pytest.fixture
def client(cemu: Emulator, clock: Clock) -> Iterator[lk.Anthropic]:
    """A latencykit Anthropic client with cache='auto' on the fake clock."""
    with lk.Anthropic(base_url=cemu.base_url, api_key="x", max_retries=0, cache=lk.CachePolicy(clock=clock)) as c:
        yield c


def ask(c: lk.Anthropic, *, tools: Any = None, system: Any = None, messages: Any = None, model: str = MODEL) -> lk.CallRecord:
    """One call with the agent shape by default; returns its record."""
    c.messages.create(
        model=model, max_tokens=8, tools=agent_tools() if tools is None else tools,
        system=agent_system() if system is None else system,
        messages=messages or [{"role": "user", "content": "hello"}],
    )  # fmt: skip
    rec = c.latency.last
    assert rec is not None
    return rec


def test_write_then_hit(client: lk.Anthropic) -> None:
    """First call writes, the next reads what the ledger expected."""
    first, second = ask(client), ask(client, messages=[{"role": "user", "content": "other"}])
    assert (first.cache_verdict, first.cache_miss_reason, first.cache_expected_tokens) == ("write", None, 0)
    assert second.cache_verdict == "hit" and second.cache_miss_reason is None
    assert second.cache_read_tokens and second.cache_expected_tokens
    assert abs(second.cache_read_tokens - second.cache_expected_tokens) < 0.05 * second.cache_read_tokens


def test_prefix_changed_tools(client: lk.Anthropic) -> None:
    """A changed tool definition invalidates everything: reported as prefix_changed in tools."""
    ask(client)
    rec = ask(client, tools=agent_tools(salt="v2 "))
    assert (rec.cache_verdict, rec.cache_miss_reason) == ("write", "prefix_changed")
    assert rec.extra["cache_changed_segment"] == "tools"


def test_prefix_changed_system_with_offset(client: lk.Anthropic) -> None:
    """A system edit keeps the tools read and is located by character offset."""
    ask(client)
    system = agent_system()
    rec = ask(client, system=system[:300] + "EDITED" + system[300:])
    assert (rec.cache_verdict, rec.cache_miss_reason) == ("partial", "prefix_changed")
    assert rec.extra["cache_changed_segment"] == "system"
    assert 300 - 16 < rec.extra["cache_changed_offset"] <= 300


def test_prefix_changed_message_k(client: lk.Anthropic) -> None:
    """Editing an earlier turn of a conversation is reported as that message."""
    history = [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}]
    ask(client, messages=history)
    edited = [{"role": "user", "content": "q1 (edited)"}, *history[1:], {"role": "assistant", "content": "a2"}, {"role": "user", "content": "q3"}]
    rec = ask(client, messages=edited)
    assert (rec.cache_verdict, rec.cache_miss_reason) == ("partial", "prefix_changed")
    assert rec.extra["cache_changed_segment"] == "message 0"


def test_prefix_changed_message_k_is_located_in_the_block(client: lk.Anthropic) -> None:
    """An edit inside an earlier, cached turn is located to within 16 characters of that message."""
    long_turn = filler(400)
    history = [{"role": "user", "content": long_turn}, {"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}]
    ask(client, messages=history)
    edited_turn = long_turn[:200] + "EDITED" + long_turn[200:]
    rec = ask(client, messages=[{"role": "user", "content": edited_turn}, *history[1:], {"role": "assistant", "content": "a2"}, {"role": "user", "content": "q3"}])
    assert (rec.cache_verdict, rec.cache_miss_reason, rec.extra["cache_changed_segment"]) == ("partial", "prefix_changed", "message 0")
    assert 200 - 16 < rec.extra["cache_changed_offset"] <= 200


def test_varying_question_after_the_last_breakpoint_gets_no_chunk_prints(client: lk.Anthropic) -> None:
    """Chunk prints (the costly part of learning) are made for what a later miss can be told
    about, not for a single-turn question that changes on every call."""
    policy = client._lk.planner
    assert isinstance(policy, lk.CachePolicy)
    for k in range(4):
        ask(client, messages=[{"role": "user", "content": f"question {k}: " + "why? " * 40}])
    kept = len(policy._families.prints._new) + len(policy._families.prints._old)
    for k in range(4, 12):
        rec = ask(client, messages=[{"role": "user", "content": f"question {k}: " + "why? " * 40}])
        assert rec.cache_verdict == "hit"
    assert len(policy._families.prints._new) + len(policy._families.prints._old) == kept


def test_prefix_changed_model(client: lk.Anthropic) -> None:
    """Switching models misses everything: reported as a model change."""
    ask(client)
    rec = ask(client, model="claude-opus-5")
    assert (rec.cache_verdict, rec.cache_miss_reason) == ("write", "prefix_changed")
    assert rec.extra["cache_changed_segment"] == "model"


def test_ttl_expired(client: lk.Anthropic, clock: Clock) -> None:
    """Past the 5-minute TTL the prefix is written again: ttl_expired."""
    ask(client)
    clock.advance(301)
    rec = ask(client)
    assert (rec.cache_verdict, rec.cache_miss_reason) == ("write", "ttl_expired")


def test_below_minimum(client: lk.Anthropic) -> None:
    """A prompt shorter than the model's minimum is an expected miss: below_minimum."""
    rec = ask(client, tools=[], system="Be brief.")
    assert (rec.cache_verdict, rec.cache_miss_reason) == ("expected_miss", "below_minimum")


def test_no_breakpoint(cemu: Emulator) -> None:
    """cache='off' and no caller markers: expected_miss, no_breakpoint."""
    with lk.Anthropic(base_url=cemu.base_url, api_key="x", cache="off") as c:
        rec = ask(c)
    assert (rec.cache_verdict, rec.cache_miss_reason) == ("expected_miss", "no_breakpoint")


def test_beyond_lookback(cemu: Emulator, clock: Clock) -> None:
    """A caller marker more than 20 blocks after the cached prefix cannot find it: beyond_lookback."""
    head = [{"type": "text", "text": filler(1500)}]

    def turn(extra: int) -> list[dict[str, Any]]:
        blocks = [*head, *({"type": "text", "text": f"note {i}"} for i in range(extra))]
        blocks[-1] = dict(blocks[-1], cache_control=CC)
        return [{"role": "user", "content": blocks}]

    with lk.Anthropic(base_url=cemu.base_url, api_key="x", cache=lk.CachePolicy("off", clock=clock)) as c:
        assert ask(c, tools=[], system="s", messages=turn(0)).cache_verdict == "write"
        rec = ask(c, tools=[], system="s", messages=turn(25))
    assert (rec.cache_verdict, rec.cache_miss_reason) == ("write", "beyond_lookback")


def test_marker_limit(client: lk.Anthropic) -> None:
    """Four caller markers on the dynamic message leave no slot for the static prefix: marker_limit."""

    def dynamic(i: int) -> list[dict[str, Any]]:
        return [{"role": "user", "content": [{"type": "text", "text": f"q{i} part {j}", "cache_control": CC} for j in range(4)]}]

    ask(client, messages=dynamic(0))
    rec = ask(client, messages=dynamic(1))
    assert rec.cache_read_tokens == 0
    assert rec.cache_miss_reason == "marker_limit"


def test_not_changed_locally_warns_once(client: lk.Anthropic, cemu: Emulator, caplog: pytest.LogCaptureFixture) -> None:
    """An eviction the ledger cannot see is an unexpected miss, warned about once per interval."""
    ask(client)
    with caplog.at_level(logging.WARNING, logger="latencykit"):
        for _ in range(2):
            cemu.cache.clear()  # type: ignore[attr-defined]
            rec = ask(client)
            assert (rec.cache_verdict, rec.cache_miss_reason) == ("unexpected_miss", "not_changed_locally")
    warnings = [r for r in caplog.records if "unexpected prompt-cache miss" in r.getMessage()]
    assert len(warnings) == 1 and "sk-" not in warnings[0].getMessage()


def test_openai_verdicts(cemu: Emulator) -> None:
    """OpenAI: the first long prompt writes (implicitly), the next reads; short prompts are below_minimum."""
    with lk.OpenAI(base_url=cemu.base_url + "/v1", api_key="x") as c:
        recs = []
        for i in range(2):
            c.chat.completions.create(model="gpt-4o", messages=[{"role": "system", "content": agent_system()}, {"role": "user", "content": f"q{i}"}])
            recs.append(c.latency.last)
        c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "short"}])
        short = c.latency.last
    assert [r.cache_verdict for r in recs if r] == ["write", "hit"]
    assert short is not None and (short.cache_verdict, short.cache_miss_reason) == ("expected_miss", "below_minimum")


def test_diagnostics_request_the_previous_message(cemu: Emulator) -> None:
    """diagnostics=True sends previous_message_id (null on the first call) to Anthropic's cache diagnostics."""
    with lk.Anthropic(base_url=cemu.base_url, api_key="x", cache=lk.CachePolicy(diagnostics=True)) as c:
        first = ask(c)
        ask(c)
    bodies = [r.body for r in cemu.requests[-2:]]
    assert bodies[0]["diagnostics"] == {"previous_message_id": None}
    assert bodies[1]["diagnostics"] == {"previous_message_id": first.response_id}


@pytest.mark.parametrize(
    ("expected", "read", "write", "verdict"),
    [(0, None, None, "not_reported"), (100, 100, 0, "hit"), (1000, 100, 0, "partial"), (100, 0, 50, "unexpected_miss"), (0, 0, 50, "write")],
)
def test_judge_table(expected: int, read: Any, write: Any, verdict: str) -> None:
    """The verdict table, on plain numbers."""
    assert judge(Expectation(expected, -1, eligible=True), read, write)[0] == verdict


def test_cache_report(client: lk.Anthropic) -> None:
    """cache_report(): hit rates by tokens and calls, savings, reasons; text, dict and HTML."""
    for i in range(4):
        ask(client, messages=[{"role": "user", "content": f"q{i}"}])
    ask(client, tools=agent_tools(salt="v2 "))
    report = client.latency.cache_report()
    assert report.calls == 5 and report.calls_reporting == 5
    assert report.hit_rate_calls == pytest.approx(3 / 5)
    assert report.hit_rate_tokens is not None and 0.4 < report.hit_rate_tokens < 0.7
    assert report.saved_tokens > 0 and report.verdicts["hit"] == 3
    assert report.miss_reasons[0] == ("prefix_changed (tools)", 1)
    assert "hit rate by tokens" in str(report) and "<table>" in report._repr_html_()
    assert report.to_dict()["tokens_read"] == report["tokens_read"] > 0
