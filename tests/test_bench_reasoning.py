"""`latencykit bench --traffic reasoning`: TTFT and TTFO apart in every view, the run file, compare and SLOs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from latencykit.commands._bench import main

CLI = [sys.executable, "-m", "latencykit.cli"]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A reasoning run on the emulator (Anthropic API: summarized thinking streams first) and its terminal output."""
    folder = tmp_path_factory.mktemp("reasoning")
    out = folder / "run.json"
    proc = subprocess.run(
        [*CLI, "bench", "--target", "emulator", "--api", "anthropic", "--traffic", "reasoning", "--requests", "12",
         "--concurrency", "4", "--emu-time-scale", "0.2", "--slo", "ttfo<=5s", "--out", str(out), "--format", "markdown"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    again = folder / "again.json"
    assert main(["--target", "emulator", "--api", "anthropic", "--traffic", "reasoning", "--requests", "12",
                 "--concurrency", "4", "--emu-time-scale", "0.2", "--out", str(again), "--quiet"]) == 0  # fmt: skip
    return out, again, proc.stdout


def test_report_has_a_ttfo_row_after_ttft(runs: tuple[Path, Path, str]) -> None:
    """The report shows TTFO (the answer's first token) beside TTFT (the first thinking token), later than it."""
    out, _, text = runs
    assert any(line.startswith("| TTFO ") for line in text.splitlines()), text[:3000]
    data = json.loads(out.read_text())
    summary = data["cells"][0]["summary"]
    assert summary["ttfo"]["n"] == 12
    assert summary["ttfo"]["p50_s"] > summary["ttft"]["p50_s"]
    assert "ttfo<=5s" in text


def test_jq_reads_ttfo_percentiles(runs: tuple[Path, Path, str]) -> None:
    """``jq '.cells[0].summary.ttfo.p99_s' run.json`` gives the P99 in seconds."""
    out, _, _ = runs
    jq = shutil.which("jq")
    if jq is None:
        pytest.skip("jq is not installed (.ci/run installs it)")
    value = subprocess.run([jq, ".cells[0].summary.ttfo.p99_s", str(out)], capture_output=True, text=True, check=True).stdout
    assert float(value) == json.loads(out.read_text())["cells"][0]["summary"]["ttfo"]["p99_s"] > 0


def test_compare_gates_on_ttfo(runs: tuple[Path, Path, str]) -> None:
    """``bench compare --metric ttfo:p99`` reads the TTFO sketches (same seed, same emulator: no regression)."""
    out, again, _ = runs
    proc = subprocess.run([*CLI, "bench", "compare", str(out), str(again), "--metric", "ttfo:p99", "--max-regression", "50%"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "TTFO" in proc.stdout or "ttfo" in proc.stdout
