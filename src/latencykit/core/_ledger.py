"""The local ledger of prompt prefixes this process believes the provider has cached.

An entry is a prefix fingerprint with an expiry. Entries are written when a response shows
the cache was written or read, refreshed on every hit (as the providers refresh TTLs), and
kept after expiry until evicted, so a later miss can be explained as "TTL expired" rather
than "never written". Bounded (LRU) and thread-safe; one ledger may be shared by several
clients (``CachePolicy(ledger=shared)``). Time comes from an injected clock.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Callable, Literal, Optional

__all__ = ["Ledger", "EntryState"]

EntryState = Literal["live", "expired"]


@dataclass
class _Entry:
    expires_at: float
    ttl: float


class Ledger:
    """Prefix fingerprints written within their TTL: ``state()``, ``write()``, ``touch()``."""

    def __init__(self, *, capacity: int = 100_000, clock: Callable[[], float] = time.monotonic) -> None:
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
            raise ValueError(f"capacity must be a positive int, got {capacity!r}")
        self.capacity = capacity
        self.clock = clock
        self._entries: OrderedDict[bytes, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def state(self, fingerprint: bytes, now: Optional[float] = None) -> Optional[EntryState]:
        """``"live"``, ``"expired"`` or ``None`` (never written, or evicted from the ledger)."""
        now = self.clock() if now is None else now
        with self._lock:
            entry = self._entries.get(fingerprint)
            if entry is None:
                return None
            return "live" if entry.expires_at > now else "expired"

    def states(self, fingerprints: Iterable[bytes], now: Optional[float] = None) -> list[Optional[EntryState]]:
        """`state` of each fingerprint, read under one lock."""
        now = self.clock() if now is None else now
        with self._lock:
            entries = list(map(self._entries.get, fingerprints))
        return [None if e is None else ("live" if e.expires_at > now else "expired") for e in entries]

    def write(self, fingerprint: bytes, ttl: float, now: Optional[float] = None) -> None:
        """Record that ``fingerprint`` was cached for ``ttl`` seconds from ``now``."""
        self.write_many(((fingerprint, ttl),), now)

    def write_many(self, writes: Iterable[tuple[bytes, float]], now: Optional[float] = None) -> None:
        """`write` each ``(fingerprint, ttl)``, in order, under one lock (a call's breakpoints at once).

        A live entry keeps the longer of its TTL and the new one.
        """
        now = self.clock() if now is None else now
        with self._lock:
            entries = self._entries
            for fingerprint, ttl in writes:
                entry = entries.get(fingerprint)
                if entry is None:
                    entries[fingerprint] = _Entry(now + ttl, ttl)
                else:
                    if entry.expires_at > now:
                        ttl = max(ttl, entry.ttl)
                    entry.expires_at, entry.ttl = now + ttl, ttl
                    entries.move_to_end(fingerprint)
                while len(entries) > self.capacity:  # evicted write by write, as `write` does
                    entries.popitem(last=False)

    def touch(self, fingerprint: bytes, now: Optional[float] = None) -> None:
        """A cache hit on ``fingerprint``: its TTL starts again."""
        now = self.clock() if now is None else now
        with self._lock:
            entry = self._entries.get(fingerprint)
            if entry is not None and entry.expires_at > now:
                entry.expires_at = now + entry.ttl
                self._entries.move_to_end(fingerprint)

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"<Ledger entries={len(self._entries)} capacity={self.capacity}>"
