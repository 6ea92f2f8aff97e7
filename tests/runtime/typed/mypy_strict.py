"""``mypy --strict`` on one file, in this process, for the tests that plant type errors."""

from __future__ import annotations

import sys
from pathlib import Path

from mypy import api as mypy_api


def run_mypy(path: Path, cache: Path) -> tuple[str, int]:
    """mypy's output and exit status for ``path`` (``cache``: its cache folder)."""
    limit = sys.getrecursionlimit()  # mypy raises it for the whole process: put it back,
    try:  # tests of deep-nesting limits (test_config_hostile) run in this process too
        out, err, status = mypy_api.run(["--strict", "--no-error-summary", "--cache-dir",
                                         str(cache), str(path)])
    finally:
        sys.setrecursionlimit(limit)
    return out + err, status
