"""``--cluster`` without Ray: the address forms, clock offsets, the lost-worker accounting and its report.

The Ray lane (tests/cluster/, run by .ci/ray.sh) starts real two-node clusters."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from latencykit.bench import BenchConfig, BenchRun, run_bench
from latencykit.fleet._clock import estimate_offset, measure_offset, start_on_worker
from latencykit.fleet._cluster import parse_cluster
from latencykit.bench._diagnose import diagnose
from latencykit.reports._report import cluster_lines, limiting_node, partial_text, report_json, report_markdown
from latencykit.bench._run import _count_lost
from latencykit.commands._bench import main as bench_main
from latencykit.emulator._flags import IDEAL_TIMING

FAST = {**IDEAL_TIMING.__dict__, "time_scale": 0.1, "output_tokens": 8}


@pytest.mark.parametrize(("text", "kind", "nodes"), [
    ("local:2", "local", 2), ("local:1", "local", 1), ("auto", "auto", 0),
    ("ray://head.example:10001", "client", 0), ("10.0.0.5:6379", "gcs", 0),
])  # fmt: skip
def test_cluster_addresses(text: str, kind: str, nodes: int) -> None:
    spec = parse_cluster(text)
    assert (spec.kind, spec.nodes) == (kind, nodes)
    assert spec.ray_address == (None if kind == "local" else text)


@pytest.mark.parametrize("text", ["", "local", "local:0", "local:17", "ray://", "http://head:10001", "head", "local:x"])
def test_bad_cluster_addresses_name_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match="--cluster (takes local:N .* auto .* ray://HOST:10001|local:N takes 1 to 16 nodes)"):
        parse_cluster(text)


def test_least_delay_exchange_wins_and_its_bound_holds() -> None:
    # The worker's clock is 2.5 s ahead; the replies come back with asymmetric delays.
    truth = 2.5
    exchanges = []
    for t0, there, back in [(0.0, 0.030, 0.001), (1.0, 0.002, 0.002), (2.0, 0.001, 0.040), (3.0, 0.010, 0.010)]:
        exchanges.append((t0, t0 + there + truth, t0 + there + back))
    est = estimate_offset(exchanges)
    assert est.round_trip == pytest.approx(0.004)
    assert est.offset == pytest.approx(truth, abs=1e-9)  # the symmetric exchange
    assert est.uncertainty == pytest.approx(0.002)
    # The worst exchange alone would be off by almost its whole asymmetry, still within its stated bound.
    worst = estimate_offset([exchanges[2]])
    assert abs(worst.offset - truth) > 0.01 and abs(worst.offset - truth) <= worst.uncertainty
    with pytest.raises(ValueError):
        estimate_offset([])


def test_measure_offset_with_a_skewed_clock() -> None:
    now = [100.0]

    def driver_clock() -> float:
        now[0] += 0.001
        return now[0]

    est = measure_offset(lambda: now[0] + 7.0, rounds=5, clock=driver_clock)
    assert est.offset == pytest.approx(7.0 - 0.0005, abs=1e-6) and est.exchanges == 5
    assert est.uncertainty == pytest.approx(0.0005)


def test_start_instant_on_the_worker_monotonic_clock() -> None:
    # Driver start at wall 1000.5; the worker's clock is 3 s behind, reads 997.0 now and perf 50.0.
    assert start_on_worker(1000.5, -3.0, 997.0, 50.0) == pytest.approx(50.5)
    assert start_on_worker(1000.5, 0.0, 1000.0, 50.0) == pytest.approx(50.5)


def test_config_checks_cluster_and_per_node() -> None:
    with pytest.raises(ValueError, match="--per-node"):
        BenchConfig(cluster="local:2", workers=2)
    with pytest.raises(ValueError, match="--per-node is for --cluster"):
        BenchConfig(per_node=2)
    with pytest.raises(ValueError, match="per_node must be a positive int"):
        BenchConfig(cluster="local:2", per_node=0)
    with pytest.raises(ValueError, match="--cluster takes"):
        BenchConfig(cluster="local")
    assert BenchConfig(cluster="local:2", per_node=1).to_dict()["cluster"] == "local:2"


def test_without_ray_the_cli_names_the_install(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    rc = bench_main(["--cluster", "local:2", "--requests", "5", "--out", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert rc == 2 and 'pip install "latencykit[ray]"' in err and "Traceback" not in err
    assert not (tmp_path / "r.json").exists()
    with pytest.raises(ImportError, match=r'latencykit\[ray\]'):
        run_bench(BenchConfig(requests=4, concurrency=(2,), timing=FAST, exact_output=False), cluster="local:2")


def _fake_cluster_run() -> BenchRun:
    """A real small run, dressed as two cluster workers on two nodes (the Ray lane runs the real thing)."""
    run = run_bench(BenchConfig(requests=12, concurrency=(4,), workers=2, timing=FAST, exact_output=False))
    cell = run.cells[0]
    for w, h in enumerate(cell.health):
        h.update(node=w, worker=w, host="vm", node_id=f"id{w}")
    cell.health[1]["loop_lag_p99"] = 0.5  # node 1 fell behind
    cell.warnings = diagnose(cell)
    run.env["cluster"] = {
        "address": "local:2", "kind": "local", "local_start_s": 5.1,
        "nodes": [{"node": 0, "node_id": "id0", "ip": "127.0.0.1", "host": "vm", "cpus": 1.0, "workers": [0],
                   "clock": {"offset_s": 0.0002, "uncertainty_s": 0.0006}},
                  {"node": 1, "node_id": "id1", "ip": "127.0.0.1", "host": "vm", "cpus": 1.0, "workers": [1],
                   "clock": {"offset_s": -3.0001, "uncertainty_s": 0.0007}}],
        "workers": [{"worker": 0, "node": 0, "offset_s": 0.0002, "uncertainty_s": 0.0006},
                    {"worker": 1, "node": 1, "offset_s": -3.0001, "uncertainty_s": 0.0007}],
        "lost": [],
    }  # fmt: skip
    return run


def test_report_shows_nodes_offsets_health_and_the_limiting_node() -> None:
    run = _fake_cluster_run()
    lines = cluster_lines(run)
    assert lines[0].startswith("cluster local:2: 2 node(s), 2 worker(s)")
    assert "node 1: vm 127.0.0.1, 1 worker(s), 1 CPU; clock offset -3000.1 ± 0.7 ms" in lines[2]
    md = report_markdown(run)
    assert "client node 0 (vm) worker 0:" in md and "client node 1 (vm) worker 1:" in md
    assert "node that limited the run: node 1 (vm): event-loop lag p99 500.0 ms" in md
    assert "node 1: event-loop lag p99 500 ms" in md  # the client-bound warning says where
    page = run.to_html()
    assert "cluster local:2: 2 node(s), 2 worker(s)" in page and "node that limited the run: node 1 (vm)" in page
    assert "client node 1 (vm) worker 1:" in page
    doc = report_json(run)
    assert doc["cluster"]["nodes"][1]["clock"]["offset_s"] == -3.0001
    assert doc["cells"][0]["limiting_node"]["node"] == 1
    # the run file keeps it
    again = BenchRun.from_dict(run.to_dict())
    assert again.env["cluster"]["nodes"][1]["clock"]["offset_s"] == -3.0001
    assert limiting_node(again.cells[0]) == limiting_node(run.cells[0])


def test_a_lost_worker_is_counted_never_dropped() -> None:
    run = _fake_cluster_run()
    cell = run.cells[0]
    lost = [{"worker": 1, "node": 1, "error": "ActorDiedError: the actor died", "dealt": 50, "finished_lost": 20,
             "in_flight": 4, "unsent": 26}]  # fmt: skip
    _count_lost(cell, lost)
    assert cell.partial is not None
    assert cell.partial["cut"] == 4 and cell.partial["unsent"] == 26 and cell.partial["finished_lost"] == 20
    assert cell.partial["reason"].startswith("worker 1 (node 1) lost: ActorDiedError")
    text = partial_text(cell, 112)
    assert text is not None and "4 in flight cut" in text and "20 finished on the lost worker(s)" in text and "26 never sent" in text
    # merged with another run, the counts add
    other = BenchRun.from_dict(run.to_dict())
    merged = BenchRun.merge([run, other])
    assert merged.cells[0].partial is not None and merged.cells[0].partial["cut"] == 8
