"""Running a scenario on a virtual-time event loop, for hypothesis tests (one fresh loop per
example: pytest-asyncio's loop is not made per example)."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

import looptime


def run_virtual(coro: Coroutine[Any, Any, None]) -> None:
    """Run ``coro`` to its end on a new looptime loop starting at 0.0 (a schedule with
    outages of seconds costs milliseconds of wall-clock time)."""
    loop = looptime.new_event_loop(start=0.0, noop_cycles=300)  # see tests/conftest.py
    try:
        loop.run_until_complete(coro)
    finally:
        loop.close()
