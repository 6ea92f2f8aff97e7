"""Shared watches (issue 13 item 1) against the simulator over real sockets: consumers of one
(resource, namespace, selectors) on one Client make one watch, one LIST and one cache."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import watchkeeper as wk
import watchkeeper.supervisor
from watchkeeper_sim import ApiServer

NS = "default"
CM_PATH = f"/api/v1/namespaces/{NS}/configmaps"


def cm(name: str, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Secret",
                                    "name": wk.meta.name(owner), "uid": wk.meta.uid(owner)}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {}}


def secret(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NS}}


async def eventually(check: Callable[[], bool], timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)


def config(**kw: Any) -> wk.ControllerConfig:
    return wk.ControllerConfig(handle_signals=False, **kw)


def watches(srv: ApiServer, path: str = CM_PATH) -> int:
    return srv.count(is_watch=True, path_prefix=path)


def lists(srv: ApiServer, path: str = CM_PATH) -> int:
    return srv.count(method="GET", is_watch=False, is_list=True, path_prefix=path)


@pytest.fixture
async def srv() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        yield server


async def stop(*tasks: asyncio.Task[Any]) -> None:
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def recorder(seen: Counter[str]) -> Callable[[dict[str, Any], Any], wk.Action]:
    def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        seen[wk.meta.name(obj)] += 1
        return wk.Action.await_change()

    return reconcile


async def take(events: wk.Subscription, n: int) -> list[wk.Event]:
    out: list[wk.Event] = []
    async with asyncio.timeout(20):
        async for ev in events:
            out.append(ev)
            if len(out) == n:
                break
    return out


def names(events: list[wk.Event]) -> list[str]:
    return [ev.name for ev in events if isinstance(ev, wk.InitApply | wk.Apply | wk.Delete)]


# -- controllers ---------------------------------------------------------------------------


async def test_two_controllers_on_configmaps_make_one_watch_one_list_and_one_cache(
    srv: ApiServer,
) -> None:
    for i in range(5):
        srv.create_object(cm(f"c{i}"))
    a_seen: Counter[str] = Counter()
    b_seen: Counter[str] = Counter()
    async with srv.client() as client:
        a = wk.Controller(client.api("configmaps", namespace=NS), config())
        b = wk.Controller(client.api("configmaps", namespace=NS), config())
        assert a.store is b.store  # one cache, the same object before run already
        ta = asyncio.create_task(a.run(recorder(a_seen)))
        tb = asyncio.create_task(b.run(recorder(b_seen)))
        await eventually(lambda: len(a_seen) == 5 and len(b_seen) == 5)
        await client.api("configmaps", namespace=NS).create(cm("late"))
        await eventually(lambda: a_seen["late"] >= 1 and b_seen["late"] >= 1)
        assert len(a.store) == 6 and a.store is b.store
        assert a.triggers[0].health is b.triggers[0].health  # health is shared too
        assert watches(srv) == 1 and lists(srv) == 1  # the server saw one of each
        assert srv.open_watches == 1
        await stop(ta, tb)
    assert set(a_seen) == set(b_seen) == {*(f"c{i}" for i in range(5)), "late"}


async def test_a_controller_and_an_owns_of_the_same_resource_share_one_watch(
    srv: ApiServer,
) -> None:
    owner = srv.create_object(secret("owner"))
    for i in range(3):
        srv.create_object(cm(f"child{i}", owner))
    cms: Counter[str] = Counter()
    secrets: Counter[str] = Counter()
    async with srv.client() as client:
        a = wk.Controller(client.api("configmaps", namespace=NS), config())
        b = wk.Controller(client.api("secrets", namespace=NS), config()).owns(
            client.api("configmaps", namespace=NS))
        assert a.store is b.triggers[1].store
        ta = asyncio.create_task(a.run(recorder(cms)))
        tb = asyncio.create_task(b.run(recorder(secrets)))
        await eventually(lambda: len(cms) == 3 and secrets["owner"] >= 1)
        before = secrets["owner"]
        await client.api("configmaps", namespace=NS).patch(
            "child1", {"data": {"x": "1"}}, type="merge")
        # The one shared watch feeds both: the CM controller and the owner's trigger.
        await eventually(lambda: cms["child1"] >= 2 and secrets["owner"] > before)
        assert watches(srv) == 1 and lists(srv) == 1
        await stop(ta, tb)


async def test_a_controller_that_crashes_does_not_stop_the_other(srv: ApiServer) -> None:
    srv.create_object(cm("first"))
    good: Counter[str] = Counter()
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        a = wk.Controller(api, config())
        b = wk.Controller(api, config())
        stop_a = asyncio.Event()
        ta = asyncio.create_task(a.run(recorder(Counter()), stop=stop_a))
        tb = asyncio.create_task(b.run(recorder(good)))
        await eventually(lambda: good["first"] >= 1)
        stop_a.set()  # a ends (its handles are released) while b goes on
        await asyncio.wait_for(ta, 10)
        await api.create(cm("second"))
        await eventually(lambda: good["second"] >= 1)
        assert watches(srv) == 1  # b kept the watch a shared: no new watch, no relist
        assert lists(srv) == 1
        await stop(tb)


async def test_health_is_shared_and_both_controllers_see_the_outage(srv: ApiServer) -> None:
    srv.create_object(cm("x"))
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        a = wk.Controller(api, config(max_unhealthy=None))
        b = wk.Controller(api, config(max_unhealthy=None))
        errors: list[tuple[str, str]] = []
        ta = asyncio.create_task(a.run(recorder(Counter()),
                                       on_watch_error=lambda t, e: errors.append(("a", t))))
        tb = asyncio.create_task(b.run(recorder(Counter()),
                                       on_watch_error=lambda t, e: errors.append(("b", t))))
        await a.store.wait_until_ready(timeout=10)
        await eventually(lambda: srv.open_watches == 1)
        srv.faults.refuse()
        srv.reset_watches()
        await eventually(lambda: a.health().state is wk.WatchState.DEGRADED
                         and b.health().state is wk.WatchState.DEGRADED)
        # The watcher's own WatchErrors reach every consumer (each trigger's hook).
        await eventually(lambda: {who for who, _ in errors} == {"a", "b"})
        assert "configmaps" in a.health().problems and "configmaps" in b.health().problems
        srv.faults.clear()
        await eventually(lambda: a.health().state is wk.WatchState.HEALTHY
                         and b.health().state is wk.WatchState.HEALTHY, timeout=60)
        await stop(ta, tb)


async def test_a_non_retriable_watch_error_ends_every_consumer(srv: ApiServer) -> None:
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        bad = wk.WatchConfig(label_selector="a in (", strip_managed_fields=True)
        a = wk.Controller(api, config(), watch_config=bad)
        b = wk.Controller(api, config(), watch_config=bad)
        results = await asyncio.wait_for(asyncio.gather(
            a.run(recorder(Counter())), b.run(recorder(Counter())), return_exceptions=True), 20)
    for result in results:
        assert isinstance(result, wk.ControllerUnhealthy), result
        assert isinstance(result.__cause__, wk.BadRequest)
    assert lists(srv) == 1  # one watcher tried it, both heard


# -- the registry directly ----------------------------------------------------------------


async def test_a_late_joiner_gets_the_full_current_state(srv: ApiServer) -> None:
    for i in range(3):
        srv.create_object(cm(f"c{i}"))
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        shared = wk.SharedWatches.of(client)
        async with shared.acquire(api) as first:
            early = first.subscribe()
            got = await take(early, 5)  # InitStart, 3 x InitApply, InitDone
            assert isinstance(got[0], wk.InitStart) and isinstance(got[-1], wk.InitDone)
            await api.create(cm("c3"))
            await api.delete("c0")
            assert names(await take(early, 2)) == ["c3", "c0"]
            async with shared.acquire(api) as second, second.subscribe() as late:
                assert second.store is first.store
                sync = await take(late, 5)
                assert isinstance(sync[0], wk.InitStart) and isinstance(sync[-1], wk.InitDone)
                assert all(isinstance(ev, wk.InitApply) for ev in sync[1:-1])
                assert sorted(names(sync)) == ["c1", "c2", "c3"]  # c0 is gone, c3 is there
                await api.create(cm("c4"))
                (ev,) = await take(late, 1)
                assert isinstance(ev, wk.Apply) and ev.name == "c4"
                assert names(await take(early, 1)) == ["c4"]  # the first still sees it all
        assert watches(srv) == 1 and lists(srv) == 1


async def test_joining_during_a_list_gets_what_it_collected_so_far(srv: ApiServer) -> None:
    for i in range(6):
        srv.create_object(cm(f"c{i}"))
    srv.faults.slow(0.5, method="GET", watch=False)  # each LIST page takes 0.5 s
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        shared = wk.SharedWatches.of(client)
        async with shared.acquire(api, wk.WatchConfig(page_size=2)) as handle:
            early = handle.subscribe()
            assert names(await take(early, 3)) == ["c0", "c1"]  # the first page
            late = handle.subscribe()  # the second page is on its way
            got = await take(late, 8)
            assert isinstance(got[0], wk.InitStart) and isinstance(got[-1], wk.InitDone)
            assert sorted(names(got)) == [f"c{i}" for i in range(6)]  # each once, none lost
            late.close()


async def test_releasing_the_last_handle_closes_the_watch(srv: ApiServer) -> None:
    srv.create_object(cm("x"))
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        shared = wk.SharedWatches.of(client)
        one = shared.acquire(api)
        two = shared.acquire(api)
        await one.store.wait_until_ready(timeout=10)
        await eventually(lambda: srv.open_watches == 1)
        await one.release()
        await asyncio.sleep(1.0)  # the simulator notices a closed watch within 0.5 s
        assert srv.open_watches == 1 and shared.watches()  # two still holds it
        await two.release()
        await two.release()  # twice: harmless
        assert shared.watches() == []
        assert not one.store.ready  # nobody keeps it current any more
        await eventually(lambda: srv.open_watches == 0)
        assert shared._watches == {}  # idle: forgotten (one still reads its last contents)
        assert len(one.store) == 1
        # A new consumer starts it again: a fresh list and watch.
        async with shared.acquire(api) as three:
            await three.store.wait_until_ready(timeout=10)
            assert len(three.store) == 1
        assert watches(srv) == 2 and lists(srv) == 2


async def test_a_controller_run_twice_keeps_its_store_and_shares_again(srv: ApiServer) -> None:
    srv.create_object(cm("x"))
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        a = wk.Controller(api, config())
        store = a.store
        seen: Counter[str] = Counter()
        for _ in range(2):
            stop_a = asyncio.Event()
            seen.clear()
            task = asyncio.create_task(a.run(recorder(seen), stop=stop_a))
            await eventually(lambda: seen["x"] >= 1)
            assert a.store is store and store.ready
            b = wk.Controller(api, config())  # a newcomer shares a's running watch
            assert b.store is store
            stop_a.set()
            await asyncio.wait_for(task, 10)
            assert not store.ready
        assert watches(srv) == 2 and lists(srv) == 2


async def test_the_registry_goes_with_its_client(srv: ApiServer) -> None:
    client = srv.client()
    api = client.api("configmaps", namespace=NS)
    async with wk.SharedWatches.of(client).acquire(api) as handle:
        await handle.store.wait_until_ready(timeout=10)
    assert wk.SharedWatches.of(client) is wk.SharedWatches.of(client)
    await client.close()
    gone = weakref.ref(client)
    del client, api, handle
    gc.collect()
    assert gone() is None


async def test_a_consumer_that_crashes_does_not_stop_the_others(srv: ApiServer) -> None:
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        shared = wk.SharedWatches.of(client)
        async with shared.acquire(api) as handle:
            calm: list[str] = []

            async def crashing() -> None:
                async with handle.subscribe() as events:
                    async for ev in events:
                        if isinstance(ev, wk.Apply):
                            raise RuntimeError("consumer bug")

            async def following() -> None:
                async with handle.subscribe() as events:
                    async for ev in events:
                        if isinstance(ev, wk.Apply):
                            calm.append(ev.name)

            bad = asyncio.create_task(crashing())
            ok = asyncio.create_task(following())
            await handle.store.wait_until_ready(timeout=10)
            await api.create(cm("a"))
            with pytest.raises(RuntimeError):
                await asyncio.wait_for(bad, 10)
            await api.create(cm("b"))
            await eventually(lambda: calm == ["a", "b"])
            assert handle._watch.subscribers == 1  # the crashed one unsubscribed
            await stop(ok)


async def test_a_slow_consumer_is_resynced_from_the_store_not_waited_for(
    srv: ApiServer,
) -> None:
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        shared = wk.SharedWatches.of(client)
        async with shared.acquire(api) as handle:
            await handle.store.wait_until_ready(timeout=10)
            slow = handle.subscribe(max_queue=3)
            fast = handle.subscribe()
            assert await take(slow, 2) == [wk.InitStart(), wk.InitDone()]  # empty, listed
            assert await take(fast, 2) == [wk.InitStart(), wk.InitDone()]
            for i in range(10):
                await api.create(cm(f"c{i}"))
            # The fast one got every event, in order, while the slow one read nothing.
            assert names(await take(fast, 10)) == [f"c{i}" for i in range(10)]
            assert slow.resyncs == 1
            got = await take(slow, 12)  # a relist from the store: all 10, nothing lost
            assert isinstance(got[0], wk.InitStart) and isinstance(got[-1], wk.InitDone)
            assert sorted(names(got)) == sorted(f"c{i}" for i in range(10))
            await api.create(cm("after"))
            assert names(await take(slow, 1)) == ["after"]  # then live again
            slow.close()
            fast.close()


async def test_the_key_tells_watches_apart(srv: ApiServer) -> None:
    async with srv.client() as client:
        shared = wk.SharedWatches.of(client)
        base = client.api("configmaps", namespace=NS)
        same = [client.api("v1/configmaps", namespace=NS), client.api("cm", namespace=NS),
                client.api("ConfigMap", namespace=NS)]
        for api in same:
            assert shared.watch(api) is shared.watch(base)
        different = [
            (client.api("configmaps", namespace="other"), None),
            (client.api("configmaps", namespace=None), None),
            (base, wk.WatchConfig(label_selector="a=b")),
            (base, wk.WatchConfig(field_selector="metadata.name=x")),
            (base, wk.WatchConfig(metadata_only=True)),
            (base, wk.WatchConfig(strip_managed_fields=True)),
            (base, wk.WatchConfig(keep_managed_fields=True)),  # the cache keeps them
            (base, wk.WatchConfig(max_unhealthy=None)),  # would give up at another time
        ]
        keys = {shared.watch(api, cfg).key for api, cfg in different}
        assert len(keys) == len(different) and shared.watch(base).key not in keys
        # The same config object or an equal one, a page size: the same watch.
        assert shared.watch(base, wk.WatchConfig(page_size=7)) is shared.watch(base)
        # A backoff of one's own (it may give up: WatchGaveUp) is never imposed on others.
        own = wk.DefaultBackoff()
        assert shared.watch(base, backoff=own) is not shared.watch(base)
        assert shared.watch(base, backoff=own) is shared.watch(base, backoff=own)
        # Other Clients never share.
        async with srv.client() as other:
            assert wk.SharedWatches.of(other).watch(base) is not shared.watch(base)


async def test_a_crash_of_the_shared_task_is_supervised_and_seen_by_the_controller(
    srv: ApiServer,
) -> None:
    """An index function that raises crashes the watch task: the supervisor restarts it
    (a relist), the controller's health names the task meanwhile, subscribers go on."""
    srv.create_object(cm("ok"))
    seen: Counter[str] = Counter()
    broken = {"on": True}

    def by_name(obj: dict[str, Any]) -> list[str]:
        if broken["on"] and wk.meta.name(obj) == "boom":
            raise ValueError("index function bug")
        return [wk.meta.name(obj)]

    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        ctrl = wk.Controller(api, config())
        ctrl.store.index_by("name", by_name)
        task = asyncio.create_task(ctrl.run(recorder(seen)))
        await eventually(lambda: seen["ok"] >= 1)
        await api.create(cm("boom"))
        status = ctrl.triggers[0].watch.task
        assert status is not None
        await eventually(lambda: status.status.state is wk.supervisor.TaskState.DEGRADED)
        problems = ctrl.health().problems
        assert any("index function bug" in why for why in problems.values()), problems
        broken["on"] = False
        await eventually(lambda: seen["boom"] >= 1)  # restarted: relisted, nothing lost
        assert ctrl.store.by_index("name", "boom")
        assert lists(srv) == 2 and not task.done()
        await stop(task)


async def test_a_controller_started_late_reconciles_everything_without_a_new_list(
    srv: ApiServer,
) -> None:
    for i in range(4):
        srv.create_object(cm(f"c{i}"))
    first: Counter[str] = Counter()
    late: Counter[str] = Counter()
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        a = wk.Controller(api, config())
        ta = asyncio.create_task(a.run(recorder(first)))
        await eventually(lambda: len(first) == 4)
        b = wk.Controller(api, config())
        tb = asyncio.create_task(b.run(recorder(late)))
        await eventually(lambda: len(late) == 4)  # the store's contents, as a relist
        await api.create(cm("c4"))
        await eventually(lambda: first["c4"] >= 1 and late["c4"] >= 1)
        assert watches(srv) == 1 and lists(srv) == 1
        await stop(ta, tb)
