"""``python -m latencykit ...``: the ``latencykit`` command, for environments without its script on PATH."""

import sys

from .cli import main

sys.exit(main())
