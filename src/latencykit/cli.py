"""``latencykit`` command line: ``demo`` and ``emulator`` (needs the ``bench`` extra), ``semantic init``.

Failures a user can cause — a port in use, a host that does not resolve, a missing extra,
Ctrl-C — print one line to stderr and exit non-zero (130 on interrupt), never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any, Optional, Sequence

from . import __version__

_EXTRA_HINT = 'this command needs the "bench" extra: pip install "latencykit[bench]"'
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C


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
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return value


def _timing_defaults() -> dict[str, Any]:
    """The emulator's `TimingModel` defaults, shown in ``--help``; empty without the bench extra."""
    try:
        from .emulator import TimingModel
    except ImportError:
        return {}
    return {f.name: f.default for f in dataclasses.fields(TimingModel)}


def _pressures() -> list[str]:
    """The emulator's vLLM pressure states (`VLLMConfig.pressure`); empty without the bench extra."""
    try:
        from .emulator import PRESSURES
    except ImportError:
        return []
    return sorted(PRESSURES)


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a default only where there is one worth showing (not ``None``, not a flag's ``False``)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default in (None, False) or action.required:
            return action.help or ""
        return super()._get_help_string(action) or ""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for ``latencykit``."""
    fmt = _Help
    parser = argparse.ArgumentParser(prog="latencykit", description="Fast LLM calls, measured.", formatter_class=fmt)
    parser.add_argument("-V", "--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run a short multi-turn workload against the embedded emulator", formatter_class=fmt)
    demo.add_argument("--conversations", type=_positive_int, default=2, help="sync conversations per provider")
    demo.add_argument("--parallel", type=_positive_int, default=8, help="async conversations per provider, in parallel")
    demo.add_argument("--seed", type=int, default=0, help="seed of the emulator's timing jitter and text")

    timing = _timing_defaults()
    emu = sub.add_parser("emulator", help="serve the Anthropic/OpenAI emulator until Ctrl-C", formatter_class=fmt)
    emu.add_argument("--host", default="127.0.0.1", help="address to listen on")
    emu.add_argument("--port", type=_port, default=8000, help="TCP port (0 = any free port)")
    emu.add_argument("--seed", type=int, default=0, help="seed of the timing jitter and generated text")
    emu.add_argument("--time-scale", type=_non_negative, default=1.0, help="multiply every emulated delay (0 = no delays)")
    emu.add_argument("--ttft", type=_non_negative, default=timing.get("base_ttft"), help="base TTFT in seconds")
    emu.add_argument("--tpot", type=_non_negative, default=timing.get("decode_per_token"), help="decode time per token in seconds")
    emu.add_argument("--output-tokens", type=_positive_int, default=timing.get("output_tokens"), help="tokens per answer")
    emu.add_argument("--tokens-per-chunk", type=_positive_int, default=timing.get("tokens_per_chunk"), help="tokens per streamed chunk")
    emu.add_argument("--vllm", action="store_true",
                     help="also act as a vLLM server: emulated /metrics, /v1/models and a toy scheduler (try latencykit doctor on it)")  # fmt: skip
    emu.add_argument("--pressure", choices=_pressures(), default=None, metavar="STATE",
                     help="with --vllm, set the scheduler up for one state the doctor names: " + ", ".join(_pressures()))  # fmt: skip
    sem = sub.add_parser("semantic", help="the semantic cache's shared stores", formatter_class=fmt)
    sem_sub = sem.add_subparsers(dest="semantic_command", required=True)
    init = sem_sub.add_parser("init", help="create PgVectorStore's PostgreSQL + pgvector schema (idempotent)", formatter_class=fmt)
    init.add_argument("--dsn", required=True, help="libpq connection string or postgresql:// URL")
    init.add_argument("--dim", type=_positive_int, required=True, help="embedding dimension (384 for all-MiniLM-L6-v2)")
    init.add_argument("--table", default="latencykit_semantic", help="table name (or schema.table)")
    init.add_argument("--m", type=_positive_int, default=16, help="HNSW m (links per node)")
    init.add_argument("--ef-construction", type=_positive_int, default=64, help="HNSW ef_construction")
    from .commands._doctor import add_doctor

    add_doctor(sub)
    from .commands._bench import register as add_bench

    add_bench(sub)
    from .commands._experiment import register as add_experiment

    add_experiment(sub)
    return parser


def _fail(message: str, code: int = EXIT_FAILURE) -> int:
    print(f"latencykit: {message}", file=sys.stderr, flush=True)
    return code


def _run(args: argparse.Namespace) -> None:
    if args.command == "doctor":
        from .commands._doctor import run_doctor

        if run_doctor(args):
            raise SystemExit(EXIT_FAILURE)
    elif args.command == "semantic":
        from .semantic._pgvector import init_schema

        try:
            print(init_schema(args.dsn, args.dim, table=args.table, m=args.m, ef_construction=args.ef_construction))
        except ValueError as exc:  # a value the store refuses (a table name): bad input, as argparse's (exit 2)
            raise _UsageError(str(exc)) from None
        except RuntimeError as exc:  # the server refused or could not be reached (exit 1)
            raise _ServeError(str(exc)) from None
    elif args.command == "demo":
        from .commands._demo import run_demo

        run_demo(conversations=args.conversations, parallel=args.parallel, seed=args.seed)
    elif args.command == "emulator":
        from .emulator import TimingModel, serve

        timing = TimingModel(
            base_ttft=args.ttft,
            decode_per_token=args.tpot,
            output_tokens=args.output_tokens,
            tokens_per_chunk=args.tokens_per_chunk,
            time_scale=args.time_scale,
        )
        if args.pressure and not args.vllm:
            raise _UsageError("--pressure sets up the vLLM mode: add --vllm")
        vllm = None
        if args.vllm:
            from .emulator import VLLMConfig

            vllm = VLLMConfig.pressure(args.pressure) if args.pressure else VLLMConfig()
        try:
            serve(host=args.host, port=args.port, timing=timing, seed=args.seed, vllm=vllm)
        except OSError as exc:  # address in use, unknown host, no permission
            raise _ServeError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None


class _ServeError(Exception):
    """The emulator could not bind (or ``semantic init`` failed); the message is the one line shown to the user."""


class _UsageError(Exception):
    """Flags that do not go together; the message is the one line shown to the user (exit 2)."""


def _ignore_unraisable(unraisable: Any) -> None:
    pass


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``latencykit`` command; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv in (["--version"], ["-V"]):  # before the subcommands' imports: answers in milliseconds
        print(f"latencykit {__version__}")
        return 0
    try:
        args = build_parser().parse_args(argv)
        _run(args)
    except KeyboardInterrupt:
        # An interrupt can land inside an SDK client's constructor; the half-built object's
        # __del__ then fails when this traceback is dropped. The process is exiting: stay quiet.
        sys.unraisablehook = _ignore_unraisable
        return _fail("interrupted", EXIT_INTERRUPTED)
    except ImportError as exc:
        return _fail(str(exc) if "pip install" in str(exc) else f"{exc}; {_EXTRA_HINT}", EXIT_USAGE)
    except _ServeError as exc:
        return _fail(str(exc))
    except _UsageError as exc:
        return _fail(str(exc), EXIT_USAGE)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
