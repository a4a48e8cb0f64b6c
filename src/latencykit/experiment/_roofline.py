"""The physical limit of decoding: memory bandwidth, measured once per run, against the bytes a token reads.

Decoding one token reads every weight once (and the KV cache of the context so far), and on a
CPU or a single-stream GPU it is limited by memory bandwidth, not arithmetic. So the fastest
possible time per output token is

    roofline TPOT = (weight bytes read per token + KV bytes per context token × context) / bandwidth

(`latencykit.experiment._weights` reads the bytes from the model file). The measured TPOT
beside it — the strategy's warm single-stream TPOT: the traffic's first request sent alone
after the traffic (median of 3) — gives the share of the limit reached
(``roofline / measured``; 100 % = memory-bound at full bandwidth). The roofline is for one
sequence: a batch shares each weight read between its sequences, and speculative decoding
verifies several tokens per read, so both may beat it; a draft model's own reads are not in it.

The bandwidth probe (`memory_bandwidth`) is STREAM's *copy* kernel in numpy: ``threads``
threads each copy their own 256 MiB array (far beyond any cache) into another, five times;
bandwidth = (bytes read + bytes written) / the slowest thread's time, the best of the five.
One thread by default, matching a server started with ``-t 1``; a machine's full bandwidth
needs more threads than one core can drive. On a GPU (NVML: ``pip install
"latencykit[gpu]"``), `gpu_bandwidth` gives each device's peak from its memory bus width and
maximum memory clock (two transfers per clock), and a strategy whose server holds GPU memory
is set against that.
"""

from __future__ import annotations

import os
import platform
import threading
import time
from pathlib import Path
from typing import Any, Optional, Sequence

__all__ = ["cpu_name", "gpu_bandwidth", "machine", "memory_bandwidth", "roofline", "strategy_files"]

PROBE_MIB = 256
PROBE_REPEATS = 5


def memory_bandwidth(threads: int = 1, mib: int = PROBE_MIB, repeats: int = PROBE_REPEATS) -> dict[str, Any]:
    """STREAM-like copy on ``threads`` threads (module docstring): ``{"bytes_per_s", "threads", "mib", "repeats", "seconds", "method"}``."""
    import numpy as np

    n = mib * 2**20 // 8
    pairs = [(np.ones(n), np.full(n, 2.0)) for _ in range(threads)]  # both written: the pages exist before the clock starts
    barrier = threading.Barrier(threads)
    times: list[list[float]] = [[] for _ in range(threads)]

    def work(i: int) -> None:
        src, dst = pairs[i]
        for _ in range(repeats):
            barrier.wait()
            t = time.perf_counter()
            np.copyto(dst, src)
            times[i].append(time.perf_counter() - t)

    t0 = time.perf_counter()
    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    rounds = [max(times[i][r] for i in range(threads)) for r in range(repeats)]
    moved = 2 * n * 8 * threads
    return {"bytes_per_s": moved / min(rounds), "threads": threads, "mib": mib, "repeats": repeats,
            "seconds": round(time.perf_counter() - t0, 2), "round_s": rounds,
            "method": f"numpy copy of {mib} MiB float64 arrays per thread, {repeats} rounds, (read + written bytes) / "
                      "the best round's slowest thread"}  # fmt: skip


def gpu_bandwidth() -> tuple[list[dict[str, Any]], str]:
    """Per GPU (NVML) its name and peak bandwidth (bus width / 8 × max memory clock × 2); else ``[]`` and why not."""
    try:
        import pynvml  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return [], 'no pynvml: pip install "latencykit[gpu]"'
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return [], f"NVML: {type(exc).__name__}: {exc}"
    out = []
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            bus = int(pynvml.nvmlDeviceGetMemoryBusWidth(h))
            clock_mhz = int(pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM))
            out.append({"index": i, "name": name.decode() if isinstance(name, bytes) else str(name), "bus_bits": bus,
                        "mem_clock_mhz": clock_mhz, "bytes_per_s": bus / 8 * clock_mhz * 1e6 * 2,
                        "method": "NVML: memory bus width / 8 × max memory clock × 2 (peak, not measured)"})  # fmt: skip
    except Exception as exc:
        return out, f"NVML: {type(exc).__name__}: {exc}"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return out, "" if out else "NVML found no GPU"


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else the platform's word for it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(threads: int = 1) -> dict[str, Any]:
    """The run's machine: CPU, cores, date, the bandwidth probe, and the GPUs' peak bandwidth (or why none)."""
    gpus, note = gpu_bandwidth()
    return {"cpu": cpu_name(), "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "bandwidth": memory_bandwidth(threads), "gpus": gpus, "gpu_note": note}  # fmt: skip


_MODEL = ("-m", "--model")
_DRAFT = ("-md", "--model-draft", "--spec-draft-model")
_KV = {"k": ("-ctk", "--cache-type-k"), "v": ("-ctv", "--cache-type-v"), "kv": ("--kv-cache-dtype",)}


def _flag(argv: Sequence[str], names: Sequence[str]) -> Optional[str]:
    """The value of the first of ``names`` (in their order) on the command line; a Python interpreter's own ``-m``
    (``python -m vllm...``) is not a model."""
    for n in sorted(names, key=lambda n: not n.startswith("--")):
        for i, a in enumerate(argv):
            if a == n and i + 1 < len(argv):
                if n == "-m" and i == 1 and os.path.basename(argv[0]).startswith("python"):
                    continue
                return argv[i + 1]
            if n.startswith("--") and a.startswith(n + "="):
                return a.split("=", 1)[1]
    return None


def strategy_files(argv: Sequence[str], cwd: str, model: Optional[str] = None) -> dict[str, Any]:
    """From a server's command line: its model file (``-m``/``--model``, else ``model``), draft model and KV-cache types."""
    def path(p: Optional[str]) -> Optional[str]:
        return None if p is None else str((Path(cwd) / p).resolve()) if not os.path.isabs(p) else p

    main = _flag(argv, _MODEL) or model
    kv = _flag(argv, _KV["kv"])
    return {"model": path(main), "draft": path(_flag(argv, _DRAFT)), "kv_k": _flag(argv, _KV["k"]) or kv or "f16",
            "kv_v": _flag(argv, _KV["v"]) or kv or "f16"}  # fmt: skip


def roofline(files: dict[str, Any], context: Optional[float], bandwidth: Optional[float], on: str = "cpu") -> dict[str, Any]:
    """The roofline TPOT of one strategy: its model's bytes per token, KV bytes at ``context`` tokens, over ``bandwidth``.

    Returns the figures and their inputs (the run file's ``roofline``), or ``{"error": why}``.
    """
    from ._weights import model_bytes

    if not files.get("model"):
        return {"error": "no model file in the server's command (-m/--model) or the strategy"}
    if not bandwidth:
        return {"error": "no bandwidth measured"}
    try:
        mb = model_bytes(files["model"])
    except ValueError as exc:
        return {"error": str(exc)}
    kv = mb.kv_per_token(str(files.get("kv_k") or "f16"), str(files.get("kv_v") or "f16"))
    kv_bytes = 0.0 if kv is None or not context else kv * context
    total = mb.per_token + kv_bytes
    out: dict[str, Any] = {"model": mb.to_dict(), "kv_types": [files.get("kv_k"), files.get("kv_v")], "kv_bytes_per_context_token": kv,
                           "context_tokens": context, "weight_bytes_per_token": mb.per_token, "kv_bytes_per_token": kv_bytes,
                           "bytes_per_token": total, "bandwidth_bytes_per_s": bandwidth, "on": on,
                           "roofline_tpot_s": total / bandwidth}  # fmt: skip
    if files.get("draft"):
        try:
            out["draft_weight_bytes_per_token"] = model_bytes(files["draft"]).per_token
        except ValueError as exc:
            out["draft_error"] = str(exc)
    return out

