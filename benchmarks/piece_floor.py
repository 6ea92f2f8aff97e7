"""The floor of the lazy watch path: what one 64 KiB piece costs per event before any event
object exists (issue 11's 5x question).

Times, per event, each step the stream must do on the good path: msgspec ``decode_lines``
into the head envelope the lazy stream uses (and, for comparison, into ``(type, Raw)`` and
into the type alone), the two checks msgspec does not do (``isascii()``; one value per line,
counted as ``len(b) - len(b.replace(b"\\n", b""))``; ``bytes.count`` beside it), and the copy
out of the receive buffer. Best of 3, process CPU time.

    python -m benchmarks.piece_floor [--body captured-watch-body.jsonl] [--lines 60000]

Without ``--body`` it uses ``decode_floor``'s synthetic ~1.1 KB ConfigMap event line, with
the name varied per line.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from benchmarks.decode_floor import synthetic_line
from watchkeeper.client.objects import _Head  # what the lazy stream decodes of each line

PIECE = 64 << 10


class RawEnvelope(msgspec.Struct, gc=False):
    type: str
    object: msgspec.Raw


class TypeOnly(msgspec.Struct, gc=False):
    type: str


def pieces_of(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        end = data.find(b"\n", pos + PIECE)
        end = len(data) if end < 0 else end + 1
        out.append(data[pos:end])
        pos = end
    return out


def per_event(pieces: list[bytes], events: int, step: Callable[[bytes], Any]) -> float:
    best = float("inf")
    for _ in range(3):
        t = time.process_time()
        for p in pieces:
            step(p)
        best = min(best, time.process_time() - t)
    return best / events * 1e6


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--body", type=Path, help="a captured watch body (one event per line)")
    p.add_argument("--lines", type=int, default=60_000)
    a = p.parse_args(argv)
    if a.body:
        data = a.body.read_bytes()
        data = data[: data.rfind(b"\n") + 1]
    else:
        line = synthetic_line()
        data = b"".join(line.replace(b"cm-00042", f"cm-{i:05d}".encode()) + b"\n"
                        for i in range(a.lines))
    events = len(data) - len(data.replace(b"\n", b""))
    pieces = pieces_of(data)
    steps: dict[str, Callable[[bytes], Any]] = {
        "decode_lines, head envelope (lazy stream)": msgspec.json.Decoder(_Head).decode_lines,
        "decode_lines, (type, Raw)": msgspec.json.Decoder(RawEnvelope).decode_lines,
        "decode_lines, type only": msgspec.json.Decoder(TypeOnly).decode_lines,
        "isascii()": bytes.isascii,
        "newline count (replace)": lambda b: len(b) - len(b.replace(b"\n", b"")),
        "newline count (bytes.count)": lambda b: b.count(b"\n"),
        "copy out of the receive buffer": lambda b: bytes(memoryview(b)),
    }
    print(f"{events:,} events, {len(data) / events:.0f} bytes each, {len(pieces)} pieces")
    total = 0.0
    for name, step in steps.items():
        us = per_event(pieces, events, step)
        if name in ("decode_lines, head envelope (lazy stream)", "isascii()",
                    "newline count (replace)", "copy out of the receive buffer"):
            total += us
        print(f"{name:44s} {us:6.3f} µs/event")
    print(f"{'floor (head + checks + copy)':44s} {total:6.3f} µs/event")


if __name__ == "__main__":
    main()
