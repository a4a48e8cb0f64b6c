"""latencykit clients for self-hosted OpenAI-compatible servers: vLLM, llama.cpp's llama-server,
and (`Server` with ``engine=``) SGLang, TGI, Triton's OpenAI-compatible frontend and trtllm-serve.

They *are* `latencykit.OpenAI` / `latencykit.AsyncOpenAI` clients (so ``openai.OpenAI``
ones): every call streams and is recorded in ``client.latency``. On top:

* ``base_url`` is the server (``http://127.0.0.1:8000``; ``.../v1`` is accepted too), the
  API key defaults to ``"EMPTY"``, and a chat call without ``model=`` uses the server's
  model, read once from ``GET /v1/models`` (the first one listed; ``model=`` picks another).
* vLLM: chat streams ask for ``stream_options.continuous_usage_stats`` (``continuous_usage=
  False`` turns it off), so every chunk carries the running token count — TPOT and
  inter-token latency per token, and tokens per engine step (speculative decoding) per
  call, in ``CallRecord.extra`` (see `StepTap`). The chunks the caller iterates then carry
  ``usage`` too, as vLLM sends them.
* llama.cpp: the final chunk's ``timings`` go to ``CallRecord.extra`` (see `LlamaTap`);
  ``slots()`` reads ``/slots``.
* ``metrics()`` scrapes ``/metrics``; ``doctor()`` diagnoses the server with this client's
  own records.
* `Server` / `AsyncServer` (``engine="sglang" | "tgi" | "triton" | "trtllm" | "vllm" | "llamacpp"``):
  the same client with the engine's preset (`_presets`): its default URL, where its metrics
  are (Triton's own port, trtllm-serve's ``/prometheus/metrics``; ``metrics_url=`` overrides),
  and whether it honours ``continuous_usage_stats``.
"""

from __future__ import annotations

import json
import os
from functools import cached_property
from typing import Any, Callable, Optional, cast

from openai.resources.chat import AsyncChat, AsyncCompletions, Chat, Completions

from .._net_words import open_url
from ..core._timing import CallTimer
from ..providers._calls import given, raw_response_requested
from ..providers._tap import Tap
from ..providers.anthropic import Anthropic, AsyncAnthropic
from ..providers._openai_call import OpenAIApi, acreate_call, create_call
from ..providers._openai_chat import AsyncObservedCompletions, ChatAccumulator, ObservedCompletions, chat_request, on_completion
from ..providers.openai import AsyncOpenAI, OpenAI
from ._doctor import Doctor, fetch_metrics, server_root
from ._findings import Diagnosis, Thresholds
from ._metrics import Scrape
from ._presets import preset
from ._taps import LlamaTap, StepTap

__all__ = ["AsyncLlamaCpp", "AsyncServer", "AsyncVLLM", "LlamaCpp", "Server", "VLLM", "anthropic_client", "async_anthropic_client"]


def _chat_api(tap: Callable[[CallTimer, bool], Tap]) -> OpenAIApi:
    return OpenAIApi("chat.completions", chat_request, tap, ChatAccumulator, on_completion, lambda c: c.chat.completions)


_VLLM_CHAT = _chat_api(StepTap)
_LLAMA_CHAT = _chat_api(LlamaTap)


def _v1(url: Any) -> str:
    return server_root(str(url)) + "/v1"


def _first_model(page: Any) -> str:
    data = getattr(page, "data", None) or []
    if not data:
        raise ValueError("the server's GET /v1/models listed no model; pass model= explicitly")
    return str(data[0].id)


def _with_defaults(kwargs: dict[str, Any], model: Optional[str], continuous: bool) -> dict[str, Any]:
    """The caller's chat kwargs plus the detected model and (vLLM) continuous usage stats."""
    out = dict(kwargs)
    if model is not None and not given(out.get("model")):
        out["model"] = model
    if continuous:
        opts = out.get("stream_options")
        opts = dict(opts) if isinstance(opts, dict) else {}
        opts.setdefault("continuous_usage_stats", True)
        out["stream_options"] = opts
    return out


class _SelfHosted:
    """What both server clients add: the server URL, the model, /metrics and the doctor."""

    _lkv_api: OpenAIApi
    _lkv_continuous_default: bool
    _lkv_default_url: str
    _lkv_env: str
    """Environment prefix: ``<PREFIX>_BASE_URL`` and ``<PREFIX>_API_KEY``."""
    _lkv_model: Optional[str]
    _lkv_continuous: bool
    _lkv_metrics: Optional[str] = None
    """Where the metrics page is, when not ``/metrics`` on the API server (`Server` presets)."""
    _lkv_engine: str = "vllm"
    base_url: Any

    def __init__(
        self, base_url: Any = None, *, api_key: Optional[str] = None, model: Optional[str] = None,
        continuous_usage: Optional[bool] = None, **kwargs: Any,
    ) -> None:  # fmt: skip
        self._lkv_setup(model, continuous_usage)
        key = api_key or os.environ.get(self._lkv_env + "_API_KEY") or "EMPTY"
        url = _v1(base_url or os.environ.get(self._lkv_env + "_BASE_URL") or self._lkv_default_url)
        cast(Any, super()).__init__(base_url=url, api_key=key, **kwargs)  # latencykit.OpenAI's

    def _lkv_setup(self, model: Optional[str], continuous: Optional[bool]) -> None:
        if model is not None and not (isinstance(model, str) and model):
            raise ValueError(f"model must be a non-empty str or None (detect), got {model!r}")
        if continuous is not None and not isinstance(continuous, bool):
            raise ValueError(f"continuous_usage must be True, False or None, got {continuous!r}")
        self._lkv_model = model
        self._lkv_continuous = self._lkv_continuous_default if continuous is None else continuous

    def copy(self, *args: Any, **kwargs: Any) -> Any:
        """The SDK's ``copy()`` / ``with_options()``, keeping the model and usage-stats choice."""
        new = getattr(super(), "copy")(*args, **kwargs)
        new._lkv_model, new._lkv_continuous = self._lkv_model, self._lkv_continuous
        new._lkv_metrics, new._lkv_engine, new._lkv_api = self._lkv_metrics, self._lkv_engine, self._lkv_api
        return new

    with_options = copy

    @property
    def server_url(self) -> str:
        """``http://host:port`` of the server (no ``/v1``)."""
        return server_root(str(self.base_url))

    @property
    def metrics_url(self) -> str:
        """The server's metrics page (``/metrics`` on the API server unless the engine keeps it elsewhere)."""
        return self._lkv_metrics or self.server_url + "/metrics"

    def metrics(self, timeout: float = 5.0) -> Scrape:
        """Scrape the server's metrics page once."""
        return fetch_metrics(self.metrics_url, timeout)

    def doctor(self, *, duration: float = 5.0, interval: float = 1.0, thresholds: Optional[Thresholds] = None) -> Diagnosis:
        """`latencykit.engines.doctor` on this server, with this client's records."""
        from ._doctor import doctor

        recorder = getattr(self, "latency")
        return doctor(self.metrics_url, duration=duration, interval=interval, records=recorder, model=self._lkv_model, thresholds=thresholds)

    def doctor_for(self, window: float = 60.0) -> Doctor:
        """A `Doctor` on this server fed with this client's records (sample it yourself)."""
        return Doctor(self.metrics_url, records=getattr(self, "latency"), model=self._lkv_model, window=window)

    def slots(self, timeout: float = 5.0) -> Any:
        """llama-server's ``GET /slots`` (per-slot state) as parsed JSON."""
        with open_url(self.server_url + "/slots", timeout) as resp:
            return json.loads(resp.read())


class _SyncSelfHosted(_SelfHosted):
    models: Any

    @cached_property
    def chat(self) -> Chat:
        """Observed Chat Completions with the server's model default and tap."""
        return _ServerChat(cast(Any, self))

    @property
    def model(self) -> str:
        """The model calls use by default (detected from ``GET /v1/models`` on first use)."""
        if self._lkv_model is None:
            self._lkv_model = _first_model(self.models.list())
        return self._lkv_model


class _AsyncSelfHosted(_SelfHosted):
    models: Any

    @cached_property
    def chat(self) -> AsyncChat:
        """Observed async Chat Completions with the server's model default and tap."""
        return _AsyncServerChat(cast(Any, self))

    async def detect_model(self) -> str:
        """The model calls use by default (detected from ``GET /v1/models`` on first use)."""
        if self._lkv_model is None:
            self._lkv_model = _first_model(await self.models.list())
        return self._lkv_model


class _ServerCompletions(ObservedCompletions):
    def create(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return super().create(**kwargs)
        client: Any = self._client
        model = None if given(kwargs.get("model")) else client.model
        kwargs = _with_defaults(kwargs, model, client._lkv_continuous)
        return create_call(client._lkv_api, self, Completions.create, kwargs)


class _AsyncServerCompletions(AsyncObservedCompletions):
    async def create(self, **kwargs: Any) -> Any:
        if raw_response_requested(kwargs):
            return await super().create(**kwargs)
        client: Any = self._client
        model = None if given(kwargs.get("model")) else await client.detect_model()
        kwargs = _with_defaults(kwargs, model, client._lkv_continuous)
        return await acreate_call(client._lkv_api, self, AsyncCompletions.create, kwargs)


class _ServerChat(Chat):
    @cached_property
    def completions(self) -> Completions:
        """Chat Completions with the server's defaults and tap."""
        return _ServerCompletions(self._client)


class _AsyncServerChat(AsyncChat):
    @cached_property
    def completions(self) -> AsyncCompletions:
        """Async Chat Completions with the server's defaults and tap."""
        return _AsyncServerCompletions(self._client)


class VLLM(_SyncSelfHosted, OpenAI):
    """A `latencykit.OpenAI` client for a vLLM server (default ``$VLLM_BASE_URL`` or ``http://127.0.0.1:8000``).

    ``VLLM(base_url=None, *, api_key=None, model=None, continuous_usage=None, **openai_kwargs)``:
    ``model=None`` detects it from ``/v1/models``; ``continuous_usage`` defaults to on.
    """

    _lkv_api = _VLLM_CHAT
    _lkv_continuous_default = True
    _lkv_default_url = "http://127.0.0.1:8000"
    _lkv_env = "VLLM"


class AsyncVLLM(_AsyncSelfHosted, AsyncOpenAI):
    """Async `VLLM`: a `latencykit.AsyncOpenAI` client for a vLLM server."""

    _lkv_api = _VLLM_CHAT
    _lkv_continuous_default = True
    _lkv_default_url = "http://127.0.0.1:8000"
    _lkv_env = "VLLM"


class LlamaCpp(_SyncSelfHosted, OpenAI):
    """A `latencykit.OpenAI` client for llama.cpp's llama-server (default ``$LLAMACPP_BASE_URL`` or ``http://127.0.0.1:8080``).

    Same arguments as `VLLM`; continuous usage stats default to off (llama-server sends usage
    in the final chunk only).
    """

    _lkv_api = _LLAMA_CHAT
    _lkv_continuous_default = False
    _lkv_default_url = "http://127.0.0.1:8080"
    _lkv_env = "LLAMACPP"


class AsyncLlamaCpp(_AsyncSelfHosted, AsyncOpenAI):
    """Async `LlamaCpp`."""

    _lkv_api = _LLAMA_CHAT
    _lkv_continuous_default = False
    _lkv_default_url = "http://127.0.0.1:8080"
    _lkv_env = "LLAMACPP"


class _Preset:
    """What `Server` and `AsyncServer` add: the engine's preset, chosen per instance."""

    def _lkv_preset(self, engine: str, base_url: Any, metrics_url: Optional[str]) -> None:
        chosen = preset(engine)
        if metrics_url is not None and not (isinstance(metrics_url, str) and metrics_url.startswith(("http://", "https://"))):
            raise ValueError(f"metrics_url must be an http(s) URL or None, got {metrics_url!r}")
        self._lkv_engine = chosen.engine
        self._lkv_api = _LLAMA_CHAT if chosen.engine == "llamacpp" else _VLLM_CHAT
        self._lkv_continuous_default = chosen.continuous_usage
        self._lkv_default_url = chosen.default_url
        self._lkv_env = chosen.env
        root = server_root(str(base_url or os.environ.get(chosen.env + "_BASE_URL") or chosen.default_url))
        self._lkv_metrics = metrics_url or (None if chosen.metrics == "/metrics" else chosen.metrics_url(root))

    @property
    def engine(self) -> str:
        """The engine this client was made for (``"sglang"``, ``"tgi"``, ...)."""
        return self._lkv_engine


class Server(_Preset, _SyncSelfHosted, OpenAI):
    """A `latencykit.OpenAI` client for a self-hosted engine, set up by its preset (`_presets`).

    ``Server(base_url=None, *, engine="vllm", metrics_url=None, api_key=None, model=None,
    continuous_usage=None, **openai_kwargs)``: ``engine`` is ``"sglang"``, ``"tgi"``, ``"triton"``
    (Triton's OpenAI-compatible frontend), ``"trtllm"`` (trtllm-serve), ``"vllm"`` or
    ``"llamacpp"``; ``base_url`` defaults to ``$<ENGINE>_BASE_URL`` or the engine's usual port;
    ``metrics_url`` overrides where the doctor scrapes; ``continuous_usage`` defaults to what the
    engine honours. The model comes from ``GET /v1/models`` when not given.
    """

    def __init__(self, base_url: Any = None, *, engine: str = "vllm", metrics_url: Optional[str] = None, **kwargs: Any) -> None:
        self._lkv_preset(engine, base_url, metrics_url)
        super().__init__(base_url, **kwargs)


class AsyncServer(_Preset, _AsyncSelfHosted, AsyncOpenAI):
    """Async `Server`."""

    def __init__(self, base_url: Any = None, *, engine: str = "vllm", metrics_url: Optional[str] = None, **kwargs: Any) -> None:
        self._lkv_preset(engine, base_url, metrics_url)
        super().__init__(base_url, **kwargs)


def anthropic_client(base_url: Optional[str] = None, *, api_key: Optional[str] = None, **kwargs: Any) -> Anthropic:
    """A `latencykit.Anthropic` client for vLLM's Anthropic-compatible ``/v1/messages``."""
    url = server_root(base_url or os.environ.get("VLLM_BASE_URL") or "http://127.0.0.1:8000")
    return Anthropic(base_url=url, api_key=api_key or os.environ.get("VLLM_API_KEY") or "EMPTY", **kwargs)


def async_anthropic_client(base_url: Optional[str] = None, *, api_key: Optional[str] = None, **kwargs: Any) -> AsyncAnthropic:
    """Async `anthropic_client`."""
    url = server_root(base_url or os.environ.get("VLLM_BASE_URL") or "http://127.0.0.1:8000")
    return AsyncAnthropic(base_url=url, api_key=api_key or os.environ.get("VLLM_API_KEY") or "EMPTY", **kwargs)


