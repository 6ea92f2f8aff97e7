"""The watcher against the simulator over real sockets: kindness, resume, relist, surfacing
errors and recovering from them, thresholds, dead connections. Timing tests run on virtual
event-loop time (looptime), so a 60 s outage takes milliseconds and the numbers are exact."""

from __future__ import annotations

import asyncio
import itertools
import random
import time

import pytest

import watchkeeper as wk
from watchkeeper_sim import ApiServer, crd_manifest

from .conftest import configmap, record

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def cm_api(client: wk.Client) -> wk.Api:
    return client.api("configmaps", namespace="default")


# -- kindness -----------------------------------------------------------------------------


@pytest.mark.looptime
async def test_refused_for_60s_default_backoff_makes_at_most_7_attempts(
    srv: ApiServer, client: wk.Client
) -> None:
    srv.faults.refuse(count_refused=True)  # accept-and-reset, so the server counts attempts
    rec = record(cm_api(client), wk.WatchConfig(max_unhealthy=None))
    await asyncio.sleep(60)
    await rec.stop()
    assert 5 <= srv.connection_attempts <= 7
    assert len(rec.errors()) == srv.connection_attempts
    assert srv.count() == 0  # no request ever got through
    # Each gap follows the schedule: the n-th delay lies in [d, 2d), d = min(0.8 * 2^n, 30).
    times = [t for t, ev in rec.events if isinstance(ev, wk.WatchError)]
    for n, (a, b) in enumerate(itertools.pairwise(times)):
        d = min(0.8 * 2**n, 30)
        assert d - 0.01 <= b - a < 2 * d + 0.01, (n, b - a)


@pytest.mark.looptime
async def test_a_users_constant_backoff_is_followed_exactly(
    srv: ApiServer, client: wk.Client
) -> None:
    srv.faults.refuse(count_refused=True)
    rec = record(cm_api(client), wk.WatchConfig(max_unhealthy=None),
                 backoff=wk.ConstantBackoff(5.0))
    await asyncio.sleep(59)
    await rec.stop()
    assert srv.connection_attempts == 12  # at 0, 5, 10 ... 55
    assert all(ev.retry_in == 5.0 for ev in rec.of(wk.WatchError))


@pytest.mark.looptime
async def test_listener_closed_outage_is_surfaced_on_the_schedule(
    srv: ApiServer, client: wk.Client
) -> None:
    srv.faults.refuse()  # the listening socket is really closed: connection refused
    rec = record(cm_api(client), wk.WatchConfig(max_unhealthy=None))
    await asyncio.sleep(60)
    await rec.stop()
    errors = rec.errors()
    assert 5 <= len(errors) <= 7
    assert all(isinstance(e, wk.ConnectionFailed) for e in errors)
    assert "cannot connect to 127.0.0.1" in str(errors[0])


@pytest.mark.realtime
async def test_real_time_outage_of_15s_is_not_a_hot_loop(
    srv: ApiServer, client: wk.Client
) -> None:
    srv.faults.refuse(count_refused=True)
    rec = record(cm_api(client), wk.WatchConfig(max_unhealthy=None))
    start = time.monotonic()
    await asyncio.sleep(15)
    await rec.stop()
    elapsed = time.monotonic() - start
    # 0, >=0.8, >=2.4, >=5.6, >=12.0 s: at most 5 attempts in 15 s of wall-clock time.
    assert 3 <= srv.connection_attempts <= 5, (srv.connection_attempts, elapsed)


@pytest.mark.looptime
async def test_retry_after_is_honoured_and_never_undercut(
    srv: ApiServer, client: wk.Client
) -> None:
    srv.faults.throttle(retry_after=7, count=3)
    rec = record(cm_api(client), wk.WatchConfig(max_unhealthy=None))
    await rec.wait_for(lambda r: r.of(wk.InitDone), timeout=60)
    await rec.stop()
    errors = rec.of(wk.WatchError)
    assert len(errors) == 3
    assert all(isinstance(e.error, wk.TooManyRequests) and e.retry_in >= 7 for e in errors)
    times = [t for t, ev in rec.events if isinstance(ev, wk.WatchError | wk.InitStart)]
    assert all(b - a >= 7 for a, b in itertools.pairwise(times) if b != a)


# -- resume, relist, nothing lost -----------------------------------------------------------


async def watch_open(srv: ApiServer) -> None:
    """Wait until the watch request is open server-side (InitDone comes just before it)."""
    async with asyncio.timeout(10):
        while not srv.open_watches:
            await asyncio.sleep(0.01)


async def outage(srv: ApiServer, seconds: float) -> None:
    await watch_open(srv)
    srv.faults.refuse(count_refused=True)
    srv.reset_watches()
    await asyncio.sleep(seconds)
    srv.faults.clear()


@pytest.mark.looptime
async def test_short_outage_resumes_without_relist_and_loses_nothing(
    srv: ApiServer, client: wk.Client
) -> None:
    api = cm_api(client)
    for i in range(3):
        await api.create(configmap(f"cm{i}", v="0"))
    rec = record(api, wk.WatchConfig(max_unhealthy=None))
    await rec.wait_for(lambda r: r.of(wk.InitDone))
    await watch_open(srv)
    srv.faults.refuse(count_refused=True)
    srv.reset_watches()
    srv.create_object(configmap("during", v="1"))
    cm1 = srv.get_object("v1", "ConfigMap", "cm1")
    cm1["data"] = {"v": "changed"}
    srv.update_object(cm1)
    srv.delete_object("v1", "ConfigMap", "cm2")
    await asyncio.sleep(20)
    srv.faults.clear()
    await rec.wait_for(lambda r: set(r.state()) == {"cm0", "cm1", "during"}, timeout=60)
    await rec.stop()
    assert srv.count(is_list=True) == 1  # only the initial list
    assert rec.state()["cm1"]["data"] == {"v": "changed"}
    assert [wk.meta.name(d.obj) for d in rec.of(wk.Delete)] == ["cm2"]
    assert rec.watch.health.state is wk.WatchState.HEALTHY


@pytest.mark.looptime
async def test_after_compaction_exactly_one_relist_and_deletions_are_reported(
    srv: ApiServer, client: wk.Client
) -> None:
    api = cm_api(client)
    for i in range(3):
        await api.create(configmap(f"cm{i}"))
    store, writer = wk.Store.new()
    w = wk.watcher(api, wk.WatchConfig(max_unhealthy=None))
    seen: list[wk.Event] = []

    async def consume() -> None:
        async for ev in wk.reflector(writer, w):
            seen.append(ev)

    task = asyncio.create_task(consume())
    await store.wait_until_ready(timeout=10)
    await watch_open(srv)
    srv.faults.refuse(count_refused=True)
    srv.reset_watches()
    srv.delete_object("v1", "ConfigMap", "cm0")
    srv.create_object(configmap("new"))
    srv.compact()
    await asyncio.sleep(5)
    srv.faults.clear()
    async with asyncio.timeout(60):
        while store.get("new", namespace="default") is None:
            await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert srv.count(is_list=True) == 2  # the initial list and exactly one relist
    gone = [e for e in w.health.errors if e == "Gone"]
    assert gone == ["Gone"]
    deleted = [wk.meta.name(ev.obj) for ev in seen if isinstance(ev, wk.Delete)]
    assert deleted == ["cm0"]  # vanished while disconnected, reported by the reflector
    assert sorted(wk.meta.name(o) for o in store) == ["cm1", "cm2", "new"]


@pytest.mark.looptime
async def test_a_quiet_resumed_watch_is_progress_once_it_stays_open(
    srv: ApiServer, client: wk.Client
) -> None:
    rec = record(cm_api(client), wk.WatchConfig(max_unhealthy=None, bookmarks=False,
                                                server_timeout=300))
    await rec.wait_for(lambda r: r.of(wk.InitDone))
    await outage(srv, 40)  # long enough for the backoff to reach several seconds
    assert max(e.retry_in for e in rec.of(wk.WatchError)) > 5
    # No event arrives, yet 10 s after reconnecting the watcher counts as healthy again...
    await rec.wait_for(lambda r: r.watch.health.state is wk.WatchState.HEALTHY, timeout=120)
    assert rec.watch.health.consecutive_failures == 0
    await asyncio.sleep(10)  # healthy a moment after it opened; progress once it stays open
    # ...and its backoff starts over: the next failure waits 0.8-1.6 s, not 30 s.
    n = len(rec.of(wk.WatchError))
    await watch_open(srv)
    srv.reset_watches()
    await rec.wait_for(lambda r: len(r.of(wk.WatchError)) > n)
    assert 0.8 <= rec.of(wk.WatchError)[n].retry_in < 1.6
    await rec.stop()
    assert srv.count(is_list=True) == 1


async def test_server_timeout_rewatches_at_once_from_the_last_version(
    srv: ApiServer, client: wk.Client
) -> None:
    api = cm_api(client)
    rec = record(api, wk.WatchConfig(server_timeout=1))
    await rec.wait_for(lambda r: r.of(wk.InitDone))
    await asyncio.sleep(2.5)
    await api.create(configmap("late"))
    await rec.wait_for(lambda r: "late" in r.state())
    await rec.stop()
    assert srv.count(is_list=True) == 1
    assert srv.count(is_watch=True) >= 3
    assert rec.errors() == []


async def test_breaking_out_of_the_loop_closes_the_stream_at_once(
    srv: ApiServer, client: wk.Client
) -> None:
    api = cm_api(client)
    async for ev in wk.watcher(api):
        if isinstance(ev, wk.InitDone):
            break
    await api.create(configmap("x"))  # the watch is open server-side only if not closed
    async with asyncio.timeout(5):
        while srv.open_watches:
            await asyncio.sleep(0.01)


# -- permanent-looking errors: surfaced, retried, recovered -------------------------------


@pytest.mark.looptime
async def test_forbidden_is_surfaced_with_the_rule_then_recovers_when_granted(
    srv: ApiServer,
) -> None:
    srv.add_user("operator")
    async with srv.client("operator") as client:
        rec = record(cm_api(client), wk.WatchConfig(max_unhealthy=None))
        await rec.wait_for(lambda r: len(r.errors()) >= 3, timeout=120)
        err = rec.errors()[0]
        assert isinstance(err, wk.Forbidden)
        text = str(err)
        assert 'User "operator" cannot list resource "configmaps"' in text
        assert 'namespace "default"' in text
        # One rule with every verb a watcher needs, not one verb per grant-and-retry round.
        assert 'verbs: ["list", "watch"]' in text
        assert 'needed: list and watch on configmaps in namespace "default"' in text
        assert rec.watch.health.state is wk.WatchState.DEGRADED
        srv.rbac.grant("operator", verbs=["get", "list", "watch"], resources=["configmaps"])
        srv.create_object(configmap("after-grant"))
        await rec.wait_for(lambda r: "after-grant" in r.state(), timeout=120)
        await rec.stop()
    assert rec.watch.health.state is wk.WatchState.HEALTHY


CRD = crd_manifest()


@pytest.mark.looptime
async def test_missing_crd_is_surfaced_then_recovers_once_installed(
    srv: ApiServer, client: wk.Client
) -> None:
    api = client.api("widgets.example.com", namespace="default")
    rec = record(api, wk.WatchConfig(max_unhealthy=None))
    await rec.wait_for(lambda r: len(r.errors()) >= 2, timeout=120)
    err = rec.errors()[0]
    assert isinstance(err, wk.NotFound)
    assert "is the CRD installed" in str(err)
    srv.create_object(CRD)
    srv.create_object({"apiVersion": "example.com/v1", "kind": "Widget",
                       "metadata": {"name": "w1", "namespace": "default"}})
    await rec.wait_for(lambda r: "w1" in r.state(), timeout=120)
    # Deleting the CRD ends the watch (DELETED for its objects), re-creating it recovers.
    srv.delete_object("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                      "widgets.example.com", namespace="")
    await rec.wait_for(lambda r: "w1" not in r.state() and len(r.errors()) >= 4, timeout=120)
    srv.create_object(CRD)
    srv.create_object({"apiVersion": "example.com/v1", "kind": "Widget",
                       "metadata": {"name": "w2", "namespace": "default"}})
    await rec.wait_for(lambda r: "w2" in r.state(), timeout=120)
    await rec.stop()


# -- the unhealthy threshold --------------------------------------------------------------


@pytest.mark.looptime
async def test_watcher_unhealthy_is_raised_at_the_threshold_not_before(
    srv: ApiServer, client: wk.Client
) -> None:
    loop = asyncio.get_running_loop()
    srv.faults.refuse(count_refused=True)
    start = loop.time()
    with pytest.raises(wk.WatcherUnhealthy) as info:
        async for _ev in wk.watcher(cm_api(client), wk.WatchConfig(max_unhealthy=100)):
            pass
    assert 100 <= loop.time() - start < 100.5
    assert isinstance(info.value.__cause__, wk.ConnectionFailed)
    assert "has not worked for 100 s" in str(info.value)


@pytest.mark.looptime
async def test_a_healthy_period_resets_the_unhealthy_clock(
    srv: ApiServer, client: wk.Client
) -> None:
    loop = asyncio.get_running_loop()
    rec = record(cm_api(client), wk.WatchConfig(max_unhealthy=100))
    await rec.wait_for(lambda r: r.of(wk.InitDone))
    await outage(srv, 70)  # shorter than the threshold
    await rec.wait_for(lambda r: r.watch.health.state is wk.WatchState.HEALTHY, timeout=60)
    await watch_open(srv)
    srv.faults.refuse(count_refused=True)
    srv.reset_watches()
    second_outage = loop.time()
    await asyncio.sleep(70)  # 140 s of outage in all, but never 100 s in a row
    assert rec.exception is None
    assert rec.task is not None
    await asyncio.wait_for(asyncio.shield(rec.task), 60)
    assert isinstance(rec.exception, wk.WatcherUnhealthy)
    assert rec.ended_at is not None
    assert rec.ended_at - second_outage == pytest.approx(100, abs=0.5)


@pytest.mark.looptime
async def test_backoff_giving_up_raises_watch_gave_up(srv: ApiServer, client: wk.Client) -> None:
    srv.faults.refuse(count_refused=True)
    with pytest.raises(wk.WatchGaveUp) as info:
        async for _ev in wk.watcher(cm_api(client), backoff=wk.ConstantBackoff(1, max_retries=3)):
            pass
    assert srv.connection_attempts == 4
    assert isinstance(info.value.__cause__, wk.ConnectionFailed)


# -- dead connections and bad data --------------------------------------------------------


@pytest.mark.looptime
async def test_a_silent_stream_is_detected_by_idle_timeout_and_resumed(
    srv: ApiServer, client: wk.Client
) -> None:
    api = cm_api(client)
    rec = record(api, wk.WatchConfig(idle_timeout=20, server_timeout=300, bookmarks=False,
                                     max_unhealthy=None))
    await rec.wait_for(lambda r: r.of(wk.InitDone))
    await watch_open(srv)
    stall = srv.faults.stall(watch=True)
    srv.create_object(configmap("unseen-until-resumed"))
    await rec.wait_for(lambda r: r.errors(), timeout=60)
    assert isinstance(rec.errors()[0], wk.Timeout)
    srv.faults.remove(stall)
    await rec.wait_for(lambda r: "unseen-until-resumed" in r.state(), timeout=60)
    await rec.stop()
    assert srv.count(is_list=True) == 1


@pytest.mark.looptime
async def test_a_hung_server_is_a_timeout_not_a_hang(srv: ApiServer, client: wk.Client) -> None:
    hang = srv.faults.hang()
    rec = record(cm_api(client), wk.WatchConfig(max_unhealthy=None))
    await rec.wait_for(lambda r: r.errors(), timeout=200)
    srv.faults.remove(hang)
    await rec.wait_for(lambda r: r.of(wk.InitDone), timeout=200)
    await rec.stop()
    err = rec.errors()[0]
    assert isinstance(err, wk.Timeout), err
    first_error_at = next(t for t, ev in rec.events if isinstance(ev, wk.WatchError))
    assert first_error_at == pytest.approx(60, abs=1)  # the request timeout, not forever


async def test_garbage_lines_are_survived_without_losing_an_event(
    srv: ApiServer, client: wk.Client
) -> None:
    api = cm_api(client)
    rec = record(api, wk.WatchConfig(max_unhealthy=None), backoff=wk.ConstantBackoff(0.05))
    await rec.wait_for(lambda r: r.of(wk.InitDone))
    srv.faults.garbage(count=1, watch=True)
    await api.create(configmap("a"))
    await api.create(configmap("b"))
    await rec.wait_for(lambda r: {"a", "b"} <= set(r.state()))
    await rec.stop()
    assert any(isinstance(e, wk.InvalidResponse) for e in rec.errors())
    assert srv.count(is_list=True) == 1


async def test_truncated_stream_is_an_invalid_response_and_resumes(
    srv: ApiServer, client: wk.Client
) -> None:
    api = cm_api(client)
    rec = record(api, wk.WatchConfig(max_unhealthy=None), backoff=wk.ConstantBackoff(0.05))
    await rec.wait_for(lambda r: r.of(wk.InitDone))
    srv.faults.truncate(count=1, watch=True)
    await api.create(configmap("t1"))
    await api.create(configmap("t2"))
    await rec.wait_for(lambda r: {"t1", "t2"} <= set(r.state()))
    await rec.stop()
    assert rec.errors(), "the cut stream must be surfaced"


# -- initial list strategies --------------------------------------------------------------


async def test_streaming_initial_list(srv: ApiServer, client: wk.Client) -> None:
    api = cm_api(client)
    for i in range(5):
        await api.create(configmap(f"s{i}"))
    rec = record(api, wk.WatchConfig(initial_list="streaming"))
    await rec.wait_for(lambda r: r.of(wk.InitDone))
    await api.create(configmap("live"))
    await rec.wait_for(lambda r: "live" in r.state())
    await rec.stop()
    assert len(rec.of(wk.InitApply)) == 5
    assert srv.count(is_list=True) == 0


async def test_streaming_falls_back_to_paginated_list_when_unsupported() -> None:
    async with ApiServer(watch_list=False) as srv, srv.client() as client:
        api = cm_api(client)
        await api.create(configmap("x"))
        rec = record(api, wk.WatchConfig(initial_list="streaming"))
        await rec.wait_for(lambda r: r.of(wk.InitDone))
        await rec.stop()
        assert srv.count(is_list=True) == 1
        assert rec.errors() == []
        # The refused streaming attempt is neither announced nor counted as a list.
        assert len(rec.of(wk.InitStart)) == 1
        assert rec.watch.health.relists == 1


async def test_paginated_list_uses_page_size(srv: ApiServer, client: wk.Client) -> None:
    api = cm_api(client)
    for i in range(7):
        await api.create(configmap(f"p{i}"))
    rec = record(api, wk.WatchConfig(page_size=3))
    await rec.wait_for(lambda r: r.of(wk.InitDone))
    await rec.stop()
    assert srv.count(is_list=True) == 3
    assert len(rec.of(wk.InitApply)) == 7


def test_watch_config_rejects_nonsense_with_clear_errors() -> None:
    with pytest.raises(ValueError, match="page_size"):
        wk.WatchConfig(page_size=0)
    with pytest.raises(ValueError, match="max_unhealthy must be > 0"):
        wk.WatchConfig(max_unhealthy=-1)
    with pytest.raises(ValueError, match="initial_list"):
        wk.WatchConfig(initial_list="bulk")  # type: ignore[arg-type]
    cfg = wk.WatchConfig(label_selector="a=b")
    assert "label_selector='a=b'" in repr(cfg)
    assert 300 <= cfg.watch_timeout(random.Random(1)) <= 600


async def test_metadata_only_watch_caches_no_payload(srv: ApiServer, client: wk.Client) -> None:
    api = cm_api(client)
    await api.create(configmap("big", blob="x" * 10_000))
    store, writer = wk.Store.new()
    w = wk.watcher(api, wk.WatchConfig(metadata_only=True))

    async def consume() -> None:
        async for _ev in wk.reflector(writer, w):
            pass

    task = asyncio.create_task(consume())
    await store.wait_until_ready(timeout=10)
    await api.create(configmap("later", blob="y" * 10_000))
    async with asyncio.timeout(10):
        while store.get("later", namespace="default") is None:
            await asyncio.sleep(0.02)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    for name in ("big", "later"):
        obj = store.get(name, namespace="default")
        assert obj is not None and obj["kind"] == "PartialObjectMetadata"
        assert "data" not in obj and obj["metadata"]["name"] == name


async def test_starting_from_a_known_resource_version_skips_the_list(
    srv: ApiServer, client: wk.Client
) -> None:
    api = cm_api(client)
    await api.create(configmap("old"))
    rv = (await api.list()).resource_version
    await api.create(configmap("new"))
    rec = record(api, resource_version=rv)
    await rec.wait_for(lambda r: r.of(wk.Apply))
    await rec.stop()
    assert [wk.meta.name(e.obj) for e in rec.of(wk.Apply)] == ["new"]
    assert not rec.of(wk.InitStart)
    assert srv.count(is_list=True) == 1  # only the test's own list


async def test_a_known_version_that_is_too_old_falls_back_to_a_list(
    srv: ApiServer, client: wk.Client
) -> None:
    api = cm_api(client)
    await api.create(configmap("a"))
    rv = (await api.list()).resource_version
    await api.create(configmap("b"))
    srv.compact()
    rec = record(api, resource_version=rv)
    await rec.wait_for(lambda r: r.of(wk.InitDone))
    await rec.stop()
    assert isinstance(rec.errors()[0], wk.Gone)
    assert {wk.meta.name(e.obj) for e in rec.of(wk.InitApply)} == {"a", "b"}


@pytest.mark.looptime
async def test_no_tight_loop_when_the_threshold_is_a_hair_away(
    srv: ApiServer, client: wk.Client
) -> None:
    """Delays that leave a sub-millisecond remainder before max_unhealthy must not turn into
    near-zero sleeps (this was once a hot loop of 166,000 attempts)."""
    srv.faults.refuse(count_refused=True)
    await asyncio.sleep(1.1)  # start at 1.1 s: in floats, 4.1 - 1.1 = 2.9999999999999996
    with pytest.raises(wk.WatcherUnhealthy):
        async for _ev in wk.watcher(cm_api(client), wk.WatchConfig(max_unhealthy=3),
                                    backoff=wk.ConstantBackoff(1.0, max_retries=50)):
            pass  # a hot loop would exhaust the 50 retries: WatchGaveUp, a failure, not a hang
    assert srv.connection_attempts <= 5


async def test_strip_managed_fields_keeps_them_out_of_the_cache(
    srv: ApiServer, client: wk.Client
) -> None:
    api = cm_api(client)
    await api.create(configmap("listed"))
    rec = record(api, wk.WatchConfig(strip_managed_fields=True))
    await rec.wait_for(lambda r: r.of(wk.InitDone))
    await api.create(configmap("watched"))
    await rec.wait_for(lambda r: "watched" in r.state())
    await rec.stop()
    assert (await api.get("listed"))["metadata"].get("managedFields")  # the server has them
    for obj in rec.state().values():
        assert "managedFields" not in obj["metadata"]
        assert obj["metadata"]["resourceVersion"]
