"""The pure core of OpenAI breakpoints: the model rule, the budget, the edit, the expectation, prices, diagnoses, the cut."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import latencykit as lk
from latencykit.core._cache_facts import accepts_breakpoints, cache_prices
from latencykit.core._diagnosis import diagnosis_agrees
from latencykit.core._fingerprint import Fingerprinter
from latencykit.core._openai_breakpoints import apply_breakpoints, plan_breakpoints
from latencykit.core._openai_verify import expect_breakpoints
from latencykit.core._prewarm import prewarm_request
from latencykit.core._segments import parse

from _cache_shapes import agent_system, filler

FP = Fingerprinter(b"test")


@pytest.mark.parametrize(
    "model, takes",
    [("gpt-5.6", True), ("gpt-5.6-mini-2026-09-01", True), ("gpt-6", True), ("gpt-6.2-astra", True), ("ft:gpt-5.6:org::x", True),
     ("gpt-5.5", False), ("gpt-5-mini", False), ("gpt-4o", False), ("o3", False), ("llama-3-70b", False)],
)  # fmt: skip
def test_the_model_rule(model: str, takes: bool) -> None:
    """``gpt-5.6`` and later take breakpoints, by the version in the name; nothing else does."""
    assert accepts_breakpoints(model) is takes


def chat(parts: int, *, marked: tuple[int, ...] = ()) -> dict[str, Any]:
    content = [{"type": "text", "text": f"doc {k} " + filler(400, f"d{k}"), **({"prompt_cache_breakpoint": {"mode": "explicit"}} if k in marked else {})}
               for k in range(parts)]  # fmt: skip
    return {"model": "gpt-5.6", "messages": [{"role": "system", "content": agent_system()}, {"role": "user", "content": content}]}


def test_budget_counts_the_callers_breakpoints_and_the_implicit_one() -> None:
    """Implicit mode: 3 explicit in all (the caller's first); explicit mode: 4; never on the implicit one's block."""
    shape = parse("chat.completions", chat(6, marked=(1,)), FP, parts="30m")
    wanted = list(range(len(shape.blocks) - 1, -1, -1))
    plan = plan_breakpoints(shape, wanted, explicit_mode=False)
    assert plan.explicit == 3 and plan.limited and plan.implicit == len(shape.blocks) - 1
    assert len(plan.written) == 4 and plan.implicit in dict(plan.written)
    assert all(shape.blocks[i].path[0] == "messages" for i, _ in plan.added)
    explicit = plan_breakpoints(shape, wanted, explicit_mode=True)
    assert explicit.explicit == 4 and explicit.implicit == -1 and len(explicit.written) == 4


def test_apply_copies_only_the_path_and_keeps_the_prompt() -> None:
    """The caller's request is untouched; a string content becomes the one text part it stands for."""
    request = chat(2)
    before = copy.deepcopy(request)
    shape = parse("chat.completions", request, FP, parts="30m")
    sent = apply_breakpoints(request, shape, [(0, None), (2, "12h")])
    assert request == before
    assert sent["messages"][0]["content"] == [{"type": "text", "text": agent_system(), "prompt_cache_breakpoint": {"mode": "explicit"}}]
    assert sent["messages"][1]["content"][1]["prompt_cache_breakpoint"] == {"mode": "explicit", "ttl": "12h"}
    assert sent["messages"][1]["content"][0] is request["messages"][1]["content"][0]


def test_expectation_reasons() -> None:
    """No breakpoint at all (explicit mode), an expired prefix, a prefix outside the window."""
    shape = parse("chat.completions", chat(3), FP, parts="30m")
    none = plan_breakpoints(shape, [], explicit_mode=True)
    assert expect_breakpoints(shape, [None] * len(shape.blocks), none).reason == "no_breakpoint"
    plan = plan_breakpoints(shape, [0], explicit_mode=False)
    expired = expect_breakpoints(shape, ["expired"] + [None] * (len(shape.blocks) - 1), plan)
    assert (expired.expected_tokens, expired.reason) == (0, "ttl_expired")
    live = expect_breakpoints(shape, ["live"] + [None] * (len(shape.blocks) - 1), plan)
    assert live.expected_tokens == shape.blocks[0].prefix_tokens and live.reason is None
    narrow = expect_breakpoints(shape, ["live"] + [None] * (len(shape.blocks) - 1), plan, window=1)
    assert (narrow.expected_tokens, narrow.reason) == (0, "outside_window")


def test_prices() -> None:
    """GPT-5.6 writes cost 1.25×, older OpenAI models' nothing extra; Anthropic as before; overrides by model name."""
    assert cache_prices("openai", "gpt-5.6")["write_5m"] == 1.25
    assert cache_prices("openai", "gpt-4o")["write_5m"] == 1.0
    assert cache_prices("anthropic", "claude-sonnet-5")["write_1h"] == 2.0
    assert cache_prices("openai", "gpt-5.6", {"gpt-5.6": {"read": 0.5}}) == {"read": 0.5, "write_5m": 1.25, "write_1h": 1.25}


def test_diagnosis_agreement() -> None:
    """A server hit agrees with a read; a named miss with latencykit's change in the same segment; no verdict is neither."""
    rec = lk.CallRecord(provider="openai", operation="chat", request_model="gpt-5.6", cache_verdict="hit", server_cache_miss_reason="cache_hit")
    assert diagnosis_agrees(rec) is True
    rec = lk.CallRecord(provider="openai", operation="chat", request_model="gpt-5.6", cache_verdict="write",
                        cache_miss_reason="prefix_changed", server_cache_miss_reason="input_changed", extra={"cache_changed_segment": "message 0"})  # fmt: skip
    assert diagnosis_agrees(rec) is True
    rec.server_cache_miss_reason = "tools_changed"
    assert diagnosis_agrees(rec) is False
    rec.server_cache_miss_reason = "comparison_response_not_found"
    assert diagnosis_agrees(rec) is None
    rec = lk.CallRecord(provider="anthropic", operation="chat", request_model="m", cache_verdict="write", cache_miss_reason="prefix_changed",
                        server_cache_miss_reason="system_changed", extra={"cache_changed_segment": "system"})  # fmt: skip
    assert diagnosis_agrees(rec) is True


def test_prewarm_cut() -> None:
    """Cut after the last retrieved document: the question goes; Chat asks one token, Responses ``prewarm: true``."""
    request = {**chat(3), "stream": True, "max_tokens": 500}
    shape = parse("chat.completions", request, FP, parts="30m")
    warm = prewarm_request("chat.completions", request, shape, 3)
    assert [len(m["content"]) if isinstance(m["content"], list) else 1 for m in warm["messages"]] == [1, 3]
    assert warm["max_completion_tokens"] == 1 and "max_tokens" not in warm and "stream" not in warm
    responses = {"model": "gpt-5.6", "instructions": agent_system(), "input": "Q", "prompt_cache_options": {"ttl": "12h"}}
    rshape = parse("responses", responses, FP, parts="12h")
    rwarm = prewarm_request("responses", responses, rshape, 0)
    assert "input" not in rwarm and rwarm["prompt_cache_options"] == {"ttl": "12h", "prewarm": True}
