"""Near-miss and repeat pairs of every length, made deterministically, and the cache's decision on a pair.

Used by ``tests/test_semantic_guards.py`` and ``benchmarks/semantic.py``. A pair is two
questions of ``length`` words that differ only in

- ``number``: one number (``size 43`` / ``size 44``, ``$1,200`` / ``$1,250``, a date, a
  decimal, an order id);
- ``negation``: ``turn on`` / ``turn off``, ``with`` / ``without``, ``can`` / ``cannot``;
- ``swap``: an ordered pair reversed (``Celsius to Fahrenheit`` / ``Fahrenheit to Celsius``);

which must never be answered one for the other, or — ``repeat`` — in case, punctuation
and spacing only, which must be. The changed phrase sits at the start, the middle or the
end of a question padded with neutral context sentences (no digits, no number words).
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator, NamedTuple, Sequence

from latencykit.semantic import SemanticCache, semantic_cacheable
from latencykit.semantic._options import HEADER

LENGTHS = (10, 15, 20, 30, 40, 60, 80, 100, 150, 200)
KINDS = ("number", "negation", "swap")

NUMBER = [
    ("Do you still have the trail running shoes in size {}?", ("43", "44")),
    ("Can I book a table for {} people this evening?", ("27", "29")),
    ("Has my refund of {} been approved yet?", ("$1,200.50", "$1,250.50")),
    ("Can the delivery be moved to {} instead?", ("2026-12-03", "2026-12-04")),
    ("Is order {} already on its way to me?", ("A-1234", "A-1243")),
    ("Will the update be applied to version {} of the app?", ("3.5", "3.6")),
    ("Is the discount still {} off for members?", ("15%", "20%")),
    ("Can I pick it up at {} tomorrow?", ("10:30", "11:30")),
]
NEGATION = [
    ("How do I {} automatic renewal for my plan?", ("turn on", "turn off")),
    ("Is it possible to travel {} a passport to the island?", ("with", "without")),
    ("Why {} I change the delivery address after checkout?", ("can", "cannot")),
    ("Should I {} the tax in the price I enter?", ("include", "exclude")),
    ("How do I {} notifications for new messages?", ("enable", "disable")),
    ("Are pets {} in the hotel rooms?", ("allowed", "not allowed")),
]
SWAP = [
    ("How do I convert {} to {} in the spreadsheet?", ("Celsius", "Fahrenheit")),
    ("What is the cheapest flight from {} to {} next week?", ("Paris", "London")),
    ("Can I move money from my {} account to my {} account online?", ("savings", "checking")),
    ("Please translate this paragraph from {} to {} for me.", ("English", "French")),
    ("Is the {} plan more expensive than the {} plan?", ("basic", "premium")),
]
FILLER = [
    "I have been a customer of your shop for a long time.",
    "My account is registered under my work email address.",
    "I tried to find the answer on the help pages before asking.",
    "The chat assistant on the website could not help me.",
    "I am writing from my phone so please keep it short.",
    "My partner usually handles these things but is away.",
    "We are planning a trip with the whole family soon.",
    "Thanks in advance for taking the time to look into this.",
    "I would rather not call the support line during work hours.",
    "Everything else about the service has been great so far.",
    "Please let me know if you need any other details from me.",
    "I already checked my spam folder for any messages.",
    "I'm not sure whether it's a short-term problem or not.",
]


class Pair(NamedTuple):
    """Two questions and whether the cache may answer one with the other's answer."""

    kind: str
    length: int
    a: str
    b: str
    match: bool


def _filler(words: int, start: int) -> list[str]:
    out: list[str] = []
    i = start
    while len(out) < words:
        out.extend(FILLER[i % len(FILLER)].split())
        i += 1
    return out[:words]


def _padded(core: str, other: str, length: int, seed: int) -> tuple[str, str]:
    """``core`` and ``other`` (same word count) padded to ``length`` words at the same place."""
    n = len(core.split())
    pad = max(length - n, 0)
    where = seed % 3  # the change at the start, in the middle, at the end
    before = 0 if where == 0 else (pad // 2 if where == 1 else pad)
    words = _filler(pad, seed)
    head, tail = words[:before], words[before:]
    return " ".join(head + core.split() + tail), " ".join(head + other.split() + tail)


def _cores(kind: str) -> Iterator[tuple[str, str]]:
    if kind == "number":
        for template, (x, y) in NUMBER:
            yield template.format(x), template.format(y)
    elif kind == "negation":
        for template, (x, y) in NEGATION:
            yield template.format(x), template.format(y)
    else:
        for template, (x, y) in SWAP:
            yield template.format(x, y), template.format(y, x)


def _repeat(text: str, seed: int) -> str:
    """``text`` changed only in case, punctuation and spacing."""
    if seed % 4 == 0:
        return text.lower().rstrip("?.!")
    if seed % 4 == 1:
        return "  " + text.upper().replace(" ", "   ", 3) + " ?"
    if seed % 4 == 2:
        return re.sub(r"\.(\s|$)", r"!\1", text).replace(", ", " ") + "!!"  # sentence ends only: "3.5" stays
    return re.sub(r"[^\w\s$%€](?!\d)", "", text)  # punctuation removed, but not inside a number


def pairs(lengths: Sequence[int] = LENGTHS) -> list[Pair]:
    """Every near-miss (``match=False``) and a repeat of each (``match=True``), at every length."""
    out: list[Pair] = []
    for length in lengths:
        for kind in KINDS:
            for i, (x, y) in enumerate(_cores(kind)):
                seed = length + i
                a, b = _padded(x, y, length, seed)
                out.append(Pair(kind, length, a, b, False))
                out.append(Pair("repeat", length, a, _repeat(a, seed), True))
    return out


_ANSWER = b'event: message_start\ndata: {"type":"message_start"}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n'


def _body(text: str) -> bytes:
    return json.dumps({"model": "m", "max_tokens": 8, "stream": True, "system": "You are a support agent.", "messages": [{"role": "user", "content": text}]}).encode()


def decide(cache: SemanticCache, questions: Sequence[tuple[str, str]], vectors: Any = None) -> list[bool]:
    """For each ``(stored, asked)``: does ``cache`` answer ``asked`` with the answer stored for ``stored``?

    Runs the cache's own steps (`plan`, `store_answer`, `lookup`) on Anthropic request
    bodies, one scope per pair; ``vectors`` (rows for stored then asked questions, in
    order) saves embedding again what the caller already embedded.
    """
    out: list[bool] = []
    for i, (stored, asked) in enumerate(questions):
        mark = semantic_cacheable(f"pair-{i}")[HEADER]
        first, second = cache.plan("/v1/messages", _body(stored), mark), cache.plan("/v1/messages", _body(asked), mark)
        assert first is not None and second is not None
        first.vector = cache.embed(stored) if vectors is None else vectors[2 * i]
        second.vector = cache.embed(asked) if vectors is None else vectors[2 * i + 1]
        assert cache.store_answer(first, _ANSWER)
        out.append(cache.lookup(second) is not None)
    cache.clear()
    return out
