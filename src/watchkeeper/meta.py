"""Small readers for object metadata, so callers don't repeat ``obj["metadata"].get(...)``."""


from typing import Any

JSON = dict[str, Any]


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


def key(obj: JSON) -> tuple[str | None, str]:
    """(namespace, name): the identity of an object within one resource type."""
    return namespace(obj), name(obj)


def ref(obj: JSON) -> str:
    """``namespace/name`` (or ``name`` for cluster-scoped objects), for messages."""
    ns = namespace(obj)
    return f"{ns}/{name(obj)}" if ns else name(obj)
