"""The /scale subresource of a custom resource: an autoscaling/v1 Scale read from, and
written back into, the paths its CRD version's ``subresources.scale`` names.

As apiextensions-apiserver's ScaleREST (customresource/etcd.go) and the strategy's
validateScaleSpec/validateScaleStatus do it in kube-apiserver 1.28.7 (conformance
crd-scale-subresource): a write only sets the spec replicas path of the object, which then
goes through the custom resource's own update (schema, CEL, generation, watch event).
"""

from __future__ import annotations

from typing import Any

from watchkeeper_sim import status as _status
from watchkeeper_sim.model import JSON, ScalePaths
from watchkeeper_sim.storage.clone import clone
from watchkeeper_sim.storage.store import StoreError

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
_META = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")


def _fields(path: str) -> list[str]:
    return path.removeprefix(".").split(".")


def _nested(obj: JSON, path: str) -> tuple[Any, bool]:
    cur: Any = obj
    for name in _fields(path):
        if not isinstance(cur, dict) or name not in cur:
            return None, False
        cur = cur[name]
    return cur, True


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def scale_of(obj: JSON, paths: ScalePaths) -> JSON:
    """The object's Scale; an object without spec replicas has none (a 500, as 1.28.7)."""
    spec, found = _nested(obj, paths.spec_replicas)
    if not found:
        msg = f'the spec replicas field "{paths.spec_replicas}" does not exist'
        raise StoreError(_status.status(500, "InternalError", f"Internal error occurred: {msg}",
                                        {"causes": [{"message": msg}]}))
    status, _ = _nested(obj, paths.status_replicas)
    meta = obj.get("metadata") or {}
    scale: JSON = {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in _META if meta.get(k)},
        "spec": {"replicas": spec} if _whole(spec) and spec else {},  # omitempty: 0 is left out
        "status": {"replicas": status if _whole(status) else 0},
    }
    if paths.label_selector:
        selector, _ = _nested(obj, paths.label_selector)
        if isinstance(selector, str) and selector:
            scale["status"]["selector"] = selector
    return scale


def scaled(obj: JSON, scale: Any, paths: ScalePaths) -> tuple[JSON, str]:
    """The object with the Scale's spec replicas written in, and the Scale's resourceVersion
    precondition ("" for none)."""
    if not isinstance(scale, dict):
        raise StoreError(_status.bad_request(f"wrong object passed to Scale update: {scale}"))
    spec = scale.get("spec")
    replicas = spec.get("replicas", 0) if isinstance(spec, dict) else 0
    if replicas is None:
        replicas = 0
    if not _whole(replicas) or not INT32_MIN <= replicas <= INT32_MAX:
        raise StoreError(_status.bad_request(
            'Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal '
            f"{_json_kind(replicas)} into Go struct field ScaleSpec.spec.replicas of type "
            "int32"))
    new = clone(obj)
    cur = new
    *parents, last = _fields(paths.spec_replicas)
    for name in parents:
        if not isinstance(cur.get(name), dict):
            cur[name] = {}
        cur = cur[name]
    cur[last] = replicas
    meta = scale.get("metadata")
    expected = str((meta or {}).get("resourceVersion") or "") if isinstance(meta, dict) else ""
    return new, expected


def _json_kind(value: Any) -> str:
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "object" if isinstance(value, dict) else "array"


def causes(obj: JSON, paths: ScalePaths, *, status_only: bool) -> list[JSON]:
    """The strategy's own checks of the replicas (after the schema's): a main write checks
    the spec's and the status', a /status write the status' alone."""
    out: list[JSON] = []
    checked = [paths.status_replicas] if status_only else [paths.spec_replicas,
                                                           paths.status_replicas]
    for path in checked:
        value, _ = _nested(obj, path)
        if not _whole(value):
            continue
        if value < 0:
            out.append(_status.cause("FieldValueInvalid",
                                     f"Invalid value: {value}: should be a non-negative integer",
                                     path))
        elif value > INT32_MAX:
            out.append(_status.cause(
                "FieldValueInvalid",
                f"Invalid value: {value}: should be less than or equal to {INT32_MAX}", path))
    return out
