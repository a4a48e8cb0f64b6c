"""The emulator's GPT-5.6 prompt-cache rules, through the raw openai SDK (docs/emulator.md)."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from latencykit.emulator import Emulator

from _cache_shapes import agent_system, cemu, filler  # noqa: F401

BP: dict[str, Any] = {"mode": "explicit"}


def part(text: str, bp: Any = None) -> dict[str, Any]:
    return {"type": "input_text", "text": text, **({"prompt_cache_breakpoint": bp} if bp else {})}


def chat_part(text: str, bp: Any = None) -> dict[str, Any]:
    return {"type": "text", "text": text, **({"prompt_cache_breakpoint": bp} if bp else {})}


def respond(raw: openai.OpenAI, **body: Any) -> Any:
    return raw.responses.create(model=body.pop("model", "gpt-5.6"), max_output_tokens=8, **body)


@pytest.fixture
def raw(cemu: Emulator) -> Any:
    with openai.OpenAI(base_url=cemu.base_url + "/v1", api_key="x", max_retries=0) as client:
        yield client


def test_older_models_answer_400_unknown_parameter(raw: openai.OpenAI) -> None:
    """gpt-4o: 400 ``unknown_parameter`` naming the field (a breakpoint, or the options)."""
    with pytest.raises(openai.BadRequestError) as err:
        raw.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": [chat_part("hi", BP)]}])
    assert err.value.code == "unknown_parameter" and err.value.param == "messages[0].content[0].prompt_cache_breakpoint"
    with pytest.raises(openai.BadRequestError, match="prompt_cache_options"):
        raw.responses.create(model="gpt-5-mini", input="hi", extra_body={"prompt_cache_options": {"mode": "explicit"}})


def test_bad_values_and_chat_only_options_are_rejected(raw: openai.OpenAI) -> None:
    """Chat takes no ``prewarm`` and only ``ttl: 30m``; a breakpoint's mode is ``explicit``; ttls are 30m / 12h."""
    msgs = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.BadRequestError, match="prompt_cache_options.prewarm"):
        raw.chat.completions.create(model="gpt-5.6", messages=msgs, extra_body={"prompt_cache_options": {"prewarm": True}})
    with pytest.raises(openai.BadRequestError, match="Supported values are: '30m'"):
        raw.chat.completions.create(model="gpt-5.6", messages=msgs, extra_body={"prompt_cache_options": {"ttl": "12h"}})
    with pytest.raises(openai.BadRequestError, match="'30m', '12h'"):
        respond(raw, input=[{"role": "user", "content": [part("hi", {"mode": "explicit", "ttl": "1h"})]}])
    with pytest.raises(openai.BadRequestError, match="'explicit'") as err:
        respond(raw, input=[{"role": "user", "content": [part("hi", {"mode": "auto"})]}])
    assert err.value.param == "input[0].content[0].prompt_cache_breakpoint.mode" and err.value.code == "invalid_value"


def test_implicit_breakpoint_alone_caches_the_whole_prompt_only(raw: openai.OpenAI) -> None:
    """No explicit breakpoint: the implicit one at the end is written (reported, billed) but a new question never reads it;
    the same prompt again reads all of it, exactly (no 128-token steps)."""
    system = {"role": "developer", "content": agent_system()}
    first = respond(raw, input=[system, {"role": "user", "content": "Q1"}]).usage.input_tokens_details
    second = respond(raw, input=[system, {"role": "user", "content": "Q2"}]).usage.input_tokens_details
    again = respond(raw, input=[system, {"role": "user", "content": "Q2"}]).usage
    assert first.cached_tokens == 0 and first.cache_write_tokens > 2000
    assert second.cached_tokens == 0 and second.cache_write_tokens == first.cache_write_tokens
    assert again.input_tokens_details.cached_tokens == again.input_tokens and again.input_tokens % 128 != 0


def test_explicit_breakpoint_reads_the_static_prefix_and_string_equals_text_part(raw: openai.OpenAI) -> None:
    """A breakpoint at the end of the system prompt is read by the next question, whether that prompt is sent as a
    marked text part or as the plain string it stands for."""
    marked = {"role": "developer", "content": [part(agent_system(), BP)]}
    w = respond(raw, input=[marked, {"role": "user", "content": "Q1"}]).usage.input_tokens_details
    r = respond(raw, input=[{"role": "developer", "content": agent_system()}, {"role": "user", "content": "Q2"}]).usage
    assert w.cache_write_tokens > 2000
    assert r.input_tokens_details.cached_tokens >= r.input_tokens - 10


def test_the_latest_explicit_breakpoints_are_written(raw: openai.OpenAI) -> None:
    """Implicit mode writes the latest 3 explicit breakpoints (and its own); explicit mode the latest 4 and no other."""
    chunks = [part(f"chunk {k}: " + filler(1100, f"c{k}"), BP) for k in range(5)]
    plain = [part(c["text"]) for c in chunks]
    respond(raw, input=[{"role": "user", "content": [*chunks, part("end")]}])
    # chunks 2-4 were written, chunks 0 and 1 (not among the latest three) were not
    first = respond(raw, input=[{"role": "user", "content": [chunks[0], part("other")]}]).usage.input_tokens_details
    third = respond(raw, input=[{"role": "user", "content": [*plain[:2], chunks[2], part("other")]}]).usage.input_tokens_details
    second = respond(raw, input=[{"role": "user", "content": [plain[0], chunks[1], part("again")]}]).usage.input_tokens_details
    assert first.cached_tokens == 0 and third.cached_tokens > 3000
    assert 1000 < second.cached_tokens < 2000  # chunk 0, written by the first probe; chunk 1 never was
    none = respond(raw, input=[{"role": "user", "content": "x " * 3000}], extra_body={"prompt_cache_options": {"mode": "explicit"}})
    assert none.usage.input_tokens_details.cache_write_tokens == 0


def test_12h_writes_are_split_out_and_outlive_30m(cemu: Emulator, raw: openai.OpenAI) -> None:
    """``ttl: 12h`` (per breakpoint or request) is reported in ``cache_write_tokens_details`` and survives 31 minutes."""
    system = {"role": "developer", "content": [part(agent_system(), {"mode": "explicit", "ttl": "12h"})]}
    usage = respond(raw, input=[system, {"role": "user", "content": "Q1"}]).usage.model_dump()["input_tokens_details"]
    by_ttl = usage["cache_write_tokens_details"]  # read as data: SDKs before 3.60 do not model it
    assert by_ttl["ttl_12h_tokens"] > 2000
    assert by_ttl["ttl_12h_tokens"] + by_ttl["ttl_30m_tokens"] == usage["cache_write_tokens"]
    cemu.cache.advance(31 * 60)  # type: ignore[attr-defined]
    later = respond(raw, input=[system, {"role": "user", "content": "Q2"}]).usage.input_tokens_details
    assert later.cached_tokens > 2000


def test_prewarm_writes_without_generating(raw: openai.OpenAI) -> None:
    """``prewarm: true``: no output, the prefix written; the real call reads it."""
    system = {"role": "developer", "content": agent_system()}
    warm = respond(raw, input=[system], extra_body={"prompt_cache_options": {"prewarm": True}})
    assert warm.status == "completed" and warm.output == [] and warm.usage.output_tokens == 0
    assert warm.usage.input_tokens_details.cache_write_tokens > 2000
    real = respond(raw, input=[system, {"role": "user", "content": "Q"}])
    assert real.usage.input_tokens_details.cached_tokens == warm.usage.input_tokens_details.cache_write_tokens


def test_diagnostics_against_a_comparison_response(raw: openai.OpenAI) -> None:
    """``comparison_response_id``: hit, tools changed, input changed, not found; echoed in ``prompt_cache_options``."""
    tools = [{"type": "function", "name": "lookup", "description": "Look things up. " * 100, "parameters": {"type": "object"}}]
    system = {"role": "developer", "content": [part(agent_system(), BP)]}
    base = respond(raw, tools=tools, input=[system, {"role": "user", "content": "Q1"}])
    options = {"comparison_response_id": base.id}

    def diagnosis(tools: Any, first: Any, question: str, options: Any = options) -> Any:
        body = respond(raw, tools=tools, input=[first, {"role": "user", "content": question}], extra_body={"prompt_cache_options": options})
        return body.model_dump()  # read as data: SDKs before 3.60 do not model the diagnostics

    hit = diagnosis(tools, system, "Q2")
    assert hit["prompt_cache_diagnostics"] == {"type": "cache_hit"}
    assert hit["prompt_cache_options"]["comparison_response_id"] == base.id
    miss = diagnosis([{**tools[0], "description": "Other."}], system, "Q3")["prompt_cache_diagnostics"]
    assert (miss["type"], miss["reason"]) == ("cache_miss", "tools_changed") and miss["cache_missed_tokens"] > 2000
    edit = diagnosis(tools, {"role": "developer", "content": [part(agent_system("Other. "), BP)]}, "Q4")["prompt_cache_diagnostics"]
    assert (edit["type"], edit["reason"]) == ("cache_miss", "input_changed")
    lost = diagnosis(None, system, "Q5", {"comparison_response_id": "resp_unknown"})["prompt_cache_diagnostics"]
    assert lost == {"type": "comparison_response_not_found"}
