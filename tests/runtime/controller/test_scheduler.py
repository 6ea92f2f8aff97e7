"""The scheduler on virtual time (looptime): exact hand-out times for dedupe, earliest
deadline wins, delays, one reconcile per object at a time, cancel and close."""

from __future__ import annotations

import asyncio

import pytest

from watchkeeper.controller import ObjectRef
from watchkeeper.controller.scheduler import Scheduler

pytestmark = pytest.mark.looptime

A, B, C = ObjectRef("ns", "a"), ObjectRef("ns", "b"), ObjectRef(None, "c")


def now() -> float:
    return asyncio.get_running_loop().time()


def scheduler() -> Scheduler:
    return Scheduler(asyncio.get_running_loop().time)


async def take(s: Scheduler) -> tuple[ObjectRef | None, float]:
    """The next ref and the virtual time it was handed out at."""
    ref = await s.next()
    return ref, now()


async def nothing_within(s: Scheduler, seconds: float) -> bool:
    """True if ``next()`` hands nothing out for ``seconds`` (virtual)."""
    try:
        await asyncio.wait_for(s.next(), seconds)
    except TimeoutError:
        return True
    return False


async def test_requests_for_one_object_are_deduplicated() -> None:
    s = scheduler()
    for _ in range(3):
        s.schedule(A)
    s.schedule(B)
    assert len(s) == 2
    assert await take(s) == (A, 0)
    assert await take(s) == (B, 0)
    assert len(s) == 0 and s.running == 2
    assert await nothing_within(s, 100)


async def test_delays_hand_out_in_deadline_order_at_their_exact_times() -> None:
    s = scheduler()
    s.schedule(A, 5)
    s.schedule(B, 2)
    s.schedule(C, -1)  # a negative delay is "now"
    assert await take(s) == (C, 0)
    assert await take(s) == (B, 2)
    assert await take(s) == (A, 5)


async def test_the_earliest_deadline_wins() -> None:
    s = scheduler()
    s.schedule(A, 10)
    s.schedule(A, 3)  # earlier: replaces the pending one
    s.schedule(A, 8)  # later: ignored
    assert len(s) == 1
    assert await take(s) == (A, 3)
    assert await nothing_within(s, 20)  # the superseded 10 s entry is not handed out too


async def test_a_request_that_arrives_while_waiting_wakes_the_waiter() -> None:
    s = scheduler()
    s.schedule(A, 100)
    waiter = asyncio.ensure_future(take(s))
    await asyncio.sleep(4)
    s.schedule(B, 1)  # due at 5, before A
    assert await waiter == (B, 5)
    assert await take(s) == (A, 100)


async def test_an_object_is_never_handed_out_while_it_runs() -> None:
    s = scheduler()
    s.schedule(A)
    assert await take(s) == (A, 0)
    s.schedule(A)  # a change arrives while A is being reconciled: kept, not handed out
    s.schedule(B, 1)
    assert await take(s) == (B, 1)
    assert await nothing_within(s, 10)  # now 11
    s.done(A)  # A's reconcile ended: the kept request runs now
    assert await take(s) == (A, 11)


async def test_a_kept_request_still_waits_for_its_own_time() -> None:
    s = scheduler()
    s.schedule(A)
    await take(s)
    s.schedule(A, 10)  # e.g. Action.requeue(10) while running
    await asyncio.sleep(2)
    s.done(A)
    assert await take(s) == (A, 10)


async def test_cancel_drops_the_pending_request() -> None:
    s = scheduler()
    s.schedule(A, 5)
    s.schedule(B, 6)
    s.cancel(A)  # the object was deleted
    s.cancel(C)  # nothing pending: nothing to do
    assert len(s) == 1
    assert await take(s) == (B, 6)
    s.schedule(A, 1)  # a later request for it counts again
    assert await take(s) == (A, 7)


async def test_close_ends_every_waiter_with_none() -> None:
    s = scheduler()
    s.schedule(A, 50)
    waiters = [asyncio.ensure_future(take(s)) for _ in range(2)]
    await asyncio.sleep(3)
    s.close()
    assert await asyncio.gather(*waiters) == [(None, 3), (None, 3)]
    assert s.closed and await s.next() is None
    assert len(s) == 1  # pending requests are not handed out after close


async def test_due_within_the_slack_counts_as_due() -> None:
    """A timer firing a hair early must not spin waiting out a sub-tick remainder."""
    clock = [0.0]
    s = Scheduler(lambda: clock[0])
    s.schedule(A, 1.0)
    clock[0] = 1.0 - 0.0005  # half a millisecond early
    assert await asyncio.wait_for(s.next(), 0.01) == A


async def test_changes_go_before_overdue_timers_but_timers_are_not_starved() -> None:
    """20 overdue requeues, then 20 changes: the changes are handed out first, with one
    timer in every TIMER_SHARE hand-outs; every timer still comes out."""
    from watchkeeper.controller.scheduler import TIMER_SHARE

    s = scheduler()
    timers = [ObjectRef("t", str(i)) for i in range(20)]
    changes = [ObjectRef("c", str(i)) for i in range(20)]
    for ref in timers:
        s.schedule(ref, 0.0)
    await asyncio.sleep(30)  # long overdue
    for ref in changes:
        s.schedule(ref, 0.0, changed=True)
    order = []
    for _ in range(40):
        ref, _t = await take(s)
        assert ref is not None
        order.append(ref)
        s.done(ref)
    first = order[:TIMER_SHARE * 4]
    assert sum(r in timers for r in first) == 4  # one in every TIMER_SHARE
    assert set(order[:25]) >= set(changes)  # all changes within the first 25 of 40
    assert set(order) == set(timers) | set(changes)


async def test_a_change_upgrades_a_pending_timer_and_keeps_the_earlier_time() -> None:
    s = scheduler()
    s.schedule(A, 5.0)  # a requeue in 5 s
    s.schedule(B, 0.0)  # an overdue timer
    s.schedule(A, 10.0, changed=True)  # a change with a (long) debounce: A is a change now
    await asyncio.sleep(6)
    s.schedule(C, 0.0)
    got = [(await take(s))[0] for _ in range(3)]
    assert got[0] == A  # a change, due at 5 s (the earlier time), before both timers
    assert set(got[1:]) == {B, C}
    assert len(s) == 0
