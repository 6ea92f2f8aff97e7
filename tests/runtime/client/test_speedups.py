"""The stream's C part (``watchkeeper/_speedups.c``) takes and refuses exactly what its Python
does: each C function is run beside the Python it replaces on generated input, and must
give the same answer (or None where it leaves the case to the Python).

Skipped where the C part is not built (no compiler); CI builds it
(``WATCHKEEPER_REQUIRE_SPEEDUPS=1``) and also runs the stream tests with
``WATCHKEEPER_PURE_PYTHON=1`` (Makefile ``unit``), so both paths are tested end to end.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from watchkeeper.client import _fast
from watchkeeper.client._http1 import hand_chunks_py, whole_chunks_py
from watchkeeper.client._pieces import LazyPiece, PieceDecoder
from watchkeeper.watcher import _CLASSES, Apply, Delete

pytestmark = pytest.mark.skipif(
    _fast.speedups is None,
    reason="the C speedups are off (not built, or WATCHKEEPER_PURE_PYTHON is set)")

SETTINGS = settings(max_examples=400, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def test_built_when_ci_requires_it() -> None:
    if os.environ.get("WATCHKEEPER_REQUIRE_SPEEDUPS", "") not in ("", "0"):
        assert _fast.ACTIVE


# -- de-chunking ------------------------------------------------------------------------------

HEADERS = st.one_of(
    st.integers(1, 300).map(lambda n: f"{n:x}"),
    st.integers(1, 300).map(lambda n: f"{n:X}"),
    st.integers(1, 300).map(lambda n: f"000{n:x}"),  # leading zeros: up to 8 digits is fine
    st.integers(1, 300).map(lambda n: f"{n:09x}"),  # 9 digits: not taken
    st.just("0"),  # the last chunk
    st.integers(1, 300).map(lambda n: f"{n:x};ext=1"),  # an extension: the general loop's
    st.integers(1, 300).map(lambda n: f"{n:x} "),
    st.sampled_from(["", "g", "-1", "+8", "0x10"]),
)


@st.composite
def chunked_reads(draw: st.DrawFn, lines: bool = False) -> tuple[bytes, int, int, bytes, int]:
    """A buffer of chunk framing and payloads as a read leaves it: ``p`` at a CRLF that ended
    a chunk, ``b`` before it, and the bytes cut at ``w`` anywhere. With ``lines``, payloads
    end with a newline half the time, and the read ends at the end of the last chunk more
    often (what a consumer waiting for lines is handed)."""
    body = bytearray(draw(st.binary(max_size=40)))
    b = len(body)
    body += b"\r\n"
    for _ in range(draw(st.integers(0, 6))):
        header = draw(HEADERS)
        try:
            size = int(header.split(";")[0], 16)
        except ValueError:
            size = draw(st.integers(0, 20))
        size = max(0, min(size, 300))
        crlf = draw(st.sampled_from([b"\r\n", b"\r\n", b"\r\n", b"\n", b"\r\r\n"]))
        payload = draw(st.binary(min_size=size, max_size=size))
        if lines and payload and draw(st.booleans()):
            payload = payload[:-1] + b"\n"
        body += header.encode() + crlf + payload + b"\r\n"
    w = len(body) if lines and draw(st.booleans()) else draw(st.integers(b, len(body)))
    head = draw(st.sampled_from([b"\r\n800\r\n", b"\r\n5\r\n", b"\r\n1f\r\n", b"\r\nA\r\n"]))
    return bytes(body), b, w, head, draw(st.integers(0, 0x800))


@SETTINGS
@given(chunked_reads())
def test_whole_chunks_in_c_is_the_python_loop(case: tuple[bytes, int, int, bytes, int]) -> None:
    assert _fast.speedups is not None
    raw, b, w, head, size = case
    p = b
    py_buf, c_buf = bytearray(raw) + bytes(64), bytearray(raw) + bytes(64)
    py = whole_chunks_py(py_buf, p, b, w, head, size)
    c = _fast.speedups.whole_chunks(c_buf, p, b, w, head, size)
    assert c == py
    assert c_buf == py_buf  # the same payloads moved to the same place


@SETTINGS
@given(chunked_reads(lines=True), st.data())
def test_hand_chunks_in_c_is_the_python(case: tuple[bytes, int, int, bytes, int],
                                        data: st.DataObject) -> None:
    assert _fast.speedups is not None
    raw, b, w, head, size = case
    p = b
    r = data.draw(st.integers(0, b))
    hand = data.draw(st.sampled_from([0, 1, 64, 1 << 16]))
    py_buf, c_buf = bytearray(raw) + bytes(64), bytearray(raw) + bytes(64)
    py = hand_chunks_py(py_buf, p, b, w, head, size, r, hand)
    c = _fast.speedups.hand_chunks(c_buf, p, b, w, head, size, r, hand)
    assert c == py
    assert c_buf == py_buf


def test_hand_chunks_hands_over_whole_lines_and_starts_the_buffer_again() -> None:
    assert _fast.speedups is not None
    raw = b"\r\n4\r\nab\nc\r\n2\r\nd\n\r\n"
    buf = bytearray(raw) + bytes(16)
    got = _fast.speedups.hand_chunks(buf, 0, 0, len(raw), b"\r\n800\r\n", 0x800, 0, 1 << 16)
    assert got == (b"ab\ncd\n", 0, 0, b"\r\n2\r\n", 2)
    assert buf[:2] == b"\r\n"
    # Over what the consumer takes at once, or not ending with a line: left in the buffer.
    for hand, tail in ((5, b"d\n"), (1 << 16, b"dd")):
        raw = b"\r\n4\r\nab\nc\r\n2\r\n" + tail + b"\r\n"
        buf = bytearray(raw) + bytes(16)
        got = _fast.speedups.hand_chunks(buf, 0, 0, len(raw), b"\r\n800\r\n", 0x800, 0, hand)
        assert got == (None, len(raw) - 2, 6, b"\r\n2\r\n", 2)
        assert bytes(buf[:6]) == b"ab\nc" + tail


def test_whole_chunks_takes_a_run_of_chunks_and_stops_before_a_partial_one() -> None:
    assert _fast.speedups is not None
    buf = bytearray(b"\r\n3\r\nabc\r\n3\r\ndef\r\n10\r\n0123") + bytes(32)
    p, b, head, size = _fast.speedups.whole_chunks(buf, 0, 0, 26, b"\r\n800\r\n", 0x800)
    assert bytes(buf[:b]) == b"abcdef"
    assert (p, head, size) == (16, b"\r\n10\r\n", 16)  # seen, not taken: 4 of 16 bytes came


def test_whole_chunks_refuses_positions_out_of_order() -> None:
    assert _fast.speedups is not None
    with pytest.raises(ValueError):
        _fast.speedups.whole_chunks(bytearray(8), 4, 5, 8, b"\r\n8\r\n", 8)
    with pytest.raises(ValueError):
        _fast.speedups.whole_chunks(bytearray(8), 0, 0, 9, b"\r\n8\r\n", 8)


# -- the plain lazy piece -----------------------------------------------------------------------

NAMES = st.one_of(st.text("abc-", min_size=1, max_size=6), st.just(""), st.just("é"))
TYPES = st.sampled_from(["ADDED", "MODIFIED", "DELETED", "ADDED", "MODIFIED", "BOOKMARK",
                         "ERROR", "SYNC"])


@st.composite
def event_lines(draw: st.DrawFn) -> bytes:
    """Watch lines: half the time a plain piece (what the C takes), else with any of what it
    must leave to the Python (another type, no name, a bad line, bytes that are no UTF-8)."""
    clean = draw(st.booleans())
    lines = []
    for i in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["ADDED", "MODIFIED", "DELETED"]) if clean else TYPES)
        name = draw(st.text("abc-", min_size=1, max_size=6) if clean else NAMES)
        meta: dict[str, Any] = {"name": name, "namespace": "ns",
                                "resourceVersion": draw(st.sampled_from(["", str(i + 10)]))}
        obj: dict[str, Any] = {"kind": "ConfigMap", "metadata": meta,
                               "data": {"k": draw(st.text(max_size=8))}}
        if not clean and draw(st.integers(0, 9)) == 0:
            obj.pop("metadata")
        line = json.dumps({"type": kind, "object": obj}, ensure_ascii=draw(st.booleans()))
        if not clean:
            line = draw(st.sampled_from([line, line, line, line, line + " ", line[:-1],
                                         line + line, "", line.replace(",", ",\n", 1)]))
        lines.append(line)
    end = "\n" if clean else draw(st.sampled_from(["\n", "\n", ""]))
    data = ("\n".join(lines) + end).encode()
    if not clean and draw(st.integers(0, 9)) == 0:  # not UTF-8, in a string the decoder skips
        data = data.replace(b'"k": "', b'"k": "\xff', 1)
    return data


def _same_events(a: list[Any], b: list[Any]) -> None:
    assert [type(e) for e in a] == [type(e) for e in b]
    assert [(e.namespace, e.name, e.resource_version, e._at, e._strip) for e in a] == \
        [(e.namespace, e.name, e.resource_version, e._at, e._strip) for e in b]
    assert [e.obj for e in a] == [e.obj for e in b]


@SETTINGS
@given(event_lines(), st.booleans())
def test_lazy_batch_in_c_builds_what_the_python_builds(data: bytes, strip: bool) -> None:
    """Where the C takes a piece (``FastWatchStream.batches`` then uses its events), the
    Python's ``batch`` takes it too, as a plain piece, with the same events, counts and
    resume version; where it leaves it, nothing has changed."""
    assert _fast.speedups is not None
    decoder = PieceDecoder("/x", lazy=True)
    c_counts: dict[str, int] = {"ADDED": 2}
    py_counts: dict[str, int] = {"ADDED": 2}
    done = _fast.speedups.lazy_batch(data, decoder._array, _CLASSES, c_counts, strip,
                                     LazyPiece)
    py_events, py_error = decoder.batch(data, _CLASSES, lambda k: Apply, py_counts, strip)
    if done is None:
        assert c_counts == {"ADDED": 2}
        return
    c_events, piece, rv = done
    assert py_error is None and decoder.plain
    _same_events(c_events, py_events)
    assert c_counts == py_counts
    assert rv == c_events[-1].resource_version
    if rv:
        assert decoder.resource_version == rv
    assert piece._data == data


def test_lazy_batch_takes_a_plain_piece_and_leaves_the_rest_to_the_python() -> None:
    assert _fast.speedups is not None
    lazy_batch = _fast.speedups.lazy_batch
    decode = PieceDecoder("/x", lazy=True)._array

    def line(kind: str, name: str, rv: str) -> bytes:
        return json.dumps({"type": kind, "object": {"metadata": {
            "name": name, "namespace": "ns", "resourceVersion": rv}}}).encode() + b"\n"

    counts: dict[str, int] = {}
    data = line("ADDED", "a", "5") + line("DELETED", "b", "7")
    done = lazy_batch(data, decode, _CLASSES, counts, False, LazyPiece)
    assert done is not None
    events, piece, rv = done
    assert piece._data == data
    assert [type(e) for e in events] == [Apply, Delete]
    assert [e.name for e in events] == ["a", "b"] and rv == "7"
    assert events[1].obj == {"metadata": {"name": "b", "namespace": "ns",
                                          "resourceVersion": "7"}}
    assert counts == {"ADDED": 1, "DELETED": 1}
    for other in (line("BOOKMARK", "a", "9"), line("ADDED", "", "9"), b'{"type":"ADDED"}\n',
                  line("ADDED", "\u00e9", "9").replace(b"\\u00e9", "é".encode()),
                  line("ADDED", "a", "9")[:-1], b"\n", b"[1]\n"):
        assert lazy_batch(data + other, decode, _CLASSES, counts, False, LazyPiece) is None
    assert counts == {"ADDED": 1, "DELETED": 1}  # untouched by the pieces it left


# -- the key fields of an event ----------------------------------------------------------------


def test_key_fields_in_c_read_the_key_or_the_object() -> None:
    from watchkeeper.client.objects import KeyFields, ObjectEvent, RawEvent

    assert type(ObjectEvent.__dict__["name"]).__name__ == "KeyField"
    lazy = Apply(None, KeyFields("ns", "a", "7"), b'{"type":"ADDED","object":{}}')
    assert (lazy.name, lazy.namespace, lazy.resource_version) == ("a", "ns", "7")
    assert not lazy.decoded  # read from the key, the line untouched
    eager = Apply({"metadata": {"name": "b", "resourceVersion": "9"}})
    assert (eager.name, eager.namespace, eager.resource_version) == ("b", "", "9")
    assert eager._key == KeyFields("", "b", "9")  # computed once, then kept
    bare = RawEvent.of("ADDED", {"kind": "ConfigMap"})
    assert (bare.name, bare.namespace, bare.resource_version) == ("", "", "")
    with pytest.raises(TypeError, match="has no object"):
        _ = Apply(None).name  # neither a key nor an object: the obj property's error
    with pytest.raises(AttributeError):
        lazy.name = "c"  # type: ignore[misc]
    assert repr(ObjectEvent.__dict__["namespace"]) == "KeyField('namespace')"
    assert ObjectEvent.name is ObjectEvent.__dict__["name"]  # on the class: itself


def test_the_version_says_whether_the_c_part_runs() -> None:
    from click.testing import CliRunner

    from watchkeeper.cli import main

    out = CliRunner().invoke(main, ["--version"]).output
    assert "the watch stream's C part: on" in out, out
