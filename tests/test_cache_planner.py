"""Breakpoint planning: placement rules, budget, TTL order, no mutation; hypothesis over random shapes."""

from __future__ import annotations

import copy
import logging
from typing import Any

import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

import latencykit as lk
from anthropic.types import message_create_params
from latencykit.providers._caching import _plain_size

from _cache_shapes import MODEL, agent_system, agent_tools, rotating_system, timestamp_system

CC: dict[str, Any] = {"type": "ephemeral"}
SECRET = b"test-secret"
_PARAMS = TypeAdapter(message_create_params.MessageCreateParamsNonStreaming)


def plan(req: dict[str, Any], policy: lk.CachePolicy | None = None) -> dict[str, Any]:
    """The request as the policy would send it."""
    policy = policy or lk.CachePolicy(secret=SECRET)
    sent, _ = policy("messages", req)
    return sent


def markers(req: dict[str, Any]) -> list[tuple[str, Any]]:
    """Every (where, cache_control) in prefix order; the top-level one last."""
    out: list[tuple[str, Any]] = []
    for i, tool in enumerate(req.get("tools") or []):
        if tool.get("cache_control") is not None:
            out.append((f"tool {i}", tool["cache_control"]))
    system = req.get("system")
    for j, block in enumerate(system if isinstance(system, list) else []):
        if block.get("cache_control") is not None:
            out.append((f"system {j}", block["cache_control"]))
    for m, message in enumerate(req["messages"]):
        content = message["content"]
        for b, block in enumerate(content if isinstance(content, list) else []):
            if isinstance(block, dict) and block.get("cache_control") is not None:
                out.append((f"message {m} block {b}", block["cache_control"]))
    if req.get("cache_control") is not None:
        out.append(("top", req["cache_control"]))
    return out


def unmarked(req: dict[str, Any]) -> Any:
    """``req`` without markers, with string contents as one text block: what the model reads."""

    out = _without_markers(req)
    if isinstance(out.get("system"), str):
        out["system"] = [{"type": "text", "text": out["system"]}]
    for message in out["messages"]:
        if isinstance(message["content"], str):
            message["content"] = [{"type": "text", "text": message["content"]}]
    return out


def agent(messages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The agent request: ~3k tokens of tools, ~2k of system."""
    return {
        "model": MODEL, "max_tokens": 8, "tools": agent_tools(), "system": agent_system(),
        "messages": messages or [{"role": "user", "content": "What is the weather?"}],
    }  # fmt: skip


def test_single_turn_marks_tools_and_system_only() -> None:
    """Single turn: the last tool and the system prompt get markers; the user message none."""
    sent = plan(agent())
    assert [w for w, _ in markers(sent)] == ["tool 11", "system 0"]
    assert sent["messages"][0]["content"] == "What is the weather?"


def test_multi_turn_marks_the_newest_message() -> None:
    """Multi-turn: the newest message's last block is marked too, so the next turn reads the history."""
    history = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "text", "text": "a1"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}, {"type": "text", "text": "q2"}]},
    ]
    assert [w for w, _ in markers(plan(agent(history)))] == ["tool 11", "system 0", "message 2 block 1"]


def test_thinking_blocks_are_never_marked() -> None:
    """A trailing thinking block is skipped; the marker goes on the previous markable block."""
    history = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "thinking", "thinking": "x", "signature": "s"}]},
    ]
    assert markers(plan(agent(history)))[-1][0] == "message 1 block 0"


def test_short_prefixes_get_no_marker() -> None:
    """Below the model's minimum nothing is marked; the table can be overridden per policy."""
    req = {"model": MODEL, "max_tokens": 8, "system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]}
    assert markers(plan(req)) == []
    assert markers(plan(req, lk.CachePolicy(min_tokens={"sonnet": 1}))) == [("system 0", CC)]


def test_caller_markers_count_against_the_budget() -> None:
    """Three caller markers plus a top-level one leave no slot: nothing is added, 4 in all."""
    req = agent([{"role": "user", "content": [{"type": "text", "text": f"p{i}", "cache_control": CC} for i in range(3)]}])
    req["cache_control"] = CC
    assert len(markers(plan(req))) == 4


def test_one_hour_order_is_kept() -> None:
    """Markers placed before a caller's 1h marker are 1h too, so 1h never follows 5m."""
    req = agent()
    req["messages"] = [{"role": "user", "content": [{"type": "text", "text": "q", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}]
    ttls = [cc.get("ttl", "5m") for _, cc in markers(plan(req))]
    assert ttls == ["1h", "1h", "1h"]


def test_caller_objects_are_not_mutated_and_only_changed_parts_are_copied() -> None:
    """The caller's request is untouched; unchanged messages are the very same objects."""
    history = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    req = agent(history)
    before = copy.deepcopy(req)
    sent = plan(req)
    assert req == before
    assert sent["messages"][0] is history[0] and sent["messages"][1] is history[1]
    assert sent["messages"][2] is not history[2]


def test_sdk_models_in_history_are_dumped_not_mutated() -> None:
    """Assistant content given as SDK models (a previous response's content) is marked on a dict copy."""
    from anthropic.types import TextBlock

    block = TextBlock(type="text", text="answer", citations=None)
    history = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [block]}]
    sent = plan(agent(history))
    assert sent["messages"][1]["content"][0] == {"type": "text", "text": "answer", "cache_control": CC}
    assert not hasattr(block, "cache_control") or block.cache_control is None  # type: ignore[attr-defined]


def test_generators_are_sent_as_given() -> None:
    """An iterator of messages is not consumed or planned: the request goes as given."""
    req = agent()
    req["messages"] = iter([{"role": "user", "content": "hi"}])
    assert plan(req) is req


def test_custom_strategy_and_off() -> None:
    """A plain function is a strategy; 'off' adds nothing; the budget still holds for greedy strategies."""
    assert [w for w, _ in markers(plan(agent(), lk.CachePolicy(lambda ctx: [0])))] == ["tool 0"]
    assert markers(plan(agent(), lk.CachePolicy("off"))) == []
    greedy = lk.CachePolicy(lambda ctx: list(range(len(ctx.shape.blocks))), min_tokens={"sonnet": 1})
    assert len(markers(plan(agent(), greedy))) == 4


def test_lookback_step_is_added_for_long_turns() -> None:
    """When a turn adds more than 20 blocks, an extra marker lands within the lookback of the cached prefix."""
    policy = lk.CachePolicy(secret=SECRET)
    history: list[dict[str, Any]] = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}, {"role": "user", "content": "q2"}]
    sent, finish = policy("messages", agent(history))
    rec = lk.CallRecord(provider="anthropic", operation="chat", request_model=MODEL)
    rec.cache_read_tokens, rec.cache_write_tokens = 0, 5000
    assert finish is not None
    finish(rec)
    results = [{"type": "tool_result", "tool_use_id": f"t{i}", "content": f"r{i}"} for i in range(30)]
    history += [{"role": "assistant", "content": "calling tools"}, {"role": "user", "content": results}]
    where = [w for w, _ in markers(plan(agent(history), policy))]
    assert len(where) == 4 and "message 4 block 29" in where
    step = [w for w in where if w.startswith("message 4") and w != "message 4 block 29"]
    assert step and int(step[0].rsplit(" ", 1)[1]) <= 17


@pytest.mark.parametrize("bad", ["on", 3, object()])
def test_bad_cache_option_is_a_value_error(bad: Any) -> None:
    """cache= is validated at the boundary and the error names the bad value."""
    with pytest.raises(ValueError, match="cache must be"):
        lk.Anthropic(api_key="x", cache=bad)


# ---------------------------------------------------------------------------------------
# Property tests over random request shapes

_words = st.sampled_from(["alpha", "beta", "gamma", "delta"])
_sizes = st.sampled_from([1, 3, 40, 400, 1500])


@st.composite
def _text(draw: Any) -> str:
    return (draw(_words) + " ") * draw(_sizes)


@st.composite
def _marker(draw: Any) -> dict[str, Any]:
    return draw(st.sampled_from([{}, {}, {}, {"cache_control": CC}, {"cache_control": {"type": "ephemeral", "ttl": "1h"}}]))


@st.composite
def _user_block(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["text", "text", "image", "document", "tool_result"]))
    if kind == "text":
        block: dict[str, Any] = {"type": "text", "text": draw(_text())}
    elif kind == "image":
        block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    elif kind == "document":
        block = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": draw(_text())}}
    else:
        block = {"type": "tool_result", "tool_use_id": "toolu_1", "content": draw(st.one_of(_text(), st.just([{"type": "text", "text": "r"}])))}
    return {**block, **draw(_marker())}


@st.composite
def _assistant_block(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["text", "tool_use", "thinking"]))
    if kind == "thinking":
        return {"type": "thinking", "thinking": draw(_text()), "signature": "sig"}
    if kind == "tool_use":
        return {"type": "tool_use", "id": "toolu_1", "name": "tool_0", "input": {"q": draw(_text())}, **draw(_marker())}
    return {"type": "text", "text": draw(_text()), **draw(_marker())}


@st.composite
def requests(draw: Any) -> dict[str, Any]:
    """Random, valid Messages requests with caller markers (≤ 4, 1h before 5m)."""
    n_tools = draw(st.integers(0, 4))
    tools = [{"name": f"tool_{i}", "description": draw(_text()), "input_schema": {"type": "object"}, **draw(_marker())} for i in range(n_tools)]
    system: Any = draw(st.one_of(st.none(), _text(), st.lists(st.builds(lambda t, m: {"type": "text", "text": t, **m}, _text(), _marker()), min_size=1, max_size=3)))
    messages = []
    for m in range(draw(st.integers(1, 7))):
        user = m % 2 == 0
        content: Any = draw(_text()) if draw(st.booleans()) else draw(st.lists(_user_block() if user else _assistant_block(), min_size=1, max_size=4))
        messages.append({"role": "user" if user else "assistant", "content": content})
    req: dict[str, Any] = {"model": draw(st.sampled_from([MODEL, "claude-opus-4-6", "claude-haiku-3-5"])), "max_tokens": 16, "messages": messages}
    if tools:
        req["tools"] = tools
    if system is not None:
        req["system"] = system
    if draw(st.booleans()):
        req["cache_control"] = draw(st.sampled_from([CC, {"type": "ephemeral", "ttl": "1h"}]))
    found = markers(req)
    ttls = [cc.get("ttl", "5m") for _, cc in found]
    if len(found) > 4 or ("5m" in ttls and "1h" in ttls[ttls.index("5m") :]):
        return _without_markers(req)
    return req


def _without_markers(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_markers(v) for v in value]
    return value


def _validate(req: dict[str, Any]) -> None:
    """Validate against the SDK's request TypedDicts, iterating the lazily validated parts."""
    parsed = _PARAMS.validate_python(req)
    for message in parsed["messages"]:
        content = message["content"]
        if not isinstance(content, str):
            list(content)
    if "tools" in parsed:
        list(parsed["tools"])
    if isinstance(parsed.get("system"), list) or not isinstance(parsed.get("system", ""), str):
        list(parsed["system"])


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests(), st.integers(0, 2))
def test_random_shapes_keep_every_rule(req: dict[str, Any], turns_seen: int) -> None:
    """≤ 4 markers, caller objects unchanged, caller markers kept, same content, valid SDK params, deterministic."""
    if len(markers(req)) > 4:
        return
    before = copy.deepcopy(req)
    policy_a, policy_b = lk.CachePolicy(secret=SECRET), lk.CachePolicy(secret=SECRET)
    for _ in range(turns_seen):  # learned state must not break any rule either
        policy_a("messages", req)
        policy_b("messages", req)
    sent_a, _ = policy_a("messages", req)
    sent_b, _ = policy_b("messages", req)
    assert req == before
    assert sent_a == sent_b
    found = markers(sent_a)
    assert len(found) <= 4
    assert set(w for w, _ in markers(req) if w != "top") <= set(w for w, _ in found)
    assert unmarked(sent_a) == unmarked(req)
    ttls = [cc.get("ttl", "5m") for w, cc in found if w != "top"]
    assert "1h" not in ttls[ttls.index("5m"):] if "5m" in ttls else True
    _validate(sent_a)


# ---------------------------------------------------------------------------------------
# Learned static blocks in the messages, and the planner's memo

def _rag(i: int) -> dict[str, Any]:
    docs = [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": f"doc {d} " * 400}} for d in range(3)]
    return {"model": MODEL, "max_tokens": 8, "system": agent_system(),
            "messages": [{"role": "user", "content": [*docs, {"type": "text", "text": f"question {i}?"}]}]}  # fmt: skip


def _few_shot(i: int, examples: str = "example") -> dict[str, Any]:
    pairs = [{"role": "user" if k % 2 == 0 else "assistant", "content": f"{examples} {k} " * 300} for k in range(8)]
    return {"model": MODEL, "max_tokens": 8, "system": agent_system(), "messages": [*pairs, {"role": "user", "content": f"q{i}"}]}


def test_rag_documents_get_a_marker_from_the_second_call() -> None:
    """Documents before a varying question: first call as before, then a marker on the last stable document."""
    policy = lk.CachePolicy(secret=SECRET)
    first, second, third = (plan(_rag(i), policy) for i in range(3))
    assert [w for w, _ in markers(first)] == ["system 0"]
    assert [w for w, _ in markers(second)] == ["system 0", "message 0 block 2"]
    assert markers(third) == markers(second)


def test_new_documents_once_keep_the_learned_boundary() -> None:
    """One call with other documents does not move the boundary: its documents are written for the next call."""
    policy = lk.CachePolicy(secret=SECRET)
    for i in range(3):
        plan(_rag(i), policy)
    other = _rag(3)
    other["messages"][0]["content"][0] = {"type": "text", "text": "another document " * 300}
    assert "message 0 block 2" in [w for w, _ in markers(plan(other, policy))]


def test_few_shot_marks_the_last_example_not_the_question() -> None:
    """Fixed examples before a varying question: from the second call the last example is marked, the question not."""
    policy = lk.CachePolicy(secret=SECRET)
    first, second = plan(_few_shot(0), policy), plan(_few_shot(1), policy)
    assert [w for w, _ in markers(first)] == ["system 0", "message 8 block 0"]  # today's placement: the newest message
    assert [w for w, _ in markers(second)] == ["system 0", "message 7 block 0"]
    assert second["messages"][8]["content"] == "q1"


def test_growing_conversation_keeps_marking_the_newest_message() -> None:
    """A conversation that extends the previous call has no boundary: the newest message is marked every turn."""
    policy = lk.CachePolicy(secret=SECRET)
    history: list[dict[str, Any]] = []
    for i in range(4):
        history = [*history, {"role": "user", "content": f"q{i}"}]
        where = [w for w, _ in markers(plan(agent(history), policy))]
        if i:
            assert where[-1] == f"message {len(history) - 1} block 0"
        history.append({"role": "assistant", "content": f"a{i}"})


def test_interleaved_conversations_each_mark_their_newest_message() -> None:
    """One client, three users: their turns interleave in one family. Once a call was seen to extend an earlier one,
    every turn marks its newest message — a first turn too, so the second reads it — and no boundary is learned
    from the other users' differing messages."""
    policy = lk.CachePolicy(secret=SECRET)
    users = {u: [] for u in "abc"}  # type: dict[str, list[dict[str, Any]]]
    seen = []
    for turn in range(3):
        for u, history in users.items():
            history.append({"role": "user", "content": f"user {u} says {turn} " * 40})
            sent = plan(agent(list(history)), policy)
            seen.append((u, turn, [w for w, _ in markers(sent)]))
            history.append({"role": "assistant", "content": f"answer {turn} to {u} " * 20})
    for u, turn, where in seen:
        newest = f"message {2 * turn} block 0"
        if turn:  # every later turn marks the whole history, whichever user came before it
            assert where[-1] == newest, (u, turn, where)
    later = lk.CachePolicy(secret=SECRET)
    for u in "ab":  # conversations seen growing: a new user's first turn is written for its second
        plan(agent([{"role": "user", "content": f"{u} 0 " * 40}]), later)
    plan(agent([{"role": "user", "content": "a 0 " * 40}, {"role": "assistant", "content": "ok " * 20},
                {"role": "user", "content": "a 1 " * 40}]), later)  # fmt: skip
    first = plan(agent([{"role": "user", "content": "d 0 " * 40}]), later)
    assert [w for w, _ in markers(first)][-1] == "message 0 block 0"


def _rotating(i: int, k: int, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 8, "tools": agent_tools(), "system": rotating_system(i % k),
            "messages": [{"role": "user", "content": f"q{i}"}], **extra}  # fmt: skip


@pytest.mark.parametrize(("extra", "marked"), [({}, False), ({"cache_control": {"type": "ephemeral", "ttl": "1h"}}, True)])
def test_a_prompt_back_after_its_lifetime_is_not_written(extra: dict[str, Any], marked: bool) -> None:
    """Three prompts, a call every 200 s: each comes back after 10 minutes. Under 5-minute markers the
    system prompt is not written (it would expire unread); under the caller's 1h marker it is."""
    now = [0.0]
    policy = lk.CachePolicy(secret=SECRET, clock=lambda: now[0])
    where = []
    for i in range(9):
        where.append([w for w, _ in markers(plan(_rotating(i, 3, **extra), policy))])
        now[0] += 200
    assert where[0][:2] == ["tool 11", "system 0"]
    assert all(("system 0" in w) is marked for w in where[1:])
    assert all("tool 11" in w for w in where)


def test_a_timestamp_learned_dynamic_then_a_prompt_that_comes_back_is_static_per_value(caplog: pytest.LogCaptureFixture) -> None:
    """Edits of one prompt (a timestamp) are dynamic, warned once per family; a prompt that then
    comes back within its lifetime is marked again, with no second warning."""
    policy = lk.CachePolicy(secret=SECRET)
    with caplog.at_level(logging.WARNING, logger="latencykit"):
        sent = [plan({**agent(), "system": timestamp_system(i)}, policy) for i in range(4)]
        assert [("system 0" in [w for w, _ in markers(r)]) for r in sent] == [True, True, False, False]
        back = [plan({**agent(), "system": timestamp_system(i)}, policy) for i in (2, 3, 2, 3)]
        assert all("system 0" in [w for w, _ in markers(r)] for r in back[1:])
        for i in range(4, 8):  # the tools edited too (the family keeps its tool names): still one warning
            plan({**agent(), "tools": agent_tools(salt=f"v{i} "), "system": timestamp_system(i)}, policy)
    assert len([r for r in caplog.records if "changes on every call" in r.getMessage()]) == 1


def test_prompts_that_never_come_back_stop_being_written(caplog: pytest.LogCaptureFixture) -> None:
    """A new system prompt on every call, none back: written while they might be a rotation,
    then (32 in a row) dynamic, with one warning."""
    now = [0.0]
    policy = lk.CachePolicy(secret=SECRET, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="latencykit"):
        where = []
        for i in range(40):
            where.append("system 0" in [w for w, _ in markers(plan(_rotating(i, 40), policy))])
            now[0] += 1
    assert all(where[:31]) and not any(where[31:])  # the 32nd new value in a row is not written
    assert len([r for r in caplog.records if "changes on every call" in r.getMessage()]) == 1


def test_cache_off_learns_but_never_warns(caplog: pytest.LogCaptureFixture) -> None:
    """cache='off' moves no breakpoint, so it does not say it does."""
    policy = lk.CachePolicy("off", secret=SECRET)
    with caplog.at_level(logging.WARNING, logger="latencykit"):
        for i in range(6):
            plan({**agent(), "system": timestamp_system(i)}, policy)
    assert not caplog.records


def test_derived_key_covers_the_learned_static_messages() -> None:
    """OpenAI: once learned, few-shot examples are part of the derived key; other examples, another key."""

    def chat(i: int, examples: str) -> dict[str, Any]:
        req = _few_shot(i, examples)
        return {"model": "gpt-4o", "messages": [{"role": "system", "content": req["system"]}, *req["messages"]]}

    def keys(examples: str) -> list[str]:
        policy = lk.CachePolicy(secret=SECRET)
        return [policy("chat.completions", chat(i, examples))[0]["prompt_cache_key"] for i in range(4)]

    a, b = keys("example"), keys("sample")
    assert a[0] == b[0]  # first call: system prompt only
    assert a[1] == a[2] == a[3] and b[1] == b[2] == b[3] and a[1] != b[1]


def test_an_edit_in_place_is_seen() -> None:
    """The memo keys on content, not identity: a dict edited in place between calls is a change."""
    policy = lk.CachePolicy(secret=SECRET)
    req = agent()
    req["system"] = [{"type": "text", "text": agent_system()}]
    plan(req, policy)
    req["system"][0]["text"] = agent_system()[:100] + "EDITED" + agent_system()[100:]
    _, finish = policy("messages", req)
    rec = lk.CallRecord(provider="anthropic", operation="chat", request_model=MODEL)
    rec.cache_read_tokens, rec.cache_write_tokens = 100, 0
    assert finish is not None
    finish(rec)
    assert rec.extra["cache_changed_segment"] == "system" and rec.extra["cache_changed_offset"] == 96


@pytest.mark.parametrize(
    "edit",
    [
        lambda schema: schema["properties"]["limit"].__setitem__("type", "number"),  # a nested string
        lambda schema: schema.__setitem__("additionalProperties", False),  # a key added
        lambda schema: schema["properties"]["limit"].__setitem__("default", 1),  # then True below
    ],
    ids=["nested-string", "added-key", "int-then-bool"],
)
def test_a_tool_schema_edited_in_place_is_seen(edit: Any) -> None:
    """Tool schemas are keyed by content (through ``marshal``), not identity: an edit in place
    between calls changes the tools' print, and ``True`` is not ``1``."""
    policy = lk.CachePolicy(secret=SECRET)
    req = agent()
    plan(req, policy)
    plan(req, policy)
    schema = req["tools"][0]["input_schema"]
    edit(schema)
    if schema["properties"]["limit"].get("default") == 1:
        plan(req, policy)
        schema["properties"]["limit"]["default"] = True
    _, finish = policy("messages", req)
    rec = lk.CallRecord(provider="anthropic", operation="chat", request_model=MODEL)
    rec.cache_read_tokens, rec.cache_write_tokens = 0, 100
    assert finish is not None
    finish(rec)
    assert rec.extra["cache_changed_segment"] == "tools"


def test_a_tool_holding_an_sdk_model_is_planned() -> None:
    """A tool whose schema holds something ``marshal`` cannot take (an SDK model) still gets its marker."""
    from pydantic import BaseModel

    class Schema(BaseModel):
        type: str = "object"

    req = agent()
    req["tools"][0] = {**req["tools"][0], "input_schema": Schema()}
    sent = plan(req)
    assert sent["tools"][-1]["cache_control"] == {"type": "ephemeral"}


def _holds(o: Any, needle: str, seen: set[int]) -> bool:
    """Whether ``o`` reaches a string containing ``needle`` through containers and attributes."""
    if id(o) in seen or isinstance(o, (int, float, bytes, type(None))) or callable(o) and not hasattr(o, "__dict__"):
        return False
    seen.add(id(o))
    if isinstance(o, str):
        return needle in o
    if isinstance(o, dict):
        return any(_holds(k, needle, seen) or _holds(v, needle, seen) for k, v in o.items())
    if isinstance(o, (list, tuple, set, frozenset)):
        return any(_holds(v, needle, seen) for v in o)
    attrs = list(getattr(o, "__dict__", {}).values())
    attrs += [getattr(o, n) for c in type(o).__mro__ for n in getattr(c, "__slots__", ()) if hasattr(o, n)]
    return any(_holds(v, needle, seen) for v in attrs)


def test_the_planner_keeps_no_text() -> None:
    """After planning, nothing the policy holds (memo, learned state, ledger) contains the prompt's text."""
    policy = lk.CachePolicy(secret=SECRET)
    text = "PRIVATE-PROMPT-TEXT " * 100
    for i in range(3):
        req = agent([{"role": "user", "content": text + str(i)}])
        req["system"] = [{"type": "text", "text": text}, {"type": "text", "text": agent_system()}]
        _, finish = policy("messages", req)
    assert len(policy._fp._blocks.new) > 0 and len(policy._families.prints._new) > 0
    assert not _holds(policy, "PRIVATE-PROMPT", set())
    assert _holds({"x": [text]}, "PRIVATE-PROMPT", set())  # the walk does find text where there is some


_TEXTS = st.sampled_from(["", "a", "b", "hello there", "HELLO THERE", "step one: read the file " * 40, "step two " * 300, "ünïcode ✓ " * 20])
_CONTENT = st.one_of(
    _TEXTS,
    st.lists(st.builds(lambda t: {"type": "text", "text": t}, _TEXTS), min_size=1, max_size=3),
)
_MESSAGE = st.builds(lambda role, content: {"role": role, "content": content}, st.sampled_from(["user", "assistant"]), _CONTENT)
_LEAD = st.sampled_from(
    ["none", "system", "short system", "tools", "both", "edited tool", "marked tool", "schema", "fewer tools", "regrouped", "shared schema"]
)


def _request(lead: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    req: dict[str, Any] = {"model": MODEL, "max_tokens": 8, "messages": messages}
    if lead in ("system", "both"):
        req["system"] = agent_system()
    if lead == "short system":
        req["system"] = "You are terse."
    if lead in ("tools", "both"):
        req["tools"] = agent_tools()
    if lead == "edited tool":  # one description differs
        req["tools"] = [*agent_tools()[:3], {**agent_tools()[3], "description": "Changed."}, *agent_tools()[4:]]
    if lead == "marked tool":  # the caller's own marker: the same content, one more marker
        req["tools"] = [*agent_tools()[:-1], {**agent_tools()[-1], "cache_control": {"type": "ephemeral"}}]
    if lead == "schema":  # a nested schema differs (a property's type)
        tools = agent_tools()
        tools[5] = {**tools[5], "input_schema": {"type": "object", "properties": {"query": {"type": "integer"}}}}
        req["tools"] = tools
    if lead == "fewer tools":
        req["tools"] = agent_tools(5)
    if lead == "regrouped":  # the fields of "tools", in the same order, the first tool's split in two
        tools = agent_tools()
        head = dict(tools[0])
        schema = head.pop("input_schema")
        req["tools"] = [head, {"input_schema": schema}, *tools[1:]]
    if lead == "shared schema":  # one schema object shared by every tool: equal values, other sharing
        tools = agent_tools()
        shared = tools[0]["input_schema"]
        req["tools"] = [{**t, "input_schema": shared} for t in tools]
    return req


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_LEAD, st.lists(_MESSAGE, min_size=1, max_size=8), st.integers(0, 8)), min_size=2, max_size=6))
def test_a_warm_parse_equals_a_cold_one(calls: list[tuple[str, list[dict[str, Any]], int]]) -> None:
    """Whatever the previous requests were (a growing history, an edit, list content in between,
    another lead), parsing with the memo and recent message runs gives exactly the Shape that
    a fresh fingerprinter gives: reuse only ever skips work."""
    from latencykit.core._segments import Fingerprinter, parse

    warm = Fingerprinter(SECRET)
    history: list[dict[str, Any]] = []
    for lead, new, keep in calls:
        history = [dict(m) for m in history[:keep]] + new  # rebuilt dicts, equal strings: as a caller resends
        req = _request(lead, history)
        got, want = parse("messages", req, warm), parse("messages", req, Fingerprinter(SECRET))
        assert (got.blocks, got.segments, got.prompt_tokens, got.family, got.markers) == (
            want.blocks, want.segments, want.prompt_tokens, want.family, want.markers,
        )  # fmt: skip
    if history and isinstance(history[0]["content"], str):  # an edit in place of an earlier message is seen
        history[0]["content"] = history[0]["content"].swapcase() if history[0]["content"].strip() else "x"
        req = _request(calls[-1][0], history)
        assert parse("messages", req, warm).blocks == parse("messages", req, Fingerprinter(SECRET)).blocks
    tools = agent_tools()  # a schema edited in place between two calls is seen
    req = {"model": MODEL, "max_tokens": 8, "tools": tools, "messages": [{"role": "user", "content": "hi"}]}
    before = parse("messages", req, warm)
    tools[2]["input_schema"]["properties"]["limit"]["type"] = "number"
    after = parse("messages", req, warm)
    assert after.blocks == parse("messages", req, Fingerprinter(SECRET)).blocks
    assert after.blocks[2].digest != before.blocks[2].digest


def test_the_shape_and_context_a_strategy_sees_are_whole_dataclasses() -> None:
    """The Shape and PlanContext made on the hot path (without their __init__) hold every field,
    equal what the dataclass's own constructor makes of the same values, and stay frozen."""
    import dataclasses

    seen: list[lk.PlanContext] = []

    def strategy(ctx: lk.PlanContext) -> list[int]:
        seen.append(ctx)
        return []

    policy = lk.CachePolicy(strategy)
    req = {"model": MODEL, "max_tokens": 8, "tools": agent_tools(), "system": agent_system(), "messages": [{"role": "user", "content": "hi"}]}
    policy("messages", req)
    ctx = seen[-1]
    for obj in (ctx, ctx.shape):
        names = {f.name for f in dataclasses.fields(obj)}
        assert names <= set(vars(obj)), names - set(vars(obj))
        again = dataclasses.replace(obj)  # through __init__, from the same values
        assert again == obj
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.min_tokens = 1 if obj is ctx else None  # type: ignore[misc, union-attr]
    assert hash(dataclasses.replace(ctx.shape)) == hash(ctx.shape)
    assert ctx.shape.digests == tuple(b.digest for b in ctx.shape.blocks) and ctx.shape.prompt_tokens > 0


# -- prompts too short for any cache ---------------------------------------------------------


def _judged(policy: lk.CachePolicy, api: str, req: dict[str, Any], read: Any) -> tuple[Any, ...]:
    """What the policy sends and what its finish hook writes into a record that read ``read``."""
    sent, finish = policy(api, req)
    rec = lk.CallRecord(provider="anthropic" if api == "messages" else "openai", operation="chat", request_model=req.get("model"))
    rec.cache_read_tokens, rec.cache_write_tokens = read, (0 if read is not None else None)
    assert finish is not None
    finish(rec)
    return sent, rec.cache_expected_tokens, rec.cache_verdict, rec.cache_miss_reason


def _full_path(policy_kwargs: dict[str, Any]) -> lk.CachePolicy:
    """A policy that always parses, learns and plans: an estimator that is not the built-in one
    (the same function, wrapped) turns the short-prompt path off."""
    from latencykit.core._tokens import block_size

    return lk.CachePolicy(estimator=lambda block: block_size(block), **policy_kwargs)


_SHORT_TEXT = st.text(st.characters(codec="utf-8"), max_size=300)
_SHORT_REQUESTS = st.one_of(
    st.builds(
        lambda system, turns, model: ("messages", {
            "model": model, "max_tokens": 64, **({"system": system} if system is not None else {}),
            "messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)],
        }),
        st.none() | _SHORT_TEXT, st.lists(_SHORT_TEXT, min_size=1, max_size=6), st.sampled_from([MODEL, "claude-haiku-4-5", "x"]),
    ),
    st.builds(
        lambda system, turns: ("chat.completions", {
            "model": "gpt-5-mini",
            "messages": ([{"role": "system", "content": system}] if system is not None else [])
            + [{"role": "user", "content": t} for t in turns],
        }),
        st.none() | _SHORT_TEXT, st.lists(_SHORT_TEXT, min_size=1, max_size=6),
    ),
    st.builds(
        lambda instructions, text: ("responses", {"model": "gpt-5-mini", "input": text, **({"instructions": instructions} if instructions else {})}),
        st.none() | _SHORT_TEXT, _SHORT_TEXT,
    ),
)  # fmt: skip


def _set(req: dict[str, Any]) -> dict[str, Any]:
    """The options a request sets (NOT_GIVEN / omit left out)."""
    return {k: v for k, v in req.items() if not isinstance(v, (openai.NotGiven, openai.Omit))}


# What the SDKs' .stream() helpers add: every option they take, the unused ones as NOT_GIVEN / omit, extra_body None.
_HELPER_UNUSED = {"tools": openai.NOT_GIVEN, "response_format": openai.NOT_GIVEN, "tool_choice": openai.omit,
                  "extra_body": None, "parallel_tool_calls": openai.NOT_GIVEN}  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_SHORT_REQUESTS, st.sampled_from([None, 0, 5]), st.sampled_from([{}, {"min_tokens": {"": 64}}]), st.booleans())
def test_a_prompt_too_short_to_cache_is_judged_as_the_full_planner_judges_it(
    case: tuple[str, dict[str, Any]], read: Any, options: dict[str, Any], helper: bool
) -> None:
    """Short plain prompts skip parsing and learning: sent as given (the very object), with the
    same expected tokens, verdict and reason as the full planner gives, twice in a row; also as
    the SDKs' .stream() helpers send them, with every unused option present and not given."""
    api, req = case
    if helper:
        req = {**req, **_HELPER_UNUSED}
        assert _plain_size(api, req) is not None  # the short path, not the full one
    before = copy.deepcopy(req)
    fast, full = lk.CachePolicy(**options), _full_path(options)
    # Short by the bound (text / 4 + twice the fixed tokens, under the minimum): with a 64-token
    # minimum, a few turns of 300 characters may not be, and then both take the full path.
    short = fast._too_short(api, req) is not None
    for _ in range(2):
        got, want = _judged(fast, api, req, read), _judged(full, api, req, read)
        assert got[1:] == want[1:]
        if short:
            assert got[0] is req  # the very object
            assert _set(want[0]) == _set(req)  # the full path copies (NOT_GIVEN copies compare unequal): same options set
        else:
            assert _set(got[0]) == _set(want[0])
    assert _set(req) == _set(before)


def test_a_short_prompt_is_sent_as_the_same_object_and_leaves_no_family_state() -> None:
    policy = lk.CachePolicy()
    req = {"model": MODEL, "max_tokens": 64, "system": "Be brief.", "messages": [{"role": "user", "content": "Write a story."}]}
    sent, finish = policy("messages", req)
    assert sent is req and finish is not None
    assert not policy._families._states  # nothing learned from a prompt no cache can hold
    rec = lk.CallRecord(provider="anthropic", operation="chat", request_model=MODEL)
    rec.cache_read_tokens = rec.cache_write_tokens = 0
    finish(rec)
    assert (rec.cache_expected_tokens, rec.cache_verdict, rec.cache_miss_reason) == (0, "expected_miss", "below_minimum")


@pytest.mark.parametrize(
    "extra",
    [
        {"tools": []},
        {"system": [{"type": "text", "text": "Be brief."}]},
        {"cache_control": {"type": "ephemeral"}},
        {"extra_body": {"tools": [{"name": "t", "input_schema": {"type": "object"}}]}},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
        {"messages": [{"role": "user", "content": "x" * 8000}]},
    ],
)
def test_a_request_that_is_not_short_and_plain_is_planned_in_full(extra: dict[str, Any]) -> None:
    policy = lk.CachePolicy()
    req = {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "Write a story."}], **extra}
    policy("messages", req)
    assert policy._families._states  # parsed and learned
