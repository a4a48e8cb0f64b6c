"""Whether an OpenAI-compatible server sends the usage-only chunk of a Chat stream unasked.

latencykit asks every Chat stream for ``stream_options.include_usage`` (TPOT needs the
server's token count) and hides the usage-only chunk (``choices: []``) from a caller who did
not ask for it. Some servers send that chunk although nobody asked (the Hugging Face router,
vLLM with ``--enable-force-include-usage``); on the wire it looks exactly like the one
latencykit asked for, so hiding it there changes what the caller sees. The only way to know
is a call that does not ask: `UsageHabits` learns it per base URL, from a streamed call
whose caller did not ask, sent as the caller sent it (a *probe*: the first such call to a
remote server, or any call whose caller passed ``stream_options={"include_usage": False}``;
see `may_probe`), and then

* a server that sends it unasked gets the caller's request unchanged, and the chunk reaches
  the caller as from the raw SDK;
* a server that sends it only when asked (OpenAI and Azure OpenAI by their documentation,
  others once learned) gets ``include_usage`` and the chunk is hidden, as before.

The price: a probe on a server of the second kind has no usage, so its record has no output
tokens and no TPOT (once per base URL per `Recorder`). Where the answer is not known (a
server on the caller's own machine or network, which is not probed unasked; a probe still
in flight; a request latencykit must ask, such as vLLM's continuous usage) the chunk is
hidden and the record says so in ``extra["usage_chunk"]`` (`HIDDEN`, `UNVERIFIED`,
`NOT_ASKED`, `UNASKED`).
"""

from __future__ import annotations

import functools
import ipaddress
import threading
import time
import weakref
from typing import Any, Mapping, Optional

__all__ = ["UsageHabits", "UsageProbe", "habits_for", "may_probe", "own_network", "HIDDEN", "UNVERIFIED", "NOT_ASKED", "UNASKED"]

# The values of ``CallRecord.extra["usage_chunk"]`` (set only on streamed Chat calls whose caller
# did not ask for the usage chunk).
HIDDEN = "hidden"
"""latencykit asked for it and hid it; the server is known to send it only when asked."""
UNVERIFIED = "hidden, unverified"
"""latencykit asked for it and hid it; whether the server sends it unasked is not known."""
NOT_ASKED = "not asked"
"""Sent as the caller sent it, without ``include_usage`` (a probe, or a server known to send it
unasked), and no usage-only chunk arrived: the record may lack usage."""
UNASKED = "unasked"
"""The server sent it although nobody asked; it reached the caller as from the raw SDK."""

PROBE_EXPIRY = 60.0
"""Seconds after which a probe that never reached the end of its stream (abandoned, failed)
no longer stops the next call from probing."""

_ON_REQUEST_HOSTS = ("api.openai.com",)
_ON_REQUEST_SUFFIXES = (".openai.azure.com",)


class UsageHabits:
    """Per base URL: whether the server sends the usage-only chunk unasked (thread-safe)."""

    __slots__ = ("_sends", "_probing", "_lock")

    def __init__(self) -> None:
        self._sends: dict[str, bool] = {}
        self._probing: dict[str, float] = {}
        self._lock = threading.Lock()

    def sends_unasked(self, url: str, host: str) -> Optional[bool]:
        """``True`` / ``False`` once known (learned, or documented for the host); ``None`` if not."""
        sends = self._sends.get(url)
        if sends is None and (host in _ON_REQUEST_HOSTS or host.endswith(_ON_REQUEST_SUFFIXES)):
            return False
        return sends

    def start_probe(self, url: str) -> bool:
        """Whether this call may probe ``url`` (no other probe of it is in flight)."""
        now = time.monotonic()
        with self._lock:
            started = self._probing.get(url)
            if started is not None and now - started < PROBE_EXPIRY:
                return False
            self._probing[url] = now
            return True

    def learn(self, url: str, sends: bool) -> None:
        """A call that did not ask saw the end of its stream: with or without a usage-only chunk."""
        with self._lock:
            self._sends[url] = sends
            self._probing.pop(url, None)


@functools.lru_cache(maxsize=256)
def own_network(host: str) -> bool:
    """Whether ``host`` is on this machine or a private network: ``localhost``, a loopback,
    private or link-local address, or a name without a dot (a container or service name)."""
    if host == "localhost" or host.endswith(".localhost") or "." not in host:
        return True
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_link_local


def may_probe(host: str, stream_options: Mapping[str, Any]) -> bool:
    """Whether a streamed call whose caller did not ask for usage may go without ``include_usage``.

    Only with no other stream options (vLLM's continuous usage needs ``include_usage``), and
    either the caller said ``include_usage: False`` (their own probe, anywhere) or the server
    is remote: a server on the caller's own machine or network (their vLLM, llama.cpp, the
    emulator) runs with flags they chose, and a benchmark of it should not lose a record's
    usage to a probe.
    """
    if not stream_options.keys() <= {"include_usage"}:
        return False
    return "include_usage" in stream_options or not own_network(host)


class UsageProbe:
    """One call sent without ``include_usage``: tells `UsageHabits` what the server did."""

    __slots__ = ("habits", "url")

    def __init__(self, habits: UsageHabits, url: str) -> None:
        self.habits = habits
        self.url = url

    def saw(self, usage_chunk: bool) -> None:
        """The stream ended (``usage_chunk=False``) or its usage-only chunk arrived (``True``)."""
        self.habits.learn(self.url, usage_chunk)


_by_recorder: "weakref.WeakKeyDictionary[Any, UsageHabits]" = weakref.WeakKeyDictionary()
_registry_lock = threading.Lock()


def habits_for(recorder: Any) -> UsageHabits:
    """The habits learned by the clients recording into ``recorder`` (shared by ``copy()`` /
    ``with_options()`` and every client given the same Recorder; gone with it)."""
    habits = _by_recorder.get(recorder)
    if habits is None:
        with _registry_lock:
            habits = _by_recorder.setdefault(recorder, UsageHabits())
    return habits
