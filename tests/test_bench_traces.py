"""Public traces replayed: Mooncake JSONL (prefixes shared block by block), Azure and BurstGPT CSV.

The samples in tests/fixtures/traces/ are written here in each public format. Checked on the wire, by the
emulator: every request's prompt is exactly its trace length (the emulator counts with the same estimate),
requests whose first k Mooncake hash ids agree share exactly 512·k tokens of message text, and the emulator's
prompt-cache reads are what the hash ids predict under its OpenAI rules (the longest block prefix shared with an
earlier request, read when it reaches the 1,024-token minimum).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from latencykit.bench._run import BenchConfig, run_bench
from latencykit.bench._traces import BLOCK_TOKENS, load_trace
from latencykit.commands._bench import main
from latencykit.emulator import Emulator
from latencykit.emulator._timing import IDEAL_TIMING

TRACES = Path(__file__).resolve().parent / "fixtures" / "traces"
FAST = IDEAL_TIMING.__class__(**(asdict(IDEAL_TIMING) | {"time_scale": 0.1, "output_tokens": 8}))


def _shared_blocks(a: list[int], b: list[int]) -> int:
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k


def _common(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_formats_are_detected_and_read() -> None:
    moon, fmt, _ = load_trace(TRACES / "mooncake_sample.jsonl")
    assert fmt == "mooncake" and len(moon) == 8
    assert [r.at for r in moon[:3]] == [0.0, 0.4, 0.8] and moon[0].extra["hash_ids"] == [0, 1, 2, 3, 4]
    azure, fmt, _ = load_trace(TRACES / "azure_sample.csv")
    assert fmt == "azure" and [r.prompt_tokens for r in azure] == [374, 2101, 96, 1288, 655, 4023]
    assert azure[1].at == pytest.approx(0.240817, abs=1e-5) and azure[5].output_tokens == 35
    burst, fmt, skipped = load_trace(TRACES / "burstgpt_sample.csv")
    assert fmt == "burstgpt" and skipped == 2 and [r.at for r in burst] == [0.0, 1.0, 3.0, 6.0]
    for r in [*moon, *azure, *burst]:  # exact under the estimate: 4 characters per token + 7 framing tokens
        assert len(r.messages[0]["content"]) == 4 * (r.prompt_tokens - 7)
    forced, fmt, _ = load_trace(TRACES / "burstgpt_sample.csv", fmt="burstgpt")
    assert fmt == "burstgpt" and forced == burst


@pytest.mark.parametrize(("name", "text", "words"), [
    ("t.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 2}\n{"timestamp": 5, "input_length": "x", "output_length": 1}\n',
     "t.jsonl line 2: input_length must be a whole number of tokens, got 'x'"),
    ("t.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 2}\n\n{"timestamp": 1, "input_length": 9\n',
     "t.jsonl line 3 is not JSON"),
    ("t.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1, "a"]}\n',
     "t.jsonl line 1: hash_ids must be a list of non-negative ints"),
    ("a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,2\nyesterday,4,4\n",
     "a.csv line 3: TIMESTAMP must be a date and time"),
    ("b.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,GPT-4,9\n",
     "b.csv line 2: 3 columns where the header has 6"),
    ("c.csv", "when,prompt,answer\n1,2,3\n", "c.csv: line 1 is no format this reads"),
])  # fmt: skip
def test_a_malformed_trace_is_one_line_naming_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                                        text: str, words: str) -> None:  # fmt: skip
    path = tmp_path / name
    path.write_text(text)
    code = main(["--replay", str(path), "--concurrency", "1", "--out", str(tmp_path / "r.json"), "--quiet", "--emu-ideal"])
    err = capsys.readouterr().err
    assert code == 2 and words in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "r.json").exists()
    with pytest.raises(SystemExit):  # an unknown --replay-format is argparse's usage error
        main(["--replay", str(path), "--replay-format", "sharegpt"])
    capsys.readouterr()


def test_mooncake_prefixes_are_shared_block_by_block_on_the_wire_and_in_the_cache() -> None:
    requests, _, _ = load_trace(TRACES / "mooncake_sample.jsonl")
    ids = {r.messages[0]["content"]: r.extra["hash_ids"] for r in requests}
    with Emulator(timing=FAST, seed=1) as emu:
        run = run_bench(BenchConfig(target="emulator", base_url=emu.base_url, replay=str(TRACES / "mooncake_sample.jsonl"),
                                    traffic="replay", arrivals="recorded", rate=(4.0,), exact_output=False))  # fmt: skip
        wire = [r.body["messages"][0]["content"] for r in emu.requests if r.path == "/v1/chat/completions"]
    assert len(wire) == 8 and set(wire) == set(ids)
    pairs = 0
    for i, a in enumerate(wire):
        for b in wire[i + 1:]:
            k = _shared_blocks(ids[a], ids[b])
            assert _common(a, b) // 4 == BLOCK_TOKENS * k, (ids[a], ids[b])  # exactly 512 × shared blocks of tokens
            pairs += k > 0
    assert pairs >= 8
    # The emulator's reads: the longest block prefix shared with an earlier request, from 1,024 tokens on.
    cell = run.cells[0]
    by_index = {s["i"]: s for s in cell.samples}
    reads = []
    for r in requests:
        best = max((_shared_blocks(r.extra["hash_ids"], e.extra["hash_ids"]) for e in requests[: r.index]), default=0)
        predicted = BLOCK_TOKENS * best if BLOCK_TOKENS * best >= 1024 else 0
        assert by_index[r.index]["cache_read"] == predicted, (r.index, r.extra["hash_ids"])
        assert by_index[r.index]["in_tok"] == r.prompt_tokens
        reads.append(predicted)
    assert reads == [0, 1024, 2048, 0, 0, 2560, 0, 1536]


def test_azure_and_burstgpt_replay_keep_times_and_exact_lengths(tmp_path: Path) -> None:
    for name, n in (("azure_sample.csv", 6), ("burstgpt_sample.csv", 4)):
        out = tmp_path / f"{name}.json"
        code = main(["--replay", str(TRACES / name), "--arrivals", "recorded", "--rate", "20", "--emu-ideal",
                     "--emu-time-scale", "0.05", "--emu-output-tokens", "4", "--quiet", "--out", str(out)])  # fmt: skip
        assert code == 0
        doc: dict[str, Any] = json.loads(out.read_text())
        assert doc["config"]["replay_format"] == name.split("_")[0]
        samples = sorted(doc["cells"][0]["samples"], key=lambda s: s["i"])
        requests, _, _ = load_trace(TRACES / name)
        assert len(samples) == n and [s["in_tok"] for s in samples] == [r.prompt_tokens for r in requests]
        # Recorded times at 20× speed: each intended send at its trace offset / 20.
        assert [round(s["sched"], 3) for s in samples] == [round((r.at or 0) / 20, 3) for r in requests]


class _TokenizerServer:
    """A stand-in with a tokenizer of its own: 3 characters per token plus 10 for the chat template."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                chars = sum(len(m["content"]) for m in body["messages"])
                out = json.dumps({"count": -(-chars // 3) + 10, "max_model_len": 32768, "tokens": []}).encode()
                self.send_response(200 if self.path == "/tokenize" else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def test_prompts_are_fitted_to_a_servers_own_tokenizer() -> None:
    from latencykit.bench._tokenize import fit_prompts

    requests, _, _ = load_trace(TRACES / "azure_sample.csv")
    server = _TokenizerServer()
    try:
        fitted, info = fit_prompts(requests, server.url, "m")
    finally:
        server.close()
    assert info == {"tokenizer": "server /tokenize", "fitted": 6, "exact": 6, "off_max": 0}
    for r, f in zip(requests, fitted):
        assert -(-len(f.messages[0]["content"]) // 3) + 10 == r.prompt_tokens  # exact under the server's rule
        assert f.prompt_tokens == r.prompt_tokens and f.at == r.at
    with Emulator(timing=FAST) as plain:  # no /tokenize there: the estimate stays
        same, none = fit_prompts(requests, plain.base_url + "/v1", "m")
    assert none is None and same == requests


def test_a_vllm_target_counts_with_its_tokenize_and_server_insists_on_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from latencykit.emulator import VLLMConfig

    with Emulator(timing=FAST, vllm=VLLMConfig(model="tiny")) as emu:
        out = tmp_path / "v.json"
        assert main(["--target", "vllm", "--base-url", emu.base_url, "--replay", str(TRACES / "burstgpt_sample.csv"),
                     "--concurrency", "2", "--quiet", "--out", str(out), "--no-exact-output"]) == 0  # fmt: skip
        doc = json.loads(out.read_text())
        assert doc["config"]["prompt_lengths"] == {"tokenizer": "server /tokenize", "fitted": 4, "exact": 4, "off_max": 0}
        assert sorted(s["in_tok"] for s in doc["cells"][0]["samples"]) == [230, 512, 1203, 1750]
    with Emulator(timing=FAST) as plain:
        code = main(["--target", "vllm", "--base-url", plain.base_url, "--model", "m", "--tokenizer", "server", "--replay",
                     str(TRACES / "burstgpt_sample.csv"), "--concurrency", "1", "--quiet", "--out", str(tmp_path / "x.json")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "--tokenizer server:" in err and "has no /tokenize" in err and err.count("\n") == 1
