"""Which object to reconcile next, and when: deduplicated, earliest time wins.

An object is never handed out while it is being reconciled; a request that arrives
meanwhile is kept and handed out once the running reconcile finishes.

Requests come in two kinds: a change seen in a watch (``changed=True``) and a timer (a
requeue, a failure's backoff). When more are due than the workers can take, changes go
first, with one timer in every ``TIMER_SHARE`` hand-outs so no timer waits forever: an
overloaded controller answers what just happened (an object handed over from another
shard, a user's edit) before its periodic re-checks, as controller-runtime's priority
queue does, instead of serving them behind minutes of overdue requeues.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Callable

from watchkeeper.controller.action import ObjectRef

DUE_SLACK = 0.001  # seconds
TIMER_SHARE = 5  # while both kinds are due, every 5th hand-out is a timer's

_Entry = tuple[float, int, ObjectRef]


class Scheduler:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._due: dict[ObjectRef, tuple[float, bool]] = {}  # one pending (time, changed)
        self._heaps: dict[bool, list[_Entry]] = {True: [], False: []}  # by changed
        self._seq = itertools.count()
        self._running: set[ObjectRef] = set()
        self._blocked: dict[ObjectRef, tuple[_Entry, bool]] = {}  # due while running
        self._wake = asyncio.Event()
        self._handed = 0  # hand-outs while both kinds were due
        self.closed = False

    def __len__(self) -> int:
        """Pending requests (the queue depth)."""
        return len(self._due)

    @property
    def running(self) -> int:
        return len(self._running)

    def schedule(self, ref: ObjectRef, delay: float = 0.0, *, changed: bool = False) -> None:
        """Ask for a reconcile of ``ref`` in ``delay`` seconds; an earlier pending one wins,
        and a pending request becomes a change's if either was one."""
        when = self._clock() + max(0.0, delay)
        current = self._due.get(ref)
        if current is not None:
            if current[0] <= when and (current[1] or not changed):
                return
            when, changed = min(when, current[0]), changed or current[1]
        self._due[ref] = (when, changed)
        heapq.heappush(self._heaps[changed], (when, next(self._seq), ref))
        self._wake.set()

    def cancel(self, ref: ObjectRef) -> None:
        self._due.pop(ref, None)  # its heap entry is skipped lazily

    def done(self, ref: ObjectRef) -> None:
        """The reconcile of ``ref`` finished: requests kept meanwhile may now run."""
        self._running.discard(ref)
        kept = self._blocked.pop(ref, None)
        if kept is not None:
            heapq.heappush(self._heaps[kept[1]], kept[0])
        self._wake.set()

    def close(self) -> None:
        self.closed = True
        self._wake.set()

    def _pop_due(self, changed: bool, now: float) -> ObjectRef | None:
        """The first valid due entry of one kind (dropping stale ones), or None."""
        heap = self._heaps[changed]
        while heap and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            when, _, ref = entry
            if self._due.get(ref) != (when, changed):
                continue  # superseded by an earlier request, or cancelled
            if ref in self._running:
                self._blocked[ref] = (entry, changed)  # back when its reconcile ends
                continue
            del self._due[ref]
            self._running.add(ref)
            return ref
        return None

    def _due_now(self, changed: bool, now: float) -> bool:
        heap = self._heaps[changed]
        return bool(heap) and heap[0][0] <= now

    async def next(self) -> ObjectRef | None:
        """The next due object not already running; None once closed."""
        while not self.closed:
            # Due within a millisecond counts as due: timers may fire a hair early (asyncio
            # allows its clock resolution; virtual clocks round to ticks), and waiting out
            # a sub-tick remainder would spin (seen: a test stuck at 100 % CPU).
            now = self._clock() + DUE_SLACK
            first = True
            if self._due_now(True, now) and self._due_now(False, now):
                self._handed += 1
                first = self._handed % TIMER_SHARE != 0
            ref = self._pop_due(first, now) or self._pop_due(not first, now)
            if ref is not None:
                return ref
            self._wake.clear()
            tops = [h[0][0] for h in self._heaps.values() if h]
            timeout = min(tops) - self._clock() if tops else None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):  # not wait_for: it can eat a cancel
                    await self._wake.wait()
        return None
