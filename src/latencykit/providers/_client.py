"""The client mixin shared by both providers, and `wrap()` for existing SDK clients.

A latencykit client *is* an SDK client: ``lk.Anthropic`` subclasses ``anthropic.Anthropic``
and only replaces the resources it observes (``messages``; ``chat`` and ``responses``).
Everything else — ``beta``, ``models``, ``with_raw_response``, middleware, retries — is the
SDK's own. ``copy()`` / ``with_options()`` keep the same Recorder.
"""

from __future__ import annotations

import copy as _copy
import functools
from typing import Any, Optional

from ..telemetry._recorder import Recorder
from ._calls import Settings

__all__ = ["LatencyClientMixin", "clone_as"]


def _check_recorder(recorder: Any) -> Recorder:
    if recorder is None:
        return Recorder()
    if not isinstance(recorder, Recorder):
        raise ValueError(f"recorder must be a latencykit.Recorder, got {recorder!r}")
    return recorder


class LatencyClientMixin:
    """Adds ``latency`` (the client's `Recorder`) and keeps it across ``copy()``."""

    _lk: Settings
    _lk_provider: str = "anthropic"

    def __init__(self, *args: Any, recorder: Optional[Recorder] = None, **kwargs: Any) -> None:
        settings = Settings(recorder=_check_recorder(recorder), provider=self._lk_provider)
        super().__init__(*args, **kwargs)
        self._lk = settings

    @property
    def latency(self) -> Recorder:
        """This client's `Recorder`: ``.last``, ``.calls``, ``.summary()``, ``.cache_report()``."""
        return self._lk.recorder

    def copy(self, *args: Any, **kwargs: Any) -> Any:
        """The SDK's ``copy()``, sharing this client's Recorder and options."""
        new = super().copy(*args, **kwargs)  # type: ignore[misc]
        new._lk = self._lk
        return new

    def with_options(self, *args: Any, **kwargs: Any) -> Any:
        """The SDK's ``with_options()``, sharing this client's Recorder and options."""
        return self.copy(*args, **kwargs)


_wrapped_classes: dict[tuple[type, type], type] = {}


def clone_as(
    client: Any, mixin: type, recorder: Optional[Recorder], provider: str, cls: Optional[type] = None
) -> Any:
    """A shallow clone of ``client`` whose class is ``(mixin, type(client))``.

    The clone shares the original's HTTP client, credentials and options; the original
    object is left untouched. Resources the SDK cached on the original are dropped so the
    clone builds its own (observed) ones.
    """
    base = type(client)
    key = (mixin, base)
    if cls is None:
        cls = _wrapped_classes.get(key)
    if cls is None:
        cls = type(base.__name__, (mixin, base), {"__module__": mixin.__module__, "_lk_provider": provider})
        _wrapped_classes[key] = cls
    new = _copy.copy(client)
    for klass in base.__mro__:
        for name, attr in vars(klass).items():
            if isinstance(attr, functools.cached_property):
                new.__dict__.pop(name, None)
    new.__class__ = cls
    new._lk = Settings(recorder=_check_recorder(recorder), provider=provider)
    return new
