"""OpenAI GPT-5.6 explicit prompt caching (sync): breakpoints placed, verified, priced, pre-warmed (issue 35)."""

from __future__ import annotations

import copy
import logging
from typing import Any

import openai
import pytest

import latencykit as lk
from latencykit.emulator import Emulator

from _cache_shapes import Clock, agent_system, cemu, filler  # noqa: F401
from _openai_cache_shapes import (
    APIS, BP, JUDGED_FROM, SHAPES, count_breakpoints, new_fields, oracle_openai, run_family, second_sight, shape_gap, shape_requests,
)
from _rejecting_server import RejectingServer

CALLS = 8


def family(emu: Emulator, api: str, requests: list[dict[str, Any]], gap: float, cache: Any) -> tuple[list[lk.CallRecord], lk.CacheReport, list[Any]]:
    """One family through a latencykit client (fresh cache): its records, cache report and the bodies sent."""
    emu.cache.clear()  # type: ignore[attr-defined]
    clock = Clock(emu)
    policy = cache if isinstance(cache, str) else lk.CachePolicy(clock=clock, **cache)
    first = len(emu.requests)
    with lk.OpenAI(base_url=emu.base_url + "/v1", api_key="x", cache=policy) as c:
        records = run_family(c, api, requests, clock, gap)
        report = c.latency.cache_report()
    return records, report, [r.body for r in emu.requests[first:]]


def server_usage(emu: Emulator, api: str, bodies: list[Any], gap: float) -> list[tuple[int, int]]:
    """``(cached, written)`` the server reports for ``bodies`` replayed through the raw SDK on a fresh cache."""
    emu.cache.clear()  # type: ignore[attr-defined]
    clock = Clock(emu)
    out = []
    with openai.OpenAI(base_url=emu.base_url + "/v1", api_key="x") as raw:
        for body in bodies:
            body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
            if api == "chat.completions":
                usage: Any = raw.chat.completions.create(**body).usage
                out.append((usage.prompt_tokens_details.cached_tokens, usage.prompt_tokens_details.cache_write_tokens))
            else:
                usage = raw.responses.create(**body).usage
                out.append((usage.input_tokens_details.cached_tokens, usage.input_tokens_details.cache_write_tokens))
            clock.advance(gap)
    return out


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("shape", SHAPES)
def test_shape_reads_what_the_oracle_reads(cemu: Emulator, shape: str, api: str) -> None:
    """From the second sight of the family's prompt (so also from the 5th call), ≥ 95% of the oracle's reads on every call; ≤ 3 explicit breakpoints (4 with the
    implicit one); the caller's requests untouched; records and report totals equal the server's usage."""
    requests, gap = shape_requests(shape, api, CALLS), shape_gap(shape)
    before = copy.deepcopy(requests)
    oracle, _, _ = family(cemu, api, oracle_openai(api, requests), gap, "off")
    records, report, bodies = family(cemu, api, requests, gap, {})
    assert requests == before
    off, _, _ = family(cemu, api, requests, gap, "off")
    for i in range(second_sight(shape), CALLS):
        assert (oracle[i].cache_read_tokens or 0) > 1000
        assert (records[i].cache_read_tokens or 0) >= 0.95 * (oracle[i].cache_read_tokens or 0), (i, records[i])
    assert all(count_breakpoints(b) <= 3 and b["prompt_cache_key"].startswith("lk-") for b in bodies)
    assert [(r.cache_read_tokens, r.cache_write_tokens) for r in records] == server_usage(cemu, api, bodies, gap)
    assert report.tokens_read == sum(r.cache_read_tokens or 0 for r in records)
    assert report.tokens_written == sum(r.cache_write_tokens or 0 for r in records)
    assert {r.cache_verdict for r in records[JUDGED_FROM:]} == {"hit"}
    if shape != "conversation":  # OpenAI's implicit breakpoint alone caches a growing conversation only
        assert sum(r.cache_read_tokens or 0 for r in off) == 0
        assert {r.cache_miss_reason for r in off} == {"no_breakpoint"}


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-5-mini"])
@pytest.mark.parametrize("api", APIS)
def test_older_models_get_no_new_fields(cemu: Emulator, model: str, api: str) -> None:
    """Models before GPT-5.6 are planned as before: a derived prompt_cache_key, no breakpoint, no options."""
    requests = shape_requests("RAG", api, 4, model=model)
    records, _, bodies = family(cemu, api, requests, 0.0, {})
    assert not any(new_fields(b) for b in bodies)
    assert all(b["prompt_cache_key"].startswith("lk-") for b in bodies)
    assert (records[-1].cache_read_tokens or 0) > 0


@pytest.mark.parametrize("api", APIS)
def test_callers_breakpoints_and_explicit_mode_are_kept(cemu: Emulator, api: str) -> None:
    """The caller's breakpoint (its TTL) and ``mode: "explicit"`` go out as written; ours fill the budget of 4 only."""
    requests = shape_requests("RAG", api, 6)
    items = "messages" if api == "chat.completions" else "input"
    for req in requests:
        req[items][1]["content"][0]["prompt_cache_breakpoint"] = {"mode": "explicit", "ttl": "12h"}
        req["prompt_cache_options"] = {"mode": "explicit"}
    records, _, bodies = family(cemu, api, requests, 0.0, {})
    for body in bodies:
        assert body["prompt_cache_options"]["mode"] == "explicit"
        assert body[items][1]["content"][0]["prompt_cache_breakpoint"] == {"mode": "explicit", "ttl": "12h"}
        assert 2 <= count_breakpoints(body) <= 4
    assert (records[-1].cache_read_tokens or 0) >= 0.95 * (records[-1].input_tokens or 0) - 20


def test_explicit_mode_without_breakpoints_caches_nothing_and_says_why(cemu: Emulator) -> None:
    """``mode: "explicit"`` with ``cache="off"``: nothing is cached, every call is a miss for want of a breakpoint."""
    requests = [{**r, "prompt_cache_options": {"mode": "explicit"}} for r in shape_requests("agent", "chat.completions", 4)]
    records, report, _ = family(cemu, "chat.completions", requests, 0.0, "off")
    assert all(r.cache_read_tokens == 0 and r.cache_write_tokens == 0 for r in records)
    assert {(r.cache_verdict, r.cache_miss_reason) for r in records} == {("expected_miss", "no_breakpoint")}
    assert report.miss_reasons == [("no_breakpoint", 4)]


def test_cache_off_misses_are_no_breakpoint_not_eviction(cemu: Emulator, caplog: pytest.LogCaptureFixture) -> None:
    """With latencykit's breakpoints off, the implicit writes are never read: "no breakpoint", no eviction warning;
    the report prices those writes (1.25×) so nothing is saved."""
    caplog.set_level(logging.WARNING, logger="latencykit")
    records, report, _ = family(cemu, "responses", shape_requests("agent", "responses", 6), 0.0, "off")
    assert {r.cache_miss_reason for r in records} == {"no_breakpoint"}
    assert "unexpected_miss" not in report.verdicts and not caplog.records
    assert report.saved_tokens < 0 and report.tokens_written_unread == report.tokens_written


def test_report_prices_writes_and_counts_unread_ones(cemu: Emulator) -> None:
    """Writes cost 1.25× on GPT-5.6: the premium is a quarter of the tokens written; only the implicit tail writes go unread."""
    records, report, _ = family(cemu, "chat.completions", shape_requests("agent", "chat.completions", 6), 0.0, {})
    written = sum(r.cache_write_tokens or 0 for r in records)
    assert report.write_premium_tokens == pytest.approx(0.25 * written)
    assert report.saved_tokens == pytest.approx(0.9 * report.tokens_read - 0.25 * written)
    assert records[0].extra["cache_write_read_back"] is True
    assert report.tokens_written_unread == sum(r.cache_write_tokens or 0 for r in records[1:])  # the question, each call
    assert "write premium paid" in str(report)


def test_ttl_12h_keeps_the_prefix_past_30_minutes(cemu: Emulator) -> None:
    """``CachePolicy(ttl="12h")`` writes 12-hour breakpoints (Responses: ``prompt_cache_options.ttl``); the default 30m
    expires after 31 minutes and the miss says ``ttl_expired``."""
    requests = shape_requests("agent", "responses", 3)
    for ttl, read in (("12h", True), (None, False)):
        cemu.cache.clear()  # type: ignore[attr-defined]
        clock = Clock(cemu)
        with lk.OpenAI(base_url=cemu.base_url + "/v1", api_key="x", cache=lk.CachePolicy(ttl=ttl, clock=clock)) as c:
            c.responses.create(**requests[0])
            clock.advance(31 * 60)
            c.responses.create(**requests[1])
            rec = c.latency.last
        assert rec is not None
        sent = cemu.requests[-1].body
        assert (sent.get("prompt_cache_options") or {}).get("ttl") == ttl
        assert ((rec.cache_read_tokens or 0) > 3000) is read
        assert rec.cache_miss_reason == (None if read else "ttl_expired")
        assert sent["input"][0]["content"][0]["prompt_cache_breakpoint"] == ({"mode": "explicit", "ttl": "12h"} if ttl else BP)


def test_a_prefix_outside_the_80_breakpoint_window_is_explained(cemu: Emulator) -> None:
    """A live 12-hour prefix behind 85 later breakpoints is not matched: the server reads nothing and latencykit
    says ``outside_window``."""
    system = {"role": "developer", "content": [{"type": "input_text", "text": agent_system(), "prompt_cache_breakpoint": {"mode": "explicit", "ttl": "12h"}}]}
    notes = [{"type": "input_text", "text": f"note {k}: " + filler(20, f"n{k}"), "prompt_cache_breakpoint": BP} for k in range(85)]
    clock = Clock(cemu)
    with lk.OpenAI(base_url=cemu.base_url + "/v1", api_key="x", cache=lk.CachePolicy("off", clock=clock)) as c:
        c.responses.create(model="gpt-5.6", input=[system, {"role": "user", "content": "Hi"}])
        clock.advance(3600)
        c.responses.create(model="gpt-5.6", input=[system, {"role": "user", "content": [*notes, {"type": "input_text", "text": "Hi"}]}])
        rec = c.latency.last
    assert rec is not None and rec.cache_read_tokens == 0
    assert (rec.cache_verdict, rec.cache_miss_reason) == ("write", "outside_window")


def test_diagnose_agrees_with_the_server_on_changed_tools_and_input(cemu: Emulator) -> None:
    """``CachePolicy(diagnose=True)`` asks for the server's verdict against the family's previous response;
    on a changed tool and a changed system prompt both sides name the same change; none disagree."""
    requests = shape_requests("agent", "responses", 6)
    tools = copy.deepcopy(requests[3]["tools"])
    tools[-1]["description"] = "A changed tool."
    requests[3]["tools"] = tools
    requests[5]["input"][0] = {"role": "developer", "content": agent_system("Edited. ")}
    records, report, bodies = family(cemu, "responses", requests, 0.0, {"diagnose": True})
    assert "prompt_cache_options" not in bodies[0]
    assert all(b["prompt_cache_options"]["comparison_response_id"] == r.response_id for b, r in zip(bodies[1:], records))
    assert (records[3].cache_miss_reason, records[3].extra["cache_changed_segment"], records[3].server_cache_miss_reason) == (
        "prefix_changed", "tools", "tools_changed")
    assert (records[5].cache_miss_reason, records[5].server_cache_miss_reason) == ("prefix_changed", "input_changed")
    assert records[1].server_cache_miss_reason == "cache_hit"
    assert (report.diagnosed, report.diagnosis_disagreements) == (5, 0)


def test_a_server_that_rejects_the_fields_is_learned_per_base_url(cemu: Emulator) -> None:
    """A compatible server's 400 ``unknown_parameter``: the call is resent as the caller wrote it, within one record;
    later calls to that base URL carry no new field; another base URL still gets breakpoints."""
    requests = shape_requests("agent", "chat.completions", 3)
    policy = lk.CachePolicy()
    with RejectingServer(cemu.base_url) as srv:
        with lk.OpenAI(base_url=srv.base_url + "/v1", api_key="x", cache=policy) as c:
            for req in requests:
                c.chat.completions.create(**req)
            records = c.latency.calls
        assert srv.rejected == 1 and srv.forwarded == 3
    assert len(records) == 3 and all(r.outcome == "completed" for r in records)
    assert records[0].extra["prompt_cache_breakpoints_rejected"] is True
    assert not any(new_fields(r.body) for r in cemu.requests[-3:])
    with lk.OpenAI(base_url=cemu.base_url + "/v1", api_key="x", cache=policy) as direct:
        direct.chat.completions.create(**requests[0])
    assert count_breakpoints(cemu.requests[-1].body) == 1


@pytest.mark.parametrize("api", APIS)
def test_prewarm_fills_the_cache_for_the_first_call(cemu: Emulator, api: str) -> None:
    """``client.latency.prewarm(**request)`` writes the static prefix (Responses: ``prewarm: true``, nothing generated;
    Chat: one token); the first real call reads it."""
    request = shape_requests("agent", api, 1)[0]
    with lk.OpenAI(base_url=cemu.base_url + "/v1", api_key="x") as c:
        warm = c.latency.prewarm(**request)
        sent = cemu.requests[-1].body
        (c.chat.completions.create if api == "chat.completions" else c.responses.create)(**request)
        first = c.latency.last
    assert warm is not None and warm.method == "prewarm" and warm.extra["prewarm"] is True
    assert (warm.cache_write_tokens or 0) > 3000 and warm.cache_verdict == "write"
    items = sent["messages" if api == "chat.completions" else "input"]
    assert len(items) == 1 and items[0]["content"][0]["prompt_cache_breakpoint"] == BP
    if api == "responses":
        assert sent["prompt_cache_options"] == {"prewarm": True} and warm.output_tokens == 0
    else:
        assert sent["max_completion_tokens"] == 1
    assert first is not None and first.cache_verdict == "hit" and first.cache_read_tokens == warm.cache_write_tokens


def test_prewarm_on_anthropic_sends_a_one_token_call_with_markers(cemu: Emulator) -> None:
    """Anthropic: tools and system with their markers, a one-character user message after them, ``max_tokens: 1``."""
    from _cache_shapes import MODEL, agent_tools

    request = {"model": MODEL, "max_tokens": 64, "tools": agent_tools(), "system": agent_system(),
               "messages": [{"role": "user", "content": "What changed?"}]}  # fmt: skip
    with lk.Anthropic(base_url=cemu.base_url, api_key="x") as c:
        warm = c.latency.prewarm(**request)
        sent = cemu.requests[-1].body
        c.messages.create(**request)
        first = c.latency.last
    assert sent["max_tokens"] == 1 and sent["messages"] == [{"role": "user", "content": "."}]
    assert warm is not None and (warm.cache_write_tokens or 0) > 4000
    assert first is not None and first.cache_read_tokens == warm.cache_write_tokens and first.cache_verdict == "hit"


def test_prewarm_of_an_older_model_or_a_plain_recorder(cemu: Emulator) -> None:
    """Nothing to pre-warm before GPT-5.6 (no breakpoint ends a prefix): ``None``, nothing sent; a Recorder of its
    own has no client to send through."""
    with lk.OpenAI(base_url=cemu.base_url + "/v1", api_key="x") as c:
        sent = len(cemu.requests)
        assert c.latency.prewarm(**shape_requests("agent", "chat.completions", 1, model="gpt-4o")[0]) is None
        assert len(cemu.requests) == sent
    with pytest.raises(ValueError, match="client.latency.prewarm"):
        lk.Recorder().prewarm(model="gpt-5.6")
    with pytest.raises(ValueError, match="ttl must be"):
        lk.CachePolicy(ttl="1d")


def test_a_rejected_call_sent_as_a_whole_is_resent_too(cemu: Emulator) -> None:
    """``responses.parse`` (sent unstreamed) to a server that rejects the fields: resent as written, one record."""
    request = shape_requests("agent", "responses", 1)[0]
    with RejectingServer(cemu.base_url) as srv:
        with lk.OpenAI(base_url=srv.base_url + "/v1", api_key="x") as c:
            parsed = c.responses.parse(**request)
            records = c.latency.calls
        assert (srv.rejected, srv.forwarded) == (1, 1)
    assert parsed.status == "completed" and len(records) == 1
    assert records[0].method == "parse" and records[0].extra["prompt_cache_breakpoints_rejected"] is True


def test_ttl_1h_on_anthropic_marks_latencykits_markers_1h(cemu: Emulator) -> None:
    """``CachePolicy(ttl="1h")`` on Anthropic: latencykit's markers carry ``ttl: 1h`` (none after a caller's 5m marker),
    written as 1-hour entries; the report prices them 2×."""
    from _cache_shapes import MODEL, agent_tools

    request = {"model": MODEL, "max_tokens": 8, "tools": agent_tools(), "system": agent_system(),
               "messages": [{"role": "user", "content": "What changed?"}]}  # fmt: skip
    with lk.Anthropic(base_url=cemu.base_url, api_key="x", cache=lk.CachePolicy(ttl="1h")) as c:
        c.messages.create(**request)
        rec = c.latency.last
        report = c.latency.cache_report()
    sent = cemu.requests[-1].body
    assert sent["tools"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert sent["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert rec is not None and rec.extra["cache_write_1h_tokens"] == rec.cache_write_tokens
    assert report.write_premium_tokens == pytest.approx(1.0 * (rec.cache_write_tokens or 0))


def test_latency_is_the_recorder_given_and_prewarm_goes_through_the_asking_client(cemu: Emulator) -> None:
    """``client.latency`` is the very Recorder passed as ``recorder=`` (DESIGN's contract), shared by two clients
    of two servers; ``prewarm`` on it goes to the server of the client whose ``.latency`` was asked for."""
    shared = lk.Recorder()
    request = shape_requests("agent", "responses", 1)[0]
    with Emulator() as other, lk.OpenAI(base_url=cemu.base_url + "/v1", api_key="x", recorder=shared) as a, \
            lk.OpenAI(base_url=other.base_url + "/v1", api_key="x", recorder=shared) as b:  # fmt: skip
        assert a.latency is shared and b.latency is shared and a.with_options(timeout=5).latency is shared
        seen_a, seen_b = len(cemu.requests), len(other.requests)
        warm_b = b.latency.prewarm(**request)
        warm_a = a.latency.prewarm(**request)
        assert warm_a is not None and warm_b is not None and shared.last is warm_a
        assert len(cemu.requests) == seen_a + 1 and len(other.requests) == seen_b + 1
        assert warm_b.server_port == int(other.base_url.rsplit(":", 1)[1])
