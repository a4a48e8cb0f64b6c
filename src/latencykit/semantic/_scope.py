"""Scopes as the stores keep them: every ``str`` is a scope, and it behaves the same in every store.

A scope is the caller's string (a tenant id, a user id): it may hold a NUL, a newline, be very
long, or hold a lone surrogate that UTF-8 cannot encode (``"a\\udcff"``, as ``os.fsdecode`` makes
of undecodable bytes). Two forms, used by every store and by the cache:

- `scope_bytes`: UTF-8 with lone surrogates passed through (``surrogatepass``). Injective, and
  equal to ``scope.encode()`` for every scope UTF-8 can encode, so digests, Redis keys and the
  sealed answers' binding of scopes that worked before do not change.
- `stored_scope`: what a text column or a key holds. A *plain* scope — UTF-8-encodable, no NUL,
  at most `PLAIN_BYTES` bytes of UTF-8, not starting with `HASHED` — is kept as it is (readable
  in the table, and rows stored before stay found); any other scope becomes `HASHED` + the hex
  SHA-256 of its `scope_bytes` (71 characters). A plain scope that starts with `HASHED` is
  hashed as well, so two scopes never share a stored form (short of a SHA-256 collision).

`MemoryStore` keeps the scope itself (``scopes()`` lists the originals); `RedisStore` and
`PgVectorStore` keep `stored_scope`, from which the original cannot be read back.
"""

from __future__ import annotations

import hashlib
from typing import Optional

__all__ = ["HASHED", "PLAIN_BYTES", "scope_bytes", "stored_scope"]

PLAIN_BYTES = 256
"""The longest scope (UTF-8 bytes) kept as it is; longer ones are hashed (a B-tree row holds at most ~2.7 kB)."""
HASHED = "sha256:"
"""The prefix of a hashed scope's stored form."""


def scope_bytes(scope: str) -> bytes:
    """The scope's bytes for digests and keys: UTF-8, lone surrogates passed through."""
    return scope.encode("utf-8", "surrogatepass")


def stored_scope(scope: str) -> str:
    """The scope as a text column or key holds it: itself when plain, else `HASHED` + hex SHA-256."""
    raw: Optional[bytes]
    try:
        raw = scope.encode()
    except UnicodeEncodeError:
        raw = None
    if raw is not None and len(raw) <= PLAIN_BYTES and "\x00" not in scope and not scope.startswith(HASHED):
        return scope
    return HASHED + hashlib.sha256(scope_bytes(scope)).hexdigest()
