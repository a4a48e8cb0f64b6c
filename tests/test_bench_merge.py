"""`bench merge`: only runs that belong together merge (or forced, and marked); rates add; counts are right."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from latencykit.bench._cell import BenchRun
from latencykit.bench._run import BenchConfig, run_bench
from latencykit.emulator._timing import IDEAL_TIMING

FAST = asdict(IDEAL_TIMING) | {"time_scale": 0.1, "output_tokens": 8}


@pytest.fixture(scope="module")
def base() -> dict[str, Any]:
    """One small open-loop run, as a run-file dict (copies of it stand for other workers' files)."""
    run = run_bench(BenchConfig(requests=12, rate=(20.0,), concurrency=(4,), timing=FAST, exact_output=False))
    return run.to_dict()


def _run(d: dict[str, Any], **changes: Any) -> BenchRun:
    out = copy.deepcopy(d)
    for path, value in changes.items():
        node = out["config"]
        *head, last = path.split("__")
        for part in head:
            node = node[part]
        node[last] = value
    return BenchRun.from_dict(out)


def test_runs_that_measured_other_things_are_refused_with_the_differences_named(base: dict[str, Any]) -> None:
    """Another traffic shape, API, model or emulator timing: ValueError naming each difference and --force."""
    for change, words in (({"traffic": "shared-prefix"}, "traffic chat vs shared-prefix"),
                          ({"target__api": "anthropic"}, "API openai vs anthropic"),
                          ({"target__model": "other"}, "model gpt-5-mini vs other"),
                          ({"emulator_timing__base_ttft": 0.5}, "emulator timing base_ttft 0.2 vs 0.5")):  # fmt: skip
        with pytest.raises(ValueError) as info:
            BenchRun.merge([_run(base), _run(base, **change)], names=["a.json", "b.json"])
        assert words in str(info.value) and "b.json differs from a.json" in str(info.value) and "--force" in str(info.value)


def test_a_cell_at_another_load_is_refused(base: dict[str, Any]) -> None:
    """Same key, other duration: the cells measured different loads."""
    other = copy.deepcopy(base)
    other["cells"][0]["load"]["duration"] = 5.0
    with pytest.raises(ValueError, match="has another load .*duration none vs 5.0"):
        BenchRun.merge([_run(base), BenchRun.from_dict(other)])


def test_force_merges_and_marks_the_result(base: dict[str, Any]) -> None:
    """--force merges anyway; the config and the report's header say what differed."""
    merged = BenchRun.merge([_run(base), _run(base, traffic="rag")], force=True)
    assert merged.config["forced"] and "traffic chat vs rag" in merged.config["forced"][0]
    from latencykit.reports._report import header_text

    assert "FORCED MERGE" in header_text(merged)
    again = BenchRun.from_dict(json.loads(json.dumps(merged.to_dict())))
    assert again.config["forced"] == merged.config["forced"]


def test_rates_of_runs_side_by_side_add(base: dict[str, Any]) -> None:
    """Two workers' files of the same schedule: offered, drawn, sent and completed rates double; the sketches
    and counts add; the merged run's samples keep their part and re-merging keeps counting."""
    one = _run(base)
    tp1 = one.cells[0].throughput()
    merged = BenchRun.merge([_run(base), _run(base)])
    cell = merged.cells[0]
    tp2 = cell.throughput()
    for k in ("offered_rps", "drawn_rps", "sent_rps", "completed_rps", "output_tps"):
        assert tp2[k] == pytest.approx(2 * tp1[k]), k
    assert tp2["completed_rps"] <= tp2["sent_rps"] + 1e-9
    assert len(cell.samples) == 24 and cell.sketches["ttft"].count == 2 * one.cells[0].sketches["ttft"].count
    assert sorted({s["part"] for s in cell.samples}) == [0, 1] and len(cell.parts) == 2
    assert not any("did not all run at the same time" in w for w in cell.warnings)
    thrice = BenchRun.merge([BenchRun.from_dict(merged.to_dict()), _run(base)])
    assert thrice.config["merged_from"] == 3 and len(thrice.cells[0].parts) == 3
    assert thrice.cells[0].throughput()["completed_rps"] == pytest.approx(3 * tp1["completed_rps"])


def test_runs_at_different_times_are_noted(base: dict[str, Any]) -> None:
    """Merged runs with no instant in common: their rates still add, and a warning says so."""
    later = copy.deepcopy(base)
    later["cells"][0]["window"] = [w + 3600 for w in later["cells"][0]["window"]]
    merged = BenchRun.merge([_run(base), BenchRun.from_dict(later)])
    assert any("did not all run at the same time" in w for w in merged.cells[0].warnings)


def test_merge_command_counts_and_refuses(tmp_path: Path, base: dict[str, Any]) -> None:
    """The command: 'merged 2 files into 1 cell, 24 requests'; a mismatch is one line and exit 2; --force marks it."""
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    _run(base).save(a)
    _run(base).save(b)
    _run(base, target__api="anthropic").save(c)

    def merge(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "latencykit.cli", "bench", "merge", *args], capture_output=True,
                              text=True, timeout=120)  # fmt: skip

    ok = merge(str(a), str(b), "-o", str(tmp_path / "ab.json"))
    assert ok.returncode == 0, ok.stderr
    assert "merged 2 files into 1 cell, 24 requests" in ok.stdout
    bad = merge(str(a), str(c), "-o", str(tmp_path / "ac.json"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    assert "API openai vs anthropic" in bad.stderr and not (tmp_path / "ac.json").exists()
    forced = merge(str(a), str(c), "-o", str(tmp_path / "ac.json"), "--force")
    assert forced.returncode == 0 and "FORCED" in forced.stdout
    assert BenchRun.load(tmp_path / "ac.json").config["forced"]
    single = merge(str(a), "-o", str(tmp_path / "one.json"))
    assert "merged 1 file into 1 cell, 12 requests" in single.stdout
