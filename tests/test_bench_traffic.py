"""Traffic shapes: the article's length weights (chi-square), determinism, sizes, replay of JSONL and Recorder records."""

from __future__ import annotations

import json
import math

import pytest

from latencykit import CallRecord
from latencykit.bench._stats import chi_square_p
from latencykit.bench._targets import anthropic_body, openai_body, resolve_target
from latencykit.bench._traffic import PROFILES, generate, load_replay
from latencykit.emulator import count_tokens


@pytest.mark.parametrize("shape", ["chat", "rag", "code"])
def test_prompt_buckets_follow_the_article_weights(shape: str) -> None:
    """Bucket counts of 2,000 requests pass a chi-square test against the weights; lengths stay in their ranges."""
    buckets, (out_lo, out_hi) = PROFILES[shape]
    reqs = generate(shape, 2000, seed=1)
    observed = [sum(1 for r in reqs if lo <= r.prompt_tokens < hi or (b is buckets[-1] and r.prompt_tokens == hi))
                for b in buckets for (_, lo, hi, _) in [b]]  # fmt: skip
    expected = [w * len(reqs) for (_, _, _, w) in buckets]
    stat = sum((o - e) ** 2 / e for o, e in zip(observed, expected))
    assert sum(observed) == len(reqs)
    assert chi_square_p(stat, len(buckets) - 1) > 0.001, (observed, expected)
    assert all(out_lo <= r.output_tokens <= out_hi for r in reqs)
    assert [r.bucket for r in reqs[:50]] == [r.bucket for r in generate(shape, 50, seed=1)]


def test_chi_square_is_sensitive() -> None:
    """The same test rejects a skewed sample (so it can fail) and the p-values match known tables."""
    assert chi_square_p(2 * math.log(20), 2) == pytest.approx(0.05, rel=1e-9)  # df=2: exp(-x/2)
    assert chi_square_p(3.841459, 1) == pytest.approx(0.05, rel=1e-4)
    assert chi_square_p(18.307038, 10) == pytest.approx(0.05, rel=1e-4)
    assert chi_square_p(124.342, 100) == pytest.approx(0.05, rel=1e-3)
    skewed = [2400, 400, 200]  # 0.80/0.13/0.07 where the chat weights are 0.70/0.20/0.10
    expected = [2100, 600, 300]
    assert chi_square_p(sum((o - e) ** 2 / e for o, e in zip(skewed, expected)), 2) < 1e-6


@pytest.mark.parametrize("shape", ["chat", "rag", "code", "shared-prefix", "few-shot", "agent"])
def test_generated_prompts_have_the_target_size(shape: str) -> None:
    """The emulator's token count of the rendered request is within 5 % (+8 tokens) of the target."""
    target = resolve_target("emulator")
    for req in generate(shape, 40, seed=3):
        for body in (openai_body(req, target), anthropic_body(req, target)):
            n = count_tokens(body)
            assert abs(n - req.prompt_tokens) <= 0.05 * req.prompt_tokens + 8, (shape, n, req.prompt_tokens)
    assert generate(shape, 5, seed=3) == generate(shape, 5, seed=3)
    assert generate(shape, 5, seed=3) != generate(shape, 5, seed=4)


def test_shapes_reuse_their_prefixes() -> None:
    """shared-prefix reuses N documents; agent sessions grow with tool calls over a shared tool set."""
    docs = generate("shared-prefix", 30, seed=0, documents=3)
    assert {r.prefix_id for r in docs} == {"doc0", "doc1", "doc2"}
    assert len({r.system for r in docs}) == 3
    agent = generate("agent", 12, seed=0)
    assert all(len(r.tools) == 12 and r.prefix_id == "agent" for r in agent)
    by_session: dict[str, list[int]] = {}
    for r in agent:
        by_session.setdefault(r.session or "", []).append(len(r.messages))
    assert all(lengths == sorted(lengths) and lengths[-1] > lengths[0] for lengths in by_session.values())
    later = next(r for r in agent if len(r.messages) > 1)
    body = anthropic_body(later, resolve_target("emulator", api="anthropic"))
    assert any(isinstance(m["content"], list) and m["content"][0]["type"] == "tool_use" for m in body["messages"])
    assert generate("few-shot", 3)[0].system == generate("few-shot", 3)[2].system


def test_replay_accepts_plain_jsonl_and_recorder_records() -> None:
    """Token counts and timestamps from JSONL; Recorder records (CallRecord.to_dict) too, skipping unusable ones."""
    lines = [json.dumps({"prompt_tokens": 120, "output_tokens": 30, "timestamp": 100.0}),
             json.dumps({"prompt_tokens": 900, "output_tokens": 10, "timestamp": 101.5, "messages": [{"role": "user", "content": "hi"}]})]  # fmt: skip
    reqs = load_replay(lines)
    assert [(r.prompt_tokens, r.output_tokens, r.at) for r in reqs] == [(120, 30, 0.0), (900, 10, 1.5)]
    assert reqs[1].messages == ({"role": "user", "content": "hi"},)
    recs = [CallRecord("openai", "chat", "m", input_tokens=300, output_tokens=40, started_at=5.0),
            CallRecord("openai", "chat", "m", outcome="error", started_at=6.0),
            CallRecord("openai", "chat", "m", input_tokens=50, output_tokens=8, started_at=7.0)]  # fmt: skip
    replayed = load_replay([json.dumps(r.to_dict()) for r in recs])
    assert [(r.prompt_tokens, r.output_tokens, r.at) for r in replayed] == [(300, 40, 0.0), (50, 8, 2.0)]
    with pytest.raises(ValueError, match="line 2"):
        load_replay([lines[0], "{not json"])
    with pytest.raises(ValueError, match="prompt_tokens"):
        load_replay([json.dumps({"output_tokens": 3})])
    with pytest.raises(ValueError, match="traffic shape"):
        generate("tweets", 3)
