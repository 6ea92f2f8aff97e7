"""The integer fields of the built-in kinds, and what their Go types make of a number.

kube-apiserver decodes a POST/PUT body (and a JSON or merge patch's result) with Go's
encoding/json into the kind's struct: a value an int32 or int64 field cannot hold (out of
range, a fraction, even ``3.0``, a string) is a decode error, 400 on a body and 422 on a
patch (``json: cannot unmarshal number 2147483648 into Go struct field
DeploymentSpec.spec.replicas of type int32``). A strategic merge patch and server-side
apply go through the unstructured converter instead, which converts like Go's
``reflect.Value.Convert``: an integer wraps around (2147483648 becomes -2147483648, and
4294967299 becomes 3), a whole float is truncated, a fraction is ``cannot convert float64
to int32`` and a string ``unrecognized type: int32`` (422 on "patch"; a 500 "failed to
convert new object" for an apply). Custom resources are unstructured: their CRD's
``format: int32`` is not checked (kube-apiserver 1.28 ignores it); see ``validation.py``.

Fields are named by their JSON path without list indexes; the table covers the kinds the
simulator serves (workload specs and their pod templates' usual integer fields, Service
ports, Leases, Events, object metadata).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from watchkeeper_sim.documents.jsonpath import go_float
from watchkeeper_sim.model import JSON, ResourceType

Path = tuple[str, ...]
# path -> (Go struct holding the field, Go type: "int32", "int64" or "intstr")
Fields = dict[Path, tuple[str, str]]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_BITS = {"int32": 32, "int64": 64}


def _under(prefix: Path, fields: Fields) -> Fields:
    return {(*prefix, *path): spec for path, spec in fields.items()}


_META: Fields = {("generation",): ("ObjectMeta", "int64"),
                 ("deletionGracePeriodSeconds",): ("ObjectMeta", "int64")}
_PROBE: Fields = {
    **{(f,): ("Probe", "int32") for f in ("initialDelaySeconds", "timeoutSeconds",
                                          "periodSeconds", "successThreshold",
                                          "failureThreshold")},
    ("terminationGracePeriodSeconds",): ("Probe", "int64")}
_CONTAINER: Fields = {
    ("ports", "containerPort"): ("ContainerPort", "int32"),
    ("ports", "hostPort"): ("ContainerPort", "int32"),
    ("securityContext", "runAsUser"): ("SecurityContext", "int64"),
    ("securityContext", "runAsGroup"): ("SecurityContext", "int64"),
    **_under(("livenessProbe",), _PROBE), **_under(("readinessProbe",), _PROBE),
    **_under(("startupProbe",), _PROBE),
}
_POD_SPEC: Fields = {
    ("terminationGracePeriodSeconds",): ("PodSpec", "int64"),
    ("activeDeadlineSeconds",): ("PodSpec", "int64"),
    ("priority",): ("PodSpec", "int32"),
    ("securityContext", "runAsUser"): ("PodSecurityContext", "int64"),
    ("securityContext", "runAsGroup"): ("PodSecurityContext", "int64"),
    ("securityContext", "fsGroup"): ("PodSecurityContext", "int64"),
    **_under(("containers",), _CONTAINER), **_under(("initContainers",), _CONTAINER),
}
_TEMPLATE: Fields = {**_under(("metadata",), _META), **_under(("spec",), _POD_SPEC)}


def _spec(struct: str, int32: tuple[str, ...] = (), int64: tuple[str, ...] = (),
          template: bool = True) -> Fields:
    out: Fields = {(f,): (struct, "int32") for f in int32}
    out |= {(f,): (struct, "int64") for f in int64}
    if template:
        out |= _under(("template",), _TEMPLATE)
    return out


def _status(struct: str, *int32: str) -> Fields:
    out: Fields = {(f,): (struct, "int32") for f in int32}
    out[("observedGeneration",)] = (struct, "int64")
    return out


_JOB_SPEC = _spec("JobSpec", ("parallelism", "completions", "backoffLimit",
                              "ttlSecondsAfterFinished", "backoffLimitPerIndex",
                              "maxFailedIndexes"), ("activeDeadlineSeconds",))
_SERVICE_SPEC: Fields = {
    ("ports", "port"): ("ServicePort", "int32"),
    ("ports", "nodePort"): ("ServicePort", "int32"),
    ("ports", "targetPort"): ("ServicePort", "intstr"),
    ("healthCheckNodePort",): ("ServiceSpec", "int32"),
    ("sessionAffinityConfig", "clientIP", "timeoutSeconds"): ("ClientIPConfig", "int32"),
}
_EVENT_SERIES: Fields = {("series", "count"): ("EventSeries", "int32")}

KINDS: dict[tuple[str, str], Fields] = {
    ("", "Pod"): _under(("spec",), _POD_SPEC),
    ("", "Service"): _under(("spec",), _SERVICE_SPEC),
    ("", "Event"): {("count",): ("Event", "int32"), **_EVENT_SERIES},
    ("apps", "Deployment"): {
        **_under(("spec",), _spec("DeploymentSpec", (
            "replicas", "minReadySeconds", "revisionHistoryLimit", "progressDeadlineSeconds"))),
        ("spec", "strategy", "rollingUpdate", "maxUnavailable"): (
            "RollingUpdateDeployment", "intstr"),
        ("spec", "strategy", "rollingUpdate", "maxSurge"): ("RollingUpdateDeployment", "intstr"),
        **_under(("status",), _status(
            "DeploymentStatus", "replicas", "updatedReplicas", "readyReplicas",
            "availableReplicas", "unavailableReplicas", "collisionCount"))},
    ("apps", "ReplicaSet"): {
        **_under(("spec",), _spec("ReplicaSetSpec", ("replicas", "minReadySeconds"))),
        **_under(("status",), _status("ReplicaSetStatus", "replicas", "fullyLabeledReplicas",
                                      "readyReplicas", "availableReplicas"))},
    ("apps", "StatefulSet"): _under(("spec",), _spec(
        "StatefulSetSpec", ("replicas", "revisionHistoryLimit", "minReadySeconds"))),
    ("apps", "DaemonSet"): _under(("spec",), _spec(
        "DaemonSetSpec", ("minReadySeconds", "revisionHistoryLimit"))),
    ("batch", "Job"): _under(("spec",), _JOB_SPEC),
    ("batch", "CronJob"): _under(("spec",), {
        **_spec("CronJobSpec", ("successfulJobsHistoryLimit", "failedJobsHistoryLimit"),
                ("startingDeadlineSeconds",), template=False),
        **_under(("jobTemplate", "metadata"), _META),
        **_under(("jobTemplate", "spec"), _JOB_SPEC)}),
    ("coordination.k8s.io", "Lease"): _under(("spec",), _spec(
        "LeaseSpec", ("leaseDurationSeconds", "leaseTransitions"), template=False)),
    ("events.k8s.io", "Event"): {("deprecatedCount",): ("Event", "int32"), **_EVENT_SERIES},
}


@lru_cache(maxsize=128)
def _fields(group: str, kind: str, custom: bool) -> tuple[Fields, frozenset[Path]]:
    """The integer fields of a kind, metadata's included (none for custom resources), and
    every path that leads to one (where a walk must go on)."""
    if custom:
        return {}, frozenset()
    fields = {**_under(("metadata",), _META), **KINDS.get((group, kind), {})}
    return fields, frozenset(p[:i] for p in fields for i in range(1, len(p)))


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _decode_error(value: Any, go_type: str) -> str | None:
    """What encoding/json says of ``value`` for an int field; None when it fits."""
    if value is None:
        return None
    bits = _BITS.get(go_type, 32)
    if isinstance(value, int) and not isinstance(value, bool):
        if -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            return None
        return f"number {value}"
    if isinstance(value, float):
        return f"number {value!r}"  # Go quotes the literal: here as Python wrote it back
    if go_type == "intstr" and isinstance(value, str):
        return None
    return _json_kind(value)


def decode_error(obj: JSON, rt: ResourceType) -> str | None:
    """The first integer field of ``obj`` (document order) its Go type cannot hold."""
    fields, inner = _fields(rt.group, rt.kind, rt.is_custom)
    if not fields:
        return None
    found: list[str] = []

    def walk(value: Any, path: Path) -> None:
        if found:
            return
        if isinstance(value, dict):
            for key, item in value.items():
                sub = (*path, key)
                spec = fields.get(sub)
                if spec is not None:
                    struct, go_type = spec
                    wrong = _decode_error(item, go_type)
                    if wrong is not None:
                        found.append(_message(wrong, struct, sub, go_type))
                        return
                elif sub in inner:
                    walk(item, sub)
        elif isinstance(value, list):
            for item in value:
                walk(item, path)

    walk(obj, ())
    return found[0] if found else None


def _message(wrong: str, struct: str, path: Path, go_type: str) -> str:
    """IntOrString decodes its number as an int32, with the same context (file 068)."""
    return (f"json: cannot unmarshal {wrong} into Go struct field {struct}."
            f"{'.'.join(path)} of type {'int32' if go_type == 'intstr' else go_type}")


def _wrap(value: int, bits: int) -> int:
    half: int = 2 ** (bits - 1)
    return (value + half) % (2 * half) - half


def _convert(value: Any, go_type: str) -> Any:
    """reflect's Convert as the unstructured converter applies it; raises ValueError."""
    bits = _BITS.get(go_type, 32)
    if isinstance(value, (bool, str)):
        if go_type == "intstr" and isinstance(value, str):
            return value
        raise ValueError(f"unrecognized type: int{bits}")
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:  # decoded as a float64 by the server
            value = float(value)
        else:
            return _wrap(value, bits)
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"cannot convert float64 to int{bits}")
        whole = int(value) if INT64_MIN <= value < 2.0**63 else INT64_MIN  # amd64 CVTTSD2SQ
        return _wrap(whole, bits)
    return value


def convert(obj: JSON, rt: ResourceType) -> None:
    """Convert the integer fields of ``obj`` in place as a strategic merge patch or an apply
    does (wrapping); raises ValueError with the converter's message."""
    fields, inner = _fields(rt.group, rt.kind, rt.is_custom)

    def walk(value: Any, path: Path) -> None:
        if isinstance(value, dict):
            for key, item in list(value.items()):
                sub = (*path, key)
                spec = fields.get(sub)
                if spec is not None:
                    if item is not None:
                        value[key] = _convert(item, spec[1])
                elif sub in inner:
                    walk(item, sub)
        elif isinstance(value, list):
            for item in value:
                walk(item, path)

    if fields:
        walk(obj, ())


def go_value(value: Any) -> str:
    """fmt's %v of a decoded JSON value: ``map[k:v]`` with sorted keys, ``[a b]``."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_value(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_value(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    return str(value)
