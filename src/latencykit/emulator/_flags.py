"""Timing presets and the command-line flags that build a `TimingModel` (emulator and bench CLIs).

Presets: ``default`` (`TimingModel()`), ``ideal`` (`IDEAL_TIMING`: load-independent truth for
calibration) and ``bench`` (`BENCH_TIMING`: a plausible hosted model with prefill cost, decode
slowdown under load, 64 slots and jitter — the benchmark's default). Flags override the
preset field by field.
"""

from __future__ import annotations

import argparse
from dataclasses import fields, replace
from typing import Any

from ._timing import IDEAL_TIMING, TimingModel

__all__ = ["BENCH_TIMING", "PRESETS", "add_timing_arguments", "timing_from_args"]

BENCH_TIMING = TimingModel(
    base_ttft=0.15,
    prefill_per_token=4e-5,
    decode_per_token=0.006,
    tokens_per_chunk=2,
    max_concurrency=64,
    batch_slowdown=0.01,
    jitter=0.1,
    output_tokens=64,
)
"""The benchmark's default emulator: ~150 ms fixed TTFT plus 40 µs per uncached prompt token,
~165 tokens/s decode slowed 1 % per extra active stream, two tokens per chunk (as hosted APIs
often bundle them), 64 slots, log-normal jitter σ=0.1.
A model, not a measurement."""

PRESETS: dict[str, TimingModel] = {"default": TimingModel(), "ideal": IDEAL_TIMING, "bench": BENCH_TIMING}

# flag -> (TimingModel field, type, help)
_FLAGS: tuple[tuple[str, str, type, str], ...] = (
    ("--ttft", "base_ttft", float, "fixed time to first token, seconds"),
    ("--prefill-per-token", "prefill_per_token", float, "prefill cost per uncached prompt token, seconds"),
    ("--tpot", "decode_per_token", float, "decode time per token, seconds"),
    ("--batch-slowdown", "batch_slowdown", float, "decode slowdown per extra active stream (0.02 = +2%%)"),
    ("--slots", "max_concurrency", int, "decode slots; more requests wait in FIFO order"),
    ("--jitter", "jitter", float, "log-normal sigma applied to every delay (0 = none)"),
    ("--tokens-per-chunk", "tokens_per_chunk", int, "tokens per streamed chunk"),
    ("--output-tokens", "output_tokens", int, "tokens generated when the request does not cap them lower"),
    ("--time-scale", "time_scale", float, "multiply every modelled delay (0 = no delays)"),
)


def add_timing_arguments(parser: argparse._ActionsContainer, prefix: str = "", default_preset: str = "default") -> None:
    """Add ``--preset`` (plus ``--ideal``) and one flag per timing field (``prefix`` e.g. ``"emu-"``)."""
    dash = "--" + prefix
    parser.add_argument(dash + "preset", choices=sorted(PRESETS), default=default_preset,
                        help=f"timing preset (default {default_preset}); flags below override it")  # fmt: skip
    parser.add_argument(dash + "ideal", action="store_true", help=f"same as {dash}preset ideal: TTFT 200 ms, 10 ms/token, "
                        "30 tokens, no prefill cost, no slowdown, no slot limit, no jitter")  # fmt: skip
    for flag, name, kind, text in _FLAGS:
        parser.add_argument(dash + flag[2:], dest=(prefix + name).replace("-", "_"), type=kind, default=None, help=text)


def timing_from_args(args: argparse.Namespace, prefix: str = "") -> TimingModel:
    """The `TimingModel` the flags describe; ``ValueError`` names a bad value."""
    p = prefix.replace("-", "_")
    preset = "ideal" if getattr(args, p + "ideal") else getattr(args, p + "preset")
    changes: dict[str, Any] = {}
    for _, name, _, _ in _FLAGS:
        value = getattr(args, p + name)
        if value is not None:
            changes[name] = value
    known = {f.name for f in fields(TimingModel)}
    assert set(changes) <= known
    return replace(PRESETS[preset], **changes)
