"""Instructions per async call, raw SDK vs latencykit: what the async rows' CPU ratio is made of.

The async rows (`overhead_async`) compare client CPU *time*. On a shared VM that is noisy, and it
mixes two things: how many instructions a call runs, and how fast they run (instructions per
cycle: cache misses, branch predictors, which CPython's bytecode dispatch leans on). This script
separates them. It counts the instructions of each client with Valgrind's callgrind, which is
deterministic (two runs agree to ~0.03 %, with ASLR off and a fixed hash seed), and times the same
code natively beside it.

Each client (raw SDK, latencykit with its defaults) runs 30-token async streams, 16 in flight, their
bytes replayed in process from what the emulator answered (`overhead_parts.Replay`, no sockets). It
runs in a child process twice, with `SHORT` and `LONG` windows of 16 calls, and the difference over
the extra calls is the count per call: start-up and imports cancel out.

Columns: instructions per call (millions) and their ratio, latencykit / raw; CPU µs per call
natively (one child per client, `TIMED` windows) and that ratio. Read them together: a time ratio
well above the instruction ratio means latencykit's cost is in how its code runs between the SDK's
(`overhead_interference`), not in what it does.

    python benchmarks/overhead_instructions.py                    # three forms, ~15 min
    python benchmarks/overhead_instructions.py --form 'messages.create(stream'
    python benchmarks/overhead_instructions.py --l2 --form 'messages.create(stream'

``--l2`` counts, with Valgrind's cachegrind instead, the misses per call of this machine's L2
cache (its size, ways and line read from ``/sys/devices/system/cpu/cpu0/cache``; L1 likewise),
instructions and data together, for each client. Free of the machine's noise (two runs agree
within ~10 %: each records its answers anew, and memory layout moves), it shows what the time
column alone cannot: where latencykit's few extra instructions cost far
more than their share, its code and data have pushed the call's working set past the L2. (On an
AMD EPYC with a 1 MB L2, before the #39 changes: 2,834 misses per call for the raw SDK, 6,165
for latencykit; with the L2 simulated at 2 MB, about 0 and 100. After them: 2,663-3,007 and
5,990-6,085 at 1 MB (two runs). The extra misses remain; the stream events latencykit now builds directly save more than
they cost, and its CPU time per call is below the SDK's.)

Needs ``valgrind`` (Debian: ``apt-get install valgrind``); ``setarch -R`` where present.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SHORT, LONG, TIMED = 4, 20, 200
"""Windows of 16 calls: the two callgrind runs, and the native timing run."""
FORMS = {
    "anthropic messages.create(stream=True)": ("anthropic", "messages_stream"),
    "anthropic messages.stream()": ("anthropic", "messages_helper"),
    "openai chat.completions.create(stream=True)": ("openai", "chat_stream"),
}


def _client(kind: str, provider: str, base: str, replay: Any) -> Any:
    import anthropic
    import httpx2
    import openai

    import latencykit as lk

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(replay))
    if provider == "anthropic":
        cls: Any = anthropic.AsyncAnthropic if kind == "raw" else lk.AsyncAnthropic
        url = base
    else:
        cls, url = (openai.AsyncOpenAI if kind == "raw" else lk.AsyncOpenAI), base + "/v1"
    extra = {} if kind == "raw" else {"recorder": lk.Recorder(max_calls=100)}
    return cls(base_url=url, api_key="k", max_retries=0, http_client=http, **extra)


def _child(answers: str, kind: str, form: str, windows: int) -> None:
    """Run ``windows`` windows of 16 calls after a warm-up; print CPU µs per call."""
    import overhead_async
    from overhead_parts import Replay

    saved = pickle.loads(Path(answers).read_bytes())
    replay = Replay(saved["base"])
    replay.answers = saved["answers"]
    provider, name = FORMS[form]
    call = getattr(overhead_async, name)
    client = _client(kind, provider, saved["base"], replay)

    async def main() -> float:
        for _ in range(3):
            await asyncio.gather(*(call(client) for _ in range(overhead_async.IN_FLIGHT)))
        gc.freeze()
        start = time.process_time()
        for _ in range(windows):
            await asyncio.gather(*(call(client) for _ in range(overhead_async.IN_FLIGHT)))
        return (time.process_time() - start) / (windows * overhead_async.IN_FLIGHT)

    print(f"{asyncio.run(main()) * 1e6:.1f}")


def _record(base: str, path: Path) -> None:
    """Ask the emulator once for every answer the forms need, and keep them in ``path``."""
    from overhead_parts import Replay

    replay = Replay(base)

    async def ask() -> None:
        import overhead_async

        for form, (provider, name) in FORMS.items():
            for kind in ("raw", "lk"):
                client = _client(kind, provider, base, replay)
                await getattr(overhead_async, name)(client)
                await client.close()

    asyncio.run(ask())
    path.write_bytes(pickle.dumps({"base": base, "answers": replay.answers}))


def _valgrind(tool: list[str], pattern: str, answers: Path, kind: str, form: str, windows: int) -> int:
    """The count ``pattern`` reads from Valgrind's report of one child run under ``tool``."""
    cmd = ["valgrind", *tool, sys.executable, __file__, "--child", str(answers), kind, form, str(windows)]
    if shutil.which("setarch"):
        cmd = ["setarch", subprocess.check_output(["uname", "-m"], text=True).strip(), "-R", *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"}, check=True)
    found = re.search(pattern, done.stderr)
    if found is None:
        raise RuntimeError(f"{tool[0]} said no count:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def _instructions(answers: Path, kind: str, form: str, windows: int) -> int:
    """Instructions of one child run (callgrind)."""
    return _valgrind(["--tool=callgrind", "--callgrind-out-file=/dev/null"], r"Collected : (\d+)", answers, kind, form, windows)


def _cache(index: int) -> str:
    """Cachegrind's ``size,ways,line`` of this machine's cache ``index`` (sysfs: 0 L1d, 1 L1i, 2 L2)."""
    root = Path(f"/sys/devices/system/cpu/cpu0/cache/index{index}")
    size = (root / "size").read_text().strip()
    kib = int(size[:-1]) * (1024 if size.endswith("K") else 1024 * 1024) if size[-1] in "KM" else int(size)
    return f"{kib},{(root / 'ways_of_associativity').read_text().strip()},{(root / 'coherency_line_size').read_text().strip()}"


def _l2_misses(answers: Path, kind: str, form: str, windows: int) -> int:
    """L2 misses (instructions and data) of one child run, this machine's caches simulated by cachegrind."""
    caches = [f"--D1={_cache(0)}", f"--I1={_cache(1)}", f"--LL={_cache(2)}"]
    tool = ["--tool=cachegrind", "--cache-sim=yes", "--cachegrind-out-file=/dev/null", *caches]
    return _valgrind(tool, r"LL misses:\s+([\d,]+)", answers, kind, form, windows)


def _per_call(answers: Path, kind: str, form: str, count: Any = None) -> float:
    count = count or _instructions
    return (count(answers, kind, form, LONG) - count(answers, kind, form, SHORT)) / ((LONG - SHORT) * 16)


def _timed(answers: Path, kind: str, form: str) -> float:
    out = subprocess.run([sys.executable, __file__, "--child", str(answers), kind, form, str(TIMED)],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return float(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--form", default=None, help="forms whose name contains this text only")
    parser.add_argument("--l2", action="store_true", help="count L2 misses per call (cachegrind, this machine's caches) instead")
    parser.add_argument("--child", nargs=4, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        answers, kind, form, windows = args.child
        _child(answers, kind, form, int(windows))
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (Debian: apt-get install valgrind)")
    import overhead

    forms = [f for f in FORMS if args.form is None or args.form in f]
    with tempfile.TemporaryDirectory() as tmp, overhead.emulator_process() as base:
        answers = Path(tmp) / "answers.pkl"
        _record(base, answers)
        if args.l2:
            print(f"L2 misses per 30-token async call, 16 in flight, bytes replayed in process (cachegrind, L2 {_cache(2)}: "
                  f"{LONG}−{SHORT} windows of 16 calls)")  # fmt: skip
            print(f"{'call':44s} {'raw':>7s} {'lk':>7s} {'ratio':>6s}")
            for form in forms:
                l2 = {kind: _per_call(answers, kind, form, _l2_misses) for kind in ("raw", "lk")}
                print(f"{form:44s} {l2['raw']:7.0f} {l2['lk']:7.0f} {l2['lk'] / l2['raw']:6.3f}")
            return
        print(f"instructions per 30-token async call, 16 in flight, bytes replayed in process (callgrind: "
              f"{LONG}−{SHORT} windows of 16 calls); CPU time natively ({TIMED} windows)")  # fmt: skip
        print(f"{'call':44s} {'raw M':>7s} {'lk M':>7s} {'ratio':>6s}   {'raw µs':>7s} {'lk µs':>7s} {'ratio':>6s}")
        for form in forms:
            ir = {kind: _per_call(answers, kind, form) for kind in ("raw", "lk")}
            cpu = {kind: _timed(answers, kind, form) for kind in ("raw", "lk")}
            print(f"{form:44s} {ir['raw'] / 1e6:7.3f} {ir['lk'] / 1e6:7.3f} {ir['lk'] / ir['raw']:6.3f}   "
                  f"{cpu['raw']:7.1f} {cpu['lk']:7.1f} {cpu['lk'] / cpu['raw']:6.3f}")  # fmt: skip


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
