"""Per-server state shared by the handlers: configuration, engine, counters and the request log."""

from __future__ import annotations

import collections
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._cache import CacheModel
from ._timing import Engine, TimingModel

__all__ = ["EmulatorStats", "RequestRecord", "ServerState"]

REQUEST_LOG_SIZE = 1000


@dataclass
class EmulatorStats:
    """Simple counters; written only on the server loop, safe to read from any thread."""

    requests_total: int = 0
    active_streams: int = 0
    max_active_streams: int = 0
    connections_closed_early: int = 0


@dataclass(frozen=True)
class RequestRecord:
    """One received request: method, path, parsed JSON body (None if unparsable), lower-cased headers."""

    method: str
    path: str
    body: Any
    headers: Mapping[str, str]


@dataclass
class ServerState:
    """Everything a handler needs besides the request itself."""

    timing: TimingModel
    seed: int
    created: int | None = None
    cache_model: CacheModel = field(default_factory=CacheModel)
    stats: EmulatorStats = field(default_factory=EmulatorStats)
    requests: collections.deque[RequestRecord] = field(
        default_factory=lambda: collections.deque(maxlen=REQUEST_LOG_SIZE)
    )
    engine: Engine = field(init=False)
    fault_counts: dict[str, int] = field(default_factory=dict)
    """Requests seen per fault id (for ``x-emulator-fault-times``)."""

    def __post_init__(self) -> None:
        self.engine = Engine(self.timing, self.seed)

    def timestamp(self) -> int:
        """Unix seconds for OpenAI `created` fields: the fixed value if configured."""
        return self.created if self.created is not None else int(time.time())
