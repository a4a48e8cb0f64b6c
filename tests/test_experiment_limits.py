"""The experiment's real-model figures: weight bytes from GGUF/safetensors headers, the roofline and
its bandwidth probe, task accuracy on prompts with known answers (issue #37)."""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from latencykit.experiment import ExperimentFileError, ExperimentRun, experiment, load_experiment
from latencykit.experiment._roofline import memory_bandwidth, roofline, strategy_files
from latencykit.experiment._tasks import accuracy, builtin_set, expected_answers, grade
from latencykit.experiment._weights import model_bytes, read_gguf

HERE = Path(__file__).resolve().parent


# -- a GGUF file written by hand, as the format's specification lays it out -----------------


def _s(text: str) -> bytes:
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def _kv(key: str, kind: int, value: Any) -> bytes:
    fmt = {4: "<I", 6: "<f", 10: "<Q"}
    if kind == 8:
        return _s(key) + struct.pack("<I", 8) + _s(value)
    if kind == 9:  # an array of strings (a vocabulary), which the reader must skip over
        return _s(key) + struct.pack("<IIQ", 9, 8, len(value)) + b"".join(_s(v) for v in value)
    return _s(key) + struct.pack("<I", kind) + struct.pack(fmt[kind], value)


def write_gguf(path: Path, tensors: list[tuple[str, list[int], int]], tied: bool = False) -> Path:
    """Header, metadata and tensor table of a small llama (data not needed by the reader)."""
    kvs = [_kv("general.architecture", 8, "llama"), _kv("llama.block_count", 4, 2), _kv("llama.attention.head_count", 4, 4),
           _kv("llama.attention.head_count_kv", 4, 2), _kv("llama.embedding_length", 4, 64),
           _kv("tokenizer.ggml.tokens", 9, [f"t{i}" for i in range(100)]), _kv("llama.rope.freq_base", 6, 10000.0)]  # fmt: skip
    table = b""
    for name, dims, kind in tensors:
        table += _s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", kind, 0)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + table)
    return path


TENSORS = [("token_embd.weight", [64, 100], 1), ("output.weight", [64, 100], 8), ("blk.0.attn_q.weight", [64, 64], 2),
           ("blk.0.attn_norm.weight", [64], 0)]  # fmt: skip
"""F16 embeddings 64×100, a Q8_0 output matrix, a Q4_0 matrix, an F32 norm."""


def test_gguf_weight_bytes_follow_the_block_sizes_and_count_the_embedding_table_as_one_row(tmp_path: Path) -> None:
    """Bytes = elements / block × block bytes per type; a step reads one embedding row when the output matrix is separate."""
    m = model_bytes(write_gguf(tmp_path / "m.gguf", TENSORS))
    embd, out, q, norm = 6400 * 2, 6400 // 32 * 34, 4096 // 32 * 18, 64 * 4
    assert m.types == {"F16": embd, "Q8_0": out, "Q4_0": q, "F32": norm}
    assert m.weights == embd + out + q + norm
    assert m.per_token == out + q + norm + 64 * 2  # one row of the F16 table
    assert (m.layers, m.kv_heads, m.head_size, m.architecture) == (2, 2, 16, "llama")
    assert m.kv_per_token() == 2 * 2 * 16 * (2 + 2)  # layers × kv heads × head size × (K + V) f16 bytes
    assert m.kv_per_token("q8_0") == pytest.approx(2 * 2 * 16 * 2 * 34 / 32)


def test_tied_embeddings_are_read_whole_as_the_output_matrix(tmp_path: Path) -> None:
    """No output.weight: the embedding table is the output projection, every byte of it read per token."""
    m = model_bytes(write_gguf(tmp_path / "tied.gguf", [t for t in TENSORS if t[0] != "output.weight"]))
    assert m.per_token == m.weights


def test_safetensors_bytes_come_from_the_headers_and_config(tmp_path: Path) -> None:
    """A Hugging Face folder: data_offsets per tensor, layers and KV heads from config.json, lm_head present = untied."""
    header = {"model.embed_tokens.weight": {"dtype": "BF16", "shape": [100, 64], "data_offsets": [0, 12800]},
              "lm_head.weight": {"dtype": "BF16", "shape": [100, 64], "data_offsets": [12800, 25600]},
              "__metadata__": {"format": "pt"}}  # fmt: skip
    raw = json.dumps(header).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(25600))
    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 1,
                                                      "hidden_size": 64, "architectures": ["LlamaForCausalLM"]}))  # fmt: skip
    m = model_bytes(tmp_path)
    assert m.format == "safetensors" and m.weights == 25600 and m.per_token == 12800 + 128
    assert m.kv_per_token("bf16") == 3 * 1 * 16 * 4


def test_a_file_that_is_not_gguf_is_one_clear_error(tmp_path: Path) -> None:
    """Wrong magic, a cut header, a missing path: ValueError naming the file."""
    (tmp_path / "x.gguf").write_bytes(b"NOPE" + bytes(20))
    with pytest.raises(ValueError, match="not a GGUF file"):
        read_gguf(tmp_path / "x.gguf")
    good = write_gguf(tmp_path / "m.gguf", TENSORS).read_bytes()
    (tmp_path / "cut.gguf").write_bytes(good[:60])
    with pytest.raises(ValueError, match="cut.gguf"):
        model_bytes(tmp_path / "cut.gguf")
    with pytest.raises(ValueError, match="no model file"):
        model_bytes(tmp_path / "missing.gguf")


def test_the_bandwidth_probe_measures_a_plausible_rate() -> None:
    """A copy moves read + written bytes; the best round gives a rate between 0.1 GB/s and 1 TB/s on any machine."""
    bw = memory_bandwidth(threads=1, mib=16, repeats=3)
    assert 1e8 < bw["bytes_per_s"] < 1e12
    assert len(bw["round_s"]) == 3 and bw["bytes_per_s"] == pytest.approx(2 * 16 * 2**20 / min(bw["round_s"]))
    two = memory_bandwidth(threads=2, mib=16, repeats=2)
    assert two["threads"] == 2 and two["bytes_per_s"] > 0


def test_the_roofline_is_bytes_over_bandwidth_with_the_command_lines_files(tmp_path: Path) -> None:
    """-m, -md and --cache-type-k/v from a llama-server command; roofline = (weights + KV × context) / bandwidth."""
    write_gguf(tmp_path / "m.gguf", TENSORS)
    files = strategy_files(["llama-server", "-m", "m.gguf", "-md", "m.gguf", "-ctk", "q8_0", "--cache-type-v", "q4_0"], str(tmp_path))
    assert files == {"model": str(tmp_path / "m.gguf"), "draft": str(tmp_path / "m.gguf"), "kv_k": "q8_0", "kv_v": "q4_0"}
    r = roofline(files, 100.0, 1e9)
    m = model_bytes(tmp_path / "m.gguf")
    kv = 2 * 2 * 16 * (34 / 32 + 18 / 32)
    assert r["bytes_per_token"] == pytest.approx(m.per_token + kv * 100)
    assert r["roofline_tpot_s"] == pytest.approx((m.per_token + kv * 100) / 1e9)
    assert r["draft_weight_bytes_per_token"] == m.per_token
    vllm = strategy_files(["python", "-m", "vllm", "--model", "/abs/hf", "--kv-cache-dtype=fp8"], str(tmp_path))
    assert vllm["model"] == "/abs/hf" and vllm["kv_k"] == vllm["kv_v"] == "fp8"
    assert "error" in roofline({"model": None}, 10, 1e9) and "error" in roofline(files, 10, None)


# -- task accuracy -------------------------------------------------------------------------------


@pytest.mark.parametrize(("answer", "expected", "right"), [
    ("The capital of France is Paris.", {"answer": "Paris"}, True),
    ("Parisian food is good", {"answer": "Paris"}, False),
    ("42", {"answer": "42", "match": "number"}, True),
    ("6 times 7 is 42.", {"answer": "42", "match": "number"}, True),
    ("42 is 6 times 7", {"answer": "42", "match": "number"}, False),
    ("1,000", {"answer": "1000", "match": "number"}, True),
    ("eight legs", {"answer": "8", "accept": ["eight"], "match": "number"}, True),
    ("  'Blue.' ", {"answer": "blue", "match": "exact"}, True),
    ("YES", {"answer": r"^\W*YES\W*$", "match": "regex"}, True),
    ("Yes, sure", {"answer": r"^\W*YES\W*$", "match": "regex"}, False),
])  # fmt: skip
def test_grade_applies_each_match_rule(answer: str, expected: dict[str, Any], right: bool) -> None:
    """contains (whole words), number (the last number), exact (trimmed), regex (case-sensitive)."""
    assert grade(answer, expected) is right


def test_the_shipped_set_has_known_answers_of_four_kinds() -> None:
    """24 prompts, each with an answer and a valid match: arithmetic, capitals, facts, instructions."""
    path = builtin_set("basic")
    rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
    assert len(rows) == 24 and {r["kind"] for r in rows} == {"arithmetic", "capitals", "facts", "instructions"}
    assert all(e is not None for e in expected_answers(path, 100))
    with pytest.raises(ValueError, match="basic"):
        builtin_set("nope")


def test_accuracy_counts_graded_prompts_and_a_users_grader_replaces_the_rules() -> None:
    """Prompts without an answer or without a reply are not graded; a grader gets (prompt, answer, row)."""
    exp = [{"answer": "Paris"}, None, {"answer": "4", "match": "number"}, {"answer": "Rome"}]
    acc = accuracy(["Paris.", "anything", "5", None], exp)
    assert (acc["correct"], acc["graded"], acc["right"]) == (1.0, 2, [1.0, None, 0.0, None])
    seen: list[tuple[str, str, str]] = []

    def grader(prompt: str, answer: str, row: dict[str, Any]) -> float:
        seen.append((prompt, answer, row["answer"]))
        return 0.5

    acc = accuracy(["Paris.", "x", "5", "Rome"], exp, ["p0", "p1", "p2", "p3"], grader)
    assert acc["accuracy"] == 0.5 and seen[0] == ("p0", "Paris.", "Paris") and len(seen) == 3


def test_bad_rows_and_bad_quality_keys_are_one_line_errors(tmp_path: Path) -> None:
    """A bad match, a bad pattern, set and file together, an unknown set, a grader that does not import."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "p", "answer": "x", "match": "fuzzy"}) + "\n")
    base = {"server": {"command": "true {port}"}, "strategy": [{"name": "a"}]}
    with pytest.raises(ExperimentFileError, match=r"quality.file: .*line 1: match must be one of"):
        load_experiment({**base, "quality": {"file": str(bad)}})
    bad.write_text(json.dumps({"prompt": "p", "answer": "(", "match": "regex"}) + "\n")
    with pytest.raises(ExperimentFileError, match="not a valid pattern"):
        load_experiment({**base, "quality": {"file": str(bad)}})
    with pytest.raises(ExperimentFileError, match="quality.set: give a set"):
        load_experiment({**base, "quality": {"file": str(bad), "set": "basic"}})
    with pytest.raises(ExperimentFileError, match="quality.set: set must be one of basic, got 'nope'"):
        load_experiment({**base, "quality": {"set": "nope"}})
    with pytest.raises(ExperimentFileError, match="quality.grader: cannot import 'no_such_mod'"):
        load_experiment({**base, "quality": {"set": "basic", "grader": "no_such_mod:f"}})
    with pytest.raises(ExperimentFileError, match="roofline.threads: must be >= 1, got 0"):
        load_experiment({**base, "roofline": {"threads": 0}})
    spec = load_experiment({**base, "quality": {"set": "basic"}})
    assert spec.quality.file == builtin_set("basic") and spec.roofline.threads == 1


def test_example_quality_prints_the_set() -> None:
    """`latencykit experiment --example quality` prints the shipped prompts, ready to edit."""
    out = subprocess.run([sys.executable, "-m", "latencykit.cli", "experiment", "--example", "quality"], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    assert out == Path(builtin_set("basic")).read_text()


# -- end to end on the emulator --------------------------------------------------------------


def test_accuracy_bandwidth_and_the_roofline_reason_are_in_the_run_file(tmp_path: Path) -> None:
    """Two emulator strategies on the shipped set with a user's grader: accuracy per strategy (the baseline's too),
    the machine and its bandwidth probe in the run file, the roofline's reason where there is no model file."""
    (tmp_path / "grade_all.py").write_text("def grade(prompt, answer, expected):\n    return len(answer) > 0\n")
    sys.path.insert(0, str(tmp_path))
    try:
        data = {"name": "acc", "baseline": "a",
                "traffic": {"shape": "chat", "requests": 4, "seed": 0}, "load": {"concurrency": 2},
                "server": {"target": "emulator", "command": "{python} -m latencykit.cli bench emulator --port {port} --seed 0 "
                                                            "--preset bench --time-scale 0.05 {args}"},
                "quality": {"set": "basic", "prompts": 5, "max_tokens": 6, "grader": "grade_all:grade"},
                "strategy": [{"name": "a"}, {"name": "b", "args": "--tpot 0.001"}]}  # fmt: skip
        run = experiment(data, out=tmp_path / "out")
    finally:
        sys.path.remove(str(tmp_path))
    assert not run.failed
    raw = json.loads((tmp_path / "out" / "experiment.json").read_text())
    measured = raw["experiment"]
    assert measured["machine"]["bandwidth"]["bytes_per_s"] > 0 and measured["machine"]["cores"]
    for s in measured["strategies"]:
        assert s["quality"]["accuracy"] == 1.0 and s["quality"]["graded"] == 5 and s["quality"]["right"] == [1.0] * 5
        assert s["roofline"] == {"error": "no model file in the server's command (-m/--model) or the strategy"}
        assert s["cold_start"]["warm_tpot_s"] is not None
    again = ExperimentRun.load(tmp_path / "out" / "experiment.json")
    buf = io.StringIO()
    again.report(Console(file=buf, width=80))
    text = buf.getvalue()
    assert "accuracy" in text and "5/5 100%" in text and "machine:" in text
