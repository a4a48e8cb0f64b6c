"""Invalid values are refused where the user made them: ValueErrors naming the value, emulator 400s like the real APIs."""

from __future__ import annotations

import math
from typing import Any

import anthropic
import openai
import pytest

import latencykit as lk
from latencykit.emulator import Emulator

KEY = "sk-secret-key-0042"


@pytest.mark.parametrize(
    ("kwargs", "shown"),
    [
        ({"min_tokens": "x"}, "'x'"),
        ({"min_tokens": {"sonnet": "x"}}, "'x'"),
        ({"min_tokens": {"sonnet": 0}}, "0"),
        ({"warn_every": -1}, "-1"),
        ({"warn_every": math.nan}, "nan"),
        ({"warn_every": "60"}, "'60'"),
    ],
)
def test_cache_policy_names_the_bad_value(kwargs: dict[str, Any], shown: str) -> None:
    """CachePolicy(min_tokens=..., warn_every=...) raise ValueError naming the option and the value."""
    with pytest.raises(ValueError, match=rf"{next(iter(kwargs))}.*{shown}"):
        lk.CachePolicy(**kwargs)


def test_cache_policy_accepts_good_values() -> None:
    """Valid overrides are kept."""
    policy = lk.CachePolicy(min_tokens={"sonnet": 2048}, warn_every=0)
    assert policy.min_tokens == {"sonnet": 2048} and policy.warn_every == 0


@pytest.mark.parametrize("bad", ["bogus", "gen_ai_latest_experimental,bogus", 3])
def test_semconv_names_the_bad_value(bad: Any) -> None:
    """Telemetry(semconv=...) accepts None, '' and 'gen_ai_latest_experimental' only, naming anything else."""
    with pytest.raises(ValueError, match=repr(bad).replace("[", r"\[")):
        lk.Telemetry(semconv=bad)
    lk.Telemetry(semconv="gen_ai_latest_experimental")
    lk.Telemetry(semconv="")


@pytest.fixture
def raw(emu: Emulator) -> Any:
    """Raw SDK clients: the emulator's answers are checked as the SDKs see them."""
    a = anthropic.Anthropic(base_url=emu.base_url, api_key=KEY, max_retries=0)
    o = openai.OpenAI(base_url=emu.base_url + "/v1", api_key=KEY, max_retries=0)
    yield a, o
    a.close()
    o.close()


USER = {"role": "user", "content": "hi"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"messages": []}, "at least one message"),
        ({"messages": [{"role": "bot", "content": "hi"}]}, "messages.0.role: Input should be 'user' or 'assistant'"),
        ({"messages": [{"role": "user", "content": ""}, USER]}, "messages.0: all messages must have non-empty content"),
        ({"messages": [USER], "max_tokens": -1}, "max_tokens"),
        ({"messages": [USER], "max_tokens": 0, "stream": True}, "stream"),
    ],
)
def test_anthropic_400s(raw: Any, kwargs: dict[str, Any], message: str) -> None:
    """The emulator rejects what the Messages API rejects, as anthropic.BadRequestError."""
    args = {"model": "claude-sonnet-5", "max_tokens": 16, **kwargs}
    with pytest.raises(anthropic.BadRequestError, match=message.replace(".", r"\.")) as info:
        raw[0].messages.create(**args)
    assert info.value.status_code == 400


def test_anthropic_final_assistant_prefill_may_be_empty(raw: Any) -> None:
    """Only the final assistant message may be empty; max_tokens=0 without stream is a valid pre-warm."""
    msg = raw[0].messages.create(model="claude-sonnet-5", max_tokens=16, messages=[USER, {"role": "assistant", "content": ""}])
    assert msg.type == "message"
    warm = raw[0].messages.create(model="claude-sonnet-5", max_tokens=0, messages=[USER])
    assert warm.content == [] and warm.stop_reason == "max_tokens"


@pytest.mark.parametrize(
    ("kwargs", "message", "param"),
    [
        ({"messages": []}, "Invalid 'messages': empty array", "messages"),
        ({"messages": [{"role": "bot", "content": "hi"}]}, "Invalid value: 'bot'. Supported values are: 'system', ", "messages[0].role"),
        ({"messages": [{"content": "hi"}]}, "Missing required parameter: 'messages[0].role'", "messages[0].role"),
        ({"messages": [USER], "temperature": 3}, "Expected a value <= 2, but got 3", "temperature"),
        ({"messages": [USER], "max_completion_tokens": 0}, "Expected a value >= 1, but got 0", "max_completion_tokens"),
    ],
)
def test_openai_chat_400s(raw: Any, kwargs: dict[str, Any], message: str, param: str) -> None:
    """The emulator rejects what Chat Completions rejects, as openai.BadRequestError with the param named."""
    with pytest.raises(openai.BadRequestError) as info:
        raw[1].chat.completions.create(model="gpt-5-mini", **kwargs)
    assert info.value.status_code == 400 and message in info.value.message and info.value.param == param


def test_openai_responses_400_for_unknown_role(raw: Any) -> None:
    """Responses rejects an input message with an unknown role; non-message items need none."""
    with pytest.raises(openai.BadRequestError) as info:
        raw[1].responses.create(model="gpt-5-mini", input=[{"role": "bot", "content": "hi"}])
    assert "Invalid value: 'bot'" in info.value.message and info.value.param == "input[0].role"
    ok = raw[1].responses.create(model="gpt-5-mini", input=[{"role": "user", "content": "hi"}])
    assert ok.status == "completed"


def test_latencykit_client_sees_the_sdk_error_and_records_it(emu: Emulator) -> None:
    """Through a latencykit client the 400 is the SDK's BadRequestError, recorded once as an error."""
    with lk.Anthropic(base_url=emu.base_url, api_key=KEY) as client:
        with pytest.raises(anthropic.BadRequestError):
            client.messages.create(model="claude-sonnet-5", max_tokens=16, messages=[])
    rec = client.latency.last
    assert rec is not None and rec.outcome == "error" and rec.error_type == "BadRequestError"
    assert len(client.latency.calls) == 1


def test_recorded_requests_keep_no_credentials(emu: Emulator, raw: Any) -> None:
    """Emulator.requests keeps the other headers but not authorization / x-api-key, nor the key anywhere."""
    raw[0].messages.create(model="claude-sonnet-5", max_tokens=16, messages=[USER])
    raw[1].chat.completions.create(model="gpt-5-mini", messages=[USER])
    ant_req, oai_req = emu.requests[-2:]
    assert "x-api-key" not in ant_req.headers and "anthropic-version" in ant_req.headers
    assert "authorization" not in oai_req.headers and "content-type" in oai_req.headers
    assert KEY not in repr(emu.requests)
