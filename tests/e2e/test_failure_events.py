"""A failing reconcile on a real cluster (issue 23 item 6): what `kubectl describe configmap`
shows is ONE Warning event whose count grows, not one event per attempt. kubectl reads
core/v1 Events selected by the object's kind, name, namespace and uid, and prints
``series.count`` as "(x4 over 8s)" (kube-apiserver 1.28 leaves core/v1 ``count`` unset for an
events.k8s.io/v1 Event: seen, `kubectl describe` still says x4)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import watchkeeper as wk

from .conftest import PREFIX

PATIENCE = 60.0


async def test_repeated_failures_show_as_one_warning_with_a_count(
    client: wk.Client, namespace: str,
) -> None:
    api = client.api("configmaps", namespace=namespace)
    await api.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "broken", "namespace": namespace}})
    failures: list[str] = []

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        if wk.meta.name(obj) != "broken":  # kube-root-ca.crt is reconciled too
            return wk.Action.await_change()
        failures.append(wk.meta.name(obj))
        raise RuntimeError("quota exceeded")

    stop = asyncio.Event()
    ctrl = wk.Controller(api, wk.ControllerConfig(handle_signals=False),
                         recorder=wk.Recorder(client, "watchkeeper.dev/e2e"))
    task = asyncio.create_task(ctrl.run(reconcile, stop=stop))
    try:
        async with asyncio.timeout(PATIENCE):
            while len(failures) < 4:  # at 0, 1, 3 and 7 s
                await asyncio.sleep(0.1)
        await asyncio.sleep(1)  # the last Event update
    finally:
        stop.set()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 60)
    uid = wk.meta.uid(await api.get("broken"))
    # what kubectl describe lists: core/v1 Events about the object
    listed = (await client.api("events", namespace=namespace).list(
        field_selector=f"involvedObject.kind=ConfigMap,involvedObject.name=broken,"
                       f"involvedObject.uid={uid}")).items
    assert len(listed) == 1, listed
    (event,) = listed
    assert (event["type"], event["reason"], event["message"]) == (
        "Warning", "ReconcileFailed", "RuntimeError: quota exceeded")
    assert event["series"]["count"] == len(failures) >= 4


class GizmoSpec(wk.Schema):
    size: int = 1


class GizmoStatus(wk.Schema, kw_only=True):
    conditions: wk.Conditions = []


async def test_the_ready_condition_on_a_custom_resource(
    client: wk.Client, namespace: str,
) -> None:
    """The Ready condition written with a conditional merge patch of the status subresource
    (kube-apiserver checks metav1.Condition's schema: reason, times, observedGeneration)."""
    group = f"{PREFIX}-{uuid.uuid4().hex[:8]}.example.com"

    @wk.custom_resource(group=group, version="v1")
    class Gizmo(wk.CustomResource):
        spec: GizmoSpec
        status: GizmoStatus | None = None

    crds = client.api("customresourcedefinitions.apiextensions.k8s.io")
    await wk.install_crds(client, Gizmo)
    stop = asyncio.Event()
    task: asyncio.Task[None] | None = None
    try:
        api = client.api(f"gizmos.{group}", namespace=namespace)
        await api.create({"apiVersion": f"{group}/v1", "kind": "Gizmo",
                          "metadata": {"name": "g"}, "spec": {"size": -1}})

        async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
            if obj["spec"]["size"] < 0:
                raise wk.PermanentError("spec.size must be >= 0")
            return wk.Action.await_change()

        async def ready_becomes(status: str, reason: str) -> dict[str, Any]:
            async with asyncio.timeout(PATIENCE):
                while True:
                    obj = await api.get("g")
                    cond = wk.conditions.find_condition(obj, "Ready")
                    if cond and (cond["status"], cond["reason"]) == (status, reason):
                        return obj
                    await asyncio.sleep(0.2)

        ctrl = wk.Controller(api, wk.ControllerConfig(handle_signals=False, ready_condition=True),
                             recorder=wk.Recorder(client, "watchkeeper.dev/e2e"))
        task = asyncio.create_task(ctrl.run(reconcile, stop=stop))
        failed = await ready_becomes("False", "ReconcileFailedPermanently")
        cond = wk.conditions.find_condition(failed, "Ready")
        assert cond["message"] == "PermanentError: spec.size must be >= 0"
        assert cond["observedGeneration"] == 1
        await api.patch("g", {"spec": {"size": 2}})
        fixed = await ready_becomes("True", "Reconciled")
        assert wk.conditions.find_condition(fixed, "Ready")["observedGeneration"] == 2
        listed = (await client.api("events", namespace=namespace).list(
            field_selector="involvedObject.name=g")).items
        assert [(e["type"], e["reason"], e["involvedObject"]["kind"]) for e in listed] == [
            ("Warning", "ReconcileFailedPermanently", "Gizmo")]
    finally:
        stop.set()
        if task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 60)
        with contextlib.suppress(wk.NotFound):
            await crds.delete(f"gizmos.{group}")
