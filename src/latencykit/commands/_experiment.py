"""``latencykit experiment``: run an experiment file; ``--dry-run`` prints its commands; ``--example``.

```
latencykit experiment --example emulator > emulator.toml
latencykit experiment emulator.toml --out runs/emu --html emu.html
latencykit experiment llamacpp.toml --repeat 2 --only q8_0 --only q4_0
latencykit experiment llamacpp.toml --dry-run
latencykit experiment emulator.toml --cluster local:2
latencykit experiment --report runs/emu/experiment.json --html emu.html
```

Exit status: 0 when every strategy ran; 1 when one failed (its reason and log tail are in the
report); 2 for a bad file or argument (one line naming the file, the key and the value; no
server is started); 130 when interrupted (every server it started is stopped first).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

__all__ = ["EXAMPLES", "example", "main", "register"]

EXAMPLES = ("emulator", "llamacpp", "vllm", "quality")


def example(kind: str) -> str:
    """The text of a ready experiment file (``emulator``, ``llamacpp`` or ``vllm``), or ``quality``: the shipped
    prompt set with known answers (JSONL, for ``[quality] file``)."""
    if kind not in EXAMPLES:
        raise ValueError(f"example must be one of {', '.join(EXAMPLES)}; got {kind!r}")
    from importlib.resources import files

    name = "quality-basic.jsonl" if kind == "quality" else f"{kind}.toml"
    return files("latencykit.experiment").joinpath(f"examples/{name}").read_text(encoding="utf-8")


def _repeat(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _parser(prog: str = "latencykit experiment") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=(
        "Run the second source article's strategy table for real: each server configuration in FILE.toml started "
        "on a free port, timed cold and warm, loaded with the same traffic, measured for memory and quality drift "
        "against the baseline, checked against its claimed speed-up, and stopped."))  # fmt: skip
    p.add_argument("file", nargs="?", help="the experiment file (TOML; --example prints one)")
    p.add_argument("--out", help="folder for the run file (experiment.json), server logs and state (default experiment-<UTC time>)")
    p.add_argument("--html", help="also write the HTML report here")
    p.add_argument("--repeat", type=_repeat, help="rounds, interleaved ABBA (default: the file's repeat, else 1)")
    p.add_argument("--only", action="append", default=[], metavar="NAME", help="run this strategy (repeatable; the baseline always runs)")
    p.add_argument("--dry-run", action="store_true", help="print the exact commands, start nothing")
    p.add_argument("--example", choices=EXAMPLES, help="print a ready experiment file and exit (quality: the shipped prompt "
                   "set with known answers, JSONL)")  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--cluster", metavar="ADDRESS", help="send the traffic from Ray workers, as latencykit bench --cluster "
                   '(local:N here: the servers listen on this machine); needs pip install "latencykit[ray]"')  # fmt: skip
    p.add_argument("--per-node", type=_repeat, metavar="N", help="with --cluster: worker processes per node (default one per CPU)")
    p.add_argument("--verbose", action="store_true", help="with --cluster: let Ray's own warnings and log lines through")
    p.add_argument("--report", metavar="RUN.json", help="print the report of an experiment's run file instead of running one "
                   "(any run-file format; --html writes its page too)")  # fmt: skip
    return p


def _report(path: str, html: Optional[str]) -> int:
    """``--report``: an experiment run file's report (and HTML page), as the run printed it."""
    from rich.console import Console

    from ..experiment._run import ExperimentRun

    try:
        run = ExperimentRun.load(path)
        if html is not None:
            Path(html).write_text(run.to_html())
    except (ValueError, OSError) as exc:
        print(f"latencykit experiment: {exc}", file=sys.stderr)
        return 2
    console = Console()
    run.report(console)
    if html is not None:
        console.print(f"HTML report: {html}", highlight=False)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``latencykit experiment ...``; returns the exit status."""
    p = _parser()
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.example:
        sys.stdout.write(example(args.example))
        return 0
    if args.report:
        if args.file:
            print(f"latencykit experiment: give an experiment FILE to run or --report RUN.json, not both (got {args.file!r} "
                  f"and --report {args.report!r})", file=sys.stderr)  # fmt: skip
            return 2
        return _report(args.report, args.html)
    if not args.file:
        p.print_usage(sys.stderr)
        print("latencykit experiment: give an experiment FILE (or --example emulator|llamacpp|vllm)", file=sys.stderr)
        return 2
    from ..experiment._file import ExperimentFileError, load_experiment

    try:
        spec = load_experiment(args.file)
        if args.dry_run:
            unknown = [n for n in args.only if n not in {s.name for s in spec.strategies}]
            if unknown:
                raise ExperimentFileError(f"{spec.source}: --only: no strategy {unknown[0]!r}")
            print("\n".join(spec.plan(args.repeat, args.only)))
            return 0
        from rich.console import Console

        from ..experiment._experiment import experiment

        console = Console()
        if args.cluster is not None:
            from ..fleet._cluster import check_cluster, import_ray, parse_cluster

            check_cluster(parse_cluster(args.cluster))  # a dead address in a second, before any server starts
            import_ray()
        run = experiment(spec, out=args.out, html=args.html, repeat=args.repeat, only=args.only, progress=not args.quiet,
                         console=console, cluster=args.cluster, per_node=args.per_node, verbose=args.verbose)  # fmt: skip
    except (ExperimentFileError, ValueError, ImportError) as exc:
        print(f"latencykit experiment: {exc}", file=sys.stderr)
        return 2
    run.report(console)
    where = Path(run.spec.get("out") or ".") / "experiment.json"
    console.print(f"run file: {where}" + (f"; HTML report: {args.html}" if args.html else ""), highlight=False)
    for s in run.failed:
        print(f"latencykit experiment: strategy {s.name} failed: {s.failed}", file=sys.stderr)
    return 1 if run.failed else 0


class _Run(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:  # fmt: skip
        raise SystemExit(main(list(values)))


def register(subparsers: Any) -> None:
    """Add ``experiment`` to the ``latencykit`` sub-commands (its own parser takes every argument after it)."""
    sp = subparsers.add_parser("experiment", help="run server strategies against a baseline: latency, cold start, memory, quality",
                               add_help=False, prefix_chars="\x00")  # fmt: skip
    sp.add_argument("experiment_args", nargs=argparse.REMAINDER, action=_Run)
