"""The per-call opt-in: a latencykit header in ``extra_headers``, removed before sending.

``extra_headers`` is a parameter of every SDK method, so marking a call needs no new
keyword and type-checks unchanged::

    client.messages.create(..., extra_headers=lk.semantic_cacheable("tenant-42"))
    client.chat.completions.create(..., extra_headers={**lk.semantic_cacheable(user.id), "X-Other": "1"})

The semantic cache reads and removes the header in its transport, so it never reaches the
provider. (On a client without ``semantic=`` nothing removes it: it is an unknown header,
which the APIs ignore.)
"""

from __future__ import annotations

from typing import Optional
from urllib.parse import quote, unquote

__all__ = ["HEADER", "semantic_cacheable", "semantic_skip", "parse_mark"]

HEADER = "x-latencykit-semantic"


def semantic_cacheable(scope: str) -> dict[str, str]:
    """``extra_headers`` marking a call as answerable from the semantic cache within ``scope``.

    ``scope`` (a tenant, a user, a conversation family) partitions the cache: an answer
    stored under one scope is never returned under another.
    """
    if not isinstance(scope, str) or not scope:
        raise ValueError(f"scope must be a non-empty str, got {scope!r}")
    return {HEADER: "cacheable; scope=" + quote(scope, safe="", errors="surrogatepass")}  # any str: percent-escaped UTF-8


def semantic_skip() -> dict[str, str]:
    """``extra_headers`` keeping a call out of the semantic cache (e.g. under ``temperature_zero=True``)."""
    return {HEADER: "off"}


def parse_mark(value: Optional[str]) -> tuple[str, Optional[str]]:
    """``("cacheable", scope)``, ``("off", None)``, or ``("none", None)`` for no or a malformed mark."""
    if value is None:
        return "none", None
    value = value.strip()
    if value == "off":
        return "off", None
    head, _, rest = value.partition(";")
    key, _, scope = rest.strip().partition("=")
    if head.strip() == "cacheable" and key.strip() == "scope" and scope:
        try:
            return "cacheable", unquote(scope, errors="surrogatepass")  # the scope as given, a lone surrogate too
        except UnicodeDecodeError:  # a hand-written header's bytes that are not UTF-8
            return "cacheable", unquote(scope)
    return "none", None
