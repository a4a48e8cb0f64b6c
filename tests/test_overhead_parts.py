"""`benchmarks/overhead.py --only parts`: the in-process replay it measures on, and its table."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

import latencykit as lk
from latencykit.emulator import Emulator

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import overhead  # noqa: E402
from overhead_async import HEADERS, _ANT, _CHAT  # noqa: E402
from overhead_parts import FLOOR, VARIANTS, Replay, parts_axis  # noqa: E402


async def _events(client: Any, provider: str) -> list[dict[str, Any]]:
    if provider == "anthropic":
        stream = await client.messages.create(stream=True, extra_headers=HEADERS, **_ANT)
    else:
        stream = await client.chat.completions.create(stream=True, extra_headers=HEADERS, **_CHAT)
    return [event.to_dict() async for event in stream]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_replay_gives_the_sdk_what_the_emulator_sent_and_asks_once(emu: Emulator, provider: str) -> None:
    import httpx2

    replay = Replay(emu.base_url)
    fetched: list[Any] = []
    fetch = replay._fetch

    def counting_fetch(request: Any, key: Any) -> Any:
        fetched.append(key)
        return fetch(request, key)

    replay._fetch = counting_fetch

    async def run() -> tuple[list[Any], list[Any], list[Any]]:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(replay))
        live: Any
        replayed: Any
        if provider == "anthropic":
            live = anthropic.AsyncAnthropic(base_url=emu.base_url, api_key="k", max_retries=0)
            replayed = anthropic.AsyncAnthropic(base_url=emu.base_url, api_key="k", max_retries=0, http_client=http)
        else:
            live = openai.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0)
            replayed = openai.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0, http_client=http)
        try:
            return await _events(live, provider), await _events(replayed, provider), await _events(replayed, provider)
        finally:
            await live.close()
            await replayed.close()

    live, first, again = asyncio.run(run())
    assert len(fetched) == 1  # the second call was answered from what the first fetched
    assert len(first) == len(live) > 30 and first == again
    # The same event stream the live emulator sends (ids and the emulator's random text aside).
    assert [e.get("type", e.get("object")) for e in first] == [e.get("type", e.get("object")) for e in live]


def test_parts_table_names_every_variant_with_its_cost(emu: Emulator, capsys: pytest.CaptureFixture[str]) -> None:
    parts_axis(emu.base_url, 2, 4, overhead._orders, lambda: None)  # (no gc.freeze() inside the suite)
    out = capsys.readouterr().out
    for form in ("anthropic messages.create(stream=True)", "openai chat.completions.create(stream=True)"):
        section = out.split(form, 1)[1].split("\n\n", 1)[0]
        assert re.search(r"raw SDK \d+ µs per call", section)
        for name in ("raw SDK (A/A)", *VARIANTS, FLOOR):
            assert re.search(re.escape(name) + r"\s+[+-]\d+\s+\d\.\d{3}\s+\d\.\d{3}-\d\.\d{3}", section), name


def test_every_variant_is_a_latencykit_option() -> None:
    async def make_all() -> None:
        for options in VARIANTS.values():
            for cls in (lk.AsyncAnthropic, lk.AsyncOpenAI):
                await cls(api_key="k", **options).close()  # a renamed or removed option fails here, not mid-benchmark

    asyncio.run(make_all())


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_the_floor_row_relays_every_event_and_sees_the_tokens(emu: Emulator, provider: str) -> None:
    import overhead_parts

    seen: list[Any] = []
    is_token = overhead_parts._anthropic_token if provider == "anthropic" else overhead_parts._chat_token

    def counting(event: Any) -> Any:
        token = is_token(event)
        if token:
            seen.append(event)
        return token

    async def run() -> tuple[int, int]:
        if provider == "anthropic":
            c: Any = anthropic.AsyncAnthropic(base_url=emu.base_url, api_key="k", max_retries=0)
            send = lambda: c.messages.create(stream=True, extra_headers=HEADERS, **_ANT)  # noqa: E731
        else:
            c = openai.AsyncOpenAI(base_url=emu.base_url + "/v1", api_key="k", max_retries=0)
            send = lambda: c.chat.completions.create(stream=True, extra_headers=HEADERS, **_CHAT)  # noqa: E731
        try:
            relayed = await overhead_parts._bare(await send(), counting)
            direct = len([e async for e in await send()])
        finally:
            await c.close()
        return relayed, direct

    relayed, direct = asyncio.run(run())
    assert relayed == direct > 30
    assert len(seen) >= 25  # about one token event per output token (30 asked)
