"""`bench compare` is a CI gate: non-zero on a real 20 % TTFT regression, on more failed requests, on a run
without data, on missing cells and on other load levels; zero on an unchanged rerun, no flapping."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from latencykit.bench import BenchRun, gate_runs
from latencykit.bench._cell import Cell
from latencykit.bench._compare import ALPHA, compare_cells, fisher_greater, gate, parse_metric
from latencykit.bench._run import BenchConfig, run_bench
from latencykit.commands._bench import main
from latencykit.emulator._timing import IDEAL_TIMING


def _run(tmp: Path, name: str, ttft: float, client: str = "thin", requests: int = 48, concurrency: int = 16) -> Path:
    # The thin reader keeps the client's own CPU (and so this shared box's noise) out of a gate test;
    # the gate reads run files and does not care which client made them.
    timing = asdict(IDEAL_TIMING) | {"base_ttft": ttft, "output_tokens": 2}
    run = run_bench(BenchConfig(requests=requests, concurrency=(concurrency,), warmup=4, timing=timing, exact_output=False,
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


def test_a_p99_from_twenty_requests_is_never_beyond_noise() -> None:
    """20 requests cannot bound a P99 from above: one slow request (CI: a shared box's hiccup) never fails the gate,
    while the same shift from 2,000 requests does; the interval's open side is shown as such."""
    from latencykit.bench._stats import percentiles
    from latencykit.reports._report import pct_text

    def cell(values: list[float]) -> Cell:
        c = Cell({}, {}, {"mode": "closed", "concurrency": 1})
        c.sketches["ttft"].add_many(values)
        return c

    base = [0.254 + i * 1e-5 for i in range(20)]
    hiccup = base[:-1] + [0.285]  # the slowest of 20 is 12 % slower
    [rows] = [compare_cells(cell(base), cell(hiccup), ["ttft:p99", "ttft:p50"])]
    assert rows[0].change == pytest.approx(0.12, abs=0.02)
    assert rows[0].base.hi_open and not rows[0].significant
    assert gate(rows, 0.1) == []
    p99 = percentiles(cell(base).sketches["ttft"], [0.99])[0.99]
    assert pct_text(p99, True).startswith("~") and "–≥" in pct_text(p99, True)
    # From enough requests the same P99 shift is measured and gated.
    big = [0.254 * (1 + 0.001 * (i % 100)) for i in range(2000)]
    [big_rows] = [compare_cells(cell(big), cell([v * 1.12 for v in big]), ["ttft:p99"])]
    assert not big_rows[0].base.hi_open and big_rows[0].significant and gate(big_rows, 0.1) == big_rows
    # P50 from 5 requests is open on both sides (1 − 2·0.5⁵ < 95 %); from 20 it is closed.
    p50 = percentiles(cell(base[:5]).sketches["ttft"], [0.5])[0.5]
    assert p50.lo_open and p50.hi_open and p50.lower is None and p50.upper is None
    assert not rows[1].base.lo_open and not rows[1].base.hi_open


def test_compare_rejects_files_that_are_not_runs(tmp_path: Path) -> None:
    """A wrong file is a usage error (exit 2), not a pass."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something-else"}')
    assert main(["compare", str(bad), str(bad)]) == 2


# -- failed requests, missing cells, load levels ----------------------------------------------------

BOOM = "APIConnectionError: Connection error.; caused by ConnectError: [Errno 111] Connection refused"


def _cell(n: int, failed: int = 0, *, concurrency: int = 16, label: str = "", seed: int = 0) -> Cell:
    """A measured cell of ``n`` requests, ``failed`` of them (spread evenly) errors; TTFT ~200 ms."""
    rng = random.Random(seed)
    cell = Cell({"cache": label} if label else {}, {}, {"mode": "closed", "concurrency": concurrency})
    bad = {round(k * n / failed) for k in range(failed)} if failed else set()
    for i in range(n):
        ok = i not in bad
        ttft = 0.2 * rng.uniform(0.95, 1.05) if ok else None
        cell.samples.append({"i": i, "warmup": False, "client": None, "sent": i * 0.01, "ttft": ttft, "e2e": ttft,
                             "outcome": "completed" if ok else "error", "error": None if ok else "APIConnectionError",
                             "message": None if ok or i != min(bad) else BOOM})  # fmt: skip
        if ttft is not None:
            cell.sketches["ttft"].add(ttft)
            cell.sketches["e2e"].add(ttft)
    return cell


def _file(tmp: Path, name: str, *cells: Cell) -> str:
    return str(BenchRun({"target": {"emulated": True}}, {}, list(cells)).save(tmp / f"{name}.json"))


def test_fisher_exact_test_matches_the_hypergeometric_sum() -> None:
    """`fisher_greater` equals the one-sided sum of hypergeometric probabilities computed with exact integers."""

    def exact(bf: int, bn: int, nf: int, nn: int) -> float:
        total, failed = bn + nn, bf + nf
        return sum(math.comb(failed, k) * math.comb(total - failed, nn - k) for k in range(nf, min(failed, nn) + 1)) / math.comb(total, nn)

    for case in [(0, 200, 10, 200), (0, 200, 6, 200), (2, 200, 9, 200), (10, 200, 10, 200), (5, 40, 1, 300), (0, 20, 6, 6)]:
        assert fisher_greater(*case) == pytest.approx(exact(*case), rel=1e-9), case
    assert fisher_greater(0, 200, 0, 200) == 1.0 and fisher_greater(0, 0, 3, 3) == 1.0
    assert fisher_greater(0, 200, 7, 200) < ALPHA < fisher_greater(0, 200, 6, 200)  # the documented rule of thumb


def test_gate_fails_when_the_error_rate_rises_beyond_noise() -> None:
    """0 % → 5 % of 200 fails; an equal rate, or one more failure inside the noise, passes; the threshold is in points."""
    base = BenchRun({}, {}, [_cell(200)])
    up = gate_runs(base, BenchRun({}, {}, [_cell(200, 10)]))
    assert not up.passed and [k for k, _ in up.failures] == ["ERRORS"], up.failures
    assert "10 of 200 failed (5.0%)" in up.failures[0][1] and BOOM in up.failures[0][1]
    (row,) = up.errors
    assert (row.base_rate, row.new_rate) == (0.0, 0.05) and row.p_value < 0.001
    assert gate_runs(base, BenchRun({}, {}, [_cell(200, 1)])).passed  # one failure is noise
    assert gate_runs(BenchRun({}, {}, [_cell(200, 4)]), BenchRun({}, {}, [_cell(200, 4, seed=1)])).passed
    assert gate_runs(base, BenchRun({}, {}, [_cell(200, 10)]), max_error_increase=0.06).passed  # allowed 6 points


def test_gate_fails_when_every_request_failed_and_names_the_first_error() -> None:
    """A run whose requests all failed has no latency to compare: NO DATA, with the first error's message."""
    result = gate_runs(BenchRun({}, {}, [_cell(20)]), BenchRun({}, {}, [_cell(20, 20)]))
    kinds = [k for k, _ in result.failures]
    assert "NO DATA" in kinds and "ERRORS" in kinds and not result.regressions
    (line,) = [text for k, text in result.failures if k == "NO DATA"]
    assert line == f"new: baseline @ c=16 has no completed request (20 of 20 failed); first error: {BOOM}"
    # a base without data cannot vouch for anything either
    assert [k for k, _ in gate_runs(BenchRun({}, {}, [_cell(20, 20)]), BenchRun({}, {}, [_cell(20)])).failures] == ["NO DATA"]


def test_gate_names_cells_on_one_side_only_and_refuses_other_load_levels() -> None:
    """A missing or extra cell fails, named (``allow_missing`` notes it); different load levels never pair unless told."""
    base = BenchRun({}, {}, [_cell(40, label="auto"), _cell(40, label="off")])
    fewer = gate_runs(base, BenchRun({}, {}, [_cell(40, label="auto")]))
    assert fewer.failures == [("MISSING", "cache=off @ c=16 is in base only")]
    more = gate_runs(BenchRun({}, {}, [_cell(40, label="auto")]), base)
    assert more.failures == [("MISSING", "cache=off @ c=16 is in new only")]
    allowed = gate_runs(base, BenchRun({}, {}, [_cell(40, label="auto")]), allow_missing=True)
    assert allowed.passed and allowed.notes == ["cache=off @ c=16 is in base only"]
    other_level = BenchRun({}, {}, [_cell(40, concurrency=8)])
    refused = gate_runs(BenchRun({}, {}, [_cell(40)]), other_level)
    assert [k for k, _ in refused.failures] == ["LOAD"] and "base at c=16, new at c=8" in refused.failures[0][1]
    assert not refused.comparisons
    told = gate_runs(BenchRun({}, {}, [_cell(40)]), other_level, match_load="any")
    assert told.passed and told.notes and told.errors[0].cell == "baseline @ c=8 (base c=16)"
    sweep = gate_runs(BenchRun({}, {}, [_cell(40, concurrency=c) for c in (4, 8)]),
                      BenchRun({}, {}, [_cell(40, concurrency=c) for c in (8, 16)]), match_load="any")  # fmt: skip
    assert [e.cell for e in sweep.errors] == ["baseline @ c=8 (base c=4)", "baseline @ c=16 (base c=8)"]
    with pytest.raises(ValueError, match="match_load"):
        gate_runs(base, base, match_load="nearest")


def test_cli_compare_exit_codes_for_errors_missing_cells_and_load_levels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`bench compare`: 1 for all-failed, 0 % → 5 % errors, a missing cell or another load level; 0 when allowed; 2 on usage."""
    base = _file(tmp_path, "base", _cell(200), _cell(200, label="off"))
    cases = {
        "dead": (_file(tmp_path, "dead", _cell(200, 200), _cell(200, 200, label="off")), 1, "NO DATA"),
        "errors": (_file(tmp_path, "errors", _cell(200, 10), _cell(200, label="off")), 1, "ERRORS"),
        "missing": (_file(tmp_path, "missing", _cell(200)), 1, "MISSING"),
        "same": (_file(tmp_path, "same", _cell(200, seed=3), _cell(200, label="off", seed=3)), 0, "no rise of failed"),
    }
    for name, (new, code, word) in cases.items():
        assert main(["compare", base, new]) == code, name
        out = capsys.readouterr().out
        assert word in out, (name, out)
    assert main(["compare", base, cases["missing"][0], "--allow-missing"]) == 0
    one, other = _file(tmp_path, "c16", _cell(50)), _file(tmp_path, "c8", _cell(50, concurrency=8))
    assert main(["compare", one, other]) == 1 and "--match-load any" in capsys.readouterr().out
    assert main(["compare", one, other, "--match-load", "any"]) == 0
    with pytest.raises(SystemExit) as usage:
        main(["compare", one, other, "--match-load", "nearest"])
    assert usage.value.code == 2


def test_cli_compare_in_a_subprocess_fails_an_all_failed_run(tmp_path: Path) -> None:
    """The installed command, as CI runs it: non-zero against a run whose every request failed, saying why."""
    base, dead = _file(tmp_path, "base", _cell(40)), _file(tmp_path, "dead", _cell(40, 40))
    proc = subprocess.run([sys.executable, "-m", "latencykit.cli", "bench", "compare", base, dead],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"first error: {BOOM}" in proc.stdout and "gate failed" in proc.stdout


def test_unchanged_reruns_pass_the_gate_five_times(tmp_path: Path) -> None:
    """Five reruns of one configuration against the emulator (thin reader) each pass the default gate."""
    base = _run(tmp_path, "base", 0.25, requests=24, concurrency=8)
    codes = [main(["compare", str(base), str(_run(tmp_path, f"again{i}", 0.25, requests=24, concurrency=8))]) for i in range(5)]
    assert codes == [0] * 5
