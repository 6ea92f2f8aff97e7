"""TokenRequest and RBAC from Role/RoleBinding/ClusterRole/ClusterRoleBinding objects, over real
HTTP with watchkeeper's own client: what a real-cluster test does to act as a service account
and grant it rights (tests/e2e/test_real_cluster.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest

import watchkeeper as wk
from watchkeeper.client.auth import StaticToken
from watchkeeper.testing import ApiServer

RBAC = "rbac.authorization.k8s.io"
NS = "team-a"
OTHER = "team-b"
SA = "robot"
SA_USER = f"system:serviceaccount:{NS}:{SA}"
TOKEN_BODY = b'{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}}'


class Clock:
    """A settable wall clock for the simulator (token expiry)."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def srv(clock: Clock) -> AsyncIterator[ApiServer]:
    async with ApiServer(namespaces=("default", NS, OTHER), wall_clock=clock) as s:
        yield s


@pytest.fixture
async def admin(srv: ApiServer) -> AsyncIterator[wk.Client]:
    async with srv.client() as c:
        await c.api("serviceaccounts", namespace=NS).create(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA}})
        yield c


def cm(name: str, ns: str = NS) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": {"k": "v"}}


async def request_token(client: wk.Client, ns: str = NS, name: str = SA,
                        body: bytes = TOKEN_BODY) -> tuple[int, dict[str, Any]]:
    try:
        resp = await client.transport.request(
            "POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token", body=body,
            content_type="application/json")
    except wk.ApiError as exc:  # the transport raises for >= 400: keep the Status
        assert exc.code is not None and exc.status is not None
        return exc.code, exc.status
    return resp.status, msgspec.json.decode(resp.body)


async def sa_token(client: wk.Client) -> str:
    status, body = await request_token(client)
    assert status == 201, body
    token: str = body["status"]["token"]
    return token


def as_token(srv: ApiServer, token: str) -> wk.Client:
    return wk.Client(wk.ClientConfig(server=srv.url, auth=StaticToken(token)))


async def status_of(call: Any) -> int:
    try:
        await call
    except wk.ApiError as exc:
        assert exc.code is not None
        return exc.code
    return 200


def role(name: str, rules: list[dict[str, Any]], ns: str | None = NS) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if ns is not None:
        meta["namespace"] = ns
    return {"apiVersion": f"{RBAC}/v1", "kind": "Role" if ns else "ClusterRole",
            "metadata": meta, "rules": rules}


def binding(name: str, role_kind: str, role_name: str, subjects: list[dict[str, Any]],
            ns: str | None = NS) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if ns is not None:
        meta["namespace"] = ns
    return {"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding" if ns else "ClusterRoleBinding",
            "metadata": meta, "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role_name},
            "subjects": subjects}


READ_CM = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]
TO_SA = [{"kind": "ServiceAccount", "name": SA, "namespace": NS}]


# ---- TokenRequest ----------------------------------------------------------------------------


async def test_token_request_answers_like_the_apiserver(srv: ApiServer, admin: wk.Client,
                                                        clock: Clock) -> None:
    status, body = await request_token(admin)
    assert status == 201
    token = body["status"].pop("token")
    assert token.count(".") == 2  # JWT-shaped, as real service-account tokens are
    assert body == {
        "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": SA, "namespace": NS, "creationTimestamp": "2027-01-15T08:00:00Z"},
        "spec": {"audiences": ["https://kubernetes.default.svc.cluster.local"],
                 "expirationSeconds": 3600, "boundObjectRef": None},
        "status": {"expirationTimestamp": "2027-01-15T09:00:00Z"},
    }
    custom = (b'{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest",'
              b'"spec":{"expirationSeconds":7200,"audiences":["vault"]}}')
    status, body = await request_token(admin, body=custom)
    assert status == 201
    assert body["spec"]["audiences"] == ["vault"] and body["spec"]["expirationSeconds"] == 7200
    assert body["status"]["expirationTimestamp"] == "2027-01-15T10:00:00Z"
    # a token for another audience is not for the apiserver
    assert await status_of(as_token(srv, body["status"]["token"]).api(
        "configmaps", namespace=NS).list()) == 401


async def test_token_request_errors(srv: ApiServer, admin: wk.Client) -> None:
    status, body = await request_token(admin, name="ghost")
    assert status == 404 and body["reason"] == "NotFound"
    assert body["message"] == 'serviceaccounts "ghost" not found'
    assert body["details"] == {"name": "ghost", "kind": "serviceaccounts"}
    short = b'{"kind":"TokenRequest","apiVersion":"authentication.k8s.io/v1",' \
            b'"spec":{"expirationSeconds":60}}'
    status, body = await request_token(admin, body=short)
    assert status == 422 and body["message"] == (
        'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid '
        'value: 60: may not specify a duration less than 10 minutes')
    renamed = b'{"metadata":{"name":"other"},"spec":{}}'
    status, body = await request_token(admin, body=renamed)
    assert status == 422 and body["message"] == (
        f'TokenRequest.authentication.k8s.io "{SA}" is invalid: metadata.name: Invalid value: '
        '"other": must match the service account name if specified')
    path = f"/api/v1/namespaces/{NS}/serviceaccounts/{SA}"
    assert await status_of(admin.transport.request("GET", path + "/token")) == 405
    assert await status_of(admin.transport.request(  # no other made-up subresource
        "POST", path + "/tokens", body=TOKEN_BODY, content_type="application/json")) == 404


async def test_limited_user_may_not_request_tokens(srv: ApiServer, admin: wk.Client) -> None:
    async with srv.client("limited") as limited:
        status, body = await request_token(limited)
    assert status == 403 and body["message"] == (
        f'serviceaccounts "{SA}" is forbidden: User "limited" cannot create resource '
        f'"serviceaccounts/token" in API group "" in the namespace "{NS}"')
    assert body["details"] == {"name": SA, "kind": "serviceaccounts"}


async def test_token_authenticates_as_the_service_account(
        srv: ApiServer, admin: wk.Client, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    token = await sa_token(admin)
    async with as_token(srv, token) as robot:
        with pytest.raises(wk.Forbidden) as exc:
            await robot.api("configmaps", namespace=NS).list()
    assert f'User "{SA_USER}" cannot list resource "configmaps"' in str(exc.value)
    assert srv.requests[-1].user == SA_USER
    # never a token in a repr, the request log (also as served by /_sim/requests) or a log line
    for text in (repr(srv), str(srv), repr(srv.tokens), repr(srv.rbac), repr(srv.requests),
                 json.dumps([vars(r) for r in srv.requests]), caplog.text):
        assert token not in text
        assert token.split(".")[2] not in text


async def test_expired_or_orphaned_token_is_401(srv: ApiServer, admin: wk.Client,
                                                clock: Clock) -> None:
    token = await sa_token(admin)
    robot = as_token(srv, token)
    cms = robot.api("configmaps", namespace=NS)
    clock.now += 3600 + 30  # within the validator's one-minute leeway
    assert await status_of(cms.list()) == 403
    clock.now += 60
    assert await status_of(cms.list()) == 401
    # a fresh token stops working once its ServiceAccount is deleted (or replaced)
    token = await sa_token(admin)
    robot = as_token(srv, token)
    cms = robot.api("configmaps", namespace=NS)
    assert await status_of(cms.list()) == 403
    sas = admin.api("serviceaccounts", namespace=NS)
    await sas.delete(SA)
    await sas.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA}})
    assert await status_of(cms.list()) == 401


# ---- RBAC objects ----------------------------------------------------------------------------


async def test_role_binding_grants_in_its_namespace_only(srv: ApiServer,
                                                         admin: wk.Client) -> None:
    await admin.api("configmaps", namespace=NS).create(cm("mine"))
    await admin.api("configmaps", namespace=OTHER).create(cm("theirs", OTHER))
    roles = admin.api(f"roles.{RBAC}", namespace=NS)
    bindings = admin.api(f"rolebindings.{RBAC}", namespace=NS)
    async with as_token(srv, await sa_token(admin)) as robot:
        mine = robot.api("configmaps", namespace=NS)
        assert await status_of(mine.list()) == 403
        await roles.create(role("read-cm", READ_CM))
        assert await status_of(mine.list()) == 403  # a Role alone grants nothing
        await bindings.create(binding("read-cm", "Role", "read-cm", TO_SA))
        assert [wk.meta.name(o) for o in (await mine.list()).items] == ["mine"]
        assert (await mine.get("mine"))["data"] == {"k": "v"}
        async for ev in wk.watcher(mine, wk.WatchConfig(server_timeout=5)):
            if isinstance(ev, wk.InitDone):
                break
        assert await status_of(mine.create(cm("new"))) == 403  # verbs are respected
        theirs = robot.api("configmaps", namespace=OTHER)
        assert await status_of(theirs.list()) == 403
        assert await status_of(robot.api("configmaps").list()) == 403  # nor cluster-wide
        await roles.patch("read-cm", {"rules": [{"apiGroups": [""], "resources": ["configmaps"],
                                                 "verbs": ["get"]}]})
        assert await status_of(mine.list()) == 403  # a changed Role counts at once
        assert await status_of(mine.get("mine")) == 200
        await bindings.delete("read-cm")
        assert await status_of(mine.get("mine")) == 403
        assert await status_of(mine.list()) == 403


async def test_forbidden_is_surfaced_then_recovers(srv: ApiServer, admin: wk.Client) -> None:
    """The e2e scenario: a watcher sees 403, then heals once a RoleBinding appears."""
    async with as_token(srv, await sa_token(admin)) as robot:
        w = wk.watcher(robot.api("configmaps", namespace=NS),
                       wk.WatchConfig(max_unhealthy=None), backoff=wk.ConstantBackoff(0.05))
        seen: list[wk.Event] = []
        async for ev in w:
            seen.append(ev)
            if isinstance(ev, wk.WatchError):
                assert isinstance(ev.error, wk.Forbidden) and SA_USER in str(ev.error)
                await admin.api(f"roles.{RBAC}", namespace=NS).create(role("read-cm", READ_CM))
                await admin.api(f"rolebindings.{RBAC}", namespace=NS).create(
                    binding("read-cm", "Role", "read-cm", TO_SA))
            if isinstance(ev, wk.InitDone):  # healthy once the watch after it is accepted
                await admin.api("configmaps", namespace=NS).create(cm("after-grant"))
            if isinstance(ev, wk.Apply):
                break
        assert w.health.state is wk.WatchState.HEALTHY


async def test_cluster_role_binding_to_a_group_grants_everywhere(
        srv: ApiServer, admin: wk.Client) -> None:
    srv.add_user("carol", groups=["auditors"])
    await admin.api(f"clusterroles.{RBAC}").create(role("audit", [
        {"apiGroups": [""], "resources": ["configmaps", "namespaces"], "verbs": ["list"]},
        {"apiGroups": ["apps"], "resources": ["*"], "verbs": ["*"]}], ns=None))
    async with srv.client("carol") as carol:
        cms = carol.api("configmaps")
        assert await status_of(cms.list()) == 403
        await admin.api(f"clusterrolebindings.{RBAC}").create(binding(
            "audit", "ClusterRole", "audit", [{"kind": "Group", "name": "auditors",
                                                "apiGroup": RBAC}], ns=None))
        assert await status_of(cms.list()) == 200  # all namespaces
        assert await status_of(carol.api("configmaps", namespace=OTHER).list()) == 200
        assert await status_of(carol.api("namespaces").list()) == 200  # cluster-scoped
        assert await status_of(carol.api("deployments.apps", namespace=NS).list()) == 200
        assert await status_of(carol.api("secrets", namespace=NS).list()) == 403
        assert await status_of(carol.api("configmaps", namespace=NS).get("x")) == 403


async def test_role_binding_to_a_cluster_role_and_users(srv: ApiServer,
                                                        admin: wk.Client) -> None:
    """A RoleBinding may name a ClusterRole: its rules then hold in the binding's namespace."""
    srv.add_user("dave")
    await admin.api(f"clusterroles.{RBAC}").create(role("cm-reader", READ_CM, ns=None))
    await admin.api(f"rolebindings.{RBAC}", namespace=NS).create(binding(
        "dave-reads", "ClusterRole", "cm-reader", [{"kind": "User", "name": "dave",
                                                    "apiGroup": RBAC}]))
    async with srv.client("dave") as dave:
        assert await status_of(dave.api("configmaps", namespace=NS).list()) == 200
        assert await status_of(dave.api("configmaps", namespace=OTHER).list()) == 403
        assert await status_of(dave.api("configmaps").list()) == 403


async def test_service_account_subject_defaults_to_the_binding_namespace(
        srv: ApiServer, admin: wk.Client) -> None:
    await admin.api(f"roles.{RBAC}", namespace=NS).create(role("read-cm", READ_CM))
    await admin.api(f"rolebindings.{RBAC}", namespace=NS).create(
        binding("read-cm", "Role", "read-cm", [{"kind": "ServiceAccount", "name": SA}]))
    async with as_token(srv, await sa_token(admin)) as robot:
        assert await status_of(robot.api("configmaps", namespace=NS).list()) == 200


async def test_resource_names_and_subresources(srv: ApiServer, admin: wk.Client) -> None:
    await admin.api("configmaps", namespace=NS).create(cm("allowed"))
    await admin.api("configmaps", namespace=NS).create(cm("hidden"))
    await admin.api("pods", namespace=NS).create(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
         "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    await admin.api(f"roles.{RBAC}", namespace=NS).create(role("narrow", [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
         "resourceNames": ["allowed"]},
        {"apiGroups": [""], "resources": ["*/status"], "verbs": ["get"]},
        {"apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["update"]}]))
    await admin.api(f"rolebindings.{RBAC}", namespace=NS).create(
        binding("narrow", "Role", "narrow", TO_SA))
    async with as_token(srv, await sa_token(admin)) as robot:
        cms = robot.api("configmaps", namespace=NS)
        assert await status_of(cms.get("allowed")) == 200
        assert await status_of(cms.get("hidden")) == 403
        assert await status_of(cms.list()) == 403  # resourceNames never cover a list
        t = robot.transport
        assert await status_of(t.request("GET", f"/api/v1/namespaces/{NS}/pods/p/status")) == 200
        assert await status_of(robot.api("pods", namespace=NS).get("p")) == 403
        deploy = f"/apis/apps/v1/namespaces/{NS}/deployments/d"
        body = b'{"metadata":{"name":"d"}}'
        assert await status_of(t.request("PUT", deploy + "/status", body=body,
                                         content_type="application/json")) == 404  # allowed
        assert await status_of(t.request("PUT", deploy, body=body,
                                         content_type="application/json")) == 403


async def test_non_resource_urls(srv: ApiServer, admin: wk.Client) -> None:
    """nonResourceURLs in a ClusterRole cover paths beyond the always-readable ones; here
    /openapi (served, but not public to anonymous) and a prefix rule."""
    await admin.api(f"clusterroles.{RBAC}").create(role("docs", [
        {"nonResourceURLs": ["/openapi", "/openapi/*"], "verbs": ["get"]},
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}], ns=None))
    async with wk.Client(wk.ClientConfig(server=srv.url)) as anon:
        t = anon.transport
        assert await status_of(t.request("GET", "/openapi/v3")) == 403
        await admin.api(f"clusterrolebindings.{RBAC}").create(binding(
            "docs", "ClusterRole", "docs", [{"kind": "Group", "name": "system:unauthenticated",
                                             "apiGroup": RBAC}], ns=None))
        assert await status_of(t.request("GET", "/openapi/v3")) == 200
        assert await status_of(t.request("GET", "/metrics")) == 404  # allowed, not served
        with pytest.raises(wk.Forbidden) as exc:
            await t.request("GET", "/apis")
        assert exc.value.message == 'forbidden: User "system:anonymous" cannot get path "/apis"'
        assert await status_of(t.request("POST", "/openapi/v3", body=b"{}",
                                         content_type="application/json")) == 403  # "post"


async def test_missing_role_is_named_in_the_403(srv: ApiServer, admin: wk.Client) -> None:
    """As RBACAuthorizer does, resolution errors of applying bindings follow the message."""
    await admin.api(f"rolebindings.{RBAC}", namespace=NS).create(
        binding("dangling", "Role", "nope", TO_SA))
    async with as_token(srv, await sa_token(admin)) as robot:
        with pytest.raises(wk.Forbidden) as exc:
            await robot.api("configmaps", namespace=NS).list()
        assert exc.value.message == (
            f'configmaps is forbidden: User "{SA_USER}" cannot list resource "configmaps" in '
            f'API group "" in the namespace "{NS}": RBAC: role.{RBAC} "nope" not found')
        # outside that namespace the binding is not visited: the plain message
        with pytest.raises(wk.Forbidden) as exc:
            await robot.api("configmaps", namespace=OTHER).list()
        assert exc.value.message.endswith(f'in the namespace "{OTHER}"')


async def test_python_grants_and_objects_combine(srv: ApiServer, admin: wk.Client) -> None:
    srv.rbac.grant(SA_USER, verbs=["list"], resources=["secrets"])
    await admin.api(f"roles.{RBAC}", namespace=NS).create(role("read-cm", READ_CM))
    await admin.api(f"rolebindings.{RBAC}", namespace=NS).create(
        binding("read-cm", "Role", "read-cm", TO_SA))
    async with as_token(srv, await sa_token(admin)) as robot:
        assert await status_of(robot.api("secrets", namespace=NS).list()) == 200
        assert await status_of(robot.api("configmaps", namespace=NS).list()) == 200
        srv.rbac.revoke_all(SA_USER)
        assert await status_of(robot.api("secrets", namespace=NS).list()) == 403
        assert await status_of(robot.api("configmaps", namespace=NS).list()) == 200
