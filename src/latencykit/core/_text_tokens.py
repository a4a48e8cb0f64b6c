"""How many tokens a piece of *streamed* text holds, estimated without a tokenizer.

Used for one thing only: TPOT on a stream whose billed output count includes tokens that
were never streamed and that the usage does not separate (Anthropic's summarized thinking:
``output_tokens`` bills the full thinking, the stream carries a summary). There the answer's
token count has to come from its text.

The estimate counts *pre-tokens* the way byte-level BPE tokenizers split text before
merging (GPT-2's and cl100k's patterns, Claude's alike): a run of letters with its leading
space, a run of up to three digits, each other symbol, each run of newlines. A BPE token
never spans two pre-tokens, so the count is a lower bound of the true count; on English prose
the true count is ~1.0–1.3× it (common words are one token each), more on code or rare
words. Long letter runs add one token per 10 letters past the first 10, where BPE splits
rare words. And each streamed delta carries at least one token, so the estimate is never
below the number of deltas. An undercount makes TPOT come out *larger* than the truth, never
an order of magnitude smaller.
"""

from __future__ import annotations

import re

__all__ = ["estimate_streamed_tokens"]

_PRETOKEN = re.compile(r"[^\W\d_]+|\d{1,3}|\n+|[^\s\w]|_")


def estimate_streamed_tokens(text: str, deltas: int = 0) -> int:
    """Estimated tokens in ``text`` that arrived in ``deltas`` token-bearing events (≥ ``deltas``)."""
    count = 0
    for match in _PRETOKEN.finditer(text):
        piece = match.group()
        count += 1
        if len(piece) > 10 and piece[0].isalpha():
            count += (len(piece) - 1) // 10
    return max(count, deltas)
