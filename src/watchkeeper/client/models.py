"""Objects as classes: ``ObjectMeta`` and the conversions between the dicts the runtime keeps
and typed objects (``msgspec.Struct``s).

The runtime keeps dicts (the watcher, the Store); a typed object is built from one when it
is asked for (``from_dict``) and remembers that dict, so that ``to_dict`` writes back every
field the server sent, including those the class does not declare (a field of a newer
API server, an annotation-like extension): a write never drops what it did not read."""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any, TypeVar, Union, get_args, get_origin

import msgspec

__all__ = ["ObjectMeta", "OwnerReference", "from_dict", "source_of", "to_dict"]

T = TypeVar("T")

_SOURCE = "_wk_source"


class OwnerReference(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    """An owner of an object (metav1.OwnerReference): the garbage collector deletes the
    object once its owners are gone."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True, dict=True):
    """The metadata of every object (metav1.ObjectMeta). Unknown fields the server sends
    are kept by ``from_dict`` and written back by ``to_dict``."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    owner_references: list[OwnerReference] = []
    finalizers: list[str] = []
    managed_fields: list[dict[str, Any]] = []
    self_link: str | None = None


@cache
def _fields(cls: type) -> dict[str, type | None]:
    """A Struct's wire names -> the Struct class a field holds (None: not a Struct)."""
    out: dict[str, type | None] = {}
    for f in msgspec.structs.fields(cls):
        out[f.encode_name] = _struct_in(f.type)
    return out


def _struct_in(tp: Any) -> type | None:
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return tp
    if get_origin(tp) is Union or type(tp).__name__ == "UnionType":
        structs = [s for s in map(_struct_in, get_args(tp)) if s is not None]
        return structs[0] if len(structs) == 1 else None
    if get_origin(tp) is not None and hasattr(tp, "__metadata__"):  # Annotated
        return _struct_in(get_args(tp)[0])
    return None


def from_dict(cls: type[T], obj: dict[str, Any]) -> T:
    """``obj`` (as the API server sent it) as a ``cls``, validated; the dict is kept on the
    result (a Struct with ``dict=True``) for ``to_dict``. Raises ``msgspec.ValidationError``
    naming the field that does not fit."""
    typed = msgspec.convert(obj, cls)
    keeps = _KEEPS_SOURCE.get(cls)
    if keeps is None:
        config = getattr(cls, "__struct_config__", None)
        keeps = _KEEPS_SOURCE[cls] = bool(config is not None and config.dict)
    if keeps:
        setattr(typed, _SOURCE, obj)
    return typed


_KEEPS_SOURCE: dict[type, bool] = {}  # per class: a Struct with dict=True


def source_of(typed: object) -> dict[str, Any] | None:
    """The dict ``typed`` was built from, if any."""
    d = getattr(typed, "__dict__", None)
    return d.get(_SOURCE) if d is not None else None


def to_dict(typed: object) -> dict[str, Any]:
    """``typed`` as JSON-ready builtins, with the fields its class does not know taken back
    from the dict it was read from (at any depth of nested Structs)."""
    out = msgspec.to_builtins(typed)
    if not isinstance(out, dict):
        raise TypeError(f"{type(typed).__qualname__} is not an object")
    source = source_of(typed)
    if source is not None and isinstance(typed, msgspec.Struct):
        _merge_unknown(out, source, type(typed))
    return out


def _copy(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return msgspec.json.decode(msgspec.json.encode(value))
    return value


def _merge_unknown(out: dict[str, Any], source: dict[str, Any], cls: type) -> None:
    known = _fields(cls)
    for key, value in source.items():
        if key not in known:
            if key not in out:  # a copy: the source may be a cached object, never changed
                out[key] = _copy(value)
            continue
        inner = known[key]
        if inner is not None and isinstance(value, dict) and isinstance(out.get(key), dict):
            _merge_unknown(out[key], value, inner)
