"""Exact guards and encryption of the semantic cache: folding, numbers, near-misses of every length, AES-GCM.

The near-miss sets (``tests/_near_misses.py``) are made here, deterministically: questions of
10 to 200 words differing only in a number, a negation or a swapped pair, and repeats
differing only in case, punctuation and spacing.
"""

from __future__ import annotations

import io
import json
import logging
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from latencykit.semantic import HashedEmbedder, MemoryStore, SemanticCache
from latencykit.semantic._crypto import ANSWER_MAGIC, FILE_MAGIC, SealError, Sealer
from latencykit.semantic._guards import fold, numbers

from _near_misses import KINDS, LENGTHS, decide, pairs

SECRET = b"guards-test-secret-0123456789abc"


# -- folding -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "a, b",
    [
        ("What is the return policy?", "what is the return policy"),
        ("What is the return policy?", "  WHAT   is the return policy ? "),
        ("Where’s my parcel?!", "where's my parcel"),
        ('Can I use "express" shipping (abroad)?', "can i use express shipping abroad"),
        ("ret\u200burn policy", "return policy"),  # a zero-width space is invisible
        ("Ｃａｎ I pay?", "can i pay"),  # full-width letters (NFKC)
        ("Is it 5.", "is it 5"),
        ("e.g. this…", "e.g this"),
        ("- bullet — point", "bullet point"),
        ("Don't cancel my e-mail plan, e.g. today", "dont cancel my email plan eg today"),
        ("hello,world", "hello, world"),
        ("wait…what?", "wait what"),
    ],
)
def test_fold_equal(a: str, b: str) -> None:
    """Case, sentence punctuation and spacing fold away."""
    assert fold(a) == fold(b)


@pytest.mark.parametrize(
    "a, b",
    [
        ("shoes in size 43", "shoes in size 44"),
        ("version 3.5", "version 35"),
        ("1,200 units", "1.200 units"),
        ("temperature -5", "temperature 5"),
        ("is x != 5", "is x = 5"),
        ("what does rm -rf do", "what does rm rf do"),
        ("C# jobs", "C jobs"),
        ("C++ jobs", "C jobs"),
        ("50% off", "50 off"),
        ("$5 fee", "€5 fee"),
        ("turn on renewal", "turn off renewal"),
        ("Celsius to Fahrenheit", "Fahrenheit to Celsius"),
        ("version 3.5-beta", "version 35beta"),
        ("12:30", "1230"),
        ("12/03", "12 03"),
        ("A-1234", "A-1243"),
    ],
)
def test_fold_keeps_what_changes_meaning(a: str, b: str) -> None:
    """Letters, digits, symbols, signs and word order stay exact."""
    assert fold(a) != fold(b)


# -- numbers -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, expected",
    [
        ("Do you have size 43?", ("43",)),
        ("Refund $1,200.50 for order A-1234 on 12/03", ("$1,200.50", "a-1234", "12/03")),
        ("Deliver on 2026-12-03 at 12:30", ("2026-12-03", "12:30")),
        ("It is -5 outside, 5-3 is 2", ("-5", "5-3", "2")),
        ("50% off, then 5 % more", ("50%", "5%")),
        ("€ 5 or 5€ or 5 then $5", ("€5", "5€", "5", "$5")),
        ("costs $5.", ("$5",)),
        ("two tickets for the third of March", ("2", "3rd", "month:3")),
        ("twenty-one, twenty one, twenty, one", ("21", "21", "20", "1")),
        ("one hundred and twelve", ("1", "hundred", "12")),
        ("a dozen eggs and half a loaf", ("dozen", "half")),
        ("May I ask about May 3rd", ("month:5", "3rd")),
        ("٣ apples and ３ pears", ("3", "3")),  # Arabic-Indic and full-width digits
        ("ORDER a-1234 and Order A-1234", ("a-1234", "a-1234")),  # ids are case-folded
        ("model H200 and v2.1.3", ("h200", "v2.1.3")),
        ("no numbers here at all", ()),
        ("", ()),
    ],
)
def test_numbers(text: str, expected: tuple[str, ...]) -> None:
    """Digits, amounts, dates, ids and number words, in order, canonical."""
    assert numbers(text) == expected


def test_numbers_order_matters() -> None:
    """Swapped numbers are different numbers ("from 3 to 5" is not "from 5 to 3")."""
    assert numbers("from 3 to 5") != numbers("from 5 to 3")
    assert numbers("two tickets") == numbers("2 tickets")


# -- the cache's decision on near-misses of every length ---------------------------------------
def test_default_cache_answers_repeats_and_no_near_miss_at_any_length() -> None:
    """Default cache: every repeat (case, punctuation, spacing) answered; no number, negation or swap near-miss, 10-200 words."""
    ps = pairs()
    assert {p.length for p in ps} == set(LENGTHS) and {p.kind for p in ps} == {*KINDS, "repeat"}
    got = decide(SemanticCache(), [(p.a, p.b) for p in ps])
    wrong = [(p.kind, p.length, p.a, p.b) for p, hit in zip(ps, got) if hit != p.match]
    assert wrong == []


def test_number_guard_holds_for_a_lexical_embedder() -> None:
    """With similarity alone (lexical, 0.97) long number near-misses are answered; the number guard stops every one."""
    ps = [p for p in pairs() if p.kind == "number"]
    questions = [(p.a, p.b) for p in ps]
    unguarded = decide(SemanticCache(HashedEmbedder(exact=False), match_numbers=False), questions)
    assert sum(unguarded) >= len(ps) // 2  # the sets are hard: the old default answered these
    assert max(p.length for p, hit in zip(ps, unguarded) if hit) >= 100
    assert not any(decide(SemanticCache(HashedEmbedder(exact=False)), questions))


def test_negation_and_swap_need_the_exact_fold() -> None:
    """A lexical embedder at 0.97 answers long negation and swap near-misses (the number guard cannot see them); exact=True none."""
    ps = [p for p in pairs() if p.kind in ("negation", "swap")]
    questions = [(p.a, p.b) for p in ps]
    lexical = Counter(p.kind for p, hit in zip(ps, decide(SemanticCache(HashedEmbedder(exact=False)), questions)) if hit)
    assert lexical["negation"] > 0 and lexical["swap"] > 0
    assert not any(decide(SemanticCache(), questions))


def test_match_numbers_switch() -> None:
    """match_numbers=False lets a number near-miss through a similarity-only embedder; the spec records the guards."""
    pair = [("Is order 1234 shipped?", "Is order 1234 shipped")]
    near = [("Do you have size 43 in the trail running shoes for the winter season?", "Do you have size 44 in the trail running shoes for the winter season?")]
    off = SemanticCache(HashedEmbedder(exact=False), match_numbers=False, threshold=0.8)
    on = SemanticCache(HashedEmbedder(exact=False), threshold=0.8)
    assert decide(off, pair) == [True] and decide(on, pair) == [True]
    assert decide(off, near) == [True] and decide(on, near) == [False]
    assert off.match == "" and on.match == "numbers/1" and SemanticCache().match == "numbers/1;fold/1"
    with pytest.raises(ValueError, match="match_numbers"):
        SemanticCache(match_numbers="yes")  # type: ignore[arg-type]


# -- encryption --------------------------------------------------------------------------------
def test_encrypt_default_follows_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """encrypt=None: on with a configured secret (argument or environment), off with a per-process key."""
    monkeypatch.delenv("LATENCYKIT_CACHE_SECRET", raising=False)
    assert SemanticCache().encrypt is False
    assert SemanticCache(secret=SECRET).encrypt is True
    assert SemanticCache(secret=SECRET, encrypt=False).encrypt is False
    assert SemanticCache(encrypt=True).encrypt is True
    monkeypatch.setenv("LATENCYKIT_CACHE_SECRET", "from-the-environment")
    assert SemanticCache().encrypt is True and SemanticCache().match.endswith("aes-256-gcm/1")
    with pytest.raises(ValueError, match="encrypt"):
        SemanticCache(encrypt="yes")  # type: ignore[arg-type]


def test_encrypt_without_cryptography(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Without the package: encrypt=True raises naming the pip command; the default stays off and says so once."""
    import latencykit.semantic._cache as cache_module

    for name in [m for m in sys.modules if m == "cryptography" or m.startswith("cryptography.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "cryptography", None)  # import cryptography -> ImportError
    monkeypatch.setattr(cache_module, "_warned_readable", False)
    with pytest.raises(ImportError, match=r'pip install "latencykit\[encrypt\]"'):
        SemanticCache(encrypt=True)
    with caplog.at_level(logging.WARNING, logger="latencykit"):
        assert SemanticCache(secret=SECRET).encrypt is False
        assert SemanticCache(secret=SECRET).encrypt is False
    assert [r.getMessage() for r in caplog.records].count(caplog.records[0].getMessage()) == 1
    assert "latencykit[encrypt]" in caplog.records[0].getMessage()


def test_sealer_round_trip_and_tampering() -> None:
    """AES-GCM: a fresh nonce per message; another key, other associated data or a flipped bit do not open."""
    sealer = Sealer(b"k" * 32, b"answer")
    one, two = sealer.seal(b"hello", b"ad"), sealer.seal(b"hello", b"ad")
    assert one != two and one.startswith(ANSWER_MAGIC) and len(one) == 4 + 12 + 5 + 16
    assert sealer.open(one, b"ad") == b"hello"
    for bad, ad in ((one, b"other"), (one[:-1] + bytes([one[-1] ^ 1]), b"ad"), (b"plain", b"ad")):
        with pytest.raises(SealError):
            sealer.open(bad, ad)
    with pytest.raises(SealError):
        Sealer(b"j" * 32, b"answer").open(one, b"ad")
    with pytest.raises(SealError):
        Sealer(b"k" * 32, b"file", FILE_MAGIC).open(one, b"ad")


def test_encrypted_entries_are_opaque_and_bound_to_their_partition(caplog: pytest.LogCaptureFixture) -> None:
    """Stored payloads are sealed; the scope is a digest; a payload moved to another partition is a miss."""
    cache = SemanticCache(secret=SECRET)
    store = cache.store
    assert isinstance(store, MemoryStore)
    assert decide(cache, [("Is order 1234 shipped?", "is order 1234 shipped")]) == [True]
    from _near_misses import _ANSWER, _body

    from latencykit.semantic import semantic_cacheable
    from latencykit.semantic._options import HEADER

    a = cache.plan("/v1/messages", _body("Where is my parcel?"), semantic_cacheable("tenant-a")[HEADER])
    b = cache.plan("/v1/messages", _body("Where is my parcel?"), semantic_cacheable("tenant-b")[HEADER])
    assert a is not None and b is not None
    a.vector = b.vector = cache.embed("Where is my parcel?")
    assert cache.store_answer(a, _ANSWER)
    assert set(store.scopes()) == {a.scope} and a.scope.startswith("#") and "tenant" not in a.scope
    raw = store.search((a.scope, a.query.fingerprint), a.vector, 0.99)
    assert raw is not None and raw.payload.startswith(ANSWER_MAGIC) and b"message_stop" not in raw.payload
    hit = cache.lookup(a)
    assert hit is not None and cache.answer_bytes(hit) == _ANSWER
    store.add((b.scope, b.query.fingerprint), b.vector, raw.payload, {"api": "messages"})  # moved to tenant-b's partition
    with caplog.at_level(logging.WARNING, logger="latencykit"):
        assert cache.lookup(b) is None
    assert "did not decrypt" in caplog.text
    cache.clear("tenant-a")
    assert cache.lookup(a) is None and len(store) == 1


def test_hashed_embedder_is_keyed_when_encrypting() -> None:
    """An encrypting cache keys the hashed embedder: its vectors differ from the public hash's, and between secrets."""
    text = ["Where is my parcel?"]
    plain = HashedEmbedder()(text)
    mine = SemanticCache(secret=SECRET).embedder(text)
    other = SemanticCache(secret=b"x" * 32).embedder(text)
    assert float(plain[0] @ mine[0]) < 0.5 and float(mine[0] @ other[0]) < 0.5
    assert np.array_equal(mine, SemanticCache(secret=SECRET).embedder(text))  # the same secret, the same vectors
    with pytest.raises(ValueError, match="key"):
        HashedEmbedder(key=b"short")


# -- save files --------------------------------------------------------------------------------
def _v1_file(path: Path, cache: SemanticCache) -> None:
    """A file in the format latencykit wrote before the guards (``latencykit.semantic/1``, no ``match``)."""
    store = cache.store
    assert isinstance(store, MemoryStore)
    with np.load(io.BytesIO(store.dumps(check=cache._fp.digest(b"semantic-cache-file"))), allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    meta = json.loads(bytes(arrays["meta"]))
    meta["format"] = "latencykit.semantic/1"
    del meta["match"]
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def test_version_1_files_still_load(tmp_path: Path) -> None:
    """A /1 file loads into a cache matching by similarity alone, and answers; a guarded cache refuses it, saying why."""
    old = SemanticCache(HashedEmbedder(exact=False), match_numbers=False, encrypt=False, secret=SECRET, threshold=0.8)
    assert decide(old, [("What is the return policy?", "What is the return policy?")]) == [True]  # decide() clears
    from _near_misses import _ANSWER, _body

    from latencykit.semantic import semantic_cacheable
    from latencykit.semantic._options import HEADER

    mark = semantic_cacheable("t")[HEADER]
    first = old.plan("/v1/messages", _body("What is the return policy?"), mark)
    assert first is not None
    first.vector = old.embed("What is the return policy?")
    old.store_answer(first, _ANSWER)
    _v1_file(tmp_path / "v1.npz", old)
    fresh = SemanticCache(HashedEmbedder(exact=False), match_numbers=False, encrypt=False, secret=SECRET, threshold=0.8)
    assert fresh.load(tmp_path / "v1.npz") == 1
    again = fresh.plan("/v1/messages", _body("what's the return policy"), mark)
    assert again is not None
    again.vector = fresh.embed("what's the return policy")
    assert fresh.lookup(again) is not None
    with pytest.raises(ValueError, match="could never match"):
        SemanticCache(secret=SECRET, encrypt=False).load(tmp_path / "v1.npz")


def test_encrypted_file_needs_the_same_settings(tmp_path: Path) -> None:
    """A sealed file is not a zip; it loads only with the same secret and guards; damaged, it is refused."""
    cache = SemanticCache(secret=SECRET)
    cache.save(tmp_path / "c.npz")
    data = (tmp_path / "c.npz").read_bytes()
    assert data.startswith(FILE_MAGIC) and b"PK" not in data[:8]
    assert SemanticCache(secret=SECRET).load(tmp_path / "c.npz") == 0
    with pytest.raises(ValueError, match="could never match"):
        SemanticCache(secret=SECRET, encrypt=False).load(tmp_path / "c.npz")
    (tmp_path / "bad.npz").write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(ValueError, match="does not decrypt"):
        SemanticCache(secret=SECRET).load(tmp_path / "bad.npz")
    (tmp_path / "junk.npz").write_bytes(b"junk")
    with pytest.raises(ValueError, match="not a latencykit semantic cache file"):
        SemanticCache(secret=SECRET).load(tmp_path / "junk.npz")
