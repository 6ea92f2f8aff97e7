"""A CRD conversion webhook over real HTTPS on 127.0.0.1 for the simulator's tests, and the
issue 24 reference files it is held to (tests/fixtures/apiserver-1.28-issue24-conversion,
recorded by scripts/capture_issue24_conversion.py with the same webhook behaviours)."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import re
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import trustme
from aiohttp import web

REF = Path(__file__).resolve().parents[2] / "fixtures" / "apiserver-1.28-issue24-conversion"
GROUP = "conv-cases.example.com"
NS = "conv-1"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
JSON = dict[str, Any]


def load(number: int) -> JSON:
    (path,) = REF.glob(f"{number:03d}-*.json")
    data: JSON = json.loads(path.read_text())
    return data


def path(version: str, name: str = "") -> str:
    return f"/apis/{GROUP}/{version}/namespaces/{NS}/gadgets" + (f"/{name}" if name else "")


def norm(text: str) -> str:
    """uids, the webhook's port: what differs between two runs."""
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uid>",
                  text)
    return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", text)


def convert(obj: JSON, desired: str, *, sized: str = "/v1", replicated: str = "/v2") -> JSON:
    """The captures' conversion: spec.size at the version ending in ``sized`` <-> spec.replicas
    at the one ending in ``replicated`` (this capture's v1 and v2 by default)."""
    out = copy.deepcopy(obj)
    spec = out.get("spec") or {}
    if desired.endswith(replicated) and "size" in spec:
        spec["replicas"] = spec.pop("size")
    if desired.endswith(sized) and "replicas" in spec:
        spec["size"] = spec.pop("replicas")
    out["apiVersion"] = desired
    return out


class Hook:
    """The conversion webhook: answers as ``mode`` says (the capture's modes) and keeps
    every request it gets (``received``: path with query, headers, ConversionReview)."""

    def __init__(self) -> None:
        self.ca = trustme.CA()
        self.mode = "ok"
        self.received: list[JSON] = []
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._port = 0

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca.cert_pem.bytes()).decode()

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/convert", self._handle)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ca.issue_cert("127.0.0.1").configure_cert(context)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self._port, ssl_context=context)
        await site.start()
        server = site._server
        assert server is not None
        self._port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"https://127.0.0.1:{self._port}/convert"

    async def stop(self) -> None:
        """Close the port: it refuses connections (``start`` reopens the same one)."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.Response:
        review: JSON = await request.json()
        self.received.append({"path": request.path_qs, "headers": {
            k: request.headers[k] for k in ("User-Agent", "Accept", "Content-Type")},
            "body": review})
        if self.mode == "slow":
            await asyncio.sleep(5)
        if self.mode == "http500":
            return web.json_response({"message": "boom"}, status=500)
        return web.json_response(self.answer(review))

    def answer(self, review: JSON) -> JSON:
        req = review["request"]
        desired = req["desiredAPIVersion"]
        objects = [convert(o, desired) for o in req["objects"]]
        result: JSON = {"status": "Success"}
        uid = req["uid"]
        mode = self.mode
        if mode == "wrong-uid":
            uid = "00000000-0000-0000-0000-000000000000"
        elif mode == "failure":
            result = {"status": "Failure", "message": "gadgets cannot be converted today"}
        elif mode == "failure-bare":
            result = {"status": "Failure"}
        elif mode == "none":
            objects = []
        for o, src in zip(objects, req["objects"], strict=False):
            if mode == "rename":
                o["metadata"]["name"] = "renamed"
            elif mode == "same-version":
                o["apiVersion"] = src["apiVersion"]
            elif mode == "kind":
                o["kind"] = "Widget"
            elif mode == "meta":  # labels kept, the rest restored
                o["metadata"].setdefault("labels", {})["converted"] = "yes"
                o["metadata"]["generation"] = 99
                o["metadata"]["finalizers"] = ["conv-cases.example.com/sneaky"]
            elif mode == "bad-label":
                o["metadata"].setdefault("labels", {})["bad label"] = "x"
            elif mode == "no-metadata":
                del o["metadata"]
        return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "response": {"uid": uid, "convertedObjects": objects, "result": result}}

    def reviews(self) -> list[tuple[str, list[tuple[str, str, Any]]]]:
        """(desiredAPIVersion, [(apiVersion, name, spec)]) of each review received."""
        out = []
        for r in self.received:
            req = r["body"]["request"]
            out.append((req["desiredAPIVersion"], [
                (o["apiVersion"], o["metadata"]["name"], o.get("spec"))
                for o in req["objects"]]))
        return out


async def running_hook() -> AsyncIterator[Hook]:
    hook = Hook()
    await hook.start()
    try:
        yield hook
    finally:
        await hook.stop()


def crd(hook: Hook, storage: str = "v1", review_versions: list[str] | None = None) -> JSON:
    """The capture's CRD: v1 (spec.size) and v2 (spec.replicas), converted by ``hook``."""
    def schema(field: str) -> JSON:
        return {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
            "type": "object", "properties": {field: {"type": "integer"}}}}}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{GROUP}"},
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [
                {"name": "v1", "served": True, "storage": storage == "v1",
                 "schema": schema("size")},
                {"name": "v2", "served": True, "storage": storage == "v2",
                 "schema": schema("replicas")}],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": review_versions or ["v1"],
                "clientConfig": {"url": hook.url, "caBundle": hook.ca_bundle}}},
        }}


def gadget(version: str, name: str, n: int) -> JSON:
    spec = {"size": n} if version == "v1" else {"replicas": n}
    return {"apiVersion": f"{GROUP}/{version}", "kind": "Gadget",
            "metadata": {"name": name}, "spec": spec}
