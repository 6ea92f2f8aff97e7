"""The Kubernetes protobuf wire form (``application/vnd.kubernetes.protobuf``) for ConfigMaps.

kube-apiserver answers a protobuf Accept with the magic ``k8s\\x00`` and a runtime.Unknown
envelope around the generated (gogo) message (126). Only ConfigMap and ConfigMapList are
encoded here, field for field as the generated code writes them (non-pointer scalars always,
pointers only when set, map entries sorted by key); for other kinds the negotiation skips
protobuf, so a client that also accepts JSON gets JSON and one that accepts only protobuf
gets the 406 it would get for a custom resource.
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

import msgspec

from watchkeeper_sim.model import JSON, ResourceType

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1  # negative int64 values are ten-byte two's complement varints
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _bytes(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _str(number: int, value: Any) -> bytes:
    return _bytes(number, str(value or "").encode())


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _map(number: int, values: dict[str, Any] | None, raw: bool = False) -> bytes:
    out = b""
    for key in sorted(values or {}):
        value = values[key] if values else ""
        encoded = base64.b64decode(value) if raw else str(value).encode()
        out += _bytes(number, _str(1, key) + _bytes(2, encoded))
    return out


def _time(number: int, stamp: str) -> bytes:
    """meta/v1 Time: seconds (1) and nanos (2), both always written."""
    seconds = int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())
    return _bytes(number, _int(1, seconds) + _int(2, 0))


def _owner_reference(ref: JSON) -> bytes:
    out = _str(1, ref.get("kind")) + _str(3, ref.get("name")) + _str(4, ref.get("uid"))
    out += _str(5, ref.get("apiVersion"))
    for number, key in ((6, "controller"), (7, "blockOwnerDeletion")):
        if ref.get(key) is not None:
            out += _int(number, int(bool(ref[key])))
    return out


def _managed_fields_entry(entry: JSON) -> bytes:
    out = _str(1, entry.get("manager")) + _str(2, entry.get("operation"))
    out += _str(3, entry.get("apiVersion"))
    if entry.get("time"):
        out += _time(4, entry["time"])
    out += _str(6, entry.get("fieldsType"))
    if entry.get("fieldsV1") is not None:
        out += _bytes(7, _bytes(1, msgspec.json.encode(entry["fieldsV1"])))
    return out + _str(8, entry.get("subresource"))


def object_meta(meta: JSON) -> bytes:
    """meta/v1 ObjectMeta (generated.proto field numbers)."""
    out = b"".join(_str(n, meta.get(k)) for n, k in (
        (1, "name"), (2, "generateName"), (3, "namespace"), (4, "selfLink"), (5, "uid"),
        (6, "resourceVersion")))
    out += _int(7, int(meta.get("generation") or 0))
    out += _time(8, meta["creationTimestamp"]) if meta.get("creationTimestamp") else \
        _bytes(8, b"")
    if meta.get("deletionTimestamp"):
        out += _time(9, meta["deletionTimestamp"])
    if meta.get("deletionGracePeriodSeconds") is not None:
        out += _int(10, int(meta["deletionGracePeriodSeconds"]))
    out += _map(11, meta.get("labels")) + _map(12, meta.get("annotations"))
    out += b"".join(_bytes(13, _owner_reference(r)) for r in meta.get("ownerReferences") or [])
    out += b"".join(_str(14, f) for f in meta.get("finalizers") or [])
    out += b"".join(_bytes(17, _managed_fields_entry(e)) for e in meta.get("managedFields") or [])
    return out


def _configmap(obj: JSON) -> bytes:
    out = _bytes(1, object_meta(obj.get("metadata") or {}))
    out += _map(2, obj.get("data")) + _map(3, obj.get("binaryData"), raw=True)
    if obj.get("immutable") is not None:
        out += _int(4, int(bool(obj["immutable"])))
    return out


def _list_meta(meta: JSON) -> bytes:
    out = _str(1, meta.get("selfLink")) + _str(2, meta.get("resourceVersion"))
    out += _str(3, meta.get("continue"))
    if meta.get("remainingItemCount") is not None:
        out += _int(4, int(meta["remainingItemCount"]))
    return out


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    """runtime.Unknown: typeMeta, raw, contentEncoding "", contentType "" (126)."""
    type_meta = _str(1, api_version) + _str(2, kind)
    return MAGIC + _bytes(1, type_meta) + _bytes(2, raw) + _str(3, "") + _str(4, "")


def supports(rt: ResourceType) -> bool:
    """Whether objects of ``rt`` can be sent as protobuf here."""
    return not rt.is_custom and (rt.group, rt.version, rt.kind) == ("", "v1", "ConfigMap")


def encode_object(rt: ResourceType, obj: JSON) -> bytes:
    return _envelope(rt.group_version, rt.kind, _configmap(obj))


def encode_list(rt: ResourceType, items: list[JSON], meta: JSON) -> bytes:
    raw = _bytes(1, _list_meta(meta)) + b"".join(_bytes(2, _configmap(i)) for i in items)
    return _envelope(rt.group_version, rt.list_kind, raw)
