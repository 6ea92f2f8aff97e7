"""RBAC escalation prevention (issue 10, item 13): a user allowed to write Roles and
RoleBindings cannot grant through them what she does not hold, unless she has ``escalate``
or ``bind``; the 403 is worded like kube-apiserver's ConfirmNoEscalation."""

from __future__ import annotations

from typing import Any

import pytest

from watchkeeper.testing import ApiServer

RBAC = "rbac.authorization.k8s.io"
NS_RBAC = f"/apis/{RBAC}/v1/namespaces/default"
CLUSTER_RBAC = f"/apis/{RBAC}/v1"
HELD = 'user "mallory" (groups=["system:authenticated"]) is attempting to grant RBAC ' \
       'permissions not currently held:\n'


def role(name: str, *rules: dict[str, Any], kind: str = "Role") -> dict[str, Any]:
    return {"apiVersion": f"{RBAC}/v1", "kind": kind, "metadata": {"name": name},
            "rules": list(rules)}


def rule(verbs: list[str], resources: list[str], groups: list[str] | None = None,
         **more: Any) -> dict[str, Any]:
    return {"apiGroups": [""] if groups is None else groups, "resources": resources,
            "verbs": verbs, **more}


def binding(name: str, role_kind: str, role_name: str, user: str = "mallory",
            kind: str = "RoleBinding") -> dict[str, Any]:
    return {"apiVersion": f"{RBAC}/v1", "kind": kind, "metadata": {"name": name},
            "subjects": [{"kind": "User", "apiGroup": RBAC, "name": user}],
            "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role_name}}


@pytest.fixture
async def mallory(apiserver: ApiServer, req) -> ApiServer:
    """mallory may write Roles and RoleBindings in default, and read configmap "a"."""
    apiserver.add_user("mallory")
    for obj in (role("rbac-writer", rule(["create", "get", "list", "update", "patch"],
                                         ["roles", "rolebindings"], [RBAC]),
                     rule(["get"], ["configmaps"], resourceNames=["a"])),
                binding("rbac-writer", "Role", "rbac-writer")):
        plural = "roles" if obj["kind"] == "Role" else "rolebindings"
        status, body, _ = await req("POST", f"{NS_RBAC}/{plural}", json=obj)
        assert status == 201, body
    return apiserver


async def test_binding_herself_to_cluster_admin_is_forbidden(mallory: ApiServer, req) -> None:
    status, body, headers = await req("POST", f"{NS_RBAC}/rolebindings", user="mallory",
                                      json=binding("pwn", "ClusterRole", "cluster-admin"))
    assert status == 403, body
    assert body["reason"] == "Forbidden"
    assert body["details"] == {"name": "pwn", "group": RBAC, "kind": "rolebindings"}
    assert body["message"] == (
        f'rolebindings.{RBAC} "pwn" is forbidden: {HELD}'
        '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}\n'
        '{NonResourceURLs:["*"], Verbs:["*"]}')
    assert "X-Content-Type-Options" not in headers  # the storage's 403, not the authorizer's
    status, _, _ = await req("GET", "/api/v1/namespaces/default/secrets", user="mallory")
    assert status == 403


async def test_a_star_role_is_forbidden_and_missing_verbs_are_compacted(
        mallory: ApiServer, req) -> None:
    status, body, _ = await req("POST", f"{NS_RBAC}/roles", user="mallory",
                                json=role("star", rule(["*"], ["*"], ["*"])))
    assert status == 403
    assert body["message"] == (f'roles.{RBAC} "star" is forbidden: {HELD}'
                               '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}')
    status, body, _ = await req("POST", f"{NS_RBAC}/roles", user="mallory",
                                json=role("reader", rule(["get", "list"], ["secrets"]),
                                          rule(["get"], ["roles"], [RBAC])))
    assert status == 403
    assert body["message"].endswith(HELD + '{APIGroups:[""], Resources:["secrets"], '
                                           'Verbs:["get" "list"]}')
    # rules she holds herself: allowed
    status, body, _ = await req("POST", f"{NS_RBAC}/roles", user="mallory",
                                json=role("sub", rule(["get", "list"], ["roles"], [RBAC])))
    assert status == 201, body


async def test_resource_names_must_be_covered(mallory: ApiServer, req) -> None:
    ok = role("cm-a", rule(["get"], ["configmaps"], resourceNames=["a"]))
    status, body, _ = await req("POST", f"{NS_RBAC}/roles", user="mallory", json=ok)
    assert status == 201, body
    other = role("cm-b", rule(["get"], ["configmaps"], resourceNames=["a", "b"]))
    status, body, _ = await req("POST", f"{NS_RBAC}/roles", user="mallory", json=other)
    assert status == 403
    assert body["message"].endswith(
        HELD + '{APIGroups:[""], Resources:["configmaps"], ResourceNames:["b"], '
               'Verbs:["get"]}')
    every = role("cm-all", rule(["get"], ["configmaps"]))
    status, body, _ = await req("POST", f"{NS_RBAC}/roles", user="mallory", json=every)
    assert status == 403
    assert body["message"].endswith(HELD + '{APIGroups:[""], Resources:["configmaps"], '
                                           'Verbs:["get"]}')


async def test_non_resource_urls_are_covered_by_prefix(apiserver: ApiServer, req) -> None:
    apiserver.add_user("mallory")
    apiserver.rbac.grant("mallory", verbs="create", resources="clusterroles", groups=RBAC)
    # system:discovery (bound to system:authenticated) grants get on /apis/*
    ok = role("disc", {"nonResourceURLs": ["/apis/example.com"], "verbs": ["get"]},
              kind="ClusterRole")
    status, body, _ = await req("POST", f"{CLUSTER_RBAC}/clusterroles", user="mallory", json=ok)
    assert status == 201, body
    bad = role("metrics", {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
               kind="ClusterRole")
    status, body, _ = await req("POST", f"{CLUSTER_RBAC}/clusterroles", user="mallory",
                                json=bad)
    assert status == 403
    assert body["message"] == (f'clusterroles.{RBAC} "metrics" is forbidden: {HELD}'
                               '{NonResourceURLs:["/metrics"], Verbs:["get"]}')
    agg = role("agg", kind="ClusterRole")
    agg["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}
    status, body, _ = await req("POST", f"{CLUSTER_RBAC}/clusterroles", user="mallory",
                                json=agg)
    assert status == 403
    assert body["message"] == (f'clusterroles.{RBAC} "agg" is forbidden: must have '
                               'cluster-admin privileges to use the aggregationRule')


async def test_an_update_that_escalates_is_forbidden(mallory: ApiServer, req) -> None:
    path = f"{NS_RBAC}/roles/rbac-writer"
    status, current, _ = await req("GET", path, user="mallory")
    assert status == 200
    current["rules"].append(rule(["get"], ["secrets"]))
    status, body, _ = await req("PUT", path, user="mallory", json=current)
    assert status == 403
    assert body["message"].endswith(HELD + '{APIGroups:[""], Resources:["secrets"], '
                                           'Verbs:["get"]}')
    status, body, _ = await req(
        "PATCH", path, user="mallory", json=[{"op": "add", "path": "/rules/-",
                                              "value": rule(["list"], ["secrets"])}],
        headers={"Content-Type": "application/json-patch+json"})
    assert status == 403, body
    # a change granting nothing new is fine
    status, body, _ = await req(
        "PATCH", path, user="mallory", json={"metadata": {"labels": {"x": "y"}}},
        headers={"Content-Type": "application/merge-patch+json"})
    assert status == 200, body


async def test_escalate_and_bind_verbs_allow_it(mallory: ApiServer, req) -> None:
    mallory.rbac.grant("mallory", verbs="escalate", resources="roles", groups=RBAC,
                       namespaces="default")
    status, body, _ = await req("POST", f"{NS_RBAC}/roles", user="mallory",
                                json=role("star", rule(["*"], ["*"], ["*"])))
    assert status == 201, body
    # bind on that one ClusterRole, in this namespace
    mallory.rbac.grant("mallory", verbs="bind", resources="clusterroles", groups=RBAC,
                       namespaces="default", names="view")
    status, body, _ = await req("POST", f"{NS_RBAC}/rolebindings", user="mallory",
                                json=binding("view", "ClusterRole", "view"))
    assert status == 201, body
    status, body, _ = await req("POST", f"{NS_RBAC}/rolebindings", user="mallory",
                                json=binding("pwn", "ClusterRole", "cluster-admin"))
    assert status == 403, body
    # a binding to the star Role she was allowed to create: she holds none of it via bind,
    # so the rules are checked (and she does not hold */*/*)
    status, body, _ = await req("POST", f"{NS_RBAC}/rolebindings", user="mallory",
                                json=binding("star", "Role", "star"))
    assert status == 403, body


async def test_binding_to_a_missing_role_is_404(mallory: ApiServer, req) -> None:
    status, body, _ = await req("POST", f"{NS_RBAC}/rolebindings", user="mallory",
                                json=binding("ghost", "ClusterRole", "nope"))
    assert status == 404
    assert body["message"] == f'clusterroles.{RBAC} "nope" not found'


async def test_masters_and_python_writes_are_not_checked(apiserver: ApiServer, req) -> None:
    status, body, _ = await req("POST", f"{NS_RBAC}/roles",
                                json=role("star", rule(["*"], ["*"], ["*"])))
    assert status == 201, body
    apiserver.create_object({**binding("direct", "ClusterRole", "cluster-admin"),
                             "metadata": {"name": "direct", "namespace": "default"}})


async def test_the_check_comes_before_validation_and_conflicts(mallory: ApiServer, req) -> None:
    """The policy-based storage refuses before the strategy validates (422) and before the
    resourceVersion precondition (409) is looked at."""
    bad_name = role("Not_A_Name", rule(["*"], ["*"], ["*"]))
    status, body, _ = await req("POST", f"{NS_RBAC}/roles", user="mallory", json=bad_name)
    assert status == 403, body
    path = f"{NS_RBAC}/roles/rbac-writer"
    _, current, _ = await req("GET", path, user="mallory")
    current["metadata"]["resourceVersion"] = "1"  # stale
    current["rules"].append(rule(["get"], ["secrets"]))
    status, body, _ = await req("PUT", path, user="mallory", json=current)
    assert status == 403, body
