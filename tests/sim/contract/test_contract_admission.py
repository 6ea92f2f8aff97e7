"""The simulator against the admission exchanges recorded on kube-apiserver 1.28.7
(tests/fixtures/apiserver-1.28-issue24, made by scripts/capture_issue24.py).

The recorded requests are replayed in order on one simulator, with the same webhook
configurations pointing at a webhook server that answers as the recording's did; every
answer (status, ``Warning`` headers, the Status of a refusal, the stored object) and every
AdmissionReview the webhooks received must be the recorded one, up to what differs on
every run (uids, times, resourceVersions, the generated name's suffix, the port)."""

from __future__ import annotations

import asyncio
import base64
import difflib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from watchkeeper_sim import ApiServer

from ..hookserver import HookServer, add_label, allow, deny, hook_server, patch

pytestmark = pytest.mark.realtime
REF = Path(__file__).resolve().parents[2] / "fixtures" / "apiserver-1.28-issue24"
JSON = dict[str, Any]
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


async def _slow(review: JSON) -> JSON:
    await asyncio.sleep(3)
    return allow(review)


def _wrong_uid(review: JSON) -> JSON:
    out = allow(review)
    out["response"]["uid"] = "not-the-uid"
    return out


async def _answer(path: str, review: JSON) -> JSON | web.StreamResponse:
    """What scripts/capture_issue24.py's webhook server answered on each path."""
    simple: dict[str, Any] = {
        "/allow": lambda r: allow(r),
        "/allow-warn": lambda r: allow(r, warnings=["validating says hello"]),
        "/mutate-label": lambda r: allow(r, warnings=["mutating says hello"],
                                         **patch(add_label(r, "stamped", "yes"))),
        "/mutate-a": lambda r: allow(r, **patch(add_label(r, "a", "1"))),
        "/mutate-b": lambda r: allow(r, **patch(add_label(r, "b", "1"))),
        "/bad-patch": lambda r: allow(r, **patch([{"op": "add", "path": "/metadata/nope/x",
                                                   "value": "1"}])),
        "/deny-bare": lambda r: deny(r),
        "/deny-message": lambda r: deny(r, {"message": "no, not this one"}),
        "/deny-422": lambda r: deny(r, {"code": 422, "reason": "Invalid",
                                        "message": "bad data"}),
        "/deny-reason": lambda r: deny(r, {"reason": "NotWelcome"}),
        "/wrong-uid": _wrong_uid,
        "/wrong-version": lambda r: {**allow(r), "apiVersion": "admission.k8s.io/v1beta1"},
        "/not-json": lambda r: web.Response(text="hello", content_type="text/plain"),
        "/http-500": lambda r: web.Response(status=500, text="boom"),
        "/type-no-patch": lambda r: allow(r, patchType="JSONPatch"),
        "/merge-patch": lambda r: allow(r, patchType="Merge", patch=base64.b64encode(
            b'{"metadata":{"labels":{"m":"1"}}}').decode()),
        "/deny-403": lambda r: deny(r, {"code": 403, "reason": "Forbidden",
                                        "message": "not you"}),
    }
    if path == "/slow":
        return await _slow(review)
    answer: JSON | web.StreamResponse = simple[path](review)
    return answer


def _strip_fields(value: Any) -> Any:
    """Without managedFields: after an update by a second manager the simulator drops the
    first one's entry that kube-apiserver keeps as ``f:data: {}`` (a field-tracking
    difference of its own, admission aside: the create's entries compare equal)."""
    if isinstance(value, dict):
        return {k: _strip_fields(v) for k, v in value.items() if k != "managedFields"}
    if isinstance(value, list):
        return [_strip_fields(v) for v in value]
    return value


def _omit_empty_data(value: Any) -> Any:
    """Without an empty ConfigMap ``data`` and the managedFields entry that owns only it:
    kube-apiserver drops ``data: {}`` (omitempty), the simulator keeps it (a difference of
    its own, admission aside)."""
    if isinstance(value, dict):
        out = {k: _omit_empty_data(v) for k, v in value.items()
               if not (k in ("data", "f:data") and v == {})}
        if isinstance(out.get("managedFields"), list):
            out["managedFields"] = [e for e in out["managedFields"]
                                    if e.get("fieldsV1")]
            if not out["managedFields"]:
                del out["managedFields"]
        return out
    if isinstance(value, list):
        return [_omit_empty_data(v) for v in value]
    return value


def _norm(value: Any, port: int, fields: bool = True) -> Any:
    value = _omit_empty_data(value if fields else _strip_fields(value))
    text = STAMP.sub("TIME", json.dumps(value, sort_keys=True))
    if port:
        text = text.replace(f":{port}", ":<port>")
    text = UUID.sub("UID", text)
    text = re.sub(r'"resourceVersion": "\d+"', '"resourceVersion": "RV"', text)
    text = re.sub(r"gen-[a-z0-9]{5}", "gen-XXXXX", text)
    return json.loads(text)


def _diff(title: str, got: Any, want: Any) -> list[str]:
    """A unified diff of the two as indented JSON (simulator: +), [] when equal."""
    if got == want:
        return []
    lines = difflib.unified_diff(json.dumps(want, indent=1).splitlines(),
                                 json.dumps(got, indent=1).splitlines(), "recorded",
                                 "simulator", lineterm="", n=2)
    return [title, *lines]


def _records() -> list[tuple[str, JSON]]:
    return [(p.name, json.loads(p.read_text())) for p in sorted(REF.glob("*.json"))]


@pytest.fixture
async def world() -> AsyncIterator[tuple[ApiServer, HookServer, aiohttp.ClientSession]]:
    async with ApiServer() as srv, hook_server() as hooks, aiohttp.ClientSession() as s:
        for path in ("/allow", "/allow-warn", "/mutate-label", "/mutate-a", "/mutate-b",
                     "/bad-patch", "/deny-bare", "/deny-message", "/deny-422", "/deny-reason",
                     "/slow", "/wrong-uid", "/wrong-version", "/not-json", "/http-500",
                     "/type-no-patch", "/merge-patch", "/deny-403"):
            hooks.answers[path] = lambda r, p=path: _answer(p, r)
        yield srv, hooks, s


def _configure(srv: ApiServer, hooks: HookServer, configs: list[JSON], current: list[str]
               ) -> list[str]:
    """Replace the stored configurations by the recording's (the port and CA ours)."""
    for name in current:
        kind, _, cname = name.partition("/")
        srv.delete_object("admissionregistration.k8s.io/v1", kind, cname)
    names = []
    for config in configs:
        kind = f"{config['kind'].capitalize()}WebhookConfiguration"
        text = json.dumps(config).replace("<port>", str(hooks.port))
        body = json.loads(text.replace("<the webhook server's CA>", hooks.ca_bundle))
        srv.create_object({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                           "metadata": body["metadata"], "webhooks": body["webhooks"]})
        names.append(f"{kind}/{body['metadata']['name']}")
    return names


async def test_the_recorded_admission_exchanges(
    world: tuple[ApiServer, HookServer, aiohttp.ClientSession],
) -> None:
    srv, hooks, session = world
    records = _records()
    assert len(records) >= 39
    current: list[str] = []
    configured: Any = None
    differences: list[str] = []
    for name, record in records:
        if record["webhook_configurations"] != configured:
            configured = record["webhook_configurations"]
            current = _configure(srv, hooks, configured, current)
        request = record["request"]
        body = request["body"]
        parts = request["path"].split("/")
        namespace = parts[4] if parts[1:4] == ["api", "v1", "namespaces"] else ""
        if namespace and srv.store.peek(srv.registry.ns_type(), "", namespace) is None:
            # one per capture run (files 001-033, 034-039)
            srv.create_object({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": namespace}})
        if request["method"] == "PUT":  # written against the recorded object: ours instead
            got = srv.get_object("v1", body["kind"], body["metadata"]["name"],
                                 namespace=namespace)
            body = {**body, "metadata": got["metadata"]}
        hooks.calls.clear()
        headers = {"Authorization": f"Bearer {srv.token()}",
                   "Content-Type": request["content_type"]}
        async with session.request(
                request["method"], srv.url + request["path"], params=request["query"],
                data=None if body is None else json.dumps(body), headers=headers) as r:
            answer = {"status": r.status, "warnings": r.headers.getall("Warning", []),
                      "body": await r.json()}
        fields = request["method"] == "POST"  # a new object: one manager
        differences += _diff(f"{name} response", _norm(answer, hooks.port, fields),
                             _norm(record["response"], 0, fields))
        # the capture's server recorded a call once answered: never the one that timed out
        calls = [{"path": c.path, "query": c.query, "review": c.review} for c in hooks.calls
                 if c.path != "/slow"]
        recorded = [{k: c[k] for k in ("path", "query", "review")}
                    for c in record["webhook_calls"]]
        differences += _diff(f"{name} webhook calls", _norm(calls, hooks.port, fields),
                             _norm(recorded, 0, fields))
    assert not differences, "\n".join(differences)
