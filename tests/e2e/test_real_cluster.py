"""The scenarios that can run on a real kube-apiserver (see conftest.py)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import msgspec
import pytest

import watchkeeper as wk
from watchkeeper.client.auth import StaticToken

# Every namespace of a real cluster also holds kube-root-ca.crt (created by the controller
# manager shortly after the namespace): tests select their own objects by this label.
MINE = "watchkeeper.dev/e2e=yes"


def cm(name: str, ns: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": {"watchkeeper.dev/e2e": "yes"}},
            "data": data}


async def collect(w: wk.Watcher, until: Any, timeout: float = 60) -> list[wk.Event]:
    seen: list[wk.Event] = []
    async with asyncio.timeout(timeout):
        async for ev in w:
            seen.append(ev)
            if until(seen):
                break
    return seen


async def test_verbs_and_paginated_list(client: wk.Client, namespace: str) -> None:
    api = client.api("configmaps", namespace=namespace)
    for i in range(12):
        await api.create(cm(f"c{i}", namespace, i=str(i)))
    page = await api.list(limit=5, label_selector=MINE)
    assert len(page.items) == 5 and page.continue_token
    everything = await api.list_all(page_size=5, label_selector=MINE)
    assert sorted(wk.meta.name(o) for o in everything.items) == sorted(f"c{i}" for i in range(12))
    await api.patch("c0", {"data": {"i": "merged"}})
    await api.patch("c1", [{"op": "replace", "path": "/data/i", "value": "json"}], type="json")
    # c2's fields belong to the manager that created it: taking them over needs force.
    applied = await api.patch("c2", cm("c2", namespace, i="applied"), type="apply",
                              field_manager="wk-e2e", force=True)
    assert applied["data"]["i"] == "applied"
    assert (await api.get("c0"))["data"]["i"] == "merged"
    await api.delete("c0")
    try:
        await api.get("c0")
    except wk.NotFound as exc:
        assert "c0" in str(exc)
    else:
        raise AssertionError("deleted object still readable")


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
async def test_watcher_delivers_changes_and_resumes_without_relist(
    client: wk.Client, namespace: str, lazy: bool
) -> None:
    api = client.api("configmaps", namespace=namespace)
    await api.create(cm("before", namespace))
    w = wk.watcher(api, wk.WatchConfig(server_timeout=5, label_selector=MINE, lazy_decode=lazy))
    events: list[wk.Event] = []

    async def writer() -> None:
        await asyncio.sleep(7)  # past one server-side timeout: the watch was resumed
        await api.create(cm("after", namespace))
        await api.delete("before")

    task = asyncio.create_task(writer())
    async with asyncio.timeout(60):
        async for ev in w:
            events.append(ev)
            if isinstance(ev, wk.Delete):
                break
    await task
    assert [type(e).__name__ for e in events if not isinstance(e, wk.WatchError)][:3] == [
        "InitStart", "InitApply", "InitDone"]
    assert any(isinstance(e, wk.Apply) and wk.meta.name(e.obj) == "after" for e in events)
    assert w.health.relists == 1
    assert not [e for e in events if isinstance(e, wk.WatchError)]


async def service_account_client(client: wk.Client, namespace: str, sa: str) -> wk.Client:
    """A client for a fresh service account with no rights (a TokenRequest token)."""
    await client.api("serviceaccounts", namespace=namespace).create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}})
    resp = await client.transport.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{sa}/token",
        body=b'{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}}',
        content_type="application/json",
    )
    token = msgspec.json.decode(resp.body)["status"]["token"]
    return wk.Client(wk.ClientConfig(
        server=client.config.server, ca_data=client.config.ca_data,
        insecure_skip_tls_verify=client.config.insecure_skip_tls_verify,
        tls_server_name=client.config.tls_server_name, auth=StaticToken(token),
    ))


async def test_forbidden_is_surfaced_then_recovers_when_rbac_is_granted(
    client: wk.Client, namespace: str
) -> None:
    sa = "wk-e2e-limited"
    limited = await service_account_client(client, namespace, sa)
    async with limited:
        w = wk.watcher(limited.api("configmaps", namespace=namespace),
                       wk.WatchConfig(max_unhealthy=None), backoff=wk.ConstantBackoff(1))
        seen = await collect(w, lambda s: any(isinstance(e, wk.WatchError) for e in s))
        err = next(e.error for e in seen if isinstance(e, wk.WatchError))
        assert isinstance(err, wk.Forbidden)
        assert f'system:serviceaccount:{namespace}:{sa}' in str(err)
        rbac = "rbac.authorization.k8s.io"
        await client.api(f"roles.{rbac}", namespace=namespace).create({
            "apiVersion": f"{rbac}/v1", "kind": "Role", "metadata": {"name": "read-cm"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                       "verbs": ["get", "list", "watch"]}]})
        await client.api(f"rolebindings.{rbac}", namespace=namespace).create({
            "apiVersion": f"{rbac}/v1", "kind": "RoleBinding", "metadata": {"name": "read-cm"},
            "roleRef": {"apiGroup": rbac, "kind": "Role", "name": "read-cm"},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}]})
        await collect(w, lambda s: any(isinstance(e, wk.InitDone) for e in s), timeout=120)
        assert w.health.state is wk.WatchState.HEALTHY


async def test_missing_crd_is_surfaced_then_recovers_once_installed(
    client: wk.Client, namespace: str
) -> None:
    group = f"e2e{uuid.uuid4().hex[:6]}.watchkeeper.dev"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}]},
    }
    crds = client.api("customresourcedefinitions.apiextensions.k8s.io")
    w = wk.watcher(client.api(f"gadgets.{group}", namespace=namespace),
                   wk.WatchConfig(max_unhealthy=None), backoff=wk.ConstantBackoff(1))
    try:
        seen = await collect(w, lambda s: any(isinstance(e, wk.WatchError) for e in s))
        assert isinstance(next(e.error for e in seen if isinstance(e, wk.WatchError)),
                          wk.NotFound)
        await crds.create(crd)
        await collect(w, lambda s: any(isinstance(e, wk.InitDone) for e in s), timeout=120)
    finally:
        with contextlib.suppress(wk.NotFound):
            await crds.delete(f"gadgets.{group}")


async def test_controller_with_leader_election_reconciles(
    client: wk.Client, namespace: str
) -> None:
    from watchkeeper.leader import LeaderElector

    api = client.api("configmaps", namespace=namespace)
    await api.create(cm("work", namespace))
    done = asyncio.Event()

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        done.set()
        return wk.Action.await_change()

    elector = LeaderElector(client.api("leases.coordination.k8s.io", namespace=namespace),
                            "wk-e2e")
    stop = asyncio.Event()
    ctrl = wk.Controller(api, wk.ControllerConfig(handle_signals=False))
    task = asyncio.create_task(ctrl.run(reconcile, stop=stop, elector=elector))
    await asyncio.wait_for(done.wait(), 60)
    lease = await client.api("leases.coordination.k8s.io", namespace=namespace).get("wk-e2e")
    assert lease["spec"]["holderIdentity"] == elector.identity
    stop.set()
    await asyncio.wait_for(task, 30)


async def test_streaming_initial_list_or_its_fallback(client: wk.Client, namespace: str) -> None:
    """sendInitialEvents where the cluster has WatchList, a paginated LIST where it has not:
    either way the same objects, then live changes."""
    api = client.api("configmaps", namespace=namespace)
    for i in range(3):
        await api.create(cm(f"s{i}", namespace))
    w = wk.watcher(api, wk.WatchConfig(initial_list="streaming", label_selector=MINE))
    seen: list[wk.Event] = []
    async with asyncio.timeout(60):
        async for ev in w:
            seen.append(ev)
            if isinstance(ev, wk.InitDone):
                await api.create(cm("live", namespace))
            if isinstance(ev, wk.Apply) and ev.name == "live":
                break
    listed = [wk.meta.name(e.obj) for e in seen if isinstance(e, wk.InitApply)]
    assert sorted(listed) == ["s0", "s1", "s2"]
    assert not [e for e in seen if isinstance(e, wk.WatchError)]


async def test_max_unhealthy_raises_after_the_threshold(client: wk.Client, namespace: str) -> None:
    """A watch that can never work (no RBAC) raises WatcherUnhealthy at max_unhealthy, not
    before, chained to the Forbidden it kept seeing."""
    limited = await service_account_client(client, namespace, "wk-e2e-norights")
    async with limited:
        w = wk.watcher(limited.api("configmaps", namespace=namespace),
                       wk.WatchConfig(max_unhealthy=6), backoff=wk.ConstantBackoff(1))
        errors = 0
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with asyncio.timeout(60):
                async for ev in w:
                    errors += isinstance(ev, wk.WatchError)
        except wk.WatcherUnhealthy as exc:
            elapsed = loop.time() - started
            assert isinstance(exc.__cause__, wk.Forbidden), exc.__cause__
            assert "has not worked for 6 s" in str(exc)
        else:
            raise AssertionError("the watcher ended without WatcherUnhealthy")
    assert 5.5 <= elapsed < 15, elapsed
    assert 4 <= errors <= 9, errors  # one attempt a second, not a hot loop
