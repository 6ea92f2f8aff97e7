"""After a relist over several pages, every object that is new, changed or gone is
reconciled (or forgotten) at its newest state, and nothing stale runs after the swap.

The relist is made slow (each LIST page delayed) so that workers run while it is in
progress: the case of every controller whose list has more than one page, after a 410, a
restart or an outage.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper_sim import ApiServer

NS = "default"
LIST_PATH = f"/api/v1/namespaces/{NS}/configmaps"


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NS}, "data": data}


def rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


@pytest.mark.looptime
async def test_a_slow_multi_page_relist_reconciles_what_is_new_changed_and_gone() -> None:
    loop = asyncio.get_running_loop()
    reconciled: list[tuple[str, int, float]] = []
    async with ApiServer() as srv, srv.client() as client:
        for i in range(10):
            srv.create_object(cm(f"o{i}", n="0"))

        async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
            reconciled.append((wk.meta.name(obj), rv(obj), loop.time()))
            await asyncio.sleep(0.01)
            return wk.Action.await_change()

        api = client.api("configmaps", namespace=NS)
        ctrl = wk.Controller(
            api, wk.ControllerConfig(handle_signals=False, concurrency=2),
            watch_config=wk.WatchConfig(page_size=2, max_unhealthy=None),
        )
        task = asyncio.create_task(ctrl.run(reconcile))
        async with asyncio.timeout(30):
            while len({name for name, _, _ in reconciled}) < 10:
                await asyncio.sleep(0.05)
        # An outage the watch cannot resume from (history compacted): a relist, page by page,
        # each page answered 0.5 s late, so workers run while it is in progress.
        srv.faults.refuse(count_refused=True)
        srv.reset_watches()
        await asyncio.sleep(1)
        srv.create_object(cm("new", n="1"))
        changed = srv.get_object("v1", "ConfigMap", "o3")
        changed["data"] = {"n": "1"}
        srv.update_object(changed)
        srv.delete_object("v1", "ConfigMap", "o5")
        # A requeue-like request pending for o7 (a stale object in the old store): its
        # reconcile during the relist is fine, but a later one must see the new state.
        changed7 = srv.get_object("v1", "ConfigMap", "o7")
        changed7["data"] = {"n": "7"}
        srv.update_object(changed7)
        srv.compact()
        srv.faults.slow(0.5, method="GET", path_prefix=LIST_PATH, watch=False)
        srv.faults.clear("refuse")
        final = {wk.meta.name(o): rv(o) for o in srv.store.objects(
            srv.resource("v1", "ConfigMap"), NS)}
        async with asyncio.timeout(60):
            while not (ctrl.store.ready and len(ctrl.store) == len(final)):
                await asyncio.sleep(0.05)
        await asyncio.sleep(5)  # whatever the relist scheduled has run by now
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    last: dict[str, int] = {}
    for name, version, _ in reconciled:
        # Never an older version after a newer one (a stale object after the swap).
        assert version >= last.get(name, 0), (name, version, last[name])
        last[name] = version
    missed = {name: (last.get(name), version) for name, version in final.items()
              if last.get(name) != version}
    assert not missed, f"not reconciled at their newest state: {missed}"
    assert "o5" not in final
