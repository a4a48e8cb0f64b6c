"""The HTML report: everything the terminal says, readable plots (round ticks, legends outside the data, a
latency-vs-throughput sweep with bands, one y scale across timelines, speed-up bars), and a headless-Chromium
screenshot where Chromium is installed (scripts/html_screenshot.py)."""

from __future__ import annotations

import importlib.util
import re
import shutil
from dataclasses import asdict
from pathlib import Path
from types import ModuleType

import pytest

from latencykit.bench._cell import BenchRun
from latencykit.bench._run import BenchConfig, run_bench
from latencykit.reports._svg import fmt_tick, nice_ticks, time_axis
from latencykit.emulator._timing import IDEAL_TIMING

FAST = asdict(IDEAL_TIMING) | {"time_scale": 0.1, "output_tokens": 8}
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "html_screenshot.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("html_screenshot", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sweep() -> BenchRun:
    """Two strategies at two load levels (a sweep with a comparison)."""
    return run_bench(BenchConfig(requests=16, concurrency=(2, 4), matrix=({"cache": "auto"}, {"cache": "off"}), timing=FAST,
                                 exact_output=False, seed=5))  # fmt: skip


def test_ticks_are_round_numbers_in_the_axis_unit() -> None:
    """2,120 ms and 3,420 ms axes tick at 0, 1,000, 2,000 ...; a timeline from 0.000313 s ticks from 0; no e+."""
    for lo, hi, want in ((0, 2120, ["0", "1,000", "2,000", "3,000"]), (0.000313, 12.3, ["0", "5", "10", "15"]),
                         (0, 86, ["0", "25", "50", "75", "100"]), (0, 0.37, ["0", "0.1", "0.2", "0.3", "0.4"])):  # fmt: skip
        ticks = nice_ticks(lo, hi)
        assert [fmt_tick(t, ticks) for t in ticks] == want
    assert time_axis(150.0) == ("ms", 1.0) and time_axis(3420.0) == ("s", 0.001)


def test_report_says_everything_the_terminal_says(sweep: BenchRun) -> None:
    """Goodput, cache verdicts, cold/warm, client health, configuration, versions, seed and start time."""
    page = sweep.to_html()
    for words in ("goodput", "cache verdicts", "TTFT cold vs warm", "event-loop lag", "configuration", "environment",
                  "versions", "httpx2", "started (UTC)", "<th>seed</th><td>5</td>", "emulator timing", "EMULATED",
                  "strategy comparison against the baseline cell &#x27;cache=auto&#x27;"):  # fmt: skip
        assert words in page, words


def test_plots_read_well(sweep: BenchRun) -> None:
    """Every tick is a plain round number; legends lie outside the plot area; the sweep plot marks each measured
    level with a band per percentile; the timelines share one y scale; the comparison is drawn as bars with CIs."""
    page = sweep.to_html()
    tool = _script()
    charts = tool.svgs(page)
    assert len(charts) >= 7
    for svg in charts:
        assert tool.check_ticks(svg) == [] and tool.check_legends(svg) == []
    assert "e+" not in "".join(re.findall(r'class="tick"[^>]*>([^<]*)<', page))
    sweep_plot = next(s for s in tool.svgs(page) if "achieved throughput" in (s.findtext(f"{tool.SVG_NS}title") or ""))
    assert sum(1 for c in sweep_plot.iter(f"{tool.SVG_NS}circle") if c.get("class") == "level") == 8  # 2 strategies × 2 levels × p50/p99
    assert sum(1 for p in sweep_plot.iter(f"{tool.SVG_NS}polygon") if p.get("class") == "band") == 4
    timelines = [s for s in charts if "timeline of" in (s.findtext(f"{tool.SVG_NS}title") or "")]
    y_ticks = {tuple(t.text for t in s.iter(f"{tool.SVG_NS}text") if t.get("class") == "tick" and t.get("text-anchor") == "end")
               for s in timelines}  # fmt: skip
    assert len(timelines) == 4 and len(y_ticks) == 1
    bars = next(s for s in charts if "speed-up against the baseline" in (s.findtext(f"{tool.SVG_NS}title") or ""))
    assert sum(1 for ln in bars.iter(f"{tool.SVG_NS}line") if ln.get("class") == "ci") == 8


@pytest.mark.skipif(shutil.which("chromium") is None and shutil.which("chromium-browser") is None,
                    reason="headless Chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)")  # fmt: skip
def test_screenshot_in_headless_chromium(sweep: BenchRun, tmp_path: Path) -> None:
    """The report renders in headless Chromium to a real PNG, and the script's checks pass."""
    tool = _script()
    page, png = tmp_path / "report.html", tmp_path / "report.png"
    page.write_text(sweep.to_html())
    tool.screenshot(page, png)
    assert png.stat().st_size > 20_000
    assert tool.check(page, png) == []
