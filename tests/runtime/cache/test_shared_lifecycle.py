"""Shared watches (issue 21 items 3 and 5) against the simulator: a watch acquired while
its last holder releases it runs again, whatever the interleaving of acquire, release,
subscribe and controller stops; a released key leaves nothing behind (memory)."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import os
import time
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import watchkeeper as wk
from watchkeeper.client._http1 import ResponseProtocol
from watchkeeper_sim import ApiServer

NS = "default"


def cm(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NS, "labels": labels}, "data": {}}


def config(**kw: Any) -> wk.ControllerConfig:
    return wk.ControllerConfig(handle_signals=False, **kw)


async def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.01)


async def ticks(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def receives(events: wk.Subscription, name: str, timeout: float = 10.0) -> None:
    """Read ``events`` until an Apply or InitApply of ``name`` comes."""
    async with asyncio.timeout(timeout):
        async for ev in events:
            if isinstance(ev, wk.Apply | wk.InitApply) and ev.name == name:
                return
    raise AssertionError(f"the subscription ended before {name!r} came")


@pytest.fixture
async def srv() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        yield server


# -- acquire while the last holder releases -------------------------------------------------


async def test_a_watch_acquired_while_its_last_holder_releases_it_runs(srv: ApiServer) -> None:
    """The release's stop awaits the task's cancellation; an acquire in those ticks used to
    find the task not yet done, start nothing, and hold a watch that never ran again."""
    srv.create_object(cm("before"))
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        shared = wk.SharedWatches.of(client)
        watch = shared.watch(api)
        for n in range(8):  # the stop takes a few ticks: acquire after each of them
            first = watch.acquire()
            await first.store.wait_until_ready(timeout=10)
            releasing = asyncio.create_task(first.release())
            await ticks(n)
            again = watch.acquire()
            events = again.subscribe()  # taken during the stop: must not be closed by it
            await releasing
            await again.store.wait_until_ready(timeout=10)
            await api.create(cm(f"after{n}"))
            await receives(events, f"after{n}")
            assert not events.closed and watch.running
            events.close()
            await again.release()
        assert shared.watches() == [] and shared._watches == {}
        await eventually(lambda: srv.open_watches == 0)


async def test_a_new_consumer_during_a_stop_shares_the_stopping_watch(srv: ApiServer) -> None:
    """A consumer that looks the key up during the stop used to make a second watch beside
    the stopping one, whose task name the supervisor still ran: ValueError."""
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        shared = wk.SharedWatches.of(client)
        first = shared.acquire(api)
        await first.store.wait_until_ready(timeout=10)
        releasing = asyncio.create_task(first.release())
        await ticks(1)
        second = shared.acquire(api)  # the registry's lookup, not the watch object
        assert second.store is first.store and second.stopping and not second.running
        await releasing
        assert second.running and shared.watches() == [second._watch]
        await second.store.wait_until_ready(timeout=10)
        await second.release()


async def test_acquire_and_release_during_one_stop_and_two_stops_leave_nothing_running(
    srv: ApiServer,
) -> None:
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        shared = wk.SharedWatches.of(client)
        one, two = shared.acquire(api), shared.acquire(api)
        await one.store.wait_until_ready(timeout=10)
        await eventually(lambda: srv.open_watches == 1)
        await one.release()
        stop1 = asyncio.create_task(two.release())  # refs 0: the stop begins
        await ticks(1)
        three = shared.acquire(api)  # during the stop: it would start again...
        sub = three.subscribe()
        stop2 = asyncio.create_task(three.release())  # ...but refs is 0 again: a 2nd stop
        await asyncio.wait_for(asyncio.gather(stop1, stop2), 10)
        assert sub.closed  # its handle went: closed like any subscription of the last one
        assert not three.running and shared._watches == {} and shared.watches() == []
        sup = shared.supervisor
        assert sup is not None and sup.statuses() == []  # the ended task is forgotten
        await eventually(lambda: srv.open_watches == 0)


async def test_a_releaser_cancelled_during_the_stop_does_not_strand_the_next_holder(
    srv: ApiServer,
) -> None:
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        watch = wk.SharedWatches.of(client).watch(api)
        first = watch.acquire()
        await first.store.wait_until_ready(timeout=10)
        releasing = asyncio.create_task(first.release())
        await ticks(1)
        again = watch.acquire()
        releasing.cancel()  # the stop's own bookkeeping must not depend on this task
        await asyncio.gather(releasing, return_exceptions=True)
        await again.store.wait_until_ready(timeout=10)
        async with again.subscribe() as events:
            await api.create(cm("after"))
            await receives(events, "after")
        assert watch.running
        await again.release()


async def test_a_controller_started_while_another_stops_reconciles_and_is_never_falsely_healthy(
    srv: ApiServer,
) -> None:
    """Two controllers on one Client, the second started a few loop ticks after the first
    is told to stop: its watch used to stay dead (no reconcile, store never ready) while
    its health said healthy. Its health must not be healthy while its watch is down."""
    srv.create_object(cm("x"))
    during_stop = 0  # ticks at which b held the watch while a's stop of it was under way
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        for n in range(16):  # when b comes during a's stop depends on a's shutdown steps
            a, b = wk.Controller(api, config()), wk.Controller(api, config())
            seen_a: Counter[str] = Counter()
            seen_b: Counter[str] = Counter()
            stop_a, stop_b = asyncio.Event(), asyncio.Event()
            ta = asyncio.create_task(a.run(recorder(seen_a), stop=stop_a))
            await eventually(lambda: seen_a["x"] >= 1)  # noqa: B023
            stop_a.set()
            await ticks(n)
            tb = asyncio.create_task(b.run(recorder(seen_b), stop=stop_b))
            falsely_healthy: list[str] = []
            trig = b.triggers[0]
            for _ in range(50):  # a's stop, b's acquire, the restart: tick by tick
                held = trig.shared is not None and not trig.shared.released
                if held and not trig.watch.running:
                    during_stop += 1
                    if b.health().state is wk.WatchState.HEALTHY:
                        falsely_healthy.append(f"after {n} ticks: {b.health()}")
                await asyncio.sleep(0)
            await asyncio.wait_for(ta, 10)
            await api.create(cm(f"new{n}"))
            await eventually(lambda: seen_b[f"new{n}"] >= 1 and seen_b["x"] >= 1)  # noqa: B023
            assert b.store.ready and trig.watch.running
            assert b.health().state is wk.WatchState.HEALTHY
            assert falsely_healthy == []
            stop_b.set()
            await asyncio.wait_for(tb, 10)
            await api.delete(f"new{n}")
    assert during_stop > 0  # the sweep did start b during a's stop


def recorder(seen: Counter[str]) -> Callable[[dict[str, Any], Any], wk.Action]:
    def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        seen[wk.meta.name(obj)] += 1
        return wk.Action.await_change()

    return reconcile


# -- any interleaving (hypothesis) -----------------------------------------------------------

# Two keys (all configmaps; those labelled app=x), in the config a Controller uses, so the
# handles taken here and the controllers' triggers share watches.
SELECTORS = (None, "app=x")
CTRL_CONFIG = config()


def key_config(i: int) -> wk.WatchConfig:
    return wk.WatchConfig(label_selector=SELECTORS[i], strip_managed_fields=True,
                          max_unhealthy=CTRL_CONFIG.max_unhealthy)


Op = tuple[str, int]
# acquire: key arg; release / subscribe: the arg-th held handle (mod held); run: a new
# controller in slot arg (if the slot has none running); stop: the slot's controller is
# told to stop. Acquire and release twice as likely: their interleavings are the point.
OPS = ("acquire", "acquire", "release", "release", "subscribe", "run", "stop")
op = st.tuples(st.sampled_from(OPS), st.integers(0, 7))
# Each op, then 0..3 loop ticks: a stop takes ~2, so many ops land inside one.
steps = st.lists(st.tuples(op, st.integers(0, 3)), min_size=1, max_size=14)


async def interleave(ops: list[tuple[Op, int]]) -> None:
    async with ApiServer() as srv, srv.client() as client:
        shared = wk.SharedWatches.of(client)
        apis = client.api("configmaps", namespace=NS)
        held: list[wk.WatchHandle] = []
        subs: list[tuple[wk.WatchHandle, wk.Subscription]] = []
        background: list[asyncio.Task[Any]] = []  # releases and stopped controllers
        # A slot runs one controller at a time; "run" starts a new one (a Controller object
        # runs once at a time) on the slot's key, maybe while the last one still stops.
        ctrls: list[wk.Controller | None] = [None, None]
        runs: list[tuple[asyncio.Task[None], asyncio.Event] | None] = [None, None]
        seen: list[Counter[str]] = [Counter(), Counter()]
        broken: list[str] = []

        async def invariant() -> None:
            """Every tick: a held watch runs, or its stop is under way (then it starts
            again when the stop completes: checked once the ops settle)."""
            while True:
                for w in list(shared._watches.values()):
                    if w.refs > 0 and not (w.running or w.stopping):
                        broken.append(f"{w!r}: held, not running, not stopping")
                await asyncio.sleep(0)

        for i in range(len(SELECTORS)):  # both keys held and listed: a release stops one
            held.append(shared.acquire(apis, key_config(i)))
            subs.append((held[-1], held[-1].subscribe()))
            await held[-1].store.wait_until_ready(timeout=5)
        watcher = asyncio.create_task(invariant())
        for (what, arg), n in ops:
            slot = arg % len(runs)
            if what == "acquire":
                held.append(shared.acquire(apis, key_config(arg % len(SELECTORS))))
            elif what == "release" and held:
                handle = held.pop(arg % len(held))
                background.append(asyncio.create_task(handle.release()))
            elif what == "subscribe" and held:
                handle = held[arg % len(held)]
                subs.append((handle, handle.subscribe()))
            elif what == "run" and runs[slot] is None:
                stop = asyncio.Event()
                ctrl = ctrls[slot] = wk.Controller(apis, CTRL_CONFIG,
                                                   watch_config=key_config(slot))
                seen[slot] = Counter()
                runs[slot] = (asyncio.create_task(ctrl.run(recorder(seen[slot]), stop=stop)),
                              stop)
            elif what == "stop" and (run := runs[slot]) is not None:
                run[1].set()
                background.append(run[0])
                runs[slot] = None
            await ticks(n)
        # Settle: every release and stop done (a restart is synchronous with a stop's end).
        await asyncio.wait_for(asyncio.gather(*background), 10)
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        # What a consumer sees first: its store gets ready, an object written now arrives.
        for h in held:
            await h.store.wait_until_ready(timeout=5)
        srv.create_object(cm("marker", app="x"))  # selected by both keys
        for h, sub in subs:
            if h in held:
                await receives(sub, "marker", timeout=5)
        for i, run in enumerate(runs):
            if run is not None:
                await eventually(lambda i=i: seen[i]["marker"] >= 1, 5)  # type: ignore[misc]
        # Then the bookkeeping: every held watch runs, nothing else does or is kept.
        assert broken == []
        holders = [*held, *(c.triggers[0].shared for c, r in zip(ctrls, runs, strict=True)
                            if c is not None and r is not None)]
        for h in holders:
            assert h is not None and h.running, (h, ops)
        live = {h._watch for h in holders if h is not None}
        assert set(shared.watches()) == live
        # The rest of the registry: the controllers' watches, looked up, never acquired.
        assert all(w.refs == 0 and not w.stopping for w in shared._watches.values()
                   if w not in live)
        assert sorted(w.refs for w in live) == sorted(
            Counter(h._watch for h in holders if h is not None).values())
        sup = shared.supervisor
        assert {s.name for s in (sup.statuses() if sup else [])} == {w.name for w in live}
        await eventually(lambda: srv.open_watches == len(live))
        for run in runs:
            if run is not None:
                run[1].set()
                await asyncio.wait_for(run[0], 10)
        for h in held:
            await h.release()
        assert shared.watches() == [] and (sup is None or sup.statuses() == [])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_any_interleaving_of_acquire_release_subscribe_and_stop_leaves_held_watches_running(
    ops: list[tuple[Op, int]],
) -> None:
    """Whatever the order and the ticks between them: a held watch runs once the ops
    settle (never held, stopped and not stopping at any tick), its store gets ready, a
    subscription of a held handle and a running controller see an object written after
    the ops, only held keys keep a watch on the server, a task in the supervisor."""
    asyncio.run(interleave(ops))


# -- memory per released key ----------------------------------------------------------------


def rss_mib() -> float:
    """Resident memory of live objects: after a collection, and with glibc's free memory
    handed back (freed 2 MiB buffers fragment its heap: RSS then moves by tens of MiB,
    up or down, whatever is alive, which is not memory kept per key)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: RSS as it is
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def stream_buffers() -> int:
    """Live watch stream receive buffers (each preallocates 2 MiB)."""
    return sum(1 for o in gc.get_objects() if isinstance(o, ResponseProtocol))


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="RSS from /proc (Linux)")
async def test_a_thousand_keys_acquired_and_released_leave_nothing_behind(
    srv: ApiServer,
) -> None:
    """Each released key used to keep its 2 MiB stream buffer and its Store (~2.9 MiB): the
    supervisor's table kept the ended task, whose CancelledError's traceback kept the
    frames. 1,000 distinct selectors: RSS and live buffers back to where they were."""
    async with srv.client() as client:
        api = client.api("configmaps", namespace="empty")  # nothing to list: fast
        shared = wk.SharedWatches.of(client)

        async def watch_once(selector: str) -> tuple[Any, ...]:
            began = time.monotonic()
            handle = shared.acquire(api, wk.WatchConfig(label_selector=selector, page_size=1))
            await handle.store.wait_until_ready(timeout=10)
            # Its watch request reached the server: its stream buffer exists.
            await eventually(lambda: srv.count(is_watch=True, since=began) == 1)
            refs = (weakref.ref(handle._watch), weakref.ref(handle.store))
            await handle.release()
            return refs

        await watch_once("warm=up")  # imports, caches, the first buffer's allocation
        await eventually(lambda: srv.open_watches == 0)
        gc.collect()
        rss0, buffers0 = rss_mib(), stream_buffers()
        for batch in range(10):
            refs = [await watch_once(f"key={batch * 100 + i}") for i in range(100)]
            gc.collect()
            grown = rss_mib() - rss0
            assert grown < 10, f"RSS grew {grown:.0f} MiB after {(batch + 1) * 100} keys"
            assert stream_buffers() == buffers0, f"after {(batch + 1) * 100} keys"
            assert [r for pair in refs for r in pair if r() is not None] == []
        assert shared._watches == {} and shared.watches() == []
        assert shared.supervisor is not None and shared.supervisor.statuses() == []
