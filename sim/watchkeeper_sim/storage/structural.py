"""A custom resource as its structural schema shapes it, beyond pruning (validation.py).

Numbers as Go decodes JSON (1.0 is the integer 1; past int64 an integer is a float), nulls
of non-nullable fields dropped, defaults applied (nested, in array items and in defaults
themselves), and the value checks validation.py's walk lacks: formats, list sizes, list
types (set, map), multipleOf, minProperties, an embedded resource's apiVersion and kind.
Messages are kube-apiserver 1.28's (tests/conformance: crd-defaulting, crd-pruning,
crd-validation-*). Not done: defaults on read, maxProperties, anyOf/oneOf. CEL rules:
celrules.py.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Callable
from typing import Any

from watchkeeper_sim import status as _status
from watchkeeper_sim.model import JSON
from watchkeeper_sim.storage.clone import clone

_INT64 = 2 ** 63


def go_numbers(value: Any) -> Any:
    """``value`` with numbers as the apiserver's JSON decoder reads them (in place for
    objects and lists): an integral float is an int64, an int past int64 a float64."""
    if isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer() and -_INT64 <= value < _INT64:
        return int(value)
    if isinstance(value, int) and not -_INT64 <= value < _INT64:
        return float(value)
    if isinstance(value, dict):
        for key, item in value.items():
            value[key] = go_numbers(item)
    elif isinstance(value, list):
        value[:] = [go_numbers(item) for item in value]
    return value


def _fields(value: JSON, schema: JSON) -> list[tuple[str, JSON]]:
    """(key, its schema) for each key of ``value`` the schema specifies."""
    props = schema.get("properties")
    props = props if isinstance(props, dict) else {}
    extra = schema.get("additionalProperties")
    out = []
    for key in list(value):
        sub = props.get(key, extra if isinstance(extra, dict) else None)
        if isinstance(sub, dict):
            out.append((key, sub))
    return out


def drop_nulls(value: Any, schema: JSON, root: bool = True) -> None:
    """Remove nulls of fields that are not nullable and have no default (in place)."""
    if isinstance(value, dict):
        for key, sub in _fields(value, schema):
            if root and key in ("apiVersion", "kind", "metadata"):
                continue
            if value[key] is None and not sub.get("nullable") and "default" not in sub:
                del value[key]
            else:
                drop_nulls(value[key], sub, False)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            drop_nulls(item, schema["items"], False)


def default(value: Any, schema: JSON | None, root: bool = True) -> None:
    """Structural defaulting (in place): a missing field, or a null one that is not
    nullable, gets its default; then defaults inside it apply too."""
    if schema is None:
        return
    if isinstance(value, dict):
        props = schema.get("properties")
        for key, sub in (props.items() if isinstance(props, dict) else ()):
            if root and key in ("apiVersion", "kind", "metadata"):
                continue
            if isinstance(sub, dict) and "default" in sub and (
                    key not in value or (value[key] is None and not sub.get("nullable"))):
                value[key] = clone(sub["default"])
        for key, sub in _fields(value, schema):
            if not (root and key in ("apiVersion", "kind", "metadata")):
                default(value[key], sub, False)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            default(item, schema["items"], False)


# ---- value checks --------------------------------------------------------------------------

_DATE_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
_UUID = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}", re.I)
_EMAIL = re.compile(r"[^@\s<>]+@[^@\s<>]+")


def _ip(text: str, version: int) -> bool:
    try:
        return ipaddress.ip_address(text).version == version
    except ValueError:
        return False


def _base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


_FORMATS: dict[str, Callable[[str], object]] = {
    "date-time": _DATE_TIME.fullmatch, "datetime": _DATE_TIME.fullmatch,
    "date": re.compile(r"\d{4}-\d{2}-\d{2}").fullmatch,
    "uuid": _UUID.fullmatch, "email": _EMAIL.fullmatch, "byte": _base64,
    "ipv4": lambda t: _ip(t, 4), "ipv6": lambda t: _ip(t, 6),
}


def _go(value: Any) -> str:
    """%#v of a JSON value, as a Duplicate error prints it."""
    if isinstance(value, str):
        return _status.go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        inner = ", ".join(f"{_status.go_quote(k)}:{_go(v)}" for k, v in sorted(value.items()))
        return "map[string]interface {}{" + inner + "}"
    return str(value)


def value_causes(value: Any, schema: JSON, path: str) -> list[JSON]:
    """The checks of one value (already of the right type) that validation.py's walk
    does not make."""
    causes: list[JSON] = []
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        step = schema.get("multipleOf")
        if isinstance(step, (int, float)) and step and (value / step) % 1:
            causes.append(_status.cause(
                "FieldValueInvalid",
                f"Invalid value: {_go(value)}: {path} in body should be a multiple of "
                f"{_go(step)}", path))
    if isinstance(value, str):
        fmt = schema.get("format")
        check = _FORMATS.get(fmt) if isinstance(fmt, str) else None
        if check is not None and not check(value):
            causes.append(_status.cause(
                "FieldValueTypeInvalid",
                f"Invalid value: {_go(value)}: {path} in body must be of type {fmt}: "
                f"{_go(value)}", path))
    if isinstance(value, list):
        causes += _list_causes(value, schema, path)
    if isinstance(value, dict):
        least = schema.get("minProperties")
        if isinstance(least, int) and len(value) < least:
            causes.append(_status.cause(
                "FieldValueInvalid",
                f"Invalid value: {len(value)}: {path} in body should have at least {least} "
                "properties", path))
        if schema.get("x-kubernetes-embedded-resource"):
            causes += [_status.cause("FieldValueRequired", "Required value: must not be empty",
                                     f"{path}.{key}")
                       for key in ("apiVersion", "kind") if key not in value]
    return causes


def _list_causes(value: list[Any], schema: JSON, path: str) -> list[JSON]:
    causes: list[JSON] = []
    least, most = schema.get("minItems"), schema.get("maxItems")
    if isinstance(least, int) and len(value) < least:
        causes.append(_status.cause(
            "FieldValueInvalid",
            f"Invalid value: {len(value)}: {path} in body should have at least {least} items",
            path))
    if isinstance(most, int) and len(value) > most:
        causes.append(_status.cause(
            "FieldValueTooMany", f"Too many: {len(value)}: must have at most {most} items",
            path))
    kind = schema.get("x-kubernetes-list-type")
    keys = schema.get("x-kubernetes-list-map-keys") or []
    seen: list[Any] = []
    for i, item in enumerate(value):
        if kind == "set":
            key: Any = item
        elif kind == "map" and isinstance(item, dict) and all(k in item for k in keys):
            key = {k: item[k] for k in keys}
        else:
            continue
        if key in seen:
            causes.append(_status.cause("FieldValueDuplicate", f"Duplicate value: {_go(key)}",
                                        f"{path}[{i}]"))
        else:
            seen.append(key)
    return causes
