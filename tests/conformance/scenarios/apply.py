"""Server-side apply: ownership, conflicts, force, removal on re-apply, managedFields,
status, lists with merge keys; and kubectl's applies (server-side and client-side)."""

from __future__ import annotations

from typing import Any

from conformance.scenarios.crds import STR, cr, crd, install, obj, widget
from conformance.steps import Scenario, apply, get, kubectl, ns_path, patch, post, put

CM = ns_path("configmaps")
DEPLOY = ns_path("deployments", group="apps")
MANAGED = ("metadata.managedFields",)
CONTAINERS = tuple(f"spec.template.spec.containers.*.{f}" for f in ("name", "image", "env"))


def cm(name: str, data: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": name, **meta}}
    if data is not None:
        body["data"] = data
    return body


def deployment(containers: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "d"}},
                     "template": {"metadata": {"labels": {"app": "d"}},
                                  "spec": {"containers": containers}}}}


LISTS = {"type": "array", "x-kubernetes-list-type": "map",
         "x-kubernetes-list-map-keys": ["name"],
         "items": {"type": "object", "required": ["name"],
                   "properties": {"name": STR, "value": STR}}}
SSA_CRD = crd("widgets", "Widget", obj(
    color=STR, size={"type": "integer"}, items=LISTS,
    tags={"type": "array", "x-kubernetes-list-type": "set", "items": STR},
    atomic={"type": "array", "items": STR}),
    status=obj(phase=STR), subresources={"status": {}})

SCENARIOS = [
    Scenario("ssa-create-reapply", "apply", (
        apply(f"{CM}/c", cm("c", {"a": "1"}, labels={"l": "1"}), "alice", name="c1"),
        apply(f"{CM}/c", cm("c", {"a": "1"}, labels={"l": "1"}), "alice"),
        apply(f"{CM}/c", cm("c", {"a": "1", "b": "2"}), "alice"),
        get(f"{CM}/c"),
        apply(f"{CM}/c", cm("c", {"a": "1"}), "alice", dryRun="All"),
        get(f"{CM}/c"),
    ), managed_fields=True),
    Scenario("ssa-conflicts-force", "apply", (
        apply(f"{CM}/c", cm("c", {"a": "1", "b": "1"}), "alice"),
        apply(f"{CM}/c", cm("c", {"a": "2", "c": "3"}), "bob"),
        apply(f"{CM}/c", cm("c", {"a": "1", "c": "3"}), "bob"),
        apply(f"{CM}/c", cm("c", {"a": "2", "b": "2"}), "bob", force=True),
        apply(f"{CM}/c", cm("c", {"a": "1"}), "alice"),
        get(f"{CM}/c"),
    ), managed_fields=True),
    Scenario("ssa-field-removal", "apply", (
        apply(f"{CM}/c", cm("c", {"a": "1", "b": "2", "c": "3"}, labels={"x": "1"}),
              "alice"),
        apply(f"{CM}/c", cm("c", {"b": "2"}), "bob"),
        apply(f"{CM}/c", cm("c", {"a": "1"}), "alice"),
        patch(f"{CM}/c", {"data": {"d": "4"}}, fieldManager="editor"),
        apply(f"{CM}/c", cm("c", {"a": "1", "d": "5"}), "alice"),
        apply(f"{CM}/c", cm("c", {}), "bob"),
        apply(f"{CM}/c", cm("c"), "alice"),
    ), managed_fields=True,
       differs="the simplified field ownership of server-side apply: applying a value "
       "equal to the current one does not make the applier a co-owner"),
    Scenario("ssa-after-update", "apply", (
        post(CM, cm("c", {"a": "1"}), fieldManager="creator"),
        put(f"{CM}/c", cm("c", {"a": "1", "b": "2"}), fieldManager="replacer"),
        patch(f"{CM}/c", {"data": {"c": "3"}}, "strategic", fieldManager="patcher"),
        apply(f"{CM}/c", cm("c", {"a": "9", "b": "9", "c": "9"}), "applier"),
        apply(f"{CM}/c", cm("c", {"a": "1", "b": "2", "c": "3"}), "applier"),
        patch(f"{CM}/c", {"data": {"a": "10"}}, "merge"),
        get(f"{CM}/c"),
    ), managed_fields=True,
       differs="the simplified field ownership of server-side apply: an Update entry "
       "lists \".\" for a map it only added keys to, and a manager whose fields "
       "all moved keeps no empty entry"),
    Scenario("ssa-custom-resource", "apply", (
        *install(SSA_CRD),
        apply(cr("widgets", "w1"), widget("w1", {
            "color": "red", "items": [{"name": "a", "value": "1"}, {"name": "b"}],
            "tags": ["x"], "atomic": ["p", "q"]}), "alice"),
        apply(cr("widgets", "w1"), widget("w1", {
            "items": [{"name": "c", "value": "3"}], "tags": ["y"]}), "bob"),
        apply(cr("widgets", "w1"), widget("w1", {"atomic": ["r"]}), "bob"),
        apply(cr("widgets", "w1"), widget("w1", {
            "color": "red", "items": [{"name": "b", "value": "2"}], "tags": ["x"],
            "atomic": ["p", "q"]}), "alice"),
        apply(cr("widgets", "w1", sub="status"), widget("w1", status={"phase": "Ready"}),
              "controller"),
        apply(cr("widgets", "w1"), widget("w1", status={"phase": "Ignored"}), "alice"),
        get(cr("widgets", "w1")),
    ), managed_fields=True,
       differs="server-side apply treats lists as atomic: x-kubernetes-list-type map "
       "and set lists are not merged item by item"),
    Scenario("ssa-deployment-containers", "apply", (
        apply(f"{DEPLOY}/d", deployment([
            {"name": "app", "image": "registry.example/app:1",
             "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]), "alice",
            pick=(*CONTAINERS, *MANAGED)),
        apply(f"{DEPLOY}/d", {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": [
                {"name": "sidecar", "image": "registry.example/side:1"}]}}}}, "bob",
            pick=(*CONTAINERS, *MANAGED)),
        apply(f"{DEPLOY}/d", deployment([
            {"name": "app", "image": "registry.example/app:2",
             "env": [{"name": "A", "value": "1"}]}]), "alice",
            pick=(*CONTAINERS, *MANAGED)),
        apply(f"{DEPLOY}/d", {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": [
                {"name": "app", "image": "registry.example/app:3"}]}}}}, "bob",
            pick=CONTAINERS),
    ), managed_fields=True,
       differs="server-side apply treats lists as atomic: containers are not merged by "
       "name"),
    Scenario("ssa-invalid", "apply", (
        apply(f"{CM}/c", cm("c", {"a": "1"}), ""),
        apply(f"{CM}/c", cm("other", {"a": "1"}), "alice"),
        apply(f"{CM}/c", {"metadata": {"name": "c"}, "data": {"a": "1"}}, "alice"),
        apply(f"{CM}/c", cm("c", {"a": "1"}) | {"kind": "Secret"}, "alice"),
        apply(f"{CM}/c", cm("c", {"a": "1"}, managedFields=[{"manager": "x"}]), "alice"),
    ), managed_fields=True),
    Scenario("kubectl-apply-server-side", "apply", (
        kubectl("apply", "--server-side", "-f", "-", stdin=(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: '1'\n")),
        kubectl("apply", "--server-side", "--field-manager", "other", "-f", "-", stdin=(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: '2'\n")),
        kubectl("apply", "--server-side", "--field-manager", "other", "--force-conflicts",
                "-f", "-", stdin=(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"
                    "data:\n  a: '2'\n")),
        kubectl("get", "configmap", "c", "-o", "json", "--show-managed-fields"),
    ), managed_fields=True),
    Scenario("kubectl-apply-client-side", "apply", (
        kubectl("apply", "-f", "-", stdin=(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  labels: {a: '1'}\n"
            "data:\n  a: '1'\n  b: '2'\n")),
        kubectl("patch", "configmap", "c", "-p", '{"data":{"z":"26"}}'),
        kubectl("apply", "-f", "-", stdin=(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: '1'\n")),
        kubectl("get", "configmap", "c", "-o", "json"),
    )),
]
