"""Every ``Api`` verb against the simulator over real loopback sockets (no HTTP mocking)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper.client import RawEvent, WatchStream
from watchkeeper_sim import ApiServer, crd_manifest

JSON = dict[str, Any]

CRD: JSON = crd_manifest()


@pytest.fixture
async def srv() -> AsyncIterator[ApiServer]:
    async with ApiServer(bookmark_interval=0.3, bookmark_lead=0.2, too_large_rv_wait=0.2) as s:
        yield s


@pytest.fixture
async def client(srv: ApiServer) -> AsyncIterator[wk.Client]:
    async with srv.client() as c:
        yield c


def cm(name: str, ns: str = "default", labels: dict[str, str] | None = None,
       **data: str) -> JSON:
    meta: JSON = {"name": name, "namespace": ns}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {"k": "v"}}


def deployment(name: str, image: str = "nginx:1.25") -> JSON:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "app", "image": image}]}}},
    }


def names(items: list[JSON]) -> list[str]:
    return sorted(i["metadata"]["name"] for i in items)


def is_discovery(path: str) -> bool:
    """/api, /apis, /api/v1, /apis/{group} and /apis/{group}/{version}: not resource paths."""
    parts = [p for p in path.split("/") if p]
    if not parts:
        return False
    return (parts[0] == "api" and len(parts) <= 2) or (parts[0] == "apis" and len(parts) <= 3)


def discovery_requests(srv: ApiServer) -> int:
    return sum(1 for r in srv.requests if r.method == "GET" and is_discovery(r.path))


def managers(obj: JSON) -> set[str]:
    return {m["manager"] for m in obj["metadata"].get("managedFields") or []}


# -- a namespaced built-in: configmaps ---------------------------------------------------------


async def test_configmap_crud(client: wk.Client) -> None:
    api = client.api("configmaps", namespace="default")
    created = await api.create(cm("a", x="1"))
    assert created["metadata"]["uid"] and created["data"] == {"x": "1"}
    with pytest.raises(wk.AlreadyExists):
        await api.create(cm("a"))

    got = await api.get("a")
    assert got["metadata"]["uid"] == created["metadata"]["uid"]

    got["data"] = {"x": "2"}
    replaced = await api.replace("a", got)
    assert replaced["data"] == {"x": "2"}
    assert int(replaced["metadata"]["resourceVersion"]) > int(got["metadata"]["resourceVersion"])
    # replacing with the stale resourceVersion loses the race
    with pytest.raises(wk.Conflict) as stale:
        await api.replace("a", got)
    assert stale.value.code == 409 and 'configmaps "a"' in str(stale.value)

    listed = await api.list()
    assert names(listed.items) == ["a"] and listed.resource_version

    status = await api.delete("a")
    assert status["kind"] == "Status" and status["status"] == "Success"
    with pytest.raises(wk.NotFound) as missing:
        await api.get("a")
    assert missing.value.details["name"] == "a"
    with pytest.raises(wk.NotFound):
        await api.delete("a")


async def test_per_call_namespace_and_object_namespace(srv: ApiServer, client: wk.Client) -> None:
    srv.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    everywhere = client.api("configmaps", namespace=None)
    await everywhere.create(cm("x", ns="other"))  # the object's namespace is used
    assert (await everywhere.get("x", namespace="other"))["metadata"]["namespace"] == "other"
    patched = await everywhere.patch("x", {"data": {"k": "w"}}, namespace="other")
    assert patched["data"] == {"k": "w"}
    await everywhere.delete("x", namespace="other")
    with pytest.raises(wk.NotFound):
        await client.api("configmaps", namespace="other").get("x")


async def test_default_namespace_comes_from_the_config(client: wk.Client) -> None:
    api = client.api("cm")  # short name, namespace omitted: the context's ("default")
    assert api.namespace == client.default_namespace == "default"
    await api.create(cm("short"))
    assert (await client.api("ConfigMap", namespace="default").get("short"))["data"]


# -- a cluster-scoped built-in: namespaces -----------------------------------------------------


async def test_namespace_crud_cluster_scoped(client: wk.Client) -> None:
    api = client.api("namespaces")
    ns = await api.create({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": "team-a", "labels": {"team": "a"}}})
    assert ns["status"]["phase"] == "Active"
    assert "namespace" not in ns["metadata"]
    got = await api.get("team-a")
    assert got["metadata"]["labels"]["team"] == "a"
    listed = await api.list(label_selector="team=a")
    assert names(listed.items) == ["team-a"]
    patched = await api.patch("team-a", {"metadata": {"labels": {"tier": "1"}}})
    assert {"team": "a", "tier": "1"}.items() <= patched["metadata"]["labels"].items()
    got = await api.get("team-a")
    got["metadata"]["annotations"] = {"note": "x"}
    assert (await api.replace("team-a", got))["metadata"]["annotations"] == {"note": "x"}
    # A namespace lingers (Terminating) while its content is cleaned up: the object comes back.
    answer = await api.delete("team-a")
    assert answer["kind"] == "Namespace" and answer["status"]["phase"] == "Terminating"
    assert answer["metadata"]["deletionTimestamp"]


# -- lists: all namespaces, pagination, selectors ----------------------------------------------


async def test_list_across_all_namespaces(srv: ApiServer, client: wk.Client) -> None:
    for ns in ("ns1", "ns2"):
        srv.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        srv.create_object(cm(f"in-{ns}", ns=ns))
    before = len(srv.requests)
    listed = await client.api("configmaps", namespace=None).list()
    assert names(listed.items) == ["in-ns1", "in-ns2"]
    assert {i["metadata"]["namespace"] for i in listed.items} == {"ns1", "ns2"}
    (rec,) = srv.requests[before:]
    assert rec.path == "/api/v1/configmaps" and rec.is_list
    only = await client.api("configmaps", namespace="ns2").list()
    assert names(only.items) == ["in-ns2"]
    by_field = await client.api("configmaps", namespace=None).list(
        field_selector="metadata.namespace=ns1")
    assert names(by_field.items) == ["in-ns1"]


async def test_pagination_with_limit_and_continue(srv: ApiServer, client: wk.Client) -> None:
    for i in range(25):
        srv.create_object(cm(f"cm-{i:02d}"))
    api = client.api("configmaps", namespace="default")
    first = await api.list(limit=10)
    assert len(first.items) == 10 and first.continue_token
    assert first.remaining_item_count == 15
    second = await api.list(limit=10, continue_token=first.continue_token)
    third = await api.list(limit=10, continue_token=second.continue_token)
    assert len(second.items) == 10 and len(third.items) == 5
    assert third.continue_token is None
    got = names(first.items + second.items + third.items)
    assert got == [f"cm-{i:02d}" for i in range(25)]

    lists_before = srv.count(is_list=True)
    srv.create_object(cm("late"))  # after the first page: list_all is one snapshot
    everything = await api.list_all(page_size=10)
    assert srv.count(is_list=True) - lists_before == 3
    assert len(everything.items) == 26
    assert [r.query.get("limit") for r in srv.requests[-3:]] == ["10", "10", "10"]
    assert "continue" not in srv.requests[-3].query
    assert all(r.query.get("continue") for r in srv.requests[-2:])
    assert everything.continue_token is None and everything.resource_version


async def test_list_all_is_consistent_at_the_first_page(srv: ApiServer, client: wk.Client) -> None:
    for i in range(25):
        srv.create_object(cm(f"cm-{i:02d}"))
    api = client.api("configmaps", namespace="default")
    first = await api.list(limit=10)
    srv.create_object(cm("zz-new"))  # sorts last: a later page must not include it
    rest = await api.list(limit=100, continue_token=first.continue_token)
    assert "zz-new" not in names(rest.items) and len(rest.items) == 15


async def test_label_and_field_selectors(srv: ApiServer, client: wk.Client) -> None:
    srv.create_object(cm("a1", labels={"app": "a", "tier": "web"}))
    srv.create_object(cm("a2", labels={"app": "a", "tier": "db"}))
    srv.create_object(cm("b1", labels={"app": "b"}))
    srv.create_object(cm("none"))
    api = client.api("configmaps", namespace="default")
    assert names((await api.list(label_selector="app=a")).items) == ["a1", "a2"]
    assert names((await api.list(label_selector="app in (a,b),tier!=db")).items) == ["a1", "b1"]
    assert names((await api.list(label_selector="!app")).items) == ["none"]
    assert names((await api.list(label_selector="app")).items) == ["a1", "a2", "b1"]
    assert names((await api.list(field_selector="metadata.name=b1")).items) == ["b1"]
    both = await api.list(label_selector="app=a", field_selector="metadata.name!=a1")
    assert names(both.items) == ["a2"]
    paged = await api.list_all(label_selector="app", page_size=2)
    assert names(paged.items) == ["a1", "a2", "b1"]
    assert srv.requests[-1].query["labelSelector"] == "app"


# -- watch: the raw stream ---------------------------------------------------------------------


async def read_events(stream: WatchStream, out: list[RawEvent]) -> None:
    async for ev in stream:
        out.append(ev)


async def test_raw_watch_stream(srv: ApiServer, client: wk.Client) -> None:
    api = client.api("configmaps", namespace="default")
    srv.create_object(cm("before"))
    start_rv = (await api.list()).resource_version
    events: list[RawEvent] = []
    started = time.monotonic()
    async with api.watch(resource_version=start_rv, timeout_seconds=1) as stream:
        reader = asyncio.create_task(read_events(stream, events))
        while not srv.open_watches:
            await asyncio.sleep(0.01)
        await api.create(cm("w"))
        await api.patch("w", {"data": {"k": "2"}})
        await api.delete("w")
        await asyncio.wait_for(reader, 5)  # the stream ends by itself at timeoutSeconds
    elapsed = time.monotonic() - started
    assert 0.8 <= elapsed < 3.0
    changes = [(e.type, e.object["metadata"]["name"]) for e in events if e.type != "BOOKMARK"]
    assert changes == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]
    assert events[1].object["data"] == {"k": "2"}
    bookmarks = [e for e in events if e.type == "BOOKMARK"]
    assert bookmarks, "allowWatchBookmarks is on by default and the server sends them"
    assert all("name" not in b.object["metadata"] and b.object["metadata"]["resourceVersion"]
               for b in bookmarks)
    last_rv = int(events[-1].object["metadata"]["resourceVersion"])
    assert last_rv >= int(events[2].object["metadata"]["resourceVersion"])
    (rec,) = [r for r in srv.requests if r.is_watch]
    assert rec.query["timeoutSeconds"] == "1" and rec.query["allowWatchBookmarks"] == "true"
    assert rec.query["resourceVersion"] == start_rv


async def test_lazy_watch_stream_has_keys_before_decoding(
    srv: ApiServer, client: wk.Client
) -> None:
    api = client.api("configmaps", namespace="default")
    start_rv = (await api.list()).resource_version
    events: list[RawEvent] = []
    async with api.watch(resource_version=start_rv, timeout_seconds=1, lazy=True) as stream:
        reader = asyncio.create_task(read_events(stream, events))
        while not srv.open_watches:
            await asyncio.sleep(0.01)
        created = await api.create(cm("lazy", k="v"))
        await asyncio.wait_for(reader, 5)
    (added,) = [e for e in events if e.type == "ADDED"]
    assert not added.decoded
    assert (added.namespace, added.name) == ("default", "lazy")
    assert added.resource_version == created["metadata"]["resourceVersion"]
    assert not added.decoded, "reading the keys must not decode the object"
    assert added.object["data"] == {"k": "v"} and added.decoded
    assert repr(added) == f"RawEvent(ADDED, default/lazy, rv={added.resource_version})"


async def test_watch_with_selectors_and_initial_events(srv: ApiServer, client: wk.Client) -> None:
    srv.create_object(cm("keep", labels={"w": "yes"}))
    srv.create_object(cm("skip", labels={"w": "no"}))
    api = client.api("configmaps", namespace=None)
    events: list[RawEvent] = []
    async with api.watch(label_selector="w=yes", send_initial_events=True,
                         timeout_seconds=1) as stream:
        await read_events(stream, events)
    added = [e.object["metadata"]["name"] for e in events if e.type == "ADDED"]
    assert added == ["keep"]
    ends = [e for e in events if e.type == "BOOKMARK"
            and (e.object["metadata"].get("annotations") or {}).get(
                "k8s.io/initial-events-end") == "true"]
    assert len(ends) == 1


async def test_watch_with_an_invalid_resource_version_is_typed(client: wk.Client) -> None:
    api = client.api("configmaps", namespace="default")
    with pytest.raises(wk.ApiError) as info:
        async with api.watch(resource_version="not-a-number", timeout_seconds=1) as stream:
            async for _ev in stream:
                pass
    assert info.value.code is not None and info.value.code >= 400


# -- patches -----------------------------------------------------------------------------------


async def test_merge_json_and_strategic_patches(client: wk.Client) -> None:
    cms = client.api("configmaps", namespace="default")
    await cms.create(cm("p", a="1", b="2"))
    merged = await cms.patch("p", {"data": {"a": "10", "b": None}}, type="merge")
    assert merged["data"] == {"a": "10"}
    jsonp = await cms.patch(
        "p", [{"op": "test", "path": "/data/a", "value": "10"},
              {"op": "add", "path": "/data/c", "value": "3"}], type="json")
    assert jsonp["data"] == {"a": "10", "c": "3"}
    with pytest.raises(wk.ApiError) as failed_test:  # a failing "test" op rejects the patch
        await cms.patch("p", [{"op": "test", "path": "/data/a", "value": "nope"}], type="json")
    assert failed_test.value.code in (409, 422)
    assert (await cms.get("p"))["data"] == {"a": "10", "c": "3"}

    deploys = client.api("deployments.apps", namespace="default")
    await deploys.create(deployment("web"))
    sidecar = {"spec": {"template": {"spec": {"containers": [
        {"name": "sidecar", "image": "envoy:1"}]}}}}
    strategic = await deploys.patch("web", sidecar, type="strategic")
    containers = strategic["spec"]["template"]["spec"]["containers"]
    assert sorted(c["name"] for c in containers) == ["app", "sidecar"]  # merged by name
    # the same body as a merge patch replaces the list
    merged_d = await deploys.patch("web", sidecar, type="merge")
    assert [c["name"] for c in merged_d["spec"]["template"]["spec"]["containers"]] == ["sidecar"]


async def test_server_side_apply_conflict_and_force(client: wk.Client) -> None:
    api = client.api("configmaps", namespace="default")
    applied = await api.patch("ssa", cm("ssa", k="mine"), type="apply", field_manager="alpha")
    assert applied["data"] == {"k": "mine"} and managers(applied) == {"alpha"}
    again = await api.patch("ssa", cm("ssa", k="mine"), type="apply", field_manager="alpha")
    assert again["metadata"]["resourceVersion"] == applied["metadata"]["resourceVersion"]

    with pytest.raises(wk.Conflict) as info:
        await api.patch("ssa", cm("ssa", k="theirs"), type="apply", field_manager="beta")
    err = info.value
    assert not isinstance(err, wk.AlreadyExists)
    assert err.code == 409 and "alpha" in str(err) and ".data.k" in str(err)
    assert (await api.get("ssa"))["data"] == {"k": "mine"}

    forced = await api.patch("ssa", cm("ssa", k="theirs"), type="apply",
                             field_manager="beta", force=True)
    assert forced["data"] == {"k": "theirs"}
    assert "beta" in managers(forced)


async def test_apply_force_sends_the_parameter(srv: ApiServer, client: wk.Client) -> None:
    api = client.api("configmaps", namespace="default")
    await api.patch("f", cm("f"), type="apply", field_manager="m", force=True)
    rec = srv.requests[-1]
    assert rec.method == "PATCH" and rec.query == {"fieldManager": "m", "force": "true"}


# -- delete: Status vs the object, preconditions, dry run --------------------------------------


async def test_delete_returns_the_object_while_finalizers_hold_it(client: wk.Client) -> None:
    api = client.api("configmaps", namespace="default")
    obj = cm("held")
    obj["metadata"]["finalizers"] = ["example.com/hold"]
    await api.create(obj)
    answer = await api.delete("held")
    assert answer["kind"] == "ConfigMap" and answer["metadata"]["deletionTimestamp"]
    assert answer["metadata"]["finalizers"] == ["example.com/hold"]
    assert (await api.get("held"))["metadata"]["deletionTimestamp"]
    await api.patch("held", {"metadata": {"finalizers": None}})
    with pytest.raises(wk.NotFound):
        await api.get("held")


async def test_delete_with_propagation_policy(srv: ApiServer, client: wk.Client) -> None:
    api = client.api("deployments.apps", namespace="default")
    await api.create(deployment("fg"))
    answer = await api.delete("fg", propagation_policy="Foreground")
    assert answer["kind"] == "Deployment"
    assert "foregroundDeletion" in answer["metadata"]["finalizers"]
    await api.create(deployment("bg"))
    gone = await api.delete("bg", propagation_policy="Background", grace_period_seconds=0)
    assert gone["kind"] == "Status"
    sent = [r for r in srv.requests if r.method == "DELETE"]
    assert len(sent) == 2


async def test_delete_preconditions(client: wk.Client) -> None:
    api = client.api("configmaps", namespace="default")
    obj = await api.create(cm("pre"))
    meta = obj["metadata"]
    with pytest.raises(wk.Conflict) as by_rv:
        await api.delete("pre", preconditions={"resourceVersion": "1"})
    assert "precondition" in str(by_rv.value).lower()
    with pytest.raises(wk.Conflict) as by_uid:
        await api.delete("pre", preconditions={"uid": "00000000-0000-0000-0000-000000000000"})
    assert "UID" in str(by_uid.value)
    assert (await api.get("pre"))["metadata"]["uid"] == meta["uid"]
    done = await api.delete(
        "pre", preconditions={"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]})
    assert done["status"] == "Success"


async def test_dry_run_changes_nothing(client: wk.Client) -> None:
    api = client.api("configmaps", namespace="default")
    would = await api.create(cm("dry"), dry_run=True)
    assert would["metadata"]["name"] == "dry"
    with pytest.raises(wk.NotFound):
        await api.get("dry")
    real = await api.create(cm("dry", k="orig"))
    rv = real["metadata"]["resourceVersion"]
    patched = await api.patch("dry", {"data": {"k": "new"}}, dry_run=True)
    assert patched["data"] == {"k": "new"}
    changed = dict(real, data={"k": "replaced"})
    assert (await api.replace("dry", changed, dry_run=True))["data"] == {"k": "replaced"}
    await api.delete("dry", dry_run=True)
    still = await api.get("dry")
    assert still["data"] == {"k": "orig"} and still["metadata"]["resourceVersion"] == rv


# -- a CRD: status subresource, discovery --------------------------------------------------------


async def test_status_subresource_on_a_crd(srv: ApiServer, client: wk.Client) -> None:
    await client.api("customresourcedefinitions").create(CRD)
    api = client.api("widgets.example.com", namespace="default")
    w = await api.create({"apiVersion": "example.com/v1", "kind": "Widget",
                          "metadata": {"name": "w1"}, "spec": {"size": 1},
                          "status": {"phase": "Ignored"}})
    assert "status" not in w or w["status"] != {"phase": "Ignored"}  # status is not written here

    w["status"] = {"phase": "Ready"}
    w["spec"] = {"size": 99}
    after = await api.replace_status("w1", w)
    assert after["status"] == {"phase": "Ready"} and after["spec"] == {"size": 1}
    assert srv.requests[-1].path.endswith("/widgets/w1/status")

    patched = await api.patch_status("w1", {"status": {"observed": 1}})
    assert patched["status"] == {"phase": "Ready", "observed": 1}
    assert (await api.get_status("w1"))["status"] == {"phase": "Ready", "observed": 1}

    # the main resource ignores status, the status subresource ignores spec
    main = await api.patch("w1", {"spec": {"size": 2}, "status": {"phase": "Hacked"}})
    assert main["spec"] == {"size": 2} and main["status"]["phase"] == "Ready"
    intent = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"},
              "status": {"phase": "Applied"}}
    with pytest.raises(wk.Conflict):  # .status.phase belongs to the manager that wrote it
        await api.patch_status("w1", intent, type="apply", field_manager="ctl")
    applied = await api.patch_status("w1", intent, type="apply", field_manager="ctl", force=True)
    assert applied["status"]["phase"] == "Applied"


async def test_server_side_apply_on_status_records_the_manager(
    srv: ApiServer, client: wk.Client
) -> None:
    srv.create_object(CRD)
    api = client.api("widgets.example.com", namespace="default")
    await api.create({"apiVersion": "example.com/v1", "kind": "Widget",
                      "metadata": {"name": "w1"}, "spec": {"size": 1}})
    intent: JSON = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"},
                    "status": {"phase": "Applied"}}
    applied = await api.patch_status("w1", intent, type="apply", field_manager="ctl")
    assert "ctl" in managers(applied)
    (entry,) = [f for f in applied["metadata"]["managedFields"] if f["manager"] == "ctl"]
    # As kube-apiserver records it: an Apply on the status subresource owning status.phase.
    assert (entry["operation"], entry.get("subresource")) == ("Apply", "status")
    assert "f:phase" in entry["fieldsV1"]["f:status"]
    stored = srv.get_object("example.com/v1", "Widget", "w1")
    assert "ctl" in managers(stored), "the ownership must be stored, not only returned"


async def test_crd_discovery_by_name_forms_is_cached(srv: ApiServer, client: wk.Client) -> None:
    srv.create_object(CRD)
    srv.create_object({"apiVersion": "example.com/v1", "kind": "Widget",
                       "metadata": {"name": "w1", "namespace": "default"}})
    for form in ("widgets.example.com", "Widget", "example.com/v1/widgets", "widget",
                 "widgets.v1.example.com"):
        before = discovery_requests(srv)
        res = await client.api(form, namespace="default").resource()
        assert (res.group, res.version, res.plural, res.kind, res.namespaced) == (
            "example.com", "v1", "widgets", "Widget", True), form
        assert discovery_requests(srv) > before, form  # each form is looked up once ...
        # ... and then served from the cache, however many Apis are made from it
        for _ in range(3):
            api = client.api(form, namespace="default")
            assert names((await api.list()).items) == ["w1"]
        assert (await client.api(form).get("w1"))["kind"] == "Widget"
    cached = discovery_requests(srv)
    for form in ("widgets.example.com", "Widget", "example.com/v1/widgets"):
        await client.api(form, namespace="default").list()
    assert discovery_requests(srv) == cached


async def test_builtins_need_no_discovery(srv: ApiServer, client: wk.Client) -> None:
    for form in ("deployments.apps", "apps/v1/deployments", "deployments", "Deployment",
                 "deploy"):
        api = client.api(form, namespace="default")
        res = await api.resource()
        assert (res.group, res.version, res.plural) == ("apps", "v1", "deployments"), form
    d = await client.api("deployments.apps", namespace="default").create(deployment("app"))
    assert d["apiVersion"] == "apps/v1" and d["kind"] == "Deployment"
    listed = await client.api("deployments.apps", namespace=None).list()
    assert names(listed.items) == ["app"]
    assert srv.requests[-1].path == "/apis/apps/v1/deployments"
    assert discovery_requests(srv) == 0


async def test_crd_deleted_then_recreated(srv: ApiServer, client: wk.Client) -> None:
    crds = client.api("customresourcedefinitions")
    await crds.create(CRD)
    api = client.api("widgets.example.com", namespace="default")
    await api.create({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "a"}})
    assert names((await api.list()).items) == ["a"]

    await crds.delete("widgets.example.com")
    with pytest.raises(wk.NotFound) as gone:
        await api.list()
    assert "is the CRD installed" in str(gone.value)
    with pytest.raises(wk.NotFound):
        await api.get("a")
    fresh = client.api("widgets.example.com", namespace="default")
    with pytest.raises(wk.UnknownResource) as unknown:
        await fresh.list()
    assert "widgets" in str(unknown.value)

    await crds.create(CRD)
    assert (await api.list()).items == []  # the same Api works again
    await fresh.create({"apiVersion": "example.com/v1", "kind": "Widget",
                        "metadata": {"name": "b"}})
    assert names((await client.api("Widget", namespace="default").list()).items) == ["b"]


async def test_crd_recreated_at_another_version_is_found_again(
    srv: ApiServer, client: wk.Client
) -> None:
    crds = client.api("customresourcedefinitions")
    await crds.create(CRD)
    api = client.api("widgets.example.com", namespace="default")
    assert (await api.list()).items == []
    await crds.delete("widgets.example.com")
    v2 = {**CRD, "spec": {**CRD["spec"], "versions": [
        {**CRD["spec"]["versions"][0], "name": "v2"}]}}
    await crds.create(v2)
    with pytest.raises(wk.NotFound):  # the old version is not served: that request fails ...
        await api.list()
    assert (await api.list()).items == []  # ... and the next one finds the new version
    assert (await api.resource()).version == "v2"


async def test_concurrent_lookups_share_one_discovery(srv: ApiServer, client: wk.Client) -> None:
    srv.create_object(CRD)
    async with srv.client() as other:
        await other.api("Widget").resource()
    one_lookup = discovery_requests(srv)
    resolved = await asyncio.gather(*(client.api("Widget").resource() for _ in range(5)))
    assert {r.plural for r in resolved} == {"widgets"}
    assert discovery_requests(srv) == 2 * one_lookup  # not 6x: the first answer is shared
