"""The bench and the experiment (its test: test_experiment_run.py, where experiment servers are watched) called from a thread that already runs an event loop, as every Jupyter cell is
(ipykernel runs cells inside its asyncio loop) and as sync helpers called from an async app are. Before, the bench
raised ``asyncio.run() cannot be called from a running event loop`` and the experiment's probe ``Cannot run the event
loop while another loop is running``. The loop here is started with ``run_until_complete`` (no SIGINT handler, as in
a kernel), so a Ctrl-C (the kernel's interrupt) arrives as ``KeyboardInterrupt`` in the cell's code."""

from __future__ import annotations

import _thread
import asyncio
import signal
import threading
from dataclasses import asdict
from typing import Any, Callable, TypeVar

import pytest

from latencykit._loops import OwnLoop, run_coroutine
from latencykit.bench import BenchConfig, BenchRun, run_bench
from latencykit.emulator import TimingModel

T = TypeVar("T")


def in_a_cell(body: Callable[[], T]) -> T:
    """``body()`` called from inside a running event loop, as a notebook cell's code is."""

    async def cell() -> T:
        asyncio.get_running_loop()  # there is one: asyncio.run() would refuse here
        return body()

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(cell())
    finally:
        loop.close()


def _our_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "latencykit-loop"]


def test_run_bench_in_a_notebook_cell() -> None:
    run = in_a_cell(lambda: run_bench(BenchConfig(requests=6, concurrency=(2,), exact_output=False)))
    assert isinstance(run, BenchRun) and run.partial is None
    assert [s["outcome"] for s in run.cells[0].samples] == ["completed"] * 6
    assert "TTFT" in run._repr_html_()
    assert _our_threads() == []


def test_ctrl_c_in_a_notebook_cell_keeps_what_finished() -> None:
    """The kernel's interrupt during a bench run: the requests that finished are kept, the run says it was cut, as at
    a terminal."""
    fast = asdict(TimingModel(time_scale=0.02, output_tokens=8))  # ~10 ms a request: dozens done by the interrupt
    timer = threading.Timer(1.5, _thread.interrupt_main, args=(signal.SIGINT,))
    timer.start()
    try:
        run = in_a_cell(lambda: run_bench(BenchConfig(requests=3000, concurrency=(2,), exact_output=False, timing=fast)))
    finally:
        timer.cancel()
    assert run.partial is not None and "interrupted (Ctrl-C)" in run.partial
    done = [s for s in run.cells[0].samples if s["outcome"] == "completed"]
    assert 0 < len(done) < 3000
    assert _our_threads() == []


def test_the_helpers_outside_and_inside_a_loop() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert run_coroutine(answer) == 42
    assert in_a_cell(lambda: run_coroutine(answer)) == 42

    def kept() -> list[Any]:
        own = OwnLoop()
        try:
            return [own.run(answer()), own.run(answer())]  # one loop, two coroutines
        finally:
            own.close()

    assert kept() == [42, 42] and in_a_cell(kept) == [42, 42]

    async def boom() -> None:
        raise ValueError("from the coroutine")

    with pytest.raises(ValueError, match="from the coroutine"):
        in_a_cell(lambda: run_coroutine(boom))
    assert _our_threads() == []
