"""The ``latencykit`` sub-commands: their arguments, exit statuses and what they print.

What this package owns: ``latencykit bench`` with ``compare``, ``merge`` and ``emulator``
(``_bench``), ``latencykit experiment`` (``_experiment``), ``latencykit demo`` (``_demo``) and
``latencykit doctor`` (``_doctor``). `latencykit.cli` builds the parser and dispatches here. A
command may import every other package (it is the top layer below `latencykit.cli`); nothing in
the library imports a command.
"""
