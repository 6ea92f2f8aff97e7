"""The simulator against admission and conversion webhooks recorded together on
kube-apiserver 1.28.7 (tests/fixtures/apiserver-1.28-issue24-combined, made by
scripts/capture_issue24_combined.py).

A CRD of two versions (v1alpha1 served, v1 stored, a conversion webhook renaming
``spec.size`` <-> ``spec.replicas``), a mutating webhook (label, default ``spec.tier``) and a
validating one (size at most 10), with rules for every version, for v1 with matchPolicy
Equivalent and for v1 with Exact; every request is made at v1alpha1. The recorded requests
are replayed in order on one simulator; every answer and every AdmissionReview (at which
version object and oldObject are, kind and requestKind) must be the recorded one. The
ConversionReviews are held less tightly: a real server converts in an order of its own, more
often than needed in places (its retries) and less in others (its watch cache keeps objects
at the version they were read at), so each one the simulator sends must be a conversion the
real server made during the recording (same desired version, same spec and labels), and a
request whose object the real server converted is converted for by the simulator too
(but a DELETE no webhook sees: the real server reads the object at the request's version
and answers a Status, the simulator converts nothing)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from watchkeeper_sim import ApiServer

from ..hookserver import HookServer, add_label, allow, deny, hook_server, patch
from ._conversion import convert
from .test_contract_admission import _configure, _diff, _norm

pytestmark = pytest.mark.realtime
REF = Path(__file__).resolve().parents[2] / "fixtures" / "apiserver-1.28-issue24-combined"
GROUP = "combo-cases.example.com"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
JSON = dict[str, Any]


async def _conversion(review: JSON) -> JSON:
    req = review["request"]
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": req["uid"], "result": {"status": "Success"},
                         "convertedObjects": [convert(o, req["desiredAPIVersion"],
                                                      sized="/v1alpha1", replicated="/v1")
                                              for o in req["objects"]]}}


async def _mutate(review: JSON) -> JSON:
    obj = review["request"].get("object")
    if obj is None:
        return allow(review)
    ops = add_label(review, "stamped", "yes")
    if "tier" not in (obj.get("spec") or {}):
        ops.append({"op": "add", "path": "/spec/tier", "value": "standard"})
    return allow(review, **patch(ops))


async def _validate(review: JSON) -> JSON:
    obj = review["request"].get("object")
    if obj is not None:
        field = "size" if obj["apiVersion"].endswith("/v1alpha1") else "replicas"
        value = (obj.get("spec") or {}).get(field, 0)
        if value > 10:
            return deny(review, {"message": f"spec.{field} must be at most 10, not {value}"})
    return allow(review)


def _crd(hooks: HookServer) -> JSON:
    def schema(field: str) -> JSON:
        return {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
            "type": "object", "properties": {field: {"type": "integer"},
                                             "tier": {"type": "string"}}}}}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{GROUP}"},
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {"name": "v1alpha1", "served": True, "storage": False,
                 "schema": schema("size")},
                {"name": "v1", "served": True, "storage": True, "schema": schema("replicas")}],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": hooks.client_config("/convert")}},
        }}


def _without_fields(value: Any) -> Any:
    """Without managedFields, which this recording is not about."""
    if isinstance(value, dict):
        return {k: _without_fields(v) for k, v in value.items() if k != "managedFields"}
    if isinstance(value, list):
        return [_without_fields(v) for v in value]
    return value


def _conversions(calls: list[JSON]) -> list[str]:
    """Each ConversionReview as text: the desired version, each object's version, spec and
    labels."""
    out = []
    for call in calls:
        req = call["review"]["request"]
        objects = [[o["apiVersion"], o.get("spec"), (o.get("metadata") or {}).get("labels")]
                   for o in req["objects"]]
        out.append(json.dumps([req["desiredAPIVersion"], objects], sort_keys=True))
    return out


@pytest.fixture
async def world() -> AsyncIterator[tuple[ApiServer, HookServer, aiohttp.ClientSession]]:
    async with ApiServer() as srv, hook_server() as hooks, aiohttp.ClientSession() as s:
        hooks.answers.update({"/convert": _conversion, "/mutate-widget": _mutate,
                              "/validate-widget": _validate})
        yield srv, hooks, s


async def test_the_recorded_admission_and_conversion_exchanges(
    world: tuple[ApiServer, HookServer, aiohttp.ClientSession],
) -> None:
    srv, hooks, session = world
    records = [(p.name, json.loads(p.read_text())) for p in sorted(REF.glob("*.json"))]
    assert len(records) == 21
    auth = {"Authorization": f"Bearer {srv.token()}"}
    namespace = records[0][1]["request"]["path"].split("/")[5]
    srv.create_object({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": namespace}})
    async with session.post(srv.url + CRDS, json=_crd(hooks), headers=auth) as r:
        assert r.status == 201, await r.text()
    base = f"{srv.url}/apis/{GROUP}/v1/namespaces/{namespace}/widgets"
    async with asyncio.timeout(10):  # until the CRD is served
        while True:
            async with session.get(base, headers=auth) as r:
                if r.status == 200:
                    break
            await asyncio.sleep(0.05)
    converted = {c for _, record in records for c in _conversions(
        [c for c in record["webhook_calls"] if c["path"] == "/convert"])}
    current: list[str] = []
    configured: Any = None
    differences: list[str] = []
    for name, record in records:
        if record["webhook_configurations"] != configured:
            configured = record["webhook_configurations"]
            current = _configure(srv, hooks, configured, current)
        request = record["request"]
        body = request["body"]
        if request["method"] == "PUT":  # written against the recorded object: ours instead
            async with session.get(srv.url + request["path"], headers=auth) as r:
                body = {**body, "metadata": (await r.json())["metadata"]}
        hooks.calls.clear()
        async with session.request(
                request["method"], srv.url + request["path"], params=request["query"],
                data=None if body is None else json.dumps(body),
                headers={**auth, "Content-Type": request["content_type"]}) as r:
            answer = {"status": r.status, "warnings": r.headers.getall("Warning", []),
                      "body": await r.json()}
        differences += _diff(f"{name} response", _norm(_without_fields(answer), hooks.port),
                             _norm(_without_fields(record["response"]), 0))
        calls = [{"path": c.path, "query": c.query, "review": c.review} for c in hooks.calls]
        admitted = [c for c in calls if c["path"] != "/convert"]
        recorded = [{k: c[k] for k in ("path", "query", "review")}
                    for c in record["webhook_calls"] if c["path"] != "/convert"]
        differences += _diff(f"{name} admission reviews",
                             _norm(_without_fields(admitted), hooks.port),
                             _norm(_without_fields(recorded), 0))
        ours = _conversions([c for c in calls if c["path"] == "/convert"])
        differences += [f"{name}: a conversion the real server never made: {c}"
                        for c in ours if c not in converted]
        theirs = [c["review"]["request"] for c in record["webhook_calls"]
                  if c["path"] == "/convert"]
        name_of = request["path"].rsplit("/", 1)[-1] if request["method"] != "POST" \
            else body["metadata"]["name"]
        if not ours and request["method"] != "DELETE" and any(
                o["metadata"]["name"] == name_of for c in theirs for o in c["objects"]):
            differences.append(f"{name}: no ConversionReview, the real server sent some")
    assert not differences, "\n".join(differences)
