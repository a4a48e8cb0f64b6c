"""The bench's load placed on a Ray cluster (``--cluster``): addresses, local clusters, clocks and worker actors.

What this package owns: cluster addresses (``_cluster``: ``local:N``, ``auto``, ``ray://HOST:10001``,
``HOST:PORT``) and the throw-away local clusters started for ``local:N`` (``_cluster``,
``_local_ray``), clock offsets between the driver and each worker (``_clock``), the long-lived
worker actors pinned to their nodes (``_actor``) and the driver that places them, deals
them their shares and counts the ones lost (``_fleet``: `Fleet`). Ray is imported only here,
lazily, and needs ``pip install "latencykit[ray]"``. See ``docs/cluster.md``.
"""
