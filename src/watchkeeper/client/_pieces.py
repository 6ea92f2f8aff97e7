"""Decoding a watch body in pieces: one ``decode_lines`` call per ~64 KiB of whole lines.

No Python code runs per event on the good path: msgspec parses (validates) every byte of
the piece into ``(type, object)`` envelopes, with the object kept as ``msgspec.Raw`` when
lazy or built as a dict when eager. Then three per-piece checks catch what msgspec lets
through: non-UTF-8 bytes inside skipped strings (``isascii()`` else a strict decode), two
values on one line (the number of values must equal the number of newlines, counted as
``len(b) - len(b.replace(b"\\n", b""))``: ``bytes.count`` is a per-byte loop), and, when
lazy, an ``object`` that is not a map. A piece that fails any check is decoded again line by
line: the events before the bad line are returned with an ``InvalidResponse`` that carries
the bad line (first 80 bytes) and the last good resourceVersion.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from watchkeeper.client.api import KeyFields, RawEvent
from watchkeeper.client.errors import InvalidResponse

JSON = dict[str, Any]
PIECE_BYTES = 64 << 10
# Far above the largest object a cluster stores (etcd's default request limit is 1.5 MiB;
# the apiserver's JSON of it, with managedFields, stays well under this).
MAX_LINE_BYTES = 64 << 20
_SHOWN = 80  # bytes of a bad line quoted in the error


class LazyEnvelope(msgspec.Struct, gc=False):
    type: str
    object: msgspec.Raw


class EagerEnvelope(msgspec.Struct, gc=False):
    type: str
    object: JSON


class _Meta(msgspec.Struct, gc=False):
    metadata: KeyFields | None = None


_NO_KEYS = KeyFields()
_decode_keys = msgspec.json.Decoder(_Meta).decode
_decode_obj = msgspec.json.Decoder(JSON).decode
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError,
                  RecursionError, ValueError)


def decode_keys(raw: msgspec.Raw | bytes) -> KeyFields:
    """name/namespace/resourceVersion of a raw object, without building it."""
    try:
        return _decode_keys(raw).metadata or _NO_KEYS
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return _NO_KEYS  # shape was validated in the stream; metadata may be odd


def decode_object(raw: msgspec.Raw | bytes) -> JSON:
    """The object of a lazy event (its bytes were validated when the piece arrived)."""
    try:
        return _decode_obj(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise InvalidResponse(f"undecodable watch object ({exc})", method="GET") from None


class LazyRawEvent(RawEvent):
    """``RawEvent`` whose object is a ``msgspec.Raw``, decoded on first read."""

    __slots__ = ()

    def __init__(self, type: str, raw: msgspec.Raw, path: str = "") -> None:
        self.type, self._path = type, path
        self._object, self._key, self._line = None, None, raw

    @property
    def object(self) -> JSON:
        obj = self._object
        if obj is None:
            assert self._line is not None
            obj = self._object = decode_object(self._line)
            self._line = None
        return obj

    def _meta(self) -> KeyFields:
        key = self._key
        if key is None:
            raw = self._line
            key = self._key = decode_keys(raw) if raw is not None else super()._meta()
        return key


def _is_map(raw: msgspec.Raw) -> bool:
    return memoryview(raw)[0] == 123  # b"{"


class PieceDecoder:
    """Decodes pieces of one stream and remembers the last good resourceVersion."""

    def __init__(self, path: str = "", *, lazy: bool) -> None:
        self.path = path
        self.lazy = lazy
        env = LazyEnvelope if lazy else EagerEnvelope
        dec: msgspec.json.Decoder[Any] = msgspec.json.Decoder(env)
        self._lines: Callable[[bytes], list[Any]] = dec.decode_lines
        self._one: Callable[[bytes], Any] = dec.decode
        self.resource_version = ""
        self.plain = True  # the last piece had no BOOKMARK or ERROR (nor a bad line)

    def rv_of(self, env: Any) -> str:
        """The resourceVersion of one envelope ("" for one without, e.g. an ERROR)."""
        if self.lazy:
            return decode_keys(env.object).resourceVersion
        meta = env.object.get("metadata")
        rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
        return rv if isinstance(rv, str) else ""

    def _advance(self, envs: list[Any]) -> None:
        for env in reversed(envs):
            rv = self.rv_of(env)
            if rv:
                self.resource_version = rv
                return

    def decode(self, data: bytes) -> tuple[list[Any], InvalidResponse | None]:
        """Envelopes of whole lines ``data``; on a bad line, those before it and the error."""
        try:
            envs = self._lines(data)
            ok = len(envs) == len(data) - len(data.replace(b"\n", b""))
            if ok and not data.isascii():
                data.decode("utf-8")
            if ok and self.lazy and not all(map(_is_map, (e.object for e in envs))):
                ok = False
        except _DECODE_ERRORS:
            ok = False
        if not ok:
            self.plain = False
            return self._by_line(data)
        self.plain = b'"BOOKMARK"' not in data and b'"ERROR"' not in data
        if envs:
            self._advance(envs)
        return envs, None

    def _by_line(self, data: bytes) -> tuple[list[Any], InvalidResponse | None]:
        good: list[Any] = []
        one = self._one
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                env = one(line)
                if not line.isascii():
                    line.decode("utf-8")
                if self.lazy and not _is_map(env.object):
                    raise ValueError("the object of an event must be a map")
            except _DECODE_ERRORS as exc:
                if good:
                    self._advance(good)
                return good, self.bad_line(line, exc)
            good.append(env)
        if good:
            self._advance(good)
        return good, None

    def bad_line(self, line: bytes, exc: BaseException) -> InvalidResponse:
        rv = self.resource_version
        shown = line[:_SHOWN]
        more = f" ({len(line):,} bytes)" if len(line) > _SHOWN else ""
        err = InvalidResponse(
            f"undecodable watch event ({type(exc).__name__}: {str(exc)[:200]}) after "
            f"resourceVersion {rv or '(none)'}: {shown!r}{more}",
            method="GET", path=self.path, details={"lastResourceVersion": rv},
        )
        err.line = shown  # type: ignore[attr-defined]
        err.resource_version = rv  # type: ignore[attr-defined]
        return err

    def raw_event(self, env: Any) -> RawEvent:
        if self.lazy:
            return LazyRawEvent(env.type, env.object, self.path)
        return RawEvent(env.type, env.object, None, None, self.path)
