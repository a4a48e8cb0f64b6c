"""Records out of the process (JSON Lines, CSV, pandas) and the per-call debug log line, through real calls."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import logging
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import latencykit as lk
from latencykit import CallRecord
from latencykit.emulator import Emulator

SECRET = "zebra-canary-export-4411"  # prompt text that must appear in no export and no log line
FIELDS = [f.name for f in dataclasses.fields(CallRecord)]


@pytest.fixture
def three_calls(emu: Emulator) -> lk.Recorder:
    """Two Anthropic calls (one streamed) and one OpenAI call, all carrying the canary in the prompt."""
    shared = lk.Recorder()
    messages = [{"role": "user", "content": f"Say hi. {SECRET}"}]
    with lk.Anthropic(base_url=emu.base_url, api_key="k", recorder=shared) as ant:
        ant.messages.create(model="claude-sonnet-5", max_tokens=32, messages=messages)
        with ant.messages.stream(model="claude-sonnet-5", max_tokens=32, messages=messages) as stream:
            stream.get_final_message()
    with lk.OpenAI(base_url=emu.base_url + "/v1", api_key="k", recorder=shared) as oai:
        oai.chat.completions.create(model="gpt-5-mini", messages=messages)
    assert len(shared.calls) == 3
    return shared


def test_jsonl_round_trips_every_field(three_calls: lk.Recorder, tmp_path: Path) -> None:
    """to_jsonl writes one object per call with every CallRecord field; from_jsonl gives equal records and summary."""
    path = tmp_path / "calls.jsonl"
    assert three_calls.to_jsonl(path) == 3
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) == 3 and SECRET not in text
    first = json.loads(lines[0])
    assert list(first) == FIELDS
    assert first["provider"] == "anthropic" and first["outcome"] == "completed" and first["ttft"] > 0
    assert isinstance(first["finish_reasons"], list) and isinstance(first["extra"], dict)
    back = lk.Recorder.from_jsonl(path)
    assert back.calls == three_calls.calls
    assert back.summary()["ttft"].to_dict() == three_calls.summary()["ttft"].to_dict()
    buf = io.StringIO()
    three_calls.to_jsonl(buf)  # a text file object works too
    assert buf.getvalue() == text


def test_jsonl_rejects_foreign_lines(tmp_path: Path) -> None:
    """A line that is not a CallRecord raises ValueError naming the line and the bad field."""
    path = tmp_path / "bad.jsonl"
    good = CallRecord(provider="openai", operation="chat", request_model="m").to_dict()
    path.write_text(json.dumps(good) + "\n\n" + json.dumps({**good, "prompt": "x"}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 3 .*'prompt'"):
        lk.Recorder.from_jsonl(path)
    path.write_text(json.dumps({**good, "outcome": "finished"}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="'finished'"):
        lk.Recorder.from_jsonl(path)


def test_csv_has_a_header_and_one_row_per_call(three_calls: lk.Recorder, tmp_path: Path) -> None:
    """to_csv: header of every field, one row per call, None as empty, lists as JSON; readable by pandas."""
    path = tmp_path / "calls.csv"
    assert three_calls.to_csv(path) == 3
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == FIELDS and len(rows) == 3
    assert SECRET not in path.read_text(encoding="utf-8")
    assert [r["provider"] for r in rows] == ["anthropic", "anthropic", "openai"]
    assert float(rows[0]["ttft"]) == three_calls.calls[0].ttft
    assert json.loads(rows[0]["finish_reasons"]) == list(three_calls.calls[0].finish_reasons)
    assert rows[0]["error_type"] == ""  # None
    frame = pd.read_csv(path)
    assert frame["output_tokens"].tolist() == [c.output_tokens for c in three_calls.calls]


def test_dataframe_for_notebooks(three_calls: lk.Recorder) -> None:
    """to_dataframe: one row per call, the CallRecord columns, numbers as numbers."""
    df = three_calls.to_dataframe()
    assert isinstance(df, pd.DataFrame) and list(df.columns) == FIELDS and len(df) == 3
    assert df.groupby("provider")["ttft"].count().to_dict() == {"anthropic": 2, "openai": 1}
    assert df["ttft"].dtype.kind == "f" and (df["ttft"] > 0).all()
    assert list(lk.Recorder().to_dataframe().columns) == FIELDS  # empty, same columns


def test_dataframe_without_pandas_names_the_extra() -> None:
    """Without pandas, to_dataframe raises ImportError naming pip install "latencykit[pandas]"."""
    code = (
        "import sys; sys.modules['pandas'] = None\n"
        "import latencykit as lk\n"
        "try:\n    lk.Recorder().to_dataframe()\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert 'pip install "latencykit[pandas]"' in out.stdout


def test_debug_line_per_call(emu: Emulator, caplog: pytest.LogCaptureFixture) -> None:
    """At DEBUG, each finished call logs one line on `latencykit`: provider, model, TTFT, tokens, cache — no prompt."""
    with caplog.at_level(logging.DEBUG, logger="latencykit"):
        with lk.Anthropic(base_url=emu.base_url, api_key="sk-ant-secret-key") as ant:
            for _ in range(2):
                ant.messages.create(
                    model="claude-sonnet-5", max_tokens=32, messages=[{"role": "user", "content": f"hi {SECRET}"}]
                )
    lines = [r.getMessage() for r in caplog.records if r.name == "latencykit" and r.getMessage().startswith("latencykit call:")]
    assert len(lines) == 2
    rec = ant.latency.last
    assert rec is not None
    assert lines[1] == f"latencykit call: {rec!r}"
    for part in ("anthropic/claude-sonnet-5", "messages", "completed", "ttft=", f"out={rec.output_tokens}", "cache="):
        assert part in lines[1], part
    every = "\n".join(r.getMessage() for r in caplog.records)
    assert SECRET not in every and "sk-ant-secret-key" not in every


def test_debug_off_logs_nothing(emu: Emulator, caplog: pytest.LogCaptureFixture) -> None:
    """With the logger above DEBUG no call line is emitted."""
    with caplog.at_level(logging.INFO, logger="latencykit"):
        with lk.Anthropic(base_url=emu.base_url, api_key="k") as ant:
            ant.messages.create(model="claude-sonnet-5", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    assert not [r for r in caplog.records if r.getMessage().startswith("latencykit call:")]
