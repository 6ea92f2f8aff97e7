"""The optional C part of the watch stream (``watchkeeper/_speedups.c``, issue 25).

Built with the package when a C compiler is at hand (``hatch_build.py``); without it, or
with ``WATCHKEEPER_PURE_PYTHON=1`` in the environment, the stream runs its Python code,
which takes and refuses the same bytes (the C answers None wherever the Python must
decide). ``ACTIVE`` says which path runs (``watchkeeper version`` shows it).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

speedups: ModuleType | None
try:
    if os.environ.get("WATCHKEEPER_PURE_PYTHON", "") not in ("", "0"):
        raise ImportError("WATCHKEEPER_PURE_PYTHON is set")
    # By name: a compiled module has no source for the import linter, which would take the
    # import for one of the whole ``watchkeeper`` package (and the simulator may not).
    speedups = importlib.import_module("watchkeeper._speedups")
except ImportError:
    speedups = None

ACTIVE = speedups is not None
