"""Where the time of one read of a paced watch goes, measured in place (issue 25).

The lazy watcher reads a paced replay (``watch_cpu --pace``'s server, one chunk per event)
in this process; the thread CPU time of a few steps of each read is taken around them by
wrapping the steps' methods here, in this process only. A watch that keeps up runs each step
cold (the process slept between reads, other processes ran): the figures are several times
what the same step costs in a tight loop, which is why a cut is judged by ``watch_cpu``
rounds, not by a microbenchmark. Each wrapper adds ~0.5 µs to its step.

    python -m benchmarks.paced_breakdown --body FILE [--events 3000] [--pace 1000]

FILE is a watch body captured by ``watch_cpu --body FILE`` (its ``.rv`` file beside it).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import watch_throughput
from benchmarks._common import Meter
from benchmarks.watch_cpu import Replay


def _timed(cls: type, name: str, into: list[int]) -> None:
    """Wrap ``cls.name`` to add each call's thread CPU nanoseconds to ``into``."""
    inner: Callable[..., Any] = getattr(cls, name)
    clock = time.thread_time_ns

    def wrapper(*args: Any) -> Any:
        t = clock()
        try:
            return inner(*args)
        finally:
            into.append(clock() - t)

    setattr(cls, name, wrapper)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--body", type=Path, required=True)
    p.add_argument("--events", type=int, default=3000)
    p.add_argument("--pace", type=float, default=1000)
    a = p.parse_args(argv)
    from watchkeeper.client._http1 import ResponseProtocol
    from watchkeeper.client._pieces import PieceDecoder

    steps: dict[str, list[int]] = {
        "protocol callback (buffer_updated)": [],
        "  de-chunking (_whole_chunks)": [],
        "take (copy of the whole lines)": [],
        "decode and type (PieceDecoder.batch)": [],
        "  array decode and checks (_valid)": [],
    }
    keys = list(steps)
    _timed(ResponseProtocol, "buffer_updated", steps[keys[0]])
    _timed(ResponseProtocol, "_whole_chunks", steps[keys[1]])
    _timed(ResponseProtocol, "take", steps[keys[2]])
    _timed(PieceDecoder, "batch", steps[keys[3]])
    _timed(PieceDecoder, "_valid", steps[keys[4]])
    rv0, last = a.body.with_suffix(".rv").read_text().split()
    with tempfile.TemporaryDirectory(prefix="wk-breakdown-") as tmp:
        server = Replay(a.body, False, Path(tmp), "event", "go", a.pace)
        try:
            ns = argparse.Namespace(kubeconfig=str(server.kubeconfig), namespace="watch",
                                    rv=rv0, last_rv=last, events=a.events)
            meter = Meter(server.proc.pid)
            count = watch_throughput.RUNNERS["watchkeeper-watcher-lazy"](ns, meter)
        finally:
            server.stop()
    reads = len(steps[keys[0]])
    print(f"{count} events in {reads} reads ({count / reads:.2f} events per read); "
          f"process CPU {meter.cpu / count * 1e6:.1f} µs per event, "
          f"{meter.cpu / reads * 1e6:.1f} µs per read", file=sys.stderr)
    print("| step | µs per read (median) | calls per read |")
    print("|---|--:|--:|")
    for name, times in steps.items():
        # A step the read no longer takes (the C part's, a hand-over skips ``take``): "—".
        median = f"{statistics.median(times) / 1e3:.1f}" if times else "—"
        print(f"| {name} | {median} | {len(times) / reads:.2f} |")


if __name__ == "__main__":
    main()
