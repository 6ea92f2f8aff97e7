"""The decode floor: how fast msgspec (and json) alone turn watch-event lines into dicts.

``decode_rates(body)`` times decoding every line of a captured watch body (the watch
benchmark captures the simulator's exact bytes once and passes them here, in a child process
of its own). Run alone, this module times one synthetic ~1.1 KB ConfigMap event line:

    python -m benchmarks.decode_floor [--lines 200000]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import msgspec

from watchkeeper.client.api import _Head  # what WatchConfig(lazy_decode=True) decodes

_decode_head = msgspec.json.Decoder(_Head).decode


class Envelope(msgspec.Struct):
    type: str
    object: dict[str, Any]


def decoders() -> dict[str, Callable[[bytes], Any]]:
    return {
        "msgspec (dicts)": msgspec.json.Decoder().decode,
        "msgspec (typed envelope)": msgspec.json.Decoder(Envelope).decode,
        "msgspec head only (our lazy_decode)": _decode_head,
        "json.loads": json.loads,
    }


def decode_rates(body: bytes, repeat: int = 3) -> dict[str, dict[str, float]]:
    """For each decoder: best-of-``repeat`` wall and CPU seconds to split ``body`` on
    newlines and decode every non-empty line, and the events/s that gives."""
    lines = [ln for ln in body.split(b"\n") if ln]
    out: dict[str, dict[str, float]] = {}
    for name, decode in decoders().items():
        best_wall = best_cpu = float("inf")
        for _ in range(repeat):
            w0, c0 = time.perf_counter(), time.process_time()
            for line in body.split(b"\n"):
                if line:
                    decode(line)
            best_wall = min(best_wall, time.perf_counter() - w0)
            best_cpu = min(best_cpu, time.process_time() - c0)
        out[name] = {"events": len(lines), "wall_s": best_wall, "cpu_s": best_cpu,
                     "events_per_s": len(lines) / best_wall}
    return out


def synthetic_line() -> bytes:
    obj = {
        "type": "MODIFIED",
        "object": {
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "metadata": {
                "name": "cm-00042",
                "namespace": "default",
                "uid": "5f0c1b8e-8a3c-4c1e-9a57-0c8e5b6f1d2a",
                "resourceVersion": "123456",
                "creationTimestamp": "2026-12-02T10:00:00Z",
                "labels": {"app": "bench", "tier": "x"},
                "managedFields": [{
                    "manager": "bench", "operation": "Update", "apiVersion": "v1",
                    "time": "2026-12-02T10:00:00Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {".": {}, "f:payload": {}}},
                }],
            },
            "data": {"payload": "x" * 700},
        },
    }
    return json.dumps(obj, separators=(",", ":")).encode()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--lines", type=int, default=200_000)
    args = p.parse_args(argv)
    line = synthetic_line()
    print(f"line bytes {len(line)}")
    body = (line + b"\n") * args.lines
    for name, r in decode_rates(body, repeat=1).items():
        print(f"{name:26s} {r['events_per_s']:12,.0f} lines/s")


if __name__ == "__main__":
    main()
