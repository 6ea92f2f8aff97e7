"""The retry decision as a pure function (issue 12 item 5): ``decide(error, phase, health,
now)`` called directly for every error class, with exact values on an injected clock.

``backoff`` and ``circuit`` are the two inputs ``decide`` asks only when it needs them: the
tests count the calls, so a decision that should not take a backoff step (a first 410, an
error only the caller can fix) is seen not to.
"""

from __future__ import annotations

import math

import pytest

import watchkeeper as wk
from watchkeeper.client.errors import MAX_RETRY_AFTER
from watchkeeper.watcher import (
    CIRCUIT_MIN_SPACING,
    Decision,
    RetryAction,
    WatchHealth,
    WatchPhase,
    WatchState,
    decide,
)

NOW = 1_000.0
LIMIT = 300.0


class Steps:
    """A backoff that returns the given steps in order and counts the calls."""

    def __init__(self, *steps: float | None) -> None:
        self.steps = list(steps)
        self.calls = 0

    def __call__(self) -> float | None:
        self.calls += 1
        return self.steps.pop(0)


def health(state: WatchState = WatchState.HEALTHY, down_since: float = NOW) -> WatchHealth:
    """A watcher's health before the failure; ``down_since``: when it last worked."""
    return WatchHealth(resource="configmaps", state=state, functioning_since=down_since)


def run(error: wk.ApiError, *, phase: WatchPhase = WatchPhase.WATCHING,
        h: WatchHealth | None = None, step: float | None = 1.5,
        limit: float | None = LIMIT, **kw: object) -> tuple[Decision, Steps]:
    steps = Steps(step)
    d = decide(error, phase, h or health(), NOW, max_unhealthy=limit, backoff=steps,
               **kw)  # type: ignore[arg-type]
    return d, steps


RETRY_WITH_BACKOFF = [
    wk.ConnectionFailed("refused", reason="ConnectionRefused"),
    wk.Timeout("no answer", reason="ClientTimeout"),
    wk.ServerError("boom", code=500, reason="InternalError"),
    wk.ServerError("unavailable", code=503, reason="ServiceUnavailable"),
    wk.Unauthorized("expired token", code=401, reason="Unauthorized"),
    wk.Forbidden("no list", code=403, reason="Forbidden"),
    wk.NotFound("no such kind", code=404, reason="NotFound"),
    wk.InvalidResponse("undecodable watch event"),
]


@pytest.mark.parametrize("error", RETRY_WITH_BACKOFF,
                         ids=lambda e: f"{type(e).__name__}-{e.code}")
def test_errors_an_administrator_or_time_can_fix_retry_after_the_backoff_step(
    error: wk.ApiError,
) -> None:
    d, steps = run(error)
    assert d == Decision(RetryAction.RETRY, relist=False, delay=1.5, floor=1.5)
    assert steps.calls == 1


def test_429_waits_for_retry_after_when_longer_than_the_backoff() -> None:
    error = wk.TooManyRequests("slow down", code=429, retry_after=7.0)
    d, _ = run(error)
    assert d == Decision(RetryAction.RETRY, delay=7.0, floor=7.0)
    d, _ = run(error, step=9.0)
    assert d.delay == 9.0  # the backoff step when it is longer


@pytest.mark.parametrize("after", [3600.0, math.nan, -5.0, None])
def test_retry_after_is_capped_and_a_nonsense_one_ignored(after: float | None) -> None:
    d, _ = run(wk.TooManyRequests("slow", code=429, retry_after=after), limit=None)
    expected = MAX_RETRY_AFTER if after == 3600.0 else 1.5
    assert d == Decision(RetryAction.RETRY, delay=expected, floor=expected)


def test_first_410_relists_at_once_without_a_backoff_step() -> None:
    d, steps = run(wk.Gone("too old resource version", code=410, reason="Expired"))
    assert d == Decision(RetryAction.RETRY, relist=True, delay=0.0)
    assert steps.calls == 0


def test_a_repeated_410_relists_after_the_backoff() -> None:
    d, steps = run(wk.Gone("too old", code=410), previous_gone=True)
    assert d == Decision(RetryAction.RETRY, relist=True, delay=1.5, floor=1.5)
    assert steps.calls == 1


def test_a_refused_resource_version_relists() -> None:
    error = wk.ServerError("resourceVersion too large", code=500)
    d, _ = run(error)
    assert d.action is RetryAction.RETRY and d.relist


@pytest.mark.parametrize("error", [
    wk.Invalid("field selector not supported", code=422, reason="Invalid"),
    wk.BadRequest("unable to parse requirement", code=400, reason="BadRequest"),
], ids=["422", "400"])
def test_the_callers_own_mistake_is_raised_at_once(error: wk.ApiError) -> None:
    d, steps = run(error)
    assert d == Decision(RetryAction.RAISE)
    assert steps.calls == 0


def test_a_streaming_list_the_server_does_not_support_falls_back_at_once() -> None:
    error = wk.Invalid("sendInitialEvents is forbidden for watch", code=422)
    d, steps = run(error, phase=WatchPhase.STREAMING_LIST)
    assert d == Decision(RetryAction.FALL_BACK) and steps.calls == 0
    # the same answer while already watching is the caller's mistake: raised
    assert run(error, phase=WatchPhase.WATCHING)[0].action is RetryAction.RAISE


def test_the_backoff_giving_up_is_give_up() -> None:
    d, _ = run(wk.ServerError("boom", code=500), step=None)
    assert d == Decision(RetryAction.GIVE_UP)


def test_past_max_unhealthy_is_unhealthy_at_once() -> None:
    h = health(WatchState.DEGRADED, down_since=NOW - LIMIT)
    d, steps = run(wk.ServerError("boom", code=500), h=h)
    assert d == Decision(RetryAction.UNHEALTHY) and steps.calls == 0
    # a healthy watcher's first failure starts a new outage: never unhealthy at once
    old = health(WatchState.HEALTHY, down_since=NOW - 10 * LIMIT)
    assert run(wk.ServerError("boom", code=500), h=old)[0].action is RetryAction.RETRY


def test_a_delay_past_the_deadline_becomes_one_final_attempt_before_it() -> None:
    # Down for 290 s of 300: a 20 s step would pass the deadline (NOW + 10).
    h = health(WatchState.DEGRADED, down_since=NOW - 290.0)
    d, _ = run(wk.ServerError("boom", code=500), h=h, step=20.0)
    # the last attempt goes min(5, 300 / 10) = 5 s before the deadline
    assert d == Decision(RetryAction.RETRY, delay=5.0, floor=20.0, latest=NOW + 5.0,
                         final=True)


def test_after_the_final_attempt_it_waits_for_the_deadline_then_is_unhealthy() -> None:
    h = health(WatchState.DEGRADED, down_since=NOW - 290.0)
    d, _ = run(wk.ServerError("boom", code=500), h=h, step=20.0, final_for=NOW - 290.0)
    assert d == Decision(RetryAction.UNHEALTHY, delay=10.0, at=NOW + 10.0)


def test_a_retry_after_past_the_deadline_is_unhealthy_at_the_deadline() -> None:
    h = health(WatchState.DEGRADED, down_since=NOW - 290.0)
    d, _ = run(wk.TooManyRequests("slow", code=429, retry_after=30.0), h=h)
    assert d == Decision(RetryAction.UNHEALTHY, delay=10.0, at=NOW + 10.0)


def test_an_unreachable_server_waits_on_the_clients_circuit() -> None:
    asked: list[tuple[float, float]] = []

    def circuit(delay: float, floor: float) -> float:
        asked.append((delay, floor))
        return 4.0

    h = health(WatchState.DEGRADED, down_since=NOW - 10.0)
    d, _ = run(wk.ConnectionFailed("refused"), h=h, circuit=circuit)
    assert asked == [(1.5, CIRCUIT_MIN_SPACING)]
    # waiting on the circuit may not outlast the threshold: the last attempt goes 5 s
    # before it (deadline NOW + 290)
    assert d == Decision(RetryAction.RETRY, delay=4.0, circuit=True,
                         floor=CIRCUIT_MIN_SPACING, latest=NOW + 285.0)
    # Retry-After is the circuit floor too (a gateway's 502, no Status: the server is
    # unreachable behind it)
    asked.clear()
    run(wk.ServerError("bad gateway", code=502, retry_after=3.0), h=h, circuit=circuit)
    assert asked == [(3.0, 3.0)]
    # An answer about one resource is no reachability error: no circuit, our own backoff
    # and Retry-After (issue 21: a 5xx or 429 from one resource held the others back)
    status = {"kind": "Status", "code": 503}
    for answer in (wk.Forbidden("no", code=403),
                   wk.ServerError("webhook down", code=503, status=status),
                   wk.ServerError("service unavailable", code=503),  # kube-aggregator's
                   wk.Timeout("request timed out", code=504, status={**status, "code": 504})):
        d, _ = run(answer, h=h, circuit=circuit)
        assert not d.circuit and d.delay == 1.5 and asked == [(3.0, 3.0)]
    d, _ = run(wk.TooManyRequests("slow", code=429, retry_after=3.0), h=h, circuit=circuit)
    assert not d.circuit and d.delay == 3.0 and asked == [(3.0, 3.0)]


# -- the phase, visible in WatchHealth, on a real watcher --------------------------------------


@pytest.mark.looptime
async def test_the_phase_is_visible_in_watch_health() -> None:
    """Throttled (429, Retry-After 7: an answer about this request, so its own backoff and
    Retry-After pace the retries, not the client's circuit): each WatchError is handed out
    while BACKING_OFF; once the list worked and the watch opened, WATCHING; streaming:
    STREAMING_LIST until its end. (Waiting on the circuit: test_circuit.py.)"""
    import asyncio

    from watchkeeper_sim import ApiServer

    async with ApiServer(bookmark_interval=30.0) as srv, srv.client() as client:
        srv.faults.throttle(retry_after=7, count=2)
        api = client.api("configmaps", namespace="default")
        w = wk.watcher(api, wk.WatchConfig(max_unhealthy=None))
        assert w.health.phase is WatchPhase.STARTING
        seen: list[tuple[str, WatchPhase]] = []
        events = aiter(w)
        async with asyncio.timeout(60):
            async for ev in events:
                seen.append((type(ev).__name__, w.health.phase))
                if isinstance(ev, wk.InitDone):
                    break
        # InitStart comes before each LIST attempt; the two 429s are waited out
        assert seen == [
            ("InitStart", WatchPhase.INITIAL_LIST), ("WatchError", WatchPhase.BACKING_OFF),
            ("InitStart", WatchPhase.INITIAL_LIST), ("WatchError", WatchPhase.BACKING_OFF),
            ("InitStart", WatchPhase.INITIAL_LIST), ("InitDone", WatchPhase.WATCHING),
        ]
        await events.aclose()  # type: ignore[attr-defined]

        w = wk.watcher(api, wk.WatchConfig(initial_list="streaming"))
        events = aiter(w)
        phases = []
        async with asyncio.timeout(60):
            async for ev in events:
                phases.append((type(ev).__name__, w.health.phase))
                if isinstance(ev, wk.InitDone):
                    break
        await events.aclose()  # type: ignore[attr-defined]
        assert phases == [("InitStart", WatchPhase.STREAMING_LIST),
                          ("InitDone", WatchPhase.WATCHING)]


def test_the_circuits_wait_is_never_a_rounding_error_under_retry_after() -> None:
    """(now + 3) - now is 2.9999999999999996 for some loop times: the announced delay must
    still honour Retry-After (seen as a rare failure of the property test)."""
    h = health(WatchState.DEGRADED, down_since=NOW - 10.0)
    d, _ = run(wk.ServerError("bad gateway", code=502, retry_after=3.0), h=h,
               circuit=lambda delay, floor: (1e9 + floor) - 1e9 - 1e-9)
    assert d.delay == 3.0 and d.circuit
