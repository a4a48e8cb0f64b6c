"""The helper process behind ``--cluster local:N``: N Ray nodes on 127.0.0.1 until told to stop.

``python -m latencykit.fleet._local_ray N CPUS``: starts a head and N-1 more nodes with
``ray.cluster_utils.Cluster`` (every process bound to loopback, no dashboard, a small object
store), prints ``{"address": ...}`` on one line, then waits until its standard input closes or
it gets SIGTERM, and shuts the nodes down. It runs in a session of its own
(`latencykit.fleet._cluster.LocalRayCluster`), so a terminal's Ctrl-C does not reach it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import Any

OBJECT_STORE_BYTES = 80 * 1024 * 1024  # Ray's floor is 75 MiB; the bench moves only small results
SHUTDOWN_GRACE_S = 20.0


def main(argv: list[str]) -> int:
    nodes, cpus = int(argv[0]), int(argv[1])
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # every Ray process on 127.0.0.1
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def watch() -> None:  # the driver closed our stdin (or died): shut down, and never outlive a stuck shutdown
        sys.stdin.read()
        stop.set()
        time.sleep(SHUTDOWN_GRACE_S)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()
    import importlib

    Cluster = importlib.import_module("ray.cluster_utils").Cluster
    args: dict[str, Any] = {"num_cpus": cpus, "include_dashboard": False, "object_store_memory": OBJECT_STORE_BYTES,
            "node_ip_address": "127.0.0.1"}  # fmt: skip
    cluster = Cluster(initialize_head=True, head_node_args=dict(args))
    try:
        for _ in range(nodes - 1):
            if stop.is_set():
                return 1
            cluster.add_node(**args)
        cluster.wait_for_nodes()
        print(json.dumps({"address": cluster.address, "nodes": nodes, "cpus_per_node": cpus}), flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
