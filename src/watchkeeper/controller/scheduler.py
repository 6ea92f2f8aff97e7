"""Which object to reconcile next, and when: deduplicated, earliest time wins.

An object is never handed out while it is being reconciled; a request that arrives
meanwhile is kept and handed out once the running reconcile finishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Callable

from watchkeeper.controller.action import ObjectRef

DUE_SLACK = 0.001  # seconds


class Scheduler:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._due: dict[ObjectRef, float] = {}  # the one pending time per object
        self._heap: list[tuple[float, int, ObjectRef]] = []
        self._seq = itertools.count()
        self._running: set[ObjectRef] = set()
        self._blocked: dict[ObjectRef, tuple[float, int, ObjectRef]] = {}  # due while running
        self._wake = asyncio.Event()
        self.closed = False

    def __len__(self) -> int:
        """Pending requests (the queue depth)."""
        return len(self._due)

    @property
    def running(self) -> int:
        return len(self._running)

    def schedule(self, ref: ObjectRef, delay: float = 0.0) -> None:
        """Ask for a reconcile of ``ref`` in ``delay`` seconds; an earlier pending one wins."""
        when = self._clock() + max(0.0, delay)
        current = self._due.get(ref)
        if current is not None and current <= when:
            return
        self._due[ref] = when
        heapq.heappush(self._heap, (when, next(self._seq), ref))
        self._wake.set()

    def cancel(self, ref: ObjectRef) -> None:
        self._due.pop(ref, None)  # its heap entry is skipped lazily

    def done(self, ref: ObjectRef) -> None:
        """The reconcile of ``ref`` finished: requests kept meanwhile may now run."""
        self._running.discard(ref)
        entry = self._blocked.pop(ref, None)
        if entry is not None:
            heapq.heappush(self._heap, entry)
        self._wake.set()

    def close(self) -> None:
        self.closed = True
        self._wake.set()

    async def next(self) -> ObjectRef | None:
        """The next due object not already running; None once closed."""
        while not self.closed:
            # Due within a millisecond counts as due: timers may fire a hair early (asyncio
            # allows its clock resolution; virtual clocks round to ticks), and waiting out
            # a sub-tick remainder would spin (seen: a test stuck at 100 % CPU).
            now = self._clock() + DUE_SLACK
            while self._heap and self._heap[0][0] <= now:
                entry = heapq.heappop(self._heap)
                when, _, ref = entry
                if self._due.get(ref) != when:
                    continue  # superseded by an earlier request, or cancelled
                if ref in self._running:
                    self._blocked[ref] = entry  # back in the heap when its reconcile ends
                    continue
                del self._due[ref]
                self._running.add(ref)
                return ref
            self._wake.clear()
            timeout = self._heap[0][0] - self._clock() if self._heap else None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):  # not wait_for: it can eat a cancel
                    await self._wake.wait()
        return None
