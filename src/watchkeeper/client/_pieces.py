"""Decoding a watch body in pieces: one msgspec decode per ~64 KiB of whole lines.

msgspec parses (validates) every byte of the piece into envelopes: ``(type, object)`` with
the object built as a dict when eager; when lazy, ``(type, metadata key fields)`` (the
object must be a map, an object event's metadata must name it; the rest of it is parsed
and skipped) plus the piece split at newlines (C), so a lazy event decodes its object from
its own line only when read. No Python code runs per event on the lazy good path; the
eager one checks its dicts' key fields in one short loop (what the lazy heads get from
msgspec), so both refuse the same lines. The piece is decoded as one JSON array, its newlines
turned into commas (``bytes.replace`` of one byte: C, no per-event work), and must have as
many elements as newlines (counted as ``len(b) - len(b.replace(b"\n", b""))``:
``bytes.count`` is a per-byte loop): together they hold exactly when every line is one
value (a line with two values, a blank line or a value split over two lines is no array;
a newline inside a string leaves one element fewer). A per-piece check catches what msgspec
lets through: non-UTF-8 bytes inside skipped strings (``isascii()`` else a strict decode).
A piece that fails is decoded again line by line: the events before the bad line are
returned with an ``InvalidResponse`` that carries the bad line (first 80 bytes) and the last
good resourceVersion; the line, like an ERROR event's Status, is quoted through the client's
``Redactor`` (a server may echo the request's credentials).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from itertools import repeat
from operator import attrgetter, call
from typing import Any

import msgspec

from watchkeeper.client._fast import speedups
from watchkeeper.client._json import decode_deep
from watchkeeper.client.errors import ApiError, InvalidResponse
from watchkeeper.client.objects import (
    _NO_META,
    KEYLESS_EVENTS,
    Bookmark,
    ObjectEvent,
    _Head,
    _HeadObject,
    _ObjectHead,
    all_named,
    decode_line_object,
    key_fields,
    key_problem,
    strip_managed_fields,
)
from watchkeeper.client.redact import Redactor

JSON = dict[str, Any]
PIECE_BYTES = 64 << 10
# Eager pieces are smaller: every dict of a piece is alive until the consumer has taken the
# piece, and each garbage collection meanwhile walks them all. Measured (replay server,
# 100,000 ConfigMap events): 4.85 µs per event with 64 KiB pieces, 3.05-3.25 with 16 KiB,
# 3.26 with 8 KiB and 3.81 with 4 KiB (per-piece costs take over).
EAGER_PIECE_BYTES = 16 << 10
# Far above the largest object a cluster stores (etcd's default request limit is 1.5 MiB;
# the apiserver's JSON of it, with managedFields, stays well under this).
MAX_LINE_BYTES = 64 << 20
_SHOWN = 80  # bytes of a bad line quoted in the error


class EagerEnvelope(msgspec.Struct, gc=False):
    type: str
    object: JSON


_TYPE = attrgetter("type")
_OBJECT = attrgetter("object")
_META = attrgetter("object.metadata")
EventClasses = Mapping[str, type[ObjectEvent]]
_PLAIN = frozenset(("ADDED", "MODIFIED", "DELETED"))
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError,
                  RecursionError, ValueError)


class LazyPiece(msgspec.Struct):
    """The bytes of one lazy piece. Objects are decoded from it only when read, a window of
    ~16 KiB of lines per ``decode_lines`` call, in order (one window's dicts alive at a time,
    for the garbage collector's sake: see ``EAGER_PIECE_BYTES``); lines are split out only
    for a caller that wants them (``bytes.split`` costs ~0.5 µs per event). A Struct: one
    is built per read, in C (a Python ``__init__`` is a frame per read)."""

    _data: bytes | None = None
    _lines: list[bytes] | None = None
    _objs: list[JSON | None] = msgspec.field(default_factory=list)
    _pos: int = 0

    @property
    def lines(self) -> list[bytes]:
        lines = self._lines
        if lines is None:
            assert self._data is not None
            lines = self._lines = self._data.split(b"\n")
        return lines

    def line(self, index: int) -> bytes:
        return self.lines[index]

    def obj(self, index: int) -> JSON:
        """The object of event ``index`` (each is handed out once: the event keeps it)."""
        data = self._data
        if data is None:
            return decode_line_object(self.line(index))
        objs = self._objs
        while index >= len(objs):
            pos = self._pos
            if pos >= len(data):
                raise IndexError(index)
            end = data.find(b"\n", pos + EAGER_PIECE_BYTES)
            end = len(data) if end < 0 else end + 1
            try:
                objs.extend([e.object for e in _eager_lines(data[pos:end])])
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
                raise InvalidResponse(f"undecodable watch event ({exc})", method="GET") from None
            self._pos = end
        obj = objs[index]
        if obj is None:  # read twice (a RawEvent copy): decode its line again
            return decode_line_object(self.line(index))
        objs[index] = None
        return obj


_eager_lines = msgspec.json.Decoder(EagerEnvelope).decode_lines
# The plain lazy piece in C (``_speedups.c``), when built: ``FastWatchStream.batches`` calls it
# before ``batch``, which decides whatever it leaves (None).
lazy_batch = speedups.lazy_batch if speedups is not None else None
_object_head = msgspec.json.Decoder(_ObjectHead).decode
_loose_head = msgspec.json.Decoder(_Head).decode
_loose_heads = msgspec.json.Decoder(list[_Head]).decode


def head_of(line: bytes) -> _Head | _ObjectHead:
    """The lazy stream's verdict on one line: an object event must be an ``_ObjectHead``
    (metadata with a name); a BOOKMARK or ERROR only needs well-typed key fields. Raises
    msgspec's error (RecursionError for a line deeper than msgspec nests)."""
    try:
        return _object_head(line)
    except msgspec.ValidationError as exc:
        head = _loose_head(line)  # its own error when the line is wrong for any type
        if head.type not in KEYLESS_EVENTS:
            raise exc from None
        return head


def _heads_named(heads: list[_Head]) -> bool:
    """Loose heads (a piece with a BOOKMARK or ERROR among its events): is every object
    event's name there? (Their types were checked as msgspec decoded them.)"""
    for head in heads:
        if head.type not in KEYLESS_EVENTS:
            meta = head.object.metadata
            if meta is None or not meta.name:
                return False
    return True


def _envelopes_named(envs: list[EagerEnvelope]) -> bool:
    """The eager stream's check of what the lazy heads check as they decode (so both modes
    refuse the same lines): fast for a piece of object events, per event otherwise."""
    if all_named(map(_OBJECT, envs)):
        return True
    return not any(key_problem(e.object, e.type not in KEYLESS_EVENTS) for e in envs)


_eager_decode = msgspec.json.Decoder(EagerEnvelope).decode


def _eager_one(line: bytes) -> EagerEnvelope:
    """One line of an eager stream, refused exactly when the lazy stream refuses it, and
    in its words."""
    env = _eager_decode(line)
    problem = key_problem(env.object, env.type not in KEYLESS_EVENTS)
    if problem:
        head_of(line)  # raises msgspec's account of it
        raise ValueError(problem)  # they disagree only on a key given twice in one map
    return env


class PieceDecoder:
    """Decodes pieces of one stream and remembers the last good resourceVersion."""

    def __init__(self, path: str = "", *, lazy: bool, redactor: Redactor | None = None) -> None:
        self.path = path
        self.lazy = lazy
        # The stream's client's: bad lines and ERROR events are quoted through it.
        self.redactor = redactor or Redactor()
        # A piece is decoded as one JSON array: its lines joined with commas (see decode).
        # Lazy, as object heads (a name required): a piece with a BOOKMARK or ERROR fails
        # that and is decoded again as loose heads (``_heads_named``).
        array: msgspec.json.Decoder[Any] = msgspec.json.Decoder(
            list[_ObjectHead] if lazy else list[EagerEnvelope])
        self._array: Callable[[bytes | bytearray], list[Any]] = array.decode
        self._one: Callable[[bytes], Any] = head_of if lazy else _eager_one
        self.resource_version = ""
        self.plain = True  # the last piece had only ADDED/MODIFIED/DELETED (no bad line)
        self.kinds: set[str] = set()  # the event types in the last piece
        self._before_bad = ""
        # Lazy: the last piece's lines, one per envelope (the fast path leaves one more,
        # empty, at the end): a lazy event decodes its object from its line.
        self.piece = LazyPiece(None, [])

    def count(self, envs: list[Any], counts: dict[str, int]) -> None:
        """Add the last piece's events (``envs``) to ``counts`` by type."""
        kinds = self.kinds
        if len(kinds) == 1:
            for kind in kinds:
                counts[kind] = counts.get(kind, 0) + len(envs)
            return
        types = list(map(_TYPE, envs))
        for kind in kinds:
            counts[kind] = counts.get(kind, 0) + types.count(kind)

    def rv_of(self, env: Any) -> str:
        """The resourceVersion of one envelope ("" for one without, e.g. an ERROR)."""
        if self.lazy:
            return (env.object.metadata or _NO_META).resourceVersion
        meta = env.object.get("metadata")
        rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
        return rv if isinstance(rv, str) else ""

    def _advance(self, envs: list[Any]) -> None:
        for env in reversed(envs):
            rv = self.rv_of(env)
            if rv:
                self.resource_version = rv
                return

    def _valid(self, data: bytes) -> list[Any] | None:
        """The envelopes of whole lines ``data`` if every line is one good event, else None."""
        try:
            # One value per line, exactly: with the newlines made commas the piece must be a
            # JSON array of one element per newline. Counting values against newlines alone
            # was not enough: a line with two values and a blank line (or a value split over
            # two lines) has as many, and then a lazy event's line(i) was another event's
            # line. A comma can stand nowhere a newline between two tokens of one value
            # could, so those fail the array; a newline inside a string (which JSON forbids,
            # but a comma there is fine) leaves one element fewer than newlines.
            array = bytearray(b"[")
            array += data
            array = array.replace(b"\n", b",")  # no Python per line
            if array[-1] == 0x2C:  # the piece's last newline: the end of the array
                array[-1] = 0x5D
            else:
                array += b"]"
            try:
                envs = self._array(array)
                named = True
            except msgspec.ValidationError:
                if not self.lazy:
                    raise
                envs = _loose_heads(array)  # a BOOKMARK or an ERROR among object events?
                named = _heads_named(envs)
            newlines = len(data) - len(data.replace(b"\n", b""))  # bytes.count: per-byte loop
            ok = named and len(envs) == newlines + (not data.endswith(b"\n"))
            if ok and not data.isascii():
                data.decode("utf-8")
            if ok and not self.lazy:
                ok = _envelopes_named(envs)
        except _DECODE_ERRORS:
            ok = False
        return envs if ok else None

    def decode(self, data: bytes) -> tuple[list[Any], InvalidResponse | None]:
        """Envelopes of whole lines ``data``; on a bad line, those before it and the error."""
        return self._settle(data, self._valid(data))

    def _settle(self, data: bytes, envs: list[Any] | None,
                ) -> tuple[list[Any], InvalidResponse | None]:
        """``decode`` once ``_valid`` has judged the piece (``envs``: None if it failed)."""
        if envs is None:
            self.plain = False
            good, error = self._by_line(data)
            self.kinds = set(map(_TYPE, good))
            self.resource_version = self._before_bad  # ``events`` advances it again
            return good, error
        if self.lazy:
            self.piece = LazyPiece(data)
        kinds = self.kinds = set(map(_TYPE, envs))
        self.plain = kinds <= _PLAIN
        return envs, None

    def batch(
        self, data: bytes, classes: EventClasses, other: Callable[[str], type[ObjectEvent]],
        counts: dict[str, int], strip: bool = False,
    ) -> tuple[list[ObjectEvent], ApiError | None]:
        """``decode`` then ``events``, in one call per read: the typed events of whole lines
        ``data`` and the error that ends them (an ERROR line, or else a bad line). A lazy
        piece of ADDED/MODIFIED/DELETED only, what a watch that keeps up gets, is built
        here with no further call (or, before this, by ``lazy_batch`` in C: the same
        events, tests/runtime/client/test_speedups.py)."""
        if self.lazy:
            envs = self._valid(data)
            if envs is not None:
                kinds = self.kinds = set(map(_TYPE, envs))
                if kinds <= _PLAIN:
                    # Built by C calls only (no Python code per event, no comprehension
                    # frame): each event is its class called with (None, the head's
                    # metadata, the piece, strip, its index).
                    self.plain = True
                    piece = self.piece = LazyPiece(data)
                    n = len(envs)
                    metas = list(map(_META, envs))  # an object event's head has it
                    rv = metas[-1].resourceVersion
                    if rv:
                        self.resource_version = rv
                    else:
                        self._advance(envs)
                    if len(kinds) == 1:
                        kind = envs[0].type
                        counts[kind] = counts.get(kind, 0) + n
                        made = map(classes[kind], repeat(None, n), metas, repeat(piece, n),
                                   repeat(strip, n), range(n))
                    else:
                        self.count(envs, counts)
                        made = map(call, map(classes.__getitem__, map(_TYPE, envs)),
                                   repeat(None, n), metas, repeat(piece, n), repeat(strip, n),
                                   range(n))
                    return list(made), None
            envs, bad = self._settle(data, envs)
        else:
            envs, bad = self.decode(data)
        if not envs:
            return [], bad
        batch, error = self.events(envs, classes, other, counts, strip)
        return batch, error or bad

    def _by_line(self, data: bytes) -> tuple[list[Any], InvalidResponse | None]:
        self._before_bad = self.resource_version
        good: list[Any] = []
        lines: list[bytes] = []
        self.piece = LazyPiece(None, lines)
        one = self._one
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                try:
                    env = one(line)
                except RecursionError:  # deeper than msgspec nests: the apiserver allows it
                    env = self._deep(line)
                if not line.isascii():
                    line.decode("utf-8")
            except _DECODE_ERRORS as exc:
                if good:
                    self._advance(good)
                return good, self.bad_line(line, exc)
            good.append(env)
            lines.append(line)
        if good:
            self._advance(good)
        return good, None

    def _deep(self, line: bytes) -> Any:
        """The envelope of a line too deep for msgspec, from the stack-free decoder (rare),
        checked as the typed decoder would have checked it."""
        decoded = decode_deep(line)
        if not isinstance(decoded, dict):
            raise ValueError("a watch event must be a map")
        kind, obj = decoded.get("type"), decoded.get("object")
        if not isinstance(obj, dict) or not isinstance(kind, str):
            raise ValueError("type must be a string and object a map")
        problem = key_problem(obj, kind not in KEYLESS_EVENTS)
        if problem:
            raise ValueError(problem)
        if self.lazy:
            return _Head(kind, _HeadObject(key_fields(obj)))
        return EagerEnvelope(kind, obj)

    def bad_line(self, line: bytes, exc: BaseException) -> InvalidResponse:
        rv = self.resource_version
        excerpt = self.redactor.excerpt
        shown = excerpt(line, _SHOWN)
        more = f" ({len(line):,} bytes)" if len(line) > _SHOWN else ""
        err = InvalidResponse(
            f"undecodable watch event ({type(exc).__name__}: {excerpt(str(exc), 200)}) after "
            f"resourceVersion {rv or '(none)'}: {shown!r}{more}",
            method="GET", path=self.path, details={"lastResourceVersion": rv},
        )
        err.line = shown  # type: ignore[attr-defined]
        err.resource_version = rv  # type: ignore[attr-defined]
        return err

    def events(
        self, envs: list[Any], classes: EventClasses, other: Callable[[str], type[ObjectEvent]],
        counts: dict[str, int], strip: bool = False,
    ) -> tuple[list[ObjectEvent], ApiError | None]:
        """The typed events of the last piece's envelopes ``envs``: each object line as an
        instance of ``classes[type]`` (``other(type)`` for a type not in it), a BOOKMARK as
        ``Bookmark``; an ERROR line ends the piece as its typed ``ApiError`` (the events
        before it are returned with it). Counts them by type into ``counts`` and advances
        ``resource_version`` to the last of them. A piece of ADDED/MODIFIED/DELETED only is
        built in one comprehension, with its bookkeeping once for the piece."""
        if self.plain:
            if not envs:
                return [], None
            self.count(envs, counts)
            self._advance(envs)
            if self.lazy:
                piece = self.piece
                return [classes[e.type](None, e.object.metadata or _NO_META, piece, strip, i)
                        for i, e in enumerate(envs)], None
            if strip:
                for e in envs:
                    strip_managed_fields(e.object)
            return [classes[e.type](e.object) for e in envs], None
        out: list[ObjectEvent] = []
        lazy, piece = self.lazy, self.piece
        for i, env in enumerate(envs):
            kind = env.type
            if kind == "ERROR":
                status = (decode_line_object(piece.line(i), self.path, self.redactor) if lazy
                          else env.object)
                return out, self.redactor.status_error(status, method="WATCH", path=self.path)
            counts[kind] = counts.get(kind, 0) + 1
            rv = self.rv_of(env)
            if rv:
                self.resource_version = rv
            if kind == "BOOKMARK":
                obj = (decode_line_object(piece.line(i), self.path, self.redactor) if lazy
                       else env.object)
                out.append(Bookmark(obj))
                continue
            cls = classes.get(kind) or other(kind)
            if lazy:
                out.append(cls(None, env.object.metadata or _NO_META, piece, strip, i))
            else:
                obj = env.object
                if strip:
                    strip_managed_fields(obj)
                out.append(cls(obj))
        return out, None

