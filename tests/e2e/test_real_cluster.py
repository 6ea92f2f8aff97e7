"""The scenarios that can run on a real kube-apiserver (see conftest.py).

They map to the watcher's must-shows: verbs and pagination; resume without relist; 403
surfaced, then recovery once RBAC is granted; 404 surfaced, then recovery once the CRD is
installed; a controller under leader election; a streaming initial list or its fallback;
max_unhealthy. A real cluster is eventually consistent where the simulator is not: RBAC
grants, new CRDs and new service-account tokens take effect after a delay, so every such
wait polls (or lets the watcher retry) up to ``PATIENCE`` instead of sleeping a fixed time.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest

import watchkeeper as wk
from watchkeeper.client.auth import StaticToken

# Every namespace of a real cluster also holds kube-root-ca.crt (created by the controller
# manager shortly after the namespace), and controllers may add more: tests select their own
# objects by this label.
MINE = "watchkeeper.dev/e2e=yes"
# Seconds to wait for what a cluster's controllers do in their own time (RBAC reaching the
# authorizer, a CRD becoming Established and discoverable, a token being accepted): seconds
# on a kind cluster, far more on a loaded CI machine. Below conftest.TEST_TIMEOUT.
PATIENCE = 180.0


def cm(name: str, ns: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": {"watchkeeper.dev/e2e": "yes"}},
            "data": data}


async def collect(
    events: AsyncIterator[wk.Event], until: Callable[[list[wk.Event]], bool],
    timeout: float = PATIENCE,
) -> list[wk.Event]:
    """Events from ``events`` up to the first one after which ``until(seen)`` holds. Pass
    the same iterator again to continue where this stopped (one watcher, no restart)."""
    seen: list[wk.Event] = []
    async with asyncio.timeout(timeout):
        async for ev in events:
            seen.append(ev)
            if until(seen):
                break
    return seen


async def eventually(check: Callable[[], bool], timeout: float = PATIENCE) -> None:
    """Poll ``check`` until it holds (TimeoutError after ``timeout``)."""
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.1)


def count_watch_requests(api: wk.Api) -> Callable[[], int]:
    """A spy on ``api``: how many watch requests it has opened so far (each one still goes
    to the server unchanged)."""
    real = api.watch
    sent = 0

    def watch(**kw: Any) -> Any:
        nonlocal sent
        sent += 1
        return real(**kw)

    api.watch = watch  # type: ignore[method-assign]
    return lambda: sent


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
    assert (await api.get("c1"))["data"]["i"] == "json"
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
    watches = count_watch_requests(api)
    w = wk.watcher(api, wk.WatchConfig(server_timeout=5, label_selector=MINE, lazy_decode=lazy))

    async def writer() -> None:
        # Write only once the server has ended the first watch at its timeoutSeconds and the
        # watcher has asked again: on a slow cluster a fixed sleep could land before that.
        await eventually(lambda: watches() >= 2)
        await api.create(cm("after", namespace))
        await api.delete("before")

    task = asyncio.create_task(writer())
    try:
        async with contextlib.aclosing(aiter(w)) as it:
            events = await collect(it, lambda s: isinstance(s[-1], wk.Delete))
        await task
    finally:
        task.cancel()
    assert watches() >= 2
    assert [type(e).__name__ for e in events if not isinstance(e, wk.WatchError)][:3] == [
        "InitStart", "InitApply", "InitDone"]
    assert any(isinstance(e, wk.Apply) and wk.meta.name(e.obj) == "after" for e in events)
    assert w.health.relists == 1
    assert not [e for e in events if isinstance(e, wk.WatchError)]


async def wait_until_authenticated(limited: wk.Client, namespace: str) -> float:
    """Poll until the token authenticates: a 403 (known, no rights), not a 401. A brand-new
    service account's token can be refused for a moment by an authenticator that reads a
    cache; the tests are about the 403 after that. Returns the last 403's round trip (s)."""
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(PATIENCE):
        while True:
            started = loop.time()
            try:
                await limited.api("configmaps", namespace=namespace).list(limit=1)
            except wk.Unauthorized:
                await asyncio.sleep(0.5)
                continue
            except wk.Forbidden:
                return loop.time() - started
            raise AssertionError("a service account without any rights could list configmaps")


async def service_account_client(client: wk.Client, namespace: str, sa: str) -> wk.Client:
    """A client for a fresh service account with no rights (a TokenRequest token: clusters
    since 1.24 no longer create token Secrets), once the server accepts its token."""
    await client.api("serviceaccounts", namespace=namespace).create(
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": sa, "labels": {"watchkeeper.dev/e2e": "yes"}}})
    resp = await client.transport.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{sa}/token",
        body=b'{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}}',
        content_type="application/json",
    )
    token = msgspec.json.decode(resp.body)["status"]["token"]
    limited = wk.Client(wk.ClientConfig(
        server=client.config.server, ca_data=client.config.ca_data,
        insecure_skip_tls_verify=client.config.insecure_skip_tls_verify,
        tls_server_name=client.config.tls_server_name, auth=StaticToken(token),
    ))
    try:
        await wait_until_authenticated(limited, namespace)
    except BaseException:
        await limited.close()
        raise
    return limited


async def test_forbidden_is_surfaced_then_recovers_when_rbac_is_granted(
    client: wk.Client, namespace: str
) -> None:
    sa = "wk-e2e-limited"
    limited = await service_account_client(client, namespace, sa)
    async with limited:
        w = wk.watcher(limited.api("configmaps", namespace=namespace),
                       wk.WatchConfig(max_unhealthy=None), backoff=wk.ConstantBackoff(1))
        async with contextlib.aclosing(aiter(w)) as it:
            seen = await collect(it, lambda s: any(isinstance(e, wk.WatchError) for e in s))
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
            # The same watcher, still retrying: the grant reaches the authorizer in its time.
            await collect(it, lambda s: any(isinstance(e, wk.InitDone) for e in s))
            assert w.health.state is wk.WatchState.HEALTHY


async def test_missing_crd_is_surfaced_then_recovers_once_installed(
    client: wk.Client, namespace: str
) -> None:
    # A fresh group each run: a CRD left by an earlier run (its deletion waits for the
    # customresourcecleanup finalizer) can never be mistaken for this one.
    group = f"e2e{uuid.uuid4().hex[:6]}.watchkeeper.dev"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{group}", "labels": {"watchkeeper.dev/e2e": "yes"}},
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
        async with contextlib.aclosing(aiter(w)) as it:
            seen = await collect(it, lambda s: any(isinstance(e, wk.WatchError) for e in s))
            assert isinstance(next(e.error for e in seen if isinstance(e, wk.WatchError)),
                              wk.NotFound)
            await crds.create(crd)
            # Served only once Established and in discovery: the same watcher keeps retrying.
            await collect(it, lambda s: any(isinstance(e, wk.InitDone) for e in s))
            # ...and its watch, not only its list, serves the new resource.
            await client.api(f"gadgets.{group}", namespace=namespace).create(
                {"apiVersion": f"{group}/v1", "kind": "Gadget",
                 "metadata": {"name": "g1", "namespace": namespace}})
            live = await collect(it, lambda s: isinstance(s[-1], wk.Apply))
            assert wk.meta.name(live[-1].obj) == "g1"
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
        # kube-root-ca.crt is reconciled too on a cluster: only our object counts.
        if wk.meta.name(obj) == "work":
            done.set()
        return wk.Action.await_change()

    leases = client.api("leases.coordination.k8s.io", namespace=namespace)
    elector = LeaderElector(leases, "wk-e2e")
    stop = asyncio.Event()
    ctrl = wk.Controller(api, wk.ControllerConfig(handle_signals=False))
    task = asyncio.create_task(ctrl.run(reconcile, stop=stop, elector=elector))
    stopped = False
    try:
        await asyncio.wait_for(done.wait(), PATIENCE)
        lease = await leases.get("wk-e2e")
        assert lease["spec"]["holderIdentity"] == elector.identity
        stop.set()
        await asyncio.wait_for(task, 60)
        stopped = True
    finally:
        if not stopped:  # a failed test still stops its controller (and its watches)
            stop.set()
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def test_streaming_initial_list_or_its_fallback(client: wk.Client, namespace: str) -> None:
    """sendInitialEvents where the cluster has WatchList (on by default from 1.32), a
    paginated LIST where it has not (1.28-1.31 answer 422): the same objects, then live
    changes. The initial-events-end bookmark comes when the server sends it (~1 s later in
    reference 065), so the live change is made only after InitDone."""
    api = client.api("configmaps", namespace=namespace)
    for i in range(3):
        await api.create(cm(f"s{i}", namespace))
    w = wk.watcher(api, wk.WatchConfig(initial_list="streaming", label_selector=MINE))
    seen: list[wk.Event] = []
    async with asyncio.timeout(PATIENCE), contextlib.aclosing(aiter(w)) as it:
        async for ev in it:
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
        # One attempt a second means >= 4 attempts in 6 s while a 403 is quick; a cluster
        # that needs seconds per answer fits fewer (answer + 1 s pause per attempt).
        rtt = await wait_until_authenticated(limited, namespace)
        min_errors = 4 if rtt < 0.25 else 2
        w = wk.watcher(limited.api("configmaps", namespace=namespace),
                       wk.WatchConfig(max_unhealthy=6), backoff=wk.ConstantBackoff(1))
        errors = 0
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with asyncio.timeout(60), contextlib.aclosing(aiter(w)) as it:
                async for ev in it:
                    errors += isinstance(ev, wk.WatchError)
        except wk.WatcherUnhealthy as exc:
            elapsed = loop.time() - started
            assert isinstance(exc.__cause__, wk.Forbidden), exc.__cause__
            assert "has not worked for 6 s" in str(exc)
        else:
            raise AssertionError("the watcher ended without WatcherUnhealthy")
    assert 5.5 <= elapsed < 15, elapsed
    assert min_errors <= errors <= 9, (errors, rtt)  # one attempt a second, not a hot loop


async def test_sharded_replicas_split_the_objects_and_hand_over(
    client: wk.Client, namespace: str
) -> None:
    """Two sharded replicas (short leases) on the ConfigMaps this test made: the sharder
    labels each with its shard, each replica reconciles only objects labelled with its own
    shard and never one the other is reconciling at the same time; one leaves, its objects
    move to the other (label, drain and release patches, a Lease list by label selector,
    conditional writes: all as a real API server takes them) and its Lease is deleted.

    Which replica owns what first depends on timing (the sharder may label every object
    before the second replica's Lease exists, then move half of them): the test checks
    the hand-over's guarantees, not one order of events."""
    api = client.api("configmaps", namespace=namespace)
    names = {f"sh{i}" for i in range(12)}
    for name in sorted(names):
        await api.create(cm(name, namespace))
    ring = f"e2e{uuid.uuid4().hex[:6]}"
    key = f"shard.watchkeeper.io/{ring}"
    reconciled: dict[str, set[str]] = {"a": set(), "b": set()}
    spans: list[tuple[str, str, float, float]] = []  # (object, replica, start, end)
    not_mine: list[tuple[str, str, str]] = []  # (replica, object, its shard label)
    loop = asyncio.get_running_loop()

    def operator(replica: str) -> wk.Operator:
        async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
            name = wk.meta.name(obj)
            label = (obj["metadata"].get("labels") or {}).get(key, "")
            if label != replica:
                not_mine.append((replica, name, label))
            start = loop.time()
            await asyncio.sleep(0.05)  # long enough for two replicas' reconciles to overlap
            spans.append((name, replica, start, loop.time()))
            reconciled[replica].add(name)
            return wk.Action.await_change()

        sharding = wk.Sharding(ring=ring, replica_id=replica, lease_namespace=namespace,
                               lease_duration=4.0, renew_deadline=3.0, retry_period=1.0)
        controller = wk.Controller(api, sharding=sharding,
                                   watch_config=wk.WatchConfig(label_selector=MINE))
        return wk.Operator(controller, reconcile)

    async def owners() -> dict[str, str]:
        listed = await api.list_all(label_selector=MINE)
        return {wk.meta.name(o): (o["metadata"].get("labels") or {}).get(key, "")
                for o in listed.items}

    async def until(check: Callable[[], Any]) -> None:
        async with asyncio.timeout(PATIENCE):
            while not await check():
                await asyncio.sleep(0.5)

    stops = {r: asyncio.Event() for r in ("a", "b")}
    tasks = {r: asyncio.create_task(wk.run(operator(r), stop=stops[r], handle_signals=False))
             for r in ("a", "b")}
    try:
        async def split() -> bool:
            now = await owners()
            return set(now.values()) == {"a", "b"} and all(
                {n for n, o in now.items() if o == r} <= reconciled[r] for r in ("a", "b"))

        await until(split)
        stops["a"].set()  # a leaves: drains, releases its Lease; its objects go to b
        await asyncio.wait_for(tasks["a"], 60)

        async def moved() -> bool:
            return set((await owners()).values()) == {"b"} and reconciled["b"] >= names

        await until(moved)
        leases = client.api("leases.coordination.k8s.io", namespace=namespace)

        async def forgotten() -> bool:
            listed = await leases.list_all(label_selector=f"shard.watchkeeper.io/ring={ring}")
            return [wk.meta.name(o) for o in listed.items] == [f"{ring}-shard-b"]

        await until(forgotten)
    finally:
        for stop in stops.values():
            stop.set()
        await asyncio.gather(*tasks.values(), return_exceptions=True)
    assert not not_mine, not_mine  # each reconciled only objects labelled with its shard
    by_object: dict[str, list[tuple[float, float, str]]] = {}
    for name, replica, start, end in spans:
        by_object.setdefault(name, []).append((start, end, replica))
    for name, runs in by_object.items():  # never two replicas on one object at once
        runs.sort()
        for (_, end, r1), (start, _, r2) in itertools.pairwise(runs):
            assert r1 == r2 or end <= start, (name, runs)
