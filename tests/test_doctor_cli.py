"""``latencykit doctor`` (a subprocess, ``--json``) and the Python API give the same findings from the
same evidence: both judge through `latencykit.vllm.doctor`. Emulated latencies."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import latencykit.vllm as lkv
from latencykit.emulator import Emulator, TimingModel, VLLMConfig

TIMING = TimingModel(base_ttft=0.01, prefill_per_token=0.0, decode_per_token=0.002, output_tokens=400)
WORDS = "alpha beta gamma delta server token cache prefix stream client".split()
SYSTEM = " ".join(WORDS[(i * 7 + 13 + i // 5) % len(WORDS)] + "1" for i in range(1500))  # ~1,500 words, shared


def messages(question: str) -> list[dict[str, str]]:
    """The shared system prompt + a user turn."""
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


def cli_args(url: str, *extra: str) -> list[str]:
    """``latencykit doctor`` judging one scrape (counters since start-up), as JSON."""
    return [sys.executable, "-m", "latencykit.cli", "doctor", "--url", url, "--duration", "0", "--json", *extra]


def parse(stdout: str) -> dict[str, Any]:
    """The CLI's JSON."""
    out: dict[str, Any] = json.loads(stdout)
    return out


def same(cli: dict[str, Any], api: lkv.Diagnosis) -> None:
    """Identical finding kinds and evidence."""
    assert [f["kind"] for f in cli["findings"]] == list(api.kinds), (cli["findings"], str(api))
    assert [f["evidence"] for f in cli["findings"]] == [dict(f.evidence) for f in api.findings]
    assert [f["advice"] for f in cli["findings"]] == [f.advice for f in api.findings]


def test_cli_and_api_agree_on_shared_prefixes_without_caching(tmp_path: Path) -> None:
    """Prefix caching off, one ~1,500-token system prompt sent three times: with the client's records
    both say low_prefix_cache_hit_rate (enable it); without them both say healthy and name what is unknown."""
    with Emulator(timing=TIMING, vllm=VLLMConfig.pressure("low_prefix_cache_hit_rate")) as emu:
        client = lkv.VLLM(emu.base_url, max_retries=0)
        for i in range(3):
            client.chat.completions.create(messages=messages(f"question {i}"), max_tokens=8)
        records = tmp_path / "records.jsonl"
        assert client.latency.to_jsonl(records) == 3
        api = lkv.doctor(emu.base_url, duration=0, records=client.latency)
        cli = subprocess.run(cli_args(emu.base_url, "--records", str(records)), capture_output=True, text=True, timeout=60)
        assert cli.returncode == 0, cli.stderr
        same(parse(cli.stdout), api)
        assert api.kinds == ("low_prefix_cache_hit_rate",) and "--enable-prefix-caching" in api.findings[0].advice

        bare_api = lkv.doctor(emu.base_url, duration=0)
        bare = subprocess.run(cli_args(emu.base_url), capture_output=True, text=True, timeout=60)
        assert bare.returncode == 0, bare.stderr
        same(parse(bare.stdout), bare_api)
        assert bare_api.kinds == ("healthy",)
        assert "--enable-prefix-caching" in bare_api.findings[0].advice and "--records" in bare_api.findings[0].advice

        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"nope": 1}\n')
        broken = subprocess.run(cli_args(emu.base_url, "--records", str(bad)), capture_output=True, text=True, timeout=60)
        assert broken.returncode == 1 and "cannot read records" in broken.stderr
        client.close()


async def test_cli_and_async_api_agree(tmp_path: Path) -> None:
    """The async client and `adoctor` against the CLI, run with asyncio's subprocess: same findings."""
    with Emulator(timing=TIMING, vllm=VLLMConfig.pressure("low_prefix_cache_hit_rate")) as emu:
        client = lkv.AsyncVLLM(emu.base_url, max_retries=0)
        for i in range(3):
            await client.chat.completions.create(messages=messages(f"question {i}"), max_tokens=8)
        records = tmp_path / "records.jsonl"
        client.latency.to_jsonl(records)
        api = await lkv.adoctor(emu.base_url, duration=0, records=client.latency)
        proc = await asyncio.create_subprocess_exec(
            *cli_args(emu.base_url, "--records", str(records)), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ},
        )  # fmt: skip
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, stderr.decode()
        same(parse(stdout.decode()), api)
        assert api.kinds == ("low_prefix_cache_hit_rate",)
        await client.close()
