"""Client CPU of undoing HTTP/1.1 chunk framing in the watch reader, in process, per framing.

The captured watch body (``--body``, as ``benchmarks.watch_cpu --body`` keeps it; without
it, synthetic ~1.2 KB ConfigMap lines) is framed as ``benchmarks._replay`` frames it and
fed to the reader (``client/_http1.ResponseProtocol``) in 64 KiB reads, its lines taken out
as the stream takes them. Reported per event and per chunk, best of ``--repeat``; the
``bulk`` row (two chunks per MiB) is the cost of everything but the chunks.
With ``--ref REV`` the same runs use that revision's reader too (``git show``), in one run.

    PYTHONPATH=src python -m benchmarks.chunk_framing [--body FILE] [--ref REV]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from benchmarks._common import ROOT, markdown_table
from benchmarks._replay import FRAMINGS, framed

READ = 64 << 10


def _reader(ref: str | None) -> ModuleType:
    if ref is None:
        from watchkeeper.client import _http1
        return _http1
    src = subprocess.run(["git", "show", f"{ref}:src/watchkeeper/client/_http1.py"],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp(prefix="wk-http1-")) / "_http1_ref.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("_http1_ref", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _synthetic(events: int) -> bytes:
    return b"".join(b'{"type":"MODIFIED","object":{"kind":"ConfigMap","metadata":{"name":"cm-%06d",'
                    b'"resourceVersion":"%d"},"data":{"payload":"%s"}}}\n'
                    % (i, 1000 + i, b"x" * 1080) for i in range(events))


def one(http1: ModuleType, stream: bytes) -> float:
    """Process CPU seconds to de-frame ``stream`` and take every line."""
    reader = http1.ResponseProtocol(max_line=16 << 20)
    reader._state = http1._CHUNKED
    pos, n = 0, len(stream)
    t0 = time.process_time()
    while pos < n:
        buf = reader.get_buffer(-1)
        k = min(len(buf), READ, n - pos)
        buf[:k] = stream[pos:pos + k]
        pos += k
        reader.buffer_updated(k)
        while reader.take(READ) is not None:
            pass
        reader.reset_if_drained()
    return time.process_time() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--body", type=Path, help="a captured watch body (JSON lines)")
    p.add_argument("--events", type=int, default=20_000, help="lines used from the body")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--ref", help="also measure this git revision's reader")
    a = p.parse_args(argv)
    asyncio.set_event_loop(asyncio.new_event_loop())  # the reader asks for the loop
    body = a.body.read_bytes() if a.body else _synthetic(a.events)
    lines = body.splitlines(keepends=True)[:a.events]
    body = b"".join(lines)
    readers = {"current": _reader(None)} | ({a.ref: _reader(a.ref)} if a.ref else {})
    rows = []
    for framing in FRAMINGS:
        stream = b"".join(framed(body, framing))
        chunks = stream.count(b"\r\n") // 2 - 1
        for name, http1 in readers.items():
            best = min(one(http1, stream) for _ in range(a.repeat))
            rows.append([framing, name, f"{best / len(lines) * 1e6:.3f}",
                         f"{best / max(chunks, 1) * 1e6:.3f}", f"{chunks / len(lines):.2f}"])
    print(markdown_table(["framing", "reader", "µs per event", "µs per chunk",
                          "chunks per event"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
