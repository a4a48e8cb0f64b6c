"""Synthesized prompts fitted to a server's own tokenizer through its ``POST /tokenize`` (vLLM's, where it has one).

A trace gives token counts; the text made for them (`latencykit.bench._traces`) is exact under the estimate
(four characters per token). A server that serves ``/tokenize`` (vLLM: ``{"model", "messages"}`` → ``{"count",
...}``, the chat template included) can say what its tokenizer makes of it; `fit_prompts` then lengthens or cuts
each message at its end until the server counts exactly the trace's length (a few rounds, each scaled by the
characters per token the server showed; the rare prompt still off after `ROUNDS` is counted, never hidden). The
Mooncake blocks keep their estimated 2,048 characters — the end of a message is its own text, so the cut never
reaches a shared block unless the server's tokenizer is far denser than the estimate — and what a real tokenizer
makes of a block is about, not exactly, 512 tokens.
"""

from __future__ import annotations

import http.client
import json
import random
from dataclasses import replace
from typing import Any, Optional, Sequence
from urllib.parse import urlsplit

from ._traces import exact_text
from ._traffic import TrafficRequest

__all__ = ["ROUNDS", "Tokenizer", "fit_prompts"]

ROUNDS = 6


class Tokenizer:
    """``POST {root}/tokenize`` over one kept-alive connection; `count` is ``None`` when the server has no such route."""

    def __init__(self, base_url: str, model: Optional[str], timeout: float = 10.0) -> None:
        root = base_url.rstrip("/")
        root = root[:-3] if root.endswith("/v1") else root
        u = urlsplit(root)
        self.model, self.timeout = model, timeout
        self.path = (u.path or "") + "/tokenize"
        self._conn = (http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection)(
            u.hostname or "127.0.0.1", u.port, timeout=timeout)

    def count(self, messages: Sequence[dict[str, Any]]) -> Optional[int]:
        """The server's prompt tokens for these chat messages (template included), or ``None``."""
        body = json.dumps({"model": self.model, "messages": list(messages)}).encode()
        try:
            self._conn.request("POST", self.path, body, {"content-type": "application/json"})
            resp = self._conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException):
            self._conn.close()
            return None
        if resp.status != 200:
            return None
        try:
            n = json.loads(data).get("count")
        except (ValueError, AttributeError):
            return None
        return int(n) if isinstance(n, int) and not isinstance(n, bool) else None

    def close(self) -> None:
        self._conn.close()


def _fit(req: TrafficRequest, tok: Tokenizer, rng: random.Random) -> tuple[TrafficRequest, Optional[int]]:
    """One request fitted: the request, and how far off the server still counts it (0 = exact; None = no answer)."""
    text = str(req.messages[-1]["content"])
    want = req.prompt_tokens
    off: Optional[int] = None
    for _ in range(ROUNDS):
        n = tok.count([*req.messages[:-1], {"role": "user", "content": text}])
        if n is None:
            return req, None
        off = n - want
        if off == 0:
            break
        per = max(len(text), 1) / max(n, 1)  # characters per token, as this server counts this text
        if off < 0:
            text += " " + exact_text(rng, max(1, round(-off * per / 4)))
        else:
            text = text[: max(1, len(text) - max(1, round(off * per)))]
    messages = (*req.messages[:-1], {"role": "user", "content": text})
    return replace(req, messages=messages), off


def fit_prompts(requests: Sequence[TrafficRequest], base_url: str, model: Optional[str], seed: int = 0
                ) -> tuple[list[TrafficRequest], Optional[dict[str, Any]]]:  # fmt: skip
    """The requests with their last message fitted to the server's tokenizer, and what was done (``None``, requests
    unchanged, when the server has no ``/tokenize``): ``{"tokenizer": "server", "fitted", "exact", "off_max"}``."""
    tok = Tokenizer(base_url, model)
    try:
        first = tok.count(requests[0].messages) if requests else None
        if first is None:
            return list(requests), None
        out, exact, worst = [], 0, 0
        for r in requests:
            fitted, off = _fit(r, tok, random.Random(f"latencykit-bench:fit:{seed}:{r.index}"))
            out.append(fitted)
            exact += off == 0
            worst = max(worst, abs(off or 0))
        return out, {"tokenizer": "server /tokenize", "fitted": len(out), "exact": exact, "off_max": worst}
    finally:
        tok.close()
