"""The real kubectl against the simulator: get, create, apply, patch, watch, delete, CRDs, 403.

Never passes --validate=false: kubectl must find fieldValidation in the simulator's OpenAPI
v3 documents (DESIGN.md section 7). /usr/bin/kubectl may be gcloud's dispatcher, which GETs
/version and runs the matching kubectl.1.NN (1.28 for this simulator); WATCHKEEPER_KUBECTL
picks another binary, e.g. /usr/lib/google-cloud-sdk/bin/kubectl.1.32.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from watchkeeper_sim.server import ApiServer

from ..contract._issue22 import REF22, load22

KUBECTL = os.environ.get("WATCHKEEPER_KUBECTL", "/usr/bin/kubectl")

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which(KUBECTL) is None, reason=f"{KUBECTL} not installed"),
]

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                  "shortNames": ["wd"]},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {
                    "size": {"type": "integer"}, "color": {"type": "string"}}},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            }}},
        }],
    },
}


@dataclass
class Result:
    rc: int
    out: str
    err: str


class Kubectl:
    """Runs kubectl with a kubeconfig for the simulator and a private, fresh cache dir."""

    def __init__(self, srv: ApiServer, tmp: Path) -> None:
        self.srv = srv
        self.tmp = tmp
        self.kubeconfig = srv.kubeconfig(tmp / "kubeconfig", "admin")
        self.cache = tmp / "kube-cache"

    def argv(self, *args: str) -> list[str]:
        return [KUBECTL, "--kubeconfig", self.kubeconfig, "--cache-dir", str(self.cache), *args]

    async def __call__(self, *args: str, stdin: str | None = None,
                       timeout: float = 60) -> Result:
        proc = await asyncio.create_subprocess_exec(
            *self.argv(*args),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "HOME": str(self.tmp)},
        )
        out, err = await asyncio.wait_for(
            proc.communicate(stdin.encode() if stdin is not None else None), timeout)
        return Result(proc.returncode or 0, out.decode(), err.decode())

    async def ok(self, *args: str, stdin: str | None = None) -> str:
        res = await self(*args, stdin=stdin)
        assert res.rc == 0, f"kubectl {' '.join(args)} failed ({res.rc}):\n{res.err}{res.out}"
        return res.out

    def manifest(self, name: str, obj: Mapping[str, Any]) -> str:
        path = self.tmp / name
        path.write_text(yaml.safe_dump(obj))
        return str(path)


@pytest.fixture
async def kubectl(tmp_path: Path) -> AsyncIterator[Kubectl]:
    # TLS: kubectl does not send bearer tokens to a plain-http server.
    async with ApiServer(tls=True) as srv:
        yield Kubectl(srv, tmp_path)


def rows(table_text: str) -> list[list[str]]:
    return [line.split() for line in table_text.strip().splitlines()]


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"app": "demo"}}, "data": data}


async def test_get_prints_server_side_tables(kubectl: Kubectl) -> None:
    kubectl.srv.create_object(configmap("pre-existing", k="v"))
    table = rows(await kubectl.ok("get", "configmaps"))
    assert table[0] == ["NAME", "DATA", "AGE"]
    assert table[1][:2] == ["pre-existing", "1"]
    namespaces = rows(await kubectl.ok("get", "namespaces"))
    assert namespaces[0] == ["NAME", "STATUS", "AGE"]
    assert next(r for r in namespaces if r[0] == "default")[:2] == ["default", "Active"]
    one = rows(await kubectl.ok("get", "cm", "pre-existing", "--no-headers"))
    assert one[0][:2] == ["pre-existing", "1"]
    as_json = json.loads(await kubectl.ok("get", "cm", "pre-existing", "-o", "json"))
    assert as_json["data"] == {"k": "v"} and as_json["kind"] == "ConfigMap"
    listed = json.loads(await kubectl.ok("get", "cm", "-o", "json"))
    assert [i["metadata"]["name"] for i in listed["items"]] == ["pre-existing"]
    as_yaml = yaml.safe_load(await kubectl.ok("get", "cm", "pre-existing", "-o", "yaml"))
    assert as_yaml["metadata"]["labels"] == {"app": "demo"}


async def test_discovery_is_aggregated_and_cached(kubectl: Kubectl) -> None:
    srv = kubectl.srv

    def paths() -> list[str]:  # the gcloud dispatcher's own /version probes left out
        return [r.path for r in srv.requests if r.path != "/version"]

    await kubectl.ok("get", "configmaps")
    cold = paths()
    assert cold == ["/api", "/apis", "/api/v1/namespaces/default/configmaps"]  # kubectl-logs/01
    assert all(r.status == 200 for r in srv.requests)
    await kubectl.ok("get", "configmaps")
    assert paths()[len(cold):] == ["/api/v1/namespaces/default/configmaps"]  # kubectl-logs/02
    resources = rows(await kubectl.ok("api-resources"))
    assert ["configmaps", "cm", "v1", "true", "ConfigMap"] in resources
    assert ["deployments", "deploy", "apps/v1", "true", "Deployment"] in resources


async def test_create_apply_patch_delete(kubectl: Kubectl) -> None:
    srv = kubectl.srv
    out = await kubectl.ok("create", "-f", kubectl.manifest("created.yaml",
                                                            configmap("created", a="1")))
    assert "configmap/created created" in out
    assert srv.get_object("v1", "ConfigMap", "created")["data"] == {"a": "1"}

    # Client-side apply: create, then a change (strategic merge patch for a built-in).
    out = await kubectl.ok("apply", "-f", kubectl.manifest("csa.yaml",
                                                           configmap("csa", color="blue")))
    assert "configmap/csa created" in out
    out = await kubectl.ok("apply", "-f", kubectl.manifest("csa2.yaml",
                                                           configmap("csa", color="red", size="3")))
    assert "configmap/csa configured" in out
    stored = srv.get_object("v1", "ConfigMap", "csa")
    assert stored["data"] == {"color": "red", "size": "3"}
    assert "kubectl.kubernetes.io/last-applied-configuration" in stored["metadata"]["annotations"]

    # Server-side apply, on a new object and over the client-side-applied one.
    out = await kubectl.ok("apply", "--server-side", "-f",
                           kubectl.manifest("ssa.yaml", configmap("ssa", color="green")))
    assert "configmap/ssa serverside-applied" in out
    # Over the client-side-applied object with the same values (kubectl-logs/06), then with a
    # change: as on a real server, that conflicts with kubectl-client-side-apply until forced.
    out = await kubectl.ok("apply", "--server-side", "-f", kubectl.manifest("csa2.yaml", configmap(
        "csa", color="red", size="3")))
    assert "configmap/csa serverside-applied" in out
    pink = kubectl.manifest("csa3.yaml", configmap("csa", color="pink", size="3"))
    conflict = await kubectl("apply", "--server-side", "-f", pink)
    assert conflict.rc != 0 and "conflict" in conflict.err
    out = await kubectl.ok("apply", "--server-side", "--force-conflicts", "-f", pink)
    assert "configmap/csa serverside-applied" in out
    assert srv.get_object("v1", "ConfigMap", "csa")["data"]["color"] == "pink"

    await kubectl.ok("patch", "cm", "ssa", "--type", "merge", "-p", '{"data":{"x":"1"}}')
    await kubectl.ok("patch", "cm", "ssa", "--type", "json",
                     "-p", '[{"op":"add","path":"/data/y","value":"2"}]')
    assert srv.get_object("v1", "ConfigMap", "ssa")["data"] == {"color": "green", "x": "1",
                                                                 "y": "2"}

    out = await kubectl.ok("delete", "cm", "ssa")
    assert 'configmap "ssa" deleted' in out
    missing = await kubectl("get", "cm", "ssa")
    assert missing.rc != 0 and "NotFound" in missing.err
    again = await kubectl("delete", "cm", "ssa")
    assert again.rc == 1 and 'configmaps "ssa" not found' in again.err


async def test_get_watch_prints_rows_for_changes(kubectl: Kubectl) -> None:
    srv = kubectl.srv
    srv.create_object(configmap("before", k="v"))
    proc = await asyncio.create_subprocess_exec(
        *kubectl.argv("get", "configmaps", "--watch"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": str(kubectl.tmp)},
    )
    assert proc.stdout is not None
    lines: list[list[str]] = []

    async def read_until(predicate_count: int, timeout: float = 30) -> None:
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout
        while len(lines) < predicate_count:
            line = await asyncio.wait_for(proc.stdout.readline(),
                                          max(0.1, deadline - time.monotonic()))
            assert line, "kubectl get -w ended early"
            lines.append(line.decode().split())

    try:
        await read_until(2)  # header + the existing object
        assert lines[0] == ["NAME", "DATA", "AGE"] and lines[1][0] == "before"
        # Wait until kubectl's watch is open before changing things.
        for _ in range(200):
            if srv.count(is_watch=True):
                break
            await asyncio.sleep(0.05)
        srv.create_object(configmap("watched", a="1"))
        await read_until(3)
        obj = srv.get_object("v1", "ConfigMap", "watched")
        obj["data"]["b"] = "2"
        srv.update_object({"apiVersion": "v1", "kind": "ConfigMap", **obj})
        await read_until(4)
        srv.delete_object("v1", "ConfigMap", "watched")
        await read_until(5)
    finally:
        proc.terminate()
        await proc.wait()
    assert [line[:2] for line in lines[2:]] == [["watched", "1"], ["watched", "2"],
                                                ["watched", "2"]]


async def test_custom_resources(kubectl: Kubectl) -> None:
    out = await kubectl.ok("apply", "-f", kubectl.manifest("crd.yaml", CRD))
    assert "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created" in out
    widget = {"apiVersion": "example.com/v1", "kind": "Widget",
              "metadata": {"name": "w1"}, "spec": {"size": 1, "color": "blue"}}
    out = await kubectl.ok("create", "-f", kubectl.manifest("w1.yaml", widget))
    assert "widget.example.com/w1 created" in out
    widget2 = {**widget, "metadata": {"name": "w2"}}
    out = await kubectl.ok("apply", "-f", kubectl.manifest("w2.yaml", widget2))
    assert "widget.example.com/w2 created" in out
    # A change through client-side apply: kubectl must send a JSON merge patch (custom
    # resources refuse strategic merge patch with 415).
    changed = {**widget2, "spec": {"size": 2, "color": "blue"}}
    out = await kubectl.ok("apply", "-f", kubectl.manifest("w2b.yaml", changed))
    assert "widget.example.com/w2 configured" in out
    assert kubectl.srv.get_object("example.com/v1", "Widget", "w2")["spec"]["size"] == 2
    assert any(r.method == "PATCH" and r.path.endswith("/widgets/w2")
               for r in kubectl.srv.requests)

    table = rows(await kubectl.ok("get", "widgets"))
    assert table[0] == ["NAME", "AGE"]
    assert sorted(r[0] for r in table[1:]) == ["w1", "w2"]
    assert rows(await kubectl.ok("get", "wd", "w1", "--no-headers"))[0][0] == "w1"
    listed = json.loads(await kubectl.ok("get", "widgets.example.com", "-o", "json"))
    assert {i["metadata"]["name"] for i in listed["items"]} == {"w1", "w2"}
    await kubectl.ok("patch", "widget", "w1", "--type", "merge", "-p", '{"spec":{"size":5}}')
    assert kubectl.srv.get_object("example.com/v1", "Widget", "w1")["spec"]["size"] == 5
    out = await kubectl.ok("delete", "widget", "w1")
    assert 'widget.example.com "w1" deleted' in out


async def test_forbidden_user_gets_403(kubectl: Kubectl) -> None:
    token = kubectl.srv.token("limited")
    res = await kubectl("--token", token, "get", "configmaps")
    assert res.rc != 0
    assert "Forbidden" in res.err
    assert 'User "limited" cannot list resource "configmaps"' in res.err
    res = await kubectl("--token", token, "create", "-f",
                        kubectl.manifest("nope.yaml", configmap("nope", a="1")))
    assert res.rc != 0 and "Forbidden" in res.err


async def test_unknown_fields_rejected_like_a_real_server(kubectl: Kubectl) -> None:
    """kubectl's default --validate=strict sends fieldValidation=Strict (kubectl-logs/11): the
    server answers 400 with the strict decoding error (reference 113), nothing is stored."""
    srv = kubectl.srv
    bad = {**configmap("typo", a="1"), "spec": {"x": 1}}
    bad["metadata"] = {**bad["metadata"], "bogus": True}
    res = await kubectl("create", "-f", kubectl.manifest("typo.yaml", bad))
    assert res.rc == 1
    assert ('Error from server (BadRequest): error when creating' in res.err
            and 'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding '
            'error: unknown field "metadata.bogus", unknown field "spec"' in res.err), res.err
    assert any(r.method == "POST" and r.query.get("fieldValidation") == "Strict"
               for r in srv.requests), [(r.method, r.query) for r in srv.requests]
    missing = await kubectl("get", "cm", "typo")
    assert missing.rc != 0 and "NotFound" in missing.err
    # --validate=warn: created without the unknown fields; kubectl prints the server's warnings
    out = await kubectl("create", "--validate=warn", "-f", kubectl.manifest("typo.yaml", bad))
    assert out.rc == 0 and "configmap/typo created" in out.out, out.err
    assert 'Warning: unknown field "metadata.bogus"' in out.err
    assert 'Warning: unknown field "spec"' in out.err
    stored = srv.get_object("v1", "ConfigMap", "typo")
    assert "spec" not in stored and "bogus" not in stored["metadata"]
    # A custom resource: pruned against the CRD's schema, so Strict rejects spec.shape (149).
    await kubectl.ok("apply", "-f", kubectl.manifest("crd.yaml", CRD))
    widget = {"apiVersion": "example.com/v1", "kind": "Widget",
              "metadata": {"name": "w"}, "spec": {"size": 1, "shape": "round"}}
    res = await kubectl("create", "-f", kubectl.manifest("w.yaml", widget))
    assert res.rc == 1 and ('Widget in version "v1" cannot be handled as a Widget: strict '
                            'decoding error: unknown field "spec.shape"' in res.err), res.err
    wrong = {**widget, "spec": {"size": "big"}}
    res = await kubectl("create", "-f", kubectl.manifest("w.yaml", wrong))
    assert res.rc == 1 and 'spec.size in body must be of type integer: "string"' in res.err


async def test_rbac_escalation_is_refused_like_a_real_server(kubectl: Kubectl) -> None:
    """A token user allowed to write Roles and RoleBindings cannot bind herself to
    cluster-admin nor create a */*/* Role (issue 10, item 13): kubectl prints the
    apiserver's ConfirmNoEscalation message, and she still cannot read secrets."""
    token = kubectl.srv.add_user("mallory")
    rbac = "rbac.authorization.k8s.io"
    await kubectl.ok("create", "role", "rbac-writer", "--verb=create,get,list",
                     f"--resource=roles.{rbac},rolebindings.{rbac}")
    # kubectl create rolebinding sends its body as protobuf
    await kubectl.ok("create", "rolebinding", "rbac-writer", "--role=rbac-writer",
                     "--user=mallory")
    held = ('user "mallory" (groups=["system:authenticated"]) is attempting to grant RBAC '
            'permissions not currently held:')
    res = await kubectl("--token", token, "create", "rolebinding", "pwn",
                        "--clusterrole=cluster-admin", "--user=mallory")
    assert res.rc == 1, res.out
    assert (f'error: failed to create rolebinding: rolebindings.{rbac} "pwn" is forbidden: '
            f'{held}\n{{APIGroups:["*"], Resources:["*"], Verbs:["*"]}}\n'
            '{NonResourceURLs:["*"], Verbs:["*"]}') in res.err, res.err
    res = await kubectl("--token", token, "create", "role", "star", "--verb=*",
                        "--resource=*")
    assert res.rc == 1, res.out
    assert (f'roles.{rbac} "star" is forbidden: {held}\n'
            '{APIGroups:[""], Resources:["*"], Verbs:["*"]}') in res.err, res.err
    res = await kubectl("--token", token, "get", "secrets")
    assert res.rc == 1 and 'User "mallory" cannot list resource "secrets"' in res.err
    # a Role within what she holds is created
    out = await kubectl.ok("--token", token, "create", "role", "lister", "--verb=list",
                           f"--resource=roles.{rbac}")
    assert "role.rbac.authorization.k8s.io/lister created" in out
    # and binding what she holds herself is allowed
    out = await kubectl.ok("--token", token, "create", "rolebinding", "lister",
                           "--role=lister", "--user=mallory")
    assert "rolebinding.rbac.authorization.k8s.io/lister created" in out
    stored = kubectl.srv.get_object(f"{rbac}/v1", "RoleBinding", "lister")
    assert stored["subjects"] == [{"kind": "User", "apiGroup": rbac, "name": "mallory"}]
    assert stored["roleRef"] == {"apiGroup": rbac, "kind": "Role", "name": "lister"}


async def test_events_written_through_events_v1_show_in_get_and_describe(
        kubectl: Kubectl) -> None:
    """The runtime's Recorder writes events.k8s.io/v1 Events; kubectl reads core/v1 Events:
    one stored set, two views, as on a real apiserver (issue 10, item 15)."""
    from watchkeeper.controller.recorder import Recorder

    srv = kubectl.srv
    target = srv.create_object(configmap("target", k="v"))
    async with srv.client() as client:
        await Recorder(client, "demo-controller").publish(
            target, reason="Reconciled", note="reconciled by the demo")
    table = rows(await kubectl.ok("get", "events"))
    assert table[0] == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert table[1][1:] == ["Normal", "Reconciled", "configmap/target", "reconciled", "by",
                            "the", "demo"]
    # the same objects through events.k8s.io
    same = rows(await kubectl.ok("get", "events.v1.events.k8s.io"))
    assert same[1][1:4] == ["Normal", "Reconciled", "configmap/target"]
    described = await kubectl.ok("describe", "configmap", "target")
    events = described[described.index("Events:"):].splitlines()
    assert events[1].split() == ["Type", "Reason", "Age", "From", "Message"]
    assert events[3].split()[:2] == ["Normal", "Reconciled"]
    assert events[3].split()[3:] == ["demo-controller", "reconciled", "by", "the", "demo"]
    listed = json.loads(await kubectl.ok("get", "events", "-o", "json"))
    assert listed["items"][0]["message"] == "reconciled by the demo"
    assert listed["items"][0]["reportingComponent"] == "demo-controller"


async def test_custom_resources_print_additional_printer_columns(kubectl: Kubectl) -> None:
    crd = json.loads(json.dumps(CRD))
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = [
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
        {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
        {"name": "Secret", "type": "string", "jsonPath": ".spec.secret", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    await kubectl.ok("apply", "-f", kubectl.manifest("crd.yaml", crd))
    await kubectl.ok("create", "-f", kubectl.manifest("w1.yaml", {
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"},
        "spec": {"size": 4, "color": "red"}}))
    table = rows(await kubectl.ok("get", "widgets"))
    assert table[0] == ["NAME", "SIZE", "COLOR", "AGE"]
    assert table[1][:3] == ["w1", "4", "red"]
    wide = rows(await kubectl.ok("get", "widgets", "-o", "wide"))
    assert wide[0] == ["NAME", "SIZE", "COLOR", "SECRET", "AGE"]
    assert wide[1][:3] == ["w1", "4", "red"] and len(wide[1]) == 4  # null cell: blank


def _printed(log: str) -> str:
    """kubectl's stdout in a captured -v=8 log, the date column's ages left out."""
    out = log.split("--- stdout ---\n", 1)[1].split("--- stderr", 1)[0]
    return re.sub(r"\b(WHEN|\d+y\d+d)\b\s+", "", out)


async def test_jsonpath_printer_columns_print_as_on_a_real_server(kubectl: Kubectl) -> None:
    """Issue 22, case 4: `kubectl get` of a CRD whose columns use JSONPath filters, unions,
    slices and recursive descent prints what it printed against kube-apiserver 1.28.7
    (tests/fixtures/apiserver-1.28-issue22/kubectl-logs)."""
    kubectl.srv.create_object({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": "cases-4"}})
    for number in (59, 60):  # the CRD and its custom resource, as the capture made them
        manifest = kubectl.tmp / f"{number}.json"  # JSON: YAML would read the tag y as true
        manifest.write_text(json.dumps(load22(number)["request"]["body"]))
        await kubectl.ok("create", "-f", str(manifest), "-n", "cases-4")
    for args, log in ((("get", "printers", "-n", "cases-4"), "01-get-printers.log"),
                      (("get", "printers", "-n", "cases-4", "-o", "wide"),
                       "02-get-printers-wide.log")):
        printed = await kubectl.ok(*args)
        assert _printed(f"--- stdout ---\n{printed}--- stderr") == _printed(
            (REF22 / "kubectl-logs" / log).read_text())
