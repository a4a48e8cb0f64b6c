"""Keyed fingerprints of prompt text: BLAKE2b digests with a secret, chunk prints, and the memo.

Digests are keyed (the secret defaults to ``$LATENCYKIT_CACHE_SECRET``, else a random key per
process), so a fingerprint never reveals text and differs between deployments unless they
share the secret. The `Fingerprinter` also holds the bounded memos that make planning cheap:
block digests by content key, prefix links, per-family prefix chains and recent tool and
message runs (hashes and digests only, never text).
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    import numpy as np

__all__ = ["CHUNK_CHARS", "MAX_CHUNKS", "MEMO_SIZE", "RUNS", "Fingerprinter"]

CHUNK_CHARS = 16
MAX_CHUNKS = 8192  # locate changes in the first 128k characters of a block
MEMO_SIZE = 4096
"""Distinct block contents (and prefix links) remembered per generation of the memo."""
RUNS = 16
"""Recent message runs (and tool runs) kept per `Fingerprinter` (one per distinct lead: tools and system)."""


class Memo:
    """A bounded map in two generations: the current one fills up, then becomes the old one.

    Lock-free: every operation is a single dict operation (atomic under the GIL); a race
    costs at most a recomputation.
    """

    __slots__ = ("size", "new", "old")

    def __init__(self, size: int) -> None:
        self.size = size
        self.new: dict[Any, Any] = {}
        self.old: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        value = self.new.get(key)
        if value is None:
            value = self.old.get(key)
            if value is not None:
                self.put(key, value)
        return value

    def put(self, key: Any, value: Any) -> None:
        if len(self.new) >= self.size:
            self.old, self.new = self.new, {}
        self.new[key] = value


class Fingerprinter:
    """Keyed BLAKE2b digests; the secret defaults to ``$LATENCYKIT_CACHE_SECRET`` or a per-process random key."""

    def __init__(self, secret: Optional[bytes] = None) -> None:
        if secret is None:
            env = os.environ.get("LATENCYKIT_CACHE_SECRET")
            secret = env.encode() if env else os.urandom(32)
        if not isinstance(secret, (bytes, bytearray)) or not secret:
            raise ValueError(f"secret must be non-empty bytes, got {secret!r}")
        self._key = hashlib.blake2b(bytes(secret), digest_size=32).digest()
        self._blocks = Memo(MEMO_SIZE)
        self._links = Memo(MEMO_SIZE)
        self._chains = Memo(256)
        """Per (family, api, model, salt, context): the last request's block digests and prefix chain."""
        self._runs = Memo(RUNS)
        """Per lead (blocks, characters and fixed tokens before the messages): a recent message run (`_message_runs.Run`)."""
        self._tool_runs = Memo(RUNS)
        """Per `tools_key` of a tools list: a recent `_tool_runs.ToolRun`."""
        self._mix: Any = None

    def digest(self, *parts: bytes, size: int = 16) -> bytes:
        """Keyed digest of ``parts`` (length-prefixed, so boundaries are unambiguous)."""
        h = hashlib.blake2b(key=self._key, digest_size=size)
        for part in parts:
            h.update(len(part).to_bytes(8, "little"))
            h.update(part)
        return h.digest()

    def link(self, state: bytes, digest: bytes) -> bytes:
        """``digest(state, digest)``, remembered: the cumulative fingerprint of a prefix one block longer."""
        key = state + digest
        out: Optional[bytes] = self._links.get(key)
        if out is None:
            out = self.digest(state, digest)
            self._links.put(key, out)
        return out

    def chunks(self, text: str) -> np.ndarray[Any, Any]:
        """32-bit keyed prints of consecutive `CHUNK_CHARS`-character pieces of ``text`` (first `MAX_CHUNKS`).

        A keyed multilinear hash over each piece's UTF-32 code units followed by a
        multiply-xorshift finalizer, vectorized with numpy (one pass at memory speed). The
        prints are compared only with earlier prints of this process, to locate a change;
        they never leave it.
        """
        import numpy as np

        if self._mix is None:
            seed = hashlib.blake2b(b"chunk-prints", key=self._key, digest_size=64).digest()
            self._mix = np.frombuffer(seed, dtype="<u8") | np.uint64(1)
        data = text[: CHUNK_CHARS * MAX_CHUNKS].encode("utf-32-le")
        pad = -len(data) % (4 * CHUNK_CHARS)
        if pad:
            data += b"\0" * pad
        words = np.frombuffer(data, dtype="<u8").reshape(-1, 2 * CHUNK_CHARS // 4)
        h = words @ self._mix
        h ^= h >> np.uint64(29)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(32)
        out: np.ndarray[Any, Any] = h.astype(np.uint32)
        return out
