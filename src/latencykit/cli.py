"""``latencykit`` command line: ``demo`` and ``emulator`` (needs the ``bench`` extra)."""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

_EXTRA_HINT = 'this command needs the "bench" extra: pip install "latencykit[bench]"'


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0..65535, got {value}")
    return value


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for ``latencykit``."""
    parser = argparse.ArgumentParser(prog="latencykit", description="Fast LLM calls, measured.")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run a short multi-turn workload against the embedded emulator")
    demo.add_argument("--conversations", type=_positive_int, default=2, help="sync conversations per provider (default 2)")
    demo.add_argument("--parallel", type=_positive_int, default=8, help="async conversations in parallel (default 8)")
    demo.add_argument("--seed", type=int, default=0)

    emu = sub.add_parser("emulator", help="serve the Anthropic/OpenAI emulator on 127.0.0.1")
    emu.add_argument("--host", default="127.0.0.1")
    emu.add_argument("--port", type=_port, default=8000)
    emu.add_argument("--seed", type=int, default=0)
    emu.add_argument("--time-scale", type=_non_negative, default=1.0, help="multiply every emulated delay (0 = no delays)")
    emu.add_argument("--ttft", type=_non_negative, default=None, help="base TTFT in seconds")
    emu.add_argument("--tpot", type=_non_negative, default=None, help="decode time per token in seconds")
    emu.add_argument("--output-tokens", type=_positive_int, default=None)
    emu.add_argument("--tokens-per-chunk", type=_positive_int, default=None)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``latencykit`` command."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "demo":
            from .bench.demo import run_demo

            run_demo(conversations=args.conversations, parallel=args.parallel, seed=args.seed)
        elif args.command == "emulator":
            from .emulator import TimingModel, serve

            defaults = TimingModel()
            timing = TimingModel(
                base_ttft=args.ttft if args.ttft is not None else defaults.base_ttft,
                decode_per_token=args.tpot if args.tpot is not None else defaults.decode_per_token,
                output_tokens=args.output_tokens or defaults.output_tokens,
                tokens_per_chunk=args.tokens_per_chunk or defaults.tokens_per_chunk,
                time_scale=args.time_scale,
            )
            serve(host=args.host, port=args.port, timing=timing, seed=args.seed)
    except ImportError as exc:
        print(f"latencykit: {exc}\n{_EXTRA_HINT}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
