"""Bad input gets a clear, typed error, and nothing is lost: the server keeps serving.

Caller mistakes that the client can see (malformed names, a missing namespace, an unknown
patch type) fail before any request; what only the server can judge (selectors, bodies)
comes back as the server's Status, typed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import pytest

import watchkeeper as wk
from watchkeeper.client.api import PatchType
from watchkeeper_sim import ApiServer

JSON = dict[str, Any]
LIMIT = 64 * 1024
CMS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
async def srv() -> AsyncIterator[ApiServer]:
    async with ApiServer(max_body_bytes=LIMIT) as s:
        s.create_object(cm("keep", k="original"))
        yield s


@pytest.fixture
async def client(srv: ApiServer) -> AsyncIterator[wk.Client]:
    async with srv.client() as c:
        yield c


def cm(name: str, ns: str = "default", **data: str) -> JSON:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": data or {"k": "v"}}


async def still_serving(client: wk.Client) -> None:
    """The server answers, and what was stored before is intact."""
    api = client.api("configmaps", namespace="default")
    assert (await api.get("keep"))["data"] == {"k": "original"}
    await api.create(cm("after"))
    await api.delete("after")


# -- resource names ------------------------------------------------------------------------------


async def test_unknown_resource_is_a_clear_not_found(srv: ApiServer, client: wk.Client) -> None:
    api = client.api("gizmos", namespace="default")  # well-formed: only the server can tell
    with pytest.raises(wk.UnknownResource) as info:
        await api.list()
    err = info.value
    assert isinstance(err, wk.NotFound) and err.code == 404 and not err.is_transient
    assert "'gizmos'" in str(err) and "kubectl api-resources" in str(err)
    assert "is the CRD installed" in str(err)
    with pytest.raises(wk.UnknownResource) as grouped:
        await client.api("gizmos.example.com", namespace="default").get("g")
    assert "'gizmos' in group 'example.com'" in str(grouped.value)
    with pytest.raises(wk.UnknownResource):
        await client.api("example.com/v1/gizmos").list()
    with pytest.raises(wk.UnknownResource):  # a built-in's name in the wrong group
        await client.api("configmaps.apps").list()
    await still_serving(client)


@pytest.mark.parametrize(
    "name",
    ["", "   ", "config maps", "a/b/c/d", "/configmaps", "v1/", "apps//deployments", ".apps",
     "configmaps.", "pods?watch=true", "pods#x", "cm/../secrets", "..", "con%66igmaps",
     "deployments..apps", "-pods"],
)
async def test_malformed_resource_names_fail_at_api(client: wk.Client, name: str) -> None:
    with pytest.raises(ValueError, match="invalid resource name"):
        client.api(name, namespace="default")


async def test_namespace_must_be_a_string_or_none(client: wk.Client) -> None:
    with pytest.raises(TypeError, match="namespace must be a string or None"):
        client.api("configmaps", namespace=cast(str, 3))


@pytest.mark.parametrize("name", ["", "a/b", "..", ".", "a%2Fb", "../../secrets/x"])
async def test_malformed_object_names_fail_before_a_request(
    srv: ApiServer, client: wk.Client, name: str
) -> None:
    api = client.api("configmaps", namespace="default")
    before = len(srv.requests)
    calls: list[Callable[[], Awaitable[JSON]]] = [
        lambda: api.get(name), lambda: api.delete(name), lambda: api.patch(name, {"data": {}}),
        lambda: api.replace(name, cm("x")), lambda: api.get_status(name),
        lambda: api.patch_status(name, {"status": {}}),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="invalid object name"):
            await call()
    assert len(srv.requests) == before
    await still_serving(client)


@pytest.mark.parametrize("namespace", ["a/b", "..", "kube-system/configmaps/x?"])
async def test_malformed_namespaces_fail_before_a_request(
    srv: ApiServer, client: wk.Client, namespace: str
) -> None:
    api = client.api("configmaps", namespace=namespace)
    before = len(srv.requests)
    with pytest.raises(ValueError, match="invalid namespace"):
        await api.get("keep")
    with pytest.raises(ValueError, match="invalid namespace"):
        await api.list()
    with pytest.raises(ValueError, match="invalid namespace"):
        await api.create(cm("x", ns=namespace))
    assert len(srv.requests) == before


# -- selectors -----------------------------------------------------------------------------------


@pytest.mark.parametrize("selector", ["app in (a", "=a", "!", "a b", "app notin a", "app=(x)"])
async def test_invalid_label_selector_is_a_bad_request(
    client: wk.Client, selector: str
) -> None:
    api = client.api("configmaps", namespace="default")
    with pytest.raises(wk.BadRequest) as info:
        await api.list(label_selector=selector)
    err = info.value
    assert err.code == 400 and err.reason == "BadRequest"
    assert err.status is not None and err.status["kind"] == "Status"
    assert err.message == err.status["message"] and err.message  # the server's own words
    assert err.message in str(err)
    with pytest.raises(wk.BadRequest):
        async with api.watch(label_selector=selector, timeout_seconds=1) as stream:
            async for _ev in stream:
                pass
    await still_serving(client)


async def test_unknown_field_selector_is_a_bad_request(client: wk.Client) -> None:
    with pytest.raises(wk.BadRequest) as info:
        await client.api("configmaps", namespace="default").list(field_selector="spec.x=1")
    assert '"spec.x" is not a known field selector' in str(info.value)
    with pytest.raises(wk.BadRequest) as malformed:
        await client.api("configmaps", namespace="default").list(field_selector="nonsense")
    assert "invalid selector" in str(malformed.value)
    await still_serving(client)


# -- bodies --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body", [b'{"apiVersion": "v1", "kind": ', b"not json at all", b"\xff\xfe\x00garbage",
             b"[1, 2, 3]", b'"a string"'])
async def test_invalid_json_body_is_a_bad_request(client: wk.Client, body: bytes) -> None:
    with pytest.raises(wk.ApiError) as info:
        await client.transport.request("POST", CMS, body=body, content_type="application/json")
    err = info.value
    assert err.code in (400, 422) and err.status is not None and err.status["kind"] == "Status"
    assert isinstance(err, wk.BadRequest | wk.Invalid)
    # a PUT over an existing object loses nothing either
    with pytest.raises(wk.ApiError):
        await client.transport.request("PUT", f"{CMS}/keep", body=body,
                                       content_type="application/json")
    await still_serving(client)


async def test_invalid_json_message_is_the_servers(client: wk.Client) -> None:
    with pytest.raises(wk.BadRequest) as info:
        await client.transport.request("POST", CMS, body=b'{"kind": ',
                                       content_type="application/json")
    assert "json parse error" in str(info.value)
    assert str(info.value).startswith(f"POST {CMS}: the object provided is unrecognized")


async def test_invalid_patch_bodies(client: wk.Client) -> None:
    api = client.api("configmaps", namespace="default")
    with pytest.raises(wk.ApiError) as json_patch:  # a JSON patch must be a list of ops
        await api.patch("keep", {"op": "add"}, type="json")
    assert json_patch.value.code in (400, 422)
    with pytest.raises(wk.ApiError) as bad_op:
        await api.patch("keep", [{"op": "frobnicate", "path": "/data/k"}], type="json")
    assert bad_op.value.code in (400, 422)
    with pytest.raises(wk.BadRequest):
        await api.patch("keep", b"{broken", type="merge")
    await still_serving(client)


async def test_oversize_body_is_413_with_a_status(srv: ApiServer, client: wk.Client) -> None:
    api = client.api("configmaps", namespace="default")
    big = cm("big", blob="x" * (LIMIT + 1))
    with pytest.raises(wk.ApiError) as info:
        await api.create(big)
    err = info.value
    assert err.code == 413 and err.reason == "RequestEntityTooLarge"
    assert err.status is not None and err.status["kind"] == "Status"
    assert f"limit is {LIMIT}" in str(err) and not err.is_transient
    with pytest.raises(wk.ApiError) as patched:
        await api.patch("keep", {"data": {"k": "y" * (LIMIT * 2)}})
    assert patched.value.code == 413
    await still_serving(client)
    # just under the limit is fine
    await api.create(cm("fits", blob="x" * (LIMIT // 2)))


async def test_much_bigger_body_still_gets_its_413(client: wk.Client) -> None:
    api = client.api("configmaps", namespace="default")
    with pytest.raises(wk.ApiError) as info:
        await api.create(cm("huge", blob="x" * (LIMIT * 64)))  # 4 MiB against 64 KiB
    assert info.value.code == 413
    await still_serving(client)


async def test_invalid_object_is_422_with_causes(client: wk.Client) -> None:
    api = client.api("configmaps", namespace="default")
    with pytest.raises(wk.Invalid) as info:
        await api.create(cm("Bad_Name"))
    err = info.value
    assert err.code == 422 and err.details["causes"][0]["field"] == "metadata.name"
    assert 'ConfigMap "Bad_Name" is invalid' in str(err)
    await still_serving(client)


# -- caller mistakes the client catches ----------------------------------------------------------


async def test_namespaced_calls_without_a_namespace(srv: ApiServer, client: wk.Client) -> None:
    api = client.api("configmaps", namespace=None)  # all namespaces: fine for list/watch
    before = len(srv.requests)
    calls: list[Callable[[], Awaitable[JSON]]] = [
        lambda: api.get("keep"), lambda: api.get_status("keep"), lambda: api.delete("keep"),
        lambda: api.patch("keep", {"data": {}}),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="configmaps is namespaced"):
            await call()
    with pytest.raises(ValueError, match="namespaced"):
        await api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n"}})
    with pytest.raises(ValueError, match="namespaced"):
        await api.replace("keep", {"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "keep"}})
    assert len(srv.requests) == before
    assert len((await api.list()).items) == 1  # listing everywhere still works


@pytest.mark.parametrize("typo", ["merge-patch", "Merge", "jsonpatch", "ssa", ""])
async def test_patch_type_typo(srv: ApiServer, client: wk.Client, typo: str) -> None:
    api = client.api("configmaps", namespace="default")
    before = len(srv.requests)
    with pytest.raises(ValueError, match="unknown patch type") as info:
        await api.patch("keep", {"data": {"k": "v2"}}, type=cast(PatchType, typo))
    assert "merge, json, strategic or apply" in str(info.value)
    assert len(srv.requests) == before


async def test_apply_needs_a_field_manager(srv: ApiServer, client: wk.Client) -> None:
    api = client.api("configmaps", namespace="default")
    before = len(srv.requests)
    for manager in (None, ""):
        with pytest.raises(ValueError, match="field_manager"):
            await api.patch("keep", cm("keep"), type="apply", field_manager=manager)
    assert len(srv.requests) == before
    # the server says the same when asked directly
    with pytest.raises(wk.Invalid) as info:
        await client.transport.request(
            "PATCH", f"{CMS}/keep", body=b"{}", content_type="application/apply-patch+yaml")
    assert "fieldManager" in str(info.value)
    await still_serving(client)


async def test_strategic_merge_on_a_crd_is_415(srv: ApiServer, client: wk.Client) -> None:
    srv.create_object({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}]}})
    api = client.api("widgets.example.com", namespace="default")
    await api.create({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})
    with pytest.raises(wk.ApiError) as info:
        await api.patch("w", {"spec": {"a": 1}}, type="strategic")
    assert info.value.code == 415 and "application/merge-patch+json" in str(info.value)
    assert (await api.patch("w", {"spec": {"a": 1}}, type="merge"))["spec"] == {"a": 1}
