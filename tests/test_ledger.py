"""The Ledger of cached prefixes: states, TTLs, refresh on hit, LRU bound, batched writes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import latencykit as lk


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_entry_is_live_for_its_ttl_then_expired_until_evicted() -> None:
    clock = _Clock()
    ledger = lk.Ledger(clock=clock)
    assert ledger.state(b"a") is None
    ledger.write(b"a", 300.0)
    clock.now += 299.0
    assert ledger.state(b"a") == "live"
    clock.now += 2.0
    assert ledger.state(b"a") == "expired" and ledger.states([b"a", b"b"]) == ["expired", None]


def test_a_live_entry_keeps_the_longer_ttl_and_a_hit_restarts_it() -> None:
    clock = _Clock()
    ledger = lk.Ledger(clock=clock)
    ledger.write(b"a", 3600.0)
    ledger.write(b"a", 300.0)  # a 5m write does not shorten a live 1h entry
    clock.now += 1000.0
    assert ledger.state(b"a") == "live"
    ledger.touch(b"a")
    clock.now += 3599.0
    assert ledger.state(b"a") == "live"
    clock.now += 2.0
    ledger.write(b"a", 300.0)  # expired: the new TTL alone counts
    clock.now += 301.0
    assert ledger.state(b"a") == "expired"


def test_the_least_recently_used_entry_goes_first() -> None:
    ledger = lk.Ledger(capacity=2, clock=_Clock())
    ledger.write(b"a", 300.0)
    ledger.write(b"b", 300.0)
    ledger.write(b"a", 300.0)  # a is now the most recent
    ledger.write(b"c", 300.0)
    assert ledger.states([b"a", b"b", b"c"]) == ["live", None, "live"] and len(ledger) == 2


@pytest.mark.parametrize("capacity", [0, -1, 1.5, True])
def test_a_bad_capacity_is_refused(capacity: object) -> None:
    with pytest.raises(ValueError, match="capacity"):
        lk.Ledger(capacity=capacity)  # type: ignore[arg-type]


_writes = st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c", b"d"]), st.sampled_from([300.0, 3600.0])), max_size=12)


@settings(max_examples=200, deadline=None)
@given(rounds=st.lists(st.tuples(_writes, st.floats(0, 4000)), max_size=6), capacity=st.integers(1, 5))
def test_write_many_equals_one_write_after_another(rounds: list[tuple[list[tuple[bytes, float]], float]], capacity: int) -> None:
    """A call's breakpoints written at once leave the ledger exactly as writing them one by one."""
    c1, c2 = _Clock(), _Clock()
    one, many = lk.Ledger(capacity=capacity, clock=c1), lk.Ledger(capacity=capacity, clock=c2)
    keys = [b"a", b"b", b"c", b"d"]
    for writes, wait in rounds:
        for fp, ttl in writes:
            one.write(fp, ttl)
        many.write_many(writes)
        c1.now += wait
        c2.now += wait
        assert one.states(keys) == many.states(keys) and len(one) == len(many)
        assert list(one._entries) == list(many._entries)  # the same LRU order
        assert [(e.expires_at, e.ttl) for e in one._entries.values()] == [(e.expires_at, e.ttl) for e in many._entries.values()]
