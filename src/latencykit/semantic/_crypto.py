"""Encryption at rest of what the semantic cache stores: AES-256-GCM, keyed from the cache secret.

A stored answer is the provider's response stream, and providers echo request fields in
it (the Responses API returns ``instructions`` and ``tools``), so an answer kept in a
shared Redis or a saved file would hold the system prompt. `Sealer` encrypts each answer
before it reaches the store, and `SemanticCache.save` encrypts the whole file:

- key: HKDF-SHA256 (RFC 5869) over a keyed BLAKE2b digest of the cache secret, one key
  per purpose (``info``), 256 bits;
- a random 96-bit nonce per message (``os.urandom``; for a random nonce NIST SP 800-38D
  bounds one key to 2**32 messages);
- associated data: what the message belongs to (for an answer, its scope and request
  fingerprint), so a payload moved to another partition, or a file renamed into another
  role, fails authentication instead of being answered;
- layout: ``MAGIC (4 bytes) | nonce (12) | ciphertext | tag (16)``: 32 bytes more than
  the plaintext.

Needs the ``cryptography`` package (``pip install "latencykit[encrypt]"``), imported only
when a `Sealer` is made.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["Sealer", "SealError", "ANSWER_MAGIC", "FILE_MAGIC", "available", "is_sealed"]

ANSWER_MAGIC = b"\xa7LK1"
"""First bytes of an encrypted answer (a zlib stream starts with 0x78: never confused)."""
FILE_MAGIC = b"\xa7LKF"
"""First bytes of an encrypted save file (a plain one is a zip: ``PK``)."""
_NONCE = 12
_TAG = 16
INSTALL = 'pip install "latencykit[encrypt]"'


class SealError(ValueError):
    """A sealed message that does not open: another secret, another partition, or damaged bytes."""


def available() -> bool:
    """Whether the ``cryptography`` package can be imported."""
    try:
        import cryptography.hazmat.primitives.ciphers.aead  # noqa: F401
    except ImportError:
        return False
    return True


def is_sealed(data: bytes, magic: bytes = ANSWER_MAGIC) -> bool:
    """Whether ``data`` is a message sealed by a `Sealer` (by its first bytes)."""
    return data[: len(magic)] == magic and len(data) >= len(magic) + _NONCE + _TAG


class Sealer:
    """AES-256-GCM with a key derived by HKDF-SHA256 from ``material`` (secret-derived bytes) for ``purpose``."""

    def __init__(self, material: bytes, purpose: bytes, magic: bytes = ANSWER_MAGIC) -> None:
        try:
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
            from cryptography.hazmat.primitives.kdf.hkdf import HKDF
        except ImportError as exc:
            err = ImportError(f"encrypting the semantic cache needs the cryptography package: {INSTALL}")
            err.__cause__ = exc
            raise err from exc
        if len(material) < 16:
            raise ValueError(f"key material must be at least 16 bytes, got {len(material)}")
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"latencykit.semantic", info=b"latencykit.semantic/aes-256-gcm/" + purpose).derive(material)
        self._aead: Any = AESGCM(key)
        self.magic = magic

    def seal(self, plaintext: bytes, associated: bytes) -> bytes:
        """``MAGIC | nonce | AES-GCM(plaintext, associated data)``."""
        nonce = os.urandom(_NONCE)
        sealed: bytes = self._aead.encrypt(nonce, plaintext, associated)
        return self.magic + nonce + sealed

    def open(self, sealed: bytes, associated: bytes) -> bytes:
        """The plaintext of a `seal` output; `SealError` when it does not authenticate."""
        from cryptography.exceptions import InvalidTag

        if not is_sealed(sealed, self.magic):
            raise SealError("not a sealed message")
        head = len(self.magic)
        try:
            out: bytes = self._aead.decrypt(sealed[head : head + _NONCE], sealed[head + _NONCE :], associated)
        except InvalidTag:
            raise SealError("the message does not authenticate: another secret, another entry, or damaged bytes") from None
        return out

