"""LeaderElector against the simulator with faults, on virtual time (looptime): every API
error is retried, the reason is logged and shown in ``health``, a leader that cannot renew
steps down before its lease could be taken, and after an outage exactly one replica leads.

Each replica is an elector in a loop that runs it again after it lost leadership (what
``Controller.run`` does with ``on_leadership_lost="reacquire"``); a monitor samples who
leads every 10 ms of virtual time, so two leaders at once would show."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

import watchkeeper as wk
from watchkeeper.leader import ElectorState, LeaderElector, describe_error
from watchkeeper_sim import ApiServer

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

NS = "default"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
LEASE, RENEW, RETRY = 15.0, 10.0, 2.0  # client-go's defaults


@dataclass
class Cluster:
    srv: ApiServer
    clients: list[wk.Client] = field(default_factory=list)
    electors: dict[str, LeaderElector] = field(default_factory=dict)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    samples: list[tuple[float, frozenset[str]]] = field(default_factory=list)
    stepped_down: dict[str, list[float]] = field(default_factory=dict)
    errors: list[BaseException] = field(default_factory=list)

    async def start(self, name: str) -> LeaderElector:
        """A replica with its own user (so faults can target one replica)."""
        self.srv.add_user(name)
        self.srv.rbac.grant(name, verbs=["*"], resources=["*"], groups=["*"])
        client = self.srv.client(name)
        self.clients.append(client)
        elector = LeaderElector(
            client.api("leases.coordination.k8s.io", namespace=NS), "the-lease",
            identity=name, lease_duration=LEASE, renew_deadline=RENEW, retry_period=RETRY,
        )
        self.electors[name] = elector
        self.tasks.append(asyncio.create_task(self._replica(name, elector)))
        return elector

    async def _replica(self, name: str, elector: LeaderElector) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                await elector.run()  # returns only once leadership is lost
                self.stepped_down.setdefault(name, []).append(loop.time())
                elector.reset()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the elector died: the bug this file is about
            self.errors.append(exc)
            raise

    async def monitor(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self.samples.append((loop.time(), frozenset(self.leaders())))
            await asyncio.sleep(0.01)

    def leaders(self) -> list[str]:
        return [n for n, e in self.electors.items() if e.is_leader]

    async def wait_one_leader(self, timeout: float) -> str:
        async with asyncio.timeout(timeout):
            while len(self.leaders()) != 1:
                await asyncio.sleep(0.01)
        return self.leaders()[0]

    async def wait_one_leader_other_than(self, name: str, timeout: float) -> str:
        async with asyncio.timeout(timeout):
            while len(self.leaders()) != 1 or self.leaders()[0] == name:
                await asyncio.sleep(0.01)
        return self.leaders()[0]

    def never_two_leaders(self) -> None:
        both = [(t, s) for t, s in self.samples if len(s) > 1]
        assert not both, f"two leaders at once: {both[:3]}"

    def alive(self) -> None:
        assert not self.errors, self.errors
        assert all(not t.done() for t in self.tasks), [t for t in self.tasks if t.done()]


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with ApiServer() as srv:
        c = Cluster(srv)
        mon = asyncio.create_task(c.monitor())
        try:
            yield c
        finally:
            srv.faults.clear()  # hung requests are answered now, so the server can stop
            for t in (*c.tasks, mon):
                t.cancel()
            await asyncio.gather(*c.tasks, mon, return_exceptions=True)
            for client in c.clients:
                await client.close()


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "watchkeeper.leader" and r.levelno >= logging.WARNING]


def assert_reasons_named(lines: list[str]) -> None:
    """Every failure line names the error as "Type: text", never ends in a bare colon."""
    for line in lines:
        if "failed" in line:
            assert not line.rstrip().endswith(":"), line
            assert re.search(r": [A-Z][A-Za-z0-9_]*: \S", line), line


def test_describe_error_never_leaves_the_text_empty() -> None:
    assert describe_error(TimeoutError(), 3.5) == "TimeoutError: no answer within 3.5 s"
    assert describe_error(TimeoutError("no answer within 2 s"), 9) == (
        "TimeoutError: no answer within 2 s")
    assert describe_error(TimeoutError()) == "TimeoutError: TimeoutError()"
    assert describe_error(ValueError("bad lease")) == "ValueError: bad lease"


@pytest.mark.looptime
async def test_a_503_blip_while_acquiring_is_retried(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="watchkeeper.leader")
    cluster.srv.faults.error(503, message="etcd leader changed", path_prefix=LEASES, count=3)
    loop = asyncio.get_running_loop()
    start = loop.time()
    e = await cluster.start("a")
    await asyncio.sleep(0.5)
    mid = (e.health.state, e.health.last_error or "")
    assert await cluster.wait_one_leader(timeout=30) == "a"
    assert mid[0] is ElectorState.DEGRADED
    assert mid[1].startswith("ServerError: ") and "503" in mid[1], mid
    # three failures, each followed by a jittered 2-4 s retry, then the lease is taken
    assert 3 * RETRY <= loop.time() - start < 3 * 2 * RETRY + 1
    assert e.health.state is ElectorState.LEADING and e.health.consecutive_failures == 0
    assert e.health.failures == 3 and e.health.errors == {"ServerError": 3}
    lines = warnings_of(caplog)
    assert any("ServerError: " in line and "503" in line for line in lines), lines
    assert_reasons_named(lines)
    cluster.alive()


@pytest.mark.looptime
async def test_a_503_blip_while_leading_keeps_the_leader(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="watchkeeper.leader")
    a = await cluster.start("a")
    assert await cluster.wait_one_leader(timeout=10) == "a"
    b = await cluster.start("b")
    await asyncio.sleep(5)
    assert b.health.state is ElectorState.FOLLOWING and b.health.holder == "a"
    cluster.srv.faults.error(503, path_prefix=LEASES, count=4)  # ~2 renewals of a fail
    await asyncio.sleep(60)
    assert cluster.leaders() == ["a"] and not a.lost.is_set()
    assert a.health.state is ElectorState.LEADING and a.health.failures >= 1
    lines = [line for line in warnings_of(caplog) if "renewal failed" in line]
    assert lines and all("ServerError: " in line for line in lines), lines
    assert_reasons_named(warnings_of(caplog))
    cluster.never_two_leaders()
    cluster.alive()


@pytest.mark.looptime
async def test_a_hung_renewal_steps_down_in_time_and_names_the_timeout(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """The leader's requests hang (a partition): it steps down within the renew deadline,
    before the follower may take over, and says why (once: "renewal failed: " and nothing)."""
    caplog.set_level(logging.INFO, logger="watchkeeper.leader")
    loop = asyncio.get_running_loop()
    a = await cluster.start("a")
    assert await cluster.wait_one_leader(timeout=10) == "a"
    b = await cluster.start("b")
    await asyncio.sleep(5)
    cut = loop.time()
    cluster.srv.faults.hang(user="a")
    assert await cluster.wait_one_leader_other_than("a", timeout=60) == "b"
    took_over = loop.time()
    (down,) = cluster.stepped_down["a"]
    assert down <= cut + RENEW + 0.1, down - cut  # within the renew deadline of the cut
    assert took_over >= down + (LEASE - RENEW) - RETRY, (down - cut, took_over - cut)
    assert a.health.state is ElectorState.DEGRADED
    assert a.health.last_error is not None
    assert a.health.last_error.startswith("TimeoutError: no answer within")
    lines = [line for line in warnings_of(caplog) if "renewal failed" in line]
    assert lines and all("TimeoutError: no answer within" in line for line in lines), lines
    assert_reasons_named(warnings_of(caplog))
    assert b.health.state is ElectorState.LEADING
    cluster.never_two_leaders()
    cluster.alive()


@pytest.mark.looptime
async def test_an_outage_longer_than_the_lease_then_exactly_one_leads(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="watchkeeper.leader")
    loop = asyncio.get_running_loop()
    for name in ("a", "b", "c"):
        await cluster.start(name)
    leader = await cluster.wait_one_leader(timeout=10)
    await asyncio.sleep(10)
    cut = loop.time()
    cluster.srv.faults.refuse()  # connections refused for 3 lease durations
    await asyncio.sleep(3 * LEASE)
    assert cluster.stepped_down[leader][0] <= cut + RENEW + 0.1  # stopped in time
    assert cluster.leaders() == []  # nobody can lead without the API
    mid = [(e.health.state, e.health.last_error or "", e.health.non_functioning_for(loop.time()))
           for e in cluster.electors.values()]
    # a follower's repeated failures are summarised, not logged every retry
    acquire_lines = [line for line in warnings_of(caplog) if "acquiring" in line]
    back = loop.time()
    cluster.srv.faults.clear()
    await cluster.wait_one_leader(timeout=2 * LEASE)
    assert loop.time() - back <= 2 * LEASE
    for state, error, down in mid:
        assert state is ElectorState.DEGRADED
        assert error.startswith("ConnectionFailed: ")
        assert down >= 2 * LEASE
    assert len(acquire_lines) <= 2 * 3, acquire_lines
    await asyncio.sleep(3 * LEASE)  # and it stays exactly one
    assert len(cluster.leaders()) == 1
    assert all(e.health.state in (ElectorState.LEADING, ElectorState.FOLLOWING)
               for e in cluster.electors.values())
    assert_reasons_named(warnings_of(caplog))
    cluster.never_two_leaders()
    cluster.alive()


@pytest.mark.looptime
async def test_started_while_the_api_is_down_then_exactly_one_leads(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="watchkeeper.leader")
    loop = asyncio.get_running_loop()
    cluster.srv.faults.refuse()
    for name in ("a", "b", "c"):
        await cluster.start(name)
    await asyncio.sleep(40)
    assert cluster.leaders() == []
    mid = [(e.health.state, e.health.last_error or "", e.health.consecutive_failures)
           for e in cluster.electors.values()]
    back = loop.time()
    cluster.srv.faults.clear()
    await cluster.wait_one_leader(timeout=2 * LEASE)
    assert loop.time() - back <= 2 * LEASE
    for state, error, failures in mid:
        assert state is ElectorState.DEGRADED
        assert error.startswith("ConnectionFailed: ")
        assert failures >= 10  # retried every 2-4 s, never given up
    await asyncio.sleep(2 * LEASE)
    assert len(cluster.leaders()) == 1
    assert_reasons_named(warnings_of(caplog))
    cluster.never_two_leaders()
    cluster.alive()


@pytest.mark.looptime
async def test_a_429_retry_after_is_honoured_up_to_one_lease_duration(
    cluster: Cluster,
) -> None:
    loop = asyncio.get_running_loop()
    cluster.srv.faults.throttle(retry_after=7, path_prefix=LEASES, count=1)
    start = loop.time()
    e = await cluster.start("a")
    await cluster.wait_one_leader(timeout=30)
    assert 7 <= loop.time() - start < 8, loop.time() - start  # not after 2-4 s
    assert e.health.errors == {"TooManyRequests": 1}
    cluster.srv.faults.throttle(retry_after=86400, path_prefix=LEASES, user="b", count=1)
    b = await cluster.start("b")
    start = loop.time()
    async with asyncio.timeout(30):
        while b.health.state is not ElectorState.FOLLOWING:
            await asyncio.sleep(0.01)
    assert LEASE <= loop.time() - start < LEASE + 1  # capped at one lease duration
    cluster.alive()


@pytest.mark.looptime
async def test_a_killed_leaders_place_is_taken_as_soon_as_its_lease_expires(
    cluster: Cluster,
) -> None:
    """A follower tries again just after the lease it saw may expire, not on its next
    jittered tick (up to two retry periods later): three kill -9s in a row, each place
    taken within a fraction of a second of the expiry the followers observed."""
    loop = asyncio.get_running_loop()
    for name in ("a", "b", "c", "d"):
        (await cluster.start(name)).release_on_stop = False  # as kill -9: no release
    tasks = dict(zip(cluster.electors, cluster.tasks, strict=True))
    await cluster.wait_one_leader(timeout=10)
    late = []
    for _ in range(3):
        await asyncio.sleep(3 * RETRY)  # everyone has seen a few renewals
        victim = cluster.leaders()[0]
        tasks[victim].cancel()
        followers = [e for n, e in cluster.electors.items() if n != victim]
        await asyncio.sleep(2 * RETRY + 0.1)  # every follower has read the last renewal
        expiry = min(e._observed_at for e in followers) + LEASE
        await cluster.wait_one_leader_other_than(victim, timeout=2 * LEASE)
        late.append(loop.time() - expiry)
        del cluster.electors[victim]
    assert all(-0.01 <= t <= 0.3 for t in late), late
    cluster.never_two_leaders()
