"""The experiment file, claims and quality measures: everything checked before any server starts."""

from __future__ import annotations

import json

import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from latencykit.experiment._claims import judge_claim, parse_claim
from latencykit.bench._compare import Comparison
from latencykit.commands._experiment import EXAMPLES, example
from latencykit.experiment._file import ExperimentFileError, load_experiment
from latencykit.experiment._quality import Answers, compare_answers, edit_distance, load_scorer, text_tokens
from latencykit.bench._stats import Pct
from latencykit.cli import main as latencykit_main

PY = sys.executable


def cli_main(argv: list[str]) -> int:
    """``latencykit ARGV`` in this process: its exit status (a sub-command ends with SystemExit)."""
    try:
        return latencykit_main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return path


GOOD = f"""
name = "t"
[traffic]
shape = "chat"
requests = 8
[load]
concurrency = 2
[server]
command = "{PY} -c pass --port {{port}} {{args}}"
[[strategy]]
name = "a"
[[strategy]]
name = "b"
args = "--x 1"
claim = "1.3-1.8x"
claim_metric = "tpot:p50"
"""


def test_a_good_file_loads_with_its_defaults(tmp_path: Path) -> None:
    """Baseline = first strategy; ready /health; free port; the server's folder = the file's."""
    spec = load_experiment(_file(tmp_path, GOOD))
    assert spec.baseline == "a" and [s.name for s in spec.strategies] == ["a", "b"]
    assert spec.server.ready == "/health" and spec.server.port == 0 and spec.cwd() == str(tmp_path.resolve())
    claim = spec.strategy("b").claim
    assert claim is not None and (claim.low, claim.high, claim.metric) == (1.3, 1.8, "tpot:p50")
    assert spec.argv(spec.strategy("b"), 1234) == [PY, "-c", "pass", "--port", "1234", "--x", "1"]
    assert spec.bench_config(spec.strategy("b"), "http://x", "m").labels == {"strategy": "b"}


def test_args_expand_to_tokens_and_a_model_path_stays_one(tmp_path: Path) -> None:
    """{args} becomes several argv items; {model} with a space stays one; a list command works too."""
    text = GOOD.replace('name = "a"', 'name = "a"\nargs = "-np 4 --flag \'a b\'"').replace("[server]", '[server]\nmodel = "my models/m 1.gguf"')
    text = text.replace("-c pass --port {port} {args}", "-c pass -m {model} {args}")
    spec = load_experiment(_file(tmp_path, text))
    assert spec.argv(spec.strategy("a"), 1) == [PY, "-c", "pass", "-m", "my models/m 1.gguf", "-np", "4", "--flag", "a b"]
    listed = load_experiment({"traffic": {"requests": 4}, "load": {"concurrency": 1},
                              "server": {"command": [PY, "-c", "pass", "--port={port}"]}, "strategy": [{"name": "x"}]})  # fmt: skip
    assert listed.argv(listed.strategies[0], 9) == [PY, "-c", "pass", "--port=9"]


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (('name = "t"', 'name = "t"\nbogus = 1'), "bogus: unknown key"),
        (("[server]", "[server]\nready_timout = 3"), "server.ready_timout: unknown key"),
        (("requests = 8", 'requests = "8"'), "traffic.requests: must be an integer, got '8'"),
        (("concurrency = 2", "concurrency = [2, 0]"), "load.concurrency: must be a positive integer"),
        (("{args}", "{args} {modle}"), "placeholder {modle} is not one of"),
        (("{args}", "-m {model} {args}"), "placeholder {model} is not filled"),
        (('claim = "1.3-1.8x"', 'claim = "fast"'), "strategy 'b': claim: a claim looks like '1.3-1.8x'"),
        (('claim_metric = "tpot:p50"', 'claim_metric = "tpot:p42"'), "percentile must be one of"),
        ((f'command = "{PY} -c', 'command = "no-such-server-binary -c'), "program 'no-such-server-binary' is not found"),
        (('name = "t"', 'name = "t"\nbaseline = "zz"'), "baseline: no strategy is called 'zz'"),
        (('name = "b"', 'name = "a"'), "strategy 'a': the name is used twice"),
        (('name = "t"', 'name = "t"\nslo = "fast please"'), "slo: SLO must look like"),
        (('shape = "chat"', 'replay = "missing.jsonl"'), "traffic.replay: no such file"),
        (('shape = "chat"', 'shape = "chit-chat"'), "traffic must be one of"),
        (("[server]", '[server]\nready = "health"'), "server.ready: must be a path starting with '/'"),
        (("[server]", '[server]\ntarget = "no-such-engine"'), "server.target: must be one of"),
        (('name = "b"', 'name = "b c"'), "strategy[2].name: give a name"),
    ],
)
def test_bad_values_are_one_line_naming_file_key_and_value(tmp_path: Path, change: tuple[str, str], needle: str) -> None:
    """Each mistake raises before any start, naming the file, the key and the value."""
    path = _file(tmp_path, GOOD.replace(*change))
    with pytest.raises(ExperimentFileError) as info:
        load_experiment(path)
    message = str(info.value)
    assert message.startswith(str(path) + ": ") and needle in message and "\n" not in message, message


def test_not_toml_and_no_strategy(tmp_path: Path) -> None:
    """A syntax error and an empty strategy list are refused the same way."""
    with pytest.raises(ExperimentFileError, match=r"exp.toml: not valid TOML"):
        load_experiment(_file(tmp_path, "name = [unclosed"))
    with pytest.raises(ExperimentFileError, match=r"strategy: give at least one"):
        load_experiment(_file(tmp_path, 'name = "x"'))


def test_a_fixed_port_already_taken_is_refused(tmp_path: Path) -> None:
    """server.port names a port someone listens on: exit before starting anything."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ExperimentFileError, match=rf"server.port: port {port} is already taken"):
            load_experiment(_file(tmp_path, GOOD.replace("[server]", f"[server]\nport = {port}")))


def test_the_cli_says_one_line_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """latencykit experiment with a bad file: exit 2, one stderr line naming file, key and value."""
    path = _file(tmp_path, GOOD.replace("[server]", "[server]\nready_timeout = -1"))
    assert cli_main(["experiment", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"latencykit experiment: {path}: server.ready_timeout: must be > 0 seconds, got -1.0"
    assert cli_main(["experiment", str(tmp_path / "nope.toml")]) == 2
    assert "nope.toml: cannot read" in capsys.readouterr().err
    assert cli_main(["experiment", str(path), "--only", "x"]) == 2  # --only checked as well


def test_dry_run_prints_the_exact_commands_in_abba_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--dry-run --repeat 2: a b, then b a; env and folder shown; nothing started."""
    text = GOOD.replace('args = "--x 1"', 'args = "--x 1"\nenv = { OMP_NUM_THREADS = "1" }')
    path = _file(tmp_path, text)
    assert cli_main(["experiment", str(path), "--dry-run", "--repeat", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    heads = [ln for ln in lines if ln.startswith("# round")]
    assert heads == ["# round 1, strategy a (baseline)", "# round 1, strategy b", "# round 2, strategy b",
                     "# round 2, strategy a (baseline)"]  # fmt: skip
    cmd_b = lines[lines.index("# round 1, strategy b") + 1]
    assert cmd_b == f"cd {tmp_path.resolve()} && env OMP_NUM_THREADS=1 {PY} -c pass --port PORT --x 1"
    assert cli_main(["experiment", str(path), "--dry-run", "--only", "b"]) == 0  # the baseline still runs
    assert "strategy a (baseline)" in capsys.readouterr().out


@pytest.mark.parametrize("kind", [k for k in EXAMPLES if k != "quality"])
def test_the_examples_are_valid_files(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--example prints a file whose keys all parse (the programs and model files need not be here)."""
    assert cli_main(["experiment", "--example", kind]) == 0
    text = capsys.readouterr().out
    assert text == example(kind)
    # Swap the program for one that exists: every other key and value must pass the checks.
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - 3.10
        import tomli as tomllib

    data = tomllib.loads(text)
    data["server"]["command"] = f"{PY} -c pass {{port}} {{model}} {{args}}".replace("{model}", "{model}" if "model" in data["server"] else "")
    if "replay" in data["traffic"]:  # the SmolLM2 examples' traffic is written beside the model files
        (tmp_path / data["traffic"]["replay"]).write_text(json.dumps({"prompt_tokens": 10, "output_tokens": 4}) + "\n")
        data["traffic"]["replay"] = str(tmp_path / data["traffic"]["replay"])
    spec = load_experiment(data)
    assert spec.baseline == spec.order()[0][1].name and len(spec.strategies) >= 3
    assert any(s.claim for s in spec.strategies) and any(s.lossless for s in spec.strategies)


def _cmp(base: float, new: float, spread: float = 0.05) -> Comparison:
    def pct(v: float) -> Pct:
        return Pct(0.5, v, v * (1 - spread), v * (1 + spread), 500)

    return Comparison("x", "tpot", "p50", pct(base), pct(new))


def test_claims_parse_and_judge() -> None:
    """Forms of a claim; within (✓), outside beyond noise (✗), outside within noise (~), no figure."""
    assert (parse_claim("1.3–1.8×").low, parse_claim("1.3–1.8×").high) == (1.3, 1.8)
    assert parse_claim(">=2x").high is None and parse_claim("2x").low == 2.0
    for bad in ("1.8-1.3x", "0x", "fast", "1.3-1.8"):
        with pytest.raises(ValueError):
            parse_claim(bad)
    claim = parse_claim("1.5-2x", "tpot:p50")
    ok = judge_claim(claim, _cmp(10.0, 6.0))
    assert ok.status == "within" and ok.symbol == "✓" and ok.measured == pytest.approx(10 / 6)
    low = judge_claim(claim, _cmp(10.0, 9.0))
    assert low.status == "outside" and low.text.startswith("✗ measured 1.11×")
    assert judge_claim(claim, _cmp(10.0, 7.0, spread=0.2)).status == "noise"  # 1.43×, interval reaches 1.5
    assert judge_claim(claim, None).status == "n/a"


def test_quality_measures() -> None:
    """Exact match, prefix agreement (before the first divergence) and edit agreement."""
    assert text_tokens("Hello, world!") == ["Hello", ",", "world", "!"]
    assert edit_distance(list("kitten"), list("sitting")) == 3
    base = Answers(["a b c d", "x y", "same"], [None] * 3)
    cand = Answers(["a b z d", "x y", None], [None] * 3)
    q = compare_answers(base, cand)
    assert q.n == 2 and q.failed == 1 and q.exact_match == 0.5 and q.tokens == "text"
    assert q.prefix_agreement == pytest.approx((2 / 4 + 1) / 2) and q.edit_agreement == pytest.approx((3 / 4 + 1) / 2)
    assert q.diverged == [{"prompt": 0, "at": 2, "baseline": "c", "candidate": "z"}]
    served = compare_answers(Answers(["ab"], [["a", "b"]]), Answers(["ac"], [["a", "c"]]), scorer=lambda p, b, c: 0.25)
    assert served.tokens == "server" and served.prefix_agreement == 0.5 and served.score == 0.25


def test_scorer_must_import(tmp_path: Path) -> None:
    """quality.scorer = "module:function": a bad one is a file error."""
    assert load_scorer("os.path:join") is not None
    for bad in ("nomodule", "no_such_module_x:f", "os:no_such_function"):
        with pytest.raises(ValueError):
            load_scorer(bad)
    with pytest.raises(ExperimentFileError, match=r"quality.scorer: cannot import 'no_such_module_x'"):
        load_experiment(_file(tmp_path, GOOD + '\n[quality]\nscorer = "no_such_module_x:f"\n'))


def _data(**server: Any) -> dict[str, Any]:
    return {"traffic": {"requests": 4}, "load": {"concurrency": 1}, "server": server, "strategy": [{"name": "x"}]}


def test_a_hosted_target_needs_base_url() -> None:
    """A provider is never started: target anthropic without base_url is refused."""
    with pytest.raises(ExperimentFileError, match="target anthropic is a hosted API"):
        load_experiment(_data(command=f"{PY} -c pass", target="anthropic"))
