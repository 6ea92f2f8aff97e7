"""Protobuf request bodies for the kinds typed clients (kubectl create rolebinding ...) send."""

from __future__ import annotations

from watchkeeper.testing import ApiServer
from watchkeeper.testing._protobuf import MAGIC, _bytes, _map, _str

PROTOBUF = {"Content-Type": "application/vnd.kubernetes.protobuf"}
RBAC = "rbac.authorization.k8s.io"


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return MAGIC + _bytes(1, _str(1, api_version) + _str(2, kind)) + _bytes(2, raw)


def meta(name: str, **labels: str) -> bytes:
    return _bytes(1, _str(1, name) + _map(11, labels))


async def test_rbac_objects_and_configmaps_decode(apiserver: ApiServer, req) -> None:
    rule = _bytes(2, _str(1, "get") + _str(1, "list") + _str(2, "") + _str(3, "pods"))
    selector = _bytes(1, _map(1, {"team": "a"}))
    role = envelope(f"{RBAC}/v1", "ClusterRole",
                    meta("reader", app="x") + rule + _bytes(3, selector))
    status, body, _ = await req("POST", f"/apis/{RBAC}/v1/clusterroles", data=role,
                                headers=PROTOBUF)
    assert status == 201, body
    assert body["metadata"]["labels"] == {"app": "x"}
    assert body["rules"] == [{"verbs": ["get", "list"], "apiGroups": [""],
                              "resources": ["pods"]}]
    assert body["aggregationRule"] == {"clusterRoleSelectors": [{"matchLabels":
                                                                 {"team": "a"}}]}
    subject = _bytes(2, _str(1, "ServiceAccount") + _str(3, "robot") + _str(4, "default"))
    ref = _bytes(3, _str(1, RBAC) + _str(2, "ClusterRole") + _str(3, "reader"))
    binding = envelope(f"{RBAC}/v1", "ClusterRoleBinding", meta("readers") + subject + ref)
    status, body, _ = await req("POST", f"/apis/{RBAC}/v1/clusterrolebindings",
                                data=binding, headers=PROTOBUF)
    assert status == 201, body
    assert body["subjects"] == [{"kind": "ServiceAccount", "name": "robot",
                                 "namespace": "default"}]
    assert body["roleRef"] == {"apiGroup": RBAC, "kind": "ClusterRole", "name": "reader"}
    cm = envelope("v1", "ConfigMap", meta("pb") + _map(2, {"k": "v"}))
    status, body, _ = await req("POST", "/api/v1/namespaces/default/configmaps", data=cm,
                                headers=PROTOBUF)
    assert status == 201 and body["data"] == {"k": "v"}


async def test_other_kinds_and_garbage_are_still_415(apiserver: ApiServer, req) -> None:
    secret = envelope("v1", "Secret", meta("s"))
    for data in (secret, b"not protobuf", MAGIC + b"\xff\xff"):
        status, body, _ = await req("POST", "/api/v1/namespaces/default/secrets", data=data,
                                    headers=PROTOBUF)
        assert status == 415, body
