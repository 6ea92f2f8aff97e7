"""The example operator converges against the simulator, and through faults."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper_sim import ApiServer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "widget_operator.py"
_spec = importlib.util.spec_from_file_location("widget_operator", EXAMPLE)
assert _spec is not None and _spec.loader is not None
widget_operator = importlib.util.module_from_spec(_spec)
sys.modules["widget_operator"] = widget_operator
_spec.loader.exec_module(widget_operator)


def widget(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"data": data}}


async def eventually(check: Callable[[], bool], timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.1)


@pytest.fixture
async def world() -> AsyncIterator[tuple[ApiServer, wk.Client, wk.Operator, asyncio.Task[None]]]:
    async with ApiServer() as srv:
        srv.create_object(widget_operator.CRD)
        async with srv.client() as client:
            op = widget_operator.setup(client, namespace="default")
            op.controller.config = wk.ControllerConfig(handle_signals=False)
            task = asyncio.create_task(
                op.controller.run(op.reconcile, op.error_policy, op.context)
            )
            yield srv, client, op, task
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def child(srv: ApiServer, name: str) -> dict[str, Any] | None:
    rt = srv.resource("v1", "ConfigMap")
    return srv.store.peek(rt, "default", f"widget-{name}")


async def test_widgets_get_owned_configmaps_that_follow_them(
    world: tuple[ApiServer, wk.Client, wk.Operator, asyncio.Task[None]],
) -> None:
    srv, client, _op, _task = world
    widgets = client.api("widgets.example.com", namespace="default")
    await widgets.create(widget("a", colour="red"))
    await eventually(lambda: (child(srv, "a") or {}).get("data") == {"colour": "red"})
    cm = child(srv, "a")
    assert cm is not None
    owner = cm["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "Widget" and owner["name"] == "a" and owner["controller"] is True

    # An update of the parent flows to the child.
    await widgets.patch("a", {"spec": {"data": {"colour": "blue"}}})
    await eventually(lambda: (child(srv, "a") or {}).get("data") == {"colour": "blue"})
    status = srv.get_object("example.com/v1", "Widget", "a")["status"]
    assert status["phase"] == "Ready"

    # Deleting the owned child re-triggers the parent, which recreates it.
    await client.api("configmaps", namespace="default").delete("widget-a")
    await eventually(lambda: child(srv, "a") is not None)

    # Deleting the parent runs the finalizer: the child goes, then the parent.
    await widgets.delete("a")
    await eventually(lambda: child(srv, "a") is None and srv.store.peek(
        srv.resource("example.com/v1", "Widget"), "default", "a") is None)


async def test_converges_through_outage_compaction_and_crd_recreation(
    world: tuple[ApiServer, wk.Client, wk.Operator, asyncio.Task[None]],
) -> None:
    srv, client, op, task = world
    widgets = client.api("widgets.example.com", namespace="default")
    await widgets.create(widget("before", v="1"))
    await eventually(lambda: child(srv, "before") is not None)
    reported: list[str] = []
    for t in op.controller.triggers:
        assert t.health.state is wk.WatchState.HEALTHY

    # An outage with changes made meanwhile, and the history compacted (410 on resume).
    await eventually(lambda: srv.open_watches >= 2)
    srv.faults.refuse(count_refused=True)
    srv.reset_watches()
    srv.create_object(widget("during", v="2"))
    srv.compact()
    await asyncio.sleep(3)
    srv.faults.clear()
    await eventually(lambda: (child(srv, "during") or {}).get("data") == {"v": "2"}, 40)
    assert not task.done()
    relists = sum(t.health.relists for t in op.controller.triggers)
    assert relists >= 3  # both triggers relisted after the 410 (2 initial lists + more)

    # The CRD goes away (its watch fails with NotFound), then comes back with a new widget.
    srv.delete_object("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                      "widgets.example.com", namespace="")
    main = op.controller.triggers[0]
    await eventually(lambda: main.health.state is wk.WatchState.DEGRADED, 20)
    reported.append(str(main.health.last_error))
    srv.create_object(widget_operator.CRD)
    srv.create_object(widget("after", v="3"))
    await eventually(lambda: (child(srv, "after") or {}).get("data") == {"v": "3"}, 60)
    assert "widgets.example.com" in main.name and "CRD" in reported[0]
    assert not task.done()


async def test_recorder_publishes_and_deduplicates_events() -> None:
    async with ApiServer() as srv, srv.client() as client:
        cm = await client.api("configmaps", namespace="default").create(
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "subject", "namespace": "default"}})
        recorder = wk.Recorder(client, "test-controller")
        for _ in range(3):
            await recorder.publish(cm, reason="Reconciled", note="all good")
        await recorder.publish(cm, reason="Failed", note="boom", type="Warning")
        events = (await client.api("events.k8s.io/v1/events", namespace="default").list()).items
        assert len(events) == 2
        ok = next(e for e in events if e["reason"] == "Reconciled")
        assert ok["series"]["count"] == 3 and ok["regarding"]["name"] == "subject"
        assert ok["reportingController"] == "test-controller" and ok["type"] == "Normal"


async def test_the_sharded_example_splits_widgets_and_labels_their_children() -> None:
    """examples/widget_operator.py:setup_sharded, two replicas in one process (each with
    its own Client): every Widget gets its child, and the child carries the shard label of
    its owner, so the owner's replica sees it through its own label selector."""
    key = "shard.watchkeeper.io/widget-operator"
    async with ApiServer() as srv:
        srv.create_object(widget_operator.CRD)
        for i in range(20):
            srv.create_object(widget(f"w{i}", n=str(i)))
        stop = asyncio.Event()
        async with srv.client() as c1, srv.client() as c2:
            ops = [widget_operator.setup_sharded(c, namespace="default") for c in (c1, c2)]
            tasks = [asyncio.create_task(wk.run(op, stop=stop, handle_signals=False))
                     for op in ops]
            try:
                def converged() -> bool:
                    for i in range(20):
                        owner = srv.get_object("example.com/v1", "Widget", f"w{i}")
                        cm = child(srv, f"w{i}")
                        shard = (owner["metadata"].get("labels") or {}).get(key)
                        if (cm is None or not shard
                                or (cm["metadata"].get("labels") or {}).get(key) != shard
                                or (owner.get("status") or {}).get("phase") != "Ready"):
                            return False
                    return True

                await eventually(converged, timeout=30)
                ids = {op.controller.sharding.replica_id for op in ops}  # type: ignore[union-attr]
                shards = {srv.get_object("example.com/v1", "Widget", f"w{i}")["metadata"]
                          ["labels"][key] for i in range(20)}
                assert shards == ids  # both replicas own a part
                for op in ops:
                    mine = op.controller.sharding.replica_id  # type: ignore[union-attr]
                    cached = {o["metadata"]["labels"][key] for o in op.controller.store.list()}
                    assert cached == {mine}
            finally:
                stop.set()
                await asyncio.gather(*tasks)


SHARDED_DEPLOY = EXAMPLE.parent / "deploy" / "widget-operator-sharded.yaml"


async def test_the_sharded_deployments_rbac_is_all_the_replicas_need(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """examples/deploy/widget-operator-sharded.yaml's ServiceAccount, roles and bindings,
    applied to the simulator (which evaluates RBAC as a cluster does), are enough for two
    replicas running as that ServiceAccount: they split the Widgets, and when one stops,
    its Widgets move and the sharder deletes its Lease, with no request refused."""
    import logging

    import msgspec
    import yaml

    from watchkeeper.client.auth import StaticToken

    caplog.set_level(logging.WARNING, logger="watchkeeper")
    key = "shard.watchkeeper.io/widget-operator"
    docs = [d for d in yaml.safe_load_all(SHARDED_DEPLOY.read_text()) if d]
    monkeypatch.setenv("POD_NAMESPACE", "widget-system")
    async with ApiServer() as srv:
        srv.create_object(widget_operator.CRD)
        srv.create_object({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": "widget-system"}})
        for doc in docs:
            if doc["kind"] != "Deployment":
                srv.create_object(doc)
        for i in range(12):
            srv.create_object(widget(f"w{i}", n=str(i)))
        async with srv.client() as admin:
            resp = await admin.transport.request(
                "POST", "/api/v1/namespaces/widget-system/serviceaccounts/widget-operator/token",
                body=b'{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest"}',
                content_type="application/json")
        token = msgspec.json.decode(resp.body)["status"]["token"]
        config = wk.ClientConfig(server=srv.url, auth=StaticToken(token))
        stops = [asyncio.Event(), asyncio.Event()]
        async with wk.Client(config) as c1, wk.Client(config) as c2:
            ops = []
            for n, c in enumerate((c1, c2)):
                monkeypatch.setenv("POD_NAME", f"widget-operator-{n}")
                ops.append(widget_operator.setup_sharded(c))  # all namespaces, as deployed
            ids = [op.controller.sharding.replica_id for op in ops]  # type: ignore[union-attr]
            tasks = [asyncio.create_task(wk.run(op, stop=stop, handle_signals=False))
                     for op, stop in zip(ops, stops, strict=True)]

            def owners() -> set[str]:
                return {(srv.get_object("example.com/v1", "Widget", f"w{i}")["metadata"]
                         .get("labels") or {}).get(key, "") for i in range(12)}

            def leases() -> set[str]:
                rt = srv.resource("coordination.k8s.io/v1", "Lease")
                return {o["metadata"]["name"] for o in
                        srv.store.list(rt, "widget-system", lambda _o: True).items}

            try:
                await eventually(lambda: owners() == set(ids), timeout=30)
                stops[0].set()  # one replica leaves (SIGTERM): its Widgets move
                await tasks[0]
                await eventually(lambda: owners() == {ids[1]}, timeout=30)
                await eventually(lambda: f"widget-operator-shard-{ids[0]}" not in leases(),
                                 timeout=30)
                assert f"widget-operator-shard-{ids[1]}" in leases()
            finally:
                for stop in stops:
                    stop.set()
                await asyncio.gather(*tasks, return_exceptions=True)
    refused = [r.getMessage() for r in caplog.records
               if "Forbidden" in r.getMessage() or "forbidden" in r.getMessage()]
    assert not refused, refused[:3]
