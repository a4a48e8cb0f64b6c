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


def test_watch_goes_on_while_the_server_restarts_and_ends_on_ctrl_c() -> None:
    """``doctor --watch``: a server that stops answering mid-watch (restarted, redeployed) is said once on stderr and
    the watch goes on; its return is said too, and windows follow again. Ctrl-C ends it (130), nothing left."""
    import json
    import signal
    import subprocess
    import sys
    import threading
    import time

    from latencykit.emulator import Emulator, VLLMConfig

    out: list[str] = []
    err: list[str] = []
    readers: list[threading.Thread] = []
    proc: Any = None
    second = None
    first = Emulator(vllm=VLLMConfig()).start()
    try:
        port = int(first.base_url.rsplit(":", 1)[1])
        url = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen([sys.executable, "-m", "latencykit", "doctor", "--url", url, "--watch", "--json",
                                 "--duration", "0.2", "--interval", "0.2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)  # fmt: skip
        readers += [threading.Thread(target=lambda f=f, into=into: into.extend(f), daemon=True)
                    for f, into in ((proc.stdout, out), (proc.stderr, err))]  # fmt: skip
        for r in readers:
            r.start()

        def wait_for(cond: Any, what: str) -> None:
            deadline = time.monotonic() + 30
            while not cond():
                assert proc.poll() is None and time.monotonic() < deadline, f"{what}: {err}"
                time.sleep(0.05)

        wait_for(lambda: len(out) >= 2, "two windows")
        first.stop()
        wait_for(lambda: len(err) >= 1, "the outage said")
        windows = len(out)
        second = Emulator(vllm=VLLMConfig(), port=port).start()
        wait_for(lambda: len(err) >= 2 and len(out) >= windows + 2, "the return said, windows again")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
    finally:
        if proc is not None and proc.poll() is None:  # a failed step: the watch is killed by its PID
            proc.kill()
            proc.wait(10)
        first.stop()
        if second is not None:
            second.stop()
        for r in readers:
            r.join(5)
        if proc is not None:
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
    assert err[0].rstrip("\n") == (f"latencykit: cannot scrape {url}/metrics: nothing answers at host 127.0.0.1 port {port} "
                                   "(connection refused); is the server up, and is it its port? (still watching; Ctrl-C to stop)")  # fmt: skip
    assert err[1].rstrip("\n") == f"latencykit: {url}/metrics answers again"
    assert err[2:] == ["latencykit: interrupted\n"] or all("interrupted" in line for line in err[2:]), err
    assert all(json.loads(line)["url"] == url for line in out)  # stdout: diagnoses only
