"""What two questions must share exactly, whatever their similarity: folded text, numbers.

A cosine threshold cannot tell "size 43" from "size 44" in a long question: the longer the
message, the closer a one-word change gets to 1.0 (0.981 for a 36-word question with the
hashed embedder). So the cache adds exact guards, mixed into the partition a lookup
searches (`SemanticCache`), which makes them hold by construction for every store:

- `fold`: the text with case, sentence punctuation and spacing folded, letters, digits
  and symbols kept exactly. `HashedEmbedder` (``exact=True``, its default) asks the cache
  to match on it, so that embedder answers only repeats that differ in case, punctuation
  or spacing — what its docs promise.
- `numbers`: the numbers of a text in order — digits with their sign, decimal and
  thousands marks, currency and percent signs; dates (``2026-12-03``, ``12/03``, month
  names next to a number); ids with a digit (``A-1234``, ``v2``); English number words
  (``two`` is ``2``, ``third`` is ``3rd``). With ``SemanticCache(match_numbers=True)`` (the
  default) two questions must give equal tuples.

Both are pure functions; the cache keeps only a keyed digest of what they return.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["fold", "numbers", "FOLD_VERSION", "NUMBERS_VERSION"]

FOLD_VERSION = "fold/1"  # bump when `fold` changes: entries stored under another fold never match
NUMBERS_VERSION = "numbers/1"
"""Mixed into the partition key: a change of either function must never match old entries."""

# Sentence punctuation, folded where it ends or starts a word. Not here, so always kept:
# symbols and marks that change a question's meaning (# % & * + / < = > @ \ ^ _ | ~ $ €).
_EDGE = ".,;:!?¿¡…‼⁇'\"`´()[]{}«»‹›-‐‑‒–—―。、，．！？：；「」『』【】〈〉《》"
_SIGNS = "-+."  # kept before a letter or digit: "-5", ".5", "-rf", ".bashrc"
_QUOTES = str.maketrans({"‘": "'", "’": "'", "‛": "'", "′": "'", "“": '"', "”": '"', "„": '"', "″": '"', "−": "-"})
_JOINERS = "'-‐‑."  # inside a word between letters, dropped: "don't" = "dont", "e-mail" = "email"
_INNER = re.compile("[" + re.escape(_EDGE) + "]+")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_ALNUM = re.compile(r"[^\W_]")


def _visible(m: "re.Match[str]") -> str:
    ch = m.group()
    return "" if unicodedata.category(ch) == "Cf" else ch


def _clean(text: str) -> str:
    """NFKC, typographic quotes and minus as ASCII, invisible format characters removed."""
    if text.isascii():  # the common case: nothing to normalize (ASCII has no format characters)
        return text
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    return _NON_ASCII.sub(_visible, text)


def _fold_word(word: str) -> str:
    if _ALNUM.search(word) is None:
        return "" if not word.strip(_EDGE) else word  # "?", "—": punctuation alone; "!=", "->": an operator
    core = word.rstrip(_EDGE)
    rest = core.lstrip(_EDGE)
    cut = len(core) - len(rest)
    if cut and core[cut - 1] in _SIGNS and rest[:1].isalnum():
        cut -= 1  # "-5", ".5", "-rf": a sign, not punctuation
        return core[cut] + _INNER.sub(_inner, core[cut + 1 :])
    return _INNER.sub(_inner, rest)


def _inner(m: "re.Match[str]") -> str:
    """Punctuation inside a word: kept unless between two letters ("3.5", "A-1234", "x!=y"); there,
    one apostrophe, hyphen or period is dropped ("don't", "e-mail", "e.g"), anything else is a
    space ("hello,world", "wait...what")."""
    run, text, i, j = m.group(), m.string, m.start(), m.end()
    if not (i and text[i - 1].isalpha() and j < len(text) and text[j].isalpha()):
        return run  # next to a digit or a symbol: "3.5", "A-1234", "x!=y"
    return "" if len(run) == 1 and run in _JOINERS else " "


def fold(text: str) -> str:
    """``text`` with case, sentence punctuation and spacing folded (``"What's up?"`` → ``"what's up"``).

    Unicode NFKC; typographic quotes as ASCII; invisible format characters (zero-width
    space, soft hyphen) removed; words split on any whitespace and joined by one space;
    punctuation from a fixed list (``. , ; : ! ? … ' " ( ) [ ] { }``, dashes, guillemets, CJK
    full stops) removed where it ends a word or starts one — except a ``-``, ``+`` or ``.``
    directly before a letter or digit (``-5``, ``.5``, ``-rf``); inside a word it is kept
    next to a digit or a symbol (``3.5``, ``1,200``, ``12:30``, ``A-1234``, ``x!=y``); between
    two letters one apostrophe, hyphen or period is dropped (``don't`` = ``dont``,
    ``e-mail`` = ``email``) and anything else is a space (``hello,world`` = ``hello, world``,
    ``wait...what`` = ``wait what``); a word of punctuation alone is
    dropped, a word of symbols (``!=``) kept; then case-folded. Letters, digits and symbols
    (``# % $ + / = @``) are never changed, so ``"size 43"`` and ``"size 44"``, ``"3.5"`` and
    ``"35"``, ``"x != 5"`` and ``"x = 5"`` stay different.
    """
    words = (_fold_word(w) for w in _clean(text).split())
    return " ".join(w for w in words if w).casefold()


_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19,
}  # fmt: skip
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_ORDINALS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8, "ninth": 9,
    "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13, "fourteenth": 14, "fifteenth": 15,
    "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19, "twentieth": 20, "thirtieth": 30,
    "fortieth": 40, "fiftieth": 50, "sixtieth": 60, "seventieth": 70, "eightieth": 80, "ninetieth": 90,
}  # fmt: skip
_WORDS = frozenset({"hundred", "thousand", "million", "billion", "trillion", "dozen", "half", "quarter", "hundredth", "thousandth"})
_MONTHS = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4, "apr": 4, "may": 5,
    "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8, "september": 9, "sep": 9, "sept": 9,
    "october": 10, "oct": 10, "november": 11, "nov": 11, "december": 12, "dec": 12,
}  # fmt: skip

# A word: letters/digits, joined inside by . , : / ' - (so "1,200.50", "2026-12-03", "A-1234",
# "12:30", "5'11" stay one token), with an optional currency and sign before (not after a
# letter or digit: "A-1234" is an id, "-5" a negative number) and a currency, percent or
# per-mille sign after.
_CURRENCY = "$€£¥₹₩₽₺₪₫₴₦฿¢"
_TOKEN = re.compile(
    rf"(?P<pre>(?<![^\W_])(?:[{_CURRENCY}]\s?)?[-+]?)(?P<core>[^\W_]+(?:[.,:/'\-][^\W_]+)*)(?P<post>(?:\s?[{_CURRENCY}%‰](?![^\W_]|[-+.,]?\d))?)"
)
_VOCAB = frozenset(_UNITS) | frozenset(_TENS) | frozenset(_ORDINALS) | _WORDS | frozenset(_MONTHS)
_PLAIN = ("", False)
_DIGIT = re.compile(r"\d")
_MONTH_REACH = 2  # a month name counts with a number at most this many words away: "3rd of March"


def _ascii_digits(core: str) -> str:
    return "".join(str(unicodedata.decimal(ch)) if ch.isdecimal() else ch for ch in core)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def numbers(text: str) -> tuple[str, ...]:
    """The numbers of ``text``, in order, as canonical strings.

    ``"Refund $1,200.50 for order A-1234 on 12/03"`` → ``("$1,200.50", "a-1234", "12/03")``;
    ``"two tickets for the third of March"`` → ``("2", "3rd", "month:3")``. Digits of any
    script become ASCII; a word holding a digit is kept whole and case-folded (an id);
    ``-5`` keeps its sign, ``$5`` / ``5%`` their signs; number words become digits
    (``twenty-one`` → ``21``, ``second`` → ``2nd``), and ``hundred`` / ``dozen`` / ``half`` /
    ``quarter`` are kept as words; a month name counts within two words of a number.
    Formats are not unified: ``1,200`` and ``1200``, ``5.0`` and ``5`` differ (a miss, never
    a wrong answer). Numbers written in other languages' words are not seen.
    """
    text = _clean(text)
    words: list[tuple[str, bool]] = []  # one per word: (canonical or "", is a number)
    tens_at = -1  # index in `words` of a tens word ("twenty") a units word may complete
    end = 0
    for m in _TOKEN.finditer(text):
        gap, end = text[end : m.start()], m.end()
        core = m.group("core").casefold()
        if core.isalpha() and core not in _VOCAB:  # most words: not a number, nothing to split
            words.append(_PLAIN)
            tens_at = -1
            continue
        if _DIGIT.search(core):
            words.append((m.group("pre").replace(" ", "") + _ascii_digits(core) + m.group("post").strip(), True))
            tens_at = -1
            continue
        if gap.strip():  # punctuation between the words: "twenty, one" is two numbers
            tens_at = -1
        for part in core.split("-"):
            unit = _UNITS.get(part)
            if unit is not None and 0 < unit < 10 and tens_at >= 0 and tens_at == len(words) - 1:
                words[-1] = (str(int(words[-1][0]) + unit), True)  # "twenty-one", "twenty one"
                tens_at = -1
                continue
            tens_at = -1
            if unit is not None:
                words.append((str(unit), True))
            elif part in _TENS:
                tens_at = len(words)
                words.append((str(_TENS[part]), True))
            elif part in _ORDINALS:
                words.append((_ordinal(_ORDINALS[part]), True))
            elif part in _WORDS:
                words.append((part, True))
            elif part in _MONTHS:
                words.append((f"month:{_MONTHS[part]}", False))
            else:
                words.append(("", False))
    out: list[str] = []
    for i, (token, is_number) in enumerate(words):
        if is_number or (token and any(n for _, n in words[max(0, i - _MONTH_REACH) : i + _MONTH_REACH + 1])):
            out.append(token)
    return tuple(out)
