"""`Doctor`: scrape a server's ``/metrics`` over time and say what limits it.

```python
import latencykit.engines as lke

print(lke.doctor("http://127.0.0.1:8000", duration=10))          # one window, blocking
doc = lke.Doctor("http://127.0.0.1:8000", records=client.latency)  # or sample it yourself:
doc.scrape(); ...; doc.scrape(); print(doc.diagnose())
```

Scrapes use the standard library's HTTP client (nothing to install beyond the parser of
the ``vllm`` extra) and keep a rolling window of ``window`` seconds. ``records`` are the
client's own `CallRecord`s (a `Recorder`, a list, or a callable returning one): the
doctor needs them to compare client and server TTFT and to know prefixes were shared.

Gauges (waiting, running) are snapshots, so a sampler that does not run while requests
queue misses them. An asyncio sampler (``await doc.ascrape()`` in a loop) is starved when
the same event loop is busy reading streams — measured on 2 shared cores: 5 scrapes in
11 s instead of ~100, none while requests waited. ``with doc.sampling(0.1):`` scrapes from
its own thread instead, whatever the event loop does. The evidence that no scrape can miss
is used too: vLLM's queue-time histogram, and on llama.cpp (whose ``prompt_ms`` starts when
a slot takes the request) the client's records against the server's slot count, read once
from ``/slots`` (or given as ``capacity=``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import urllib.error
from collections import deque
from typing import Callable, Iterator, Optional, Sequence, Union

from .._net_words import body_message, http_url_problem, open_url, redacted_url
from ..core._record import CallRecord
from ..telemetry._recorder import Recorder
from ._findings import Diagnosis, Thresholds, diagnose
from ._metrics import Scrape
from ._window import MetricsWindow

__all__ = ["Doctor", "doctor", "adoctor", "metrics_url", "server_root", "fetch_metrics", "fetch_slots"]

Records = Union[Recorder, Sequence[CallRecord], Callable[[], Sequence[CallRecord]], None]


def server_root(url: str) -> str:
    """``http://host:port`` from a server URL, an OpenAI base URL (``.../v1``) or a ``/metrics`` URL."""
    problem = http_url_problem(url)
    if problem is not None:
        detail = "" if problem == "not an http(s) URL" else f": {problem}"
        raise ValueError(f"expected an http(s) URL of the server, got {url!r}{detail}")
    assert isinstance(url, str)
    root = url.rstrip("/")
    for suffix in ("/metrics", "/v1"):
        if root.endswith(suffix):
            root = root[: -len(suffix)]
    return root


def metrics_url(url: str) -> str:
    """The ``/metrics`` URL of the server at ``url``."""
    return server_root(url) + "/metrics"


def fetch_metrics(url: str, timeout: float = 5.0) -> Scrape:
    """GET ``/metrics`` of the server at ``url`` and parse it.

    A server that answers with an error status raises ``urllib.error.HTTPError`` whose message is what the
    server said in its body (llama-server without ``--metrics``: "This server does not support metrics
    endpoint. Start it with `--metrics`"), or for a 404 where metrics usually are; urllib's own is only the
    status's name."""
    page = metrics_url(url)
    try:
        with open_url(page, timeout) as resp:
            body = resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        raise _explained(exc, str(redacted_url(page))) from None
    if body.lstrip()[:1] in ("[", "{"):
        # trtllm-serve answers /metrics with JSON iteration stats; its Prometheus page is elsewhere.
        raise ValueError(
            f"{metrics_url(url)} answered JSON, not Prometheus text (trtllm-serve serves Prometheus at "
            "/prometheus/metrics: pass that URL)"
        )
    return Scrape.parse(body)


_NOT_FOUND_HINT = (
    "nothing serves /metrics there: is it the inference server's own address? (Triton serves its metrics on port "
    "8002, trtllm-serve at /prometheus/metrics; Ollama has none)"
)


def _explained(exc: urllib.error.HTTPError, page: str) -> urllib.error.HTTPError:
    """``exc`` again (same status and headers), its message saying what the server's body said, and for a 404
    where the metrics usually are."""
    try:
        said = body_message(exc.read(4096))
    except Exception:  # a body that cannot be read: the status alone
        said = None
    finally:
        exc.close()
    status = str(exc.reason or "").strip() or "error"
    message = status if said is None or said.lower() == status.lower() else f"{status}: {said}"
    if exc.code == 404:
        message = f"{message}; {_NOT_FOUND_HINT}"
    return urllib.error.HTTPError(page, exc.code, message, exc.headers, None)


def fetch_slots(url: str, timeout: float = 5.0) -> Optional[int]:
    """How many slots llama-server at ``url`` has (``GET /slots``); ``None`` if it does not say
    (``--no-slots``, not llama.cpp, unreachable)."""
    try:
        with open_url(server_root(url) + "/slots", timeout) as resp:
            slots = json.loads(resp.read())
    except (OSError, ValueError):
        return None
    return len(slots) if isinstance(slots, list) and slots else None


def _records(source: Records) -> Sequence[CallRecord]:
    if source is None:
        return ()
    if isinstance(source, Recorder):
        return source.calls
    if callable(source):
        return source()
    return source


class Doctor:
    """Rolling window of scrapes of one server, diagnosed on demand."""

    def __init__(
        self,
        url: str,
        *,
        records: Records = None,
        model: Optional[str] = None,
        thresholds: Optional[Thresholds] = None,
        window: float = 60.0,
        timeout: float = 5.0,
        capacity: Optional[int] = None,
    ) -> None:
        """``capacity``: requests the server runs at once (llama-server's ``-np`` slots; read from
        ``/slots`` on the first llama.cpp scrape when not given)."""
        self.url = metrics_url(url)
        if capacity is not None and (isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1):
            raise ValueError(f"capacity must be an int >= 1 or None, got {capacity!r}")
        self.capacity = capacity
        self._slots_asked = capacity is not None
        self._lock = threading.Lock()
        self._sampler: Optional[threading.Thread] = None
        self.scrape_errors = 0
        """Scrapes that failed in `sampling` (the sampler keeps going)."""
        if not (isinstance(window, (int, float)) and window > 0):
            raise ValueError(f"window must be a number of seconds > 0, got {window!r}")
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        self.records = records
        self.model = model
        self.thresholds = thresholds or Thresholds()
        self.window = float(window)
        self.timeout = float(timeout)
        self._scrapes: deque[Scrape] = deque()

    @property
    def scrapes(self) -> tuple[Scrape, ...]:
        """The scrapes in the current window, oldest first."""
        with self._lock:
            return tuple(self._scrapes)

    def add(self, scrape: Scrape) -> None:
        """Add a scrape taken elsewhere; drops those older than the window."""
        with self._lock:
            self._scrapes.append(scrape)
            while len(self._scrapes) > 2 and self._scrapes[-1].at - self._scrapes[1].at >= self.window:
                self._scrapes.popleft()

    def scrape(self) -> Scrape:
        """Scrape the server once (blocking) and add it to the window."""
        scrape = fetch_metrics(self.url, self.timeout)
        if not self._slots_asked and scrape.server == "llamacpp":
            self._slots_asked = True
            self.capacity = fetch_slots(self.url, self.timeout)
        self.add(scrape)
        return scrape

    @contextlib.contextmanager
    def sampling(self, interval: float = 0.25) -> Iterator["Doctor"]:
        """Scrape once on entering the block, then every ``interval`` s from a background thread
        while it runs (and once more at its end), so a busy event loop or a blocking caller
        cannot starve the sampler. The first scrape is taken before the block starts: the
        window covers the block's first requests even where the thread is slow to get the CPU
        (their prefill and prefix-cache counters would otherwise fall before it).

        Usable from sync and async code (``with doc.sampling(0.1): await ...``); failed scrapes
        are counted in ``scrape_errors``, not raised. Entering the block waits for the first
        scrape, and leaving it for the scrape in progress (each at most ``timeout`` s).
        """
        if not (isinstance(interval, (int, float)) and interval > 0):
            raise ValueError(f"interval must be a number of seconds > 0, got {interval!r}")
        if self._sampler is not None:
            raise RuntimeError("this Doctor is already sampling")
        stop = threading.Event()
        try:
            self.scrape()
        except Exception:  # noqa: BLE001
            self.scrape_errors += 1

        def run() -> None:
            while not stop.wait(interval):
                try:
                    self.scrape()
                except Exception:  # noqa: BLE001 - a sampler must outlive a bad scrape
                    self.scrape_errors += 1

        self._sampler = threading.Thread(target=run, name="latencykit-doctor-sampler", daemon=True)
        self._sampler.start()
        try:
            yield self
        finally:
            stop.set()
            self._sampler.join()
            self._sampler = None
            try:
                self.scrape()
            except Exception:  # noqa: BLE001
                self.scrape_errors += 1

    async def ascrape(self) -> Scrape:
        """`scrape` from async code (in a worker thread, so the event loop keeps running)."""
        return await asyncio.to_thread(self.scrape)

    def metrics_window(self) -> MetricsWindow:
        """The window of scrapes so far (raises ``ValueError`` before the first scrape)."""
        with self._lock:
            scrapes = tuple(self._scrapes)
        return MetricsWindow(scrapes, self.model)

    def diagnose(self) -> Diagnosis:
        """Findings for the window so far (scrapes once if nothing was scraped yet)."""
        if not self._scrapes:
            self.scrape()
        return diagnose(self.metrics_window(), _records(self.records), self.thresholds, capacity=self.capacity)


def _check_timing(duration: float, interval: float) -> None:
    if not (isinstance(duration, (int, float)) and duration >= 0):
        raise ValueError(f"duration must be a number of seconds >= 0, got {duration!r}")
    if not (isinstance(interval, (int, float)) and interval > 0):
        raise ValueError(f"interval must be a number of seconds > 0, got {interval!r}")


def doctor(
    url: str,
    *,
    duration: float = 5.0,
    interval: float = 1.0,
    records: Records = None,
    model: Optional[str] = None,
    thresholds: Optional[Thresholds] = None,
) -> Diagnosis:
    """Scrape ``url``'s ``/metrics`` every ``interval`` s for ``duration`` s and diagnose the window.

    ``duration=0`` judges a single scrape (gauges now; counters and histograms since start-up).
    """
    _check_timing(duration, interval)
    doc = Doctor(url, records=records, model=model, thresholds=thresholds, window=max(duration, interval) + interval)
    deadline = time.monotonic() + duration
    doc.scrape()
    while time.monotonic() < deadline:
        time.sleep(min(interval, max(deadline - time.monotonic(), 0.0)))
        doc.scrape()
    return doc.diagnose()


async def adoctor(
    url: str,
    *,
    duration: float = 5.0,
    interval: float = 1.0,
    records: Records = None,
    model: Optional[str] = None,
    thresholds: Optional[Thresholds] = None,
) -> Diagnosis:
    """Async twin of `doctor`: sleeps with ``asyncio.sleep``, scrapes in a worker thread."""
    _check_timing(duration, interval)
    doc = Doctor(url, records=records, model=model, thresholds=thresholds, window=max(duration, interval) + interval)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + duration
    await doc.ascrape()
    while loop.time() < deadline:
        await asyncio.sleep(min(interval, max(deadline - loop.time(), 0.0)))
        await doc.ascrape()
    return doc.diagnose()


