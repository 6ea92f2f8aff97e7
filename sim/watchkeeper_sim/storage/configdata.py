"""ConfigMap and Secret write rules: a Secret's stringData and type default, and immutability.

What kube-apiserver 1.28's strategies and validation do (tests/conformance scenarios
configmap-immutable and secret-data): stringData is written into data (base64, over
data's keys) and never stored; a Secret's type defaults to Opaque and cannot change; once
``immutable`` is true, data, binaryData and ``immutable`` itself are frozen.
"""

from __future__ import annotations

import base64
from typing import Any

from watchkeeper_sim import status as _status
from watchkeeper_sim.model import JSON, ResourceType

_FROZEN = "Forbidden: field is immutable when `immutable` is set"


def _kind(rt: ResourceType) -> str:
    return rt.kind if not rt.group and rt.kind in ("ConfigMap", "Secret") else ""


def prepare(rt: ResourceType, obj: JSON) -> None:
    """A Secret as stored (in place): stringData merged into data, type defaulted."""
    if _kind(rt) != "Secret":
        return
    strings = obj.pop("stringData", None)
    if isinstance(strings, dict) and strings:
        data = obj.get("data")
        data = data if isinstance(data, dict) else {}
        for key, value in strings.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj["data"] = data
    if not obj.get("type"):
        obj["type"] = "Opaque"


# the keys a typed Secret must hold (ValidateSecret; only kubernetes.io/tls is checked here)
_REQUIRED_KEYS = {"kubernetes.io/tls": ("tls.crt", "tls.key")}


def secret_causes(rt: ResourceType, obj: JSON) -> list[JSON]:
    """ValidateSecret's required keys of a typed Secret."""
    if _kind(rt) != "Secret":
        return []
    data = obj.get("data")
    data = data if isinstance(data, dict) else {}
    return [_status.cause("FieldValueRequired", "Required value", f"data[{key}]")
            for key in _REQUIRED_KEYS.get(str(obj.get("type") or ""), ()) if key not in data]


def update_causes(rt: ResourceType, old: JSON, new: JSON) -> list[JSON]:
    """ValidateConfigMapUpdate / ValidateSecretUpdate: the type, then the frozen fields."""
    kind = _kind(rt)
    if not kind:
        return []
    causes: list[JSON] = []
    if kind == "Secret" and new.get("type") != old.get("type"):
        causes.append(_status.cause(
            "FieldValueInvalid", f"Invalid value: {_go(new.get('type'))}: field is immutable",
            "type"))
    if old.get("immutable") is True:
        if new.get("immutable") is not True:
            causes.append(_status.cause("FieldValueForbidden", _FROZEN, "immutable"))
        fields = ("data", "binaryData") if kind == "ConfigMap" else ("data",)
        causes += [_status.cause("FieldValueForbidden", _FROZEN, name) for name in fields
                   if (new.get(name) or None) != (old.get(name) or None)]
    return causes


def _go(value: Any) -> str:
    return _status.go_quote(value) if isinstance(value, str) else str(value)
