"""Task accuracy: the quality prompts' known answers, and the grader that checks an answer against one.

A prompt file (``[quality] file = "prompts.jsonl"``, or the shipped set ``[quality] set = "basic"``,
printed by ``latencykit experiment --example quality``) is JSONL, one prompt a line::

    {"prompt": "What is 6 times 7? Answer with the number only.", "answer": "42", "match": "number"}
    {"prompt": "What is the capital of France? Answer in one word.", "answer": "Paris"}
    {"prompt": "Reply with the single word YES ...", "answer": "^\\\\W*YES\\\\W*$", "match": "regex"}

``prompt`` (or ``messages``, with an optional ``system``) is what is sent; ``answer`` the known
answer, ``accept`` more answers counted right, ``match`` how an answer is checked:

- ``contains`` (default): the answer appears in the text as a whole word or phrase, case ignored;
- ``number``: the text's last number equals it (``12``, ``12.0``, ``1,000``: "7 + 5 = 12" is right), or an
  ``accept`` word appears;
- ``exact``: the whole text, trimmed of spaces, quotes and final punctuation, case ignored;
- ``regex``: ``re.search`` of the answer as a pattern (case-sensitive; ``(?i)`` for not).

A row with no ``answer`` is compared with the baseline only. A user's own grader
(``[quality] grader = "module:function"``) is called as ``grader(prompt, answer, expected)``
with ``expected`` the row (a dict) and returns ``True``/``False`` or a score from 0 to 1; it
replaces the built-in checks. Accuracy is the mean over the graded prompts.
"""

from __future__ import annotations

import json
import re
from importlib.resources import files
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

__all__ = ["MATCHES", "SETS", "accuracy", "builtin_set", "expected_answers", "grade"]

MATCHES = ("contains", "number", "exact", "regex")
SETS = ("basic",)
"""Prompt sets shipped in ``latencykit/experiment/examples/quality-<name>.jsonl``."""
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
Grader = Callable[[str, str, dict[str, Any]], Any]


def builtin_set(name: str) -> str:
    """The path of a shipped prompt set; ``ValueError`` for an unknown name."""
    if name not in SETS:
        raise ValueError(f"set must be one of {', '.join(SETS)}, got {name!r}")
    return str(files("latencykit.experiment").joinpath(f"examples/quality-{name}.jsonl"))


def expected_answers(file: str, n: int) -> list[Optional[dict[str, Any]]]:
    """Per prompt of ``file`` (its first ``n``), the row when it has an ``answer``, else ``None``; ``ValueError`` on a bad row."""
    out: list[Optional[dict[str, Any]]] = []
    for no, line in enumerate(Path(file).read_text().splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if "answer" in row:
            if not isinstance(row["answer"], str) or not all(isinstance(a, str) for a in row.get("accept", [])):
                raise ValueError(f"{file} line {no}: 'answer' must be a string and 'accept' a list of strings")
            match = row.get("match", "contains")
            if match not in MATCHES:
                raise ValueError(f"{file} line {no}: match must be one of {', '.join(MATCHES)}, got {match!r}")
            if match == "regex":
                try:
                    re.compile(row["answer"])
                except re.error as exc:
                    raise ValueError(f"{file} line {no}: answer is not a valid pattern: {exc}") from None
            out.append(row)
        else:
            out.append(None)
        if len(out) == n:
            break
    return out


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().strip("\"'`“”‘’").strip()).rstrip(".!?,;:").strip().lower()


def _number(text: str) -> Optional[float]:
    found = _NUMBER.findall(text)
    if not found:
        return None
    try:
        return float(found[-1].replace(",", "").rstrip(","))
    except ValueError:
        return None


def _phrase(needle: str, text: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(needle.lower()) + r"(?!\w)", text.lower()) is not None


def grade(answer: str, expected: dict[str, Any]) -> bool:
    """Whether ``answer`` is right for the ``expected`` row (module docstring's ``match`` rules)."""
    match = expected.get("match", "contains")
    want = str(expected["answer"])
    accept = [str(a) for a in expected.get("accept", [])]
    if match == "regex":
        return any(re.search(p, answer) is not None for p in [want, *accept])
    if match == "number":
        got = _number(answer)
        try:
            if got is not None and abs(got - float(want.replace(",", ""))) < 1e-9:
                return True
        except ValueError:
            pass
        return any(_phrase(a, answer) for a in accept)
    if match == "exact":
        return _norm(answer) in {_norm(a) for a in [want, *accept]}
    return any(_phrase(a, answer) for a in [want, *accept])


def accuracy(texts: Sequence[Optional[str]], expected: Sequence[Optional[dict[str, Any]]], prompts: Sequence[str] = (),
             grader: Optional[Grader] = None) -> dict[str, Any]:  # fmt: skip
    """``{"accuracy", "correct", "graded", "right"}``: per prompt with a known answer, whether the text is right
    (``right`` lists 1/0 per prompt, ``None`` where there is nothing to grade or no answer came back)."""
    right: list[Optional[float]] = []
    for i, row in enumerate(expected):
        text = texts[i] if i < len(texts) else None
        if row is None or text is None:
            right.append(None)
            continue
        if grader is not None:
            try:
                value = grader(prompts[i] if i < len(prompts) else "", text, row)
                right.append(min(max(float(value), 0.0), 1.0))
            except Exception:
                right.append(None)
        else:
            right.append(float(grade(text, row)))
    graded = [r for r in right if r is not None]
    return {"accuracy": sum(graded) / len(graded) if graded else None, "correct": sum(graded), "graded": len(graded), "right": right}
