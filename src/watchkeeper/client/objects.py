"""The decoded things the verbs and the watch stream hand out: ``RawEvent``, its
``KeyFields``, ``ObjectList``, and the decoders behind them.

They live below ``api`` (the verbs), ``stream`` and ``_pieces`` (the watch framing) and
``_pager`` (the LIST pager) so that each of those imports them without importing the others.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import Any

import msgspec

from watchkeeper.client._json import decode_deep
from watchkeeper.client.errors import InvalidResponse

JSON = dict[str, Any]

_decode_dict = msgspec.json.Decoder(dict[str, Any]).decode

def _decode_obj(body: bytes) -> JSON:
    """A JSON object (a response body); deeper than msgspec nests, the iterative decoder."""
    try:
        return _decode_dict(body)
    except RecursionError:
        obj = decode_deep(body)
        if not isinstance(obj, dict):
            raise msgspec.ValidationError(
                f"Expected `object`, got `{type(obj).__name__}`"
            ) from None
        return obj


_LARGE = 256 * 1024


def _decode_large(body: bytes) -> JSON:
    """Decode with the cyclic GC paused for big bodies: a page of 500 objects allocates
    hundreds of thousands of containers that all stay alive, and collecting during the
    decode was measured at about 70 % of a LIST's client CPU (benchmarks/list_throughput)."""
    if len(body) < _LARGE or not gc.isenabled():
        return _decode_obj(body)
    gc.disable()
    try:
        return _decode_obj(body)
    finally:
        gc.enable()


class KeyFields(msgspec.Struct, gc=False):
    """The metadata a watcher needs of every event, decoded without the rest; namespace
    before name, as in ``ObjectRef`` and ``namespace/name``."""

    namespace: str = ""
    name: str = ""
    resourceVersion: str = ""


class _HeadObject(msgspec.Struct, gc=False):
    metadata: KeyFields | None = None


class _Head(msgspec.Struct, gc=False):
    """What a lazy watch stream decodes of each line (``client/_pieces``): msgspec still
    parses (validates) the rest while skipping it, at about a third of the cost of building
    the dicts."""

    type: str
    object: _HeadObject


_decode_any = msgspec.json.Decoder().decode  # a plain decode beats a typed envelope here
_NO_META = KeyFields()


class RawEvent:
    """One line of a watch stream: ``type`` is ADDED/MODIFIED/DELETED/BOOKMARK/ERROR.

    ``name``, ``namespace`` and ``resource_version`` are always at hand; ``object`` is
    decoded on first read when the stream is lazy, so a consumer that skips events or reads
    only those three fields never pays for building the object's dicts.
    """

    __slots__ = ("_key", "_line", "_object", "_path", "type")

    def __init__(
        self,
        type: str,
        object: JSON | None = None,
        key: KeyFields | None = None,
        line: bytes | None = None,
        path: str = "",
    ) -> None:
        if object is None and line is None:
            raise ValueError("RawEvent needs an object or the line to decode it from")
        self.type = type
        self._object = object
        self._key = key
        self._line = line
        self._path = path

    @property
    def object(self) -> JSON:
        obj = self._object
        if obj is None:
            assert self._line is not None
            obj = decode_line_object(self._line, self._path)
            self._object, self._line = obj, None
        return obj

    @property
    def decoded(self) -> bool:
        """Whether ``object`` has been built (always, for an eager stream)."""
        return self._object is not None

    def _meta(self) -> KeyFields:
        key = self._key
        if key is None:
            key = self._key = key_fields(self.object)
        return key

    @property
    def name(self) -> str:
        return self._meta().name

    @property
    def namespace(self) -> str:
        return self._meta().namespace

    @property
    def resource_version(self) -> str:
        return self._meta().resourceVersion

    def __repr__(self) -> str:
        return f"RawEvent({self.type}, {self.namespace}/{self.name}, rv={self.resource_version})"


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def key_fields(obj: JSON) -> KeyFields:
    """The key fields of a decoded object (what a lazy stream reads without decoding it)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return _NO_META
    return KeyFields(_str(meta.get("namespace")), _str(meta.get("name")),  # positional: hot
                     _str(meta.get("resourceVersion")))


def _decode_line(line: bytes) -> Any:
    try:
        return _decode_any(line)
    except RecursionError:  # deeper than msgspec nests: still within the apiserver's limit?
        return decode_deep(line)


def decode_line_object(line: bytes, path: str = "") -> JSON:
    """The object of a watch line that a lazy stream already validated."""
    try:
        obj = _decode_line(line)["object"]
        if not isinstance(obj, dict):
            raise TypeError("object must be a map")
    except (msgspec.DecodeError, KeyError, TypeError) as exc:  # not expected: validated
        raise InvalidResponse(
            f"undecodable watch event ({exc}): {line[:80]!r}", method="GET", path=path,
        ) from None
    return obj


@dataclass
class ObjectList:
    items: list[JSON]
    resource_version: str
    continue_token: str | None = None
    remaining_item_count: int | None = None
    raw_metadata: JSON = field(default_factory=dict)


def _object_list(data: JSON, path: str) -> ObjectList:
    """A list response, checked: a malformed one is an InvalidResponse, never a TypeError
    or a null object deep inside the watcher or the cache."""

    def bad(what: str) -> InvalidResponse:
        return InvalidResponse(f"malformed list response: {what}", method="GET", path=path)

    meta = data.get("metadata")
    if meta is None:
        meta = {}
    elif not isinstance(meta, dict):
        raise bad(f"metadata is a {type(meta).__name__}, not a map")
    items = data.get("items")
    if items is None:
        items = []
    elif not isinstance(items, list):
        raise bad(f"items is a {type(items).__name__}, not a list")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise bad(f"items[{i}] is {type(item).__name__ if item is not None else 'null'}, "
                      "not an object")
    rv, token, remaining = (
        meta.get("resourceVersion"), meta.get("continue"), meta.get("remainingItemCount")
    )
    if rv is not None and not isinstance(rv, str):
        raise bad(f"metadata.resourceVersion is a {type(rv).__name__}, not a string")
    if token is not None and not isinstance(token, str):
        raise bad(f"metadata.continue is a {type(token).__name__}, not a string")
    if remaining is not None and (not isinstance(remaining, int) or isinstance(remaining, bool)):
        raise bad(f"metadata.remainingItemCount is a {type(remaining).__name__}, not an integer")
    return ObjectList(
        items=items,
        resource_version=rv or "",
        continue_token=token or None,
        remaining_item_count=remaining,
        raw_metadata=meta,
    )
