"""pytest fixtures yielding a started `Emulator` with a fast timing model.

Enable with `pytest_plugins = ["latencykit.emulator.pytest_plugin"]` in the root
conftest.py, or import the fixtures into a test module.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._server import Emulator
from ._timing import TimingModel

__all__ = ["FAST_TIMING", "lk_emulator", "lk_emulator_session"]

# 100x faster than the defaults: a 32-token answer takes about 4 ms instead of 0.4 s.
FAST_TIMING = TimingModel(time_scale=0.01)


@pytest.fixture
def lk_emulator() -> Iterator[Emulator]:
    """A started emulator (seed 0, `FAST_TIMING`) for one test."""
    with Emulator(timing=FAST_TIMING, seed=0) as emulator:
        yield emulator


@pytest.fixture(scope="session")
def lk_emulator_session() -> Iterator[Emulator]:
    """A started emulator (seed 0, `FAST_TIMING`) shared by the whole session."""
    with Emulator(timing=FAST_TIMING, seed=0) as emulator:
        yield emulator
