"""Emulator knobs the benchmark needs: presets and flags, per-chunk usage, chunk lateness."""

from __future__ import annotations

import argparse
import json
import urllib.request

import openai
import pytest

from latencykit.emulator import Emulator, TimingModel
from latencykit.emulator._flags import BENCH_TIMING, add_timing_arguments, timing_from_args
from latencykit.emulator._timing import IDEAL_TIMING


def _parse(argv: list[str]) -> TimingModel:
    p = argparse.ArgumentParser()
    add_timing_arguments(p)
    return timing_from_args(p.parse_args(argv))


def test_presets_and_flags_build_the_timing_model() -> None:
    """--ideal is the load-independent truth; each flag overrides one field; bad values are refused."""
    ideal = _parse(["--ideal"])
    assert ideal == IDEAL_TIMING
    assert (ideal.base_ttft, ideal.decode_per_token, ideal.output_tokens, ideal.batch_slowdown, ideal.jitter) == (0.2, 0.01, 30, 0.0, 0.0)
    assert ideal.prefill_per_token == 0 and ideal.max_concurrency >= 100_000
    t = _parse(["--preset", "bench", "--slots", "8", "--prefill-per-token", "0.001", "--jitter", "0.2", "--tokens-per-chunk", "4",
                "--batch-slowdown", "0.05"])  # fmt: skip
    assert (t.max_concurrency, t.prefill_per_token, t.jitter, t.tokens_per_chunk, t.batch_slowdown) == (8, 0.001, 0.2, 4, 0.05)
    assert t.base_ttft == BENCH_TIMING.base_ttft
    with pytest.raises(ValueError, match="max_concurrency"):
        _parse(["--slots", "0"])


def test_continuous_usage_stats_counts_tokens_per_chunk() -> None:
    """With continuous_usage_stats each chunk carries the cumulative completion tokens (4 per chunk here)."""
    with Emulator(TimingModel(time_scale=0, tokens_per_chunk=4, output_tokens=12)) as emu:
        client = openai.OpenAI(base_url=emu.base_url + "/v1", api_key="x", max_retries=0)
        stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True,
                                                stream_options={"include_usage": True, "continuous_usage_stats": True})  # type: ignore[typeddict-unknown-key]  # fmt: skip
        counts = [c.usage.completion_tokens for c in stream if c.choices and c.choices[0].delta.content and c.usage]
        plain = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True,
                                               stream_options={"include_usage": True})  # fmt: skip
        with_usage = [c for c in plain if c.choices and c.usage is not None]
        client.close()
    assert counts == [4, 8, 12]
    assert with_usage == []  # only the final usage chunk without the option


def test_chunk_lateness_is_reported_and_reset() -> None:
    """How late chunks left against their deadlines, in process and over HTTP; reset starts afresh."""
    with Emulator(TimingModel(time_scale=0.01, output_tokens=5)) as emu:
        client = openai.OpenAI(base_url=emu.base_url + "/v1", api_key="x", max_retries=0)
        for _ in range(3):
            list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True))
        client.close()
        late = emu.chunk_lateness()
        assert late["first"]["count"] == 3 and late["later"]["count"] == 12
        assert 0 <= (late["first"]["p99"] or 0) < 1.0
        with urllib.request.urlopen(emu.base_url + "/_emulator/lateness?reset=1") as resp:
            body = json.loads(resp.read())
        assert body["lateness"]["first"]["count"] == 3
        assert emu.chunk_lateness()["first"]["count"] == 0
