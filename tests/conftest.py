"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from watchkeeper_sim import ApiServer


@pytest.fixture
async def apiserver() -> AsyncIterator[ApiServer]:
    """A started simulator on 127.0.0.1 (random port), plain HTTP, quick bookmarks."""
    async with ApiServer(bookmark_interval=0.3, bookmark_lead=0.2, too_large_rv_wait=0.2) as srv:
        yield srv


# Virtual time (looptime) and real loopback sockets: looptime advances the clock after a few
# idle polls, and under CPU load a loopback write may not be readable yet by then, so a 60 s
# request timeout fired in virtual time while the answer was in flight. More idle polls
# before each jump make that window negligible, at a small real-time cost per jump.
LOOPTIME_NOOP_CYCLES = 300


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("looptime") is not None:
            item.add_marker(pytest.mark.looptime(noop_cycles=LOOPTIME_NOOP_CYCLES), append=False)
