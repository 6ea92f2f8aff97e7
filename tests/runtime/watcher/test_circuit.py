"""One circuit per API server (issue 13 item 2): ten watchers on one Client, one outage.

Against the simulator over real sockets on virtual time. ``refuse(count_refused=True)``
accepts and resets each connection, so ``srv.connection_attempts`` counts real attempts."""

from __future__ import annotations

import asyncio
import random

import pytest

import watchkeeper as wk
from watchkeeper.client.circuit import (
    PROBE_JITTER,
    PROBE_MAX,
    RELEASE_SPREAD,
    Circuit,
    CircuitState,
)
from watchkeeper_sim import ApiServer

from .conftest import Recorder, record

NAMESPACES = [f"team-{i}" for i in range(10)]


async def _fleet(srv: ApiServer, client: wk.Client) -> list[Recorder]:
    recs = [record(client.api("configmaps", ns), wk.WatchConfig(max_unhealthy=None))
            for ns in NAMESPACES]
    for rec in recs:
        await rec.wait_for(lambda r: r.of(wk.InitDone))
    async with asyncio.timeout(10):
        while srv.open_watches < len(recs):
            await asyncio.sleep(0.01)
    return recs


async def _outage(srv: ApiServer, seconds: float) -> int:
    """Refuse (accept and reset) every connection for ``seconds``: the attempts made."""
    srv.faults.refuse(count_refused=True)
    srv.reset_watches()
    before = srv.connection_attempts
    await asyncio.sleep(seconds)
    return srv.connection_attempts - before


async def _until_closed(circuit: Circuit) -> float:
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(120):
        while circuit.state is not CircuitState.CLOSED:
            await asyncio.sleep(0.01)
    return loop.time()


@pytest.mark.looptime
async def test_ten_watchers_probe_as_one_and_recover_together(
    srv: ApiServer, client: wk.Client
) -> None:
    loop = asyncio.get_running_loop()
    recs = await _fleet(srv, client)
    attempts = await _outage(srv, 60)
    # One probe per backoff step for the process (a lone watcher makes <= 7), not 10 x that.
    assert attempts <= 10
    srv.faults.clear()
    cleared = loop.time()
    closed = await _until_closed(client.circuit)
    async with asyncio.timeout(10):
        while srv.open_watches < len(recs):
            await asyncio.sleep(0.01)
    back = loop.time()
    # Everyone back within about a second of the first success, staggered, not at once.
    assert back - closed <= 1.2
    assert back - cleared <= 60.0 + 1.2  # the probe's step at most, then the release
    for rec in recs:  # and each says so soon (a resumed quiet watch: OPEN_GRACE)
        await rec.wait_for(lambda r: r.watch.health.state is wk.WatchState.HEALTHY, 5)
    assert loop.time() - closed <= 3.0
    for rec in recs:
        await rec.stop()


# The longest the fleet may take from the server's return to all watching again: one capped
# probe step (PROBE_MAX plus its jitter), then the staggered release, plus a little for the
# requests themselves. Before the cap it was one step of the prober's backoff: up to 60 s.
BACK_WITHIN = PROBE_MAX * (1 + PROBE_JITTER) + RELEASE_SPREAD + 0.3


async def _all_watching(srv: ApiServer, n: int) -> None:
    async with asyncio.timeout(120):
        while srv.open_watches < n:
            await asyncio.sleep(0.01)


@pytest.mark.looptime
async def test_a_long_outage_is_probed_gently_and_its_end_noticed_soon(
    srv: ApiServer, client: wk.Client
) -> None:
    """Outages of 60 s and longer, ending at different moments of the probe schedule: never
    more than 10 connection attempts in any outage's first minute, and all ten watchers
    watching again within one capped probe step (plus the release) of the server's return,
    not one step of a 30-60 s backoff later (the median, about half the bound, is measured
    by benchmarks/kindness_fleet.py: the schedule's jitter makes it a statistic)."""
    loop = asyncio.get_running_loop()
    recs = await _fleet(srv, client)
    delays = []
    for extra in (0.0, 1.3, 2.6, 3.9, 5.2, 6.5, 9.1):
        srv.faults.refuse(count_refused=True)
        srv.reset_watches()
        before = srv.connection_attempts
        await asyncio.sleep(60)
        assert srv.connection_attempts - before <= 10  # in the first minute, whole process
        await asyncio.sleep(extra)
        srv.faults.clear()
        cleared = loop.time()
        await _all_watching(srv, len(recs))
        delays.append(loop.time() - cleared)
        await asyncio.sleep(15)  # a stable watch: every backoff starts over
    assert max(delays) <= BACK_WITHIN, delays
    for rec in recs:
        await rec.stop()


@pytest.mark.looptime
async def test_a_faster_backoff_than_the_cap_sets_the_probe_pace(
    srv: ApiServer, client: wk.Client
) -> None:
    """The cap only shortens long steps: a watcher's own ConstantBackoff(2) probes every 2 s
    (still one probe for the whole process), and a server back is noticed within ~2 s."""
    loop = asyncio.get_running_loop()
    cfg = wk.WatchConfig(max_unhealthy=None)
    recs = [record(client.api("configmaps", ns), cfg, backoff=wk.ConstantBackoff(2.0))
            for ns in NAMESPACES[:3]]
    await _all_watching(srv, len(recs))
    attempts = await _outage(srv, 60)
    assert 25 <= attempts <= 31  # every 2 s (plus the caller's spacing), not 3 x that
    srv.faults.clear()
    cleared = loop.time()
    await _all_watching(srv, len(recs))
    assert loop.time() - cleared <= 2.0 + RELEASE_SPREAD + 0.3
    for rec in recs:
        await rec.stop()


def test_the_probe_step_is_capped_with_jitter_and_retry_after_still_wins() -> None:
    async def main() -> None:
        now = [100.0]
        c = Circuit(clock=lambda: now[0], rng=random.Random(7))
        c.record_failure(wk.ConnectionFailed("refused"), 0.8)  # a short step stays
        assert c.expected_wait() == pytest.approx(0.8)
        c._probe = asyncio.current_task()
        c.record_failure(wk.ConnectionFailed("refused"), 45.0)  # alone: its own backoff
        assert c.expected_wait() == pytest.approx(45.0)
        waiter = asyncio.ensure_future(c.wait_turn())  # another watcher waits on the probe
        await asyncio.sleep(0)
        steps = []
        for _ in range(50):
            c._probe = asyncio.current_task()  # as the probe reporting back
            c.record_failure(wk.ConnectionFailed("refused"), 45.0)
            steps.append(c.expected_wait())
        assert PROBE_MAX <= min(steps) < max(steps) <= PROBE_MAX * (1 + PROBE_JITTER)
        c._probe = asyncio.current_task()  # a gateway's 502 (no Status) with Retry-After
        c.record_failure(wk.ServerError("bad gateway", code=502, retry_after=20.0), 45.0)
        assert c.expected_wait() == pytest.approx(20.0)  # never faster than Retry-After
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        assert c._waiting == 0
        uncapped = Circuit(clock=lambda: now[0], probe_max=None)
        uncapped.record_failure(wk.ConnectionFailed("refused"), 45.0)
        assert uncapped.expected_wait() == pytest.approx(45.0)

    asyncio.run(main())


@pytest.mark.looptime
async def test_a_403_on_one_resource_does_not_hold_back_the_others(
    srv: ApiServer, client: wk.Client
) -> None:
    loop = asyncio.get_running_loop()
    recs = await _fleet(srv, client)
    forbidden = f"/api/v1/namespaces/{NAMESPACES[0]}/"
    attempts = await _outage(srv, 60)
    assert attempts <= 10
    srv.faults.clear()
    srv.faults.error(403, "forbidden here", path_prefix=forbidden)
    closed = await _until_closed(client.circuit)
    async with asyncio.timeout(10):
        while srv.open_watches < len(recs) - 1:
            await asyncio.sleep(0.01)
    assert loop.time() - closed <= 1.2
    # The forbidden one keeps its own backoff: a few attempts a minute, not a tight loop,
    # and its 403s never reopen the circuit for the others.
    await asyncio.sleep(60)
    denied = [e for e in recs[0].errors() if isinstance(e, wk.Forbidden)]
    assert 1 <= len(denied) <= 8
    assert client.circuit.state is CircuitState.CLOSED
    assert srv.open_watches == len(recs) - 1
    for rec in recs:
        await rec.stop()


@pytest.mark.looptime
async def test_retry_after_from_a_gateway_applies_to_the_circuit(
    srv: ApiServer, client: wk.Client
) -> None:
    """One 502 with Retry-After: 20 and no Status (a gateway for an apiserver it cannot
    reach), told to the probe, holds every watcher's retry (the server would answer the
    others at once: without the circuit they are back in ~1 s)."""
    loop = asyncio.get_running_loop()
    recs = await _fleet(srv, client)
    srv.faults.error(502, plain=True, retry_after=20, count=1)
    srv.reset_watches()
    told = loop.time()
    for rec in recs:
        await rec.wait_for(lambda r: r.errors())
    await asyncio.sleep(told + 19.5 - loop.time())
    assert srv.open_watches == 0  # nobody asked again before Retry-After
    async with asyncio.timeout(60):
        while srv.open_watches < len(recs):
            await asyncio.sleep(0.01)
    told_502 = [e for rec in recs for e in rec.errors() if e.code == 502]
    assert len(told_502) == 1
    assert loop.time() - told >= 20
    assert loop.time() - told <= 20 + 2.5  # the probe, then the staggered release
    for rec in recs:
        await rec.stop()


@pytest.mark.looptime
async def test_a_429_is_the_throttled_watchers_own(srv: ApiServer, client: wk.Client) -> None:
    """The same Retry-After: 20 as a 429 (API Priority and Fairness, about one request):
    the throttled watcher waits it out alone; its answer closes the circuit (the server
    answered) and the other nine are back within the release, not 20 s later."""
    loop = asyncio.get_running_loop()
    recs = await _fleet(srv, client)
    srv.faults.throttle(retry_after=20, count=1)
    srv.reset_watches()

    def throttled() -> list[Recorder]:
        return [r for r in recs if any(isinstance(e, wk.TooManyRequests) for e in r.errors())]

    async with asyncio.timeout(30):
        while not throttled():
            await asyncio.sleep(0.01)
    told = loop.time()
    [slow] = throttled()
    async with asyncio.timeout(10):
        while srv.open_watches < len(recs) - 1:
            await asyncio.sleep(0.01)
    assert loop.time() - told <= RELEASE_SPREAD + 0.3
    assert client.circuit.state is CircuitState.CLOSED
    await asyncio.sleep(told + 19.5 - loop.time())
    assert srv.open_watches == len(recs) - 1  # the throttled one honours its Retry-After
    async with asyncio.timeout(10):
        while srv.open_watches < len(recs):
            await asyncio.sleep(0.01)
    assert 20 <= loop.time() - told <= 20 + 0.3
    assert len(slow.errors()) == 2  # the reset, then the 429
    for rec in recs:
        await rec.stop()


def test_only_reachability_errors_open_it() -> None:
    async def main() -> None:
        c = Circuit()
        c.record_failure(wk.NotFound("gone", code=404))
        assert c.state is CircuitState.CLOSED
        c.record_failure(wk.ConnectionFailed("refused"))
        assert c.state is CircuitState.OPEN
        c.record_failure(wk.Forbidden("no", code=403))  # the server answered
        assert c.state is CircuitState.CLOSED
        c.record_failure(wk.ServerError("bad gateway", code=502))  # no Status: a gateway's
        assert c.state is CircuitState.OPEN
        c.record_success()
        assert c.state is CircuitState.CLOSED
        c.record_failure(wk.Timeout("no answer", reason="ClientTimeout"))
        assert c.state is CircuitState.OPEN
        # The apiserver's own answers about one resource close it (issue 21 item 2).
        c.record_failure(wk.ServerError("down", code=503, status={"kind": "Status"}))
        assert c.state is CircuitState.CLOSED
        c.record_failure(wk.ConnectionFailed("reset"))
        c.record_failure(wk.TooManyRequests("slow down", code=429, retry_after=5.0))
        assert c.state is CircuitState.CLOSED

    asyncio.run(main())


@pytest.mark.looptime
async def test_a_watcher_waiting_on_the_circuit_keeps_its_max_unhealthy_deadline(
    srv: ApiServer, client: wk.Client
) -> None:
    """Waiting for the probe must not outlast max_unhealthy: each watcher raises on time."""
    loop = asyncio.get_running_loop()
    recs = [record(client.api("configmaps", ns), wk.WatchConfig(max_unhealthy=10))
            for ns in NAMESPACES[:3]]
    for rec in recs:
        await rec.wait_for(lambda r: r.of(wk.InitDone))
    async with asyncio.timeout(10):
        while srv.open_watches < len(recs):
            await asyncio.sleep(0.01)
    srv.faults.refuse(count_refused=True)
    srv.reset_watches()
    broke = loop.time()
    for rec in recs:
        assert rec.task is not None
        await asyncio.wait_for(asyncio.shield(rec.task), 30)
        assert isinstance(rec.exception, wk.WatcherUnhealthy)
        assert rec.ended_at is not None
        assert rec.ended_at - broke == pytest.approx(10, abs=0.2)
