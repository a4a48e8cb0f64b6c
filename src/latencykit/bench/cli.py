"""``latencykit bench``: run, ``compare`` (the CI gate), ``merge``, and ``emulator`` (a tunable server).

```
latencykit bench --target emulator --traffic chat --requests 200 --concurrency 16
latencykit bench --rate 40 --concurrency 8 --duration 20 --emu-ideal
latencykit bench --matrix cache=auto,off --matrix stream=forced,as-asked --out runs.json --html runs.html
latencykit bench compare base.json new.json --max-regression 10% --metric ttft:p99
latencykit bench merge w0.json w1.json w2.json -o all.json
latencykit bench emulator --ideal --port 8000
```
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

__all__ = ["build_parser", "main", "register"]

SUBCOMMANDS = ("run", "compare", "merge", "emulator")


def _list(kind: type) -> Any:
    def parse(text: str) -> tuple[Any, ...]:
        try:
            values = tuple(kind(v) for v in text.split(",") if v.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {kind.__name__}s, got {text!r}") from None
        if not values or any(v <= 0 for v in values):
            raise argparse.ArgumentTypeError(f"expected positive values, got {text!r}")
        return values

    return parse


def _share(text: str) -> float:
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share like 10% or 0.1, got {text!r}") from None
    if not 0 <= value < 10:
        raise argparse.ArgumentTypeError(f"expected a share like 10% or 0.1, got {text!r}")
    return value


def _pair(text: str) -> tuple[str, str]:
    k, sep, v = text.partition("=")
    if not sep or not k.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return k.strip(), v.strip()


def _run_parser(prog: str = "latencykit bench") -> argparse.ArgumentParser:
    from ..emulator._flags import add_timing_arguments
    from ._load import ARRIVALS
    from ._run import LEVERS
    from ._targets import TARGETS
    from ._traffic import SHAPES

    p = argparse.ArgumentParser(prog=prog, description="Drive realistic traffic through latencykit's own clients and report honest latency.")
    g = p.add_argument_group("target")
    g.add_argument("--target", choices=TARGETS, default="emulator", help="default: the in-process emulator")
    g.add_argument("--base-url", help="server URL (openai-compatible, vllm, llamacpp; or a running emulator)")
    g.add_argument("--model", help="model name (default: emulator's, or the server's first /v1/models entry)")
    g.add_argument("--api", choices=("openai", "anthropic"), help="API spoken to the emulator (default openai)")
    g.add_argument("--per-chunk-usage", action=argparse.BooleanOptionalAction, default=None,
                   help="ask for continuous_usage_stats so ITL per token is exact (default on for emulator and vllm)")  # fmt: skip
    g.add_argument("--exact-output", action=argparse.BooleanOptionalAction, default=None,
                   help="make the server generate exactly max_tokens (emulator header; vLLM min_tokens + ignore_eos)")  # fmt: skip
    t = p.add_argument_group("traffic")
    t.add_argument("--traffic", choices=SHAPES, default="chat")
    t.add_argument("--requests", type=int, default=200, help="requests per cell (default 200)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--documents", type=int, default=4, help="documents reused by --traffic shared-prefix")
    t.add_argument("--replay", help="JSONL of requests (prompt_tokens/output_tokens[, messages, timestamp]) or Recorder.to_jsonl() output")
    lo = p.add_argument_group("load")
    lo.add_argument("--concurrency", type=_list(int), default=(), help="in flight (closed loop), or the cap with --rate; a list sweeps")
    lo.add_argument("--rate", type=_list(float), default=(), help="open loop, requests per second; a list sweeps")
    lo.add_argument("--arrivals", choices=ARRIVALS, default="poisson")
    lo.add_argument("--burstiness", type=float, default=1.0, help="gamma shape (1 = Poisson, < 1 burstier)")
    lo.add_argument("--duration", type=float, help="seconds; arrivals after it are not scheduled, those still waiting are unsent")
    lo.add_argument("--warmup", type=int, default=0, help="first N requests excluded from the headline")
    lo.add_argument("--ramp", type=float, default=0.0,
                    help="closed loop: seconds over which the slots start, spread evenly (against a jitter-free server, ~one request's duration)")  # fmt: skip
    lo.add_argument("--workers", type=int, default=1, help="client processes (one event loop each); sketches merge exactly")
    lo.add_argument("--control", type=_share, default=0.0, help="share of requests sent by the thin raw-HTTP reader, interleaved (e.g. 10%%)")
    s = p.add_argument_group("strategies and reports")
    levers = ", ".join(k + "=" + "/".join(v) for k, v in LEVERS.items())
    s.add_argument("--matrix", action="append", default=[], metavar="LEVER=V1,V2", help=f"levers: {levers}")
    s.add_argument("--label", action="append", type=_pair, default=[], metavar="KEY=VALUE", help="free label, e.g. server=int8")
    s.add_argument("--slo", action="append", default=[], help="custom SLO, e.g. ttft<=300ms or e2e:p99<=2s (presets always shown)")
    s.add_argument("--out", help="run file (default bench-<UTC time>.json)")
    s.add_argument("--html", help="also write an HTML report with plots")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    e = p.add_argument_group("emulator (in-process target)")
    add_timing_arguments(e, prefix="emu-", default_preset="bench")
    return p


def _cmd_run(argv: Sequence[str]) -> int:
    from rich.console import Console

    from ..emulator._flags import timing_from_args
    from ._run import BenchConfig, parse_matrix, run_bench

    args = _run_parser().parse_args(argv)
    console = Console()
    try:
        timing = timing_from_args(args, prefix="emu-")
        from dataclasses import asdict

        config = BenchConfig(
            target=args.target, base_url=args.base_url, model=args.model, api=args.api,
            per_chunk_usage=args.per_chunk_usage, exact_output=args.exact_output, traffic=args.traffic,
            requests=args.requests, seed=args.seed, documents=args.documents, replay=args.replay,
            concurrency=args.concurrency, rate=args.rate, arrivals=args.arrivals, burstiness=args.burstiness,
            duration=args.duration, warmup=args.warmup, ramp=args.ramp, matrix=tuple(parse_matrix(args.matrix)),
            labels=dict(args.label), workers=args.workers, control=args.control, slos=tuple(args.slo),
            timing=asdict(timing),
        )  # fmt: skip
        started = time.perf_counter()
        run = run_bench(config, progress=not args.quiet, console=console)
    except ValueError as exc:
        print(f"latencykit bench: {exc}", file=sys.stderr)
        return 2
    run.report(console)
    out = Path(args.out or time.strftime("bench-%Y%m%dT%H%M%SZ.json", time.gmtime()))
    run.save(out)
    console.print(f"run file: {out} ({time.perf_counter() - started:.1f} s)")
    if args.html:
        Path(args.html).write_text(run.to_html())
        console.print(f"HTML report: {args.html}")
    dead = [c for c in run.cells if c.no_data]
    for c in dead:  # one line each, so a CI log shows why
        print(f"latencykit bench: {c.key} has {c.no_data}", file=sys.stderr)
    return 1 if dead else 0


def _cmd_compare(argv: Sequence[str]) -> int:
    from rich.console import Console
    from rich.markup import escape

    from ._cell import BenchRun
    from ._compare import MATCH_LOAD, gate_runs
    from ._report import comparison_table, error_table

    p = argparse.ArgumentParser(prog="latencykit bench compare", description=(
        "Compare two run files side by side; the CI gate. Exit 1 when a gated percentile is slower beyond "
        "--max-regression AND beyond noise (the 95%% confidence intervals do not overlap), when the share of failed "
        "requests rises beyond --max-error-increase AND beyond noise (one-sided Fisher exact test, p < 0.01), when "
        "a cell has no completed request, or when a cell is in one run only; 0 otherwise; 2 on a usage error."))  # fmt: skip
    p.add_argument("base")
    p.add_argument("new")
    p.add_argument("--max-regression", type=_share, default=0.10, help="allowed slow-down (default 10%%)")
    p.add_argument("--metric", action="append", default=[], help="metric:percentile to gate on (default ttft:p99; repeatable)")
    p.add_argument("--max-error-increase", type=_share, default=0.01,
                   help="allowed rise of the failed-request share, in points (default 1%%: 0%% -> 1%%)")  # fmt: skip
    p.add_argument("--match-load", choices=MATCH_LOAD, default="same",
                   help="pair cells at the same load level only (default), or at any level (by label, in sweep order)")  # fmt: skip
    p.add_argument("--allow-missing", action="store_true", help="a cell in one run only is noted, not a failure")
    args = p.parse_args(argv)
    metrics = args.metric or ["ttft:p99"]
    console = Console()
    try:
        base, new = BenchRun.load(args.base), BenchRun.load(args.new)
        result = gate_runs(base, new, metrics, max_regression=args.max_regression, max_error_increase=args.max_error_increase,
                           match_load=args.match_load, allow_missing=args.allow_missing,
                           show=("ttft:p50", "ttft:p99", "e2e:p50", "e2e:p99"))  # fmt: skip
    except (ValueError, OSError) as exc:
        print(f"latencykit bench compare: {exc}", file=sys.stderr)
        return 2
    tag = " — EMULATED" if base.emulated or new.emulated else ""
    if result.comparisons:
        console.print(comparison_table(result.comparisons, f"{args.base} → {args.new}{tag}", "base"))
        console.print(error_table(result.errors, f"failed requests (errors, interrupted streams){tag}", "base"))
    for note in result.notes:
        console.print(f"[yellow]note[/yellow] {escape(note)}", highlight=False, soft_wrap=True)
    for kind, line in result.failures:  # error messages may hold brackets ("[Errno 111]"): not markup
        console.print(f"[bold red]{kind}[/bold red] {escape(line)}", highlight=False, soft_wrap=True)
    if result.passed:
        slower = [r for r in result.gated if (r.change or 0) > args.max_regression]
        note = f" ({len(slower)} slower beyond the threshold but within noise)" if slower else ""
        console.print(f"no regression beyond {args.max_regression * 100:g}% and beyond noise{note}; no rise of failed "
                      f"requests beyond {_points(args.max_error_increase)} and beyond noise")  # fmt: skip
        return 0
    console.print(f"[bold red]gate failed[/bold red]: {len(result.failures)} problem(s)")
    return 1


def _points(share: float) -> str:
    return f"{share * 100:g} percentage point" + ("" if share == 0.01 else "s")


def _cmd_merge(argv: Sequence[str]) -> int:
    from ._cell import BenchRun

    p = argparse.ArgumentParser(prog="latencykit bench merge", description="Combine run files (workers, machines); sketches merge exactly.")
    p.add_argument("files", nargs="+")
    p.add_argument("-o", "--out", required=True)
    p.add_argument("--report", action="store_true", help="print the merged report")
    args = p.parse_args(argv)
    try:
        merged = BenchRun.merge([BenchRun.load(f) for f in args.files])
    except (ValueError, OSError) as exc:
        print(f"latencykit bench merge: {exc}", file=sys.stderr)
        return 2
    merged.save(args.out)
    if args.report:
        merged.report()
    print(f"merged {len(args.files)} files, {sum(len(c.samples) for c in merged.cells)} requests → {args.out}")
    return 0


def _cmd_emulator(argv: Sequence[str]) -> int:
    from ..emulator import serve
    from ..emulator._flags import add_timing_arguments, timing_from_args

    p = argparse.ArgumentParser(prog="latencykit bench emulator", description="Serve the emulator with every timing knob.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--seed", type=int, default=0)
    add_timing_arguments(p)
    args = p.parse_args(argv)
    try:
        timing = timing_from_args(args)
    except ValueError as exc:
        print(f"latencykit bench emulator: {exc}", file=sys.stderr)
        return 2
    import gc

    # What is imported by now (~300k objects, the SDKs' types among them) is never garbage; frozen, a
    # full collection does not rescan it and stall every stream for ~150 ms (the chunks' lateness showed it).
    gc.collect()
    gc.freeze()
    serve(host=args.host, port=args.port, timing=timing, seed=args.seed)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``latencykit bench`` (run options)."""
    return _run_parser()


class _RunBench(argparse.Action):
    """Runs ``latencykit bench ...`` as soon as its arguments are parsed; exits with its status."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:  # fmt: skip
        raise SystemExit(main(list(values)))


def register(subparsers: Any) -> None:
    """Add ``bench`` to the ``latencykit`` sub-command parsers (one line in ``latencykit.cli``).

    Its own parser (`main`) takes every argument after ``bench``; the command runs while the
    top-level arguments are parsed and ends with ``SystemExit(status)``.
    """
    # No option prefix: every argument after ``bench`` (``--help`` included) goes to `main` untouched.
    sp = subparsers.add_parser("bench", help="benchmark through latencykit's clients; compare, merge, emulator",
                               add_help=False, prefix_chars="\x00")  # fmt: skip
    sp.add_argument("bench_args", nargs=argparse.REMAINDER, action=_RunBench)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``latencykit bench ...``; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in SUBCOMMANDS:
        cmd, rest = args[0], args[1:]
        return {"run": _cmd_run, "compare": _cmd_compare, "merge": _cmd_merge, "emulator": _cmd_emulator}[cmd](rest)
    return _cmd_run(args)
