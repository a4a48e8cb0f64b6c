"""A misbehaving server for the experiment tests: ``python _exp_server.py --port P MODE``.

Modes: ``ok`` (the emulator, fast timing), ``exit`` (prints, exits 3 at once), ``hang`` (prints,
never listens), ``die`` (serves, then exits 7 after ``--after`` seconds), ``stubborn`` (serves,
ignores SIGTERM), ``forks`` (serves, after starting a child in a session of its own that
sleeps: a descendant that left the process group).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time


def main() -> None:
    """Run one mode."""
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--after", type=float, default=1.0)
    p.add_argument("--time-scale", type=float, default=0.05)
    p.add_argument("mode", choices=("ok", "exit", "hang", "die", "stubborn", "forks"))
    a = p.parse_args()
    print(f"helper {a.mode} starting on port {a.port}", flush=True)
    if a.mode == "exit":
        print("fatal: cannot load the model (on purpose)", flush=True)
        sys.exit(3)
    if a.mode == "hang":
        print("loading weights forever", flush=True)
        time.sleep(3600)
    if a.mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if a.mode == "forks":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
        print(f"started escaped child {child.pid}", flush=True)
    from latencykit.emulator import Emulator, TimingModel

    emu = Emulator(timing=TimingModel(time_scale=a.time_scale, output_tokens=16), port=a.port).start()
    print(f"listening on {emu.base_url}", flush=True)
    if a.mode == "die":
        def die() -> None:
            time.sleep(a.after)
            print("crashed: out of memory (on purpose)", flush=True)
            os._exit(7)

        threading.Thread(target=die, daemon=True).start()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
