"""A consistent hash ring: which shard owns a key, moving few keys when shards change.

Each shard is placed at ``virtual_nodes`` points of a 64-bit circle (BLAKE2b of
``"<shard>#<i>"``: stable across processes and Python versions, unlike ``hash()``); a key
belongs to the first point at or after its own hash. A joining shard takes about
``1 / n`` of the keys, each from some other shard; a leaving shard's keys spread over the
rest; every other key stays where it was."""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable

DEFAULT_VIRTUAL_NODES = 100


def stable_hash(text: str) -> int:
    """64-bit BLAKE2b of ``text``: the same in every process and release."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class HashRing:
    """``HashRing(["a", "b", "c"]).owner("namespace/name")`` -> ``"b"``."""

    def __init__(self, shards: Iterable[str], virtual_nodes: int = DEFAULT_VIRTUAL_NODES) -> None:
        if virtual_nodes < 1:
            raise ValueError(f"virtual_nodes must be >= 1, got {virtual_nodes}")
        self.shards = tuple(sorted(set(shards)))
        self.virtual_nodes = virtual_nodes
        points = sorted(
            (stable_hash(f"{shard}#{i}"), shard)
            for shard in self.shards
            for i in range(virtual_nodes)
        )
        self._points = [p for p, _ in points]
        self._owners = [s for _, s in points]

    def __repr__(self) -> str:
        return f"HashRing({list(self.shards)!r}, virtual_nodes={self.virtual_nodes})"

    def __len__(self) -> int:
        return len(self.shards)

    def owner(self, key: str) -> str | None:
        """The shard that owns ``key`` (None on an empty ring)."""
        if not self._points:
            return None
        i = bisect.bisect_left(self._points, stable_hash(key))
        return self._owners[i % len(self._owners)]
