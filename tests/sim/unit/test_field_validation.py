"""fieldValidation on PUT, PATCH and apply, nested unknown fields, and CRD schema checks.

The reference pack shows POST only (112-115, 147-149, held in test_contract.py); these hold
the same rules on the other write verbs, over HTTP against the simulator.
"""

from __future__ import annotations

from typing import Any

import pytest

from watchkeeper_sim import ApiServer

from ..conftest import Req

CMS = "/api/v1/namespaces/default/configmaps"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"
MERGE = {"Content-Type": "application/merge-patch+json"}
JSON_PATCH = {"Content-Type": "application/json-patch+json"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}


def warnings(headers: Any) -> list[str]:
    return list(headers.getall("Warning", []))


def unknown(path: str) -> str:
    return f'299 - "unknown field \\"{path}\\""'


def cm(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"k": "v"}, **extra}


async def test_put_follows_the_directive(apiserver: ApiServer, req: Req) -> None:
    apiserver.create_object(cm("c"))
    status, body, headers = await req("PUT", f"{CMS}/c", json=cm("c", spec=1),
                                      params={"fieldValidation": "Strict"})
    assert status == 400 and body["reason"] == "BadRequest"
    assert body["message"] == ('ConfigMap in version "v1" cannot be handled as a ConfigMap: '
                               'strict decoding error: unknown field "spec"')
    status, body, headers = await req("PUT", f"{CMS}/c", json=cm("c", spec=1, data={"k": "2"}))
    assert status == 200 and warnings(headers) == [unknown("spec")]
    assert "spec" not in body and body["data"] == {"k": "2"}
    status, body, headers = await req("PUT", f"{CMS}/c", json=cm("c", spec=1),
                                      params={"fieldValidation": "Ignore"})
    assert status == 200 and warnings(headers) == [] and "spec" not in body


@pytest.mark.parametrize(("ctype", "patch"), [
    (MERGE, {"spec": {"x": 1}, "metadata": {"bogus": 1}}),
    (JSON_PATCH, [{"op": "add", "path": "/spec", "value": {"x": 1}},
                  {"op": "add", "path": "/metadata/bogus", "value": 1}]),
    ({"Content-Type": "application/strategic-merge-patch+json"},
     {"spec": {"x": 1}, "metadata": {"bogus": 1}}),
])
async def test_patch_checks_the_patched_object(apiserver: ApiServer, req: Req,
                                               ctype: dict[str, str], patch: Any) -> None:
    apiserver.create_object(cm("p"))
    status, body, _ = await req("PATCH", f"{CMS}/p", json=patch, headers=ctype,
                                params={"fieldValidation": "Strict"})
    assert status == 400 and body["reason"] == "BadRequest"
    assert body["message"].startswith("strict decoding error: unknown field ")
    assert sorted(body["message"].split(", ")) == sorted(
        ['strict decoding error: unknown field "metadata.bogus"', 'unknown field "spec"'])
    status, body, headers = await req("PATCH", f"{CMS}/p", json=patch, headers=ctype)
    assert status == 200 and sorted(warnings(headers)) == [unknown("metadata.bogus"),
                                                           unknown("spec")]
    assert "spec" not in body and "bogus" not in body["metadata"]


async def test_duplicate_keys_in_a_merge_patch(apiserver: ApiServer, req: Req) -> None:
    apiserver.create_object(cm("d"))
    raw = b'{"data":{"a":"1","a":"2"}}'
    status, body, _ = await req("PATCH", f"{CMS}/d", data=raw, headers=MERGE,
                                params={"fieldValidation": "Strict"})
    assert status == 400
    assert body["message"] == 'strict decoding error: duplicate field "data.a"'
    status, body, headers = await req("PATCH", f"{CMS}/d", data=raw, headers=MERGE,
                                      params={"fieldValidation": "Ignore"})
    assert status == 200 and body["data"]["a"] == "2" and warnings(headers) == []


async def test_apply_with_unknown_fields(apiserver: ApiServer, req: Req) -> None:
    doc = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\nspec: 1\n"
    params = {"fieldManager": "test", "fieldValidation": "Strict"}
    status, body, _ = await req("PATCH", f"{CMS}/a", data=doc, headers=APPLY, params=params)
    assert status == 400 and body["message"] == 'strict decoding error: unknown field "spec"'
    status, body, headers = await req("PATCH", f"{CMS}/a", data=doc, headers=APPLY,
                                      params={"fieldManager": "test"})
    assert status == 201 and warnings(headers) == [unknown("spec")] and "spec" not in body


@pytest.mark.parametrize(("method", "options"), [("POST", "CreateOptions"),
                                                 ("PUT", "UpdateOptions"),
                                                 ("PATCH", "PatchOptions")])
async def test_unsupported_directive_is_422(apiserver: ApiServer, req: Req, method: str,
                                            options: str) -> None:
    apiserver.create_object(cm("o"))
    path = CMS if method == "POST" else f"{CMS}/o"
    status, body, _ = await req(method, path, json=cm("o"), headers=MERGE,
                                params={"fieldValidation": "strict"})
    assert status == 422 and body["reason"] == "Invalid"
    assert body["message"] == (
        f'{options}.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "strict": '
        'supported values: "", "Ignore", "Strict", "Warn"')
    assert body["details"]["kind"] == options and body["details"]["group"] == "meta.k8s.io"


async def test_nested_paths(apiserver: ApiServer, req: Req) -> None:
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "d", "ownerReferences": [
                  {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u", "oops": 1}]},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}, "nope": 1},
                       "template": {"metadata": {"labels": {"a": "b"}, "wrong": 1},
                                    "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    status, body, headers = await req("POST", "/apis/apps/v1/namespaces/default/deployments",
                                      json=deploy)
    assert status == 201
    assert warnings(headers) == [unknown("metadata.ownerReferences[0].oops"),
                                 unknown("spec.selector.nope"),
                                 unknown("spec.template.metadata.wrong")]
    assert body["spec"]["template"]["spec"] == deploy["spec"]["template"]["spec"]  # open
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "r"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "verb": 1}]}
    status, body, _ = await req(
        "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", json=role,
        params={"fieldValidation": "Strict"})
    assert status == 400 and body["message"].endswith('unknown field "rules[0].verb"')


SCHEMA = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "color": {"type": "string", "enum": ["red", "blue"]},
                "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                "tags": {"type": "array", "items": {"type": "object", "properties": {
                    "k": {"type": "string"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "port": {"x-kubernetes-int-or-string": True},
            },
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}


@pytest.fixture
def widgets(apiserver: ApiServer) -> ApiServer:
    apiserver.create_object({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": SCHEMA}}]}})
    return apiserver


def widget(obj_name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": obj_name},
            "spec": spec}


async def test_schema_rules(widgets: ApiServer, req: Req) -> None:
    bad = widget("bad", size=0, color="pink", name="Abcdefg", port=1.5)
    status, body, _ = await req("POST", WIDGETS, json=bad)
    assert status == 422 and body["reason"] == "Invalid"
    assert [(c["field"], c["reason"], c["message"]) for c in body["details"]["causes"]] == [
        ("spec.size", "FieldValueInvalid",
         "Invalid value: 0: spec.size in body should be greater than or equal to 1"),
        ("spec.color", "FieldValueNotSupported",
         'Unsupported value: "pink": supported values: "red", "blue"'),
        ("spec.name", "FieldValueTooLong", "Too long: may not be longer than 5"),
        ("spec.name", "FieldValueInvalid",
         "Invalid value: \"Abcdefg\": spec.name in body should match '^[a-z]+$'"),
        ("spec.port", "FieldValueTypeInvalid",
         'Invalid value: "number": spec.port in body must be of type integer,string: "number"'),
    ]
    assert body["message"].startswith('Widget.example.com "bad" is invalid: [spec.size: ')
    status, body, _ = await req("POST", WIDGETS, json={**widget("nospec"), "spec": {}})
    assert status == 422 and body["details"]["causes"] == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.size"}]
    status, body, _ = await req("POST", WIDGETS, json=widget("big", size=11))
    assert status == 422 and body["details"]["causes"][0]["message"] == (
        "Invalid value: 11: spec.size in body should be less than or equal to 10")


async def test_pruning_keeps_what_the_schema_allows(widgets: ApiServer, req: Req) -> None:
    w = widget("w", size=1, tags=[{"k": "a", "x": 1}], labels={"a": "b"},
               free={"any": {"thing": 1}}, port="http", shape="round")
    w["status"] = {"phase": "x"}
    status, body, headers = await req("POST", WIDGETS, json=w)
    assert status == 201
    assert warnings(headers) == [unknown("spec.shape"), unknown("spec.tags[0].x")]
    assert body["spec"] == {"size": 1, "tags": [{"k": "a"}], "labels": {"a": "b"},
                            "free": {"any": {"thing": 1}}, "port": "http"}
    stored = widgets.get_object("example.com/v1", "Widget", "w")
    assert stored["spec"] == body["spec"]


async def test_custom_resource_updates_are_validated(widgets: ApiServer, req: Req) -> None:
    status, _, _ = await req("POST", WIDGETS, json=widget("u", size=1))
    assert status == 201
    status, body, _ = await req("PATCH", f"{WIDGETS}/u", json={"spec": {"size": "big"}},
                                headers=MERGE)
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec.size"
    status, body, headers = await req("PATCH", f"{WIDGETS}/u",
                                      json={"spec": {"size": 2, "shape": 1}}, headers=MERGE)
    assert status == 200 and body["spec"] == {"size": 2}
    assert warnings(headers) == [unknown("spec.shape")]
    current = widgets.get_object("example.com/v1", "Widget", "u")
    current["status"] = {"phase": 3}
    status, body, _ = await req("PUT", f"{WIDGETS}/u/status", json=current)
    # /status is checked against the status schema alone: the path starts below status
    # (a cluster's answer, tests/conformance crd-status-subresource)
    assert status == 422 and body["details"]["causes"][0]["field"] == "phase"


async def test_label_and_data_key_checks_on_update(apiserver: ApiServer, req: Req) -> None:
    apiserver.create_object(cm("l"))
    status, body, _ = await req("PATCH", f"{CMS}/l", headers=MERGE,
                                json={"metadata": {"labels": {"ok": "bad value!"}},
                                      "data": {"..x": "1"}})
    assert status == 422
    assert [(c["field"], c["message"].split(": ", 2)[1]) for c in body["details"]["causes"]] \
        == [("metadata.labels", '"bad value!"'), ("data[..x]", '"..x"')]
    assert body["details"]["causes"][1]["message"].endswith("must not start with '..'")
