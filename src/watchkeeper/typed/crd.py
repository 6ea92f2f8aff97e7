"""Resource classes -> CustomResourceDefinition manifests.

One class is one version; ``crd(V1, V2)`` merges the versions of one resource (same group,
kind, names and scope) into one CRD, with exactly one storage version. ``crds(...)`` takes
classes of several resources and gives one CRD each, in the order first named."""

from __future__ import annotations

import re
from typing import Any

from watchkeeper.typed.errors import SchemaError
from watchkeeper.typed.identity import PrinterColumn, ResourceIdentity
from watchkeeper.typed.models import CustomResource
from watchkeeper.typed.schema import openapi_schema

__all__ = ["crd", "crds"]

JSON = dict[str, Any]

_SHARED = ("group", "kind", "plural", "singular", "list_kind", "scope", "short_names",
           "categories")
_PLAIN_PATH = re.compile(r"^(\.[A-Za-z_][A-Za-z0-9_-]*)+$")


def crds(*classes: type[CustomResource]) -> list[JSON]:
    """One CRD per resource among ``classes`` (versions of one resource merge)."""
    by_name: dict[str, list[type[CustomResource]]] = {}
    for cls in classes:
        by_name.setdefault(_identity(cls).crd_name, []).append(cls)
    return [crd(*versions) for versions in by_name.values()]


def crd(*versions: type[CustomResource]) -> JSON:
    """The CustomResourceDefinition of one resource, each class one of its versions."""
    if not versions:
        raise SchemaError("crd() needs at least one resource class")
    ids = [_identity(v) for v in versions]
    first = ids[0]
    for cls, other in zip(versions[1:], ids[1:], strict=True):
        differ = [k for k in _SHARED if getattr(other, k) != getattr(first, k)]
        if differ:
            raise SchemaError(f"{cls.__qualname__} is not a version of {first.crd_name}: its "
                              f"{', '.join(differ)} differ from {versions[0].__qualname__}'s")
    names = [i.version for i in ids]
    if len(set(names)) != len(names):
        raise SchemaError(f"{first.crd_name}: version names repeat: {names}")
    storage = [i.storage if i.storage is not None else len(ids) == 1 for i in ids]
    if storage.count(True) != 1:
        raise SchemaError(f"{first.crd_name}: exactly one version must be the storage version "
                          f"(storage=True), got {storage.count(True)} of {names}")
    spec_names: JSON = {"kind": first.kind, "listKind": first.list_kind,
                        "plural": first.plural, "singular": first.singular}
    if first.short_names:
        spec_names["shortNames"] = list(first.short_names)
    if first.categories:
        spec_names["categories"] = list(first.categories)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": first.crd_name},
        "spec": {
            "group": first.group,
            "names": spec_names,
            "scope": first.scope,
            "versions": [_version(cls, i, stored)
                         for cls, i, stored in zip(versions, ids, storage, strict=True)],
        },
    }


def _identity(cls: Any) -> ResourceIdentity:
    if not (isinstance(cls, type) and issubclass(cls, CustomResource)):
        raise SchemaError(f"{cls!r} is not a wk.CustomResource class")
    return cls.identity()


def _version(cls: type[CustomResource], identity: ResourceIdentity, storage: bool) -> JSON:
    schema = openapi_schema(cls)
    out: JSON = {"name": identity.version, "served": identity.served, "storage": storage}
    if identity.deprecated:
        out["deprecated"] = True
        if identity.deprecation_warning is not None:
            out["deprecationWarning"] = identity.deprecation_warning
    where = f"{cls.__qualname__}"
    if identity.printer_columns:
        out["additionalPrinterColumns"] = [_column(c, schema, where)
                                           for c in identity.printer_columns]
    subresources: JSON = {}
    has_status = "status" in schema["properties"]
    if identity.status_subresource or (identity.status_subresource is None and has_status):
        subresources["status"] = {}
    if identity.scale is not None:
        subresources["scale"] = _scale(identity, schema, where)
    if subresources:
        out["subresources"] = subresources
    out["schema"] = {"openAPIV3Schema": schema}
    return out


def _lookup(schema: JSON, path: str) -> JSON | None:
    """The schema node of a plain field path (``.spec.replicas``), None if it has none."""
    node: Any = schema
    for part in path.strip(".").split("."):
        props = node.get("properties") if isinstance(node, dict) else None
        if isinstance(props, dict) and part in props:
            node = props[part]
        elif isinstance(node, dict) and isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        elif isinstance(node, dict) and node.get("x-kubernetes-preserve-unknown-fields"):
            return {}
        else:
            return None
    return node if isinstance(node, dict) else None


def _column_type(node: JSON) -> str:
    kind = node.get("type")
    if kind == "string" and node.get("format") == "date-time":
        return "date"
    return kind if kind in ("integer", "number", "boolean", "string") else "string"


def _column(col: PrinterColumn, schema: JSON, where: str) -> JSON:
    """A printer column; a plain path must exist, its type and description come from it."""
    kind, description = col.type, col.description
    path = col.json_path
    if path.startswith(".metadata."):
        kind = kind or ("date" if path == ".metadata.creationTimestamp" else "string")
    else:
        head = re.split(r"[\[@?(*]", path, maxsplit=1)[0].rstrip(".")
        node = _lookup(schema, head) if _PLAIN_PATH.match(head) else None
        if node is None:
            raise SchemaError(f"{where}: printer column {col.name!r}: {head!r} is not a "
                              "field of the schema")
        if head == path:
            kind = kind or _column_type(node)  # type: ignore[assignment]
            description = description or node.get("description")
    out: JSON = {"name": col.name, "type": kind or "string", "jsonPath": path}
    if description:
        out["description"] = description.split("\n\n")[0].replace("\n", " ")
    if col.format:
        out["format"] = col.format
    if col.priority:
        out["priority"] = col.priority
    return out


def _scale(identity: ResourceIdentity, schema: JSON, where: str) -> JSON:
    scale = identity.scale
    assert scale is not None
    paths = {"specReplicasPath": (scale.spec_replicas_path, ".spec.", "integer"),
             "statusReplicasPath": (scale.status_replicas_path, ".status.", "integer")}
    if scale.label_selector_path is not None:
        paths["labelSelectorPath"] = (scale.label_selector_path, "", "string")
    out: JSON = {}
    for key, (path, prefix, kind) in paths.items():
        if not path.startswith(prefix or (".spec.", ".status.")):
            raise SchemaError(f"{where}: scale {key} {path!r} must be under "
                              f"{prefix or '.spec or .status'}")
        node = _lookup(schema, path) if _PLAIN_PATH.match(path) else None
        if node is None:
            raise SchemaError(f"{where}: scale {key} {path!r} is not a field of the schema")
        if node and node.get("type") != kind:
            raise SchemaError(f"{where}: scale {key} {path!r} must be of type {kind}, not "
                              f"{node.get('type')}")
        out[key] = path
    return out
