"""A ``msgspec.Struct`` class -> the structural OpenAPI v3 schema a CRD version declares.

How a type hint reads (docs/guide.md, "Custom resources as Python classes", has the
table): a field without a default is required, ``T | None`` is nullable, a default becomes
the schema's ``default``, ``Literal``/``Enum`` an enum, ``dict[str, T]`` additionalProperties,
``msgspec.Meta`` the bounds, lengths and pattern, and the markers of ``markers.py`` the
Kubernetes extensions. Anything the API server could not take is a ``SchemaError`` naming
the field; the result is checked against the structural rules (``structural.py``)."""

from __future__ import annotations

import datetime
import enum
import inspect
import types
import typing
import uuid
from collections.abc import Callable
from typing import Any, get_args, get_origin

import msgspec

from watchkeeper.typed.docs import class_doc, field_docs
from watchkeeper.typed.errors import SchemaError
from watchkeeper.typed.markers import (
    QUANTITY,
    QUANTITY_PATTERN,
    EmbeddedResource,
    ListAtomic,
    ListMap,
    ListSet,
    PreserveUnknownFields,
    Rule,
    class_rules,
)
from watchkeeper.typed.structural import problems as structural_problems

__all__ = ["openapi_schema"]

JSON = dict[str, Any]

# The order keys are written in, so a generated manifest reads like a hand-written one.
_ORDER = ("description", "title", "type", "format", "enum", "default", "example", "nullable",
          "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf",
          "minLength", "maxLength", "pattern", "minItems", "maxItems", "items",
          "minProperties", "maxProperties", "properties", "required", "additionalProperties",
          "anyOf", "x-kubernetes-int-or-string", "x-kubernetes-list-type",
          "x-kubernetes-list-map-keys", "x-kubernetes-map-type", "x-kubernetes-embedded-resource",
          "x-kubernetes-preserve-unknown-fields", "x-kubernetes-validations")
_SCALARS = ("string", "integer", "number", "boolean")
# the markers that take no argument, which the class itself may stand for
_MARKER_CLASSES: dict[Any, Callable[[], object]] = {
    c: c for c in (ListSet, ListAtomic, PreserveUnknownFields, EmbeddedResource)}
_FORMATS: dict[type, JSON] = {
    bool: {"type": "boolean"},
    int: {"type": "integer"},
    float: {"type": "number"},
    str: {"type": "string"},
    bytes: {"type": "string", "format": "byte"},
    bytearray: {"type": "string", "format": "byte"},
    datetime.datetime: {"type": "string", "format": "date-time"},
    datetime.date: {"type": "string", "format": "date"},
    uuid.UUID: {"type": "string", "format": "uuid"},
}
_NO_DEFAULT = object()


def openapi_schema(cls: type[msgspec.Struct]) -> JSON:
    """The ``openAPIV3Schema`` of a resource class (its root: apiVersion, kind, metadata
    kept as the API server wants them)."""
    schema = _Builder().struct(cls, resource=True)
    bad = structural_problems(schema)
    if bad:
        raise SchemaError(f"{cls.__qualname__}: not a structural schema: " + "; ".join(bad))
    return schema


def _ordered(node: JSON) -> JSON:
    head = {k: node[k] for k in _ORDER if k in node}
    return {**head, **{k: v for k, v in node.items() if k not in head}}


def _declared_order(cls: type) -> list[str]:
    """Field names in the order they were written, bases first (msgspec moves fields with
    defaults behind the others)."""
    order: list[str] = []
    for klass in reversed(cls.__mro__):
        for name in inspect.get_annotations(klass):
            if name not in order:
                order.append(name)
    return order


def _default(f: msgspec.structs.FieldInfo) -> Any:
    """The field's default as JSON, or _NO_DEFAULT (None and UNSET mean "absent")."""
    if f.default is not msgspec.NODEFAULT:
        value = f.default
    elif f.default_factory is not msgspec.NODEFAULT:
        value = f.default_factory()
    else:
        return _NO_DEFAULT
    if value is None or value is msgspec.UNSET:
        return _NO_DEFAULT
    return msgspec.json.decode(msgspec.json.encode(value))  # JSON types only (no tuples)


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (typing.Union, types.UnionType)


class _Builder:
    def __init__(self) -> None:
        self._stack: list[type] = []

    def struct(self, cls: type, *, resource: bool = False) -> JSON:
        """An object schema from a Struct; ``resource`` (the root, an embedded resource)
        keeps apiVersion, kind and metadata to what the API server allows there."""
        if not (isinstance(cls, type) and issubclass(cls, msgspec.Struct)):
            raise SchemaError(f"{cls!r} is not a msgspec.Struct (wk.Schema)")
        if cls in self._stack:
            chain = " -> ".join(c.__qualname__ for c in [*self._stack, cls])
            raise SchemaError(f"{chain}: a Kubernetes schema cannot contain itself")
        self._stack.append(cls)
        try:
            return self._struct(cls, resource)
        finally:
            self._stack.pop()

    def _struct(self, cls: type[msgspec.Struct], resource: bool) -> JSON:
        docs = field_docs(cls)
        try:
            fields = {f.name: f for f in msgspec.structs.fields(cls)}
        except NameError as exc:
            raise SchemaError(
                f"{cls.__qualname__}: an annotation names what its module does not have "
                f"({exc}); a class defined inside a function cannot be named in a string "
                "annotation (from __future__ import annotations): define it at module level"
            ) from None
        order = [n for n in _declared_order(cls) if n in fields]
        order += [n for n in fields if n not in order]
        props: JSON = {}
        required: list[str] = []
        for name in order:
            f = fields[name]
            where = f"{cls.__qualname__}.{name}"
            if resource and f.encode_name in ("apiVersion", "kind"):
                node: JSON = {"type": "string"}
                if name in docs:
                    node["description"] = docs[name]
                props[f.encode_name] = _ordered(node)
                continue
            if resource and f.encode_name == "metadata":
                props["metadata"] = {"type": "object"}  # only name/generateName may be restricted
                continue
            node = self.field(f.type, where, docs.get(name))
            default = _default(f)
            if default is not _NO_DEFAULT:
                node["default"] = default
            if f.required:
                required.append(f.encode_name)
            props[f.encode_name] = _ordered(node)
        out: JSON = {"type": "object"}
        doc = class_doc(cls)
        if doc:
            out["description"] = doc
        out["properties"] = props
        if required:
            out["required"] = required
        rules = class_rules(cls)
        if rules:
            out["x-kubernetes-validations"] = [r.schema() for r in rules]
        return _ordered(out)

    def field(self, tp: Any, where: str, doc: str | None = None) -> JSON:
        """The schema of one annotation: the type, then what Annotated adds to it."""
        metas: list[msgspec.Meta] = []
        markers: list[Any] = []
        nullable = False
        while True:
            if get_origin(tp) is typing.Annotated:
                tp, *extra = get_args(tp)
                for e in extra:
                    if isinstance(e, msgspec.Meta):
                        metas.append(e)
                    elif e is ListMap:
                        raise SchemaError(f"{where}: ListMap needs its keys: ListMap('name')")
                    elif isinstance(e, type) and e in _MARKER_CLASSES:
                        markers.append(_MARKER_CLASSES[e]())
                    else:
                        markers.append(e)  # ours, or another library's (ignored)
            elif _is_union(tp) or (get_origin(tp) is typing.Literal and None in get_args(tp)):
                args = get_args(tp)
                nullable = nullable or None in args or type(None) in args
                rest = [a for a in args if a not in (None, type(None), msgspec.UnsetType)]
                if get_origin(tp) is typing.Literal:
                    tp = typing.Literal[tuple(rest)]
                elif len(rest) == 1:
                    tp = rest[0]
                else:
                    tp = typing.Union[tuple(rest)]  # noqa: UP007 - a runtime union of types
                    break
            elif hasattr(tp, "__supertype__"):  # typing.NewType
                tp = tp.__supertype__
            else:
                break
        node = self._type(tp, where, markers)
        described = self._apply_metas(node, metas, where)
        self._apply_markers(node, markers, where)
        if doc and not described:
            node["description"] = doc
        if nullable:
            node["nullable"] = True
        return _ordered(node)

    def _type(self, tp: Any, where: str, markers: list[Any]) -> JSON:
        origin = get_origin(tp)
        if tp is Any:
            return {"x-kubernetes-preserve-unknown-fields": True}
        if tp in _FORMATS:
            return dict(_FORMATS[tp])
        if origin is typing.Literal:
            return _enum(list(get_args(tp)), where)
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            node = _enum([m.value for m in tp], where)
            doc = class_doc(tp)
            return {"description": doc, **node} if doc else node
        if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
            embedded = any(isinstance(m, EmbeddedResource) for m in markers)
            return self.struct(tp, resource=embedded)
        if _is_union(tp):
            members = set(get_args(tp))
            if members == {int, str}:
                # no anyOf (controller-gen adds one): the API server then reports a wrong
                # type once, not three times (docs/decisions.md)
                node = {"x-kubernetes-int-or-string": True}
                if QUANTITY in markers:
                    node["pattern"] = QUANTITY_PATTERN
                return node
            raise SchemaError(
                f"{where}: the union {tp} has no structural schema; Kubernetes takes "
                "T | None, int | str (wk.IntOrString), or one object with optional fields")
        if origin in (list, set, frozenset) or (origin is tuple and _homogeneous(tp)):
            args = get_args(tp)
            items = self.field(args[0], f"{where}[]") if args else {
                "x-kubernetes-preserve-unknown-fields": True}
            node = {"type": "array", "items": items}
            if origin in (set, frozenset):
                node["x-kubernetes-list-type"] = "set"
            return node
        if origin is dict:
            key, value = get_args(tp) or (str, Any)
            if key is not str:
                raise SchemaError(f"{where}: map keys must be str, not {key!r}")
            if value is Any:
                return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
            return {"type": "object", "additionalProperties": self.field(value, f"{where}{{}}")}
        if tp in (list, set, frozenset, tuple):
            return {"type": "array", "items": {"x-kubernetes-preserve-unknown-fields": True}}
        if tp is dict:
            return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        raise SchemaError(f"{where}: {tp!r} has no Kubernetes schema (use str, int, float, "
                          "bool, datetime, Literal, Enum, list, dict[str, T], a wk.Schema "
                          "class, or Any)")

    @staticmethod
    def _apply_metas(node: JSON, metas: list[msgspec.Meta], where: str) -> bool:
        """Bounds, lengths, pattern, docs from ``msgspec.Meta``; True if one described it."""
        described = False
        kind = node.get("type")
        for m in metas:
            if m.description is not None:
                node["description"] = m.description
                described = True
            if m.title is not None:
                node["title"] = m.title
            if m.examples:
                node["example"] = msgspec.to_builtins(m.examples[0])
            bounds = {"ge": m.ge, "gt": m.gt, "le": m.le, "lt": m.lt, "multiple_of": m.multiple_of}
            if any(v is not None for v in bounds.values()) and kind not in ("integer", "number"):
                raise SchemaError(f"{where}: bounds (ge, gt, le, lt) need a number, not {kind}")
            for key, value in bounds.items():
                if value is None:
                    continue
                if key in ("ge", "gt"):
                    node["minimum"] = value
                    if key == "gt":
                        node["exclusiveMinimum"] = True
                elif key in ("le", "lt"):
                    node["maximum"] = value
                    if key == "lt":
                        node["exclusiveMaximum"] = True
                else:
                    node["multipleOf"] = value
            if m.pattern is not None:
                if kind != "string":
                    raise SchemaError(f"{where}: a pattern needs a str, not {kind}")
                node["pattern"] = m.pattern
            lengths = {"string": ("minLength", "maxLength"), "array": ("minItems", "maxItems"),
                       "object": ("minProperties", "maxProperties")}
            for value, i in ((m.min_length, 0), (m.max_length, 1)):
                if value is None:
                    continue
                if not isinstance(kind, str) or kind not in lengths:
                    raise SchemaError(f"{where}: min_length/max_length need a str, list or "
                                      f"dict, not {kind}")
                node[lengths[kind][i]] = value
            if m.extra_json_schema:
                node.update(m.extra_json_schema)
        return described

    @staticmethod
    def _apply_markers(node: JSON, markers: list[Any], where: str) -> None:
        for m in markers:
            if isinstance(m, ListMap | ListSet | ListAtomic):
                if node.get("type") != "array":
                    raise SchemaError(f"{where}: {type(m).__name__} is for a list, not "
                                      f"{node.get('type')}")
                if node.get("x-kubernetes-list-type") == "set" and not isinstance(m, ListSet):
                    raise SchemaError(f"{where}: a set is a set list; use list[...] for "
                                      f"{type(m).__name__}")
            if isinstance(m, ListMap):
                _check_map_keys(node["items"], m.keys, where)
                node["x-kubernetes-list-type"] = "map"
                node["x-kubernetes-list-map-keys"] = list(m.keys)
            elif isinstance(m, ListSet):
                if node["items"].get("type") not in _SCALARS and not node["items"].get(
                        "x-kubernetes-int-or-string"):
                    raise SchemaError(f"{where}: a set holds scalars (str, int, ...), not "
                                      "objects; use ListMap(key) for objects")
                node["x-kubernetes-list-type"] = "set"
            elif isinstance(m, ListAtomic):
                node["x-kubernetes-list-type"] = "atomic"
            elif isinstance(m, PreserveUnknownFields):
                if node.get("type") not in ("object", None):
                    raise SchemaError(f"{where}: PreserveUnknownFields is for an object")
                node["x-kubernetes-preserve-unknown-fields"] = True
            elif isinstance(m, EmbeddedResource):
                if node.get("type") != "object":
                    raise SchemaError(f"{where}: EmbeddedResource is for an object "
                                      "(dict[str, Any] or a Struct)")
                node["x-kubernetes-embedded-resource"] = True
            elif isinstance(m, Rule):
                node.setdefault("x-kubernetes-validations", []).append(m.schema())
            elif m is QUANTITY and not node.get("x-kubernetes-int-or-string"):
                raise SchemaError(f"{where}: Quantity is int | str")


def _homogeneous(tp: Any) -> bool:
    args = get_args(tp)
    return len(args) == 2 and args[1] is Ellipsis


def _enum(values: list[Any], where: str) -> JSON:
    kinds = {"boolean" if isinstance(v, bool) else "integer" if isinstance(v, int)
             else "number" if isinstance(v, float) else "string" if isinstance(v, str)
             else "?" for v in values}
    if len(kinds) != 1 or "?" in kinds:
        raise SchemaError(f"{where}: enum values must all be str, or all int, not {values!r}")
    return {"type": kinds.pop(), "enum": values}


def _check_map_keys(items: JSON, keys: tuple[str, ...], where: str) -> None:
    """The API server's rule: each key is a scalar field, required or defaulted."""
    props = items.get("properties")
    if items.get("type") != "object" or not isinstance(props, dict):
        raise SchemaError(f"{where}: ListMap needs a list of objects (wk.Schema classes)")
    for key in keys:
        node = props.get(key)
        if node is None:
            raise SchemaError(f"{where}: ListMap key {key!r} is not a field of the items "
                              f"(they have {', '.join(props)}; keys are wire names)")
        if node.get("type") not in _SCALARS and not node.get("x-kubernetes-int-or-string"):
            raise SchemaError(f"{where}: ListMap key {key!r} must be a scalar field")
        if key not in items.get("required", ()) and "default" not in node:
            raise SchemaError(f"{where}: ListMap key {key!r} must be required or have a "
                              "default")
