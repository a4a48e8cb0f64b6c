"""``latencykit doctor --url URL [--watch]``: what limits a self-hosted server (vLLM, SGLang, TGI,
Triton, TensorRT-LLM, llama.cpp), on the terminal.

One window (``--duration`` seconds of scrapes every ``--interval``; ``0``: one scrape, counters
since start-up) and its findings, or with ``--watch`` a live rich display re-diagnosing a
rolling window until Ctrl-C. The window is judged by `latencykit.engines.doctor`, the function the
Python API uses, so the same scrapes and records give the same findings. ``--records FILE``
(JSON Lines from ``Recorder.to_jsonl``) adds the client's records; without them the doctor
judges the server's own metrics only (no client-vs-server TTFT, no "shared prefixes"
evidence). ``--json`` prints `Diagnosis.to_dict`. Needs the ``vllm`` extra; the display uses
rich (the ``bench`` extra) and falls back to plain text.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
from typing import Any

from .._net_words import failure_words, open_url, redacted_url
from ..telemetry._recorder import Recorder
from ..engines._doctor import Doctor, doctor, metrics_url, server_root
from ..engines._findings import Diagnosis
from ..engines._words import KIND_WORDS, engine_name, evidence_text, figure, label

__all__ = ["add_doctor", "is_emulated", "render", "run_doctor"]

_STYLE = {"healthy": "green", "queue_pressure": "yellow", "kv_cache_pressure": "red"}


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def _duration(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value


def _url(text: str) -> str:
    try:
        return server_root(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a default only where there is one worth showing (not ``None``, not a flag's ``False``)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default in (None, False) or action.required:
            return action.help or ""
        return super()._get_help_string(action) or ""


def add_doctor(sub: Any) -> None:
    """Register the ``doctor`` subcommand on ``latencykit``'s subparsers."""
    p = sub.add_parser(
        "doctor", help="say what limits a self-hosted LLM server (vLLM, SGLang, TGI, Triton, TensorRT-LLM, llama.cpp; its metrics)", formatter_class=_Help,
        description="Scrape a vLLM, SGLang, TGI, Triton (its metrics port, e.g. :8002), trtllm-serve (/prometheus/metrics) "
                    "or llama.cpp server's metrics and say what limits it. Try it offline against "
                    "`latencykit emulator --vllm --pressure kv_cache_pressure` (the report then says EMULATED).",
    )  # fmt: skip
    p.add_argument("--url", default="http://127.0.0.1:8000", type=_url,
                   help="the server (/v1 and /metrics accepted)")  # fmt: skip
    p.add_argument("--duration", type=_duration, default=5.0, help="seconds of scraping per window (0: one scrape, counters since start-up)")
    p.add_argument("--interval", type=_seconds, default=1.0, help="seconds between scrapes")
    p.add_argument("--model", default=None, help="only this model_name's series (default: every model the server serves)")
    p.add_argument("--watch", action="store_true", help="keep scraping and re-diagnosing a rolling window until Ctrl-C")
    p.add_argument("--records", default=None, metavar="FILE", help="the client's call records (JSON Lines from Recorder.to_jsonl) to judge with the metrics")
    p.add_argument("--json", action="store_true", help="print the diagnosis as JSON (one line per window with --watch)")


def is_emulated(url: str, timeout: float = 2.0) -> bool:
    """Whether ``url`` is latencykit's emulator (its vLLM mode emulates the metrics): it answers ``/_emulator/lateness``."""
    try:
        with open_url(f"{server_root(url)}/_emulator/lateness", timeout) as resp:
            return resp.status == 200 and "lateness" in json.loads(resp.read())
    except Exception:
        return False


def render(diagnosis: Diagnosis, url: str, emulated: bool = False) -> Any:
    """A rich renderable of ``diagnosis`` (needs rich); ``emulated`` labels the metrics as the emulator's. Words, not
    keys (`latencykit.engines._words`): ``--json`` keeps the keys."""
    from rich.console import Group
    from rich.markup import escape
    from rich.panel import Panel
    from rich.table import Table

    w = diagnosis.window
    head = Table.grid(padding=(0, 2))
    if emulated:
        head.add_row("metrics", "[bold]EMULATED[/bold] (latencykit emulator, vLLM mode)")
    server = w.get("server")
    head.add_row("engine", engine_name(server))
    head.add_row(f"not exposed by {engine_name(server)}", figure("not_exposed", w.get("not_exposed")))
    for key in ("scrapes", "elapsed_s", "kv_cache_usage_max", "running_max", "waiting_max", "preemptions",
                "generation_tokens_per_s", "prefix_cache_hit_rate", "spec_accepted_per_step", "server_ttft_p50_s",
                "server_ttft_p95_s", "server_queue_time_p95_s"):  # fmt: skip
        head.add_row(label(key), figure(key, w.get(key)))
    for key in ("server_backend_request_mean_s", "gpu_memory_usage_max"):  # Triton's: shown where the engine has them
        if w.get(key) is not None:
            head.add_row(label(key), figure(key, w.get(key)))
    panels = []
    for f in diagnosis.findings:
        evidence = escape(evidence_text(f.evidence, server))
        style = _STYLE.get(f.kind, "magenta")
        panels.append(Panel(f"{escape(f.title)}\n[dim]{evidence}[/dim]\n\n{escape(f.advice)}", title=KIND_WORDS.get(f.kind, f.kind),
                            border_style=style))  # fmt: skip
    tag = " — EMULATED" if emulated else ""
    return Group(Panel(head, title=f"latencykit doctor — {redacted_url(url)}{tag}"), *panels)


def _print(diagnosis: Diagnosis, url: str, as_json: bool = False, emulated: bool = False) -> None:
    if as_json:
        print(json.dumps({"url": redacted_url(url), "emulated": emulated, **diagnosis.to_dict()}, default=str), flush=True)
        return
    try:
        from rich.console import Console
    except ImportError:
        print(f"latencykit doctor — {redacted_url(url)}{' — EMULATED' if emulated else ''}\n{diagnosis}", flush=True)
        return
    Console().print(render(diagnosis, url, emulated))


def run_doctor(args: argparse.Namespace) -> int:
    """Run ``latencykit doctor``; returns the exit status (1 when the server cannot be scraped or
    the records cannot be read)."""
    page = str(redacted_url(metrics_url(args.url)))  # for the lines printed: no password from the URL
    try:
        records = Recorder.from_jsonl(args.records).calls if args.records else ()
    except (OSError, ValueError) as exc:
        print(f"latencykit: cannot read records {args.records}: {exc}", file=sys.stderr, flush=True)
        return 1
    emulated = is_emulated(args.url)
    try:
        if not args.watch:
            found = doctor(args.url, duration=args.duration, interval=args.interval, records=records, model=args.model)
            _print(found, args.url, args.json, emulated)
            return 0
        window = max(args.duration, args.interval) + args.interval
        return _watch(Doctor(args.url, records=records, model=args.model, window=window), args, page, emulated)
    except (urllib.error.URLError, OSError) as exc:
        print(f"latencykit: cannot scrape {page}: {failure_words(exc, page)}", file=sys.stderr, flush=True)
        return 1
    except ValueError as exc:  # not a Prometheus page
        print(f"latencykit: {page} is not a metrics page: {exc}", file=sys.stderr, flush=True)
        return 1


def _watch(doc: Doctor, args: argparse.Namespace, page: str, emulated: bool = False) -> int:
    """Scrape and re-diagnose until Ctrl-C. A server that cannot be scraped at the start ends it (exit 1); one
    that stops answering later (restarted, redeployed) is said once on stderr, and the watch goes on until it
    answers again: a watch is for the moments a server misbehaves."""
    live: Any = None
    if not args.json:
        try:
            from rich.live import Live as live
        except ImportError:
            pass
    outage = _Outage(page)
    doc.scrape()
    if live is None:  # JSON (one line per window) or plain text
        while True:
            if args.json:
                _print(doc.diagnose(), args.url, as_json=True, emulated=emulated)
            else:
                print(doc.diagnose(), flush=True)
            while True:
                time.sleep(args.interval)
                if outage.scraped(doc):
                    break
    with live(render(doc.diagnose(), args.url, emulated), refresh_per_second=4) as display:
        while True:
            time.sleep(args.interval)
            if outage.scraped(doc):
                display.update(render(doc.diagnose(), args.url, emulated))


class _Outage:
    """A watch's scrapes after the first: a failure is said once, on stderr, until the server answers again."""

    def __init__(self, page: str) -> None:
        self.page = page
        self.down = False

    def scraped(self, doc: Doctor) -> bool:
        try:
            doc.scrape()
        except (urllib.error.URLError, OSError, ValueError) as exc:
            if not self.down:
                self.down = True
                why = failure_words(exc, self.page) if isinstance(exc, OSError) else f"not a metrics page ({exc})"
                print(f"latencykit: cannot scrape {self.page}: {why} (still watching; Ctrl-C to stop)", file=sys.stderr, flush=True)
            return False
        if self.down:
            self.down = False
            print(f"latencykit: {self.page} answers again", file=sys.stderr, flush=True)
        return True
