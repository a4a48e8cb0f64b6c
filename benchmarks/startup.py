"""Start-up cost: ``import latencykit`` and the ``latencykit`` command against the SDKs' own import.

Each case runs in a fresh interpreter; the cases are interleaved round by round (so a busy
machine slows them alike) and each reports the median CPU time (user + system, of the child
process) and wall time over the rounds, and the ratio to the SDKs' import measured in the
same run. Module counts come from ``sys.modules`` after the import.

    python benchmarks/startup.py              # 7 rounds
    python benchmarks/startup.py --rounds 15
    python benchmarks/startup.py --against ../old/src   # each latencykit case also from another checkout's
                                                        # src/ (PYTHONPATH), interleaved: before/after side by side

Byte-compile both trees first (``python -m compileall -q src ../old/src``): the runs write no bytecode.

Goals: ``import latencykit`` ≤ 1.10× ``import anthropic, openai``; with the clients touched
(``lk.Anthropic``, ``lk.OpenAI``: the SDKs load) ≤ 1.10× as well; ``latencykit --version``
under 0.3 s wall.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from typing import Optional

CASES = {
    "import anthropic, openai (the SDKs)": [sys.executable, "-c", "import anthropic, openai"],
    "import latencykit": [sys.executable, "-c", "import latencykit"],
    "import latencykit; lk.Anthropic; lk.OpenAI": [sys.executable, "-c", "import latencykit as lk; lk.Anthropic; lk.OpenAI"],
    "latencykit --version": [shutil.which("latencykit") or "latencykit", "--version"],
}
COUNT = "import sys; {}; print(len(sys.modules))"


def measure(cmd: list[str], env: Optional[dict[str, str]] = None) -> tuple[float, float]:
    """(CPU seconds of the child, wall seconds) of one run of ``cmd`` (``env`` added to this process's)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--against", metavar="SRC", help="also run each latencykit case with PYTHONPATH=SRC (another "
                        "checkout's src/), in the same rounds")  # fmt: skip
    args = parser.parse_args()
    runs: dict[str, tuple[list[str], dict[str, str]]] = {name: (cmd, {}) for name, cmd in CASES.items()}
    if args.against:
        for name, cmd in CASES.items():
            if "latencykit" in name:
                runs[f"{name} [--against]"] = (cmd, {"PYTHONPATH": os.path.abspath(args.against)})
    for cmd, env in runs.values():  # warm the file cache once
        measure(cmd, env)
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    wall: dict[str, list[float]] = {k: [] for k in runs}
    names = list(runs)
    for r in range(args.rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            c, w = measure(*runs[name])
            cpu[name].append(c)
            wall[name].append(w)
    base = statistics.median(cpu[names[0]])
    print(f"start-up, {args.rounds} rounds interleaved; medians; ratio = CPU / the SDKs' import CPU in this run")
    if args.against:
        print(f"[--against]: PYTHONPATH={os.path.abspath(args.against)}")
    print(f"{'case':<58} {'CPU s':>7} {'wall s':>7} {'ratio':>6} {'modules':>8}")
    for name in names:
        cmd, env = runs[name]
        modules = "-"
        if cmd[0] == sys.executable:
            out = subprocess.run([sys.executable, "-c", COUNT.format(cmd[-1])], capture_output=True, text=True, check=True,
                                 env={**os.environ, **env})  # fmt: skip
            modules = out.stdout.strip()
        c, w = statistics.median(cpu[name]), statistics.median(wall[name])
        print(f"{name:<58} {c:>7.3f} {w:>7.3f} {c / base:>6.2f} {modules:>8}")
    print("goals: import latencykit <= 1.10x the SDKs (also with the clients touched); latencykit --version < 0.3 s wall")


if __name__ == "__main__":
    main()
