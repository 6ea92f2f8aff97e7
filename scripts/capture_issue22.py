"""Record exchanges with a real kube-apiserver as reference files (issue 22).

Writes tests/fixtures/apiserver-1.28-issue22/NNN-title.json in the record format of
tests/fixtures/apiserver-1.28 (see its INDEX.md): every request is made with curl (its
User-Agent, so JSON bodies come pretty-printed, as in the first pack), the bearer token is
handed to curl in a file (never on a command line) and written nowhere; ``Audit-Id`` and
``Date`` are replaced by placeholders. Needs a server, so it is not part of ``make test``:

    python scripts/capture_issue22.py [--server https://127.0.0.1:6443] [--out DIR]

It creates and deletes only namespaces ``cases-*`` and CRD group ``cases.example.com``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SERVER_NOTE = ("kube-apiserver v1.28.7 + kube-controller-manager (all controllers, GC, "
               "namespace deletion), --service-cluster-ip-range=10.0.0.0/24, default "
               "feature gates")
REASONS = {200: "OK", 201: "Created", 400: "Bad Request", 403: "Forbidden", 404: "Not Found",
           405: "Method Not Allowed", 409: "Conflict", 415: "Unsupported Media Type",
           422: "Unprocessable Entity", 500: "Internal Server Error"}
PRETTY = ("JSON, pretty-printed (the server indents JSON when the User-Agent starts with curl, "
          "Wget or Mozilla/5.0, or with ?pretty=true)")
USERS = {"admin": "admin (static token, group system:masters)"}


def _token(kubeconfig: str) -> str:
    """The kubeconfig's bearer token (read, never printed)."""
    text = Path(kubeconfig).read_text()
    m = re.search(r"^\s*token:\s*(\S+)\s*$", text, re.M)
    if m is None:
        raise SystemExit(f"no token in {kubeconfig}")
    return m.group(1).strip("'\"")


class Capture:
    """One server, one output folder; numbers the files in the order they are recorded."""

    def __init__(self, server: str, ca: str, kubeconfig: str, out: Path) -> None:
        self.server = server.rstrip("/")
        self.ca = ca
        self.out = out
        self.number = 0
        self.index: list[tuple[str, int, str]] = []
        fd, self._auth = tempfile.mkstemp(prefix="cap-")
        with os.fdopen(fd, "w") as f:
            f.write(f"Authorization: Bearer {_token(kubeconfig)}\n")
        os.chmod(self._auth, 0o600)

    def close(self) -> None:
        os.unlink(self._auth)

    def _curl(self, method: str, url: str, body: bytes | None, ctype: str | None,
              accept: str | None) -> list[str]:
        cmd = ["curl", "-sS", "--http1.1", "--cacert", self.ca, "-H", f"@{self._auth}",
               "-X", method]
        if accept is not None:
            cmd += ["-H", f"Accept: {accept}"]
        if ctype is not None:
            cmd += ["-H", f"Content-Type: {ctype}"]
        if body is not None:
            cmd += ["--data-binary", "@-"]
        return [*cmd, url]

    @staticmethod
    def _sent_headers(body: bytes | None, ctype: str | None, accept: str | None) -> dict[str, str]:
        h = {"Host": "127.0.0.1:6443", "User-Agent": "curl/7.88.1", "Accept": accept or "*/*"}
        if ctype is not None:
            h["Content-Type"] = ctype
        if body is not None:
            h["Content-Length"] = str(len(body))
        return h

    def _request(self, method: str, path: str, query: dict[str, str] | None, body: Any,
                 ctype: str | None, accept: str | None) -> tuple[JSONish, bytes | None, str]:
        raw_query = urllib.parse.urlencode(query or {}, safe=":=,/!")
        data = None if body is None else (body.encode() if isinstance(body, str)
                                          else json.dumps(body).encode())
        if data is not None and ctype is None:
            ctype = "application/json"
        url = self.server + path + (f"?{raw_query}" if raw_query else "")
        req = {"user": USERS["admin"], "method": method, "path": path,
               "query": dict(query or {}), "raw_query": raw_query,
               "headers": self._sent_headers(data, ctype, accept),
               "body": body}
        return req, data, url

    def call(self, method: str, path: str, body: Any = None, *,
             query: dict[str, str] | None = None, ctype: str | None = None,
             accept: str | None = None, record: tuple[str, str] | None = None,
             notes: Any = None) -> tuple[int, Any]:
        """One exchange; recorded as the next file when ``record`` = (title, demonstrates)."""
        req, data, url = self._request(method, path, query, body, ctype, accept)
        fd, hdr = tempfile.mkstemp(prefix="cap-head-")
        os.close(fd)
        cmd = self._curl(method, url, data, req["headers"].get("Content-Type")
                         if data is not None else None, accept)
        cmd[1:1] = ["-D", hdr, "-w", "\n%{http_version} %{time_total}"]
        started = time.monotonic()
        proc = subprocess.run(cmd, input=data, capture_output=True, check=False)
        elapsed = time.monotonic() - started
        text = proc.stdout.decode()
        text, _, tail = text.rpartition("\n")
        http_version = tail.split()[0] if tail else "1.1"
        head = Path(hdr).read_text()
        os.unlink(hdr)
        status, headers = _parse_head(head)
        parsed: Any = text
        fmt = "not JSON"
        if headers.get("Content-Type", "").startswith("application/json") and text:
            parsed = json.loads(text)
            fmt = PRETTY if "\n  " in text else "JSON, compact"
        if record is not None:
            response = {"http_version": http_version, "status": status,
                        "reason": REASONS.get(status, ""), "headers": headers,
                        "body": parsed, "body_format": fmt}
            self._write(record, req, response, notes, elapsed)
        return status, parsed

    def _write(self, record: tuple[str, str], req: JSONish, response: JSONish, notes: Any,
               elapsed: float | None, **extra: Any) -> None:
        title, demonstrates = record
        self.number += 1
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:50].strip("-")
        name = f"{self.number:03d}-{slug}.json"
        doc: JSONish = {"title": f"{req['method']} {req['path']}"
                        + (f"?{req['raw_query']}" if req["raw_query"] else "") + f": {title}",
                        "demonstrates": demonstrates, "server": SERVER_NOTE,
                        "request": req, "response": response}
        doc.update(extra)
        if notes is not None:
            doc["notes"] = notes
        if elapsed is not None:
            doc["_elapsed_s"] = round(elapsed, 3)
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / name).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        self.index.append((name, response["status"], demonstrates))
        print(f"recorded {name} ({response['status']})")

    @contextmanager
    def watch(self, path: str, query: dict[str, str],
              record: tuple[str, str] | None = None) -> Iterator[Watch]:
        """A watch (curl -N) read in a thread; recorded when the block ends."""
        req, _, url = self._request("GET", path, query, None, None, None)
        fd, hdr = tempfile.mkstemp(prefix="cap-head-")
        os.close(fd)
        cmd = self._curl("GET", url, None, None, None)
        cmd[1:1] = ["-N", "-D", hdr]
        w = Watch(cmd)
        try:
            yield w
        finally:
            w.finish()
        status, headers = _parse_head(Path(hdr).read_text())
        os.unlink(hdr)
        if record is not None:
            response = {"http_version": "1.1", "status": status,
                        "reason": REASONS.get(status, ""), "headers": headers,
                        "lines": [json.loads(line) for line, _ in w.lines],
                        "line_arrival_s": [round(t, 3) for _, t in w.lines],
                        "stream_end": w.end, "stream_end_at_s": round(w.ended_at, 3)}
            self._write(record, req, response, None, None,
                        actions_during_stream=w.actions)


JSONish = dict[str, Any]


class Watch:
    """curl -N reading a watch: every line with its arrival time (s since the request)."""

    def __init__(self, cmd: list[str]) -> None:
        self.started = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
        self.lines: list[tuple[str, float]] = []
        self.actions: list[JSONish] = []
        self.end = ""
        self.ended_at = 0.0
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            if raw.strip():
                self.lines.append((raw.decode().strip(), time.monotonic() - self.started))
        rc = self.proc.wait()
        self.ended_at = time.monotonic() - self.started
        self.end = (f"server ended the response cleanly (curl rc {rc}: final chunk received)"
                    if rc == 0 else f"client cut it (curl rc {rc})")

    def act(self, what: str) -> None:
        self.actions.append({"t_s": round(time.monotonic() - self.started, 3), "action": what})

    def wait_lines(self, n: int, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.lines) < n and time.monotonic() < deadline:
            time.sleep(0.02)

    def finish(self, timeout: float | None = None) -> None:
        """Wait for the server to end the stream (up to ``timeout``), else cut it."""
        self._thread.join(timeout if timeout is not None else 0.5)
        if self._thread.is_alive():
            self.proc.terminate()
            self._thread.join()
            self.end = "client cut it (curl terminated after the last action)"


def _parse_head(head: str) -> tuple[int, JSONish]:
    blocks = [b for b in head.replace("\r\n", "\n").split("\n\n") if b.strip()]
    lines = blocks[-1].splitlines() if blocks else ["HTTP/1.1 0"]
    status = int(lines[0].split()[1])
    headers: JSONish = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        key = "-".join(p.capitalize() for p in key.split("-"))
        if key == "Audit-Id":
            value = "<audit-id>"
        if key == "Date":
            value = "<date>"
        if key in headers:
            prev = headers[key]
            headers[key] = [*prev, value] if isinstance(prev, list) else [prev, value]
        else:
            headers[key] = value
    return status, headers


# ---- the scenarios ---------------------------------------------------------------------------

GROUP = "cases.example.com"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
MERGE = "application/merge-patch+json"
SMP = "application/strategic-merge-patch+json"
JSONPATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def wait_until(check: Any, timeout: float = 30.0, every: float = 0.1) -> float:
    """Poll ``check()`` until true; the seconds it took (raises on timeout)."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise SystemExit(f"timed out waiting for {check}")
        time.sleep(every)
    return time.monotonic() - started


def crd(plural: str, kind: str, properties: JSONish, columns: list[JSONish] | None = None,
        status: bool = False) -> JSONish:
    version: JSONish = {"name": "v1", "served": True, "storage": True, "schema": {
        "openAPIV3Schema": {"type": "object", "properties": properties}}}
    if status:
        version["subresources"] = {"status": {}}
    if columns:
        version["additionalPrinterColumns"] = columns
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced", "versions": [version],
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind}}}


def established(cap: Capture, name: str) -> None:
    def ready() -> bool:
        _, body = cap.call("GET", f"{CRDS}/{name}")
        return any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in (body.get("status") or {}).get("conditions") or [])
    wait_until(ready)
    time.sleep(2.5)  # creates within 2 s of Established sleep 2 s (customresource_handler)


def cleanup(cap: Capture) -> None:
    """Leave nothing of ours behind: finalizers off, CRDs and namespaces deleted."""
    for plural in ("gadgets", "parts", "printers", "widgets"):
        path = f"/apis/{GROUP}/v1/{plural}"
        status, body = cap.call("GET", path)
        for item in body.get("items", []) if status == 200 else []:
            meta = item["metadata"]
            cap.call("PATCH", f"/apis/{GROUP}/v1/namespaces/{meta['namespace']}/{plural}/"
                     f"{meta['name']}", {"metadata": {"finalizers": None}}, ctype=MERGE)
        cap.call("DELETE", f"{CRDS}/{plural}.{GROUP}")
    for n in range(1, 6):
        status, body = cap.call("GET", f"/api/v1/namespaces/cases-{n}/configmaps")
        for item in body.get("items", []) if status == 200 else []:
            if item["metadata"].get("finalizers"):
                cap.call("PATCH", f"/api/v1/namespaces/cases-{n}/configmaps/"
                         f"{item['metadata']['name']}", {"metadata": {"finalizers": None}},
                         ctype=MERGE)
        cap.call("DELETE", f"/api/v1/namespaces/cases-{n}")
    for n in range(1, 6):
        wait_until(lambda n=n: cap.call("GET", f"/api/v1/namespaces/cases-{n}")[0] == 404, 120)
    for plural in ("gadgets", "parts", "printers", "widgets"):
        wait_until(lambda p=plural: cap.call("GET", f"{CRDS}/{p}.{GROUP}")[0] == 404, 120)


def case1_crd_deletion(cap: Capture) -> None:
    """Deleting a CRD whose custom resources have finalizers."""
    ns = "/api/v1/namespaces"
    cap.call("POST", ns, {"metadata": {"name": "cases-1"}})
    cap.call("POST", CRDS, crd("gadgets", "Gadget", {
        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}}},
        status=True))
    established(cap, f"gadgets.{GROUP}")
    path = f"/apis/{GROUP}/v1/namespaces/cases-1/gadgets"
    for name, fins in (("g-a", ["cases.example.com/hold"]), ("g-b", ["cases.example.com/hold"]),
                       ("g-c", None)):
        meta: JSONish = {"name": name}
        if fins:
            meta["finalizers"] = fins
        cap.call("POST", path, {"apiVersion": f"{GROUP}/v1", "kind": "Gadget",
                                "metadata": meta, "spec": {"size": 1}},
                 record=(f"create {name}" + (" with a finalizer" if fins else ""),
                         "custom resources to delete with their CRD (g-a, g-b hold a finalizer)")
                 if name == "g-a" else None)
    _, listed = cap.call("GET", path)
    rv = listed["metadata"]["resourceVersion"]
    crd_path = f"{CRDS}/gadgets.{GROUP}"
    with cap.watch(path, {"watch": "1", "resourceVersion": rv}, record=(
            "watch the gadgets while their CRD is deleted",
            "MODIFIED (deletionTimestamp, generation+1) for g-a and g-b, DELETED for g-c (no "
            "finalizer), in name order; ADDED/DELETED for the applied g-apply; MODIFIED for "
            "the writes to g-a; DELETED for each when its finalizer goes; then the server "
            "ends the stream ~1 s after the CRD is gone")) as w, \
            cap.watch(CRDS, {"watch": "1", "fieldSelector": f"metadata.name=gadgets.{GROUP}",
                             "resourceVersion": rv}, record=(
                "watch the CRD while it is deleted",
                "MODIFIED (deletionTimestamp, Terminating InstanceDeletionPending), MODIFIED "
                "(InstanceDeletionInProgress), DELETED once the last custom resource is gone "
                "(its object still InstanceDeletionInProgress, finalizer listed)")) as wc:
        time.sleep(0.5)
        w.act("DELETE CRD")
        wc.act("DELETE CRD")
        cap.call("DELETE", crd_path, record=(
            "delete the CRD (two custom resources hold finalizers)",
            "200 + the CRD: deletionTimestamp, finalizer customresourcecleanup, Terminating "
            "True InstanceDeletionPending"))
        time.sleep(1.0)
        cap.call("GET", crd_path, record=(
            "the CRD while its custom resources wait for their finalizers",
            "still there: Terminating True, InstanceDeletionInProgress \"CustomResource "
            "deletion is in progress\""))
        cap.call("GET", path, record=(
            "list the custom resources while the CRD is terminating",
            "still served: g-a and g-b with deletionTimestamp, deletionGracePeriodSeconds 0, "
            "generation 2 (g-c is gone)"))
        cap.call("GET", f"/apis/{GROUP}/v1", record=(
            "discovery while the CRD is terminating",
            "verbs: delete, deletecollection, get, list, watch (no create/patch/update)"))
        cap.call("POST", path, {"apiVersion": f"{GROUP}/v1", "kind": "Gadget",
                                "metadata": {"name": "g-new"}, "spec": {"size": 2}},
                 record=("create a custom resource while the CRD is terminating",
                         "405 MethodNotAllowed \"create not allowed while custom resource "
                         "definition is terminating\", details group + kind (the plural)"))
        cap.call("PATCH", f"{path}/g-apply", "apiVersion: cases.example.com/v1\nkind: Gadget\n"
                 "metadata:\n  name: g-apply\nspec:\n  size: 3\n", ctype=APPLY,
                 query={"fieldManager": "cases"}, record=(
                     "server-side apply of a new custom resource while the CRD is terminating",
                     "201: an apply is a patch, not a create: the object is made (the CRD "
                     "finalizer deletes it on its next round, a minute later)"))
        cap.call("DELETE", f"{path}/g-apply", record=(
            "delete what the apply made", "200 Status (no finalizer)"))
        cap.call("PATCH", f"{path}/g-a", {"spec": {"size": 5}}, ctype=MERGE, record=(
            "update a terminating custom resource",
            "200: updates are allowed (generation 2 -> 3)"))
        cap.call("PATCH", f"{path}/g-a/status", {"status": {"phase": "Cleaning"}},
                 ctype=MERGE, record=("status update of a terminating custom resource",
                                      "200: the status subresource still takes writes"))
        cap.call("PATCH", f"{path}/g-a", {"metadata": {"finalizers": [
            "cases.example.com/hold", "cases.example.com/more"]}}, ctype=MERGE, record=(
            "add a finalizer to a terminating custom resource",
            "422: no new finalizers on an object being deleted"))
        w.act("remove g-a's finalizer")
        cap.call("PATCH", f"{path}/g-a", {"metadata": {"finalizers": None}}, ctype=MERGE,
                 record=("remove g-a's finalizer", "200; g-a is gone (DELETED on the watch)"))
        cap.call("GET", f"{path}/g-a", record=("g-a after its finalizer went", "404"))
        time.sleep(1.0)
        cap.call("GET", crd_path, record=(
            "the CRD while g-b still holds a finalizer",
            "still Terminating, InstanceDeletionInProgress"))
        w.act("remove g-b's finalizer")
        wc.act("remove g-b's finalizer")
        started = time.monotonic()
        cap.call("PATCH", f"{path}/g-b", {"metadata": {"finalizers": None}}, ctype=MERGE,
                 record=("remove the last finalizer", "200; the CRD finalizer can finish"))
        took = wait_until(lambda: cap.call("GET", path)[0] == 404, 30, 0.05)
        w.act(f"GET gadgets first returned 404 ({took:.3f} s after the last finalizer went)")
        cap.call("GET", path, record=(
            "the resource once the CRD is gone", "404 text/plain '404 page not found'"),
            notes={"seconds_from_last_finalizer_removal_to_404":
                   round(time.monotonic() - started, 3),
                   "why": "the CRD finalizer polls every 5 s for remaining instances"})
        cap.call("GET", crd_path, record=("the CRD once its instances are gone", "404"))
        w.finish(5.0)
        wc.finish(1.0)


def case2_owner_references(cap: Capture) -> None:
    """Strategic merge of ownerReferences (merge by uid) and finalizers; one controller."""
    cap.call("POST", "/api/v1/namespaces", {"metadata": {"name": "cases-2"}})
    cms = "/api/v1/namespaces/cases-2/configmaps"
    _, o1 = cap.call("POST", cms, {"metadata": {"name": "owner-1"}})
    _, o2 = cap.call("POST", cms, {"metadata": {"name": "owner-2"}})
    r1 = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner-1",
          "uid": o1["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    r2 = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner-2",
          "uid": o2["metadata"]["uid"]}
    _, child = cap.call("POST", cms, {"metadata": {"name": "child", "ownerReferences": [r1]},
                                      "data": {"k": "v"}}, record=(
        "create a child with a controller ownerReference",
        "the starting point: owner-1 is the controller"))
    with cap.watch(cms, {"watch": "1", "fieldSelector": "metadata.name=child",
                         "resourceVersion": child["metadata"]["resourceVersion"]}, record=(
            "watch the child",
            "MODIFIED for the merged ownerReferences, MODIFIED when the garbage collector "
            "drops the reference to the deleted owner-2; never DELETED")) as w:
        w.act("SMP adding owner-2")
        cap.call("PATCH", f"{cms}/child", {"metadata": {"ownerReferences": [r2]}}, ctype=SMP,
                 record=("strategic merge patch adding a second ownerReference",
                         "merged by uid (patchMergeKey uid, patchStrategy merge): [owner-2, "
                         "owner-1], the patch's new item first"))
        w.act("DELETE owner-2")
        cap.call("DELETE", f"{cms}/owner-2", record=("delete owner-2", "200 Status"))

        def dropped() -> bool:
            refs = cap.call("GET", f"{cms}/child")[1]["metadata"].get("ownerReferences")
            return [r["name"] for r in refs or []] == ["owner-1"]
        took = wait_until(dropped, 30)
        w.act(f"child lost its owner-2 reference ({took:.2f} s after the DELETE)")
        cap.call("GET", f"{cms}/child", record=(
            "the child after owner-2 is gone",
            "kept (its controller owner-1 lives); the garbage collector removed the dangling "
            "owner-2 reference"))
        time.sleep(1.0)
    r2c = dict(r2, controller=True)
    cap.call("PATCH", f"{cms}/child", {"metadata": {"ownerReferences": [r2c]}}, ctype=SMP,
             record=("strategic merge patch adding a second controller reference",
                     "422: \"Only one reference can have Controller set to true\"; the list is "
                     "quoted as Go %#v (pointer addresses); an update of a ConfigMap repeats "
                     "the cause 4 times (one message)"))
    cap.call("POST", cms, {"metadata": {"name": "child-2", "ownerReferences": [r1, r2c]}},
             record=("create with two controller references", "422 with one cause"))
    cap.call("POST", cms, {"metadata": {"name": "child-3", "ownerReferences": [
        r1, r2c, dict(r2c, name="owner-3", uid="11111111-2222-3333-4444-555555555555")]}},
        record=("create with three controller references",
                "422 with two causes: first vs second, first vs third"))
    cap.call("POST", cms, {"metadata": {"name": "child-4", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "x"}]}}, record=(
        "create with an ownerReference without uid", "422 uid must not be empty"))
    cap.call("PATCH", f"{cms}/child", {"metadata": {"ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "x"}]}}, ctype=SMP, record=(
        "strategic merge patch with an ownerReference without uid",
        "500: \"map: map[...] does not contain declared merge key: uid\""))
    deploys = "/apis/apps/v1/namespaces/cases-2/deployments"
    cap.call("POST", deploys, deployment("web"))
    cap.call("PATCH", f"{deploys}/web", {"metadata": {"ownerReferences": [r1, r2c]}},
             ctype=MERGE, record=("merge patch giving a Deployment two controllers",
                                  "422: a Deployment update repeats the cause 3 times"))
    cap.call("POST", CRDS, crd("parts", "Part", {"spec": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}))
    established(cap, f"parts.{GROUP}")
    parts = f"/apis/{GROUP}/v1/namespaces/cases-2/parts"
    cap.call("POST", parts, {"apiVersion": f"{GROUP}/v1", "kind": "Part",
                             "metadata": {"name": "p"}, "spec": {}})
    cap.call("PATCH", f"{parts}/p", {"metadata": {"ownerReferences": [r1, r2c]}},
             ctype=MERGE, record=("merge patch giving a custom resource two controllers",
                                  "422: 3 causes, each with its own pointer addresses, so "
                                  "three messages in brackets"))
    cap.call("PATCH", f"{parts}/p", {"metadata": {"ownerReferences": [r1]}}, ctype=SMP,
             record=("strategic merge patch on a custom resource",
                     "415: custom resources take no strategic merge patch"))
    # finalizers: a set
    cap.call("POST", cms, {"metadata": {"name": "fin", "finalizers": ["cases.example.com/a"]}})
    cap.call("PATCH", f"{cms}/fin", {"metadata": {"finalizers": [
        "cases.example.com/b", "cases.example.com/a"]}}, ctype=SMP, record=(
        "strategic merge patch of finalizers",
        "finalizers merge as a set: [b, a] (no duplicate of a)"))
    cap.call("PATCH", f"{cms}/fin", {"metadata": {"finalizers": ["cases.example.com/c"]}},
             ctype=SMP, record=("strategic merge patch adding one finalizer",
                                "[c, b, a]: the new item ahead of the server's"))
    cap.call("PATCH", f"{cms}/fin", {"metadata": {
        "$deleteFromPrimitiveList/finalizers": ["cases.example.com/b"]}}, ctype=SMP, record=(
        "strategic merge patch deleting a finalizer", "$deleteFromPrimitiveList: [c, a]"))
    cap.call("PATCH", f"{cms}/child", {"metadata": {"ownerReferences": [
        {"$patch": "delete", "uid": r1["uid"]}]}}, ctype=SMP, record=(
        "strategic merge patch deleting an ownerReference by uid",
        "$patch: delete with the merge key: ownerReferences gone"))
    cap.call("PATCH", f"{cms}/fin", {"metadata": {"finalizers": None}}, ctype=MERGE)


def deployment(name: str, replicas: Any = 1, **extra: Any) -> JSONish:
    template = {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    return {"metadata": {"name": name}, "spec": {
        "replicas": replicas, "selector": {"matchLabels": {"app": name}},
        "template": template, **extra}}


def case3_services(cap: Capture) -> None:
    """What a real server fills in a Service."""
    cap.call("POST", "/api/v1/namespaces", {"metadata": {"name": "cases-3"}})
    svcs = "/api/v1/namespaces/cases-3/services"
    made = [
        ("plain", {"selector": {"app": "web"}, "ports": [{"port": 80}]},
         "defaults: type ClusterIP, sessionAffinity None, protocol TCP, targetPort = port, "
         "internalTrafficPolicy Cluster; allocated: clusterIP(s), ipFamilies [IPv4], "
         "SingleStack; status.loadBalancer {}; managedFields own the defaults, not the "
         "allocations"),
        ("named", {"ports": [{"name": "http", "port": 80, "targetPort": "web"},
                             {"name": "dns", "port": 53, "protocol": "UDP"}]},
         "a named targetPort stays; a UDP port keeps its protocol"),
        ("nodeport", {"type": "NodePort", "ports": [{"port": 80}]},
         "NodePort: a nodePort from 30000-32767, externalTrafficPolicy Cluster"),
        ("lb", {"type": "LoadBalancer", "ports": [{"name": "a", "port": 80},
                                                  {"name": "b", "port": 443,
                                                   "nodePort": 30444}]},
         "LoadBalancer: nodePorts (a requested one kept), allocateLoadBalancerNodePorts true"),
        ("headless", {"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"port": 80}]},
         "headless: clusterIP(s) stay None, SingleStack"),
        ("headless-bare", {"clusterIP": "None", "ports": [{"port": 80}]},
         "headless without selector: RequireDualStack, ipFamilies [IPv4, IPv6]"),
        ("external", {"type": "ExternalName", "externalName": "example.com"},
         "ExternalName: no cluster IP, no families, no internalTrafficPolicy"),
        ("fixed", {"clusterIP": "10.0.0.77", "ports": [{"port": 80}]},
         "a requested cluster IP inside the range is kept"),
        ("sticky", {"sessionAffinity": "ClientIP", "ports": [{"port": 80}]},
         "sessionAffinity ClientIP: sessionAffinityConfig.clientIP.timeoutSeconds 10800"),
    ]
    for name, spec, why in made:
        cap.call("POST", svcs, {"metadata": {"name": name}, "spec": spec},
                 record=(f"create Service {name}", why))
    for name, spec, why in [
        ("noports", {}, "422 spec.ports: Required value"),
        ("unnamed", {"ports": [{"port": 80}, {"port": 81}]},
         "422: every port needs a name when there are several"),
        ("outside", {"clusterIP": "10.1.0.5", "ports": [{"port": 80}]},
         "422 failed to allocate IP: not in the valid range"),
        ("taken", {"clusterIP": "10.0.0.77", "ports": [{"port": 80}]},
         "422 failed to allocate IP: already allocated"),
        ("lowport", {"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]},
         "422 nodePort not in the valid range"),
        ("takenport", {"type": "NodePort", "ports": [{"port": 80, "nodePort": 30444}]},
         "422 nodePort already allocated"),
        ("badtype", {"type": "Foo", "ports": [{"port": 80}]}, "422 unsupported type"),
        ("noname", {"type": "ExternalName"}, "422 ExternalName without externalName"),
        ("headless-np", {"clusterIP": "None", "type": "NodePort", "ports": [{"port": 80}]},
         "422 None for a NodePort service"),
        ("zero", {"ports": [{"port": 0}]}, "422 port 0 (and its defaulted targetPort)"),
    ]:
        cap.call("POST", svcs, {"metadata": {"name": name}, "spec": spec},
                 record=(f"create Service {name}", why))
    _, plain = cap.call("GET", f"{svcs}/plain")
    put = {"apiVersion": "v1", "kind": "Service", "metadata": {
        "name": "plain", "resourceVersion": plain["metadata"]["resourceVersion"]},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}
    cap.call("PUT", f"{svcs}/plain", put, record=(
        "PUT without the allocated fields",
        "200: clusterIP(s) and families carried over (patchAllocatedValues)"))
    cap.call("PATCH", f"{svcs}/plain", {"spec": {"clusterIP": "10.0.0.78",
                                                 "clusterIPs": ["10.0.0.78"]}},
             ctype=MERGE, record=("change the cluster IP", "422: immutable"))
    cap.call("PATCH", f"{svcs}/plain", {"spec": {"type": "NodePort"}}, ctype=MERGE, record=(
        "ClusterIP -> NodePort", "200: a nodePort allocated, externalTrafficPolicy Cluster"))


def case4_printer_columns(cap: Capture, logs: Path) -> None:
    """additionalPrinterColumns with the JSONPath kubectl users write."""
    cap.call("POST", "/api/v1/namespaces", {"metadata": {"name": "cases-4"}})
    cap.call("POST", CRDS, crd("printers", "Printer", {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        columns=[{"name": n, "type": t, "jsonPath": p} for n, t, p in PRINTER_COLUMNS]),
        record=("CRD with JSONPath printer columns",
                "accepted: filters, recursive descent, unions... all start with '.'; the "
                "column that does not parse is accepted too"))
    established(cap, f"printers.{GROUP}")
    path = "/apis/cases.example.com/v1/namespaces/cases-4/printers"
    cap.call("POST", path, PRINTER, record=("the custom resource the columns read", "201"))
    cap.call("GET", path, accept=TABLE, record=(
        "Table of the printers",
        "cells: filters, unions, slices, recursive descent; maps/lists as JSON; null "
        "'<no value>'; a type mismatch in a filter or ['a.b'] gives null; the columns from "
        "the first unparsable one on are dropped"))
    cap.call("GET", f"{path}/p1", accept=TABLE, record=("Table of one printer", "same cells"))
    kubectl(logs / "01-get-printers.log", ["get", "printers", "-n", "cases-4"])
    kubectl(logs / "02-get-printers-wide.log", ["get", "printers", "-n", "cases-4", "-o",
                                                "wide"])


PRINTER_COLUMNS = [
    ("Ready", "string", '.status.conditions[?(@.type=="Ready")].status'),
    ("NotReady", "string", '.status.conditions[?(@.type!="Ready")].reason'),
    ("Big", "string", ".spec.items[?(@.size>2)].name"),
    ("Small", "string", ".spec.items[?(@.size<=2)].name"),
    ("GE", "string", ".spec.items[?(@.size>=3)].name"),
    ("LT", "string", ".spec.items[?(@.size<3)].name"),
    ("Flagged", "string", ".spec.items[?(@.flag)].name"),
    ("Recursive", "string", ".spec.items..name"),
    ("Wild", "string", ".spec.items[*].name"),
    ("Union", "string", ".spec.items[2,0].name"),
    ("Slice", "string", ".spec.items[1:].name"),
    ("Last", "string", ".spec.items[-1:].name"),
    ("Step", "string", ".spec.items[0:3:2].name"),
    ("Map", "string", ".spec.labels"),
    ("List", "string", ".spec.tags"),
    ("Null", "string", ".spec.nothing"),
    ("Dotted", "string", ".metadata.labels['app.kubernetes.io/name']"),
    ("Escaped", "string", ".metadata.labels.app\\.kubernetes\\.io/name"),
    ("Simple", "string", ".metadata.labels['simple']"),
    ("SizeOfB", "integer", '.spec.items[?(@.name=="b")].size'),
    ("FloatCmp", "string", ".spec.items[?(@.size>1.5)].name"),
    ("Mixed", "string", ".spec.mixed[?(@.v==1)].name"),
    ("Ratio", "string", ".spec.ratio"),
    ("Million", "string", ".spec.million"),
    ("Tiny", "string", ".spec.tiny"),
    ("Bool", "string", ".spec.on"),
    ("Num", "number", ".spec.items[0].size"),
    ("Half", "number", ".spec.ratio"),
    ("When", "date", ".spec.when"),
    ("BadWhen", "date", ".spec.bad"),
    ("Html", "string", ".spec.html"),
    ("Missing", "string", ".spec.nope"),
    ("Broken", "string", ".spec.items[?(@.x"),
    ("After", "string", ".spec.on"),
]
PRINTER: JSONish = {
    "apiVersion": f"{GROUP}/v1", "kind": "Printer",
    "metadata": {"name": "p1", "labels": {"app.kubernetes.io/name": "demo", "simple": "yes"}},
    "spec": {"items": [{"name": "a", "size": 1}, {"name": "b", "size": 3, "flag": True},
                       {"name": "c", "size": 2}],
             "labels": {"z": "1", "a": "<b>"}, "tags": ["x", "y"], "nothing": None,
             "mixed": [{"name": "s", "v": "1"}, {"name": "i", "v": 1}], "ratio": 0.5,
             "million": 1000000.5, "tiny": 0.00001, "on": True,
             "when": "2020-01-01T00:00:00Z", "bad": "yesterday", "html": "a<b>&c"},
    "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Fine"},
                              {"type": "Synced", "status": "False", "reason": "Lagging"}]}}


def kubectl(out: Path, args: list[str]) -> None:
    """kubectl -v=8 (it masks the token itself); stdout and the log in one file."""
    proc = subprocess.run(["kubectl", "--kubeconfig", "/tmp/realk8s/kubeconfig-admin",
                           f"--cache-dir={tempfile.mkdtemp()}", "-v=8", *args],
                          capture_output=True, text=True, check=False)
    log = re.sub(r"Bearer [A-Za-z0-9._\-]+", "Bearer <masked>", proc.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"$ kubectl {' '.join(args)}\n--- stdout ---\n{proc.stdout}"
                   f"--- stderr (-v=8) ---\n{log}")
    print(f"recorded {out.name}")


def case5_int32(cap: Capture) -> None:
    """Integers a Go int32/int64 field cannot hold."""
    cap.call("POST", "/api/v1/namespaces", {"metadata": {"name": "cases-5"}})
    deploys = "/apis/apps/v1/namespaces/cases-5/deployments"
    for value, why in ((2147483648, "400: json: cannot unmarshal number 2147483648 into Go "
                                    "struct field DeploymentSpec.spec.replicas of type int32"),
                       (3.0, "400: even a whole float (\"number 3.0\")"),
                       ("3", "400: a string")):
        cap.call("POST", deploys, deployment("d", value),
                 record=(f"create a Deployment with replicas {value!r}", why))
    bad_port = deployment("d")
    bad_port["spec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"containerPort": 4294967376}]
    cap.call("POST", deploys, bad_port, record=(
        "create a Deployment with containerPort 4294967376",
        "400: the struct is ContainerPort, the path has no list indexes"))
    svcs = "/api/v1/namespaces/cases-5/services"
    cap.call("POST", svcs, {"metadata": {"name": "s"}, "spec": {"ports": [
        {"port": 4294967376}]}}, record=("create a Service with port 4294967376",
                                         "400 ServicePort.spec.ports.port"))
    cap.call("POST", svcs, {"metadata": {"name": "s"}, "spec": {"ports": [
        {"port": 80, "targetPort": 4294967376}]}}, record=(
        "create a Service with targetPort 4294967376",
        "400 ServicePort.spec.ports.targetPort of type int32 (an IntOrString)"))
    cap.call("POST", "/apis/batch/v1/namespaces/cases-5/jobs", {
        "metadata": {"name": "j"}, "spec": {"activeDeadlineSeconds": 9223372036854775808,
                                            "template": {"spec": {
                                                "restartPolicy": "Never",
                                                "containers": [{"name": "c", "image": "x"}]}}}},
        record=("create a Job with activeDeadlineSeconds 2^63",
                "400 ... JobSpec.spec.activeDeadlineSeconds of type int64"))
    cap.call("POST", "/api/v1/namespaces/cases-5/configmaps", {"metadata": {
        "name": "c", "generation": 9223372036854775808}}, record=(
        "create a ConfigMap with metadata.generation 2^63",
        "400 ObjectMeta.metadata.generation of type int64"))
    _, made = cap.call("POST", deploys, deployment("d", 2))
    put = dict(made)
    put["spec"] = dict(made["spec"], replicas=2147483648)
    put.pop("status", None)
    cap.call("PUT", f"{deploys}/d", put, record=("PUT replicas 2147483648", "400"))
    cap.call("PATCH", f"{deploys}/d", {"spec": {"replicas": 2147483648}}, ctype=MERGE,
             record=("merge patch replicas 2147483648",
                     "422 on \"patch\": the patched object does not decode"))
    cap.call("PATCH", f"{deploys}/d", [{"op": "replace", "path": "/spec/replicas",
                                        "value": 2147483648}], ctype=JSONPATCH,
             record=("JSON patch replicas 2147483648", "422 on \"patch\""))
    cap.call("PATCH", f"{deploys}/d", {"spec": {"replicas": 2147483648}}, ctype=SMP,
             record=("strategic merge patch replicas 2147483648",
                     "422 from validation: the unstructured converter wrapped it to "
                     "-2147483648"))
    cap.call("PATCH", f"{deploys}/d", {"spec": {"replicas": 4294967299}}, ctype=SMP,
             record=("strategic merge patch replicas 4294967299",
                     "200: wrapped to 3 and stored"))
    cap.call("PATCH", f"{deploys}/d", {"spec": {"replicas": 1.5}}, ctype=SMP, record=(
        "strategic merge patch replicas 1.5", "422 cannot convert float64 to int32"))
    cap.call("PATCH", f"{deploys}/d", {"spec": {"replicas": "3"}}, ctype=SMP, record=(
        "strategic merge patch replicas \"3\"", "422 unrecognized type: int32"))
    apply = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  replicas: "
    cap.call("PATCH", f"{deploys}/d", apply + "4294967298\n", ctype=APPLY,
             query={"fieldManager": "cases", "force": "true"}, record=(
                 "server-side apply replicas 4294967298", "200: wrapped to 2"))
    cap.call("PATCH", f"{deploys}/d", apply + "1.5\n", ctype=APPLY,
             query={"fieldManager": "cases", "force": "true"}, record=(
                 "server-side apply replicas 1.5",
                 "500 (no reason): failed to convert new object (/d; ...) ... cannot convert "
                 "float64 to int32"))
    cap.call("POST", CRDS, crd("widgets", "Widget", {"spec": {"type": "object", "properties": {
        "size": {"type": "integer", "format": "int32"},
        "big": {"type": "integer", "format": "int64"},
        "count": {"type": "integer"}, "ratio": {"type": "number"}}}}))
    established(cap, f"widgets.{GROUP}")
    widgets = f"/apis/{GROUP}/v1/namespaces/cases-5/widgets"
    for name, spec, why in (
            ("w-int32", {"size": 2147483648}, "201: format int32 is not enforced, stored as sent"),
            ("w-int64", {"big": 9223372036854775807}, "201: the largest int64"),
            ("w-over", {"count": 9223372036854775808},
             "422: beyond int64 it is a float64: must be of type integer: \"number\""),
            ("w-whole", {"size": 3.0, "ratio": 2.0}, "201: a whole float is stored as 3"),
            ("w-frac", {"size": 1.5}, "422 must be of type integer: \"number\""),
            ("w-huge", {"size": 1e300}, "422: a float beyond 2^53 is no integer")):
        cap.call("POST", widgets, {"apiVersion": f"{GROUP}/v1", "kind": "Widget",
                                   "metadata": {"name": name}, "spec": spec},
                 record=(f"create Widget {name}", why))
    cap.call("PATCH", f"{widgets}/w-int32", {"spec": {"size": 4294967299}}, ctype=MERGE,
             record=("merge patch a custom resource's int32 field to 4294967299",
                     "200: stored as sent"))


def run_all(cap: Capture) -> None:
    logs = cap.out / "kubectl-logs"
    cleanup(cap)
    try:
        case1_crd_deletion(cap)
        case2_owner_references(cap)
        case3_services(cap)
        case4_printer_columns(cap, logs)
        case5_int32(cap)
    finally:
        cleanup(cap)
        for name, status, demonstrates in cap.index:  # for INDEX.md
            print(f"- `{name}` ({status}) - {demonstrates}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="https://127.0.0.1:6443")
    parser.add_argument("--ca", default="/tmp/realk8s/pki/ca.crt")
    parser.add_argument("--kubeconfig", default="/tmp/realk8s/kubeconfig-admin")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1]
                        / "tests" / "fixtures" / "apiserver-1.28-issue22")
    args = parser.parse_args()
    cap = Capture(args.server, args.ca, args.kubeconfig, args.out)
    try:
        run_all(cap)
    finally:
        cap.close()


if __name__ == "__main__":
    main()
