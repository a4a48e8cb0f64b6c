"""Recorder statistics: sketch-backed percentiles, groups, merging, SLOs and goodput."""

from __future__ import annotations

import json

import numpy as np
import pytest

import latencykit as lk
from latencykit import CallRecord


def _rec(ttft: float, *, provider: str = "anthropic", model: str = "m", outcome: str = "completed", cache_read: int | None = 0, e2e: float | None = None) -> CallRecord:
    r = CallRecord(provider=provider, operation="chat", request_model=model, response_model=model)
    r.ttft, r.ttfb, r.e2e, r.tpot = ttft, ttft / 2, e2e if e2e is not None else ttft * 3, 0.02
    r.outcome = outcome  # type: ignore[assignment]
    r.cache_read_tokens = cache_read
    r.input_tokens, r.output_tokens = 100, 10
    return r


def test_percentiles_within_alpha_of_exact() -> None:
    """P50/P90/P95/P99/P99.9 of 20k lognormal TTFTs are within 1 % of the exact nearest-rank quantiles."""
    rng = np.random.default_rng(3)
    values = rng.lognormal(mean=-1.0, sigma=0.6, size=20_000)
    recorder = lk.Recorder(max_calls=100)
    for v in values:
        recorder.record(_rec(float(v)))
    s = recorder.summary()["ttft"]
    assert s.count == 20_000 and s.max == pytest.approx(values.max())
    for q, got in ((0.5, s.p50), (0.9, s.p90), (0.95, s.p95), (0.99, s.p99), (0.999, s.p999)):
        exact = float(np.quantile(values, q, method="inverted_cdf"))
        assert got is not None and abs(got - exact) <= 0.01 * exact
    assert len(recorder.calls) == 100  # records are bounded; the sketch saw every call


def test_groups_and_outcomes() -> None:
    """Groups split by provider, model and cache state; E2E counts completed calls only."""
    recorder = lk.Recorder()
    recorder.record(_rec(0.1, cache_read=500))
    recorder.record(_rec(0.3, cache_read=0))
    recorder.record(_rec(0.2, provider="openai", model="g", cache_read=None))
    recorder.record(_rec(0.4, outcome="abandoned"))
    summary = recorder.summary()
    names = {g.name for g in summary.groups}
    assert names == {"anthropic/m (hit)", "anthropic/m (miss)", "openai/g (unreported)"}
    assert summary.calls == 4 and summary.outcomes == {"completed": 3, "abandoned": 1}
    assert summary["ttft"].count == 4 and summary["e2e"].count == 3
    assert recorder.summary(provider="openai").calls == 1
    data = json.loads(summary.to_json())
    assert data["overall"]["ttft"]["count"] == 4 and len(data["groups"]) == 3
    assert "TTFT" in str(summary) and "<table" in summary._repr_html_()


def test_empty_summary_is_none_not_nan() -> None:
    """With no calls every quantile is None."""
    s = lk.Recorder().summary()
    assert s.calls == 0 and s["ttft"].p99 is None and s["ttft"].mean is None


def test_merge_is_exact_and_serializable() -> None:
    """Merging two Recorders equals one that saw every call; to_dict/from_dict round-trips."""
    rng = np.random.default_rng(5)
    values = rng.exponential(0.3, size=4_000) + 0.001
    one, a, b = lk.Recorder(), lk.Recorder(), lk.Recorder()
    for i, v in enumerate(values):
        one.record(_rec(float(v)))
        (a if i % 2 else b).record(_rec(float(v)))
    shipped = lk.Recorder.from_dict(json.loads(json.dumps(b.to_dict())))
    a.merge(shipped)
    assert a.summary()["ttft"].to_dict() == one.summary()["ttft"].to_dict()


def test_bounded_groups() -> None:
    """Past max_groups, new groups fold into an `other` group instead of growing memory."""
    recorder = lk.Recorder(max_groups=2)
    for i in range(5):
        recorder.record(_rec(0.1, model=f"m{i}"))
    groups = recorder.summary().groups
    assert len(groups) == 3 and any(g.provider == "other" and g.calls == 3 for g in groups)


def test_slo_presets_and_violations() -> None:
    """summary.check() lists violating groups with the observed percentile; goodput counts calls meeting all SLOs."""
    recorder = lk.Recorder()
    for _ in range(95):
        recorder.record(_rec(0.08, model="fast"))
    for _ in range(20):
        recorder.record(_rec(0.9, model="slow"))
    summary = recorder.summary()
    violations = summary.check(lk.CHAT_TTFT)
    assert {v.group for v in violations} == {"overall", "anthropic/slow (miss)"}
    slow = next(v for v in violations if "slow" in v.group)
    assert slow.observed == pytest.approx(0.9, rel=0.01) and slow.calls == 20 and "500" in str(slow)
    assert summary.check(lk.BATCH_E2E) == []
    assert summary.check([lk.CODE_COMPLETION_TTFT]) != []
    assert summary.goodput(lk.CHAT_TTFT) == pytest.approx(95 / 115)
    custom = lk.SLO("tpot", 0.05, 0.99)
    assert summary.check(custom) == [] and summary.goodput([lk.CHAT_TTFT, custom]) == pytest.approx(95 / 115)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"metric": "latency", "threshold": 1.0}, "metric"), ({"metric": "ttft", "threshold": -1}, "threshold"), ({"metric": "ttft", "threshold": 1, "percentile": 95}, "percentile")],
)
def test_bad_slo_raises(kwargs: dict, match: str) -> None:
    """Invalid SLOs raise ValueError naming the bad value."""
    with pytest.raises(ValueError, match=match):
        lk.SLO(**kwargs)


def test_end_to_end_itl_pooled(ant: lk.Anthropic) -> None:
    """Real calls feed the pooled ITL sketch with every inter-chunk gap."""
    from conftest import ANT_REQ

    for _ in range(3):
        ant.messages.create(**ANT_REQ)
    s = ant.latency.summary()
    assert s["itl"].count == sum(c.chunks - 1 for c in ant.latency.calls)
    assert s["ttft"].count == 3 and s["tpot"].count == 3


def test_every_read_sees_the_calls_not_yet_folded() -> None:
    """Records are folded into the sketches in batches; every read counts the ones still pending."""
    from latencykit.telemetry._recorder import FOLD_BATCH

    recorder = lk.Recorder()
    n = FOLD_BATCH + 7  # one full batch folded on the way, 7 still pending
    for i in range(n):
        recorder.record(_rec(0.1 + i / (10 * n)), [0.01, 0.02])  # all below the 0.5 merged in below
    assert recorder.summary().calls == n and recorder.summary()["itl"].count == 2 * n
    more = lk.Recorder()
    more.record(_rec(0.5))  # pending in `more` when merged
    recorder.merge(more)
    stats = recorder.stats()
    assert sum(s.calls for s in stats.values()) == n + 1
    shipped = lk.Recorder.from_dict(json.loads(json.dumps(recorder.to_dict())))
    assert shipped.summary()["ttft"].count == n + 1 and shipped.summary()["ttft"].max == pytest.approx(0.5)
    recorder.clear()
    recorder.record(_rec(0.3))
    assert recorder.summary().calls == 1 and recorder.summary()["ttft"].max == pytest.approx(0.3)


def test_folding_in_batches_equals_one_call_at_a_time() -> None:
    """Summaries from batched folding equal a sketch fed value by value, in every group."""
    rng = np.random.default_rng(11)
    recorder = lk.Recorder()
    exact: dict[str, lk.PercentileSketch] = {"hit": lk.PercentileSketch(), "miss": lk.PercentileSketch()}
    for i, v in enumerate(rng.lognormal(-1.0, 0.5, size=1_000)):
        cached = 500 if i % 3 else 0
        recorder.record(_rec(float(v), cache_read=cached))
        exact["hit" if cached else "miss"].add(float(v))
    for group in recorder.summary().groups:
        want = exact[group.cache]
        got = group.metrics["ttft"]
        assert got.count == want.count and got.p99 == want.quantile(0.99) and got.p50 == want.quantile(0.5)


def test_a_value_no_sketch_takes_costs_only_that_value() -> None:
    """A NaN or infinite TTFT, or an infinite gap, is left out; the call and the rest of its batch still count."""
    recorder = lk.Recorder()
    bad = _rec(0.2)
    bad.ttft = float("inf")
    nan = _rec(0.2)
    nan.ttft = float("nan")
    recorder.record(_rec(0.1), [0.01])
    recorder.record(bad, [0.02, float("inf")])
    recorder.record(nan)
    s = recorder.summary()
    assert s.calls == 3 and s["ttft"].count == 1 and s["e2e"].count == 3
    assert s["itl"].count == 2 and s["itl"].max == pytest.approx(0.02)
    assert recorder.total_calls == 3 and recorder.last is nan


def test_records_from_many_threads_are_all_counted() -> None:
    """Threads recording and reading at once: no call is lost or counted twice."""
    import threading

    recorder = lk.Recorder(max_calls=50)
    per_thread, threads = 500, 4

    def work(k: int) -> None:
        for i in range(per_thread):
            recorder.record(_rec(0.1 + k / 100), [0.01])
            if i % 97 == 0:
                recorder.summary()

    pool = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    s = recorder.summary()
    assert s.calls == per_thread * threads == recorder.total_calls and s["itl"].count == per_thread * threads
