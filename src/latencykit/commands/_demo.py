"""``latencykit demo``: a short multi-turn workload through both providers' wrapped clients.

Starts the embedded emulator, runs chat conversations through ``lk.Anthropic`` /
``lk.OpenAI`` (sync, one conversation after another) and ``lk.AsyncAnthropic`` /
``lk.AsyncOpenAI`` (async, conversations in parallel), then prints TTFT / TPOT / E2E
percentiles per provider, shows three reasoning models (hidden, streamed and summarized
reasoning: TTFT against TTFO, and the TPOT rule), and ends with a small strategy comparison (raw SDK non-streaming
vs latencykit, planner off vs on: TTFT P50/P99 and the speed-up). Every number comes from real SDK calls over real HTTP, but the
server is the emulator, so the latencies are **emulated** and labelled so.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from rich.console import Console

from ..emulator import Emulator
from ..providers.anthropic import Anthropic, AsyncAnthropic
from ..providers.openai import AsyncOpenAI, OpenAI
from ..telemetry._recorder import Recorder
from ..telemetry._format import plural
from ..reports._table import latency_table

# Long enough (≈ 2,300 tokens) for the providers' prompt caches, so later turns show hits.
SYSTEM = (
    "You are a support assistant for a cloud storage product. Answer briefly and cite the "
    "relevant setting by name. " * 60
)
QUESTIONS = [
    "How do I share a folder with a teammate?",
    "Can they edit files, or only view them?",
    "And how do I revoke access later?",
]


def _anthropic_turn(history: list[dict[str, Any]], question: str) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-5",
        "max_tokens": 256,
        "system": SYSTEM,
        "messages": [*history, {"role": "user", "content": question}],
    }


def _openai_turn(history: list[dict[str, Any]], question: str) -> dict[str, Any]:
    return {
        "model": "gpt-5-mini",
        "max_completion_tokens": 256,
        "messages": [{"role": "system", "content": SYSTEM}, *history, {"role": "user", "content": question}],
    }


def _sync_conversations(base_url: str, recorder: Recorder, conversations: int) -> None:
    with Anthropic(base_url=base_url, api_key="demo", recorder=recorder) as ant, OpenAI(
        base_url=base_url + "/v1", api_key="demo", recorder=recorder
    ) as oai:
        for _ in range(conversations):
            a_hist: list[dict[str, Any]] = []
            o_hist: list[dict[str, Any]] = []
            for i, q in enumerate(QUESTIONS):
                if i % 2 == 0:
                    msg = ant.messages.create(**_anthropic_turn(a_hist, q))
                    answer = msg.content[0].text if msg.content and msg.content[0].type == "text" else ""
                else:
                    with ant.messages.stream(**_anthropic_turn(a_hist, q)) as stream:
                        answer = "".join(stream.text_stream)
                a_hist += [{"role": "user", "content": q}, {"role": "assistant", "content": answer}]
                completion = oai.chat.completions.create(**_openai_turn(o_hist, q))
                o_hist += [{"role": "user", "content": q}, {"role": "assistant", "content": completion.choices[0].message.content or ""}]


async def _async_conversations(base_url: str, recorder: Recorder, conversations: int) -> None:
    async with AsyncAnthropic(base_url=base_url, api_key="demo", recorder=recorder) as ant, AsyncOpenAI(
        base_url=base_url + "/v1", api_key="demo", recorder=recorder
    ) as oai:

        async def anthropic_conversation() -> None:
            history: list[dict[str, Any]] = []
            for q in QUESTIONS:
                msg = await ant.messages.create(**_anthropic_turn(history, q))
                text = msg.content[0].text if msg.content and msg.content[0].type == "text" else ""
                history += [{"role": "user", "content": q}, {"role": "assistant", "content": text}]

        async def openai_conversation() -> None:
            history: list[dict[str, Any]] = []
            previous = None
            for q in QUESTIONS:
                if previous is None:
                    stream = await oai.chat.completions.create(stream=True, **_openai_turn(history, q))
                    parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
                    previous = "".join(parts)
                else:
                    response = await oai.responses.create(model="gpt-5-mini", instructions=SYSTEM, input=q, max_output_tokens=256)
                    previous = response.output_text
                history += [{"role": "user", "content": q}, {"role": "assistant", "content": previous}]

        await asyncio.gather(*(f() for _ in range(conversations) for f in (anthropic_conversation, openai_conversation)))


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.0f}"


# Reasoning models on the emulator (docs/emulator.md, "Reasoning models"): 64 reasoning tokens,
# those not streamed 2 ms apart, then the answer.
_REASONING_HEADERS = {"x-emulator-reasoning-tokens": "64", "x-emulator-reasoning-tpot-ms": "2", "x-emulator-output-tokens": "24"}
_ASK: Any = [{"role": "user", "content": "Is 221 a prime number?"}]


def _reasoning_calls(base_url: str, console: Console) -> None:
    """One call to a reasoning model of each kind: TTFT (first token of any kind) against TTFO (the answer's)."""
    from rich.table import Table

    recorder = Recorder()
    with OpenAI(base_url=base_url + "/v1", api_key="demo", recorder=recorder, default_headers=_REASONING_HEADERS) as oai, \
            Anthropic(base_url=base_url, api_key="demo", recorder=recorder, default_headers=_REASONING_HEADERS) as ant:  # fmt: skip
        oai.chat.completions.create(model="o3", messages=_ASK)
        oai.chat.completions.create(model="deepseek-reasoner", messages=_ASK)
        ant.messages.create(model="claude-sonnet-5", max_tokens=2048, messages=_ASK, thinking={"type": "enabled", "budget_tokens": 1024})
    table = Table(title="EMULATED reasoning models — TTFT is the first token of any kind, TTFO the answer's first",
                  title_justify="left")  # fmt: skip
    for name in ("model", "reasoning", "TTFT ms", "TTFO ms", "TPOT ms", "TPOT over"):  # (docs/timing.md)
        table.add_column(name, justify="left" if name in ("model", "reasoning", "TPOT over") else "right")
    kinds = ("hidden", "streamed", "summary")
    over = {"answer": "answer", "answer_estimate": "answer, est.", "streamed_reasoning": "all tokens", "output": "all tokens"}
    for kind, rec in zip(kinds, recorder.calls):
        tpot = "-" if rec.tpot is None else f"{rec.tpot * 1000:.1f}"
        table.add_row(rec.response_model or rec.request_model or "?", kind, _ms(rec.ttft), _ms(rec.ttfo), tpot,
                      over.get(rec.tpot_basis or "", "-"))  # fmt: skip
    console.print(table)


def run_demo(
    *, conversations: int = 2, parallel: int = 8, seed: int = 0, console: Console | None = None, compare: bool = True
) -> Recorder:
    """Run the demo workload against an embedded emulator and print the tables; returns the Recorder.

    With ``compare`` (the default) it ends with the strategy comparison of `demo_comparison`: the
    raw SDK's non-streaming ``create()`` against latencykit with its planner off and on (a few
    seconds more, against an emulator of its own).
    """
    from ..bench._strategies import DEMO_TIMING, demo_comparison  # the bench machinery, only when the demo runs

    console = console or Console()
    recorder = Recorder()
    started = time.perf_counter()
    with Emulator(timing=DEMO_TIMING, seed=seed) as emu:
        console.print(f"[dim]emulator on {emu.base_url} (seeded timing model, see docs/emulator.md)[/dim]")
        sync_rec, async_rec = Recorder(), Recorder()
        _sync_conversations(emu.base_url, sync_rec, conversations)
        asyncio.run(_async_conversations(emu.base_url, async_rec, parallel))
        recorder.merge(sync_rec)  # exact: sketches merge; each call was recorded (and logged) once
        recorder.merge(async_rec)
        _reasoning_calls(emu.base_url, console)
    console.print(latency_table(sync_rec.summary(), f"EMULATED latencies — sync clients, {plural(conversations, 'conversation')} one after another"))
    console.print(latency_table(async_rec.summary(), f"EMULATED latencies — async clients, {plural(parallel, 'conversation')} per provider in parallel"))
    summary = recorder.summary()
    ttft = summary["ttft"]
    streamed = sum(1 for c in recorder.calls if c.streamed)
    console.print(
        f"{summary.headline()}; {streamed} of {plural(summary.calls, 'call')} streamed; "
        f"TTFT P50/P99 {_ms(ttft.p50)}/{_ms(ttft.p99)} ms overall (n={ttft.count}); "
        f"{time.perf_counter() - started:.1f} s wall."
    )
    console.print(str(recorder.cache_report()))
    if compare:
        demo_comparison(console=console, seed=seed)
    console.print(
        "[bold]These latencies are emulated[/bold] by the local emulator's timing model; point the same "
        "clients at a real provider or a vLLM server to measure real ones."
    )
    return recorder
