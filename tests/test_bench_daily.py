"""The bench as a daily tool (#30), in process: honest schedules, replay input, meaningful matrices,
readable numbers, and emulated figures labelled so whatever the target was called."""

from __future__ import annotations

import io
import json
import random
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from latencykit.bench._cell import BenchRun, Cell
from latencykit.bench._config import build_requests, plan_matrix
from latencykit.bench._diagnose import diagnose
from latencykit.reports._report import header_text, pct_text, report_json, report_markdown
from latencykit.bench._run import BenchConfig, environment, run_bench
from latencykit.bench._stats import Pct
from latencykit.emulator import Emulator, TimingModel
from latencykit.emulator._timing import IDEAL_TIMING

FAST = asdict(IDEAL_TIMING) | {"time_scale": 0.1, "output_tokens": 8}


def _open_cell(sched: list[float], lateness: float, window: float, rate: float) -> Cell:
    """A measured open-loop cell: one completed request per intended send time, each sent ``lateness`` × its
    index late, 100 ms long."""
    load = {"mode": "open", "concurrency": 8, "rate": rate, "arrivals": "poisson", "burstiness": 1.0, "duration": window,
            "warmup": 0, "ramp": 0.0}  # fmt: skip
    cell = Cell({}, {}, load, scheduled=len(sched), schedule={"arrivals": len(sched), "window_s": window})
    for i, t in enumerate(sched):
        sent = t + lateness * i
        cell.samples.append({"i": i, "sched": t, "sent": sent, "queue": sent - t, "warmup": False, "client": None,
                             "outcome": "completed", "e2e_service": 0.1, "out_tok": 8, "ttft": 0.05 + sent - t})  # fmt: skip
        cell.sketches["queue"].add(sent - t)
    return cell


def test_behind_schedule_compares_with_the_schedule_drawn() -> None:
    """--rate 3 --duration 12 drew 24 arrivals (2 req/s): all sent on time is on schedule, whatever the nominal
    rate; a client that fell behind (the last send 8 s late) is flagged against the 2 req/s drawn."""
    rng = random.Random(3)
    sched = [0.0, *sorted(rng.uniform(0, 12) for _ in range(23))]  # arrival offsets start at 0
    on_time = _open_cell(sched, 0.0, 12.0, 3.0)
    tp = on_time.throughput()
    assert tp["offered_rps"] == 3.0 and tp["drawn_rps"] == pytest.approx(2.0) and tp["sent_rps"] == pytest.approx(2.0)
    assert tp["completed_rps"] <= tp["sent_rps"]
    assert not any(w.startswith("behind schedule") for w in diagnose(on_time))
    late = _open_cell(sched, 8.0 / 23, 12.0, 3.0)
    warning = next(w for w in diagnose(late) if w.startswith("behind schedule"))
    assert "against the 2.00 req/s drawn (nominal 3 req/s)" in warning and "24 arrivals over 12.0 s" in warning


def test_a_run_records_its_drawn_schedule() -> None:
    """An open loop's cell keeps the arrivals drawn inside the send window; the rates agree with it."""
    run = run_bench(BenchConfig(requests=40, rate=(20.0,), concurrency=(8,), duration=1.0, timing=FAST, exact_output=False))
    cell = run.cells[0]
    assert cell.schedule is not None and cell.schedule["window_s"] == 1.0
    assert cell.schedule["arrivals"] == cell.scheduled
    tp = cell.throughput()
    assert tp["drawn_rps"] == pytest.approx(cell.scheduled / 1.0)


def _replay(tmp_path: Path, n: int = 3) -> Path:
    path = tmp_path / "calls.jsonl"
    path.write_text("".join(json.dumps({"prompt_tokens": 50 + i, "output_tokens": 8, "timestamp": 0.5 * i}) + "\n" for i in range(n)))
    return path


def test_replay_input_is_read_as_replay(tmp_path: Path) -> None:
    """--replay with another --traffic is refused; the header counts the requests replayed (×3, not ×200);
    recorded arrivals at --rate 1 are a speed factor, not an offered 1 req/s, and completed <= sent."""
    path = _replay(tmp_path)
    with pytest.raises(ValueError, match="leave --traffic out or say --traffic replay"):
        BenchConfig(traffic="chat", replay=str(path))
    with pytest.raises(ValueError, match="replays the timestamps"):
        BenchConfig(arrivals="recorded", rate=(1.0,))
    with pytest.raises(ValueError, match="nothing to measure of the 3 replayed"):
        build_requests(BenchConfig(traffic="replay", replay=str(path), warmup=3))
    with pytest.raises(ValueError, match="cannot read --replay"):
        build_requests(BenchConfig(traffic="replay", replay=str(tmp_path / "nope.jsonl")))
    run = run_bench(BenchConfig(traffic="replay", replay=str(path), arrivals="recorded", rate=(1.0,), timing=FAST,
                                exact_output=False))  # fmt: skip
    assert "replay of" in header_text(run) and "×3 per cell" in header_text(run)
    cell = run.cells[0]
    assert cell.level == "recorded times"
    tp = cell.throughput()
    assert tp["offered_rps"] is None and tp["drawn_rps"] == pytest.approx(2.0)
    assert tp["completed_rps"] <= tp["sent_rps"] + 1e-9
    buf = io.StringIO()
    run.report(Console(file=buf, width=200))
    text = buf.getvalue()
    assert "offered the recorded times at 1× speed" in text and "offered 1.0" not in text


def test_warmup_must_leave_requests_to_measure() -> None:
    """--warmup 500 --requests 10 is a usage error, not an empty report."""
    with pytest.raises(ValueError, match="--warmup 500 leaves nothing to measure of --requests 10"):
        BenchConfig(requests=10, warmup=500)


def test_matrix_folds_levers_that_do_not_apply() -> None:
    """cache × stream: the plain SDK has no cache planner, so 4 combinations run as 3 cells, said in a note;
    http × client=thin likewise; client and stream together are refused."""
    cells, notes = plan_matrix(["cache=auto,off", "stream=forced,as-asked"])
    assert cells == [{"cache": "auto", "stream": "forced"}, {"stream": "as-asked"}, {"cache": "off", "stream": "forced"}]
    assert len(notes) == 1 and "cache does not apply to stream=as-asked (the plain SDK has no cache planner)" in notes[0]
    assert "4 combinations run as 3 cells" in notes[0]
    cells, notes = plan_matrix(["http=httpx,aiohttp", "client=latencykit,thin"])
    assert {"client": "thin"} in cells and len(cells) == 3 and "thin reader" in notes[0]
    with pytest.raises(ValueError, match="give one of the two levers"):
        plan_matrix(["client=sdk", "stream=forced"])
    assert plan_matrix(["cache=auto,off"]) == ([{"cache": "auto"}, {"cache": "off"}], [])


def test_comparison_names_its_baseline_and_intervals_keep_the_estimate_inside() -> None:
    """The strategy comparison says which cell is the baseline; every printed 'x [lo–hi]' has lo <= x <= hi at
    the estimate's precision; a closed loop prints no offered rate and no dispatcher, and no '-' placeholder."""
    assert pct_text(Pct(0.5, 0.0068, 0.00672, 0.00694, 200), True) == "6.8 [6.7–6.9]"
    run = run_bench(BenchConfig(requests=12, concurrency=(3,), matrix=({"cache": "auto"}, {"cache": "off"}), timing=FAST,
                                exact_output=False))  # fmt: skip
    buf = io.StringIO()
    run.report(Console(file=buf, width=250))
    text = buf.getvalue()
    assert "against the baseline cell 'cache=auto'" in text
    for x, lo, hi in re.findall(r"~?([\d,.]+) \[([\d,.]+)–([\d,.]+)\]", text):
        value, low, high = (float(v.replace(",", "")) for v in (x, lo, hi))
        assert low <= value <= high, (x, lo, hi)
    assert "offered" not in text and "dispatcher late" not in text
    assert " - ms" not in text and "offered -" not in text and "e+" not in text


def test_markdown_and_json_reports(tmp_path: Path) -> None:
    """--format markdown is a Markdown document with pipe tables; --format json holds each cell's summary in
    seconds, its rates, goodput and outcomes, and the comparison with its baseline."""
    run = run_bench(BenchConfig(requests=8, concurrency=(2,), matrix=({"cache": "auto"}, {"cache": "off"}), timing=FAST,
                                exact_output=False))  # fmt: skip
    md = report_markdown(run)
    assert "| metric | n | p50 ms |" in md and "|---|---:|" in md and "EMULATED" in md
    doc = json.loads(json.dumps(report_json(run), default=str))
    cell = doc["cells"][0]
    assert doc["emulated"] and cell["summary"]["ttft"]["n"] == 8 and cell["throughput"]["completed_rps"] > 0
    assert cell["outcomes"] == {"completed": 8} and doc["comparison"]["baseline"] == "cache=auto"


def test_run_file_names_the_sdks_http_library() -> None:
    """The SDKs use httpx2: the run file records its version (and plain httpx only where installed)."""
    versions = environment()["versions"]
    assert versions["httpx2"] and versions.get("httpx", "installed") is not None


def test_emulator_behind_another_target_name_is_labelled_emulated() -> None:
    """--target vllm (or openai-compatible) at a URL the emulator serves: the run is EMULATED, not 'measured'."""
    with Emulator(timing=TimingModel(**FAST)) as emu:
        run = run_bench(BenchConfig(target="vllm", base_url=emu.base_url, model="m", requests=4, concurrency=(2,),
                                    exact_output=False))  # fmt: skip
    assert run.emulated and run.config["target"]["emulated"] and "EMULATED" in header_text(run)
    from latencykit.bench._targets import is_emulator

    assert not is_emulator("http://127.0.0.1:9", timeout=0.5)


def test_partial_run_round_trips(tmp_path: Path) -> None:
    """A partial run file says so and loads back as partial; its report says PARTIAL."""
    run = run_bench(BenchConfig(requests=4, concurrency=(2,), timing=FAST, exact_output=False))
    run.partial = "interrupted (Ctrl-C) in cell baseline @ c=2 after 4 of 4 requests"
    run.cells[0].partial = {"reason": "interrupted (Ctrl-C)", "cut": 1}
    again = BenchRun.load(run.save(tmp_path / "p.json"))
    assert again.partial == run.partial and again.cells[0].partial == {"reason": "interrupted (Ctrl-C)", "cut": 1}
    buf = io.StringIO()
    again.report(Console(file=buf, width=200))
    assert "PARTIAL RUN: interrupted" in buf.getvalue() and "1 in flight cut" in buf.getvalue()


def test_cache_report_explains_unknown_writes() -> None:
    """The demo's cache line says why some writes are unknown (OpenAI before GPT-5.6 and llama.cpp report reads only)."""
    from latencykit.telemetry._cache_report import CacheReport

    report = CacheReport(calls=60, calls_reporting=60, calls_not_reporting=0, input_tokens=103_770, tokens_read=95_878,
                         tokens_written=1_838, hit_rate_tokens=0.92, hit_rate_calls=0.93, saved_tokens=85_831.0,
                         saved_share=0.83, writes_unknown=14)  # fmt: skip
    assert "1,838 (+ writes not reported by 14 calls: OpenAI before GPT-5.6 and llama.cpp report cache reads only)" in str(report)
    assert "unknown for" not in str(report)


def test_the_cache_line_says_when_the_api_does_not_report_writes() -> None:
    """OpenAI's usage gives the cached tokens read, never those written: the bench's cache line says so rather than
    "written 0" (as `cache_report()` says "unknown"); Anthropic's writes are counted and priced."""
    from latencykit.bench._load import LoadSpec
    from latencykit.reports._report import cache_cost_text

    def cell(write: Any) -> Cell:
        c = Cell({}, {}, LoadSpec(concurrency=1).describe())
        for i in range(4):
            c.samples.append({"i": i, "warmup": False, "client": None, "outcome": "completed", "in_tok": 2000,
                              "cache_read": 1500 if i else 0, "cache_write": write if i == 0 else (None if write is None else 0)})  # fmt: skip
        return c

    openai_line = cache_cost_text(cell(None), {"api": "openai", "model": "gpt-5-mini"})
    assert openai_line is not None and openai_line.startswith("cache: read 4,500 tokens, written not reported by the API (")
    anthropic_line = cache_cost_text(cell(1500), {"api": "anthropic", "model": "claude-sonnet-5"})
    assert anthropic_line is not None and anthropic_line.startswith("cache: read 4,500 / written 1,500 tokens (writes 1.25×")
    # saved: 4,500 read at 0.1× (4,050) less the 1,500 written at a 0.25 premium (375), of 8,000 input tokens
    assert "est. input cost saved 3,675 token-equivalents (46%)" in anthropic_line
