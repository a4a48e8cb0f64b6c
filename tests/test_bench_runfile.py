"""Run files a CI script reads without latencykit: a per-cell summary in seconds; old files still read."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from latencykit.bench._cell import FORMAT, BenchRun
from latencykit.commands._bench import main

CLI = [sys.executable, "-m", "latencykit.cli"]


@pytest.fixture(scope="module")
def run_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small emulated run written by the CLI."""
    out = tmp_path_factory.mktemp("run") / "run.json"
    code = main(["--traffic", "chat", "--requests", "24", "--concurrency", "4", "--emu-ideal", "--emu-time-scale", "0.1",
                 "--emu-output-tokens", "8", "--no-exact-output", "--out", str(out), "--quiet"])  # fmt: skip
    assert code == 0
    return out


def test_summary_holds_percentiles_in_seconds_for_every_metric(run_file: Path) -> None:
    """Plain JSON (as jq or pandas read it): P50..P99.9, mean, n for each metric, equal to the pooled samples within 1 %."""
    data = json.loads(run_file.read_text())
    assert data["format"] == FORMAT == "latencykit-bench/3"
    cell = data["cells"][0]
    ttft = cell["summary"]["ttft"]
    assert set(ttft) == {"n", "mean_s", "min_s", "p50_s", "p90_s", "p95_s", "p99_s", "p99_9_s", "max_s"}
    measured = [s["ttft"] for s in cell["samples"] if not s["warmup"] and s.get("ttft") is not None]
    assert ttft["n"] == len(measured) == 24
    exact = np.sort(np.array(measured))
    for name, q in (("p50_s", 0.5), ("p99_s", 0.99)):
        # the sketch's quantile: within 1 % of the nearest-rank sample (rank ceil(q * n))
        rank = int(np.ceil(q * len(exact))) - 1
        assert ttft[name] == pytest.approx(exact[rank], rel=0.011), name
    assert ttft["min_s"] <= ttft["p50_s"] <= ttft["p99_s"] <= ttft["max_s"]
    assert ttft["mean_s"] == pytest.approx(float(exact.mean()), rel=1e-9)
    assert cell["key"] == BenchRun.load(run_file).cells[0].key


def test_jq_reads_p99_ttft(run_file: Path) -> None:
    """The README's one-liner: ``jq '.cells[0].summary.ttft.p99_s' run.json`` (jq where installed, else the same path in Python)."""
    expected = json.loads(run_file.read_text())["cells"][0]["summary"]["ttft"]["p99_s"]
    jq = shutil.which("jq")
    if jq is not None:
        out = subprocess.run([jq, ".cells[0].summary.ttft.p99_s", str(run_file)], capture_output=True, text=True, check=True)
        assert float(out.stdout) == pytest.approx(expected)
    assert isinstance(expected, float) and expected > 0


def test_an_old_format_file_is_still_compared_and_merged(run_file: Path, tmp_path: Path) -> None:
    """A latencykit-bench/1 file (no summary) is read by ``bench compare`` and ``bench merge``; merge writes the current format."""
    data = json.loads(run_file.read_text())
    data["format"] = "latencykit-bench/1"
    for cell in data["cells"]:
        del cell["summary"], cell["key"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    assert BenchRun.load(old).cells[0].sketches["ttft"].count == 24
    compare = subprocess.run([*CLI, "bench", "compare", str(old), str(run_file)], capture_output=True, text=True, timeout=120)
    assert compare.returncode == 0, compare.stdout + compare.stderr
    merged = tmp_path / "merged.json"
    merge = subprocess.run([*CLI, "bench", "merge", str(old), str(run_file), "--out", str(merged)], capture_output=True, text=True, timeout=120)
    assert merge.returncode == 0, merge.stdout + merge.stderr
    out = json.loads(merged.read_text())
    assert out["format"] == FORMAT and out["cells"][0]["summary"]["ttft"]["n"] == 48


def test_an_unknown_format_is_refused_in_one_line(tmp_path: Path) -> None:
    """A file of another format: exit 2 and one line naming the format, no traceback."""
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "latencykit-bench/99", "cells": []}))
    out = subprocess.run([*CLI, "bench", "compare", str(bad), str(bad)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "latencykit-bench/99" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("target, key", [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY")])
def test_a_hosted_target_without_model_names_valid_models(target: str, key: str) -> None:
    """``--target anthropic|openai`` without ``--model``: one line, exit 2, saying why there is no default and naming models."""
    import os

    env = {**os.environ, key: "sk-test-not-used"}
    out = subprocess.run([*CLI, "bench", "--target", target, "--requests", "1"], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    line = out.stderr.strip()
    assert "needs --model" in line and "models.list()" in line and "e.g." in line and "\n" not in line
