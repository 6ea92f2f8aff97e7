"""Small readers for object metadata, so callers don't repeat ``obj["metadata"].get(...)``,
and ``ObjectRef``, the one key of an object within its resource type.

It lives here, at the bottom of the layers, so that the cache's keys (``key``), the
controller's requests and the watch stream's key fields all order (namespace, name) alike.
"""

# no ``from __future__ import annotations``: ``annotations`` below is one of the readers
from typing import Any, NamedTuple

JSON = dict[str, Any]


class ObjectRef(NamedTuple):
    """An object's identity within one resource type: ``(namespace, name)``, namespace
    None for a cluster-scoped object. The order is that of ``namespace/name``; being a
    tuple, it equals and hashes like ``(namespace, name)``, so either works as a key.
    Build one with keywords, ``ObjectRef(namespace="ns", name="x")``, or ``meta.key(obj)``."""

    namespace: str | None
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def _meta(obj: JSON) -> JSON:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def name(obj: JSON) -> str:
    return str(_meta(obj).get("name", ""))


def namespace(obj: JSON) -> str | None:
    ns = _meta(obj).get("namespace")
    return str(ns) if ns else None


def uid(obj: JSON) -> str | None:
    value = _meta(obj).get("uid")
    return str(value) if value else None


def resource_version(obj: JSON) -> str | None:
    value = _meta(obj).get("resourceVersion")
    return str(value) if value else None


def labels(obj: JSON) -> dict[str, str]:
    return dict(_meta(obj).get("labels") or {})


def annotations(obj: JSON) -> dict[str, str]:
    return dict(_meta(obj).get("annotations") or {})


_new_ref = tuple.__new__


def key(obj: JSON) -> ObjectRef:
    """``ObjectRef(namespace, name)``: the identity of an object within one resource type.
    Called for every event a store applies, so it reads the metadata once and builds the
    tuple directly (as fast as the plain tuple it used to return)."""
    meta = _meta(obj)
    ns = meta.get("namespace")
    return _new_ref(ObjectRef, (str(ns) if ns else None, str(meta.get("name", ""))))


def ref(obj: JSON) -> str:
    """``namespace/name`` (or ``name`` for cluster-scoped objects), for messages."""
    ns = namespace(obj)
    return f"{ns}/{name(obj)}" if ns else name(obj)
