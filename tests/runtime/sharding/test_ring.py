"""The consistent hash ring: balanced, stable, and moving few keys on join and leave."""

from __future__ import annotations

import collections
import random

import pytest

from watchkeeper.sharding.ring import HashRing, stable_hash

KEYS = [f"ns-{i % 7}/object-{i}" for i in range(30_000)]


def shares(ring: HashRing) -> collections.Counter[str | None]:
    return collections.Counter(ring.owner(k) for k in KEYS)


def random_ids(rng: random.Random, n: int) -> list[str]:
    return [f"pod-{i}-{rng.getrandbits(32):08x}" for i in range(n)]


def test_hash_is_stable_across_processes() -> None:
    # a fixed value: hash() is salted per process, BLAKE2b is not
    assert stable_hash("default/widget-1") == 0x814e95fb0cfcb4e9
    assert HashRing(["x", "y"]).owner("k") == HashRing(["y", "x"]).owner("k")


@pytest.mark.parametrize("seed", range(10))
def test_three_shards_each_own_a_third_within_15_percent(seed: int) -> None:
    ids = random_ids(random.Random(seed), 3)
    counts = shares(HashRing(ids))
    assert set(counts) == set(ids)
    for shard, n in counts.items():
        assert abs(n - len(KEYS) / 3) <= 0.15 * len(KEYS) / 3, (shard, counts)


def test_an_empty_ring_owns_nothing() -> None:
    assert HashRing([]).owner("x") is None
    with pytest.raises(ValueError):
        HashRing(["a"], virtual_nodes=0)


@pytest.mark.parametrize("seed", range(5))
def test_a_join_moves_only_keys_to_the_new_shard_about_a_quarter(seed: int) -> None:
    ids = random_ids(random.Random(seed), 4)
    before, after = HashRing(ids[:3]), HashRing(ids)
    moved = [k for k in KEYS if before.owner(k) != after.owner(k)]
    assert all(after.owner(k) == ids[3] for k in moved)  # nothing moves between old shards
    assert abs(len(moved) - len(KEYS) / 4) <= 0.15 * len(KEYS) / 4, len(moved)


@pytest.mark.parametrize("seed", range(5))
def test_a_leave_moves_only_the_leaving_shards_keys(seed: int) -> None:
    ids = random_ids(random.Random(seed), 3)
    before, after = HashRing(ids), HashRing(ids[:2])
    moved = [k for k in KEYS if before.owner(k) != after.owner(k)]
    assert moved and all(before.owner(k) == ids[2] for k in moved)
    spread = collections.Counter(after.owner(k) for k in moved)
    assert set(spread) == set(ids[:2])  # spread over the rest, not dumped on one
