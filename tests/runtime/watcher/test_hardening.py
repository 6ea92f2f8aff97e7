"""Issue 10, watcher side: a streaming list never resurrects a deleted object, max_unhealthy
is a deadline even while a request hangs, Retry-After is bounded, errors only the caller can
fix end the watch at once, and a 403 names every verb while health stays honest.

Against the simulator over real sockets, on virtual event-loop time (looptime)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging

import pytest

import watchkeeper as wk
from watchkeeper.client.errors import MAX_RETRY_AFTER, error_from_response
from watchkeeper_sim import ApiServer

from .conftest import configmap, record

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def cm_api(client: wk.Client) -> wk.Api:
    return client.api("configmaps", namespace="default")


def server_state(srv: ApiServer) -> dict[str, str]:
    return {wk.meta.name(o): wk.meta.resource_version(o)
            for o in srv.store.objects(srv.resource("v1", "ConfigMap"), "default")}


# -- 1. the streaming initial list ---------------------------------------------------------


@pytest.mark.looptime
@pytest.mark.parametrize("lazy", [False, True])
async def test_streaming_list_applies_deletes_inside_the_initial_window(lazy: bool) -> None:
    """Live events before the initial-events-end bookmark (a real apiserver sends it on its
    ~1 s tick) are applied to the initial set: what was deleted there is not present."""
    async with ApiServer(initial_events_end_delay=1.0) as srv, srv.client() as client:
        for name in ("keep", "doomed", "changed"):
            srv.create_object(configmap(name, v="0"))
        store, writer = wk.Store.new()
        w = wk.watcher(cm_api(client), wk.WatchConfig(initial_list="streaming",
                                                      lazy_decode=lazy))
        seen: list[wk.Event] = []

        async def consume() -> None:
            async for ev in wk.reflector(writer, w):
                seen.append(ev)

        task = asyncio.create_task(consume())
        async with asyncio.timeout(10):
            while not srv.open_watches:  # initial events sent; the bookmark waits 1 s
                await asyncio.sleep(0.01)
        assert not store.ready
        srv.create_object(configmap("ghost"))
        srv.delete_object("v1", "ConfigMap", "ghost")
        srv.delete_object("v1", "ConfigMap", "doomed")
        changed = srv.get_object("v1", "ConfigMap", "changed")
        changed["data"] = {"v": "1"}
        srv.update_object(changed)
        srv.create_object(configmap("born"))
        await store.wait_until_ready(timeout=10)
        # At InitDone the store is exactly the server: no ghost, no doomed.
        assert {wk.meta.name(o): wk.meta.resource_version(o) for o in store} == server_state(srv)
        assert store.get("changed", namespace="default")["data"] == {"v": "1"}  # type: ignore[index]
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    # A raw consumer sees the same: the initial set holds only the survivors.
    init = [ev.name for ev in seen if isinstance(ev, wk.InitApply)]
    assert sorted(init) == ["born", "changed", "keep"]
    assert not [ev for ev in seen if isinstance(ev, wk.Delete)]


# -- 4. max_unhealthy is a deadline on the whole attempt -----------------------------------


@pytest.mark.looptime
@pytest.mark.parametrize("watch", [False, True], ids=["hung-list", "hung-watch"])
async def test_a_hung_request_ends_at_max_unhealthy_not_at_the_request_timeout(
    srv: ApiServer, client: wk.Client, watch: bool
) -> None:
    loop = asyncio.get_running_loop()
    srv.faults.hang(watch=watch)  # hung-watch: the LIST works, the watch never answers
    start = loop.time()
    rec = record(cm_api(client), wk.WatchConfig(max_unhealthy=3))
    assert rec.task is not None
    await asyncio.wait_for(asyncio.shield(rec.task), 30)
    assert isinstance(rec.exception, wk.WatcherUnhealthy), rec.exception
    assert rec.ended_at is not None
    assert rec.ended_at - start == pytest.approx(3, abs=0.05)
    cause = rec.exception.__cause__
    assert isinstance(cause, wk.Timeout) and "max_unhealthy" in str(cause)
    assert rec.watch.health.state is wk.WatchState.DEGRADED


@pytest.mark.looptime
async def test_the_deadline_counts_from_the_first_failure_through_a_hang(
    srv: ApiServer, client: wk.Client
) -> None:
    """Refused for a while, then the server hangs: WatcherUnhealthy still comes at
    max_unhealthy after the watcher stopped working, not a request timeout later."""
    loop = asyncio.get_running_loop()
    rec = record(cm_api(client), wk.WatchConfig(max_unhealthy=10))
    await rec.wait_for(lambda r: r.of(wk.InitDone))
    async with asyncio.timeout(10):
        while not srv.open_watches:
            await asyncio.sleep(0.01)
    srv.faults.refuse(count_refused=True)
    srv.reset_watches()
    broke = loop.time()
    await asyncio.sleep(2)
    srv.faults.clear()
    srv.faults.hang()
    assert rec.task is not None
    await asyncio.wait_for(asyncio.shield(rec.task), 30)
    assert isinstance(rec.exception, wk.WatcherUnhealthy)
    assert rec.ended_at is not None
    assert rec.ended_at - broke == pytest.approx(10, abs=0.1)
    assert isinstance(rec.exception.__cause__, wk.Timeout)


class _HungCredentials:
    """An auth source whose refresh (an exec plugin, a token endpoint) never answers."""

    async def headers(self) -> dict[str, str]:
        await asyncio.Event().wait()
        return {}

    async def refresh(self) -> None:
        pass


@pytest.mark.looptime
async def test_a_hung_credential_refresh_ends_at_max_unhealthy(srv: ApiServer) -> None:
    loop = asyncio.get_running_loop()
    config = dataclasses.replace(srv.client_config(), auth=_HungCredentials())
    async with wk.Client(config) as client:
        start = loop.time()
        with pytest.raises(wk.WatcherUnhealthy) as info:
            async with asyncio.timeout(600):
                async for _ev in wk.watcher(cm_api(client), wk.WatchConfig(max_unhealthy=4)):
                    pass
        assert loop.time() - start == pytest.approx(4, abs=0.05)
    assert isinstance(info.value.__cause__, wk.Timeout)
    assert srv.count() == 0  # no request ever left


# -- 8. Retry-After is bounded ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "expected"),
    [("inf", MAX_RETRY_AFTER), ("86400", MAX_RETRY_AFTER), ("1e999", MAX_RETRY_AFTER),
     ("nan", None), ("-5", 0.0), ("garbage", None), ("", None),
     ("Wed, 21 Oct 2015 07:28:00 GMT", None), ("2", 2.0), (" 1.5 ", 1.5)],
)
def test_retry_after_header_parsing_never_raises_and_is_capped(
    header: str, expected: float | None
) -> None:
    err = error_from_response(429, b"Too many requests", headers={"Retry-After": header})
    assert isinstance(err, wk.TooManyRequests)
    assert err.retry_after == expected
    str(err)  # the hint formats it


@pytest.mark.parametrize(
    ("after", "expected"),
    [(1e9, MAX_RETRY_AFTER), (10**400, MAX_RETRY_AFTER), (-1, 0.0), (True, None),
     ("5", 5.0), ([5], None), (3, 3.0)],
)
def test_retry_after_seconds_in_a_status_is_capped(after: object, expected: float | None) -> None:
    body = ('{"kind": "Status", "code": 429, "reason": "TooManyRequests", "message": "slow",'
            ' "details": {"retryAfterSeconds": %s}}')
    raw = body % ("1" + "0" * 400 if after == 10**400 else
                  ('"5"' if after == "5" else str(after).lower()))
    err = error_from_response(429, raw.encode())
    assert err.retry_after == expected


def test_a_status_whose_details_are_not_a_map_has_no_retry_after() -> None:
    for details in ('"oops"', "[1, 2]", "null"):
        raw = ('{"kind": "Status", "code": 429, "reason": "TooManyRequests", "message": "x",'
               f' "details": {details}}}')
        assert error_from_response(429, raw.encode()).retry_after is None


@pytest.mark.looptime
@pytest.mark.parametrize("retry_after", [float("inf"), 86400.0, 1e9])
async def test_a_huge_retry_after_neither_parks_the_watcher_nor_delays_unhealthy(
    srv: ApiServer, client: wk.Client, retry_after: float
) -> None:
    loop = asyncio.get_running_loop()
    srv.faults.throttle(retry_after=retry_after)
    start = loop.time()
    rec = record(cm_api(client), wk.WatchConfig(max_unhealthy=100))
    assert rec.task is not None
    await asyncio.wait_for(asyncio.shield(rec.task), 200)
    assert isinstance(rec.exception, wk.WatcherUnhealthy)
    assert rec.ended_at is not None
    assert rec.ended_at - start == pytest.approx(100, abs=0.1)  # on time, not a day late
    assert isinstance(rec.exception.__cause__, wk.TooManyRequests)
    # Every wait honoured the (capped) wish and none ran past the threshold.
    errors = rec.of(wk.WatchError)
    assert all(e.error.retry_after == MAX_RETRY_AFTER for e in errors)
    # 60 s (the cap), then the 40 s left before the threshold, then WatcherUnhealthy.
    assert [round(e.retry_in, 3) for e in errors] == [60.0, 40.0]


@pytest.mark.looptime
async def test_with_no_threshold_a_huge_retry_after_waits_the_cap(
    srv: ApiServer, client: wk.Client
) -> None:
    srv.faults.throttle(retry_after=float("inf"), count=2)
    rec = record(cm_api(client), wk.WatchConfig(max_unhealthy=None))
    await rec.wait_for(lambda r: r.of(wk.InitDone), timeout=300)
    await rec.stop()
    assert [e.retry_in for e in rec.of(wk.WatchError)] == [MAX_RETRY_AFTER, MAX_RETRY_AFTER]


# -- 18. errors only the caller can fix end the watch --------------------------------------


def test_retriable_says_whether_anyone_but_the_caller_can_fix_it() -> None:
    assert not wk.BadRequest.retriable and not wk.Invalid.retriable
    for cls in (wk.ConnectionFailed, wk.Timeout, wk.ServerError, wk.TooManyRequests, wk.Gone,
                wk.Unauthorized, wk.Forbidden, wk.NotFound, wk.InvalidResponse, wk.ApiError):
        assert cls.retriable, cls
    assert not error_from_response(400, b"").retriable
    assert not error_from_response(422, b"").retriable
    assert error_from_response(503, b"").retriable


@pytest.mark.looptime
async def test_a_malformed_label_selector_ends_the_watch_at_once(
    srv: ApiServer, client: wk.Client
) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    seen: list[wk.Event] = []
    w = wk.watcher(cm_api(client), wk.WatchConfig(label_selector="app in (a", max_unhealthy=300))
    with pytest.raises(wk.BadRequest) as info:
        async with asyncio.timeout(60):
            async for ev in w:
                seen.append(ev)
    assert loop.time() - start < 1
    assert srv.count(is_list=True) == 1  # asked once, never retried
    assert "unable to parse requirement" in str(info.value)  # the server's own words
    assert not [ev for ev in seen if isinstance(ev, wk.WatchError)]  # no "already retrying"
    assert w.health.state is wk.WatchState.DEGRADED
    assert w.health.last_error is info.value


@pytest.mark.looptime
@pytest.mark.parametrize("streaming", [False, True])
async def test_an_invalid_watch_parameter_ends_the_watch_at_once(
    srv: ApiServer, client: wk.Client, streaming: bool
) -> None:
    srv.faults.error(422, message="spec.timeoutSeconds: Invalid value: must be positive",
                     watch=True)
    cfg = wk.WatchConfig(initial_list="streaming" if streaming else "paginated")
    with pytest.raises(wk.Invalid):
        async with asyncio.timeout(60):
            async for _ev in wk.watcher(cm_api(client), cfg):
                pass
    assert srv.count(is_watch=True) == 1


@pytest.mark.looptime
async def test_a_resource_version_refusal_still_relists(
    srv: ApiServer, client: wk.Client
) -> None:
    """400/422 about the watcher's own resourceVersion is its bookkeeping: relist, go on."""
    rec = record(cm_api(client), wk.WatchConfig(max_unhealthy=None))
    await rec.wait_for(lambda r: r.of(wk.InitDone))
    srv.faults.error(422, message='resourceVersion: Invalid value: "x"', watch=True, count=1)
    srv.reset_watches()
    await rec.wait_for(lambda r: len(r.of(wk.InitDone)) == 2, timeout=60)
    await rec.stop()
    assert rec.exception is None
    assert isinstance(rec.errors()[-1], wk.Invalid)


@pytest.mark.looptime
@pytest.mark.parametrize("code", [401, 403, 404, 410, 429, 500, 503, 504])
async def test_errors_someone_else_can_fix_are_still_retried(
    srv: ApiServer, client: wk.Client, code: int
) -> None:
    srv.faults.error(code, count=3)
    rec = record(cm_api(client), wk.WatchConfig(max_unhealthy=None))
    await rec.wait_for(lambda r: r.of(wk.InitDone), timeout=120)
    await rec.stop()
    assert rec.exception is None
    assert rec.errors() and all(e.code == code for e in rec.errors())


# -- 19. a 403 names every verb; list-allowed/watch-forbidden stays degraded ---------------


@pytest.mark.looptime
async def test_watch_forbidden_after_list_allowed_stays_degraded_on_the_backoff_schedule(
    srv: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="watchkeeper.watcher")
    loop = asyncio.get_running_loop()
    srv.add_user("operator")
    async with srv.client("operator") as client:
        states: list[wk.WatchState] = []
        health = wk.WatchHealth()
        health.listeners.append(lambda: states.append(health.state))
        rec = record(cm_api(client), wk.WatchConfig(max_unhealthy=None), health=health)
        await rec.wait_for(lambda r: len(r.errors()) >= 3, timeout=60)  # nothing allowed
        srv.rbac.grant("operator", verbs=["list"], resources=["configmaps"])
        granted = loop.time()
        await asyncio.sleep(120)
        # The LIST now works, the watch is forbidden: never "recovered", never healthy.
        assert srv.count(is_list=True, status=200) == 1
        assert wk.WatchState.HEALTHY not in states
        assert health.state is wk.WatchState.DEGRADED
        assert not [r for r in caplog.records if "recovered" in r.getMessage()]
        errors = rec.errors()
        watch_forbidden = [e for e in errors if "cannot watch" in e.message]
        assert watch_forbidden and all(isinstance(e, wk.Forbidden) for e in errors)
        text = str(watch_forbidden[0])
        assert 'verbs: ["list", "watch"]' in text
        assert 'needed: list and watch on configmaps in namespace "default"' in text
        # The backoff went on growing through the successful LIST (not reset to 0.8 s):
        # the n-th gap lies in [d, 2d), d = min(0.8 * 2^n, 30), across the grant.
        times = [t for t, ev in rec.events if isinstance(ev, wk.WatchError)]
        for n, (a, b) in enumerate(itertools.pairwise(times)):
            d = min(0.8 * 2**n, 30)
            assert d - 0.01 <= b - a < 2 * d + 0.01, (n, b - a, granted)
        assert len(times) <= 9  # 0, 0.8+, 2.4+, 5.6+, 12+, 24.8+, 50.4+, 80.4+, 110.4+
        # Granting watch too recovers, with one "recovered" line.
        srv.rbac.grant("operator", verbs=["watch"], resources=["configmaps"])
        await rec.wait_for(lambda r: r.watch.health.state is wk.WatchState.HEALTHY,
                           timeout=120)
        await rec.stop()
    assert len([r for r in caplog.records if "recovered" in r.getMessage()]) == 1


# -- 6. after faults clear, healthy again promptly; nothing stale keeps it degraded --------


async def _watch_open(srv: ApiServer) -> None:
    async with asyncio.timeout(10):
        while not srv.open_watches:
            await asyncio.sleep(0.01)


@pytest.mark.looptime
async def test_a_resumed_watch_on_a_quiet_resource_reports_healthy_soon(
    srv: ApiServer, client: wk.Client, caplog: pytest.LogCaptureFixture
) -> None:
    """A resumed watch that the server accepted and keeps open works: it must not stay
    degraded (with a frozen resourceVersion) for STABLE_AFTER when nothing changes."""
    caplog.set_level(logging.INFO, logger="watchkeeper.watcher")
    loop = asyncio.get_running_loop()
    rec = record(cm_api(client), wk.WatchConfig(max_unhealthy=None, bookmarks=False,
                                                server_timeout=300),
                 backoff=wk.ConstantBackoff(1.0))
    await rec.wait_for(lambda r: r.of(wk.InitDone))
    await _watch_open(srv)
    srv.faults.refuse(count_refused=True)
    srv.reset_watches()
    await asyncio.sleep(20)
    srv.faults.clear()
    cleared = loop.time()
    await rec.wait_for(lambda r: r.watch.health.state is wk.WatchState.HEALTHY, timeout=60)
    assert loop.time() - cleared <= 1.0 + 1.0 + 0.2  # the pending retry, then OPEN_GRACE
    await rec.stop()
    assert srv.count(is_list=True) == 1  # resumed, not relisted


@pytest.mark.looptime
async def test_a_refused_resume_is_not_reported_recovered_first(
    srv: ApiServer, client: wk.Client, caplog: pytest.LogCaptureFixture
) -> None:
    """410 on resume comes as an ERROR line just after the 200: no "recovered" before it."""
    caplog.set_level(logging.INFO, logger="watchkeeper.watcher")
    rec = record(cm_api(client), wk.WatchConfig(max_unhealthy=None))
    await rec.wait_for(lambda r: r.of(wk.InitDone))
    await _watch_open(srv)
    srv.faults.refuse(count_refused=True)
    srv.reset_watches()
    srv.create_object(configmap("meanwhile"))
    srv.compact()
    await asyncio.sleep(5)
    srv.faults.clear()
    await rec.wait_for(lambda r: "meanwhile" in r.state(), timeout=60)
    await rec.wait_for(lambda r: r.watch.health.state is wk.WatchState.HEALTHY, timeout=60)
    await rec.stop()
    messages = [r.getMessage() for r in caplog.records]
    assert any(isinstance(e, wk.Gone) for e in rec.errors())
    assert sum("recovered" in m for m in messages) == 1, messages
    assert "recovered" in messages[-1]


@pytest.mark.looptime
async def test_a_hung_watch_request_is_cut_off_at_the_open_timeout(
    srv: ApiServer, client: wk.Client
) -> None:
    """A watch request the server accepts but never answers (no status, no headers) is hung:
    without a bound only the idle timeout (5-10 min) ended it, degraded with a frozen
    resourceVersion all along, even with max_unhealthy=None."""
    loop = asyncio.get_running_loop()
    rec = record(cm_api(client), wk.WatchConfig(max_unhealthy=None))
    await rec.wait_for(lambda r: r.of(wk.InitDone))
    await _watch_open(srv)
    srv.faults.hang(watch=True, count=1)
    srv.reset_watches()
    start = loop.time()
    srv.create_object(configmap("after-the-hang"))
    await rec.wait_for(lambda r: "after-the-hang" in r.state(), timeout=600)
    await rec.wait_for(lambda r: r.watch.health.state is wk.WatchState.HEALTHY, timeout=60)
    await rec.stop()
    errors = [(t - start, ev.error) for t, ev in rec.events if isinstance(ev, wk.WatchError)]
    assert [type(e) for _, e in errors] == [wk.ConnectionFailed, wk.Timeout]
    # reset, a 0.8-1.6 s backoff, then the hung request is cut off after 60 s
    assert 60.8 - 0.01 <= errors[1][0] <= 61.6 + 0.01
    assert "no answer to the watch request in 60 s" in str(errors[1][1])
    assert loop.time() - start < 61.6 + 1.6 + 2  # then one more short backoff step
    assert srv.count(is_list=True) == 1  # resumed, not relisted
