"""Where requests go and how: targets, the request body per API, and the per-request result.

Targets: ``emulator`` (in-process by default, or ``--base-url`` of a running one),
``anthropic`` and ``openai`` (keys from ``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY``), and
``openai-compatible`` / ``vllm`` / ``llamacpp`` / ``sglang`` / ``tgi`` / ``triton`` (Triton's
OpenAI-compatible frontend) / ``trtllm`` (trtllm-serve) with ``--base-url`` (any server speaking
the OpenAI chat API; ``OPENAI_API_KEY`` if set; per-chunk usage asked of vLLM, SGLang and
trtllm-serve, which honour ``continuous_usage_stats``). The model defaults to the server's first
``/v1/models`` entry there.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from .._net_words import http_url_problem, redacted_url
from ._traffic import TrafficRequest

__all__ = ["TARGETS", "Observed", "TargetSpec", "anthropic_body", "is_emulator", "openai_body", "resolve_target"]

TARGETS = ("emulator", "anthropic", "openai", "openai-compatible", "vllm", "llamacpp", "sglang", "tgi", "triton", "trtllm")
Api = Literal["openai", "anthropic"]

_DEFAULT_MODELS = {"openai": "gpt-5-mini", "anthropic": "claude-sonnet-5"}


@dataclass(frozen=True)
class TargetSpec:
    """A resolved target: which API, where, which model, and what the server supports."""

    kind: str
    api: Api
    base_url: Optional[str]
    """SDK base URL (OpenAI ones end in ``/v1``); ``None`` = the SDK's default (a provider)."""
    model: Optional[str]
    api_key: str = field(repr=False, default="")
    per_chunk_usage: bool = False
    """Ask for ``stream_options.continuous_usage_stats`` (emulator, vLLM), so ITL per token is exact."""
    exact_output: bool = False
    """Make the server generate exactly ``max_tokens`` (emulator header; vLLM ``min_tokens`` + ``ignore_eos``)."""
    emulator_behind: bool = False
    """A ``vllm`` / ``openai-compatible`` / ``llamacpp`` URL that turned out to be latencykit's emulator (`is_emulator`)."""

    @property
    def emulated(self) -> bool:
        """Whether the numbers come from the emulator (and must be labelled so), whatever the target was called."""
        return self.kind == "emulator" or self.emulator_behind

    def describe(self) -> dict[str, Any]:
        """JSON-friendly description, without the API key or a password in the URL."""
        return {"kind": self.kind, "api": self.api, "base_url": redacted_url(self.base_url), "model": self.model,
                "per_chunk_usage": self.per_chunk_usage, "exact_output": self.exact_output, "emulated": self.emulated}  # fmt: skip


def is_emulator(base_url: str, timeout: float = 2.0) -> bool:
    """Whether ``base_url`` (``/v1`` or not) is served by latencykit's emulator: it answers ``/_emulator/lateness``."""
    import urllib.request

    root = base_url.rstrip("/")
    root = root[:-3] if root.endswith("/v1") else root
    try:
        with urllib.request.urlopen(f"{root}/_emulator/lateness", timeout=timeout) as resp:
            return resp.status == 200 and "lateness" in json.loads(resp.read())
    except Exception:
        return False


def _v1(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


def resolve_target(
    kind: str,
    *,
    base_url: Optional[str] = None,
    model: Optional[str] = None,
    api: Optional[str] = None,
    per_chunk_usage: Optional[bool] = None,
    exact_output: Optional[bool] = None,
    env: Optional[dict[str, str]] = None,
) -> TargetSpec:
    """Validate a target and fill its defaults (an emulator's ``base_url`` may come later)."""
    env = dict(os.environ) if env is None else env
    if kind not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}; got {kind!r}")
    if api not in (None, "openai", "anthropic"):
        raise ValueError(f"api must be 'openai' or 'anthropic', got {api!r}")
    if base_url is not None:
        problem = http_url_problem(base_url)
        if problem is not None:
            raise ValueError(f"--base-url {base_url!r}: {problem} (e.g. http://127.0.0.1:8000)")
    if kind == "emulator":
        chosen: Api = "anthropic" if api == "anthropic" else "openai"
        url = None if base_url is None else (base_url.rstrip("/") if chosen == "anthropic" else _v1(base_url))
        return TargetSpec(kind, chosen, url, model or _DEFAULT_MODELS[chosen], "bench",
                          True if per_chunk_usage is None else per_chunk_usage, True if exact_output is None else exact_output)  # fmt: skip
    if kind == "anthropic":
        key = env.get("ANTHROPIC_API_KEY")
        if not key:
            raise ValueError("target anthropic needs ANTHROPIC_API_KEY in the environment")
        if not model:
            raise ValueError("target anthropic needs --model: a model your key may use (a real API bills every request, so "
                             "there is no default), e.g. claude-sonnet-4-5 or claude-haiku-4-5; anthropic.Anthropic().models.list() lists them")
        return TargetSpec(kind, "anthropic", base_url, model, key, False, bool(exact_output))
    if kind == "openai":
        key = env.get("OPENAI_API_KEY")
        if not key:
            raise ValueError("target openai needs OPENAI_API_KEY in the environment")
        if not model:
            raise ValueError("target openai needs --model: a model your key may use (a real API bills every request, so "
                             "there is no default), e.g. gpt-5-mini or gpt-4.1-mini; openai.OpenAI().models.list() lists them")
        return TargetSpec(kind, "openai", _v1(base_url) if base_url else None, model, key, bool(per_chunk_usage), False)
    if not base_url:
        raise ValueError(f"target {kind} needs --base-url (e.g. http://127.0.0.1:8000)")
    chunk_usage = (kind in ("vllm", "sglang", "trtllm")) if per_chunk_usage is None else per_chunk_usage
    return TargetSpec(kind, "openai", _v1(base_url), model, env.get("OPENAI_API_KEY") or "EMPTY", chunk_usage, bool(exact_output))


# -- request bodies -------------------------------------------------------------------------


def openai_body(req: TrafficRequest, target: TargetSpec) -> dict[str, Any]:
    """Chat Completions keyword arguments for one request."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": req.system}] if req.system else []
    for m in req.messages:
        if "tool_call" in m:
            c = m["tool_call"]
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}]})  # fmt: skip
        elif m.get("role") == "tool":
            messages.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
        else:
            messages.append({"role": m["role"], "content": m["content"]})
    cap = "max_completion_tokens" if target.kind == "openai" else "max_tokens"
    body: dict[str, Any] = {"model": target.model, "messages": messages, cap: req.output_tokens}
    if req.tools:
        body["tools"] = [{"type": "function", "function": dict(t)} for t in req.tools]
    if target.exact_output and target.kind != "emulator":
        body["extra_body"] = {"min_tokens": req.output_tokens, "ignore_eos": True}
    if req.extra.get("reasoning_tokens"):  # reasoning counts against the cap: room for it and the answer
        body["reasoning_effort"] = "medium"
        body[cap] = req.output_tokens + int(req.extra["reasoning_tokens"])
    return body


def anthropic_body(req: TrafficRequest, target: TargetSpec) -> dict[str, Any]:
    """Messages API keyword arguments for one request."""
    messages: list[dict[str, Any]] = []
    for m in req.messages:
        if "tool_call" in m:
            c = m["tool_call"]
            block = {"type": "tool_use", "id": c["id"], "name": c["name"], "input": json.loads(c["arguments"])}
            messages.append({"role": "assistant", "content": [block]})
        elif m.get("role") == "tool":
            messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}]})
        else:
            messages.append({"role": m["role"], "content": m["content"]})
    body: dict[str, Any] = {"model": target.model, "max_tokens": req.output_tokens, "messages": messages}
    if req.system:
        body["system"] = req.system
    if req.tools:
        body["tools"] = [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in req.tools]
    thinking = req.extra.get("reasoning_tokens")
    if thinking:  # the API's minimum budget is 1024; max_tokens covers the thinking and the answer
        budget = max(int(thinking), 1024)
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        body["max_tokens"] = req.output_tokens + budget
    return body


def emulator_headers(req: TrafficRequest, target: TargetSpec) -> dict[str, str]:
    """Headers that make the emulator generate exactly the asked output length (and reasoning)."""
    headers: dict[str, str] = {}
    if target.kind == "emulator" and target.exact_output:
        headers["x-emulator-output-tokens"] = str(req.output_tokens)
    thinking = req.extra.get("reasoning_tokens")
    if target.kind == "emulator" and thinking:  # OpenAI-style hidden reasoning; Claude 4 summarizes
        headers["x-emulator-reasoning-tokens"] = str(thinking)
        if target.api == "openai":
            headers["x-emulator-reasoning"] = "hidden"
    return headers


@dataclass
class Observed:
    """What one request looked like from the client: service times (from the actual send), tokens, cache, outcome."""

    ttft: Optional[float] = None
    ttfo: Optional[float] = None
    """First token of the answer (not reasoning); equals ``ttft`` without reasoning."""
    ttfb: Optional[float] = None
    tpot: Optional[float] = None
    e2e: Optional[float] = None
    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None
    reasoning_tokens: Optional[int] = None
    cache_read: Optional[int] = None
    cache_write: Optional[int] = None
    cache_verdict: Optional[str] = None
    cache_miss_reason: Optional[str] = None
    outcome: str = "completed"
    error: Optional[str] = None
    error_message: Optional[str] = None
    """One line: the exception's type and message (with its causes), API keys and prompt text removed;
    set on the first error of each kind a sender meets, so a failing run says why at no cost per request."""
    attempts: int = 1
    text: Optional[str] = None
    """The answer's text, kept only for a session's turn (the next turn's history holds it verbatim)."""
    chunk_gaps: list[float] = field(default_factory=list)
    token_gaps: list[float] = field(default_factory=list)
    """Per-token ITL samples: each chunk gap divided by its token count k (from per-chunk usage), k times."""
