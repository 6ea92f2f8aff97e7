"""Authentication (tokens, anonymous, client certificates), RBAC decisions and 403 wording."""

from __future__ import annotations

import ssl
from pathlib import Path

import aiohttp

from watchkeeper_sim import ApiServer

from .._util import cm, open_watch

CMS = "/api/v1/namespaces/default/configmaps"


async def test_unknown_token_401_and_anonymous_403(apiserver: ApiServer, req) -> None:
    status, body, _ = await req("GET", CMS, user=None,
                                headers={"Authorization": "Bearer nope"})
    assert status == 401 and body == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                      "status": "Failure", "message": "Unauthorized",
                                      "reason": "Unauthorized", "code": 401}
    status, body, _ = await req("GET", "/api/v1/namespaces", user=None)
    assert status == 403 and body["message"] == (
        'namespaces is forbidden: User "system:anonymous" cannot list resource "namespaces" in '
        'API group "" at the cluster scope')
    for path in ("/version", "/healthz", "/readyz", "/livez"):
        status, _, _ = await req("GET", path, user=None)
        assert status == 200
    status, body, _ = await req("GET", "/api", user=None)
    assert status == 403 and body["message"] == (
        'forbidden: User "system:anonymous" cannot get path "/api"')
    status, _, _ = await req("GET", "/api", user="limited")
    assert status == 200


async def test_forbidden_messages(apiserver: ApiServer, req) -> None:
    apiserver.create_object(cm("target"))
    cases = [
        ("GET", CMS, 'configmaps is forbidden: User "limited" cannot list resource "configmaps" '
                     'in API group "" in the namespace "default"', {"kind": "configmaps"}),
        ("GET", f"{CMS}/target", 'configmaps "target" is forbidden: User "limited" cannot get '
                                 'resource "configmaps" in API group "" in the namespace '
                                 '"default"', {"name": "target", "kind": "configmaps"}),
        ("GET", "/api/v1/configmaps", 'configmaps is forbidden: User "limited" cannot list '
                                      'resource "configmaps" in API group "" at the cluster '
                                      'scope', {"kind": "configmaps"}),
        ("POST", CMS, 'configmaps is forbidden: User "limited" cannot create resource '
                      '"configmaps" in API group "" in the namespace "default"',
         {"kind": "configmaps"}),
        ("GET", "/apis/apps/v1/namespaces/default/deployments",
         'deployments.apps is forbidden: User "limited" cannot list resource "deployments" in '
         'API group "apps" in the namespace "default"', {"group": "apps", "kind": "deployments"}),
        ("PUT", "/apis/apps/v1/namespaces/default/deployments/d/status",
         'deployments.apps "d" is forbidden: User "limited" cannot update resource '
         '"deployments/status" in API group "apps" in the namespace "default"',
         {"name": "d", "group": "apps", "kind": "deployments"}),
    ]
    for method, path, message, details in cases:
        kw = {"json": cm("x")} if method in ("POST", "PUT") else {}
        status, body, _ = await req(method, path, user="limited", **kw)
        assert (status, body["reason"], body["message"], body["details"]) == (
            403, "Forbidden", message, details)


async def test_forbidden_watch_is_plain_403(apiserver: ApiServer,
                                            session: aiohttp.ClientSession) -> None:
    w = await open_watch(session, apiserver, CMS, user="limited")
    assert w.status == 403
    body = await w.resp.json()
    assert "cannot watch resource" in body["message"]


async def test_grant_and_revoke_at_run_time(apiserver: ApiServer, req) -> None:
    apiserver.create_object(cm("a"))
    rule = apiserver.rbac.grant("limited", verbs=["get", "list"], resources=["configmaps"],
                                namespaces=["default"])
    status, _, _ = await req("GET", CMS, user="limited")
    assert status == 200
    status, _, _ = await req("GET", "/api/v1/configmaps", user="limited")
    assert status == 403  # namespace-limited rules do not cover the cluster scope
    status, _, _ = await req("DELETE", f"{CMS}/a", user="limited")
    assert status == 403
    apiserver.rbac.revoke("limited", rule)
    status, _, _ = await req("GET", CMS, user="limited")
    assert status == 403
    apiserver.rbac.grant("limited", verbs="*", resources="*", groups="*")
    status, _, _ = await req("DELETE", f"{CMS}/a", user="limited")
    assert status == 200
    apiserver.rbac.revoke_all("limited")
    status, _, _ = await req("GET", CMS, user="limited")
    assert status == 403


async def test_added_users_and_group_grants(apiserver: ApiServer, req,
                                            session: aiohttp.ClientSession) -> None:
    token = apiserver.add_user("bob", groups=["devs"])
    apiserver.rbac.grant("devs", verbs=["list"], resources=["configmaps"])
    async with session.get(apiserver.url + CMS,
                           headers={"Authorization": f"Bearer {token}"}) as r:
        assert r.status == 200
    assert apiserver.requests[-1].user == "bob"
    apiserver.rbac.grant("bob", verbs=["update"], resources=["deployments/status"],
                         groups=["apps"])
    status, _, _ = await req("PUT", "/apis/apps/v1/namespaces/default/deployments/x/status",
                                user="bob", json={"metadata": {"name": "x"}})
    assert status == 404  # allowed through RBAC, then not found


async def test_revoking_keeps_open_watch(apiserver: ApiServer,
                                         session: aiohttp.ClientSession) -> None:
    apiserver.rbac.grant("limited", verbs=["watch"], resources=["configmaps"])
    w = await open_watch(session, apiserver, CMS, user="limited",
                         resourceVersion=apiserver.store.rv, timeoutSeconds=2)
    assert w.status == 200
    apiserver.rbac.revoke_all("limited")
    apiserver.create_object(cm("still-seen"))
    ev = await w.next()
    assert ev is not None and ev["object"]["metadata"]["name"] == "still-seen"
    w2 = await open_watch(session, apiserver, CMS, user="limited")
    assert w2.status == 403
    w.close()


async def test_tls_and_client_certificates() -> None:
    async with ApiServer(tls=True) as srv:
        assert srv.url.startswith("https://127.0.0.1:")
        cfg = srv.client_config()
        assert cfg.ca_data == srv.ca_pem and cfg.server == srv.url
        ctx = cfg.ssl_context()
        assert ctx is not None
        async with aiohttp.ClientSession() as s:
            async with s.get(srv.url + CMS, ssl=ctx,
                             headers={"Authorization": f"Bearer {srv.token()}"}) as r:
                assert r.status == 200
            cert_cfg = srv.client_config("carol", cert_groups=["system:masters"])
            async with s.get(srv.url + "/api/v1/namespaces", ssl=cert_cfg.ssl_context()) as r:
                assert r.status == 200
            assert srv.requests[-1].user == "carol"
            cert_cfg = srv.client_config("dave", cert_groups=["devs", "ops"])
            srv.rbac.grant("ops", verbs=["get"], resources=["namespaces"])
            async with s.get(srv.url + "/api/v1/namespaces/default",
                             ssl=cert_cfg.ssl_context()) as r:
                assert r.status == 200
            async with s.get(srv.url + "/api/v1/namespaces", ssl=cert_cfg.ssl_context()) as r:
                assert r.status == 403
            plain = ssl.create_default_context()  # does not trust the simulator's CA
            try:
                async with s.get(srv.url + "/version", ssl=plain):
                    raise AssertionError("unverified TLS must fail")
            except aiohttp.ClientConnectorCertificateError:
                pass


async def test_kubeconfig_file(apiserver: ApiServer, tmp_path) -> None:
    import yaml

    path = apiserver.kubeconfig(tmp_path / "kc.yaml", user="limited")
    doc = yaml.safe_load(Path(path).read_bytes())  # noqa: ASYNC240 - a tiny local file
    assert doc["clusters"][0]["cluster"]["server"] == apiserver.url
    assert doc["users"][0]["user"]["token"] == apiserver.token("limited")
    assert doc["current-context"] == "watchkeeper-sim"
