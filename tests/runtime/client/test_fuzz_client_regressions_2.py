"""Regression found by fuzzing the fix of commit 4eca10b (the head, chunk-header and trailer
limits "however the bytes were split into reads"): while the end of the head had not
arrived, the bytes of its terminator that had were counted as head, so a head of exactly
MAX_HEAD bytes was accepted in one read and refused when its blank line came split across
reads (likewise a chunk-size line of MAX_CHUNK_HEADER bytes and a trailer section of
MAX_HEAD). The limit must be the same for every split."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from watchkeeper.client import _http1

from .test_fuzz_client_regressions import CHUNKED, EV, feed, protocol

SPLITS = [None, 1, 2, 3, 1000]  # one read, or reads of that many bytes


def head_of(length: int) -> bytes:
    """A response head of exactly ``length`` bytes before its blank line."""
    start = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX: "
    return start + b"a" * (length - len(start)) + b"\r\n\r\n"


def chunk_header_of(length: int) -> bytes:
    """A chunked body whose one size line (with an extension) is ``length`` bytes."""
    line = b"%x;" % len(EV)
    return CHUNKED + line + b"x" * (length - len(line)) + b"\r\n" + EV + b"\r\n0\r\n\r\n"


def trailer_of(length: int) -> bytes:
    """A chunked body whose trailer section, measured from the CRLF of the last chunk's size
    line to the blank line, is ``length`` bytes."""
    trailer = b"\r\nX-T: " + b"a" * (length - 7)
    return CHUNKED + b"%x\r\n" % len(EV) + EV + b"\r\n0" + trailer + b"\r\n\r\n"


def _accepted_then_refused(body_of: Callable[[int], bytes], limit: int, size: int | None,
                           accepted: Callable[[_http1.ResponseProtocol], bool]) -> None:
    """``limit`` bytes pass (``accepted`` holds), one more fails, however the bytes are split."""
    proto = protocol()
    feed(proto, body_of(limit), size)
    assert proto.error is None and accepted(proto)
    proto = protocol()
    feed(proto, body_of(limit + 1), size)
    assert isinstance(proto.error, _http1.FramingError), proto.error


def _body_taken(proto: _http1.ResponseProtocol) -> bool:
    return bool(proto.eof) and proto.take(1 << 16) == EV


@pytest.mark.parametrize("size", SPLITS)
async def test_head_at_the_limit_is_accepted_however_it_is_split(size: int | None) -> None:
    _accepted_then_refused(head_of, _http1.MAX_HEAD, size,
                           lambda proto: proto.head is not None and bool(proto.eof))


@pytest.mark.parametrize("size", SPLITS)
async def test_chunk_header_at_the_limit_is_accepted_however_it_is_split(
    size: int | None
) -> None:
    _accepted_then_refused(chunk_header_of, _http1.MAX_CHUNK_HEADER, size, _body_taken)


@pytest.mark.parametrize("size", SPLITS)
async def test_trailer_section_at_the_limit_is_accepted_however_it_is_split(
    size: int | None
) -> None:
    _accepted_then_refused(trailer_of, _http1.MAX_HEAD, size, _body_taken)
