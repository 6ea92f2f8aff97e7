"""The ring view judges liveness as a leader-election follower does: from when *we* saw a
lease change, and only on a list that succeeded; and ``Sharding`` validates its names."""

from __future__ import annotations

import pytest

import watchkeeper as wk
from watchkeeper.sharding.config import RING_LABEL, default_replica_id
from watchkeeper.sharding.membership import RingView
from watchkeeper_sim import ApiServer

NS = "default"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def lease(name: str, holder: str, renew: str, duration: int = 2) -> dict[str, object]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": NS, "labels": {RING_LABEL: "w"}},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                     "renewTime": renew}}


async def test_a_shard_is_dead_only_when_a_successful_list_shows_its_lease_unchanged(
    apiserver: ApiServer,
) -> None:
    sharding = wk.Sharding(ring="w", replica_id="me", lease_duration=2, renew_deadline=1.5,
                           retry_period=0.5)
    apiserver.create_object(lease("w-shard-ghost", "ghost", "2026-01-01T00:00:00.000000Z"))
    apiserver.create_object(lease("other-ring", "x", "2026-01-01T00:00:00.000000Z")
                            | {"metadata": {"name": "other-ring", "namespace": NS,
                                            "labels": {RING_LABEL: "v"}}})
    async with apiserver.client() as client:
        clock = Clock()
        view = RingView(sharding, client.api("leases.coordination.k8s.io", namespace=NS),
                        clock=clock)
        await view.refresh()
        assert view.live == ("ghost",)  # the lease's own old renewTime is not our clock
        # The API fails for a long time: nobody is judged dead meanwhile.
        apiserver.faults.error(503, path_prefix=LEASES)
        clock.now = 100.0
        with pytest.raises(wk.ServerError):
            await view.refresh()
        assert view.live == ("ghost",) and not view.dead_for_sure("ghost")
        apiserver.faults.clear()
        # It renewed meanwhile: seen changed now, so it is live.
        apiserver.update_object(lease("w-shard-ghost", "ghost", "2026-01-01T00:01:40.000000Z")
                                | {"metadata": {"name": "w-shard-ghost", "namespace": NS,
                                                "labels": {RING_LABEL: "w"}}})
        await view.refresh()
        assert view.live == ("ghost",)
        # Unchanged for longer than its duration, on a list that succeeded: dead.
        clock.now = 102.5
        await view.refresh()
        assert view.live == () and view.dead_for_sure("ghost") and view.dead == ("ghost",)
        # Released (holder ""): dead at once, even just after a change.
        apiserver.update_object(lease("w-shard-ghost", "", "2026-01-01T00:01:43.000000Z")
                                | {"metadata": {"name": "w-shard-ghost", "namespace": NS,
                                                "labels": {RING_LABEL: "w"}}})
        await view.refresh()
        assert view.live == ()
        # A shard with no lease at all is dead only after a lease duration of absence.
        assert not view.dead_for_sure("never-seen")
        clock.now = 104.0
        assert not view.dead_for_sure("never-seen")
        clock.now = 105.0
        assert view.dead_for_sure("never-seen")


def test_sharding_names_and_validation() -> None:
    s = wk.Sharding(ring="widgets", replica_id="pod-0-abc")
    assert s.label_key == "shard.watchkeeper.io/widgets"
    assert s.drain_key == "drain.watchkeeper.io/widgets"
    assert s.selector == "shard.watchkeeper.io/widgets=pod-0-abc"
    assert s.lease_name == "widgets-shard-pod-0-abc" and s.sharder_lease == "widgets-sharder"
    assert s.draining({"metadata": {"labels": {s.drain_key: "pod-0-abc"}}})
    assert not s.draining({"metadata": {"labels": {s.label_key: "pod-0-abc"}}})
    assert s.release_patch()[0] == {"op": "test",
                                    "path": "/metadata/labels/shard.watchkeeper.io~1widgets",
                                    "value": "pod-0-abc"}
    for bad in ("Widgets", "a_b", "", "x" * 41):
        with pytest.raises(ValueError, match="ring"):
            wk.Sharding(ring=bad, replica_id="r")
    with pytest.raises(ValueError, match="replica_id"):
        wk.Sharding(ring="w", replica_id="Pod_0")
    with pytest.raises(ValueError, match="lease_duration"):
        wk.Sharding(ring="w", replica_id="r", lease_duration=5, renew_deadline=5)
    wk.Sharding(ring="w")  # the default replica id is valid


def test_default_replica_id_is_a_label_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "My_Operator-7d9f-XYZ")
    rid = default_replica_id()
    assert rid.startswith("my-operator-7d9f-xyz-") and len(rid) <= 63
    assert wk.Sharding(ring="w").replica_id != wk.Sharding(ring="w").replica_id


@pytest.mark.looptime
async def test_a_dead_shard_is_noticed_at_its_expiry_not_a_period_later(
    apiserver: ApiServer,
) -> None:
    """The view lists once more just after a live shard's lease may expire: a kill -9 is
    noticed within a list's time of the expiry the view observed (on the 2 s grid alone it
    was up to 2 s later), and the view stays on its period otherwise."""
    import asyncio

    sharding = wk.Sharding(ring="w", replica_id="me", lease_duration=15, renew_deadline=10,
                           retry_period=2)
    loop = asyncio.get_running_loop()
    body = lease("w-shard-ghost", "ghost", "2026-01-01T00:00:00.000000Z", duration=15)
    apiserver.create_object(body)
    async with apiserver.client() as client:
        view = RingView(sharding, client.api("leases.coordination.k8s.io", namespace=NS))
        task = asyncio.create_task(view.run())
        try:
            await asyncio.sleep(0.9)  # renewals every 2 s, off the view's grid by 0.9 s
            for i in range(5):
                body["spec"]["renewTime"] = f"2026-01-01T00:00:{i + 1:02d}.000000Z"  # type: ignore[index]
                apiserver.update_object(body)
                await asyncio.sleep(2)
            assert view.live == ("ghost",)
            await asyncio.sleep(2 * sharding.retry_period)  # has seen the last renewal
            expiry = view._observed["w-shard-ghost"].seen_at + 15
            while view.live:
                await asyncio.sleep(0.01)
            assert 0 < loop.time() - expiry <= 0.3, loop.time() - expiry
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
