"""`bench compare` is a CI gate: non-zero on a real 20 % TTFT regression, zero on an unchanged rerun, no flapping."""

from __future__ import annotations

import random
from dataclasses import asdict
from pathlib import Path

import pytest

from latencykit.bench._cell import Cell
from latencykit.bench._compare import compare_cells, gate, parse_metric
from latencykit.bench._run import BenchConfig, run_bench
from latencykit.bench.cli import main
from latencykit.emulator._timing import IDEAL_TIMING


def _run(tmp: Path, name: str, ttft: float, client: str = "thin") -> Path:
    # The thin reader keeps the client's own CPU (and so this shared box's noise) out of a gate test;
    # the gate reads run files and does not care which client made them.
    timing = asdict(IDEAL_TIMING) | {"base_ttft": ttft, "output_tokens": 2}
    run = run_bench(BenchConfig(requests=48, concurrency=(16,), warmup=4, timing=timing, exact_output=False,
                                matrix=({"client": client},)))  # fmt: skip
    return run.save(tmp / f"{name}.json")


@pytest.mark.slow  # eleven real runs of about a second each
def test_gate_fails_on_a_20_percent_regression_and_passes_an_unchanged_rerun(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Five reruns of each against one baseline: every regressed run exits 1, every unchanged one exits 0."""
    base = _run(tmp_path, "base", 0.5)
    args = ["--max-regression", "10%", "--metric", "ttft:p50", "--metric", "ttft_service:p50"]
    codes_regressed = [main(["compare", str(base), str(_run(tmp_path, f"slow{i}", 0.6)), *args]) for i in range(5)]
    out = capsys.readouterr().out
    codes_same = [main(["compare", str(base), str(_run(tmp_path, f"same{i}", 0.5)), *args]) for i in range(5)]
    assert codes_regressed == [1] * 5, out
    assert "REGRESSION" in out and "EMULATED" in out and "speed-up" in out
    assert codes_same == [0] * 5, capsys.readouterr().out


def test_gate_needs_the_difference_to_be_beyond_noise() -> None:
    """+20 % at P50 fails only when the confidence intervals separate: a wide, small sample stays within noise."""
    rng = random.Random(5)

    def cell(values: list[float]) -> Cell:
        c = Cell({}, {}, {"mode": "closed", "concurrency": 1})
        c.sketches["ttft"].add_many(values)
        return c

    tight = [0.2 * rng.uniform(0.98, 1.02) for _ in range(400)]
    noisy = [0.2 * rng.lognormvariate(0, 0.8) for _ in range(30)]
    [tight_rows] = [compare_cells(cell(tight), cell([v * 1.2 for v in tight]), ["ttft:p50"])]
    [noisy_rows] = [compare_cells(cell(noisy), cell([v * 1.2 for v in noisy]), ["ttft:p50"])]
    assert tight_rows[0].change == pytest.approx(0.2, abs=0.05)  # within the sketch's 1 % per value
    assert noisy_rows[0].change == pytest.approx(0.2, abs=0.05)
    assert gate(tight_rows, 0.1) == tight_rows
    assert gate(noisy_rows, 0.1) == []  # slower, but inside the noise
    assert gate(tight_rows, 0.25) == []  # beyond noise, but within the allowed 25 %
    with pytest.raises(ValueError, match="metric must be one of"):
        parse_metric("latency:p50")
    with pytest.raises(ValueError, match="percentile"):
        parse_metric("ttft:p42")


def test_compare_rejects_files_that_are_not_runs(tmp_path: Path) -> None:
    """A wrong file is a usage error (exit 2), not a pass."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something-else"}')
    assert main(["compare", str(bad), str(bad)]) == 2
