"""Regression found by fuzzing the fix of commit 4eca10b (the head, chunk-header and trailer
limits "however the bytes were split into reads"): while the end of the head had not
arrived, the bytes of its terminator that had were counted as head, so a head of exactly
MAX_HEAD bytes was accepted in one read and refused when its blank line came split across
reads (likewise a chunk-size line of MAX_CHUNK_HEADER bytes and a trailer section of
MAX_HEAD). The limit must be the same for every split."""

from __future__ import annotations

import pytest

from watchkeeper.client import _http1

from .test_fuzz_client_regressions import CHUNKED, EV, feed, protocol

SPLITS = [None, 1, 2, 3, 1000]  # one read, or reads of that many bytes


def head_of(length: int) -> bytes:
    """A response head of exactly ``length`` bytes before its blank line."""
    start = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX: "
    return start + b"a" * (length - len(start)) + b"\r\n\r\n"


@pytest.mark.parametrize("size", SPLITS)
async def test_head_at_the_limit_is_accepted_however_it_is_split(size: int | None) -> None:
    proto = protocol()
    feed(proto, head_of(_http1.MAX_HEAD), size)
    assert proto.error is None and proto.head is not None and proto.eof
    proto = protocol()
    feed(proto, head_of(_http1.MAX_HEAD + 1), size)
    assert isinstance(proto.error, _http1.FramingError), proto.error


@pytest.mark.parametrize("size", SPLITS)
async def test_chunk_header_at_the_limit_is_accepted_however_it_is_split(
    size: int | None
) -> None:
    def body(length: int) -> bytes:
        line = b"%x;" % len(EV)
        return CHUNKED + line + b"x" * (length - len(line)) + b"\r\n" + EV + b"\r\n0\r\n\r\n"

    proto = protocol()
    feed(proto, body(_http1.MAX_CHUNK_HEADER), size)
    assert proto.error is None and proto.eof and proto.take(1 << 16) == EV
    proto = protocol()
    feed(proto, body(_http1.MAX_CHUNK_HEADER + 1), size)
    assert isinstance(proto.error, _http1.FramingError), proto.error


@pytest.mark.parametrize("size", SPLITS)
async def test_trailer_section_at_the_limit_is_accepted_however_it_is_split(
    size: int | None
) -> None:
    def body(length: int) -> bytes:
        # measured from the CRLF of the last chunk's size line to the blank line
        trailer = b"\r\nX-T: " + b"a" * (length - 7)
        return CHUNKED + b"%x\r\n" % len(EV) + EV + b"\r\n0" + trailer + b"\r\n\r\n"

    proto = protocol()
    feed(proto, body(_http1.MAX_HEAD), size)
    assert proto.error is None and proto.eof and proto.take(1 << 16) == EV
    proto = protocol()
    feed(proto, body(_http1.MAX_HEAD + 1), size)
    assert isinstance(proto.error, _http1.FramingError), proto.error
