"""A real HTTPS admission webhook server on 127.0.0.1 for the simulator's tests: answers by
path, records every AdmissionReview it receives (with the ``?timeout=`` query)."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from watchkeeper.webhooks import pki
from watchkeeper.webhooks.tls import context_from_pem

JSON = dict[str, Any]
#: the review received -> the answer (a JSON body, or a ready response)
Answer = Callable[[JSON], Awaitable["JSON | web.StreamResponse"]]


def allow(review: JSON, **response: Any) -> JSON:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True, **response}}


def deny(review: JSON, status: JSON | None = None, **response: Any) -> JSON:
    out = allow(review, **response)
    out["response"]["allowed"] = False
    if status is not None:
        out["response"]["status"] = status
    return out


def patch(ops: list[JSON]) -> JSON:
    """The response fields of a JSONPatch."""
    return {"patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(ops).encode()).decode()}


def add_label(review: JSON, key: str, value: str) -> list[JSON]:
    """Ops adding a label (and the labels map when the object has none)."""
    obj = review["request"].get("object") or {}
    if not (obj.get("metadata") or {}).get("labels"):
        return [{"op": "add", "path": "/metadata/labels", "value": {key: value}}]
    return [{"op": "add", "path": f"/metadata/labels/{key}", "value": value}]


@dataclass
class Call:
    path: str
    query: str
    review: JSON
    at: float = field(default_factory=time.monotonic)  # when it arrived

    @property
    def request(self) -> JSON:
        req: JSON = self.review["request"]
        return req


@dataclass
class HookServer:
    """Behaviours by path (``answers``); ``calls`` in the order they arrived."""

    answers: dict[str, Answer] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    ca_bundle: str = ""
    port: int = 0

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def client_config(self, path: str) -> JSON:
        return {"url": self.url(path), "caBundle": self.ca_bundle}

    def paths(self) -> list[str]:
        return [c.path for c in self.calls]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        review = await request.json()
        self.calls.append(Call(request.path, request.query_string, review))
        answer = await self.answers[request.path](review)
        if isinstance(answer, web.StreamResponse):
            return answer
        return web.json_response(answer)


async def answer(value: JSON | web.StreamResponse) -> JSON | web.StreamResponse:
    return value


@asynccontextmanager
async def hook_server() -> AsyncIterator[HookServer]:
    """A started server with a throwaway CA (its caBundle in ``ca_bundle``)."""
    now = dt.datetime.now(dt.UTC)
    ca = pki.new_ca("test-hooks", now, dt.timedelta(days=1))
    pair = pki.new_serving(ca, ["127.0.0.1"], now, dt.timedelta(days=1))
    server = HookServer(ca_bundle=base64.b64encode(ca.cert_pem).decode())
    app = web.Application()
    app.router.add_post("/{tail:.*}", server._handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0,
                       ssl_context=context_from_pem(pair.cert_pem, pair.key_pem))
    await site.start()
    assert site._server is not None
    server.port = site._server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        await runner.cleanup()


def webhook(name: str, config: JSON, *, operations: tuple[str, ...] = ("CREATE", "UPDATE"),
            resources: tuple[str, ...] = ("configmaps",), group: str = "",
            **extra: Any) -> JSON:
    spec: JSON = {"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
                  "clientConfig": config,
                  "rules": [{"apiGroups": [group], "apiVersions": ["*"],
                             "operations": list(operations), "resources": list(resources)}]}
    spec.update(extra)
    return spec


def configuration(mutating: bool, name: str, *hooks: JSON) -> JSON:
    kind = "MutatingWebhookConfiguration" if mutating else "ValidatingWebhookConfiguration"
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": name}, "webhooks": list(hooks)}


async def slow(review: JSON, seconds: float) -> JSON:
    await asyncio.sleep(seconds)
    return allow(review)
