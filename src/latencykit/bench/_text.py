"""Real-looking filler text of a requested token length (no tokenizer needed).

Lengths follow the emulator's counting rule (about four characters per token), which is
also a fair estimate for English under the providers' BPE tokenizers; server usage is
the count that every report uses, so a prompt only has to be about the right size.
"""

from __future__ import annotations

import random

__all__ = ["CHARS_PER_TOKEN", "code_text", "prose"]

CHARS_PER_TOKEN = 4

_WORDS = (
    "the a an and or but so because while when after before during within without about "
    "system request answer customer order account invoice payment shipment warehouse report "
    "latency cache stream token model server queue batch policy setting document section "
    "summary figure table chapter reference customer support engineer product release update "
    "quickly carefully clearly briefly usually often rarely always never again together "
    "describe explain compare check confirm review measure improve reduce increase keep "
    "first second next last final early late recent current previous important useful "
    "storage network region cluster service client record field value result error warning "
    "user team project plan budget schedule meeting note message email contract price"
).split()
_CODE = (
    "def {f}({a}, {b}):\n    total = {a} + {b}\n    return total\n",
    "for item in {a}:\n    if item.{f}:\n        {b}.append(item)\n",
    "class {F}:\n    def __init__(self, {a}):\n        self.{a} = {a}\n",
    "with open({a}) as handle:\n    {b} = handle.read()\n",
    "result = [{f}(x) for x in {a} if x is not None]\n",
    "try:\n    {f}({a})\nexcept ValueError as exc:\n    log.warning(exc)\n",
)
_NAMES = ("data", "items", "config", "path", "count", "buffer", "rows", "user", "order", "index")
_FUNCS = ("load", "parse", "render", "update", "compute", "fetch", "merge", "flush", "validate")


def prose(rng: random.Random, tokens: int) -> str:
    """Sentences of English-looking words, about ``tokens`` tokens (``4·tokens`` characters)."""
    target = max(tokens, 1) * CHARS_PER_TOKEN
    # Words average ~5 characters with their space; beyond ~4,000 characters the text repeats.
    words = rng.choices(_WORDS, k=min(target // 5 + 8, 800))
    ends = rng.choices((". ", ". ", ". ", "? ", "; "), k=len(words) // 6 + 1)
    parts = []
    for i in range(0, len(words), 11):
        sentence = " ".join(words[i : i + 11])
        parts.append(sentence[:1].upper() + sentence[1:] + ends[i // 11 % len(ends)])
    text = "".join(parts)
    while len(text) < target:
        text += text
    return text[:target].rstrip() or "ok"


def code_text(rng: random.Random, tokens: int) -> str:
    """Python-looking source of about ``tokens`` tokens."""
    target = max(tokens, 1) * CHARS_PER_TOKEN
    block = "".join(
        rng.choice(_CODE).format(f=f, F=f.capitalize() + "er", a=rng.choice(_NAMES), b=rng.choice(_NAMES))
        for f in rng.choices(_FUNCS, k=min(target // 45 + 1, 40))
    )
    text = block
    while len(text) < target:
        text += block
    return text[:target] or "pass"
