"""The API server's rules for a CRD schema (apiextensions' structural schema and the checks
of its ``openAPIV3Schema`` validation), applied before anything is sent: the generator
cannot break them, but ``msgspec.Meta(extra_json_schema=...)`` can."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["problems", "walk"]

JSON = dict[str, Any]

_TYPES = ("array", "boolean", "integer", "number", "object", "string")
# JSONSchemaProps, the Go type a CRD schema node decodes into: other keys are dropped
_KNOWN = frozenset((
    "id", "$schema", "$ref", "description", "type", "format", "title", "default", "maximum",
    "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern",
    "maxItems", "minItems", "uniqueItems", "multipleOf", "enum", "maxProperties",
    "minProperties", "required", "items", "allOf", "oneOf", "anyOf", "not", "properties",
    "additionalProperties", "patternProperties", "dependencies", "additionalItems",
    "definitions", "externalDocs", "example", "nullable", "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string",
    "x-kubernetes-list-map-keys", "x-kubernetes-list-type", "x-kubernetes-map-type",
    "x-kubernetes-validations"))
# in JSONSchemaProps, but refused in a CRD
_FORBIDDEN = ("$ref", "$schema", "definitions", "dependencies", "id", "patternProperties",
              "additionalItems")
# the two forms an int-or-string may take in a junctor (apiextensions' allowed exceptions)
_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]
_NOT_IN_JUNCTORS = ("description", "type", "default", "additionalProperties", "nullable")
_SCALARS = ("string", "integer", "number", "boolean")


def walk(schema: JSON, path: str = "") -> Iterator[tuple[str, JSON]]:
    """Every schema node with its path (``.spec.ports[]``, ``.spec.labels{}``), root first."""
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, dict):
            yield from walk(sub, f"{path}.{name}")
    items = schema.get("items")
    if isinstance(items, dict):
        yield from walk(items, f"{path}[]")
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        yield from walk(extra, f"{path}{{}}")


def problems(schema: JSON) -> list[str]:
    """What the API server would refuse in ``schema`` (an openAPIV3Schema), as
    ``path: problem`` lines; [] when it is a valid structural schema."""
    out: list[str] = []
    out += _root_metadata(schema)
    for path, node in walk(schema):
        where = path or "<root>"
        out += [f"{where}: {p}" for p in _node(node)]
    return out


def _root_metadata(schema: JSON) -> list[str]:
    meta = (schema.get("properties") or {}).get("metadata")
    if not isinstance(meta, dict):
        return []
    out = []
    if set(meta) - {"type", "properties"} or meta.get("type") not in (None, "object"):
        out.append(".metadata: only type: object and restrictions of name and generateName "
                   f"are allowed, not {sorted(set(meta) - {'properties'})}")
    extra = set(meta.get("properties") or {}) - {"name", "generateName"}
    if extra:
        out.append(f".metadata: only name and generateName may be restricted, not "
                   f"{sorted(extra)}")
    return out


def _node(node: JSON) -> Iterator[str]:
    kind = node.get("type")
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
    if int_or_string and kind:
        yield "x-kubernetes-int-or-string must not have a type"
    elif not kind and not (int_or_string or preserve):
        yield "needs a type (or x-kubernetes-preserve-unknown-fields / -int-or-string)"
    elif kind and kind not in _TYPES:
        yield f"type {kind!r} is not one of {', '.join(_TYPES)}"
    for key in _FORBIDDEN:
        if key in node:
            yield f"{key} is not allowed in a CRD schema"
    unknown = sorted(set(node) - _KNOWN)
    if unknown:
        yield f"{', '.join(unknown)}: not a keyword of a CRD schema (the server drops it)"
    if node.get("uniqueItems") is True:
        yield "uniqueItems cannot be true (use x-kubernetes-list-type: set)"
    if "properties" in node and "additionalProperties" in node:
        yield "properties and additionalProperties are mutually exclusive"
    if isinstance(node.get("additionalProperties"), bool):
        yield "additionalProperties must be a schema, not a boolean"
    if "items" in node and not isinstance(node["items"], dict):
        yield "items must be one schema"
    for junctor in ("allOf", "anyOf", "oneOf", "not"):
        if junctor in node:
            yield from _junctor(node[junctor], junctor, int_or_string)
    if node.get("x-kubernetes-embedded-resource") is True:
        if kind != "object":
            yield "x-kubernetes-embedded-resource needs type: object"
        elif not preserve and not node.get("properties"):
            yield "an embedded resource needs properties or x-kubernetes-preserve-unknown-fields"
    yield from _list_type(node, kind)
    if "x-kubernetes-map-type" in node and kind != "object":
        yield "x-kubernetes-map-type is for objects"
    for rule in node.get("x-kubernetes-validations") or ():
        if not isinstance(rule, dict) or not str(rule.get("rule") or "").strip():
            yield "a validation rule needs a non-empty rule"
        elif "\n" in str(rule.get("message") or ""):
            yield "a validation message must be one line"


def _junctor(value: Any, name: str, int_or_string: bool) -> Iterator[str]:
    subs = [value] if name == "not" else value
    if not isinstance(subs, list):
        yield f"{name} must be a list of schemas"
        return
    if int_or_string and name == "anyOf" and subs == _INT_OR_STRING:
        return
    for sub in subs:
        if not isinstance(sub, dict):
            yield f"{name} must hold schemas"
            continue
        for key in _NOT_IN_JUNCTORS:
            if key in sub:
                yield f"{key} is not allowed inside {name}"


def _list_type(node: JSON, kind: Any) -> Iterator[str]:
    list_type = node.get("x-kubernetes-list-type")
    keys = node.get("x-kubernetes-list-map-keys")
    if keys is not None and list_type != "map":
        yield "x-kubernetes-list-map-keys needs x-kubernetes-list-type: map"
    if list_type is None:
        return
    if kind != "array":
        yield "x-kubernetes-list-type is for arrays"
        return
    items: JSON = node["items"] if isinstance(node.get("items"), dict) else {}
    if list_type not in ("atomic", "set", "map"):
        yield f"x-kubernetes-list-type {list_type!r} is not atomic, set or map"
    elif list_type == "set" and items.get("type") not in _SCALARS and not items.get(
            "x-kubernetes-int-or-string"):
        yield "a set list holds scalars"
    elif list_type == "map":
        props = items.get("properties") or {}
        if items.get("type") != "object" or not keys:
            yield "a map list holds objects and names x-kubernetes-list-map-keys"
        for key in keys or ():
            sub = props.get(key)
            if not isinstance(sub, dict):
                yield f"list map key {key!r} is not a property of the items"
            elif key not in (items.get("required") or ()) and "default" not in sub:
                yield f"list map key {key!r} must be required or have a default"
