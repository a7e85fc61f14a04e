"""``python tests/agent/skewed_cli.py SECONDS ARGS...``: ``nb-durable ARGS`` on a machine whose
clock is SECONDS ahead (negative: behind), for the clock-skew tests of the shared limits.

The offset is applied to ``time.time`` before nb_durable is imported, as a machine whose clock
is off would have it: every wall-clock time the process reads is off by the same amount.
"""

from __future__ import annotations

import runpy
import sys
import time

_offset = float(sys.argv[1])
_real = time.time
time.time = lambda: _real() + _offset
sys.argv = ["nb-durable", *sys.argv[2:]]
runpy.run_module("nb_durable.cli", run_name="__main__", alter_sys=True)
