"""`latencykit experiment` end to end: real server processes (the emulator and misbehaving helpers)
started, loaded, measured and stopped; failures marked; Ctrl-C at random points leaves nothing."""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from rich.console import Console

from _procs import alive, marked

from latencykit.bench import BenchRun, ExperimentRun, experiment, gate_runs
from latencykit.emulator import Emulator, TimingModel

HERE = Path(__file__).resolve().parent
HELPER = f"{{python}} {HERE / '_exp_server.py'} --port {{port}} {{args}}"
# Its checks for leftover servers look machine-wide (`_procs.marked`): the suite's `--dist loadfile`
# (pyproject.toml) runs the whole file on one worker, and no other file starts an experiment's servers.

ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "100"}


@pytest.fixture
def no_leftovers() -> Iterator[None]:
    """Every process an experiment started in the test is gone at its end."""
    before = marked()
    yield
    left = marked() - before
    assert not left, f"processes left running: {left}"


def _check_state(out: Path) -> None:
    state = json.loads((out / "servers.json").read_text())
    assert state["live"] == []
    assert state["started"] and not [s for s in state["started"] if alive(s["pid"])]


@pytest.mark.slow
def test_the_readme_emulator_experiment_runs_under_a_minute(tmp_path: Path, no_leftovers: None) -> None:
    """The README's two commands: the table printed, claims judged, answers agree, a run file bench takes."""
    readme = (HERE.parent / "README.md").read_text()
    assert "$ latencykit experiment --example emulator > emulator.toml\n$ latencykit experiment emulator.toml" in readme
    ex = subprocess.run([sys.executable, "-m", "latencykit.cli", "experiment", "--example", "emulator"],
                        capture_output=True, text=True, env=ENV, check=True)  # fmt: skip
    (tmp_path / "emulator.toml").write_text(ex.stdout)
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "latencykit.cli", "experiment", "emulator.toml", "--out", "run",
                          "--html", "run.html"], capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=300)  # fmt: skip
    elapsed = time.monotonic() - t0
    assert res.returncode == 0, res.stdout + res.stderr
    assert elapsed < 60, f"took {elapsed:.0f} s"
    out = res.stdout
    for text in ("EMULATED", "TTFT P50", "TPOT P50", "E2E P99", "goodput", "claim", "ready", "RSS", "exact", "batching"):
        assert text in out, text
    assert "✓" in out and "✗" in out  # the example has claims met and one missed
    run = ExperimentRun.load(tmp_path / "run" / "experiment.json")
    assert run.baseline == "baseline" and [s.name for s in run.strategies][0] == "baseline"
    for s in run.strategies:
        assert s.failed is None
        r = s.rounds[0]
        assert r.ready_s and r.first_token_s and r.first_token_s > r.ready_s and r.rss_peak and r.stop
        assert r.stop["port_free"] and r.stop["how"] == "SIGTERM"
        assert s.quality is not None and s.quality.exact_match == 1.0 and s.quality.prefix_agreement == 1.0
    assert {c.labels["strategy"] for c in run.bench.cells} == {s.name for s in run.strategies}
    assert "<svg" in (tmp_path / "run.html").read_text()
    _check_state(tmp_path / "run")
    bench = [sys.executable, "-m", "latencykit.cli", "bench"]
    same = subprocess.run([*bench, "compare", "run/experiment.json", "run/experiment.json"], cwd=tmp_path, env=ENV,
                          capture_output=True, text=True)  # fmt: skip
    assert same.returncode == 0, same.stdout + same.stderr
    merged = subprocess.run([*bench, "merge", "run/experiment.json", "run/experiment.json", "-o", "m.json"], cwd=tmp_path,
                            env=ENV, capture_output=True, text=True)  # fmt: skip
    assert merged.returncode == 0 and len(BenchRun.load(tmp_path / "m.json").cells) == len(run.bench.cells)


@pytest.fixture
def hosted() -> Iterator[Emulator]:
    """An already-running server (as a hosted provider would be)."""
    with Emulator(TimingModel(time_scale=0.05, output_tokens=16)) as emu:
        yield emu


def _failing(hosted: Emulator) -> dict[str, Any]:
    return {
        "name": "failures", "baseline": "ok",
        "traffic": {"shape": "chat", "requests": 12, "seed": 1, "exact_output": False},
        "load": {"concurrency": 2, "warmup": 2},
        "server": {"command": HELPER, "target": "emulator", "ready_timeout": 4, "stop_timeout": 1.5},
        "quality": {"prompts": 3, "max_tokens": 8},
        "strategy": [
            {"name": "ok", "args": "ok"},
            {"name": "exits", "args": "exit"},
            {"name": "hangs", "args": "hang"},
            {"name": "dies", "args": "--time-scale 1 --after 0.8 die"},
            {"name": "stubborn", "args": "stubborn", "lossless": True},
            {"name": "forks", "args": "forks"},
            {"name": "hosted", "base_url": hosted.base_url, "claim": "1-100x"},
        ],
    }  # fmt: skip


def test_failed_servers_are_marked_with_their_log_tail_and_the_others_run(tmp_path: Path, hosted: Emulator,
                                                                         no_leftovers: None) -> None:  # fmt: skip
    """Exits at once / never ready / dies mid-run: failed, with exit code and log tail; SIGTERM ignored: killed;
    a child that left the group: stopped too; an already-running server: measured without a start."""
    run = experiment(_failing(hosted), out=tmp_path / "out", html=tmp_path / "r.html")
    by = {s.name: s for s in run.strategies}
    assert [s.name for s in run.failed] == ["exits", "hangs", "dies"]
    exits = by["exits"].rounds[0]
    assert exits.failed == "exited with code 3 before it was ready" and exits.exit_code == 3
    assert any("cannot load the model" in line for line in exits.log_tail)
    hangs = by["hangs"].rounds[0]
    assert hangs.failed is not None and hangs.failed.startswith("not ready after 4 s")
    assert any("loading weights forever" in line for line in hangs.log_tail) and hangs.stop and hangs.stop["how"] == "SIGTERM"
    dies = by["dies"].rounds[0]
    assert dies.failed is not None and "7" in dies.failed and dies.exit_code == 7, dies
    assert any("out of memory" in line for line in dies.log_tail)
    stubborn = by["stubborn"].rounds[0]
    assert stubborn.failed is None and stubborn.stop and stubborn.stop["how"] == "SIGKILL" and stubborn.stop["port_free"]
    forks = by["forks"].rounds[0]
    assert forks.failed is None and forks.stop and forks.stop["left"] == [] and forks.processes >= 2
    assert by["hosted"].failed is None and by["hosted"].rounds[0].ready_s is None and by["hosted"].rounds[0].pid is None
    for name in ("ok", "stubborn", "forks", "hosted"):
        assert run.cells(name) and by[name].quality is not None and by[name].quality.exact_match == 1.0
    assert not run.cells("exits") and not run.cells("dies")
    _check_state(tmp_path / "out")
    buf = io.StringIO()
    run.report(Console(file=buf, width=100))
    text = buf.getvalue()
    assert "exits FAILED: exited with code 3 before it was ready (exit code 3)" in text
    assert "| fatal: cannot load the model (on purpose)" in text and "crashed: out of memory" in text
    assert "<svg" in run._repr_html_() and "<svg" in (tmp_path / "r.html").read_text()
    again = ExperimentRun.load(tmp_path / "out" / "experiment.json")
    assert [s.name for s in again.failed] == ["exits", "hangs", "dies"] and again.summary()["rows"][0]["strategy"] == "ok"
    assert gate_runs(again.bench, run.bench).passed  # a run file bench compare takes


def _quick(tmp_path: Path) -> Path:
    text = f"""
name = "interrupt me"
[traffic]
shape = "chat"
requests = 16
exact_output = false
[load]
concurrency = 2
[server]
command = "{HELPER}"
target = "emulator"
stop_timeout = 5
[quality]
prompts = 3
max_tokens = 8
[[strategy]]
name = "a"
args = "--time-scale 0.5 ok"
[[strategy]]
name = "b"
args = "--time-scale 0.5 forks"
"""
    path = tmp_path / "quick.toml"
    path.write_text(text)
    return path


@pytest.mark.slow
def test_sigint_at_random_points_leaves_no_server(tmp_path: Path, no_leftovers: None) -> None:
    """Five runs, each interrupted at a random moment after its first start: exit 130, no process left."""
    path = _quick(tmp_path)
    rng = random.Random(os.environ.get("LK_SIGINT_SEED", str(time.time_ns())))
    codes = []
    for k in range(5):
        out = tmp_path / f"run{k}"
        proc = subprocess.Popen([sys.executable, "-m", "latencykit.cli", "experiment", str(path), "--out", str(out), "--quiet"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)  # fmt: skip
        deadline = time.monotonic() + 60
        while not (out / "servers.json").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        delay = rng.uniform(0.0, 3.5)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
        codes.append(proc.returncode)
        assert proc.returncode in (130, 0), f"run {k} after {delay:.2f} s: {proc.returncode}\n{stdout}\n{stderr}"
        if proc.returncode == 130:
            assert stderr.strip().endswith("latencykit: interrupted"), stderr
            assert json.loads((out / "experiment.json").read_text())["experiment"]["interrupted"] is True
        assert not marked(), f"run {k}: interrupted after {delay:.2f} s left {marked()}"
        _check_state(out)
    assert codes.count(130) >= 3, codes


def test_a_failed_strategy_makes_the_command_exit_1(tmp_path: Path, no_leftovers: None) -> None:
    """The CLI runs the others, prints the failure on stderr, and exits 1."""
    path = _quick(tmp_path)
    path.write_text(path.read_text().replace('args = "--time-scale 0.5 forks"', 'args = "exit"'))
    res = subprocess.run([sys.executable, "-m", "latencykit.cli", "experiment", str(path), "--out", str(tmp_path / "o"),
                          "--quiet"], capture_output=True, text=True, env=ENV, timeout=120)  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stderr.strip() == "latencykit experiment: strategy b failed: exited with code 3 before it was ready"
    assert "b FAILED" in res.stdout and "| fatal: cannot load the model (on purpose)" in res.stdout


@pytest.mark.slow
def test_an_experiment_in_a_notebook_cell(tmp_path: Path, no_leftovers: None) -> None:
    """The emulator experiment, shrunk, called from inside a running event loop as a notebook cell is: its servers
    started, measured (the probe's client on a loop of its own, in a worker thread) and stopped. Before, the probe
    raised "Cannot run the event loop while another loop is running"."""
    from test_notebook_loop import in_a_cell

    spec = {
        "name": "notebook", "baseline": "baseline", "slo": "ttft<=300ms",
        "traffic": {"shape": "chat", "requests": 6, "seed": 0, "exact_output": False},
        "load": {"concurrency": 2},
        "server": {"target": "emulator", "ready": "/health", "ready_timeout": 60,
                   "command": "{python} -m latencykit.cli bench emulator --port {port} --seed 0 --preset bench --time-scale 0.2 {args}"},
        "quality": {"prompts": 2, "max_tokens": 8},
        "strategy": [{"name": "baseline", "args": "--tpot 0.012 --slots 4"}, {"name": "int8", "args": "--tpot 0.007 --slots 4"}],
    }  # fmt: skip
    run = in_a_cell(lambda: experiment(spec, out=tmp_path / "out", verbose=False))
    assert [s.name for s in run.strategies] == ["baseline", "int8"] and not run.failed
    for name in ("baseline", "int8"):
        samples = [s for c in run.cells(name) for s in c.samples]
        assert len(samples) >= 6 and all(s["outcome"] == "completed" for s in samples)
    assert not [t for t in threading.enumerate() if t.name == "latencykit-loop"]
