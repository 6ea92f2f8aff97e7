"""The decoded things the verbs and the watch stream hand out: ``ObjectEvent`` (the one
lazy event class: ``RawEvent`` and the watcher's events are its subclasses), ``Bookmark``,
``KeyFields``, ``ObjectList``, and the decoders and checks behind them (what an object
needs to be keyed by, what a LIST answer must be: ``ListShape``).

They live below ``api`` (the verbs), ``stream`` and ``_pieces`` (the watch framing) and
``_pager`` (the LIST pager) so that each of those imports them without importing the others.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeVar, cast

import msgspec

from watchkeeper.client._fast import speedups
from watchkeeper.client._json import bounded_repr, decode_deep
from watchkeeper.client.errors import InvalidResponse
from watchkeeper.client.redact import Redactor

JSON = dict[str, Any]
INITIAL_EVENTS_END = "k8s.io/initial-events-end"

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
    the dicts. This loose form is what a BOOKMARK or ERROR line must be (a bookmark and a
    Status have no name); an object line must be an ``_ObjectHead``."""

    type: str
    object: _HeadObject


class _ObjectKeys(KeyFields, gc=False, kw_only=True):
    """The key fields of an object event: a name is required and not empty (checked by
    msgspec while it decodes, so the lazy path pays nothing for it)."""

    name: Annotated[str, msgspec.Meta(min_length=1)]


class _ObjectHeadObject(msgspec.Struct, gc=False):
    metadata: _ObjectKeys


class _ObjectHead(msgspec.Struct, gc=False):
    """What a lazy watch stream decodes of an ADDED/MODIFIED/DELETED line: ``_Head`` with
    metadata and a name required, so nothing nameless can reach a store."""

    type: str
    object: _ObjectHeadObject


KEYLESS_EVENTS = frozenset(("BOOKMARK", "ERROR"))
"""The event types whose object need not be named (the rest are objects to key a store by)."""


_decode_any = msgspec.json.Decoder().decode  # a plain decode beats a typed envelope here
_NO_META = KeyFields()


if TYPE_CHECKING:

    class _EventFields:
        """What type checkers see: ``obj`` is always a dict."""

        __match_args__ = ("obj",)
        _key: KeyFields | None
        _line: Any
        _strip: bool
        _at: int

        def __init__(self, obj: JSON | None, _key: KeyFields | None = None,
                     _line: Any = None, _strip: bool = False, _at: int = 0) -> None: ...

        @property
        def obj(self) -> JSON: ...

else:

    class _EventFields(msgspec.Struct):
        """The storage of an object event. A msgspec Struct because it is built in C: 0.08
        against 0.35 µs per event for a Python ``__init__``, a third of the lazy watcher's
        whole cost per event (docs/decisions.md). ``obj`` is None until a lazy event's
        object is read; the ``obj`` property set on ``ObjectEvent`` below decodes it then."""

        obj: Any
        _key: Any = None
        _line: Any = None  # the event's line (bytes), or its piece (``_at`` is its index)
        _strip: bool = False  # drop metadata.managedFields once decoded
        _at: int = 0


_OBJ_SLOT: Any = _EventFields.__dict__["obj"] if not TYPE_CHECKING else None


class ObjectEvent(_EventFields):
    """One watch event that carries an object: the one lazy event class of the watch path.

    ``obj`` is a plain dict; a lazy stream decodes it on first read, from the event's line
    or its piece. ``name``, ``namespace`` and ``resource_version`` never need that (they
    were decoded with the piece). Compared by value, matched positionally as
    ``case Apply(obj)``; not hashable (it holds a dict). The private constructor arguments
    are the stream's lazy form. The watcher's ``Apply``/``Delete``/``InitApply`` and what
    ``Api.watch`` yields (``RawEvent``) are subclasses.
    """

    def _keys(self) -> KeyFields:
        keys = self._key
        if keys is None:
            keys = self._key = key_fields(self.obj)
        return keys

    # One frame per read, not two: ``name`` is the hot read of a lazy consumer.
    @property
    def name(self) -> str:
        keys = self._key
        return (keys if keys is not None else self._keys()).name

    @property
    def namespace(self) -> str:
        keys = self._key
        return (keys if keys is not None else self._keys()).namespace

    @property
    def resource_version(self) -> str:
        keys = self._key
        return (keys if keys is not None else self._keys()).resourceVersion

    @property
    def decoded(self) -> bool:
        """Whether ``obj`` has been built (always, for an eager stream)."""
        return self._line is None

    def _copy_as(self, cls: type[_E]) -> _E:
        """The same event as another class, its object still undecoded if it was."""
        return cls(_OBJ_SLOT.__get__(self), self._key, self._line, self._strip, self._at)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, ObjectEvent)
        return self.obj == other.obj

    def __repr__(self) -> str:
        if self._line is not None:
            return (f"{type(self).__name__}(<not decoded: {self.namespace}/{self.name} "
                    f"rv={self.resource_version}>)")
        # Bounded: an object as deep as the apiserver stores would make repr() raise.
        return f"{type(self).__name__}(obj={bounded_repr(self.obj)})"


_E = TypeVar("_E", bound=ObjectEvent)


def _decoded(self: ObjectEvent) -> JSON:
    """``event.obj``: a lazy event decodes its line (or its piece's window) on first read."""
    obj: JSON | None = _OBJ_SLOT.__get__(self)
    if obj is None:
        line = self._line
        if line is None:
            raise TypeError(f"{type(self).__name__} has no object")
        obj = decode_line_object(line) if isinstance(line, bytes) else line.obj(self._at)
        if self._strip:
            strip_managed_fields(obj)
        _OBJ_SLOT.__set__(self, obj)
        self._line = None
    return obj


if not TYPE_CHECKING:
    # Set after the class is made: in the body msgspec would take it for the field's default.
    ObjectEvent.obj = property(_decoded)
    if speedups is not None:
        # The same three reads in C (no frame per read: a consumer and the Store read them
        # for every event); tests/runtime/client/test_speedups.py holds them to the above.
        ObjectEvent.name = speedups.KeyField("name")
        ObjectEvent.namespace = speedups.KeyField("namespace")
        ObjectEvent.resource_version = speedups.KeyField("resourceVersion")


def last_version(events: list[ObjectEvent]) -> str:
    """The resourceVersion of the last of ``events`` that has one ("" if none)."""
    for event in reversed(events):
        rv = event.resource_version
        if rv:
            return rv
    return ""


def strip_managed_fields(obj: JSON) -> None:
    """Drop ``metadata.managedFields`` (about half of a cached object)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)


class RawEvent(ObjectEvent):
    """One line of a watch stream as ``Api.watch`` yields it: ``type`` is
    ADDED/MODIFIED/DELETED (or BOOKMARK: a ``Bookmark``), ``object`` the object.

    ``name``, ``namespace`` and ``resource_version`` are always at hand; ``object`` is
    decoded on first read when the stream is lazy, so a consumer that skips events or reads
    only those three fields never pays for building the object's dicts. An ERROR line is
    not an event: the stream raises it as its typed ``ApiError``.
    """

    type: ClassVar[str] = ""

    @classmethod
    def of(cls, type: str, object: JSON | None = None, key: KeyFields | None = None,
           line: bytes | None = None) -> RawEvent:
        """An event as the stream makes it (for tests and fakes): ``type``, and ``object``
        or the ``line`` to decode it from on first read (``key``: its key fields)."""
        if object is None and line is None:
            raise ValueError("RawEvent needs an object or the line to decode it from")
        maker = Bookmark if type == "BOOKMARK" else raw_event_class(type)
        return maker(object, key, line)

    @property
    def object(self) -> JSON:
        return self.obj

    def __repr__(self) -> str:
        return f"RawEvent({self.type}, {self.namespace}/{self.name}, rv={self.resource_version})"


class Bookmark(RawEvent):
    """A BOOKMARK line: the stream is at ``resource_version``; ``initial_events_end`` marks
    the end of a streaming list's initial events (annotation ``k8s.io/initial-events-end``)."""

    type: ClassVar[str] = "BOOKMARK"

    @property
    def initial_events_end(self) -> bool:
        meta = self.obj.get("metadata")
        annotations = meta.get("annotations") if isinstance(meta, dict) else None
        return isinstance(annotations, dict) and annotations.get(INITIAL_EVENTS_END) == "true"


_RAW_CLASSES: dict[str, type[RawEvent]] = {}
_MAX_RAW_CLASSES = 16  # a server sending ever new event types cannot grow this table


def raw_event_class(kind: str) -> type[RawEvent]:
    """The ``RawEvent`` subclass whose ``type`` is ``kind`` (made once per kind; past a
    few kinds, made anew and not kept: only a broken or hostile server sends them)."""
    cls = _RAW_CLASSES.get(kind)
    if cls is None:
        cls = cast("type[RawEvent]", type(
            f"RawEvent_{kind}", (RawEvent,), {"type": kind, "__annotations__": {}}))
        if len(_RAW_CLASSES) < _MAX_RAW_CLASSES:
            _RAW_CLASSES[kind] = cls
    return cls


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def key_fields(obj: JSON) -> KeyFields:
    """The key fields of a decoded object (what a lazy stream reads without decoding it)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return _NO_META
    return KeyFields(_str(meta.get("namespace")), _str(meta.get("name")),  # positional: hot
                     _str(meta.get("resourceVersion")))


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def key_problem(obj: Any, named: bool = True) -> str:
    """What makes ``obj`` no object to key a store by ("" if nothing): the checks the lazy
    stream's heads make as msgspec decodes them (``_ObjectHead``; ``_Head`` when not
    ``named``: a BOOKMARK's or ERROR's object), for the paths that hold a dict instead
    (eager events, list items, lines too deep for msgspec)."""
    if not isinstance(obj, dict):
        return f"the object is {_type_name(obj)}, not a map"
    meta = obj.get("metadata")
    if meta is None and not named:
        return ""
    if not isinstance(meta, dict):
        return f"metadata is {_type_name(meta)}, not a map"
    for key in ("namespace", "name", "resourceVersion"):
        if key in meta and not isinstance(meta[key], str):
            return f"metadata.{key} is {_type_name(meta[key])}, not a string"
    if named and not meta.get("name"):
        return "metadata.name is missing or empty"
    return ""


def all_named(objs: Iterable[Any]) -> bool:
    """Whether ``key_problem`` finds nothing in any of ``objs`` (all named): the eager
    stream's per-piece check, written out for speed (about 0.1 µs an object)."""
    for obj in objs:
        if obj.__class__ is not dict:
            return False
        meta = obj.get("metadata")
        if meta.__class__ is not dict:
            return False
        name = meta.get("name")
        if name.__class__ is not str or not name:
            return False
        if meta.get("namespace", "").__class__ is not str or \
                meta.get("resourceVersion", "").__class__ is not str:
            return False
    return True


def _decode_line(line: bytes) -> Any:
    try:
        return _decode_any(line)
    except RecursionError:  # deeper than msgspec nests: still within the apiserver's limit?
        return decode_deep(line)


def decode_line_object(line: bytes, path: str = "", redactor: Redactor | None = None) -> JSON:
    """The object of a watch line that a lazy stream already validated; the line is quoted
    through ``redactor`` (the stream's client's; without one, only PEM keys are blanked)."""
    try:
        obj = _decode_line(line)["object"]
        if not isinstance(obj, dict):
            raise TypeError("object must be a map")
    except (msgspec.DecodeError, KeyError, TypeError) as exc:  # not expected: validated
        excerpt = (redactor or Redactor()).excerpt
        raise InvalidResponse(
            f"undecodable watch event ({excerpt(str(exc), 200)}): {excerpt(line, 80)!r}",
            method="GET", path=path,
        ) from None
    return obj


@dataclass
class ObjectList:
    items: list[JSON]
    resource_version: str
    continue_token: str | None = None
    remaining_item_count: int | None = None
    raw_metadata: JSON = field(default_factory=dict)


@dataclass(frozen=True)
class ListShape:
    """What a LIST answer must be: ``kind`` (``ConfigMapList``; "" when the resource's kind
    is unknown: any kind ending in ``List``) and ``api_version`` ("" when unknown)."""

    kind: str
    api_version: str = ""

    def __str__(self) -> str:
        kind = self.kind or "...List"
        return f"a {kind} ({self.api_version})" if self.api_version else f"a {kind}"


def _shown(value: Any) -> str:
    """A server's string, bounded, for a message; or what it is when it is no string."""
    if isinstance(value, str):
        return repr(value[:60] + ("..." if len(value) > 60 else ""))
    return _type_name(value)


def _what_came(data: JSON) -> str:
    kind, version = data.get("kind"), data.get("apiVersion")
    if kind is None:
        keys = ", ".join(_shown(k) for k in list(data)[:5]) + (", ..." if len(data) > 5 else "")
        return f"a JSON object without kind (keys: {keys or 'none'})"
    if kind == "Status":
        return f"a Status (status {_shown(data.get('status'))}, " \
               f"reason {_shown(data.get('reason'))})"
    return f"kind {_shown(kind)}" + (f" ({_shown(version)})" if version is not None else "")


def _check_shape(data: JSON, shape: ListShape) -> str:
    """Why ``data`` is not a list answer of ``shape`` ("" when it is one). As client-go:
    a body needs a kind, and the kind is the list kind asked for; ``items`` must be there
    (kube-apiserver sends ``[]`` for an empty list; null, which Go writes for a list it
    never made, counts as empty)."""
    kind = data.get("kind")
    if shape.kind:
        right = kind == shape.kind
    else:
        right = isinstance(kind, str) and kind.endswith("List") and kind != "List"
    version = data.get("apiVersion")
    if not right or (shape.api_version and version is not None
                     and version != shape.api_version):
        return _what_came(data)
    if "items" not in data:
        return f"{_shown(kind)} without items"
    return ""


def _object_list(data: JSON, path: str, shape: ListShape) -> ObjectList:
    """A list response, checked: anything but a list of the kind asked for (``shape``), or
    a list of malformed items, is an InvalidResponse, never a TypeError or a null object
    deep inside the watcher or the cache, nor an empty list that would wipe a cache."""

    def bad(what: str) -> InvalidResponse:
        return InvalidResponse(f"malformed list response: {what}", method="GET", path=path)

    wrong = _check_shape(data, shape)
    if wrong:
        raise InvalidResponse(
            f"expected {shape} as the answer to a LIST, got {wrong}", method="GET", path=path,
        )
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
    if not all_named(items):  # the fast pass; this loop only names the culprit
        for i, item in enumerate(items):
            problem = key_problem(item)
            if problem:
                raise bad(f"items[{i}]: {problem}")
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


class ListItem(msgspec.Struct, gc=False):
    """One item of a lazily decoded LIST page: its JSON (copied out of the page, which a
    ``msgspec.Raw`` would keep alive whole) and its key fields. It is a lazy event's
    ``_line``: ``obj(at)`` builds the dict on first read, and a Store compresses ``raw``
    itself without a dict ever being built."""

    raw: bytes
    key: KeyFields

    def obj(self, at: int = 0) -> JSON:
        return _decode_obj(self.raw)


@dataclass
class LazyList:
    """A LIST page as ``ListItem``s (``Api.list(lazy=True)``); the rest as ``ObjectList``."""

    items: list[ListItem]
    resource_version: str
    continue_token: str | None = None


class _ListMeta(msgspec.Struct, gc=False):
    resourceVersion: str = ""
    continue_: str = msgspec.field(default="", name="continue")
    remainingItemCount: int | None = None


class _RawPage(msgspec.Struct, gc=False):
    """A LIST page with its items undecoded. Only the happy path: anything this refuses is
    decoded again the eager way, whose checks name the problem (``_object_list``)."""

    kind: str
    items: list[msgspec.Raw] | None
    apiVersion: str | None = None
    metadata: _ListMeta | None = None


_decode_raw_page = msgspec.json.Decoder(_RawPage).decode
_decode_item_head = msgspec.json.Decoder(_ObjectHeadObject).decode


def lazy_list(body: bytes, path: str, shape: ListShape) -> LazyList | None:
    """``body`` as a ``LazyList`` when it is a well-formed list of ``shape`` with named
    items (the checks ``_object_list`` makes); None when not, or too deep for msgspec:
    then the caller decodes it eagerly, which says what is wrong."""
    try:
        page = _decode_raw_page(body)
        kind = page.kind
        if shape.kind:
            if kind != shape.kind:
                return None
        elif not kind.endswith("List") or kind == "List":
            return None
        version = page.apiVersion
        if shape.api_version and version is not None and version != shape.api_version:
            return None
        items = []
        for raw in page.items or ():
            item = bytes(raw)
            items.append(ListItem(item, _decode_item_head(item).metadata))
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    meta = page.metadata or _ListMeta()
    return LazyList(items, meta.resourceVersion, meta.continue_ or None)
