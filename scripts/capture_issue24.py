"""Record what a real kube-apiserver sends admission webhooks and answers clients (issue 24).

Writes tests/fixtures/apiserver-1.28-issue24/NNN-title.json: for each request, the webhook
configurations in force, the request, the response (status, ``Warning`` headers, body) and
every AdmissionReview the API server posted to our webhook server (an aiohttp HTTPS server on
127.0.0.1 with a throwaway CA, ``url:`` client configs) with the answer it got. The bearer
token is read from the kubeconfig and written nowhere; ``Audit-Id``/``Date`` are not kept.
Needs a server, so it is not part of ``make test``:

    python scripts/capture_issue24.py [--kubeconfig PATH] [--out DIR]

It creates and deletes only namespaces ``adm-*`` and webhook configurations ``adm-*``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
import json
import re
import ssl
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from watchkeeper.webhooks import pki
from watchkeeper.webhooks.tls import context_from_pem

JSON = dict[str, Any]
SERVER_NOTE = ("kube-apiserver v1.28.7 + kube-controller-manager (all controllers, GC, "
               "namespace deletion), default feature gates")
Behaviour = Callable[[JSON], Awaitable[web.StreamResponse]]


def _allow(review: JSON, **response: Any) -> JSON:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True, **response}}


def _patch(ops: list[JSON]) -> JSON:
    return {"patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(ops).encode()).decode()}


def _label(review: JSON, key: str, value: str) -> list[JSON]:
    """Adds a label (and the labels map when the object has none)."""
    obj = review["request"].get("object") or {}
    if not (obj.get("metadata") or {}).get("labels"):
        return [{"op": "add", "path": "/metadata/labels", "value": {key: value}}]
    return [{"op": "add", "path": f"/metadata/labels/{key.replace('/', '~1')}", "value": value}]


class Hooks:
    """The webhook server: behaviours by path, every call recorded."""

    def __init__(self) -> None:
        now = dt.datetime.now(dt.UTC)
        ca = pki.new_ca("adm-capture", now, dt.timedelta(days=1))
        pair = pki.new_serving(ca, ["127.0.0.1"], now, dt.timedelta(days=1))
        self.ca_bundle = base64.b64encode(ca.cert_pem).decode()
        self.context = context_from_pem(pair.cert_pem, pair.key_pem)
        self.calls: list[JSON] = []
        self.port = 0
        self.runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        review = await request.json()
        path = request.path
        answer = await BEHAVIOURS[path](review)
        body: Any = None
        if isinstance(answer, web.Response) and answer.body is not None:
            raw = answer.body
            text = raw.decode() if isinstance(raw, bytes) else str(raw)
            try:
                body = json.loads(text)
            except ValueError:
                body = text
        self.calls.append({"path": path, "query": request.query_string, "review": review,
                           "answer": body})
        return answer

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=self.context)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"


async def _json(review: JSON, **response: Any) -> web.Response:
    return web.json_response(_allow(review, **response))


async def _deny(review: JSON, result: JSON | None) -> web.Response:
    out = _allow(review)
    out["response"]["allowed"] = False
    if result is not None:
        out["response"]["status"] = result
    return web.json_response(out)


async def _slow(review: JSON) -> web.Response:
    await asyncio.sleep(3)
    return await _json(review)


async def _wrong_uid(review: JSON) -> web.Response:
    out = _allow(review)
    out["response"]["uid"] = "not-the-uid"
    return web.json_response(out)


async def _wrong_version(review: JSON) -> web.Response:
    out = _allow(review)
    out["apiVersion"] = "admission.k8s.io/v1beta1"
    return web.json_response(out)


BEHAVIOURS: dict[str, Behaviour] = {
    "/allow": lambda r: _json(r),
    "/allow-warn": lambda r: _json(r, warnings=["validating says hello"]),
    "/mutate-label": lambda r: _json(r, warnings=["mutating says hello"],
                                     **_patch(_label(r, "stamped", "yes"))),
    "/mutate-a": lambda r: _json(r, **_patch(_label(r, "a", "1"))),
    "/mutate-b": lambda r: _json(r, **_patch(_label(r, "b", "1"))),
    "/bad-patch": lambda r: _json(r, **_patch([{"op": "add", "path": "/metadata/nope/x",
                                                "value": "1"}])),
    "/deny-bare": lambda r: _deny(r, None),
    "/deny-message": lambda r: _deny(r, {"message": "no, not this one"}),
    "/deny-422": lambda r: _deny(r, {"code": 422, "reason": "Invalid", "message": "bad data"}),
    "/deny-reason": lambda r: _deny(r, {"reason": "NotWelcome"}),
    "/slow": _slow,
    "/wrong-uid": _wrong_uid,
    "/wrong-version": _wrong_version,
    "/not-json": lambda r: asyncio.sleep(0, web.Response(text="hello", content_type="text/plain")),
    "/http-500": lambda r: asyncio.sleep(0, web.Response(status=500, text="boom")),
    "/type-no-patch": lambda r: _json(r, patchType="JSONPatch"),
    "/merge-patch": lambda r: _json(r, patchType="Merge", patch=base64.b64encode(
        b'{"metadata":{"labels":{"m":"1"}}}').decode()),
    "/deny-403": lambda r: _deny(r, {"code": 403, "reason": "Forbidden",
                                     "message": "not you"}),
}


class Capture:
    def __init__(self, kubeconfig: str, out: Path) -> None:
        text = Path(kubeconfig).read_text()
        token = re.search(r"^\s*token:\s*(\S+)\s*$", text, re.M)
        ca = re.search(r"certificate-authority-data:\s*(\S+)", text)
        server = re.search(r"server:\s*(\S+)", text)
        assert token and ca and server
        self._token = token.group(1).strip("'\"")
        self.server = server.group(1)
        self.ssl = ssl.create_default_context(cadata=base64.b64decode(ca.group(1)).decode())
        self.out = out
        self.number = 0
        self.hooks = Hooks()
        self.ns = f"adm-rec-{uuid.uuid4().hex[:6]}"
        self.configs: list[JSON] = []

    async def call(self, session: aiohttp.ClientSession, method: str, path: str,
                   body: Any = None, content_type: str = "application/json",
                   query: dict[str, str] | None = None) -> tuple[int, list[str], Any]:
        headers = {"Authorization": f"Bearer {self._token}", "Content-Type": content_type}
        data = None if body is None else json.dumps(body)
        async with session.request(method, self.server + path, data=data, headers=headers,
                                   params=query or {}, ssl=self.ssl) as r:
            text = await r.text()
            try:
                parsed: Any = json.loads(text)
            except ValueError:
                parsed = text
            return r.status, r.headers.getall("Warning", []), parsed

    async def configure(self, session: aiohttp.ClientSession, mutating: list[JSON],
                        validating: list[JSON]) -> None:
        """Replace the adm- webhook configurations with these, then wait for them to apply."""
        await self.unconfigure(session)
        for kind, configs in (("mutating", mutating), ("validating", validating)):
            for config in configs:
                plural = f"{kind}webhookconfigurations"
                status, _, body = await self.call(
                    session, "POST", f"/apis/admissionregistration.k8s.io/v1/{plural}", {
                        "apiVersion": "admissionregistration.k8s.io/v1",
                        "kind": f"{kind.capitalize()}WebhookConfiguration", **config})
                assert status == 201, body
                self.configs.append({"kind": kind, **config})
        await asyncio.sleep(3)  # the API server's webhook informers

    async def unconfigure(self, session: aiohttp.ClientSession) -> None:
        for config in self.configs:
            plural = f"{config['kind']}webhookconfigurations"
            await self.call(session, "DELETE", f"/apis/admissionregistration.k8s.io/v1/{plural}/"
                            + config["metadata"]["name"])
        if self.configs:
            await asyncio.sleep(3)
        self.configs = []

    async def record(self, session: aiohttp.ClientSession, title: str, method: str, path: str,
                     body: Any = None, content_type: str = "application/json",
                     query: dict[str, str] | None = None) -> JSON:
        self.hooks.calls.clear()
        status, warnings, answer = await self.call(session, method, path, body, content_type,
                                                   query)
        self.number += 1
        record = {
            "title": f"{method} {path}: {title}", "server": SERVER_NOTE,
            "webhook_configurations": [
                {**c, "webhooks": [{**w, "clientConfig": {
                    "url": w["clientConfig"]["url"].replace(str(self.hooks.port), "<port>"),
                    **({"caBundle": "<the webhook server's CA>"}
                       if "caBundle" in w["clientConfig"] else {})}}
                    for w in c["webhooks"]]} for c in self.configs],
            "request": {"method": method, "path": path, "query": query or {},
                        "content_type": content_type, "body": body},
            "response": {"status": status, "warnings": warnings, "body": answer},
            "webhook_calls": self.hooks.calls[:],
        }
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:50]
        text = json.dumps(record, indent=1).replace(f":{self.hooks.port}", ":<port>")
        (self.out / f"{self.number:03d}-{slug}.json").write_text(text + "\n")
        print(f"{self.number:03d} {status} {title}")
        return record


def hook(name: str, url: str, ns: str, *, ops: tuple[str, ...] = ("CREATE", "UPDATE", "DELETE"),
         resources: tuple[str, ...] = ("configmaps",), **extra: Any) -> JSON:
    spec: JSON = {
        "name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "clientConfig": {"url": url},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": list(ops),
                   "resources": list(resources)}],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
    }
    spec.update(extra)
    return spec


async def main(kubeconfig: str, out: Path) -> None:
    cap = Capture(kubeconfig, out)
    h = cap.hooks
    await h.start()
    ns = cap.ns
    cms = f"/api/v1/namespaces/{ns}/configmaps"

    def cm(name: str, **data: str) -> JSON:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                "data": data}

    def with_ca(spec: JSON) -> JSON:
        spec["clientConfig"]["caBundle"] = h.ca_bundle
        return spec

    async with aiohttp.ClientSession() as s:
        status, _, body = await cap.call(s, "POST", "/api/v1/namespaces", {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        assert status == 201, body
        try:
            # 1: the order, the objects and options of every operation
            await cap.configure(s, [{"metadata": {"name": "adm-m"}, "webhooks": [with_ca(
                hook("mutate.adm.example.com", h.url("/mutate-label"), ns))]}],
                [{"metadata": {"name": "adm-v"}, "webhooks": [with_ca(
                    hook("validate.adm.example.com", h.url("/allow-warn"), ns))]}])
            await cap.record(s, "create: mutating then validating", "POST", cms,
                             cm("one", mode="fast"), query={"fieldManager": "capture"})
            await cap.record(s, "dry-run create", "POST", cms, cm("dry", mode="fast"),
                             query={"dryRun": "All"})
            await cap.record(s, "generateName create", "POST", cms, {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}})
            status, _, current = await cap.call(s, "GET", f"{cms}/one")
            current["data"] = {"mode": "slow"}
            await cap.record(s, "update", "PUT", f"{cms}/one", current)
            await cap.record(s, "merge patch", "PATCH", f"{cms}/one", {"data": {"x": "y"}},
                             "application/merge-patch+json")
            await cap.record(s, "apply patch", "PATCH", f"{cms}/one",
                             {"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "one"}, "data": {"z": "1"}},
                             "application/apply-patch+yaml",
                             query={"fieldManager": "applier"})
            await cap.record(s, "delete", "DELETE", f"{cms}/one")
            # 2: denials
            for path in ("/deny-bare", "/deny-message", "/deny-422", "/deny-reason"):
                await cap.configure(s, [], [{"metadata": {"name": "adm-v"}, "webhooks": [
                    with_ca(hook("deny.adm.example.com", h.url(path), ns))]}])
                await cap.record(s, f"denied by {path[1:]}", "POST", cms, cm("d"))
            # 3: failures, both policies, and invalid answers
            for path, policy, timeout in (
                    ("/closed", "Fail", None), ("/closed", "Ignore", None),
                    ("/slow", "Fail", 1), ("/slow", "Ignore", 1), ("/wrong-uid", "Fail", None),
                    ("/wrong-version", "Fail", None), ("/not-json", "Fail", None),
                    ("/mutate-a", "Fail", None)):
                url = ("https://127.0.0.1:1/closed" if path == "/closed" else h.url(path))
                extra: JSON = {"failurePolicy": policy}
                if timeout:
                    extra["timeoutSeconds"] = timeout
                await cap.configure(s, [], [{"metadata": {"name": "adm-v"}, "webhooks": [
                    with_ca(hook("fail.adm.example.com", url, ns, **extra))]}])
                await cap.record(s, f"validating {path[1:]} policy {policy}", "POST", cms,
                                 cm(f"f-{policy.lower()}"))
                await cap.record(s, "cleanup", "DELETE", f"{cms}/f-{policy.lower()}")
            # 4: dry run and side effects
            for effects in ("NoneOnDryRun",):  # v1 refuses Unknown and Some (422)
                await cap.configure(s, [{"metadata": {"name": "adm-m"}, "webhooks": [with_ca(
                    hook("effects.adm.example.com", h.url("/allow"), ns,
                         sideEffects=effects))]}], [])
                await cap.record(s, f"dry-run, sideEffects {effects}", "POST", cms,
                                 cm("dry-effects"), query={"dryRun": "All"})
            # 5: reinvocation: a (IfNeeded) before b; b's change makes a run again
            await cap.configure(s, [
                {"metadata": {"name": "adm-a"}, "webhooks": [with_ca(hook(
                    "a.adm.example.com", h.url("/mutate-a"), ns, reinvocationPolicy="IfNeeded"))]},
                {"metadata": {"name": "adm-b"}, "webhooks": [with_ca(hook(
                    "b.adm.example.com", h.url("/mutate-b"), ns))]}], [])
            await cap.record(s, "reinvocation IfNeeded", "POST", cms, cm("re"))
            # 6: a mutating webhook that patches a DELETE
            await cap.configure(s, [{"metadata": {"name": "adm-m"}, "webhooks": [with_ca(
                hook("patch-delete.adm.example.com", h.url("/mutate-a"), ns,
                     ops=("DELETE",)))]}], [])
            await cap.record(s, "mutating webhook patches a delete", "DELETE", f"{cms}/re")
            # 7: a patch that does not apply
            await cap.configure(s, [{"metadata": {"name": "adm-m"}, "webhooks": [with_ca(
                hook("bad-patch.adm.example.com", h.url("/bad-patch"), ns))]}], [])
            await cap.record(s, "a patch that does not apply", "POST", cms, cm("bp"))
            # 8: object selector: called for matching old or new labels only
            await cap.configure(s, [], [{"metadata": {"name": "adm-v"}, "webhooks": [with_ca(
                hook("sel.adm.example.com", h.url("/deny-message"), ns,
                     objectSelector={"matchLabels": {"guard": "on"}}))]}])
            await cap.record(s, "object selector does not match", "POST", cms, cm("plain"))
            await cap.record(s, "object selector matches", "POST", cms,
                             {**cm("guarded"), "metadata": {"name": "guarded",
                                                            "labels": {"guard": "on"}}})
            # 9: more failures: an HTTP 500, no caBundle, odd mutating answers, a 403
            for path, mutating, trusted in (("/http-500", False, True), ("/allow", False, False),
                                            ("/type-no-patch", True, True),
                                            ("/merge-patch", True, True),
                                            ("/deny-403", False, True)):
                spec = hook("odd.adm.example.com", h.url(path), ns)
                if trusted:
                    spec = with_ca(spec)
                config = [{"metadata": {"name": "adm-odd"}, "webhooks": [spec]}]
                await cap.configure(s, config if mutating else [], [] if mutating else config)
                title = path[1:] if trusted else "no caBundle"
                await cap.record(s, f"{'mutating' if mutating else 'validating'} {title}",
                                 "POST", cms, cm("odd"))
            # 10: a cluster-scoped object: the namespaceSelector does not exempt it
            await cap.configure(s, [], [{"metadata": {"name": "adm-v"}, "webhooks": [with_ca(
                hook("cluster.adm.example.com", h.url("/deny-message"), ns,
                     resources=("clusterroles",),
                     objectSelector={"matchLabels": {"adm-capture": "yes"}}) | {"rules": [{
                         "apiGroups": ["rbac.authorization.k8s.io"], "apiVersions": ["v1"],
                         "operations": ["CREATE"], "resources": ["clusterroles"]}]})]}])
            await cap.record(s, "cluster-scoped: namespaceSelector ignored", "POST",
                             "/apis/rbac.authorization.k8s.io/v1/clusterroles", {
                                 "apiVersion": "rbac.authorization.k8s.io/v1",
                                 "kind": "ClusterRole", "rules": [],
                                 "metadata": {"name": "adm-capture",
                                              "labels": {"adm-capture": "yes"}}})
        finally:
            await cap.unconfigure(s)
            await cap.call(s, "DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterroles/"
                           "adm-capture")
            await cap.call(s, "DELETE", f"/api/v1/namespaces/{ns}")
    assert h.runner is not None
    await h.runner.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", default="/tmp/realk8s/kubeconfig-admin")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1]
                        / "tests" / "fixtures" / "apiserver-1.28-issue24")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    asyncio.run(main(args.kubeconfig, args.out))
