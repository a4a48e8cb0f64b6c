"""Small text helpers shared by every display: counts with their noun, outcomes, milliseconds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

from ..core._record import OUTCOMES

__all__ = ["plural", "outcomes_text", "ms"]


def plural(n: int, noun: str) -> str:
    """``1 call``, ``2 calls``, ``0 calls`` (thousands separated)."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def outcomes_text(outcomes: Mapping[str, int]) -> str:
    """``completed 60, error 2``: known outcomes in their lifecycle order, then any others; ``-`` if none."""
    order = [o for o in OUTCOMES if outcomes.get(o)] + sorted(k for k in outcomes if k not in OUTCOMES and outcomes[k])
    return ", ".join(f"{o} {outcomes[o]:,}" for o in order) or "-"


def ms(seconds: Optional[float]) -> str:
    """Seconds as milliseconds with one decimal (``-`` when unknown)."""
    return "-" if seconds is None else f"{seconds * 1000:.1f}"
