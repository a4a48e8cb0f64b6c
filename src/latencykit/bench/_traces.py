"""Public traces replayed: Mooncake JSONL, Azure LLM inference CSV, BurstGPT CSV (and latencykit's own JSONL).

Only lengths and times are public, so the prompt text is synthesized to the exact token length under the
documented estimate — the emulator's counting rule, about four characters per token: a message of ``4·k``
characters, plus 4 tokens per message and 3 per request (``FRAMING``), counts ``k + 7`` tokens. A real
tokenizer counts such text differently; the server's usage is what every report shows.

Formats (detected from the first line; `FORMATS`, ``--replay-format`` forces one):

- ``mooncake`` (github.com/kvcache-ai/Mooncake, ``FAST25-release/traces``): one JSON object per line with
  ``timestamp`` (milliseconds since the first request), ``input_length``, ``output_length`` and ``hash_ids``,
  one id per block of 512 prompt tokens; requests that share leading ids share those blocks. Here block
  ``h`` is a fixed text of exactly 512 tokens (2,048 characters) made from the seed and ``h``, starting with
  a 4-character code unique to ``h``: a request's message is its blocks in order, cut to its length (the
  framing tokens come off its last block), so two requests whose first ``k`` ids agree share **exactly**
  ``512·k`` tokens of prefix, and differ in the next token — when those blocks are whole in both, as shared
  blocks are in Mooncake's traces (a partial last block has an id of its own). Text beyond the listed blocks
  is the request's own.
- ``azure`` (github.com/Azure/AzurePublicDataset, ``AzureLLMInferenceTrace_{code,conv}.csv`` 2023 and the
  2024 week): CSV with ``TIMESTAMP`` (a date and time), ``ContextTokens``, ``GeneratedTokens``.
- ``burstgpt`` (github.com/HPMLL/BurstGPT, ``BurstGPT_*.csv``): CSV with ``Timestamp`` (seconds), ``Model``,
  ``Request tokens``, ``Response tokens``, ``Total tokens``, ``Log Type`` (later releases add ``Session ID``
  and ``Elapsed time``). Rows whose request or response tokens are 0 are the trace's failed requests: skipped.
- ``latencykit``: `latencykit.bench._traffic.load_replay` (``prompt_tokens`` / ``output_tokens`` JSONL,
  ``Recorder.to_jsonl()`` lines).

Times become ``at`` offsets in seconds from the first request, for ``--arrivals recorded``. A malformed line
is a one-line ``ValueError`` naming the file's line.
"""

from __future__ import annotations

import csv
import json
import random
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from ._text import CHARS_PER_TOKEN, prose
from ._traffic import TrafficRequest, load_replay

__all__ = ["BLOCK_TOKENS", "FORMATS", "FRAMING", "block_text", "detect_format", "exact_text", "load_trace"]

FORMATS = ("latencykit", "mooncake", "azure", "burstgpt")
BLOCK_TOKENS = 512
"""Prompt tokens per Mooncake hash id."""
FRAMING = 3 + 4
"""Tokens the estimate adds to one user message: 3 per request, 4 per message."""
_BLOCK_CHARS = BLOCK_TOKENS * CHARS_PER_TOKEN
_CODE = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_AZURE = ("timestamp", "contexttokens", "generatedtokens")
_BURST = ("timestamp", "request tokens", "response tokens")


def detect_format(first_line: str) -> Optional[str]:
    """The format a file's first non-empty line says, or ``None`` when it says none of `FORMATS`."""
    line = first_line.strip().lstrip("\ufeff")
    if line.startswith("{"):
        try:
            row = json.loads(line)
        except ValueError:
            return None
        if isinstance(row, dict) and "input_length" in row and "output_length" in row:
            return "mooncake"
        return "latencykit"
    head = [c.strip().lower() for c in next(csv.reader([line]), [])]
    if all(c in head for c in _AZURE):
        return "azure"
    if all(c in head for c in _BURST):
        return "burstgpt"
    return None


def exact_text(rng: random.Random, tokens: int) -> str:
    """English-looking text of exactly ``4·tokens`` characters (``tokens`` under the estimate)."""
    chars = max(tokens, 0) * CHARS_PER_TOKEN
    text = prose(rng, tokens + 8)
    while len(text) < chars:
        text += " " + text
    return text[:chars]


def _code(h: int) -> str:
    """4 characters (one token) unique to ``h`` for ``h`` below 62⁴ (14.8 million)."""
    n = h % len(_CODE) ** 4
    out = ""
    for _ in range(4):
        n, r = divmod(n, len(_CODE))
        out = _CODE[r] + out
    return out


def block_text(h: int, seed: int = 0) -> str:
    """Mooncake block ``h``: exactly 512 tokens (2,048 characters), its first token a code unique to ``h``."""
    return _code(h) + exact_text(random.Random(f"latencykit-bench:block:{seed}:{h}"), BLOCK_TOKENS - 1)


def _positive(value: Any, name: str, where: str) -> int:
    try:
        n = int(str(value).strip().replace(",", ""))
    except ValueError:
        raise ValueError(f"{where}: {name} must be a whole number of tokens, got {value!r}") from None
    if n < 0:
        raise ValueError(f"{where}: {name} must not be negative, got {value!r}")
    return n


def _request(i: int, shape: str, prompt: int, out: int, text: str, at: Optional[float], extra: dict[str, Any]) -> TrafficRequest:
    return TrafficRequest(i, shape, prompt, out, "", ({"role": "user", "content": text},), at=at, extra=extra)


def _mooncake(lines: Sequence[str], name: str, seed: int) -> list[TrafficRequest]:
    blocks: dict[int, str] = {}
    out: list[TrafficRequest] = []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{name} line {no}"
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{where} is not JSON: {exc}") from None
        if not isinstance(row, dict) or "input_length" not in row or "output_length" not in row:
            raise ValueError(f"{where}: a Mooncake line needs input_length and output_length: {line.strip()[:80]!r}")
        prompt, answer = _positive(row["input_length"], "input_length", where), _positive(row["output_length"], "output_length", where)
        ids = row.get("hash_ids") or []
        if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in ids):
            raise ValueError(f"{where}: hash_ids must be a list of non-negative ints, got {str(ids)[:60]}")
        stamp = row.get("timestamp")
        if stamp is not None and not (isinstance(stamp, (int, float)) and not isinstance(stamp, bool) and stamp >= 0):
            raise ValueError(f"{where}: timestamp must be milliseconds >= 0, got {stamp!r}")
        if prompt < 1 or answer < 1:
            raise ValueError(f"{where}: input_length and output_length must be at least 1, got {prompt} and {answer}")
        chars = max(prompt - FRAMING, 1) * CHARS_PER_TOKEN
        text = "".join(blocks.setdefault(h, block_text(h, seed)) for h in ids)[:chars]
        if len(text) < chars:  # beyond the listed blocks: this request's own text
            text += exact_text(random.Random(f"latencykit-bench:mooncake:{seed}:{no}"), (chars - len(text)) // CHARS_PER_TOKEN)
        out.append(_request(len(out), "replay", prompt, answer, text, None if stamp is None else stamp / 1000.0,
                            {"hash_ids": list(ids), "line": no, "synthetic": True}))  # fmt: skip
    return out


def _azure_time(text: str, where: str) -> float:
    t = text.strip().replace("Z", "+00:00")
    date, dot, rest = t.partition(".")
    if dot:  # .NET writes 7 fractional digits; Python reads up to 6
        digits = "".join(c for c in rest if c.isdigit())
        zone = rest[len(digits):]
        t = f"{date}.{digits[:6]}{zone}"
    try:
        stamp = datetime.fromisoformat(t)
    except ValueError:
        raise ValueError(f"{where}: TIMESTAMP must be a date and time like 2023-11-16 18:15:46.6805900, got {text!r}") from None
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)).timestamp()


def _csv(lines: Sequence[str], name: str, fmt: str, seed: int) -> tuple[list[TrafficRequest], int]:
    rows = csv.reader(lines)
    header = [c.strip().lower().lstrip("\ufeff") for c in next(rows, [])]
    want = _AZURE if fmt == "azure" else _BURST
    missing = [c for c in want if c not in header]
    if missing:
        raise ValueError(f"{name} line 1: a {fmt} CSV needs the columns {', '.join(want)}; missing {', '.join(missing)}")
    t_col, p_col, o_col = (header.index(c) for c in want)
    out: list[TrafficRequest] = []
    skipped = 0
    for no, row in enumerate(rows, 2):
        if not row or not any(c.strip() for c in row):
            continue
        where = f"{name} line {no}"
        if len(row) < len(header):
            raise ValueError(f"{where}: {len(row)} columns where the header has {len(header)}: {','.join(row)[:80]!r}")
        prompt, answer = _positive(row[p_col], want[1], where), _positive(row[o_col], want[2], where)
        if fmt == "azure":
            at = _azure_time(row[t_col], where)
        else:
            try:
                at = float(row[t_col])
            except ValueError:
                raise ValueError(f"{where}: Timestamp must be seconds, got {row[t_col]!r}") from None
        if prompt < 1 or answer < 1:  # BurstGPT's failed requests (Response tokens 0)
            skipped += 1
            continue
        text = exact_text(random.Random(f"latencykit-bench:{fmt}:{seed}:{no}"), max(prompt - FRAMING, 1))
        out.append(_request(len(out), "replay", prompt, answer, text, at, {"line": no, "synthetic": True}))
    return out, skipped


def load_trace(source: Iterable[str] | str | Path, *, fmt: Optional[str] = None, seed: int = 0,
               name: str = "--replay") -> tuple[list[TrafficRequest], str, int]:  # fmt: skip
    """``(requests, format, rows skipped)`` of a trace file or its lines; the format detected unless ``fmt``
    (`FORMATS`). ``ValueError`` (one line) for an unknown format or a malformed line, naming the line."""
    if fmt is not None and fmt not in FORMATS:
        raise ValueError(f"--replay-format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    if isinstance(source, (str, Path)):
        name = f"{name} {source}"
        lines = Path(source).read_text(encoding="utf-8-sig").splitlines()
    else:
        lines = list(source)
    first = next((line for line in lines if line.strip()), None)
    if first is None:
        raise ValueError(f"{name}: the file is empty")
    found = fmt or detect_format(first)
    if found is None:
        raise ValueError(f"{name}: line 1 is no format this reads ({first.strip()[:60]!r}); --replay-format takes "
                         f"{', '.join(FORMATS)}")  # fmt: skip
    skipped = 0
    if found == "latencykit":
        requests = load_replay(lines, seed=seed)
    elif found == "mooncake":
        requests = _mooncake(lines, name, seed)
    else:
        requests, skipped = _csv(lines, name, found, seed)
    if not requests:
        raise ValueError(f"{name}: no usable request ({skipped} row(s) with 0 tokens skipped)")
    stamps = [r.at for r in requests if r.at is not None]
    if stamps and len(stamps) == len(requests):
        t0 = min(stamps)
        requests = [TrafficRequest(r.index, r.shape, r.prompt_tokens, r.output_tokens, r.system, r.messages,
                                   at=float(r.at) - t0, extra=r.extra) for r in requests]  # type: ignore[arg-type]  # fmt: skip
    return requests, found, skipped
