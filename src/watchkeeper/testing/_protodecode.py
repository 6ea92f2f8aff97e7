"""Protobuf request bodies: the kinds kubectl's typed ``create`` commands send that way.

``kubectl create rolebinding`` / ``clusterrolebinding`` (and other typed clients) POST
``application/vnd.kubernetes.protobuf``: the magic ``k8s\\x00``, a runtime.Unknown envelope
(typeMeta 1: apiVersion 1, kind 2; raw 2) around the generated message. Decoded here to the
JSON form the registry takes, for ConfigMap and the four RBAC kinds (generated.proto field
numbers); any other kind is refused with the 415 the simulator gave every protobuf body
before. Fields kubectl does not send on a create (status, managedFields, timestamps) are not
read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from watchkeeper.testing._store import JSON

MAGIC = b"k8s\x00"
Fields = dict[int, list[Any]]  # field number -> values (bytes for length-delimited, else int)


class ProtoError(ValueError):
    """The body is not the protobuf form of a supported kind."""


def _fields(data: bytes) -> Fields:
    """One message's fields; varints as ints, length-delimited as bytes."""
    out: Fields = {}
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            if pos >= len(data) or shift > 63:
                raise ProtoError("truncated varint")
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    while pos < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value = varint()
        elif wire == 2:
            size = varint()
            if pos + size > len(data):
                raise ProtoError("truncated field")
            value, pos = data[pos:pos + size], pos + size
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ProtoError(f"unsupported wire type {wire}")
        out.setdefault(number, []).append(value)
    return out


def _text(f: Fields, number: int) -> str:
    values = f.get(number)
    return values[-1].decode() if values else ""


def _texts(f: Fields, number: int) -> list[str]:
    return [v.decode() for v in f.get(number, [])]


def _map(f: Fields, number: int) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in f.get(number, []):
        e = _fields(entry)
        out[_text(e, 1)] = _text(e, 2)
    return out


def _set(obj: JSON, key: str, value: Any) -> None:
    if value:  # omitempty
        obj[key] = value


def _meta(raw: bytes) -> JSON:
    f = _fields(raw)
    meta: JSON = {}
    for number, key in ((1, "name"), (2, "generateName"), (3, "namespace")):
        _set(meta, key, _text(f, number))
    _set(meta, "labels", _map(f, 11))
    _set(meta, "annotations", _map(f, 12))
    _set(meta, "finalizers", _texts(f, 14))
    return meta


def _rule(raw: bytes) -> JSON:
    f = _fields(raw)
    rule: JSON = {"verbs": _texts(f, 1)}
    for number, key in ((2, "apiGroups"), (3, "resources"), (4, "resourceNames"),
                        (5, "nonResourceURLs")):
        _set(rule, key, _texts(f, number))
    return rule


def _selector(raw: bytes) -> JSON:
    f = _fields(raw)
    sel: JSON = {}
    _set(sel, "matchLabels", _map(f, 1))
    exprs = []
    for e in f.get(2, []):
        ef = _fields(e)
        expr: JSON = {"key": _text(ef, 1), "operator": _text(ef, 2)}
        _set(expr, "values", _texts(ef, 3))
        exprs.append(expr)
    _set(sel, "matchExpressions", exprs)
    return sel


def _subject(raw: bytes) -> JSON:
    f = _fields(raw)
    subject: JSON = {"kind": _text(f, 1)}
    for number, key in ((2, "apiGroup"), (3, "name"), (4, "namespace")):
        _set(subject, key, _text(f, number))
    return subject


def _role(f: Fields) -> JSON:
    return {"rules": [_rule(r) for r in f.get(2, [])]}


def _cluster_role(f: Fields) -> JSON:
    obj = _role(f)
    if f.get(3):
        agg = _fields(f[3][-1])
        obj["aggregationRule"] = {"clusterRoleSelectors": [_selector(s) for s in agg.get(1, [])]}
    return obj


def _binding(f: Fields) -> JSON:
    obj: JSON = {}
    _set(obj, "subjects", [_subject(s) for s in f.get(2, [])])
    ref = _fields(f[3][-1]) if f.get(3) else {}
    obj["roleRef"] = {"apiGroup": _text(ref, 1), "kind": _text(ref, 2), "name": _text(ref, 3)}
    return obj


def _configmap(f: Fields) -> JSON:
    obj: JSON = {}
    _set(obj, "data", _map(f, 2))
    if f.get(4):
        obj["immutable"] = bool(f[4][-1])
    return obj


_KINDS: dict[tuple[str, str], Callable[[Fields], JSON]] = {
    ("v1", "ConfigMap"): _configmap,
    ("rbac.authorization.k8s.io/v1", "Role"): _role,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): _cluster_role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): _binding,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): _binding,
}


def decode(raw: bytes) -> JSON:
    """A protobuf request body as a JSON object; ProtoError when not a supported kind."""
    try:
        return _decode(raw)
    except (AttributeError, IndexError, TypeError, UnicodeDecodeError) as exc:
        raise ProtoError(f"malformed protobuf body: {exc}") from None


def _decode(raw: bytes) -> JSON:
    if not raw.startswith(MAGIC):
        raise ProtoError("no protobuf magic")
    envelope = _fields(raw[len(MAGIC):])
    type_meta = _fields(envelope[1][-1]) if envelope.get(1) else {}
    api_version, kind = _text(type_meta, 1), _text(type_meta, 2)
    body = _KINDS.get((api_version, kind))
    if body is None or not envelope.get(2):
        raise ProtoError(f"protobuf {api_version} {kind} is not decoded here")
    f = _fields(envelope[2][-1])
    meta = _meta(f[1][-1]) if f.get(1) else {}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, **body(f)}
