"""Quality drift against the baseline: fixed prompts at temperature 0, answers compared token by token.

The prompts are seeded (the traffic shape's first ``n`` requests under a seed of their own) or
the user's JSONL; each is sent alone (no batching to perturb the numbers), non-streaming,
with a fixed ``max_tokens`` at ``temperature=0``, through the plain SDK (this pass checks what
the server answers, not the client). The first prompt is sent again at the end: a server
that answers it differently is not deterministic, and the report says so.

Per strategy against the baseline, over the prompts:

- exact match: the share of answers identical to the baseline's;
- prefix agreement: the share of the baseline's output tokens matched position by position
  before the first divergence (1.0 for identical answers);
- edit agreement: 1 − token edit distance / the longer answer's length;
- the user's scorer (``"module:function"``, called with prompt, baseline answer, candidate
  answer; returns 0–1), its mean;
- task accuracy, where the prompts carry known answers (`latencykit.experiment._tasks`): the
  share answered right, the baseline's own included.

llama-server's per-answer ``timings`` (decode ms per token; with speculative decoding
``draft_n`` / ``draft_n_accepted``: tokens drafted and accepted at temperature 0) are kept with
the answers.

Tokens are the server's own (``logprobs``) when both sides return them, else the words and
punctuation marks of the text (one fixed rule, the same for every server).
"""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ..bench._targets import TargetSpec, anthropic_body, openai_body
from ..bench._traffic import TrafficRequest, generate, load_replay

__all__ = ["Answers", "QualityResult", "collect_answers", "compare_answers", "load_scorer", "quality_prompts", "text_tokens"]

_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)
QUALITY_SEED_OFFSET = 7919
"""The prompts' seed is the traffic seed plus this, so they are not the traffic's own requests."""


def text_tokens(text: str) -> list[str]:
    """Words and punctuation marks: the tokenizer-free rule used when the server gives no tokens."""
    return _WORD.findall(text)


def load_scorer(spec: str) -> Callable[[str, str, str], float]:
    """``"module:function"`` → the function; ``ValueError`` names what is missing."""
    mod, sep, fn = spec.partition(":")
    if not sep or not mod or not fn:
        raise ValueError(f"a scorer is 'module:function', got {spec!r}")
    try:
        module = importlib.import_module(mod)
    except ImportError as exc:
        raise ValueError(f"cannot import {mod!r} for scorer {spec!r}: {exc}") from None
    func = getattr(module, fn, None)
    if not callable(func):
        raise ValueError(f"{mod!r} has no function {fn!r} (scorer {spec!r})")
    return func  # type: ignore[no-any-return]


def quality_prompts(shape: str, n: int, *, seed: int, documents: int = 4, file: Optional[str] = None,
                    replay: Optional[str] = None) -> list[TrafficRequest]:  # fmt: skip
    """The fixed prompts: the user's JSONL (``messages``/``system``, or ``prompt`` text), the replay
    file's first ``n``, or ``n`` of the traffic shape under the quality seed."""
    if file is not None:
        out: list[TrafficRequest] = []
        for no, line in enumerate(Path(file).read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{file} line {no} is not JSON: {exc}") from None
            if not isinstance(row, dict) or not (isinstance(row.get("prompt"), str) or isinstance(row.get("messages"), list)):
                raise ValueError(f"{file} line {no}: give 'prompt' (text) or 'messages' (a list)")
            messages = row.get("messages") or [{"role": "user", "content": row["prompt"]}]
            out.append(TrafficRequest(len(out), "quality", 0, 1, str(row.get("system") or ""), tuple(messages)))
            if len(out) == n:
                break
        if not out:
            raise ValueError(f"{file} holds no prompts")
        return out
    if shape == "replay" and replay is not None:
        return load_replay(replay, seed=seed)[:n]
    return generate(shape, n, seed=seed + QUALITY_SEED_OFFSET, documents=documents)


def prompt_text(req: TrafficRequest) -> str:
    """The prompt as one text (system, then each message's content) for a scorer."""
    parts = [req.system] if req.system else []
    parts += [str(m.get("content")) for m in req.messages if m.get("content")]
    return "\n\n".join(parts)


@dataclass
class Answers:
    """One strategy's answers to the quality prompts."""

    texts: list[Optional[str]]
    """``None`` where the request failed."""
    tokens: list[Optional[list[str]]]
    """The server's tokens (``logprobs``), ``None`` where it gave none."""
    errors: list[str] = field(default_factory=list)
    deterministic: Optional[bool] = None
    """Whether the first prompt, sent again at the end, got the same answer."""
    settings: dict[str, Any] = field(default_factory=dict)
    timings: list[Optional[dict[str, Any]]] = field(default_factory=list)
    """Per answer, the server's own ``timings`` (llama-server: ``predicted_per_token_ms``, ``draft_n``, ...), else ``None``."""

    def drafts(self) -> Optional[dict[str, Any]]:
        """Tokens drafted and accepted over the answers (llama-server's ``draft_n`` / ``draft_n_accepted``), or ``None``."""
        got = [t for t in self.timings if t and t.get("draft_n") is not None]
        if not got:
            return None
        drafted = sum(int(t["draft_n"]) for t in got)
        accepted = sum(int(t.get("draft_n_accepted") or 0) for t in got)
        return {"drafted": drafted, "accepted": accepted, "rate": accepted / drafted if drafted else None, "answers": len(got)}

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        return {"texts": self.texts, "tokens": self.tokens, "errors": self.errors, "deterministic": self.deterministic,
                "settings": self.settings, "timings": self.timings, "drafts": self.drafts()}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Answers":
        """Inverse of `to_dict`."""
        return cls(list(d["texts"]), list(d["tokens"]), list(d.get("errors", [])), d.get("deterministic"), dict(d.get("settings", {})),
                   list(d.get("timings") or []))  # fmt: skip


_TIMINGS = ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "predicted_per_token_ms", "draft_n", "draft_n_accepted")


def _openai_answer(client: Any, body: dict[str, Any], logprobs: bool) -> tuple[str, Optional[list[str]], Optional[dict[str, Any]]]:
    kw = dict(body)
    if logprobs:
        kw["logprobs"] = True
    resp = client.chat.completions.create(**kw)
    choice = resp.choices[0]
    msg = choice.message
    text = msg.content or ""
    if not text and msg.tool_calls:
        text = json.dumps([[c.function.name, c.function.arguments] for c in msg.tool_calls])
    content = getattr(choice.logprobs, "content", None) if choice.logprobs is not None else None
    extra = resp.model_extra or {}
    timings = extra.get("timings") if isinstance(extra.get("timings"), dict) else None
    kept = {k: timings[k] for k in _TIMINGS if k in timings} if timings else None
    return text, ([c.token for c in content] if content else None), kept


def _anthropic_answer(client: Any, body: dict[str, Any]) -> tuple[str, Optional[list[str]], Optional[dict[str, Any]]]:
    resp = client.messages.create(**body)
    parts = []
    for block in resp.content:
        if block.type == "text":
            parts.append(block.text)
        elif block.type == "tool_use":
            parts.append(json.dumps([block.name, block.input]))
    return "".join(parts), None, None


def collect_answers(target: TargetSpec, prompts: Sequence[TrafficRequest], *, max_tokens: int, temperature: float = 0.0,
                    extra_body: Optional[dict[str, Any]] = None, timeout: float = 300.0) -> Answers:  # fmt: skip
    """Send each prompt alone and keep the answer; the first prompt again at the end (determinism)."""
    settings = {"temperature": temperature, "max_tokens": max_tokens, "stream": False, "sent": "one at a time",
                "extra_body": dict(extra_body or {})}  # fmt: skip
    texts: list[Optional[str]] = []
    tokens: list[Optional[list[str]]] = []
    timings: list[Optional[dict[str, Any]]] = []
    errors: list[str] = []
    plain = TargetSpec(target.kind, target.api, target.base_url, target.model, target.api_key)
    if target.api == "anthropic":
        import anthropic

        client: Any = anthropic.Anthropic(base_url=target.base_url, api_key=target.api_key, max_retries=1, timeout=timeout)
    else:
        import openai

        client = openai.OpenAI(base_url=target.base_url, api_key=target.api_key, max_retries=1, timeout=timeout)
    logprobs = target.api == "openai" and target.kind != "anthropic"

    def ask(req: TrafficRequest) -> tuple[Optional[str], Optional[list[str]], Optional[dict[str, Any]]]:
        nonlocal logprobs
        try:
            if target.api == "anthropic":
                body = anthropic_body(req, plain) | {"max_tokens": max_tokens, "temperature": temperature}
                if extra_body:
                    body["extra_body"] = dict(extra_body)
                return _anthropic_answer(client, body)
            body = openai_body(req, plain)
            body.pop("max_completion_tokens", None)
            body[("max_completion_tokens" if target.kind == "openai" else "max_tokens")] = max_tokens
            body["temperature"] = temperature
            if extra_body:
                body["extra_body"] = dict(extra_body)
            try:
                return _openai_answer(client, body, logprobs)
            except Exception:
                if not logprobs:
                    raise
                logprobs = False  # a server that refuses logprobs: text tokens for the rest
                return _openai_answer(client, body, False)
        except Exception as exc:
            errors.append(f"prompt {req.index}: {type(exc).__name__}: {str(exc)[:200]}")
            return None, None, None

    try:
        for req in prompts:
            text, toks, tim = ask(req)
            texts.append(text)
            tokens.append(toks)
            timings.append(tim)
        again = ask(prompts[0])[0] if prompts else None
    finally:
        client.close()
    deterministic = None if again is None or texts[0] is None else again == texts[0]
    return Answers(texts, tokens, errors, deterministic, settings, timings)


def _prefix(a: Sequence[str], b: Sequence[str]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def edit_distance(a: Sequence[str], b: Sequence[str]) -> int:
    """Levenshtein distance between two token lists."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


@dataclass
class QualityResult:
    """A strategy's answers against the baseline's."""

    n: int
    exact_match: Optional[float]
    prefix_agreement: Optional[float]
    edit_agreement: Optional[float]
    score: Optional[float] = None
    tokens: str = "text"
    """``server`` (logprobs tokens on both sides) or ``text`` (words and punctuation)."""
    diverged: list[dict[str, Any]] = field(default_factory=list)
    """The first few prompts that differ: index, token position of the first divergence, both tokens."""
    failed: int = 0
    accuracy: Optional[float] = None
    """The share of prompts with a known answer answered right (`latencykit.experiment._tasks`), ``None`` if none has one."""
    correct: Optional[float] = None
    graded: int = 0
    right: list[Optional[float]] = field(default_factory=list)
    """Per prompt: 1 right, 0 wrong (or the grader's score), ``None`` where nothing was graded."""

    def to_dict(self) -> dict[str, Any]:
        """Plain dict."""
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "QualityResult":
        """Inverse of `to_dict`."""
        return cls(**d)


def compare_answers(base: Answers, cand: Answers, prompts: Sequence[TrafficRequest] = (),
                    scorer: Optional[Callable[[str, str, str], float]] = None,
                    expected: Sequence[Optional[dict[str, Any]]] = (), grader: Optional[Callable[..., Any]] = None) -> QualityResult:  # fmt: skip
    """Exact match, prefix and edit agreement (and the scorer's mean) over the prompts both answered; task accuracy
    of ``cand`` where ``expected`` holds known answers (`latencykit.experiment._tasks.accuracy`)."""
    server = all(t is not None for t in base.tokens + cand.tokens) and bool(base.tokens)
    exact: list[float] = []
    prefix: list[float] = []
    edit: list[float] = []
    scores: list[float] = []
    diverged: list[dict[str, Any]] = []
    failed = 0
    for i, (bt, ct) in enumerate(zip(base.texts, cand.texts)):
        if bt is None or ct is None:
            failed += 1
            continue
        a = base.tokens[i] if server else text_tokens(bt)
        b = cand.tokens[i] if server else text_tokens(ct)
        assert a is not None and b is not None
        exact.append(float(bt == ct))
        k = _prefix(a, b)
        prefix.append(1.0 if not a and not b else k / len(a) if a else 0.0)
        longest = max(len(a), len(b))
        edit.append(1.0 - edit_distance(a, b) / longest if longest else 1.0)
        if bt != ct and len(diverged) < 5:
            diverged.append({"prompt": i, "at": k, "baseline": a[k] if k < len(a) else None, "candidate": b[k] if k < len(b) else None})
        if scorer is not None:
            try:
                value = float(scorer(prompt_text(prompts[i]) if i < len(prompts) else "", bt, ct))
            except Exception:
                continue
            scores.append(min(max(value, 0.0), 1.0))

    def mean(xs: list[float]) -> Optional[float]:
        return sum(xs) / len(xs) if xs else None

    result = QualityResult(len(exact), mean(exact), mean(prefix), mean(edit), mean(scores) if scorer else None,
                           "server" if server else "text", diverged, failed)  # fmt: skip
    if any(e is not None for e in expected):
        from ._tasks import accuracy

        acc = accuracy(cand.texts, expected, [prompt_text(p) for p in prompts], grader)
        result.accuracy, result.correct, result.graded, result.right = acc["accuracy"], acc["correct"], acc["graded"], acc["right"]
    return result
