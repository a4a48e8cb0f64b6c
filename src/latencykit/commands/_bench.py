"""``latencykit bench``: run, ``compare`` (the CI gate), ``merge``, and ``emulator`` (a tunable server).

```
latencykit bench --target emulator --traffic chat --requests 200 --concurrency 16
latencykit bench --rate 40 --concurrency 8 --duration 20 --emu-ideal
latencykit bench --matrix cache=auto,off --matrix stream=forced,as-asked --out runs.json --html runs.html
latencykit bench compare base.json new.json --max-regression 10% --metric ttft:p99
latencykit bench merge w0.json w1.json w2.json -o all.json
latencykit bench --cluster local:2 --traffic chat --requests 400 --concurrency 32
latencykit bench emulator --ideal --port 8000
```

Usage errors (a bad flag, a missing replay file, an unwritable ``--out`` or ``--html``) print one
line and exit 2 before anything runs. Ctrl-C during a run prints the report of what was measured,
writes the run file marked partial, and exits 130. A ``--cluster`` run that lost a worker or node
completes on the workers left, counts the lost share, and exits 3 (partial). On a pipe, tables print at full width;
``--format markdown|json`` prints the report as Markdown or JSON instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

__all__ = ["build_parser", "main", "register"]

SUBCOMMANDS = ("run", "compare", "merge", "emulator")
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C
EXIT_PARTIAL = 3  # the run completed without some of its requests: a --cluster worker or node was lost
_EPILOG = """other commands:
  latencykit bench compare BASE NEW   compare two run files; the CI gate (exit 1 on a regression)
  latencykit bench merge FILE... -o OUT   combine run files of workers or machines that ran side by side
  latencykit bench emulator           serve the emulator with every timing knob
  (each takes --help)"""


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
    from ..bench._config import LEVERS
    from ..reports._grid import FORMATS
    from ..bench._load import ARRIVALS
    from ..bench._targets import TARGETS
    from ..bench._traffic import SHAPES

    p = argparse.ArgumentParser(prog=prog, description="Drive realistic traffic through latencykit's own clients and report honest latency.",
                                epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    g = p.add_argument_group("target")
    g.add_argument("--target", choices=TARGETS, default="emulator", help="default: the in-process emulator")
    g.add_argument("--base-url", help="server URL (openai-compatible, vllm, llamacpp, sglang, tgi, triton, trtllm; or a running emulator)")
    g.add_argument("--model", help="model name (default: emulator's, or the server's first /v1/models entry)")
    g.add_argument("--api", choices=("openai", "anthropic"), help="API spoken to the emulator (default openai)")
    g.add_argument("--per-chunk-usage", action=argparse.BooleanOptionalAction, default=None,
                   help="ask for continuous_usage_stats so ITL per token is exact (default on for emulator and vllm)")  # fmt: skip
    g.add_argument("--exact-output", action=argparse.BooleanOptionalAction, default=None,
                   help="make the server generate exactly max_tokens (emulator header; vLLM min_tokens + ignore_eos)")  # fmt: skip
    t = p.add_argument_group("traffic")
    t.add_argument("--traffic", choices=SHAPES, default=None, help="traffic shape (default chat; replay with --replay)")
    t.add_argument("--requests", type=int, default=200, help="requests per cell (default 200; a replay sends its file's)")
    t.add_argument("--seed", type=int, default=0, help="seed of the traffic, the arrival times and the emulator (default 0)")
    t.add_argument("--documents", type=int, default=4, help="documents reused by --traffic shared-prefix")
    t.add_argument("--turns", type=int, default=None, help="--traffic sessions: turns per session (default 4; --requests "
                   "counts turns in all)")  # fmt: skip
    t.add_argument("--think", default=None, metavar="DIST", help="--traffic sessions: think time before each later turn, "
                   "from the previous answer's end: 2s, 500ms, exp:5s (exponential, that mean), uniform:1s-3s (default 0)")  # fmt: skip
    t.add_argument("--replay", metavar="FILE", help="replay this JSONL (prompt_tokens/output_tokens[, messages, timestamp]) "
                   "or Recorder.to_jsonl() output, or a public trace: Mooncake JSONL, Azure LLM inference CSV, BurstGPT "
                   "CSV (prompts synthesized to their token lengths); implies --traffic replay")  # fmt: skip
    t.add_argument("--replay-format", choices=("latencykit", "mooncake", "azure", "burstgpt"), default=None,
                   help="how to read --replay (default: detected from its first line)")  # fmt: skip
    t.add_argument("--tokenizer", choices=("auto", "server", "estimate"), default="auto",
                   help="trace prompts: fit them to the server's /tokenize where it has one (auto, the default), insist "
                   "on it (server), or keep the estimate of 4 characters per token")  # fmt: skip
    lo = p.add_argument_group("load")
    lo.add_argument("--concurrency", type=_list(int), default=(), help="in flight (closed loop), or the cap with --rate; a list sweeps")
    lo.add_argument("--rate", type=_list(float), default=(), help="open loop, requests per second; a list sweeps")
    lo.add_argument("--arrivals", choices=ARRIVALS, default="poisson",
                    help="arrival process with --rate (default poisson); recorded: the --replay file's timestamps, "
                    "--rate then being a speed factor (2 = twice as fast)")  # fmt: skip
    lo.add_argument("--burstiness", type=float, default=1.0, help="gamma shape (1 = Poisson, < 1 burstier)")
    lo.add_argument("--duration", type=float, help="seconds; arrivals after it are not scheduled, those still waiting are unsent")
    lo.add_argument("--warmup", type=int, default=0, help="first N requests excluded from the headline")
    lo.add_argument("--prewarm", action="store_true", help="fill the prompt cache with each system prompt's static prefix "
                    "before the timed window (client.latency.prewarm; --matrix prewarm=off,on compares)")  # fmt: skip
    lo.add_argument("--ramp", type=float, default=0.0,
                    help="closed loop: seconds over which the slots start, spread evenly (against a jitter-free server, ~one request's duration)")  # fmt: skip
    lo.add_argument("--workers", type=int, default=1, help="client processes (one event loop each); sketches merge exactly")
    lo.add_argument("--cluster", metavar="ADDRESS",
                    help="place the workers on Ray: local:N (a throw-away cluster of N nodes here), auto, ray://HOST:10001 "
                         'or HOST:PORT; needs pip install "latencykit[ray]"')  # fmt: skip
    lo.add_argument("--per-node", type=int, metavar="N", help="with --cluster: worker processes per node (default one per CPU)")
    lo.add_argument("--verbose", action="store_true", help="with --cluster: let Ray's own warnings and log lines through")
    lo.add_argument("--control", type=_share, default=0.0, help="share of requests sent by the thin raw-HTTP reader, interleaved (e.g. 10%%)")
    s = p.add_argument_group("strategies and reports")
    levers = ", ".join(k + "=" + "/".join(v) for k, v in LEVERS.items())
    s.add_argument("--matrix", action="append", default=[], metavar="LEVER=V1,V2", help=f"levers: {levers}")
    s.add_argument("--label", action="append", type=_pair, default=[], metavar="KEY=VALUE", help="free label, e.g. server=int8")
    s.add_argument("--slo", action="append", default=[], help="custom SLO, e.g. ttft<=300ms or e2e:p99<=2s (presets always shown)")
    s.add_argument("--find-max-rate", action="store_true",
                   help="search the highest open-loop rate meeting every --slo: doubling from --rate (default 1/s), then "
                   "bisection, each step long enough to decide; the result in the run file's max_rate")  # fmt: skip
    s.add_argument("--max-duration", type=float, default=300.0, metavar="SECONDS",
                   help="--find-max-rate: the whole search's time bound (default 300 s)")  # fmt: skip
    s.add_argument("--out", help="run file (default bench-<UTC time>.json)")
    s.add_argument("--html", help="also write an HTML report with plots")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.add_argument("--format", choices=FORMATS, default="text",
                   help="report as rich text (default; full width on a pipe), markdown, or json (on stdout; other lines go to stderr)")  # fmt: skip
    e = p.add_argument_group("emulator (in-process target)")
    add_timing_arguments(e, prefix="emu-", default_preset="bench")
    return p


def _writable(path: Path, flag: str) -> None:
    """``ValueError`` unless ``path`` can be written (checked before a run, so its results are never lost)."""
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise ValueError(f"{flag} {path} is a directory; give a file name")
    if not parent.is_dir():
        raise ValueError(f"{flag} {path}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ValueError(f"{flag} {path}: not writable")


def _save(what: str, path: Path, write: Any) -> tuple[Optional[Path], bool]:
    """Write a result: (where it went, whether that is ``path``). On failure, say so on one line and write it
    to the temporary directory instead, so a finished run's results are never lost."""
    try:
        write(path)
        return path, True
    except OSError as exc:
        import tempfile

        fallback = Path(tempfile.gettempdir()) / path.name
        line = f"latencykit bench: cannot write {what} {path}: {exc.strerror or exc}"
        try:
            write(fallback)
        except OSError:
            print(line, file=sys.stderr)
            return None, False
        print(f"{line}; written to {fallback} instead", file=sys.stderr)
        return fallback, False


def _cmd_run(argv: Sequence[str]) -> int:
    from dataclasses import asdict

    from ..emulator._flags import timing_from_args
    from ..bench._config import plan_matrix
    from ..reports._grid import Line, make_console
    from ..reports._report import report_json, report_markdown
    from ..bench._run import BenchConfig, run_bench

    args = _run_parser().parse_args(argv)
    text = args.format == "text"
    console = make_console(stderr=not text)  # markdown and json keep stdout for the document
    try:
        timing = timing_from_args(args, prefix="emu-")
        matrix, notes = plan_matrix(args.matrix)
        matrix = [{**m, "prewarm": "on"} for m in matrix] if args.prewarm else matrix
        traffic = args.traffic or ("replay" if args.replay else "chat")
        if args.find_max_rate and args.duration is not None:
            raise ValueError("--find-max-rate sizes each step itself; bound the whole search with --max-duration")
        if traffic != "sessions" and (args.turns is not None or args.think is not None):
            raise ValueError(f"--{'turns' if args.turns is not None else 'think'} shapes conversations: it needs "
                             f"--traffic sessions (got --traffic {traffic})")  # fmt: skip
        config = BenchConfig(
            target=args.target, base_url=args.base_url, model=args.model, api=args.api,
            per_chunk_usage=args.per_chunk_usage, exact_output=args.exact_output,
            traffic=traffic,
            requests=args.requests, seed=args.seed, documents=args.documents, replay=args.replay,
            replay_format=args.replay_format, tokenizer=args.tokenizer,
            concurrency=args.concurrency, rate=args.rate, arrivals=args.arrivals, burstiness=args.burstiness,
            duration=args.duration, warmup=args.warmup, ramp=args.ramp, matrix=tuple(matrix),
            labels=dict(args.label), workers=args.workers, control=args.control, slos=tuple(args.slo),
            timing=asdict(timing), cluster=args.cluster, per_node=args.per_node,
            turns=4 if args.turns is None else args.turns, think=args.think or "0s",
            find_max_rate=args.find_max_rate, max_duration=args.max_duration,
        )  # fmt: skip
        if config.cluster is not None:
            from ..fleet._cluster import check_cluster, import_ray, parse_cluster

            check_cluster(parse_cluster(config.cluster))  # nothing answering there: one line in a second, without Ray
            import_ray()  # one line naming the install command, before anything starts
        config.levels()  # a bad load level is a usage error now, not after the emulator started
        if config.replay is not None and not Path(config.replay).is_file():
            raise ValueError(f"--replay {config.replay}: no such file")
        out = Path(args.out or time.strftime("bench-%Y%m%dT%H%M%SZ.json", time.gmtime()))
        _writable(out, "--out")
        html = Path(args.html) if args.html else None
        if html is not None:
            _writable(html, "--html")
        for note in notes:
            console.print(Line(note, "note").rich(), highlight=False)
        started = time.perf_counter()
        run = run_bench(config, progress=not args.quiet, console=console, verbose=args.verbose)
    except (ValueError, ImportError) as exc:
        print(f"latencykit bench: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RuntimeError as exc:  # the cluster did not come up, or every worker failed
        print(f"latencykit bench: {exc}", file=sys.stderr)
        return 1
    measured = sum(len(c.samples) for c in run.cells)
    if run.partial and not measured:
        print(f"latencykit bench: {run.partial}; no request had finished, so no run file was written", file=sys.stderr)
        return EXIT_INTERRUPTED
    if text:
        run.report(console)
    elif args.format == "markdown":
        print(report_markdown(run), end="", flush=True)
    saved, saved_ok = _save("the run file", out, run.save)
    page, page_ok = _save("the HTML report", html, lambda p: p.write_text(run.to_html())) if html is not None else (None, True)
    status = 0 if saved_ok and page_ok else EXIT_USAGE
    if args.format == "json":
        doc = {**report_json(run), "run_file": None if saved is None else str(saved), "html": None if page is None else str(page)}
        print(json.dumps(doc, default=str), flush=True)
    if saved is not None:
        console.print(f"run file: {saved} ({time.perf_counter() - started:.1f} s)", highlight=False)
    if page is not None:
        console.print(f"HTML report: {page}", highlight=False)
    if run.partial:
        where = f"; partial results in {saved}" if saved else ""
        print(f"latencykit bench: {run.partial}{where}", file=sys.stderr)
        interrupted = run.partial.startswith("interrupted") or any(
            c.partial and c.partial.get("reason", "").startswith("interrupted") for c in run.cells)
        return EXIT_INTERRUPTED if interrupted else EXIT_PARTIAL
    dead = [c for c in run.cells if c.no_data]
    for c in dead:  # one line each, so a CI log shows why
        print(f"latencykit bench: {c.key} has {c.no_data}", file=sys.stderr)
    found = run.sections.get("max_rate")
    if found is not None and found.get("stopped") == "first step fails":
        at = found["at_first_failing"] or []
        why = "; ".join(f"{v['slo']}: {v['misses']} of {v['n']} missed" for v in at if v["verdict"] == "fail")
        print(f"latencykit bench: --find-max-rate: the first step, {found['start_rps']:g} req/s, already breaks {why}; "
              "start lower with --rate", file=sys.stderr)  # fmt: skip
        return 1
    if found is not None and found.get("rps") is None:
        unfit = found.get("unfit_step")
        if not found.get("steps") and unfit:  # not one step fitted in the bound
            print(f"latencykit bench: --find-max-rate: the first step, {unfit['rate_rps']:g} req/s, needs "
                  f"{unfit['duration_s'] + unfit['warmup_s']:.1f} s (enough requests to decide {', '.join(found.get('slos') or [])}), "
                  f"more than --max-duration {found.get('max_duration_s'):g} s: raise --rate or --max-duration", file=sys.stderr)  # fmt: skip
            return 1
        print(f"latencykit bench: --find-max-rate found no passing rate ({found.get('stopped')})", file=sys.stderr)
        return 1
    return 1 if dead else status


def _cmd_compare(argv: Sequence[str]) -> int:
    from ..bench._cell import BenchRun
    from ..bench._compare import MATCH_LOAD, gate_runs
    from ..reports._grid import FORMATS, Grid, Line, make_console, markdown
    from ..reports._report import comparison_grid, error_grid

    p = argparse.ArgumentParser(prog="latencykit bench compare", description=(
        "Compare two run files side by side; the CI gate. Exit 1 when a gated percentile is slower beyond "
        "--max-regression AND beyond noise (the 95%% confidence intervals do not overlap), when the share of failed "
        "requests rises beyond --max-error-increase AND beyond noise (one-sided Fisher exact test, p < 0.01), when "
        "a cell has no completed request, or when a cell is in one run only; 0 otherwise; 2 on a usage error."))  # fmt: skip
    p.add_argument("base", help="the baseline run file")
    p.add_argument("new", help="the candidate run file")
    p.add_argument("--max-regression", type=_share, default=0.10, help="allowed slow-down (default 10%%)")
    p.add_argument("--metric", action="append", default=[], help="metric:percentile to gate on (default ttft:p99; repeatable)")
    p.add_argument("--max-error-increase", type=_share, default=0.01,
                   help="allowed rise of the failed-request share, in points (default 1%%: 0%% -> 1%%)")  # fmt: skip
    p.add_argument("--match-load", choices=MATCH_LOAD, default="same",
                   help="pair cells at the same load level only (default), or at any level (by label, in sweep order)")  # fmt: skip
    p.add_argument("--allow-missing", action="store_true", help="a cell in one run only is noted, not a failure")
    p.add_argument("--format", choices=FORMATS, default="text", help="text (default; full width on a pipe), markdown or json")
    args = p.parse_args(argv)
    metrics = args.metric or ["ttft:p99"]
    try:
        base, new = BenchRun.load(args.base), BenchRun.load(args.new)
        result = gate_runs(base, new, metrics, max_regression=args.max_regression, max_error_increase=args.max_error_increase,
                           match_load=args.match_load, allow_missing=args.allow_missing,
                           show=("ttft:p50", "ttft:p99", "e2e:p50", "e2e:p99"))  # fmt: skip
    except (ValueError, OSError) as exc:
        print(f"latencykit bench compare: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.format == "json":
        print(json.dumps({"base": args.base, "new": args.new, "emulated": base.emulated or new.emulated, "passed": result.passed,
                          "comparisons": [c.to_dict() for c in result.comparisons], "errors": [e.to_dict() for e in result.errors],
                          "failures": [{"kind": k, "line": line} for k, line in result.failures], "notes": result.notes}))  # fmt: skip
        return 0 if result.passed else 1
    tag = " — EMULATED" if base.emulated or new.emulated else ""
    blocks: list[Any] = []
    if result.comparisons:
        blocks.append(comparison_grid(result.comparisons, f"{args.base} → {args.new}{tag}", "base"))
        blocks.append(error_grid(result.errors, f"failed requests (errors, interrupted streams){tag}", "base"))
    for run, name in ((base, args.base), (new, args.new)):
        if run.partial:
            blocks.append(Line(f"{name} is partial: {run.partial}", "note"))
    blocks += [Line(note, "note") for note in result.notes]
    blocks += [Line(f"{kind} {line}", "error") for kind, line in result.failures]
    if result.passed:
        slower = [r for r in result.gated if (r.change or 0) > args.max_regression]
        note = f" ({len(slower)} slower beyond the threshold but within noise)" if slower else ""
        blocks.append(Line(f"no regression beyond {args.max_regression * 100:g}% and beyond noise{note}; no rise of failed "
                           f"requests beyond {_points(args.max_error_increase)} and beyond noise"))  # fmt: skip
    else:
        blocks.append(Line(f"gate failed: {len(result.failures)} problem(s)", "error"))
    if args.format == "markdown":
        print(markdown(blocks), end="")
    else:
        console = make_console()
        for b in blocks:
            console.print(b.rich() if isinstance(b, (Grid, Line)) else b, highlight=False, soft_wrap=isinstance(b, Line))
    return 0 if result.passed else 1


def _points(share: float) -> str:
    return f"{share * 100:g} percentage point" + ("" if share == 0.01 else "s")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _cmd_merge(argv: Sequence[str]) -> int:
    from ..bench._cell import BenchRun

    p = argparse.ArgumentParser(prog="latencykit bench merge", description=(
        "Combine run files of workers or machines that ran side by side: sketches merge exactly and rates add. "
        "Runs must share traffic, target, model and server timing, and cells their strategy and load; "
        "anything else is refused unless --force."))  # fmt: skip
    p.add_argument("files", nargs="+", help="run files to combine")
    p.add_argument("-o", "--out", required=True, help="the merged run file to write")
    p.add_argument("--force", action="store_true", help="merge runs that differ anyway; the merged file and its report say so")
    p.add_argument("--report", action="store_true", help="print the merged report")
    args = p.parse_args(argv)
    try:
        _writable(Path(args.out), "--out")
        merged = BenchRun.merge([BenchRun.load(f) for f in args.files], force=args.force, names=args.files)
        if isinstance(merged.config.get("experiment"), dict):  # experiment run files: its figures from the merged cells
            from ..experiment._run import ExperimentRun

            merged = ExperimentRun.from_bench(merged).to_bench()
    except (ValueError, OSError) as exc:
        print(f"latencykit bench merge: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not _save("the merged run file", Path(args.out), merged.save)[1]:
        return EXIT_USAGE
    if args.report:
        merged.report()
    requests = sum(len(c.samples) for c in merged.cells)
    forced = f"; FORCED: {len(merged.config['forced'])} difference(s) recorded in the file" if merged.config.get("forced") else ""
    print(f"merged {_plural(len(args.files), 'file')} into {_plural(len(merged.cells), 'cell')}, "
          f"{_plural(requests, 'request')} → {args.out}{forced}")  # fmt: skip
    return 0


def _cmd_emulator(argv: Sequence[str]) -> int:
    from ..emulator import serve
    from ..emulator._flags import add_timing_arguments, timing_from_args

    p = argparse.ArgumentParser(prog="latencykit bench emulator", description="Serve the emulator with every timing knob until Ctrl-C.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000; 0 = any free port)")
    p.add_argument("--seed", type=int, default=0, help="seed of the timing jitter and generated text (default 0)")
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
