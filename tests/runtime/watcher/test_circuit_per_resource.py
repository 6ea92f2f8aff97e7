"""One failing resource does not starve the other watchers of a Client (issue 21 item 2).

A 5xx or 429 about one resource (an aggregated API that is down, a failing conversion
webhook, one overloaded priority level) is an answer from the server, not evidence that it
is unreachable: it must neither open the Client's circuit nor make the others wait on it.
Against the simulator over real sockets, on virtual time, so a starvation of minutes (295 s
measured before the fix) shows up as a failure in a second."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper.client.circuit import (
    PROBE_JITTER,
    PROBE_MAX,
    RELEASE_SPREAD,
    Circuit,
    CircuitState,
    is_reachability_error,
)
from watchkeeper_sim import ApiServer
from watchkeeper_sim.faults import Faults

from .conftest import Recorder, configmap, record

# The failing resource: Secrets; the healthy one: ConfigMaps, both in "default".
SECRETS = "/api/v1/namespaces/default/secrets"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
# Seconds a reconnect may take beyond the wait itself (the request, on virtual time).
REQUEST = 0.3


class StepLog:
    """A watcher's own backoff (DefaultBackoff, seeded), with each step it handed out and
    when: the bound the healthy watcher's recovery is held to."""

    def __init__(self, clock: Callable[[], float], seed: int) -> None:
        self._inner = wk.DefaultBackoff(rng=random.Random(seed), clock=clock)
        self._clock = clock
        self.steps: list[tuple[float, float]] = []

    def next(self) -> float | None:
        step = self._inner.next()
        if step is not None:
            self.steps.append((self._clock(), step))
        return step

    def reset(self) -> None:
        self._inner.reset()

    def since(self, t: float) -> list[float]:
        return [step for at, step in self.steps if at >= t]


FAILURES: dict[str, Callable[[ApiServer], Any]] = {
    "500": lambda srv: srv.faults.error(500, path_prefix=SECRETS),
    "503": lambda srv: srv.faults.error(503, path_prefix=SECRETS),
    "503-retry-after-30": lambda srv: srv.faults.error(503, retry_after=30,
                                                       path_prefix=SECRETS),
    # kube-aggregator's answer for an aggregated API that is down: plain text, no Status
    "503-kube-aggregator": lambda srv: srv.faults.error(503, "service unavailable", plain=True,
                                                        path_prefix=SECRETS),
    "429-retry-after-1": lambda srv: srv.faults.throttle(1, path_prefix=SECRETS),
    "429-retry-after-3600": lambda srv: srv.faults.throttle(3600, path_prefix=SECRETS),
}


RETRY_AFTER = {"503-retry-after-30": 30.0, "429-retry-after-1": 1.0,
               "429-retry-after-3600": 60.0}  # as honoured: at most 60 s


def _received(rec: Recorder, name: str) -> float | None:
    for at, ev in rec.events:
        if isinstance(ev, wk.Apply | wk.InitApply) and ev.name == name:
            return at
    return None


async def _back(rec: Recorder, name: str, limit: float = 120.0) -> float | None:
    """When ``rec`` received the object ``name``; None if not within ``limit`` seconds
    (long enough to see a starvation, short enough for a failing test to end soon)."""
    try:
        await rec.wait_for(lambda r: _received(r, name) is not None, limit)
    except TimeoutError:
        return None
    return _received(rec, name)


@pytest.mark.looptime
@pytest.mark.parametrize("failure", list(FAILURES))
async def test_a_reset_watch_is_back_within_its_own_backoff_step_while_another_resource_fails(
    srv: ApiServer, client: wk.Client, failure: str
) -> None:
    """Secrets answer ``failure`` forever; the ConfigMaps watch of the same Client loses its
    connection at seeded random moments. Each time it is watching again (it receives an
    object written just after the reset) within the one step of its own backoff that the
    reset cost it, not after the failing resource's next probe (before the fix: never, as
    the Secrets watcher kept the probe turn; with max_unhealthy, 295 s later)."""
    loop = asyncio.get_running_loop()
    FAILURES[failure](srv)
    failing = record(client.api("secrets", "default"), wk.WatchConfig(max_unhealthy=None))
    steps = StepLog(loop.time, seed=21)
    healthy = record(client.api("configmaps", "default"), wk.WatchConfig(max_unhealthy=None),
                     backoff=steps)
    await healthy.wait_for(lambda r: r.of(wk.InitDone))
    await failing.wait_for(lambda r: r.errors())
    rng = random.Random(2102)
    late: list[tuple[int, float, float | None]] = []  # (moment, its step, time back)
    for i in range(6):
        await asyncio.sleep(rng.uniform(0.0, 25.0))
        async with asyncio.timeout(10):
            while srv.open_watches < 1:  # the ConfigMaps watch is open again
                await asyncio.sleep(0.01)
        srv.reset_watches(path_prefix=CONFIGMAPS)
        reset = loop.time()
        srv.create_object(configmap(f"after-reset-{i}"))  # not through the Client
        back = await _back(healthy, f"after-reset-{i}")
        own = steps.since(reset)
        assert len(own) <= 1, own  # one failure: the reset
        step = own[0] if own else 0.0
        if back is None:
            late.append((i, step, None))
            break  # starved: the later moments would only wait as long
        if back - reset > step + REQUEST:
            late.append((i, step, back - reset))
    assert not late, f"watching again later than its own backoff step: {late}"
    # The failing resource is still reported, and its retries keep to its own backoff and
    # Retry-After (capped at 60 s): each next attempt no sooner than the delay announced.
    told = [(at, ev) for at, ev in failing.events if isinstance(ev, wk.WatchError)]
    expected = wk.TooManyRequests if failure.startswith("429") else wk.ServerError
    assert len(told) >= 2 and all(isinstance(ev.error, expected) for _, ev in told)
    wish = RETRY_AFTER.get(failure, 0.0)
    for (at, ev), (next_at, _) in itertools.pairwise(told):
        assert ev.retry_in >= wish and next_at - at >= ev.retry_in - 0.01
    for rec in (failing, healthy):
        await rec.stop()


# (what the simulator answers, whether the error the client builds of it is evidence that the
# server is unreachable)
ANSWERS: list[tuple[str, Callable[[Faults], Any], bool]] = [
    ("Status 500 (a conversion webhook)", lambda f: f.error(500), False),
    ("Status 502", lambda f: f.error(502), False),
    ("Status 503", lambda f: f.error(503), False),
    ("Status 504 (the apiserver's timeout filter)", lambda f: f.error(504), False),
    ("plain 429 (API Priority and Fairness)", lambda f: f.throttle(1), False),
    ("plain 500 (a handler that panicked)", lambda f: f.error(500, plain=True), False),
    ("plain 503 (kube-aggregator)",
     lambda f: f.error(503, "service unavailable", plain=True), False),
    ("plain 502 (a gateway)", lambda f: f.error(502, plain=True), True),
    ("plain 504 (a gateway)", lambda f: f.error(504, "Gateway Time-out", plain=True), True),
    ("connection reset", lambda f: f.refuse(count_refused=True), True),
]


async def test_only_no_answer_or_a_gateways_answer_is_evidence(
    srv: ApiServer, client: wk.Client
) -> None:
    """The errors the client builds of the simulator's answers, classified: a Status says
    the apiserver answered; a gateway's 502/504 is detectable by its missing Status."""
    api = client.api("configmaps", "default")
    for name, answer, evidence in ANSWERS:
        srv.faults.clear()
        answer(srv.faults)
        with pytest.raises(wk.ApiError) as caught:
            await api.list()
        error = caught.value
        assert is_reachability_error(error) is evidence, (name, error)
        if error.code is not None:  # a gateway's answer is told by its missing Status
            assert (error.status is None) is ("plain" in name or "429" in name), name


@pytest.mark.looptime
async def test_a_probe_answered_about_its_own_resource_frees_the_others(
    srv: ApiServer, client: wk.Client
) -> None:
    """The circuit is open because connections are refused, and the Secrets watcher is its
    probe. The server comes back, but Secrets now answer 503 (a Status): the server
    answered, so the probe closes the circuit and the ConfigMaps watcher is released at
    once, instead of waiting while the probe keeps its turn on a failure of its own (before
    the fix: until max_unhealthy)."""
    loop = asyncio.get_running_loop()
    cfg = wk.WatchConfig(max_unhealthy=None)
    failing = record(client.api("secrets", "default"), cfg)
    await failing.wait_for(lambda r: r.of(wk.InitDone))
    async with asyncio.timeout(10):
        while srv.open_watches < 1:
            await asyncio.sleep(0.01)
    srv.faults.refuse(count_refused=True)  # resets the Secrets watch: it opens the circuit
    await failing.wait_for(lambda r: r.errors())
    assert client.circuit.state is CircuitState.OPEN
    # Another watcher of the Client starts during the outage: it waits on the probe.
    healthy = record(client.api("configmaps", "default"), cfg)
    await healthy.wait_for(lambda r: r.errors())
    await asyncio.sleep(30)
    assert healthy.watch.health.phase is wk.WatchPhase.WAITING_ON_CIRCUIT
    srv.faults.clear()
    srv.faults.error(503, path_prefix=SECRETS)
    cleared = loop.time()
    srv.create_object(configmap("after-the-outage"))
    async with asyncio.timeout(30):
        while client.circuit.state is CircuitState.OPEN:
            await asyncio.sleep(0.01)
    closed = loop.time()
    back = await _back(healthy, "after-the-outage")
    # The probe's next step (capped, jittered), then the release.
    assert closed - cleared <= PROBE_MAX * (1 + PROBE_JITTER) + REQUEST
    assert back is not None and back - closed <= RELEASE_SPREAD + REQUEST, (
        None if back is None else back - closed)
    # It was the probe's 503 that closed it: still surfaced, still the probe's own error.
    assert isinstance(failing.errors()[-1], wk.ServerError)
    assert healthy.errors() and all(
        isinstance(e, wk.ConnectionFailed) for e in healthy.errors())
    for rec in (failing, healthy):
        await rec.stop()


@pytest.mark.looptime
async def test_behind_a_gateway_the_fleet_still_probes_as_one(
    srv: ApiServer, client: wk.Client
) -> None:
    """A gateway answers 502 without a Status for every resource (its apiserver is down):
    that is evidence, so ten watchers still make <= 10 requests in the first minute and
    come back together within one capped probe step of the apiserver's return."""
    loop = asyncio.get_running_loop()
    recs = [record(client.api("configmaps", f"team-{i}"), wk.WatchConfig(max_unhealthy=None))
            for i in range(10)]
    for rec in recs:
        await rec.wait_for(lambda r: r.of(wk.InitDone))
    async with asyncio.timeout(10):
        while srv.open_watches < len(recs):
            await asyncio.sleep(0.01)
    before = srv.count(status=502)
    srv.faults.error(502, plain=True)
    srv.reset_watches()
    await asyncio.sleep(60)
    assert 1 <= srv.count(status=502) - before <= 10
    waiting = [r for r in recs if r.watch.health.phase is wk.WatchPhase.WAITING_ON_CIRCUIT]
    assert len(waiting) >= len(recs) - 1  # the others wait on the probe
    srv.faults.clear()
    cleared = loop.time()
    async with asyncio.timeout(30):
        while srv.open_watches < len(recs):
            await asyncio.sleep(0.01)
    assert loop.time() - cleared <= PROBE_MAX * (1 + PROBE_JITTER) + RELEASE_SPREAD + REQUEST
    for rec in recs:
        await rec.stop()


@pytest.mark.looptime
async def test_a_probe_that_learns_nothing_gives_up_its_turn() -> None:
    """A probe that fails with neither an answer nor evidence (undecodable bytes) keeps no
    first claim: another caller probes at once, not after the prober's next step."""
    loop = asyncio.get_running_loop()
    circuit = Circuit(rng=random.Random(3))
    went: list[float] = []

    async def prober() -> None:
        circuit.record_failure(wk.ConnectionFailed("reset"), 5.0)  # opens: first claim
        assert await circuit.wait_turn()
        went.append(loop.time())
        circuit.record_failure(wk.InvalidResponse("undecodable response body"))
        await asyncio.sleep(3600)

    task = asyncio.create_task(prober())
    await asyncio.sleep(0.1)
    assert await circuit.wait_turn()  # the next probe is this caller's
    assert went and loop.time() - went[0] <= 0.1
    assert circuit.state is CircuitState.OPEN
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.mark.looptime
async def test_released_by_another_answer_a_probe_goes_no_later_than_its_own_turn() -> None:
    """Its own step ends at 1.0 s; another watcher's answer closes the circuit at 0.9 s.
    The release's jitter (up to 0.5 s) may not push it past its own turn (before: up to
    1.4 s, seen as a rare failure of the test above)."""
    loop = asyncio.get_running_loop()
    went = []
    for seed in range(20):
        circuit = Circuit(rng=random.Random(seed))
        start = loop.time()
        circuit.record_failure(wk.ConnectionFailed("reset"), 1.0)  # it opens: the prober

        async def answer(circuit: Circuit = circuit) -> None:
            await asyncio.sleep(0.9)
            circuit.record_failure(wk.ServerError("webhook failed", code=500,
                                                  status={"kind": "Status", "code": 500}))

        other = asyncio.create_task(answer())
        assert not await circuit.wait_turn(start + 0.5)  # released, not the probe
        went.append(loop.time() - start)
        await other
    assert min(went) >= 0.9 and max(went) <= 1.0 + 0.01, went
