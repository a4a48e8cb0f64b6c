"""`CallRecord`: what latencykit knows about one finished call."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, Optional

Outcome = Literal["completed", "abandoned", "interrupted", "error"]
"""How a call ended.

- ``completed``: the terminal event arrived (``message_stop``, ``[DONE]``, ``response.completed``).
- ``abandoned``: the caller stopped first (``break`` + ``close()``, left a ``with`` block, the
  stream was garbage-collected, or the task was cancelled).
- ``interrupted``: the server or the connection failed after content had arrived, or the
  stream ended without its terminal event.
- ``error``: the call failed before any content arrived (HTTP error, connection error,
  ``error`` event before the first token).
"""

OUTCOMES: tuple[Outcome, ...] = ("completed", "abandoned", "interrupted", "error")


@dataclass(slots=True, repr=False)
class CallRecord:
    """Timings, token counts and outcome of one LLM call. Times are seconds; ``None`` = unknown.

    See ``docs/timing.md`` for exactly when each clock starts and stops.
    """

    provider: str
    """``"anthropic"`` or ``"openai"`` (the GenAI ``gen_ai.provider.name``)."""
    operation: str
    """``"chat"`` for Messages / Chat Completions / Responses."""
    request_model: Optional[str]
    response_model: Optional[str] = None
    response_id: Optional[str] = None
    api: str = ""
    """Which endpoint: ``"messages"``, ``"chat.completions"`` or ``"responses"``."""
    method: str = ""
    """How the caller asked: ``"create"``, ``"create(stream=True)"``, ``"stream"``, ``"parse"``."""
    started_at: float = 0.0
    """Wall-clock start (``time.time()``), for ordering records; not used for durations."""

    ttfb: Optional[float] = None
    """Call start → first event of any kind (diagnostic)."""
    ttft: Optional[float] = None
    """Call start → first event carrying a generated token (text, thinking, tool arguments)."""
    tpot: Optional[float] = None
    """Time per output token over the tokens that were streamed; ``None`` below 2 tokens.
    Without reasoning: (last token − first token) / (output_tokens − 1). With reasoning the
    billed count is not always what was streamed: `tpot_basis` says which rule applied."""
    ttfo: Optional[float] = None
    """Call start → first token of the *answer* (text, refusal or tool arguments; not reasoning,
    thinking or a summary of it). Equals `ttft` on a call without streamed reasoning."""
    reasoning_time: Optional[float] = None
    """Seconds the model spent reasoning before the answer: first reasoning token → first
    output token where reasoning was streamed; estimated where it was hidden
    (`reasoning_time_basis`)."""
    reasoning_time_basis: Optional[str] = None
    """``"streamed"`` (measured between streamed events) or ``"hidden_estimate"`` (reasoning
    tokens × the answer's TPOT, capped at TTFO: the reasoning itself was never streamed)."""
    tpot_basis: Optional[str] = None
    """Which TPOT rule applied (docs/timing.md, "Reasoning models"): ``"output"`` (no reasoning:
    every billed token was streamed), ``"streamed_reasoning"`` (reasoning streamed token by token:
    every billed token was streamed), ``"answer"`` (reasoning hidden or summarized, its count
    reported: answer window / (output − reasoning − 1)), ``"answer_estimate"`` (summarized thinking
    with no count: the answer's tokens estimated from its streamed text), or ``"unknown"``
    (TPOT left ``None``: the answer had fewer than 2 tokens)."""
    e2e: Optional[float] = None
    """Call start → terminal event, error or abandonment."""
    decode_time: Optional[float] = None
    """First token → last token."""

    chunks: int = 0
    """Token-bearing events received."""
    chunk_gap_mean: Optional[float] = None
    chunk_gap_p50: Optional[float] = None
    chunk_gap_p95: Optional[float] = None
    chunk_gap_max: Optional[float] = None

    input_tokens: Optional[int] = None
    """All input tokens, cached ones included."""
    uncached_input_tokens: Optional[int] = None
    """Anthropic's own ``input_tokens``: the part that was neither read from nor written to cache."""
    output_tokens: Optional[int] = None
    """Output tokens as reported by the server's usage."""
    reasoning_tokens: Optional[int] = None
    cache_read_tokens: Optional[int] = None
    cache_write_tokens: Optional[int] = None
    cache_expected_tokens: Optional[int] = None
    cache_verdict: Optional[str] = None
    cache_miss_reason: Optional[str] = None
    server_cache_miss_reason: Optional[str] = None
    """Anthropic's cache-diagnostics verdict (beta), beside latencykit's own: ``system_changed``,
    ``tools_changed``, ``messages_changed``, ``model_changed``, ``previous_message_not_found``,
    ``unavailable``, or ``pending`` (diagnosis not finished when the response was sent)."""

    attempts: int = 1
    """HTTP attempts latencykit made (retries + 1)."""
    retry_reasons: tuple[str, ...] = ()
    """Why each retry happened (``rate_limited``, ``overloaded``, ``error_event``, ``dropped``, ...)."""
    ttft_deadline_hits: int = 0
    """Attempts cancelled because no first token came within the TTFT deadline."""
    finish_reasons: tuple[str, ...] = ()
    streamed: bool = True
    """The request went over the wire as a stream."""
    not_streamed_reason: Optional[str] = None
    semantic_hit: Optional[bool] = None
    """Semantic response cache: ``True`` answered from it, ``False`` looked up and missed,
    ``None`` not looked up (no cache, or the call was not eligible)."""
    outcome: Outcome = "completed"
    error_type: Optional[str] = None
    """Class name of the exception for ``error`` / ``interrupted`` calls."""
    server_address: Optional[str] = None
    server_port: Optional[int] = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def cache_hit_ratio(self) -> Optional[float]:
        """Cached input tokens / all input tokens, or ``None`` when either is unknown."""
        if self.cache_read_tokens is None or not self.input_tokens:
            return None
        return self.cache_read_tokens / self.input_tokens

    def to_dict(self) -> dict[str, Any]:
        """A plain JSON-friendly dict of every field (tuples as lists); never prompt or completion text."""
        d = asdict(self)
        d["finish_reasons"] = list(self.finish_reasons)
        d["retry_reasons"] = list(self.retry_reasons)
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CallRecord:
        """The record `to_dict` described (e.g. a line of ``Recorder.to_jsonl``); ValueError naming a bad field."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(k for k in data if k not in names)
        if unknown:
            raise ValueError(f"unknown CallRecord fields {unknown!r}")
        kwargs = dict(data)
        for key in ("finish_reasons", "retry_reasons"):
            if isinstance(kwargs.get(key), list):
                kwargs[key] = tuple(kwargs[key])
        if kwargs.get("outcome", "completed") not in OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}, got {kwargs['outcome']!r}")
        if isinstance(kwargs.get("extra"), Mapping):
            kwargs["extra"] = dict(kwargs["extra"])
        try:
            return cls(**kwargs)
        except TypeError as exc:  # a required field is missing
            raise ValueError(f"invalid CallRecord dict: {exc}") from None

    def __repr__(self) -> str:
        """A short line: who, how it ended, TTFT / TPOT / E2E, tokens, cache (``to_dict()`` has every field)."""
        model = self.response_model or self.request_model
        parts = [f"{self.provider}/{model}", self.api or self.operation, self.outcome]
        parts += [f"{k}={_ms(v)}" for k, v in (("ttft", self.ttft), ("tpot", self.tpot), ("e2e", self.e2e)) if v is not None]
        if self.ttfo is not None and self.ttfo != self.ttft:
            parts.insert(4, f"ttfo={_ms(self.ttfo)}")
        if self.input_tokens is not None or self.output_tokens is not None:
            parts.append(f"in={_n(self.input_tokens)} out={_n(self.output_tokens)}")
        if self.cache_read_tokens is not None:
            parts.append(f"cache_read={self.cache_read_tokens}")
        if self.cache_verdict:
            parts.append(f"cache={self.cache_verdict}")
        if self.error_type:
            parts.append(f"error={self.error_type}")
        if not self.streamed:
            parts.append("not streamed")
        return f"<CallRecord {' '.join(parts)}>"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}ms" if seconds < 10 else f"{seconds:.2f}s"


def _n(tokens: Optional[int]) -> str:
    return "?" if tokens is None else str(tokens)
