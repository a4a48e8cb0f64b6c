"""latencykit client classes, built the same way for every SDK client class and variant.

A latencykit client *is* an SDK client: ``lk.Anthropic`` is a direct subclass of
``anthropic.Anthropic`` that replaces only the resources it streams itself (``messages`` and
``beta.messages``; ``chat``, ``beta.chat`` and ``responses``), overrides ``request()`` to record
every other model call (`_http`: ``with_raw_response``, ``with_streaming_response``,
``client.post()``, ...), and adds ``latency``. Everything else — ``models``, middleware,
retries — is the SDK's own. ``copy()`` / ``with_options()`` keep the same Recorder.

`wrap()` gives an existing client (``AnthropicBedrock``, ``AzureOpenAI``, ...) the same
treatment: a shallow clone re-classed to a direct subclass of its class. Direct
subclasses with no new slots keep the instance layout, which is what makes the re-classing
legal; that is also why the methods below take the SDK base from the class instead of
using ``super()``.
"""

from __future__ import annotations

import copy as _copy
import functools
import inspect
import weakref
from typing import TYPE_CHECKING, Any, Callable, Literal, Optional, Union

from ..telemetry._recorder import PREWARM_VIA, Recorder
from ..core._retry import RetryPolicy
from ..core._hooks import AnswerHook
from ..telemetry._otel import Telemetry, default_telemetry
from ._caching import resolve_cache
from ._calls import Settings
from ._http import Endpoints, async_request, sync_request
from ._prewarm import prewarm
from ._sse import check_ahead
from ._fast_models import Shapes, plan_models, process_response_data

__all__ = ["client_class", "clone_as", "is_latency_client", "make_settings", "LatencyClientOptions"]


if TYPE_CHECKING:
    from ._caching import CacheOption

    class LatencyClientOptions:
        """What type checkers see of a latencykit client beyond its SDK class (runtime: `client_class`)."""

        def __init__(
            self,
            *args: Any,
            recorder: Optional[Recorder] = None,
            telemetry: Union[Telemetry, Literal[False], None] = None,
            cache: CacheOption = "auto",
            retry: Union[RetryPolicy, bool, None] = None,
            semantic: Optional[AnswerHook] = None,
            **kwargs: Any,
        ) -> None: ...
        @property
        def latency(self) -> Recorder: ...
else:
    LatencyClientOptions = object


def _check_recorder(recorder: Any) -> Recorder:
    if recorder is None:
        return Recorder()
    if not isinstance(recorder, Recorder):
        raise ValueError(f"recorder must be a latencykit.Recorder, got {recorder!r}")
    return recorder


def _check_telemetry(telemetry: Any) -> Optional[Telemetry]:
    if telemetry is None:
        return default_telemetry()
    if telemetry is False:
        return None
    if not isinstance(telemetry, Telemetry):
        raise ValueError(f"telemetry must be a latencykit.Telemetry, False (off) or None (global providers), got {telemetry!r}")
    return telemetry


def _check_retry(retry: Any) -> Optional[RetryPolicy]:
    if retry is None or retry is True:
        return RetryPolicy()
    if retry is False:
        return None
    if not isinstance(retry, RetryPolicy):
        raise ValueError(f"retry must be a latencykit.RetryPolicy, True/None (default policy) or False (SDK retries only), got {retry!r}")
    return retry


def make_settings(
    provider: str, recorder: Any = None, telemetry: Any = None, cache: Any = "auto", retry: Any = None, semantic: Any = None
) -> Settings:
    """Validated per-client settings from the latencykit keyword options."""
    return Settings(
        recorder=_check_recorder(recorder), provider=provider, telemetry=_check_telemetry(telemetry),
        planner=resolve_cache(cache), retry=_check_retry(retry), semantic=_check_semantic(semantic),
    )  # fmt: skip


def _check_semantic(semantic: Any) -> Optional[AnswerHook]:
    """``semantic=``: ``None`` (off) or an answer hook (a `latencykit.SemanticCache`)."""
    if semantic is None:
        return None
    if not isinstance(semantic, AnswerHook):
        raise ValueError(f"semantic must be a latencykit.SemanticCache or None, got {semantic!r}")
    return semantic


def _init(
    self: Any,
    *args: Any,
    recorder: Optional[Recorder] = None,
    telemetry: Any = None,
    cache: Any = "auto",
    retry: Any = None,
    semantic: Any = None,
    **kwargs: Any,
) -> None:
    settings = make_settings(type(self)._lk_provider, recorder, telemetry, cache, retry, semantic)
    type(self)._lk_sdk_base.__init__(self, *args, **kwargs)
    self._lk = settings
    check_ahead(self)
    plan_models(self)


def _copy_client(self: Any, *args: Any, **kwargs: Any) -> Any:
    """The SDK's ``copy()`` / ``with_options()``, sharing this client's Recorder and options."""
    new = type(self)._lk_sdk_base.copy(self, *args, **kwargs)
    new._lk = self._lk
    return new


def _latency(self: Any) -> Recorder:
    """This client's `Recorder` (the one given as ``recorder=``, shared by ``copy()`` /
    ``with_options()``): ``.last``, ``.calls``, ``.summary()``, ``.cache_report()``, ``.prewarm()``."""
    recorder: Recorder = self._lk.recorder
    # `Recorder.prewarm` sends through the client that handed the Recorder out, in this thread or task.
    PREWARM_VIA.set((recorder, weakref.ref(self), prewarm))
    return recorder


_classes: dict[type, type] = {}


def client_class(
    base: type,
    resources: dict[str, Callable[[Any], Any]],
    provider: str,
    doc: str = "",
    endpoints: Optional[Endpoints] = None,
    shapes: Optional[Shapes] = None,
) -> type:
    """The latencykit subclass of SDK client class ``base`` (cached per base).

    ``resources`` replace the SDK's (the paths latencykit streams itself); ``endpoints`` are
    the model endpoints whose other calls ``request()`` records; ``shapes`` the stream events
    its ``_process_response_data`` builds directly once checked (`_fast_models`).
    """
    cls = _classes.get(base)
    if cls is not None:
        return cls
    namespace: dict[str, Any] = {
        "__module__": "latencykit",
        "__qualname__": base.__qualname__,
        "__doc__": doc or f"``{base.__module__}.{base.__qualname__}`` that always streams and times every call.",
        "__init__": _init,
        "copy": _copy_client,
        "with_options": _copy_client,
        "latency": property(_latency),
        "request": async_request if inspect.iscoroutinefunction(base.request) else sync_request,  # type: ignore[attr-defined]
        "_lk_sdk_base": base,
        "_lk_provider": provider,
        "_lk_endpoints": dict(endpoints or {}),
        "_lk_shapes": dict(shapes or {}),
        "_lk_plans": {},
    }
    if shapes:  # (else the SDK's own, with no look-up per event)
        namespace["_process_response_data"] = process_response_data
    for attr, factory in resources.items():
        namespace[attr] = functools.cached_property(factory)
    cls = type(base.__name__, (base,), namespace)
    _classes[base] = cls
    return cls


def is_latency_client(client: object) -> bool:
    """Whether ``client`` is already a latencykit client."""
    return hasattr(type(client), "_lk_sdk_base")


def clone_as(client: Any, cls: type, settings: Settings) -> Any:
    """A shallow clone of ``client`` re-classed to ``cls`` (a direct subclass of its class).

    The clone shares the original's HTTP client, credentials and options; the original
    object is left untouched. Resources the SDK cached on the original are dropped so the
    clone builds its own observed ones.
    """
    new = _copy.copy(client)
    for klass in type(client).__mro__:
        for name, attr in vars(klass).items():
            if isinstance(attr, functools.cached_property):
                new.__dict__.pop(name, None)
    new.__class__ = cls
    new._lk = settings
    return new
