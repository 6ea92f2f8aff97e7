"""Contract tests for authorization-side behaviour against the real kube-apiserver 1.28 pack:
the default RBAC policy (074-080), impersonation (130, 131), the self reviews (132, 133), the
429 shapes (174-176), discovery 304 (009), the OpenAPI redirect (020) and gzip (022-024).
Every request goes over a real socket; the real kubectl is driven where it is installed."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from watchkeeper_sim import ApiServer

from .._util import cm
from .test_contract import assert_same_status, ctype, load, norm, replay

RBAC = "rbac.authorization.k8s.io"
KUBECTL = os.environ.get("WATCHKEEPER_KUBECTL", "/usr/bin/kubectl")
AGG_ACCEPT = ("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
              "application/json")


@pytest.fixture
async def world() -> Any:
    async with ApiServer() as srv, aiohttp.ClientSession() as session:
        for ns in ("errors", "load"):
            srv.create_object({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": ns}})
        srv.create_object(cm("target", ns="errors"))
        yield srv, session


async def call(srv: ApiServer, session: aiohttp.ClientSession, method: str, path: str,
               user: str | None = "admin", token: str | None = None,
               body: Any = None, **headers: str) -> tuple[int, Any, Any]:
    hdrs = {k.replace("_", "-"): v for k, v in headers.items()}
    if token is not None or user is not None:
        hdrs["Authorization"] = f"Bearer {token or srv.token(user or 'admin')}"
    data = None if body is None else json.dumps(body).encode()
    if data is not None:
        hdrs.setdefault("Content-Type", "application/json")
    async with session.request(method, srv.url + path, data=data, headers=hdrs) as resp:
        text = await resp.text()
        parsed: Any = text
        if ctype(resp.headers) == "application/json" and text:
            parsed = json.loads(text)
        return resp.status, parsed, resp.headers


def forwarded(ref: dict[str, Any], *names: str) -> dict[str, str]:
    """The named request headers of a reference exchange, to send them the same way."""
    return {k.replace("-", "_"): v for k, v in ref["request"]["headers"].items() if k in names}


# ---- the default RBAC policy (074-080) ------------------------------------------------------


@pytest.mark.parametrize("number", [74, 75, 76, 77, 78, 79, 80])
async def test_default_policy_answers_match(world: Any, number: int) -> None:
    """No grants beyond the bootstrap policy: limited (system:authenticated only) and
    anonymous are refused resources but may read /version, as on the real cluster."""
    srv, session = world
    ref = load(number)
    status, body, headers = await replay(srv, session, ref)
    assert_same_status(ref, status, body, headers)
    if number == 75:
        assert body == ref["response"]["body"]


async def test_bootstrap_objects_are_stored_and_listable(world: Any) -> None:
    srv, session = world
    status, roles, _ = await call(srv, session, "GET", f"/apis/{RBAC}/v1/clusterroles")
    assert status == 200
    names = {r["metadata"]["name"] for r in roles["items"]}
    assert {"cluster-admin", "admin", "edit", "view", "system:basic-user", "system:discovery",
            "system:public-info-viewer"} <= names
    status, view, _ = await call(srv, session, "GET", f"/apis/{RBAC}/v1/clusterroles/view")
    assert view["aggregationRule"] == {"clusterRoleSelectors": [
        {"matchLabels": {f"{RBAC}/aggregate-to-view": "true"}}]}
    assert view["metadata"]["labels"]["kubernetes.io/bootstrapping"] == "rbac-defaults"
    assert {"apiGroups": [""], "resources": ["namespaces"],
            "verbs": ["get", "list", "watch"]} in view["rules"]
    status, piv, _ = await call(srv, session, "GET",
                                f"/apis/{RBAC}/v1/clusterrolebindings/system:public-info-viewer")
    assert [s["name"] for s in piv["subjects"]] == ["system:authenticated",
                                                    "system:unauthenticated"]


async def test_discovery_and_version_come_from_the_stored_roles(world: Any) -> None:
    """Anonymous may read /version but not discovery (system:discovery is bound to
    system:authenticated only); deleting a binding takes the right away, a restart
    reconciles it back."""
    srv, session = world
    assert (await call(srv, session, "GET", "/version", user=None))[0] == 200
    status, body, _ = await call(srv, session, "GET", "/apis", user=None)
    assert status == 403 and body["message"] == \
        'forbidden: User "system:anonymous" cannot get path "/apis"'
    assert (await call(srv, session, "GET", "/apis", user="limited"))[0] == 200
    assert (await call(srv, session, "GET", "/openapi/v3", user="limited"))[0] == 200
    status, _, _ = await call(srv, session, "DELETE",
                              f"/apis/{RBAC}/v1/clusterrolebindings/system:public-info-viewer")
    assert status == 200
    assert (await call(srv, session, "GET", "/version", user=None))[0] == 403
    await srv.restart()
    assert (await call(srv, session, "GET", "/version", user=None))[0] == 200


async def test_view_edit_admin_roles_grant_their_rules(world: Any) -> None:
    srv, session = world
    for user, role in (("viewer", "view"), ("editor", "edit"), ("boss", "admin")):
        srv.add_user(user)
        srv.create_object({"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding",
                           "metadata": {"name": user, "namespace": "errors"},
                           "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
                           "subjects": [{"kind": "User", "name": user}]})
    cms = "/api/v1/namespaces/errors/configmaps"
    assert (await call(srv, session, "GET", cms, user="viewer"))[0] == 200
    assert (await call(srv, session, "GET", "/api/v1/namespaces/errors/secrets",
                       user="viewer"))[0] == 403
    assert (await call(srv, session, "POST", cms, user="viewer",
                       body=cm("v", ns="errors")))[0] == 403
    assert (await call(srv, session, "POST", cms, user="editor",
                       body=cm("e", ns="errors")))[0] == 201
    assert (await call(srv, session, "GET", "/api/v1/namespaces/default/configmaps",
                       user="editor"))[0] == 403
    roles = f"/apis/{RBAC}/v1/namespaces/errors/roles"
    assert (await call(srv, session, "GET", roles, user="editor"))[0] == 403
    assert (await call(srv, session, "GET", roles, user="boss"))[0] == 200


async def test_a_labelled_role_aggregates_into_view(world: Any) -> None:
    """The aggregation controller's effect: a ClusterRole labelled aggregate-to-view extends
    view (and so edit and admin) at once."""
    srv, session = world
    srv.add_user("viewer")
    srv.create_object({"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding",
                       "metadata": {"name": "viewer"},
                       "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "view"},
                       "subjects": [{"kind": "User", "name": "viewer"}]})
    leases = "/apis/coordination.k8s.io/v1/namespaces/errors/leases"
    assert (await call(srv, session, "GET", leases, user="viewer"))[0] == 403
    srv.create_object({"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole",
                       "metadata": {"name": "lease-reader",
                                    "labels": {f"{RBAC}/aggregate-to-view": "true"}},
                       "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                  "verbs": ["list"]}]})
    assert (await call(srv, session, "GET", leases, user="viewer"))[0] == 200


# ---- impersonation (130, 131) ---------------------------------------------------------------


async def test_130_impersonated_user_is_authorized(world: Any) -> None:
    srv, session = world
    ref = load(130)
    status, body, headers = await call(srv, session, "GET", ref["request"]["path"],
                                       **forwarded(ref, "Impersonate-User"))
    assert_same_status(ref, status, body, headers)


async def test_131_impersonation_needs_the_impersonate_verb(world: Any) -> None:
    srv, session = world
    ref = load(131)
    status, body, headers = await call(srv, session, "GET", ref["request"]["path"],
                                       user="limited", **forwarded(ref, "Impersonate-User"))
    assert_same_status(ref, status, body, headers)
    assert body["details"] == ref["response"]["body"]["details"]
    # a group needs its own grant; with both, limited acts as admin without system:masters
    srv.create_object({"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole",
                       "metadata": {"name": "impersonator"},
                       "rules": [{"apiGroups": [""], "resources": ["users"],
                                  "verbs": ["impersonate"]}]})
    srv.create_object({"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding",
                       "metadata": {"name": "impersonator"},
                       "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole",
                                   "name": "impersonator"},
                       "subjects": [{"kind": "User", "name": "limited"}]})
    status, body, _ = await call(srv, session, "GET", ref["request"]["path"], user="limited",
                                 Impersonate_User="admin", Impersonate_Group="system:masters")
    assert status == 403 and body["message"] == (
        'groups "system:masters" is forbidden: User "limited" cannot impersonate resource '
        '"groups" in API group "" at the cluster scope')
    status, body, _ = await call(srv, session, "GET", ref["request"]["path"], user="limited",
                                 Impersonate_User="admin")
    assert status == 403 and 'User "admin" cannot list' in body["message"]


async def test_impersonation_of_service_accounts_and_whoami(world: Any) -> None:
    srv, session = world
    status, body, _ = await call(
        srv, session, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        Impersonate_User="system:serviceaccount:load:loader")
    assert status == 201
    assert body["status"]["userInfo"] == {
        "username": "system:serviceaccount:load:loader",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:load",
                   "system:authenticated"]}
    status, body, _ = await call(srv, session, "GET", "/api/v1/namespaces/load/configmaps",
                                 user="limited",
                                 Impersonate_User="system:serviceaccount:load:loader")
    assert status == 403 and body["message"] == (
        'serviceaccounts "loader" is forbidden: User "limited" cannot impersonate resource '
        '"serviceaccounts" in API group "" in the namespace "load"')
    status, body, _ = await call(srv, session, "GET", "/api/v1/namespaces",
                                 Impersonate_Group="system:masters")
    assert status == 400 and body["reason"] == "BadRequest" and body["message"] == \
        "requested [{Group  system:masters    }] without impersonating a user"


# ---- self reviews (132, 133) ----------------------------------------------------------------


async def test_132_self_subject_access_review(world: Any) -> None:
    srv, session = world
    ref = load(132)
    want = ref["response"]["body"]
    status, body, headers = await call(srv, session, "POST", ref["request"]["path"],
                                       user="limited", body=ref["request"]["body"],
                                       User_Agent="curl/7.88.1")
    assert status == 201 and ctype(headers) == ctype(ref["response"]["headers"])
    assert list(body) == list(want)
    assert body["spec"] == want["spec"] and body["status"] == want["status"]
    assert body["metadata"]["creationTimestamp"] is None
    (entry,), (want_entry,) = body["metadata"]["managedFields"], want["metadata"][
        "managedFields"]
    assert {k: v for k, v in entry.items() if k != "time"} == \
        {k: v for k, v in want_entry.items() if k != "time"}
    # the same question from a user the stored policy allows: the reason names the binding
    srv.add_user("viewer")
    srv.create_object({"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding",
                       "metadata": {"name": "read", "namespace": "errors"},
                       "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "view"},
                       "subjects": [{"kind": "User", "name": "viewer"}]})
    status, body, _ = await call(srv, session, "POST", ref["request"]["path"], user="viewer",
                                 body=ref["request"]["body"])
    assert body["status"] == {"allowed": True, "reason": 'RBAC: allowed by RoleBinding '
                              '"read/errors" of ClusterRole "view" to User "viewer"'}
    status, body, _ = await call(srv, session, "POST", ref["request"]["path"],
                                 body=ref["request"]["body"])
    assert body["status"] == {"allowed": True}  # system:masters: no RBAC reason
    status, body, _ = await call(srv, session, "POST", ref["request"]["path"],
                                 body={"spec": {}})
    assert status == 422 and body["reason"] == "Invalid"


async def test_133_self_subject_review(world: Any) -> None:
    srv, session = world
    ref = load(133)
    want = ref["response"]["body"]
    status, body, headers = await call(srv, session, "POST", ref["request"]["path"],
                                       user="limited", body=ref["request"]["body"])
    assert status == 201 and ctype(headers) == ctype(ref["response"]["headers"])
    assert list(body) == list(want) and list(body["metadata"]) == list(want["metadata"])
    assert body["status"] == want["status"]
    assert norm(body["metadata"]["creationTimestamp"]) == \
        norm(want["metadata"]["creationTimestamp"])


async def test_rules_review_lists_the_callers_rules(world: Any) -> None:
    srv, session = world
    status, body, _ = await call(
        srv, session, "POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        user="limited", body={"spec": {"namespace": "errors"}})
    assert status == 201 and body["status"]["incomplete"] is False
    assert {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]} \
        in body["status"]["resourceRules"]
    assert not any("configmaps" in r["resources"] for r in body["status"]["resourceRules"])


async def test_subject_access_reviews_ask_for_someone_else(world: Any) -> None:
    srv, session = world
    attrs = {"namespace": "errors", "verb": "list", "resource": "configmaps"}
    sar = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    status, body, _ = await call(srv, session, "POST", sar, body={"spec": {
        "resourceAttributes": attrs, "user": "anyone", "groups": ["system:masters"]}})
    assert status == 201 and body["status"] == {"allowed": True}
    assert body["spec"]["user"] == "anyone" and body["kind"] == "SubjectAccessReview"
    status, body, _ = await call(srv, session, "POST", sar, body={"spec": {
        "resourceAttributes": attrs, "user": "limited"}})
    assert status == 201 and body["status"] == {"allowed": False}
    status, body, _ = await call(srv, session, "POST", sar,
                                 body={"spec": {"resourceAttributes": attrs}})
    assert status == 422 and body["reason"] == "Invalid"
    assert (await call(srv, session, "POST", sar, user="limited", body={"spec": {
        "resourceAttributes": attrs, "user": "limited"}}))[0] == 403  # not for everyone
    lsar = "/apis/authorization.k8s.io/v1/namespaces/errors/localsubjectaccessreviews"
    status, body, _ = await call(srv, session, "POST", lsar, body={"spec": {
        "resourceAttributes": attrs, "groups": ["system:masters"]}})
    assert status == 201 and body["status"]["allowed"] is True
    assert body["metadata"]["namespace"] == "errors"
    status, body, _ = await call(srv, session, "POST", lsar, body={"spec": {
        "resourceAttributes": {**attrs, "namespace": "other"}, "user": "x"}})
    assert status == 422


# ---- 429 (174-176) --------------------------------------------------------------------------


async def loader_token(srv: ApiServer, session: aiohttp.ClientSession) -> str:
    """The pack's 429 identity: ServiceAccount load/loader with a Role to read configmaps."""
    srv.create_object({"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": "loader", "namespace": "load"}})
    srv.create_object({"apiVersion": f"{RBAC}/v1", "kind": "Role",
                       "metadata": {"name": "cm-reader", "namespace": "load"},
                       "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                                  "verbs": ["get", "list", "watch"]}]})
    srv.create_object({"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding",
                       "metadata": {"name": "cm-reader", "namespace": "load"},
                       "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "cm-reader"},
                       "subjects": [{"kind": "ServiceAccount", "name": "loader",
                                     "namespace": "load"}]})
    status, body, _ = await call(srv, session, "POST",
                                 "/api/v1/namespaces/load/serviceaccounts/loader/token",
                                 body={"apiVersion": "authentication.k8s.io/v1",
                                       "kind": "TokenRequest", "spec": {}})
    assert status == 201
    token: str = body["status"]["token"]
    return token


@pytest.mark.parametrize("number", [174, 175, 176])
async def test_429_shapes(world: Any, number: int) -> None:
    srv, session = world
    ref = load(number)
    want = ref["response"]
    token = await loader_token(srv, session)
    path = f"{ref['request']['path']}?{ref['request']['raw_query']}"
    assert (await call(srv, session, "GET", path, token=token))[0] == 200
    delay = 0.3 if number == 175 else 0.0
    srv.faults.throttle(retry_after=int(want["headers"]["Retry-After"]), delay=delay,
                        limiter="max-inflight" if number == 176 else "apf",
                        user="system:serviceaccount:load:loader")
    started = time.monotonic()
    status, body, headers = await call(srv, session, "GET", path, token=token)
    assert time.monotonic() - started >= delay
    assert status == want["status"] == 429 and body == want["body"]
    for name in ("Content-Type", "Retry-After", "X-Content-Type-Options", "Cache-Control"):
        assert headers[name] == want["headers"][name], name
    pf = {"X-Kubernetes-Pf-Flowschema-Uid", "X-Kubernetes-Pf-Prioritylevel-Uid"}
    assert (pf <= set(headers)) == (pf <= set(want["headers"]))
    assert (await call(srv, session, "GET", path))[0] == 200  # admin is not throttled here


# ---- 009, 020: discovery 304 and the OpenAPI redirect ---------------------------------------


async def test_009_aggregated_discovery_304(world: Any) -> None:
    srv, session = world
    ref = load(9)
    status, _, first = await call(srv, session, "GET", "/apis", Accept=AGG_ACCEPT)
    assert status == 200
    status, body, headers = await call(srv, session, "GET", "/apis", Accept=AGG_ACCEPT,
                                       If_None_Match=first["Etag"])
    assert status == ref["response"]["status"] == 304 and body == ref["response"]["body"] == ""
    for name in ("Cache-Control", "Vary"):
        assert headers[name] == ref["response"]["headers"][name]
    assert headers["Etag"] == first["Etag"]


async def test_020_stale_openapi_hash_redirects(world: Any) -> None:
    srv, session = world
    ref = load(20)
    want = ref["response"]
    async with session.get(f"{srv.url}/openapi/v3/api/v1?hash=0123456789ABCDEF",
                           headers={"Authorization": f"Bearer {srv.token()}",
                                    "Accept": "application/json"},
                           allow_redirects=False) as resp:
        assert resp.status == want["status"] == 301
        assert await resp.read() == b""
        location = resp.headers["Location"]
        assert location.startswith("/openapi/v3/api/v1?hash=")
        assert resp.headers["Etag"] == f'"{location.rsplit("=", 1)[1]}"'
        for name in ("Cache-Control", "Vary"):
            assert resp.headers[name] == want["headers"][name]


# ---- gzip (022-024) -------------------------------------------------------------------------


async def raw_get(srv: ApiServer, session: aiohttp.ClientSession, path: str,
                  headers: dict[str, str]) -> tuple[int, bytes, Any]:
    """GET without aiohttp's own Accept-Encoding and without decompressing."""
    hdrs = {"Authorization": f"Bearer {srv.token()}", "Accept-Encoding": "identity", **headers}
    async with session.get(srv.url + path, headers=hdrs, auto_decompress=False) as resp:
        return resp.status, await resp.read(), resp.headers


async def test_022_large_list_is_gzipped(world: Any) -> None:
    srv, session = world
    ref = load(22)
    want = ref["response"]["headers"]
    for i in range(5):
        srv.create_object(cm(f"big-{i}", ns="load", blob="x" * 50_000))
    path = f"{ref['request']['path']}?{ref['request']['raw_query']}"
    status, raw, headers = await raw_get(srv, session, path, {"Accept-Encoding": "gzip"})
    assert status == 200 and ctype(headers) == ctype(want)
    assert headers["Content-Encoding"] == want["Content-Encoding"] == "gzip"
    assert headers["Vary"] == want["Vary"]
    assert int(headers["Content-Length"]) == len(raw) < 50_000
    assert len(json.loads(gzip.decompress(raw))["items"]) == 5
    status, raw, headers = await raw_get(srv, session, path, {})
    assert "Content-Encoding" not in headers and len(json.loads(raw)["items"]) == 5


async def test_023_small_list_is_not_gzipped(world: Any) -> None:
    srv, session = world
    ref = load(23)
    status, raw, headers = await raw_get(srv, session, ref["request"]["path"],
                                         {"Accept-Encoding": "gzip"})
    assert status == 200 and ctype(headers) == ctype(ref["response"]["headers"])
    assert "Content-Encoding" not in headers and "Content-Encoding" not in \
        ref["response"]["headers"]
    assert json.loads(raw)["kind"] == ref["response"]["body"]["kind"]


async def test_024_aggregated_discovery_is_not_gzipped(world: Any) -> None:
    srv, session = world
    ref = load(24)
    want = ref["response"]["headers"]
    status, raw, headers = await raw_get(srv, session, "/apis",
                                         {"Accept-Encoding": "gzip", "Accept": AGG_ACCEPT})
    assert status == 200 and headers["Content-Type"] == want["Content-Type"]
    assert "Content-Encoding" not in headers and "Content-Encoding" not in want
    assert headers["Cache-Control"] == want["Cache-Control"] and headers["Vary"] == want["Vary"]
    assert json.loads(raw)["kind"] == "APIGroupDiscoveryList"


# ---- the real kubectl -----------------------------------------------------------------------


async def kubectl(srv: ApiServer, tmp: Path, user: str, *args: str) -> tuple[int, str, str]:
    config = srv.kubeconfig(tmp / f"kubeconfig-{user}", user)
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", config, "--cache-dir", str(tmp / "cache"), *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, "HOME": str(tmp)})
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which(KUBECTL) is None, reason=f"{KUBECTL} not installed")
async def test_kubectl_auth_can_i_whoami_and_as(tmp_path: Path) -> None:
    async with ApiServer(tls=True) as srv:
        srv.create_object({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": "errors"}})
        rc, out, _ = await kubectl(srv, tmp_path, "limited", "auth", "can-i", "list",
                                   "configmaps", "-n", "errors")
        assert (rc, out.strip()) == (1, "no")
        rc, out, _ = await kubectl(srv, tmp_path, "admin", "auth", "can-i", "list",
                                   "configmaps", "-n", "errors")
        assert (rc, out.strip()) == (0, "yes")
        rc, out, err = await kubectl(srv, tmp_path, "limited", "auth", "whoami", "-o", "json")
        assert rc == 0, err
        assert json.loads(out)["status"]["userInfo"] == load(133)["response"]["body"][
            "status"]["userInfo"]
        rc, out, err = await kubectl(srv, tmp_path, "admin", "get", "configmaps", "-n",
                                     "errors", "--as", "limited")
        assert rc == 1 and norm(load(130)["response"]["body"]["message"]) in norm(err)
        rc, out, err = await kubectl(srv, tmp_path, "limited", "auth", "can-i", "--list",
                                     "-n", "errors")
        assert rc == 0, err
        assert "selfsubjectaccessreviews.authorization.k8s.io" in out
        rc, out, _ = await kubectl(srv, tmp_path, "admin", "get", "clusterroles", "view",
                                   "edit", "admin", "cluster-admin", "--no-headers")
        assert rc == 0 and [line.split()[0] for line in out.strip().splitlines()] == [
            "view", "edit", "admin", "cluster-admin"]
        rc, out, err = await kubectl(srv, tmp_path, "admin", "get",
                                     "prioritylevelconfigurations.v1beta2.flowcontrol."
                                     "apiserver.k8s.io", "exempt", "-o", "name")
        assert rc == 0 and out.strip().endswith("/exempt")
        assert "Warning: flowcontrol.apiserver.k8s.io/v1beta2 PriorityLevelConfiguration is " \
            "deprecated in v1.26+, unavailable in v1.29+" in err


# ---- 135: deprecated API versions -----------------------------------------------------------


async def test_135_deprecated_builtin_version_warns(world: Any) -> None:
    srv, session = world
    ref = load(135)
    want = ref["response"]
    status, body, headers = await call(srv, session, "GET", ref["request"]["path"])
    assert status == want["status"] == 200 and ctype(headers) == ctype(want["headers"])
    assert headers.getall("Warning") == [want["headers"]["Warning"]]
    wbody = want["body"]
    assert list(body) == list(wbody) and body["spec"] == wbody["spec"]
    assert body["status"] == wbody["status"] == {}
    assert body["metadata"]["annotations"] == wbody["metadata"]["annotations"]
    assert body["metadata"]["generation"] == wbody["metadata"]["generation"]
    (entry,), (want_entry,) = body["metadata"]["managedFields"], wbody["metadata"][
        "managedFields"]
    for key in ("manager", "operation", "apiVersion", "fieldsV1"):
        assert entry[key] == want_entry[key], key
    status, _, headers = await call(srv, session, "GET", ref["request"]["path"].replace(
        "v1beta2", "v1beta3"))
    assert status == 200 and "Warning" not in headers
    status, _, headers = await call(srv, session, "GET", ref["request"]["path"],
                                    user="limited")
    assert status == 403 and "Warning" not in headers  # only once authorized


async def test_deprecated_crd_version_warns_on_requests_and_watches(world: Any) -> None:
    srv, session = world
    versions = [{"name": name, "served": True, "storage": name == "v1",
                 "schema": {"openAPIV3Schema": {"type": "object",
                                                "x-kubernetes-preserve-unknown-fields": True}}}
                for name in ("v1", "v1alpha1", "v1beta1")]
    versions[1]["deprecated"] = True
    versions[2] |= {"deprecated": True, "deprecationWarning": "use v1, \"please\""}
    srv.create_object({"apiVersion": "apiextensions.k8s.io/v1",
                       "kind": "CustomResourceDefinition",
                       "metadata": {"name": "widgets.example.com"},
                       "spec": {"group": "example.com", "scope": "Namespaced",
                                "names": {"plural": "widgets", "kind": "Widget"},
                                "versions": versions}})
    base = "/apis/example.com/{}/namespaces/errors/widgets"
    _, _, headers = await call(srv, session, "GET", base.format("v1alpha1"))
    assert headers.getall("Warning") == ['299 - "example.com/v1alpha1 Widget is deprecated"']
    _, _, headers = await call(srv, session, "GET", base.format("v1beta1"))
    assert headers.getall("Warning") == ['299 - "use v1, \\"please\\""']
    _, _, headers = await call(srv, session, "GET", base.format("v1"))
    assert "Warning" not in headers
    async with session.get(srv.url + base.format("v1alpha1") + "?watch=1&timeoutSeconds=1",
                           headers={"Authorization": f"Bearer {srv.token()}"}) as resp:
        assert resp.status == 200
        assert resp.headers.getall("Warning") == [
            '299 - "example.com/v1alpha1 Widget is deprecated"']
