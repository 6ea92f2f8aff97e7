"""Record a real kube-apiserver calling a CRD conversion webhook (issue 24, item 6).

Writes tests/fixtures/apiserver-1.28-issue24-conversion/NNN-title.json in the record format
of scripts/capture_issue22.py (curl, no token anywhere, ``Audit-Id``/``Date`` placeholders),
each file with ``webhook_received``: the ConversionReviews the API server posted to the
webhook during that exchange (path with query, headers, body), in order. The webhook is a
small HTTPS server on 127.0.0.1 (a trustme CA as the CRD's caBundle) whose answer is switched
per exchange (a correct conversion, a wrong uid, a Failure result, a changed name, ...), or
closed ("down"). Needs a server, so it is not part of ``make test``:

    python scripts/capture_issue24_conversion.py [--server https://127.0.0.1:6443] [--out DIR]

It creates and deletes only namespace ``conv-1`` and CRD group ``conv-cases.example.com``.
"""

from __future__ import annotations

import argparse
import base64
import json
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import trustme

sys.path.insert(0, str(Path(__file__).resolve().parent))
from capture_issue22 import MERGE, Capture, wait_until

JSONish = dict[str, Any]
GROUP = "conv-cases.example.com"
NS = "conv-1"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CRD_NAME = f"gadgets.{GROUP}"


def path(version: str, name: str = "") -> str:
    return f"/apis/{GROUP}/{version}/namespaces/{NS}/gadgets" + (f"/{name}" if name else "")


def convert(obj: JSONish, desired: str) -> JSONish:
    """v1 spec.size <-> v2 spec.replicas; everything else as it is."""
    out = json.loads(json.dumps(obj))
    spec = out.get("spec") or {}
    if desired.endswith("/v2") and "size" in spec:
        spec["replicas"] = spec.pop("size")
    if desired.endswith("/v1") and "replicas" in spec:
        spec["size"] = spec.pop("replicas")
    out["apiVersion"] = desired
    return out


class Hook:
    """The conversion webhook: answers as ``mode`` says and logs every review it gets."""

    def __init__(self) -> None:
        self.ca = trustme.CA()
        self.cert = self.ca.issue_cert("127.0.0.1")
        self.mode = "ok"
        self.received: list[JSONish] = []
        self.port = 0
        self.server: ThreadingHTTPServer | None = None

    def start(self) -> None:
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                review = json.loads(raw)
                hook.received.append({
                    "path": self.path,
                    "headers": {k: v for k, v in self.headers.items()
                                if k.lower() in ("content-type", "accept", "user-agent")},
                    "body": review})
                status, answer = hook.answer(review)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.cert.configure_cert(context)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        self.port = server.server_address[1]
        self.server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca.cert_pem.bytes()).decode()

    def answer(self, review: JSONish) -> tuple[int, JSONish]:
        req = review["request"]
        desired = req["desiredAPIVersion"]
        objects = [convert(o, desired) for o in req["objects"]]
        result: JSONish = {"status": "Success"}
        uid = req["uid"]
        mode = self.mode
        if mode == "slow":
            time.sleep(40)
        if mode == "http500":
            return 500, {"message": "boom"}
        if mode == "wrong-uid":
            uid = "00000000-0000-0000-0000-000000000000"
        if mode == "failure":
            result = {"status": "Failure", "message": "gadgets cannot be converted today"}
        if mode == "failure-bare":
            result = {"status": "Failure"}
        if mode == "none":
            objects = []
        if mode == "rename":
            for o in objects:
                o["metadata"]["name"] = "renamed"
        if mode == "same-version":
            for o, src in zip(objects, req["objects"], strict=True):
                o["apiVersion"] = src["apiVersion"]
        if mode == "kind":
            for o in objects:
                o["kind"] = "Widget"
        if mode == "meta":  # labels/annotations kept, the rest restored
            for o in objects:
                meta = o["metadata"]
                meta.setdefault("labels", {})["converted"] = "yes"
                meta["generation"] = 99
                meta["finalizers"] = ["conv-cases.example.com/sneaky"]
        if mode == "bad-label":
            for o in objects:
                o["metadata"].setdefault("labels", {})["bad label"] = "x"
        if mode == "no-metadata":
            for o in objects:
                del o["metadata"]
        return 200, {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                     "response": {"uid": uid, "convertedObjects": objects, "result": result}}


def _joined(lines: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Watch lines, a pretty-printed object (an error answer) joined into one."""
    out: list[tuple[str, float]] = []
    buf = ""
    for line, at in lines:
        buf += line
        try:
            json.loads(buf)
        except ValueError:
            continue
        out.append((buf, at))
        buf = ""
    if buf:
        out.append((json.dumps({"unparsed": buf}), lines[-1][1]))
    return out


class HookCapture(Capture):
    """Capture whose every file also holds the reviews the webhook got during it."""

    hook: Hook

    def _write(self, record: tuple[str, str], req: JSONish, response: JSONish, notes: Any,
               elapsed: float | None, **extra: Any) -> None:
        time.sleep(0.2)  # a watch's last conversions
        extra["webhook_mode"] = self.hook.mode
        extra["webhook_received"] = list(self.hook.received)
        super()._write(record, req, response, notes, elapsed, **extra)
        self.hook.received.clear()

    def rec(self, method: str, p: str, body: Any = None, title: str = "",
            demonstrates: str = "", **kw: Any) -> tuple[int, Any]:
        self.hook.received.clear()
        return self.call(method, p, body, record=(title, demonstrates), **kw)


def gadget(version: str, name: str, n: int, **meta: Any) -> JSONish:
    spec = {"size": n} if version == "v1" else {"replicas": n}
    return {"apiVersion": f"{GROUP}/{version}", "kind": "Gadget",
            "metadata": {"name": name, **meta}, "spec": spec}


def crd_body(hook: Hook, storage: str = "v1", review_versions: list[str] | None = None
             ) -> JSONish:
    def schema(field: str) -> JSONish:
        return {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
            "type": "object", "properties": {field: {"type": "integer"}}}}}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
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
                "clientConfig": {"url": f"https://127.0.0.1:{hook.port}/convert",
                                 "caBundle": hook.ca_bundle}}},
        }}


def cleanup(cap: HookCapture) -> None:
    cap.call("DELETE", f"{CRDS}/{CRD_NAME}")
    cap.call("DELETE", f"/api/v1/namespaces/{NS}")
    wait_until(lambda: cap.call("GET", f"/api/v1/namespaces/{NS}")[0] == 404, 120)
    wait_until(lambda: cap.call("GET", f"{CRDS}/{CRD_NAME}")[0] == 404, 120)


def established(cap: HookCapture) -> None:
    def ready() -> bool:
        _, body = cap.call("GET", f"{CRDS}/{CRD_NAME}")
        return any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in (body.get("status") or {}).get("conditions") or [])
    wait_until(ready)
    time.sleep(3)


def scenario(cap: HookCapture) -> None:
    hook = cap.hook
    cap.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": NS}})
    bad = crd_body(hook, review_versions=["v9"])
    cap.rec("POST", CRDS, bad, "a crd whose conversionReviewVersions lack v1",
            "conversionReviewVersions must include v1 or v1beta1 (422)")
    cap.rec("POST", CRDS, crd_body(hook), "the crd: v1 storage, v2 by webhook",
            "a two-version CRD whose conversion is a webhook on 127.0.0.1")
    established(cap)
    hook.received.clear()
    same = "same version as stored: no webhook call"
    cap.rec("POST", path("v1"), gadget("v1", "g-a", 3), "create g-a at v1", same)
    cap.rec("GET", path("v1", "g-a"), None, "get g-a at v1", same)
    cap.rec("GET", path("v2", "g-a"), None, "get g-a at v2",
            "a read at another version: one ConversionReview (v1 -> v2)")
    cap.rec("POST", path("v2"), gadget("v2", "g-b", 5), "create g-b at v2",
            "a write at the non-storage version: converted to v1 to store, back to v2 "
            "for the answer")
    cap.rec("GET", path("v1", "g-b"), None, "get g-b at v1",
            "what the write at v2 stored: v1, no call")
    cap.rec("GET", path("v2"), None, "list at v2", "a list at another version")
    cap.rec("GET", path("v1"), None, "list at v1", same)
    with cap.watch(path("v2"), {"watch": "1", "resourceVersion": "0", "timeoutSeconds": "4"},
                   record=("watch at v2", "a watch at another version: its events "
                           "converted")) as w:
        w.wait_lines(2, 10)
        w.act("create g-c at v1")
        cap.call("POST", path("v1"), gadget("v1", "g-c", 7))
        w.wait_lines(3, 10)
        w.finish(8)
        w.lines = _joined(w.lines)
    _, got = cap.call("GET", path("v2", "g-b"))
    got["spec"]["replicas"] = 6
    cap.rec("PUT", path("v2", "g-b"), got, "update g-b at v2",
            "an update at the non-storage version")
    cap.rec("PATCH", path("v2", "g-b"), {"spec": {"replicas": 8}}, "merge patch g-b at v2",
            "a patch at the non-storage version", ctype=MERGE)
    cap.rec("DELETE", path("v2", "g-c"), None, "delete g-c at v2",
            "a delete at the non-storage version answers the object at v2")

    for mode, what in (
            ("wrong-uid", "the response's uid is not the request's"),
            ("failure", "result Failure with a message"),
            ("failure-bare", "result Failure without a message"),
            ("none", "no converted objects"),
            ("rename", "a converted object with another name"),
            ("same-version", "a converted object not at the desired version"),
            ("kind", "a converted object of another kind"),
            ("meta", "labels kept, other metadata changes restored"),
            ("bad-label", "an invalid label"),
            ("no-metadata", "a converted object without metadata"),
            ("http500", "the webhook answers HTTP 500")):
        hook.mode = mode
        cap.rec("GET", path("v2", "g-a"), None, f"get g-a at v2, webhook {mode}", what)
    hook.mode = "failure"
    cap.rec("GET", path("v2"), None, "list at v2, webhook failure", "a list whose conversion "
            "fails")
    cap.rec("POST", path("v2"), gadget("v2", "g-d", 1), "create g-d at v2, webhook failure",
            "a write whose conversion fails")
    cap.rec("POST", path("v1"), gadget("v1", "g-e", 1), "create g-e at v1, webhook failure",
            "a write at the storage version calls nothing")
    with cap.watch(path("v2"), {"watch": "1", "resourceVersion": "0", "timeoutSeconds": "4"},
                   record=("watch at v2, webhook failure", "a watch whose conversion "
                           "fails")) as w:
        w.wait_lines(1, 6)
        w.finish(8)
        w.lines = _joined(w.lines)
    hook.mode = "rename"
    cap.rec("POST", path("v2"), gadget("v2", "g-f", 1), "create g-f at v2, webhook rename",
            "a write whose converted object has another name")
    hook.mode = "ok"
    hook.stop()
    cap.rec("GET", path("v2", "g-a"), None, "get g-a at v2, webhook down",
            "the webhook's port refuses connections")
    cap.rec("POST", path("v2"), gadget("v2", "g-g", 1), "create g-g at v2, webhook down",
            "a write while the webhook is down")
    hook.start()  # same port
    hook.mode = "slow"
    cap.rec("GET", path("v2", "g-a"), None, "get g-a at v2, webhook slow",
            "a webhook that answers after 40 s: the 30 s client timeout")
    hook.mode = "ok"
    time.sleep(12)  # the slow handler's thread ends
    hook.received.clear()

    crd = crd_body(hook, storage="v2")
    _, current = cap.call("GET", f"{CRDS}/{CRD_NAME}")
    crd["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    cap.rec("PUT", f"{CRDS}/{CRD_NAME}", crd, "the crd with v2 as the storage version",
            "the storage version changes; g-a, g-b stay stored at v1")
    time.sleep(5)
    hook.received.clear()
    cap.rec("POST", path("v2"), gadget("v2", "g-h", 2), "create g-h at v2 (now storage)",
            "a write at the new storage version calls nothing")
    cap.rec("GET", path("v2", "g-a"), None, "get g-a at v2, stored at v1",
            "an object stored at the old storage version is converted on read")
    cap.rec("GET", path("v2"), None, "list at v2, mixed storage versions",
            "a list where some objects are stored at v1: only those are converted")
    cap.rec("GET", path("v1"), None, "list at v1, mixed storage versions",
            "the same list at v1: only the objects stored at v2 are converted")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="https://127.0.0.1:6443")
    parser.add_argument("--ca", default="/tmp/realk8s/pki/ca.crt")
    parser.add_argument("--kubeconfig", default="/tmp/realk8s/kubeconfig-admin")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1]
                        / "tests" / "fixtures" / "apiserver-1.28-issue24-conversion")
    args = parser.parse_args()
    cap = HookCapture(args.server, args.ca, args.kubeconfig, args.out)
    cap.hook = Hook()
    cap.hook.start()
    try:
        cleanup(cap)
        scenario(cap)
    finally:
        cap.hook.mode = "ok"
        if cap.hook.server is None:
            cap.hook.start()
        cleanup(cap)
        cap.hook.stop()
        cap.close()
        for name, status, demonstrates in cap.index:  # for INDEX.md
            print(f"- `{name}` ({status}) - {demonstrates}")


if __name__ == "__main__":
    main()
