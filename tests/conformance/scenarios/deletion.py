"""Deletion: garbage collection (background, foreground, orphan, blockOwnerDeletion,
dangling owners), finalizers, preconditions, collections, namespace deletion.

Owners and dependents are ConfigMaps: no controller of a cluster touches them, so the only
actor besides the scenario is the garbage collector, which the Polls wait for."""

from __future__ import annotations

from typing import Any

from conformance.steps import (
    ABSENT,
    PRESENT,
    Poll,
    Scenario,
    Watch,
    delete,
    get,
    gone,
    kubectl,
    ns_path,
    patch,
    post,
)

CM = ns_path("configmaps")
HOLD = "diff.example.com/hold"
META = ("metadata.deletionTimestamp", "metadata.finalizers", "metadata.ownerReferences")


def cm(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta},
            "data": {"k": "v"}}


def owned_by(step: str, name: str, **fields: Any) -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "ConfigMap", "name": name,
             "uid": f"{{uid:{step}}}", **fields}]


def options(policy: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": policy}


SCENARIOS = [
    Scenario("gc-background", "deletion", (
        post(CM, cm("owner"), name="owner", pick=("metadata.name",)),
        post(CM, cm("dep", ownerReferences=owned_by("owner", "owner")),
             pick=("metadata.ownerReferences",)),
        delete(f"{CM}/owner"),
        gone(f"{CM}/dep"),
        get(CM, fieldSelector="metadata.name!=kube-root-ca.crt"),
    )),
    Scenario("gc-foreground", "deletion", (
        post(CM, cm("owner"), name="owner", pick=("metadata.name",)),
        post(CM, cm("dep", ownerReferences=owned_by("owner", "owner")),
             pick=("metadata.name",)),
        delete(f"{CM}/owner", options("Foreground"), pick=META),
        gone(f"{CM}/dep"),
        gone(f"{CM}/owner"),
    )),
    Scenario("gc-foreground-blocked", "deletion", (
        post(CM, cm("owner"), name="owner", pick=("metadata.name",)),
        post(CM, cm("dep", finalizers=[HOLD], ownerReferences=owned_by(
            "owner", "owner", blockOwnerDeletion=True)), pick=("metadata.name",)),
        delete(f"{CM}/owner", options("Foreground"), pick=META),
        Poll(f"{CM}/dep", field="metadata.deletionTimestamp", value=PRESENT, pick=META),
        get(f"{CM}/owner", pick=META),
        patch(f"{CM}/dep", {"metadata": {"finalizers": None}}, pick=META),
        gone(f"{CM}/dep"),
        gone(f"{CM}/owner"),
    )),
    Scenario("gc-orphan", "deletion", (
        post(CM, cm("owner"), name="owner", pick=("metadata.name",)),
        post(CM, cm("dep", ownerReferences=owned_by("owner", "owner")),
             pick=("metadata.name",)),
        delete(f"{CM}/owner", options("Orphan"), pick=META),
        gone(f"{CM}/owner"),
        Poll(f"{CM}/dep", field="metadata.ownerReferences", value=ABSENT, pick=META),
    )),
    Scenario("gc-dangling-owner", "deletion", (
        post(CM, cm("dep", ownerReferences=[{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "never-was",
            "uid": "00000000-0000-0000-0000-000000000001"}]), pick=("metadata.name",)),
        post(CM, cm("owner"), name="owner", pick=("metadata.name",)),
        post(CM, cm("dep2", ownerReferences=[
            *owned_by("owner", "owner"),
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "never-was",
             "uid": "00000000-0000-0000-0000-000000000001"}]), pick=("metadata.name",)),
        gone(f"{CM}/dep"),
        Poll(f"{CM}/dep2", field="metadata.ownerReferences.1", value=ABSENT,
             pick=("metadata.ownerReferences",)),
    )),
    Scenario("finalizers", "deletion", (
        post(CM, cm("c", finalizers=[HOLD], labels={"w": "1"}), name="created"),
        delete(f"{CM}/c"),
        delete(f"{CM}/c", pick=META),
        patch(f"{CM}/c", {"data": {"k": "changed"}}, pick=("data", *META)),
        patch(f"{CM}/c", {"metadata": {"finalizers": [HOLD, "diff.example.com/new"]}}),
        patch(f"{CM}/c", {"metadata": {"deletionTimestamp": None}}, pick=META),
        patch(f"{CM}/c", {"metadata": {"finalizers": []}}, pick=META),
        get(f"{CM}/c"),
        Watch(CM, since="created", count=3, query={"labelSelector": "w=1"}),
    )),
    Scenario("delete-options", "deletion", (
        post(CM, cm("c"), name="c"),
        delete(f"{CM}/c", {"preconditions": {"uid": "00000000-0000-0000-0000-000000000001"}}),
        delete(f"{CM}/c", {"preconditions": {"resourceVersion": "1"}}),
        delete(f"{CM}/c", {"dryRun": ["All"]}),
        get(f"{CM}/c", pick=("metadata.name",)),
        delete(f"{CM}/c", {"propagationPolicy": "Sideways"}),
        delete(f"{CM}/c", {"gracePeriodSeconds": -5}),
        delete(f"{CM}/c", {"preconditions": {"uid": "{uid:c}", "resourceVersion": "{rv:c}"}}),
        delete(f"{CM}/c"),
    )),
    Scenario("delete-collection", "deletion", (
        post(CM, cm("a", labels={"team": "x"}), pick=("metadata.name",)),
        post(CM, cm("b", labels={"team": "x"}), pick=("metadata.name",)),
        post(CM, cm("c", labels={"team": "y"}), pick=("metadata.name",)),
        delete(CM, labelSelector="team=x"),
        get(CM, labelSelector="team"),
        kubectl("delete", "configmaps", "-l", "team=y"),
        kubectl("get", "configmaps", "-l", "team"),
    )),
    Scenario("namespace-deletion", "deletion", (
        post(CM, cm("held", finalizers=[HOLD]), pick=("metadata.name",)),
        post(CM, cm("plain"), pick=("metadata.name",)),
        delete("/api/v1/namespaces/{ns}", pick=("metadata.deletionTimestamp", "spec",
                                                "status")),
        post(CM, cm("late")),
        Poll(f"{CM}/held", field="metadata.deletionTimestamp", value=PRESENT, pick=META),
        gone(f"{CM}/plain"),
        Poll("/api/v1/namespaces/{ns}", field="status.conditions.4.status", value="True",
             pick=("spec", "status")),
        kubectl("get", "namespace", "{ns}"),
        patch(f"{CM}/held", {"metadata": {"finalizers": None}}, pick=META),
        gone("/api/v1/namespaces/{ns}"),
        post(CM, cm("after")),
    )),
]
