"""Property: whatever writes, deletes, 410s and outages happen while a controller relists
page by page, every object is reconciled at its final resourceVersion within a bound after
the faults stop, never two reconciles of one object run at once, and no reconcile sees an
older version of an object than one reconciled before it.

Each example runs a fresh simulator on a virtual-time loop (looptime) with a small page
size and every LIST page answered late, so workers run while relists are in progress and
writes land between pages. `make test` runs a short version; the long one is

    WATCHKEEPER_PROPERTY_EXAMPLES=1000 .venv/bin/pytest -q -p no:cacheprovider \\
        tests/runtime/controller/test_relist_property.py
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import watchkeeper as wk
from watchkeeper_sim import ApiServer

from ..virtual_time import run_virtual

NS = "default"
LIST_PATH = f"/api/v1/namespaces/{NS}/configmaps"
NAMES = [f"o{i}" for i in range(8)]
EXAMPLES = int(os.environ.get("WATCHKEEPER_PROPERTY_EXAMPLES", "25"))

write = st.tuples(st.sampled_from(["create", "update", "delete"]), st.sampled_from(NAMES))
# An episode: writes the controller sees only through a relist or a resumed watch (made
# while the server is down, or the watch cut), the way the watch comes back, then writes
# and pauses while that relist may still be paging.
episode = st.tuples(
    st.lists(write, max_size=6),
    st.sampled_from(["outage 410", "outage resume", "410 now", "reset"]),
    st.sampled_from([0.0, 0.5, 3.0, 12.0]),  # how long the server stays down
    st.lists(st.one_of(write, st.tuples(st.just("sleep"), st.sampled_from(["0.05", "0.5"]))),
             max_size=6),
)

# DefaultBackoff's longest step (30 s plus up to 100 % jitter), one relist of every page
# answered late, and the reconciles queued behind it.
BOUND = 60.0 + 30.0


def cm(name: str, n: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NS}, "data": {"n": str(n)}}


def rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


Episode = tuple[list[tuple[str, str]], str, float, list[tuple[str, str]]]


async def scenario(episodes: list[Episode], page_size: int, page_delay: float,
                   work: list[float], concurrency: int) -> None:
    loop = asyncio.get_running_loop()
    reconciled: list[tuple[str, int]] = []
    running: set[str] = set()
    overlaps: list[str] = []
    durations = iter(work * 1000)

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        name = wk.meta.name(obj)
        if name in running:
            overlaps.append(name)
        running.add(name)
        try:
            reconciled.append((name, rv(obj)))
            await asyncio.sleep(next(durations))
        finally:
            running.discard(name)
        return wk.Action.await_change()

    async with ApiServer() as srv, srv.client() as client:
        kind = srv.resource("v1", "ConfigMap")

        def exists(name: str) -> bool:
            return srv.store.peek(kind, NS, name) is not None

        for name in NAMES[:5]:
            srv.create_object(cm(name, 0))
        api = client.api("configmaps", namespace=NS)
        ctrl = wk.Controller(
            api, wk.ControllerConfig(handle_signals=False, concurrency=concurrency,
                                     max_unhealthy=None),
            watch_config=wk.WatchConfig(page_size=page_size, max_unhealthy=None),
        )
        srv.faults.slow(page_delay, method="GET", path_prefix=LIST_PATH, watch=False)
        task = asyncio.create_task(ctrl.run(reconcile))
        await ctrl.store.wait_until_ready(timeout=60)
        counter = 0

        def apply(op: str, name: str) -> None:
            if op == "create" and not exists(name):
                srv.create_object(cm(name, counter))
            elif op == "update" and exists(name):
                obj = srv.get_object("v1", "ConfigMap", name)
                obj["data"] = {"n": str(counter)}
                srv.update_object(obj)
            elif op == "delete" and exists(name):
                srv.delete_object("v1", "ConfigMap", name)

        for before, how, down_for, during in episodes:
            outage = how.startswith("outage")
            if outage:
                srv.faults.refuse(count_refused=True)
            srv.reset_watches()
            for op, name in before:
                counter += 1
                apply(op, name)
            if outage:
                await asyncio.sleep(down_for)
            if how.endswith("410"):
                srv.compact()
            srv.faults.clear("refuse")
            for op, arg in during:
                counter += 1
                if op == "sleep":
                    await asyncio.sleep(float(arg))
                else:
                    apply(op, arg)
            assert not task.done(), task
        srv.faults.clear("refuse")
        cleared_at = loop.time()
        final = {wk.meta.name(o): rv(o) for o in srv.store.objects(kind, NS)}

        def caught_up() -> bool:
            last = dict(reconciled)
            return all(last.get(name) == version for name, version in final.items())

        try:
            while not caught_up() and loop.time() - cleared_at <= BOUND:
                assert not task.done(), task
                await asyncio.sleep(0.05)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    last = dict(reconciled)
    missed = {name: (last.get(name), version) for name, version in final.items()
              if last.get(name) != version}
    assert not missed, f"{BOUND} s after the last episode, last reconciled vs final: {missed}"
    assert not overlaps, f"reconciled twice at once: {overlaps}"
    newest: dict[str, int] = {}
    for name, version in reconciled:
        assert version >= newest.get(name, 0), f"{name} at {version} after {newest[name]}"
        newest[name] = version


@pytest.mark.timeout(900)  # a failure shrinks for minutes; the pass takes seconds
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    st.lists(episode, min_size=1, max_size=6),
    st.integers(1, 3),
    st.sampled_from([0.05, 0.3, 1.0]),
    st.lists(st.sampled_from([0.0, 0.01, 0.2, 1.0]), min_size=1, max_size=5),
    st.integers(1, 3),
)
def test_every_object_is_reconciled_at_its_final_version_after_any_relists(
    episodes: list[Episode], page_size: int, page_delay: float, work: list[float],
    concurrency: int,
) -> None:
    run_virtual(scenario(episodes, page_size, page_delay, work, concurrency))
