"""Property: whatever writes and faults happen, the events reconstruct the server's state,
no resourceVersion is delivered twice as a change, retries keep to the backoff, and once the
faults stop the watcher is healthy again within one maximum backoff step.

The streaming variant (``initial_list="streaming"``) runs against a server that, like a real
apiserver, sends the initial-events-end bookmark ~1 s after the initial events, so writes
and deletes land inside the initial window (the first one and every relist's).

Each example runs a fresh simulator on a virtual-time event loop (looptime), so a schedule
with outages of seconds costs milliseconds of wall-clock time.
"""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import watchkeeper as wk
from watchkeeper_sim import ApiServer

from ..virtual_time import run_virtual
from .conftest import configmap

NAMES = [f"obj{i}" for i in range(6)]

step = st.one_of(
    st.tuples(st.sampled_from(["create", "update", "delete"]), st.sampled_from(NAMES)),
    st.tuples(st.just("reset"), st.just("")),
    st.tuples(st.just("outage"), st.sampled_from(["1", "5", "20"])),
    st.tuples(st.just("compact"), st.just("")),
    st.tuples(st.just("relist"), st.just("")),
    st.tuples(st.just("hang"), st.just("")),
    st.tuples(st.just("garbage"), st.just("")),
    st.tuples(st.just("error"), st.sampled_from(["500", "503"])),
    st.tuples(st.just("throttle"), st.sampled_from(["1", "3"])),
    st.tuples(st.just("sleep"), st.sampled_from(["0.1", "2"])),
)


# DefaultBackoff's longest step: 30 s plus up to 100 % jitter.
MAX_BACKOFF_STEP = 60.0
# What one attempt may take on top of it here: the streaming list's ~1 s initial window,
# and the simulator's 0.5 s wait for a too-new resourceVersion.
REQUEST_TIME = 5.0
# A hung request is cut off after this (the client's request timeout; the watcher's open
# timeout for a watch): a request hung just before the faults stop adds it once.
HUNG_REQUEST = 60.0


async def scenario(steps: list[tuple[str, str]], lazy: bool, streaming: bool = False) -> None:
    loop = asyncio.get_running_loop()
    delay = 1.0 if streaming else 0.0
    async with ApiServer(initial_events_end_delay=delay) as srv, srv.client() as client:
        api = client.api("configmaps", namespace="default")
        for name in NAMES[:4]:  # most names exist from the start, so updates/deletes act
            srv.create_object(configmap(name, n="0"))
        store, writer = wk.Store.new()
        w = wk.watcher(api, wk.WatchConfig(
            max_unhealthy=None, lazy_decode=lazy,
            initial_list="streaming" if streaming else "paginated",
        ))
        seen: list[tuple[float, wk.Event]] = []

        async def consume() -> None:
            async for ev in wk.reflector(writer, w):
                seen.append((loop.time(), ev))

        task = asyncio.create_task(consume())
        if not streaming:
            await store.wait_until_ready(timeout=30)
        async with asyncio.timeout(10):
            while not srv.open_watches:  # streaming: the initial window is open now
                await asyncio.sleep(0.01)
        for counter, (op, arg) in enumerate(steps, start=1):
            if op == "create" and srv.store.peek(srv.resource("v1", "ConfigMap"), "default",
                                                 arg) is None:
                srv.create_object(configmap(arg, n=str(counter)))
            elif op == "update" and srv.store.peek(srv.resource("v1", "ConfigMap"), "default",
                                                   arg) is not None:
                obj = srv.get_object("v1", "ConfigMap", arg)
                obj["data"] = {"n": str(counter)}
                srv.update_object(obj)
            elif op == "delete" and srv.store.peek(srv.resource("v1", "ConfigMap"), "default",
                                                   arg) is not None:
                srv.delete_object("v1", "ConfigMap", arg)
            elif op == "reset":
                srv.reset_watches()
            elif op == "outage":
                srv.faults.refuse(count_refused=True)
                srv.reset_watches()
                await asyncio.sleep(float(arg))
                srv.faults.clear("refuse")
            elif op == "compact":
                srv.compact()
            elif op == "hang":  # the next request is accepted and never answered
                srv.faults.hang(count=1)
                srv.reset_watches()
            elif op == "relist":  # a 410 on resume: a (streaming) relist, a new window
                srv.compact()
                srv.reset_watches()
            elif op == "garbage":
                srv.faults.garbage(count=1, watch=True)
            elif op == "error":
                srv.faults.error(int(arg), count=1)
                srv.reset_watches()
            elif op == "throttle":
                srv.faults.throttle(retry_after=float(arg), count=1)
                srv.reset_watches()
            elif op == "sleep":
                await asyncio.sleep(float(arg))
        srv.faults.clear()
        cleared_at = loop.time()
        # 3. Once the faults stop, the watcher is healthy again within one maximum backoff
        #    step (a sleep begun just before) plus the time of one attempt, even on a quiet
        #    resource (no write comes to prove it: this is checked before the marker).
        async with asyncio.timeout(600):
            while not (w.health.state is wk.WatchState.HEALTHY
                       and loop.time() - w.health.since >= 1.0):  # settled, not a stale view
                assert not task.done(), task
                await asyncio.sleep(0.05)
        bound = MAX_BACKOFF_STEP + REQUEST_TIME + (HUNG_REQUEST if ("hang", "") in steps else 0)
        assert w.health.since - cleared_at <= bound, (w.health.since - cleared_at, w.health)
        expected = {
            wk.meta.name(o): o["metadata"]["resourceVersion"]
            for o in srv.store.objects(srv.resource("v1", "ConfigMap"), "default")
        }
        # A write after every fault is cleared proves the watch is live again.
        marker = srv.create_object(configmap("marker"))
        expected["marker"] = marker["metadata"]["resourceVersion"]
        async with asyncio.timeout(300):
            while {wk.meta.name(o): wk.meta.resource_version(o) for o in store} != expected:
                assert not task.done(), task
                await asyncio.sleep(0.05)
        assert store.ready
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    # 1. No resourceVersion is delivered twice as a change (Apply/Delete from the watch).
    #    A Delete inside a relist (InitStart..InitDone) is the reflector's report of an
    #    object that vanished while disconnected: it carries the last state the cache held,
    #    which must be the last one delivered for that object (or listed, if never changed).
    changes: list[str] = []
    cached: dict[str, str] = {}  # what the store holds: swapped at InitDone
    listing: dict[str, str] | None = None
    for _, ev in seen:
        if isinstance(ev, wk.InitStart):
            listing = {}
        elif isinstance(ev, wk.InitDone):
            cached, listing = listing or {}, None
        elif isinstance(ev, wk.InitApply):
            assert listing is not None
            listing[wk.meta.name(ev.obj)] = wk.meta.resource_version(ev.obj)
        elif isinstance(ev, wk.Apply | wk.Delete):
            name, version = wk.meta.name(ev.obj), wk.meta.resource_version(ev.obj)
            if isinstance(ev, wk.Delete) and listing is not None:
                assert cached.get(name) == version, (name, version, cached.get(name))
                continue
            if name != "marker":
                changes.append(version)
            if isinstance(ev, wk.Apply):
                cached[name] = version
            else:
                cached.pop(name, None)
    assert len(changes) == len(set(changes)), changes
    # 2. Retries keep to the schedule: after an error the next thing happens no sooner than
    #    the announced delay (no hot loop), and that delay honours Retry-After.
    for i, (t, ev) in enumerate(seen):
        if isinstance(ev, wk.WatchError):
            if isinstance(ev.error, wk.TooManyRequests):
                assert ev.retry_in >= (ev.error.retry_after or 0)
            later = [t2 for t2, _ in seen[i + 1:]]
            if later:
                assert later[0] - t >= ev.retry_in - 1e-6, (ev, later[0] - t)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=25), st.booleans())
def test_random_writes_and_faults_lose_nothing_and_keep_the_schedule(
    steps: list[tuple[str, str]], lazy: bool,
) -> None:
    run_virtual(scenario(steps, lazy))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=25), st.booleans())
def test_streaming_list_with_writes_and_deletes_in_its_window_equals_the_server(
    steps: list[tuple[str, str]], lazy: bool,
) -> None:
    """Writes and deletes inside the initial-events window (the first and every relist's,
    forced by compaction) and faults: the Store ends equal to the server (no resurrection)."""
    run_virtual(scenario(steps, lazy, streaming=True))
