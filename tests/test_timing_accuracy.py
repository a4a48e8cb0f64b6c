"""A server that waits a known 300 ms before the first token and 20 ms between tokens is measured as such."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import ANT_REQ, CHAT_REQ, RESP_REQ, headers

KNOWN = headers(ttft_ms=300, tpot_ms=20, output_tokens=25)


def _check(rec: Any) -> None:
    assert rec.outcome == "completed" and rec.output_tokens == 25
    assert rec.ttft == pytest.approx(0.300, abs=0.020), f"TTFT {rec.ttft * 1000:.1f} ms (emulated 300 ms)"
    assert rec.tpot == pytest.approx(0.020, abs=0.002), f"TPOT {rec.tpot * 1000:.2f} ms (emulated 20 ms)"
    assert rec.chunk_gap_mean == pytest.approx(0.020, abs=0.002)
    assert rec.ttfb < 0.1  # the preamble (message_start / role chunk) comes at once; TTFT did not stop there


def test_anthropic_create(ant: Any) -> None:
    """Anthropic messages.create (forced stream): TTFT ±20 ms, TPOT ±2 ms of the emulated values."""
    ant.messages.create(**ANT_REQ, extra_headers=KNOWN)
    _check(ant.latency.last)


def test_chat_create(oai: Any) -> None:
    """OpenAI chat.completions.create: the role-only first chunk does not stop the TTFT clock."""
    oai.chat.completions.create(**CHAT_REQ, extra_headers=KNOWN)
    _check(oai.latency.last)


def test_responses_stream(oai: Any) -> None:
    """OpenAI responses.stream(): response.created does not stop the TTFT clock."""
    with oai.responses.stream(**RESP_REQ, extra_headers=KNOWN) as stream:
        stream.until_done()
    _check(oai.latency.last)


async def test_async_anthropic_stream(aant: Any) -> None:
    """Async Anthropic messages.stream(): same accuracy from the async shell."""
    async with aant.messages.stream(**ANT_REQ, extra_headers=KNOWN) as stream:
        await stream.until_done()
    _check(aant.latency.last)


async def test_async_chat_stream_true(aoai: Any) -> None:
    """Async OpenAI create(stream=True): same accuracy."""
    async for _ in await aoai.chat.completions.create(stream=True, **CHAT_REQ, extra_headers=KNOWN):
        pass
    _check(aoai.latency.last)
