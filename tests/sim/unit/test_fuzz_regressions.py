"""Hostile and malformed requests found by fuzzing the simulator: each gets the Status a
kube-apiserver 1.28 sends (a 4xx, or the reason-less 500 it really sends for a DeleteOptions
body of the wrong types), never an InternalError from a Python exception, a poisoned store or
a watch that never ends."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from watchkeeper_sim import ApiServer

from .._util import cm

CMS = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"


def _token(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _not_internal(body: Any) -> None:
    assert isinstance(body, dict) and body.get("kind") == "Status", body
    assert body.get("reason") != "InternalError", body


async def test_garbage_continue_tokens_are_400(apiserver: ApiServer, req) -> None:
    for raw in (b'{"v":"meta.k8s.io/v1","rv":1e999,"start":""}',  # OverflowError
                b"[" * 3000):  # RecursionError
        status, body, _ = await req("GET", CMS, params={"limit": "1", "continue": _token(raw)})
        assert status == 400 and body["reason"] == "BadRequest", body
        assert body["message"].startswith("invalid continue token: continue key is not valid")


async def test_metadata_of_the_wrong_json_type_is_400(apiserver: ApiServer, req) -> None:
    cases = [
        ({"name": 123}, "number into Go struct field ObjectMeta.metadata.name of type string"),
        ({"name": True}, "bool into Go struct field ObjectMeta.metadata.name of type string"),
        ({"name": "l", "labels": ["a"]},
         "array into Go struct field ObjectMeta.metadata.labels of type map[string]string"),
        ({"name": "l", "labels": {"a": 1}},
         "number into Go struct field ObjectMeta.metadata.labels of type string"),
        ({"name": "a", "annotations": "x"},
         "string into Go struct field ObjectMeta.metadata.annotations of type map[string]string"),
        ({"name": "f", "finalizers": "x"},
         "string into Go struct field ObjectMeta.metadata.finalizers of type []string"),
    ]
    for meta, why in cases:
        doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
        for method, path in (("POST", CMS), ("PUT", f"{CMS}/x")):
            status, body, _ = await req(method, path, json=doc)
            assert status == 400 and body["reason"] == "BadRequest", (meta, body)
            assert body["message"] == (
                'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot '
                f"unmarshal {why}"), body
    status, body, _ = await req("POST", CMS, json={"apiVersion": "v1", "kind": "ConfigMap",
                                                   "metadata": [1]})
    assert status == 400 and body["message"].endswith(
        "cannot unmarshal array into Go struct field ConfigMap.metadata of type v1.ObjectMeta")
    # nothing was stored: label selectors still work
    status, body, _ = await req("GET", CMS, params={"labelSelector": "a"})
    assert status == 200 and body["items"] == []


async def test_bad_labels_never_reach_the_store_or_a_watch(apiserver: ApiServer, req,
                                                          session) -> None:
    """A list of labels was stored (201); then every label-selector LIST of the kind was a
    500, and a write seen by a label-selector watch answered 500 after it was committed."""
    from .._util import open_watch

    w = await open_watch(session, apiserver, CMS, labelSelector="a=b", timeoutSeconds=1)
    try:
        status, body, _ = await req("POST", CMS, json={
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "poison", "labels": ["x"]}})
        assert status == 400, body
        status, _, _ = await req("GET", f"{CMS}/poison")
        assert status == 404
        status, body, _ = await req("POST", CMS, json=cm("fine", labels={"a": "b"}))
        assert status == 201
        ev = await w.until("ADDED")
        assert ev["object"]["metadata"]["name"] == "fine"
    finally:
        w.close()


async def test_patches_that_break_metadata_types_are_422(apiserver: ApiServer, req) -> None:
    await req("POST", CMS, json=cm("p", labels={"a": "b"}))
    patches = [
        ("application/merge-patch+json", {"metadata": {"labels": [1]}}),
        ("application/strategic-merge-patch+json", {"metadata": {"labels": "x"}}),
        ("application/json-patch+json",
         [{"op": "replace", "path": "/metadata/labels", "value": [1]}]),
    ]
    for ctype, patch in patches:
        status, body, _ = await req("PATCH", f"{CMS}/p", data=json.dumps(patch),
                                    headers={"Content-Type": ctype})
        assert status == 422 and body["reason"] == "Invalid", body
        assert body["details"]["causes"][0]["field"] == "patch"
        assert "into Go struct field ObjectMeta.metadata.labels" in body["message"]
    status, body, _ = await req("GET", CMS, params={"labelSelector": "a=b"})
    assert status == 200 and [i["metadata"]["name"] for i in body["items"]] == ["p"]


async def test_json_patch_pointer_that_is_not_a_string_is_422(apiserver: ApiServer,
                                                              req) -> None:
    await req("POST", CMS, json=cm("jp"))
    for op in ({"op": "add", "path": 5, "value": "x"}, {"op": "add", "path": None},
               {"op": "copy", "from": {}, "path": "/data/x"}):
        status, body, _ = await req("PATCH", f"{CMS}/jp", data=json.dumps([op]),
                                    headers={"Content-Type": "application/json-patch+json"})
        assert status == 422 and body["reason"] == "Invalid", (op, body)


async def test_deeply_nested_bodies_are_400(apiserver: ApiServer, req) -> None:
    deep: dict[str, Any] = {}
    cur = deep
    for _ in range(600):
        cur["a"] = {}
        cur = cur["a"]
    bodies = [
        ("application/json", b"[" * 2000),
        ("application/json", json.dumps({"apiVersion": "v1", "kind": "Pod",
                                         "metadata": {"name": "deep"}, "spec": deep}).encode()),
        ("application/yaml", b"[" * 3000),
        ("application/yaml", b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: y\nx: &a [*a]\n"),
    ]
    for ctype, raw in bodies:
        status, body, _ = await req("POST", PODS, data=raw, headers={"Content-Type": ctype})
        assert status == 400 and body["reason"] == "BadRequest", body
        assert "couldn't get version/kind" in body["message"]


async def test_yaml_alias_bomb_is_refused_quickly(apiserver: ApiServer, req) -> None:
    lines = ["apiVersion: v1", "kind: Pod", "metadata:", "  name: bomb",
             "x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, 7):
        lines.append(f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    lines.append("spec: *a6")
    t0 = time.monotonic()
    status, body, _ = await req("POST", PODS, data="\n".join(lines) + "\n",
                                headers={"Content-Type": "application/yaml"})
    assert status == 400 and "excessive aliasing" in body["message"], body
    assert time.monotonic() - t0 < 2.0


async def test_yaml_map_keys_and_scalars_become_json(apiserver: ApiServer, req) -> None:
    doc = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y1\n  labels:\n    1: two\n"
           "  annotations:\n    1.5: x\ndata:\n  day: 2020-01-01\n  ~: nil-key\n")
    status, body, _ = await req("POST", CMS, data=doc,
                                headers={"Content-Type": "application/yaml"})
    assert status == 201, body
    assert body["metadata"]["labels"] == {"1": "two"}
    assert body["data"] == {"day": "2020-01-01", "null": "nil-key"}
    for bad in ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: 5\n",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yes\n"):
        status, body, _ = await req("POST", CMS, data=bad,
                                    headers={"Content-Type": "application/yaml"})
        assert status == 400, body
    status, body, _ = await req(
        "PATCH", f"{CMS}/y1", params={"fieldManager": "m"},
        data='apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y1\ndata:\n  a: "\\ud800"\n',
        headers={"Content-Type": "application/apply-patch+yaml"})
    assert status == 200 and body["data"]["a"] == "\ufffd", body


async def test_delete_options_of_the_wrong_types(apiserver: ApiServer, req) -> None:
    """kube-apiserver 1.28 answers these with a reason-less 500 carrying Go's decode error
    (kubernetes#132359; 400 only from 1.35); the object stays."""
    await req("POST", CMS, json=cm("d"))
    cases = [({"preconditions": [1]}, "array into Go struct field DeleteOptions.preconditions "
                                      "of type v1.Preconditions"),
             ({"dryRun": "All"}, "string into Go struct field DeleteOptions.dryRun of type "
                                 "[]string"),
             ({"dryRun": 5}, "number into Go struct field DeleteOptions.dryRun of type []string"),
             ({"gracePeriodSeconds": "5"}, "string into Go struct field "
                                           "DeleteOptions.gracePeriodSeconds of type int64")]
    for opts, why in cases:
        status, body, _ = await req("DELETE", f"{CMS}/d", json=opts)
        assert status == 500 and "reason" not in body, body
        assert body["message"] == f"json: cannot unmarshal {why}"
    status, _, _ = await req("GET", f"{CMS}/d")
    assert status == 200


async def test_delete_propagation_and_dry_run_values_are_validated(apiserver: ApiServer,
                                                                   req) -> None:
    await req("POST", CMS, json=cm("v"))
    status, body, _ = await req("DELETE", f"{CMS}/v", json={"propagationPolicy": "garbage"})
    assert status == 422 and body["message"] == (
        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: '
        '"garbage": supported values: "Foreground", "Background", "Orphan", "nil"'), body
    status, body, _ = await req("DELETE", f"{CMS}/v", params={"dryRun": "true"})
    assert status == 422 and body["details"]["causes"][0]["field"] == "dryRun", body
    status, _, _ = await req("GET", f"{CMS}/v")
    assert status == 200  # neither request deleted it


async def test_create_options_dry_run_and_field_manager(apiserver: ApiServer, req) -> None:
    status, body, _ = await req("POST", CMS, params={"dryRun": "true"}, json=cm("dr"))
    assert status == 422 and body["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: '
        '[]string{"true"}: supported values: "All"'), body
    status, _, _ = await req("GET", f"{CMS}/dr")
    assert status == 404  # an invalid dry run never writes
    status, body, _ = await req("POST", CMS, params={"fieldManager": "x" * 129}, json=cm("fm"))
    assert status == 422 and body["details"]["causes"][0]["reason"] == "FieldValueTooLong"
    status, body, _ = await req("POST", CMS, params={"fieldManager": "a\x01b"}, json=cm("fm"))
    assert status == 422 and body["details"]["causes"][0]["message"].endswith(
        "invalid character U+0001 (at position 1)"), body
    status, body, _ = await req("POST", CMS, params={"fieldManager": "x" * 128}, json=cm("ok"))
    assert status == 201


async def test_integer_query_parameters_parse_like_go(apiserver: ApiServer, req) -> None:
    for value in ("nan", "inf", "1e3", "0x10", "99999999999999999999"):
        status, body, _ = await req("GET", CMS, params={"watch": "1", "timeoutSeconds": value},
                                    timeout=5)
        assert status == 400 and body["message"].startswith(
            f'strconv.ParseInt: parsing "{value}"'), (value, body)
    for value in ("1_0", "\u0663", "99999999999999999999"):
        status, body, _ = await req("GET", CMS, params={"limit": value})
        assert status == 400 and body["reason"] == "BadRequest", (value, body)


async def test_request_body_that_does_not_decode_is_400(apiserver: ApiServer, req) -> None:
    """aiohttp decodes a request's Content-Encoding; a body that does not decode raised out of
    read_body (500 InternalError). The server closes that connection afterwards."""
    status, body, _ = await req("POST", CMS, data=b"not gzip",
                                headers={"Content-Type": "application/json",
                                         "Content-Encoding": "gzip", "Connection": "close"})
    assert status == 400 and body["reason"] == "BadRequest", body
