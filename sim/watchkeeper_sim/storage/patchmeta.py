"""The ``patchStrategy`` / ``patchMergeKey`` tags of the built-in kinds' Go types.

A strategic merge patch merges a list only where the Go type says so; every other list is
replaced whole. ObjectMeta's ``finalizers`` (a set of strings) and ``ownerReferences``
(merged by ``uid``) are tagged on every kind (k8s.io/apimachinery ObjectMeta); the pod
template's lists (containers and env by ``name``, ports by ``containerPort``, volume mounts
by ``mountPath``...), Service ports (by ``port``) and status conditions (by ``type``) are
the other common ones. Paths leave out list indexes.
"""

from __future__ import annotations

from watchkeeper_sim.model import ResourceType

Path = tuple[str, ...]
# the lists tagged patchStrategy "merge" -> their patchMergeKey ("" for a list of scalars);
# "retainKeys" only shapes the patches clients compute, the server merges without it
Meta = dict[Path, str]


def _under(prefix: Path, meta: Meta) -> Meta:
    return {(*prefix, *path): tags for path, tags in meta.items()}


OBJECT_META: Meta = {("finalizers",): "", ("ownerReferences",): "uid"}
_CONTAINER: Meta = {("ports",): "containerPort", ("env",): "name",
                    ("volumeMounts",): "mountPath", ("volumeDevices",): "devicePath"}
_POD_SPEC: Meta = {
    ("volumes",): "name",
    ("containers",): "name", **_under(("containers",), _CONTAINER),
    ("initContainers",): "name", **_under(("initContainers",), _CONTAINER),
    ("ephemeralContainers",): "name", **_under(("ephemeralContainers",), _CONTAINER),
    ("imagePullSecrets",): "name", ("hostAliases",): "ip",
    ("topologySpreadConstraints",): "topologyKey", ("resourceClaims",): "name",
    ("schedulingGates",): "name",
}
_TEMPLATE: Meta = {**_under(("metadata",), OBJECT_META), **_under(("spec",), _POD_SPEC)}
_CONDITIONS: Meta = {("status", "conditions"): "type"}
_WORKLOAD: Meta = {**_under(("spec", "template"), _TEMPLATE), **_CONDITIONS}

KINDS: dict[tuple[str, str], Meta] = {
    ("", "Pod"): {**_under(("spec",), _POD_SPEC), **_CONDITIONS, ("status", "podIPs"): "ip"},
    ("", "Service"): {("spec", "ports"): "port", **_CONDITIONS},
    ("", "Namespace"): _CONDITIONS,
    ("apps", "Deployment"): _WORKLOAD,
    ("apps", "ReplicaSet"): _WORKLOAD,
    ("apps", "StatefulSet"): _WORKLOAD,
    ("apps", "DaemonSet"): _WORKLOAD,
    ("batch", "Job"): _WORKLOAD,
    ("batch", "CronJob"): _under(("spec", "jobTemplate"), {
        **_under(("metadata",), OBJECT_META), **_under(("spec", "template"), _TEMPLATE)}),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"): _CONDITIONS,
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"): _CONDITIONS,
}


def meta_of(rt: ResourceType) -> Meta:
    """The merge tags of ``rt``'s kind; ObjectMeta's apply to every built-in kind."""
    return {**_under(("metadata",), OBJECT_META), **KINDS.get((rt.group, rt.kind), {})}
