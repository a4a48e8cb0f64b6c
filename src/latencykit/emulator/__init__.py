"""A local HTTP server speaking the Anthropic Messages, OpenAI Chat Completions and OpenAI
Responses APIs with a documented, seeded timing model (needs `pip install "latencykit[bench]"`).

Layer: above ``telemetry``, beside ``providers`` (neither imports the other). May import
``latencykit.core`` and ``latencykit.telemetry``; the clients reach it only over HTTP.

Routes: `POST /v1/messages`, `POST /v1/chat/completions`, `POST /v1/responses`,
`GET /health`.  Point `anthropic.Anthropic(base_url=emu.base_url)` or
`openai.OpenAI(base_url=emu.base_url + "/v1")` at it.
With `Emulator(vllm=VLLMConfig(...))` it is also a vLLM server: `GET /metrics` (vLLM V1
names), `GET /v1/models`, and a toy vLLM scheduler (KV capacity, preemption, speculative
decoding) that `VLLMConfig.pressure(kind)` puts into each state `latencykit.vllm.doctor` names.

Timing model (all `TimingModel` values are seconds, multiplied by `time_scale`):

* On arrival the status line, headers and the non-token preamble are sent at once
  (Anthropic `message_start`, the first `content_block_start` and a `ping`; OpenAI chat
  the role-only chunk; Responses `response.created`, `response.in_progress`,
  `response.output_item.added`, `response.content_part.added`).  So time-to-first-byte
  is about zero and TTFT must not be clocked on these events.
* The request then waits for a decode slot: at most `max_concurrency` requests are
  active; the rest wait in FIFO order, and that wait is part of TTFT.
* First token at `queue wait + (base_ttft + prefill_per_token * uncached prompt tokens)
  * time_scale * J`, where J = exp(N(0, jitter)) from an RNG seeded by `seed`; prompt
  tokens served from cache (see `CacheModel`) skip prefill.
* That first content chunk holds `tokens_per_chunk` tokens; each later chunk follows
  after one decode step per token in it.  A decode step is
  `decode_per_token * (1 + batch_slowdown * (active - 1)) * time_scale * J`, with
  `active` the requests holding slots at that moment (continuous batching).
* Deadlines are absolute (`loop.time()` targets), so long streams do not drift.
  `time_scale=0` means no sleeping at all.
* Non-streaming requests follow the same schedule and get their body at the end.
* Prompt caching follows both providers' rules (`PromptCache`, see docs/caching.md);
  ``Emulator.cache.advance(seconds)`` expires entries without sleeping.

Per-request headers (absolute wall-clock milliseconds; not scaled, no jitter, no batch
slowdown): `x-emulator-ttft-ms` (replaces base_ttft+prefill; queueing still adds),
`x-emulator-tpot-ms`, `x-emulator-output-tokens` (still capped by max tokens),
`x-emulator-tokens-per-chunk`, `x-emulator-status` (+ `x-emulator-retry-after`),
`x-emulator-error-after-chunks`, `x-emulator-drop-after-chunks`, `x-emulator-tool-call`,
`x-emulator-stall-ms` (extra wait before the first token). With `x-emulator-fault-times: N`
(and optionally `x-emulator-fault-id`), the faults apply to the first N such requests only,
so a retry can succeed.

Content is deterministic: the same seed and request (ignoring `stream` and
`stream_options`) give the same words, ids and usage, streamed or not.
"""

from __future__ import annotations

try:
    import aiohttp  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        'latencykit.emulator needs the "bench" extra: pip install "latencykit[bench]"'
    ) from exc

from ._cache import CacheModel, CacheResult
from ._overrides import RequestOverrides
from ._prompt_cache import PromptCache
from ._server import Emulator, serve
from ._state import EmulatorStats, RequestRecord
from ._text import count_tokens
from ._timing import TimingModel
from ._vllm import PRESSURES, VLLMConfig

__all__ = [
    "CacheModel",
    "CacheResult",
    "Emulator",
    "EmulatorStats",
    "PromptCache",
    "RequestOverrides",
    "RequestRecord",
    "TimingModel",
    "VLLMConfig",
    "PRESSURES",
    "count_tokens",
    "serve",
]
