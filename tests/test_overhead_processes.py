"""`benchmarks/overhead.py --only async --async-processes N`: each row in N fresh processes, read across them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from latencykit.emulator import Emulator

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from overhead_async import ROWS, RowResult, _row_in_process, across_processes, verdict  # noqa: E402


def _run(ratio: float, aa: float = 1.0, raw_s: float = 0.002) -> RowResult:
    return RowResult(raw_s, raw_s * ratio, (ratio, ratio - 0.005, ratio + 0.005), (aa, aa - 0.005, aa + 0.005))


def test_each_process_is_one_observation_and_the_interval_spans_them() -> None:
    """Six processes: the ratio is the median of their medians, the interval their whole spread
    (too few to bound the median tighter), so one process under the goal does not make the row within."""
    runs = [_run(r) for r in (1.074, 1.073, 1.079, 1.070, 1.067, 1.072)]
    res = across_processes(runs)
    assert res.ratio[0] == pytest.approx(1.0725) and res.ratio[1:] == (1.067, 1.079)
    assert res.aa[0] == 1.0 and res.raw_s == 0.002
    assert verdict(res.ratio[1], res.ratio[2]) == "over"
    mixed = across_processes([_run(r) for r in (1.046, 1.052, 1.049, 1.055, 1.048, 1.051)])
    assert verdict(mixed.ratio[1], mixed.ratio[2]) == "unsure"  # inside one process it might have read "within"


def test_a_row_runs_in_its_own_process_and_comes_back_whole(emu: Emulator) -> None:
    """The child measures the row against the given emulator and prints it; nothing is left running."""
    name = "anthropic messages.create(stream=True)"
    assert name in ROWS
    before = _children()
    res = _row_in_process(emu.base_url, name, rounds=2, calls=2)
    assert res.raw_s > 0 and res.mine_s > 0
    ratio, lo, hi = res.ratio
    assert lo <= ratio <= hi and ratio == pytest.approx(res.mine_s / res.raw_s, rel=0.5)
    assert _children() <= before  # the row's process was waited for (servers other tests started may remain)


def _children() -> set[str]:
    """This process's child PIDs (empty where /proc does not list them)."""
    pid = os.getpid()
    listing = Path(f"/proc/{pid}/task/{pid}/children")
    return set(listing.read_text().split()) if listing.exists() else set()


def test_a_failing_row_names_itself(emu: Emulator) -> None:
    with pytest.raises(RuntimeError, match="no such row"):
        _row_in_process(emu.base_url, "no such row", rounds=2, calls=2)
