"""Strategic merge patch with the built-ins' merge keys, JSON patch, ownerReferences."""

from __future__ import annotations

from typing import Any

from conformance.steps import Scenario, get, ns_path, patch, post

CM = ns_path("configmaps")
DEPLOY = ns_path("deployments", group="apps")
# What these patches touch, not every default of a pod template (scenario deployment-defaults)
CONTAINERS = tuple(f"spec.template.spec.containers.*.{f}" for f in ("name", "image", "args"))
ENV_PORTS = tuple(f"spec.template.spec.containers.*.{f}" for f in (
    "env", "ports.*.containerPort", "ports.*.name", "volumeMounts"))
VOLUMES = tuple(f"spec.template.spec.volumes.*.{f}" for f in (
    "name", "emptyDir", "configMap.name", "secret.secretName"))


def deployment(name: str, pod_spec: dict[str, Any]) -> dict[str, Any]:
    """A Deployment with no replicas (its controller makes no pods to race with)."""
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": pod_spec}}}


def container(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "registry.example/app:1", **fields}


def configmap(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta},
            "data": {"k": "v"}}


def owner_ref(step: str, name: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": f"{{uid:{step}}}",
            **fields}


SCENARIOS = [
    Scenario("smp-containers", "patching", (
        post(DEPLOY, deployment("d", {"containers": [
            container("a", args=["x"]), container("b"), container("c")]}), pick=CONTAINERS),
        patch(f"{DEPLOY}/d", {"spec": {"template": {"spec": {"containers": [
            {"name": "b", "image": "registry.example/app:2"},
            {"name": "new", "image": "registry.example/new:1"}]}}}}, "strategic",
            pick=CONTAINERS),
        patch(f"{DEPLOY}/d", {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "$patch": "delete"}, {"name": "a", "args": None}]}}}},
            "strategic", pick=CONTAINERS),
        patch(f"{DEPLOY}/d", {"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "new"}, {"name": "a"}, {"name": "b"}],
            "containers": [{"name": "a", "image": "registry.example/app:3"}]}}}},
            "strategic", pick=CONTAINERS),
        patch(f"{DEPLOY}/d", {"spec": {"template": {"spec": {"containers": [
            {"name": "only", "image": "registry.example/only:1"}]}}}}, "merge",
            pick=CONTAINERS),
    )),
    Scenario("smp-env-ports-mounts", "patching", (
        post(DEPLOY, deployment("d", {
            "containers": [container(
                "app", env=[{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                ports=[{"containerPort": 80, "name": "http"},
                       {"containerPort": 443, "name": "https"}],
                volumeMounts=[{"name": "v", "mountPath": "/a"}])],
            "volumes": [{"name": "v", "emptyDir": {}}]}), pick=ENV_PORTS),
        patch(f"{DEPLOY}/d", {"spec": {"template": {"spec": {"containers": [{
            "name": "app",
            "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"},
                    {"name": "A", "$patch": "delete"}],
            "ports": [{"containerPort": 443, "name": "tls"}, {"containerPort": 8080}],
            "volumeMounts": [{"mountPath": "/b", "name": "v"}]}]}}}}, "strategic",
            pick=ENV_PORTS),
        patch(f"{DEPLOY}/d", {"spec": {"template": {"spec": {"containers": [{
            "name": "app", "env": [{"name": "B", "valueFrom": {"fieldRef": {
                "fieldPath": "metadata.name"}}, "value": None}]}]}}}}, "strategic",
            pick=ENV_PORTS),
        patch(f"{DEPLOY}/d", {"spec": {"template": {"spec": {"containers": [{
            "name": "app", "env": [{"name": "B", "value": "x"}]}]}}}}, "strategic",
            pick=ENV_PORTS),
    ), differs="strategic merge orders merged lists (env, ports, volumeMounts) "
       "otherwise than a cluster (normalizeElementOrder); no fieldRef.apiVersion default "
       "and no check of an env var with both value and valueFrom"),
    Scenario("smp-volumes", "patching", (
        post(DEPLOY, deployment("d", {
            "containers": [container("app")],
            "volumes": [{"name": "a", "emptyDir": {}},
                        {"name": "b", "configMap": {"name": "cm-b"}}]}), pick=VOLUMES),
        patch(f"{DEPLOY}/d", {"spec": {"template": {"spec": {"volumes": [
            {"name": "c", "secret": {"secretName": "s"}},
            {"name": "b", "configMap": {"name": "cm-b2"}}]}}}}, "strategic", pick=VOLUMES),
        patch(f"{DEPLOY}/d", {"spec": {"template": {"spec": {"volumes": [
            {"name": "a", "$retainKeys": ["name", "configMap"],
             "configMap": {"name": "cm-a"}}]}}}}, "strategic", pick=VOLUMES),
        patch(f"{DEPLOY}/d", {"spec": {"template": {"spec": {"volumes": [
            {"name": "b", "emptyDir": {}}]}}}}, "strategic", pick=VOLUMES),
        patch(f"{DEPLOY}/d", {"spec": {"template": {"spec": {"volumes": [
            {"name": "c", "$patch": "delete"}]}}}}, "strategic", pick=VOLUMES),
    ), differs="strategic merge orders merged volumes otherwise than a cluster "
       "(normalizeElementOrder) and ignores $retainKeys"),
    Scenario("smp-metadata-lists", "patching", (
        post(CM, configmap("c", finalizers=["a.example.com/one"], labels={"x": "1"})),
        patch(f"{CM}/c", {"metadata": {"finalizers": ["b.example.com/two"],
                                       "labels": {"y": "2", "x": None}}}, "strategic"),
        patch(f"{CM}/c", {"metadata": {
            "$deleteFromPrimitiveList/finalizers": ["a.example.com/one"]}}, "strategic"),
        patch(f"{CM}/c", {"metadata": {"finalizers": ["c.example.com/three"]}}, "merge"),
        patch(f"{CM}/c", {"metadata": {"finalizers": None}}, "strategic"),
        patch(f"{CM}/c", {"data": {"$patch": "replace", "new": "only"}}, "strategic"),
    )),
    Scenario("smp-owner-references", "patching", (
        post(CM, configmap("o1"), name="o1", pick=("metadata.name",)),
        post(CM, configmap("o2"), name="o2", pick=("metadata.name",)),
        post(CM, configmap("dep", ownerReferences=[owner_ref("o1", "o1")]),
             pick=("metadata.ownerReferences",)),
        patch(f"{CM}/dep", {"metadata": {"ownerReferences": [owner_ref("o2", "o2")]}},
              "strategic", pick=("metadata.ownerReferences",)),
        patch(f"{CM}/dep", {"metadata": {"ownerReferences": [
            owner_ref("o1", "o1", controller=True)]}}, "strategic",
            pick=("metadata.ownerReferences",)),
        patch(f"{CM}/dep", {"metadata": {"ownerReferences": [
            owner_ref("o2", "o2", controller=True)]}}, "strategic",
            pick=("metadata.ownerReferences",)),
        patch(f"{CM}/dep", {"metadata": {"ownerReferences": [
            {"uid": "{uid:o1}", "$patch": "delete"}]}}, "strategic",
            pick=("metadata.ownerReferences",)),
    )),
    Scenario("owner-reference-validation", "patching", (
        post(CM, configmap("o1"), name="o1", pick=("metadata.name",)),
        post(CM, configmap("no-uid", ownerReferences=[{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "o1"}])),
        post(CM, configmap("no-kind", ownerReferences=[{
            "apiVersion": "v1", "name": "o1", "uid": "{uid:o1}"}])),
        post(CM, configmap("bad-api", ownerReferences=[
            owner_ref("o1", "o1") | {"apiVersion": "not/a/version"}])),
        post(CM, configmap("two-controllers", ownerReferences=[
            owner_ref("o1", "o1", controller=True),
            owner_ref("o1", "o1b", controller=True) | {
                "uid": "00000000-0000-0000-0000-000000000001"}])),
        post(CM, configmap("ok", ownerReferences=[
            owner_ref("o1", "o1", controller=True, blockOwnerDeletion=True)]),
             pick=("metadata.ownerReferences",)),
    )),
    Scenario("json-patch", "patching", (
        post(CM, configmap("c", labels={"a": "1"})),
        patch(f"{CM}/c", [{"op": "add", "path": "/data/n", "value": "2"},
                          {"op": "replace", "path": "/metadata/labels/a", "value": "9"},
                          {"op": "copy", "from": "/data/k", "path": "/data/copy"},
                          {"op": "move", "from": "/data/n", "path": "/data/moved"}], "json"),
        patch(f"{CM}/c", [{"op": "test", "path": "/data/k", "value": "wrong"},
                          {"op": "remove", "path": "/data/k"}], "json"),
        patch(f"{CM}/c", [{"op": "remove", "path": "/data/missing"}], "json"),
        patch(f"{CM}/c", [{"op": "jump", "path": "/data"}], "json"),
        patch(f"{CM}/c", {"op": "add"}, "json"),
        get(f"{CM}/c"),
    )),
    Scenario("malformed-bodies", "patching", (
        post(CM, configmap("c")),
        post(CM, "{not json"),
        patch(f"{CM}/c", "{not json", "merge"),
        patch(f"{CM}/c", "{not json", "strategic"),
        patch(f"{CM}/c", "[{not json", "json"),
        patch(f"{CM}/c", "data: [unclosed", "apply", fieldManager="alice"),
    ), differs="the texts of Go's JSON and YAML parser errors are not reproduced"),
    Scenario("patch-errors", "patching", (
        post(CM, configmap("c")),
        patch(f"{CM}/missing", {"data": {"a": "b"}}, "strategic"),
        patch(f"{CM}/c", {"metadata": {"name": "renamed"}}, "merge"),
        patch(f"{CM}/c", {"data": {"k": 5}}, "merge"),
        patch(f"{CM}/c", ["not", "an", "object"], "merge"),
    )),
]
