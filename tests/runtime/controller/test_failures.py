"""Failures a user can see (issue 23 item 6): a failing reconcile is ONE Warning Event on its
object whose series counts the repeats (what `kubectl describe` shows as "x3"), a
``PermanentError`` is not retried until the object changes, the retry log line says what
really happens, and the opt-in Ready condition follows the reconcile's result (item 5)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper_sim import ApiServer

NS = "default"


def cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}}


def config(**kw: Any) -> wk.ControllerConfig:
    return wk.ControllerConfig(handle_signals=False, **kw)


async def eventually(check: Callable[[], bool], timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)


async def events(client: wk.Client) -> list[dict[str, Any]]:
    return (await client.api("events.k8s.io/v1/events", namespace=NS).list()).items


@pytest.fixture
async def srv() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        yield server


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.mark.looptime
async def test_repeated_failures_are_one_warning_event_with_a_count(srv: ApiServer) -> None:
    srv.create_object(cm("bad"))
    srv.create_object(cm("good"))
    attempts: list[str] = []

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        attempts.append(wk.meta.name(obj))
        if wk.meta.name(obj) == "bad":
            raise RuntimeError("quota exceeded")
        return wk.Action.await_change()

    async with srv.client() as client:
        recorder = wk.Recorder(client, "example.com/widgets")
        ctrl = wk.Controller(client.api("configmaps", namespace=NS), config(),
                             recorder=recorder)
        task = asyncio.create_task(ctrl.run(reconcile))
        await eventually(lambda: attempts.count("bad") >= 4)  # 0, 1, 3, 7 s
        await asyncio.sleep(0.5)
        await stop(task)
        listed = await events(client)
    # one Event for four failures, not four; none for the object that reconciled
    (event,) = listed
    assert event["regarding"]["name"] == "bad" and event["regarding"]["kind"] == "ConfigMap"
    assert (event["type"], event["reason"], event["note"], event["action"]) == (
        "Warning", "ReconcileFailed", "RuntimeError: quota exceeded", "Reconcile")
    assert event["reportingController"] == "example.com/widgets"
    assert event["series"]["count"] == attempts.count("bad") >= 4


@pytest.mark.looptime
async def test_a_permanent_error_waits_for_a_change(
    srv: ApiServer, caplog: pytest.LogCaptureFixture,
) -> None:
    srv.create_object(cm("invalid"))
    loop = asyncio.get_running_loop()
    attempts: list[float] = []

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        attempts.append(loop.time())
        raise wk.PermanentError("spec.size must be positive")

    caplog.set_level(logging.WARNING, logger="watchkeeper.controller")
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        ctrl = wk.Controller(api, config(), recorder=wk.Recorder(client, "ctl"))
        task = asyncio.create_task(ctrl.run(reconcile))
        await eventually(lambda: len(attempts) >= 1)
        await asyncio.sleep(600)  # ten minutes: a retry would have come after 1 s
        assert len(attempts) == 1
        changed = loop.time()
        await api.patch("invalid", {"data": {"size": "3"}})  # the user edits it
        await eventually(lambda: len(attempts) >= 2, timeout=5)
        assert attempts[1] - changed < 1
        await asyncio.sleep(600)
        await stop(task)
        listed = await events(client)
    assert len(attempts) == 2
    (event,) = listed
    assert (event["type"], event["reason"], event["note"]) == (
        "Warning", "ReconcileFailedPermanently", "PermanentError: spec.size must be positive")
    assert event["series"]["count"] == 2
    lines = [r.getMessage() for r in caplog.records if "failed permanently" in r.getMessage()]
    assert lines == ["reconcile of default/invalid failed permanently (no retry until it "
                     "changes): spec.size must be positive"] * 2
    assert ctrl.results["error"] == 2


@pytest.mark.looptime
async def test_the_retry_log_says_a_change_reconciles_at_once(
    srv: ApiServer, caplog: pytest.LogCaptureFixture,
) -> None:
    """During a backoff, a change to the object is reconciled at once (the change may be
    the fix, as in controller-runtime and kube-rs); the log line says so instead of
    promising the retry delay alone (before: "retry in 8.0 s", then a reconcile ms later)."""
    srv.create_object(cm("flaky"))
    loop = asyncio.get_running_loop()
    attempts: list[float] = []

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        attempts.append(loop.time())
        raise RuntimeError("not yet")

    caplog.set_level(logging.WARNING, logger="watchkeeper.controller")
    async with srv.client() as client:
        api = client.api("configmaps", namespace=NS)
        task = asyncio.create_task(wk.Controller(api, config()).run(reconcile))
        await eventually(lambda: len(attempts) >= 4)  # now backing off 8 s
        await asyncio.sleep(1)
        changed = loop.time()
        await api.patch("flaky", {"data": {"fixed": "maybe"}})
        await eventually(lambda: len(attempts) >= 5, timeout=5)
        await stop(task)
    assert attempts[4] - changed < 0.5  # not the 8 s the backoff had
    messages = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert messages[3].startswith("reconcile of default/flaky failed (retry in ")
    assert all(m.endswith(" s, or at its next change): not yet") for m in messages)


@pytest.mark.looptime
async def test_a_success_is_logged_at_debug_with_its_duration(
    srv: ApiServer, caplog: pytest.LogCaptureFixture,
) -> None:
    srv.create_object(cm("slow"))
    done: list[str] = []

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        await asyncio.sleep(2.5)
        done.append(wk.meta.name(obj))
        return wk.Action.requeue(60)

    caplog.set_level(logging.DEBUG, logger="watchkeeper.controller")
    async with srv.client() as client:
        task = asyncio.create_task(
            wk.Controller(client.api("configmaps", namespace=NS), config()).run(reconcile))
        await eventually(lambda: len(done) >= 1)
        await asyncio.sleep(0.1)
        await stop(task)
    (line,) = [r for r in caplog.records if r.getMessage().startswith("reconciled ")]
    assert line.levelno == logging.DEBUG
    assert line.getMessage() == "reconciled default/slow in 2.500 s (requeue in 60 s)"


# -- the Ready condition, derived from the reconcile's result (opt-in) ----------------------


class GizmoSpec(wk.Schema):
    size: int = 1


class GizmoStatus(wk.Schema, kw_only=True):
    conditions: wk.Conditions = []


@wk.custom_resource(group="ops.example.com", version="v1")
class Gizmo(wk.CustomResource):
    spec: GizmoSpec
    status: GizmoStatus | None = None


@pytest.mark.looptime
async def test_the_ready_condition_follows_the_result_and_is_written_only_on_change(
    srv: ApiServer,
) -> None:
    attempts: list[int] = []
    broken = {"on": False}

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        attempts.append(obj["metadata"]["generation"])
        if obj["spec"]["size"] < 0:
            raise wk.PermanentError("spec.size must be >= 0")
        if broken["on"]:
            raise RuntimeError("backend down")
        return wk.Action.requeue(30)

    async with srv.client() as client:
        await wk.install_crds(client, Gizmo)
        api = client.api("gizmos.ops.example.com", namespace=NS)
        await api.create({"apiVersion": "ops.example.com/v1", "kind": "Gizmo",
                          "metadata": {"name": "g"}, "spec": {"size": 1}})

        async def ready() -> dict[str, Any]:
            got = wk.conditions.find_condition(await api.get("g"), "Ready")
            return dict(got or {})

        ctrl = wk.Controller(api, config(ready_condition=True))
        task = asyncio.create_task(ctrl.run(reconcile))
        await eventually(lambda: len(attempts) >= 1)
        await asyncio.sleep(1)
        first = await ready()
        assert {k: first[k] for k in ("status", "reason", "message", "observedGeneration")} == {
            "status": "True", "reason": "Reconciled", "message": "", "observedGeneration": 1}
        rv = wk.meta.resource_version(await api.get("g"))
        await asyncio.sleep(100)  # requeued reconciles, all succeeding: no more writes
        assert len(attempts) >= 4
        assert wk.meta.resource_version(await api.get("g")) == rv

        broken["on"] = True
        await api.patch("g", {"spec": {"size": 2}})
        await eventually(lambda: len(attempts) >= 7)  # failing, backing off
        failed = await ready()
        assert {k: failed[k] for k in ("status", "reason", "message", "observedGeneration")} == {
            "status": "False", "reason": "ReconcileFailed",
            "message": "RuntimeError: backend down", "observedGeneration": 2}
        rv = wk.meta.resource_version(await api.get("g"))
        n = len(attempts)
        await eventually(lambda: len(attempts) >= n + 2)  # the same failure: no write
        assert wk.meta.resource_version(await api.get("g")) == rv

        await api.patch("g", {"spec": {"size": -1}})
        await eventually(lambda: attempts[-1] == 3)
        await asyncio.sleep(1)
        permanent = await ready()
        assert (permanent["status"], permanent["reason"], permanent["message"]) == (
            "False", "ReconcileFailedPermanently", "PermanentError: spec.size must be >= 0")
        assert permanent["lastTransitionTime"] == failed["lastTransitionTime"]  # still False
        await stop(task)


@pytest.mark.looptime
async def test_an_opt_in_info_summary_counts_the_reconciles(
    srv: ApiServer, caplog: pytest.LogCaptureFixture,
) -> None:
    for name in ("a", "b", "bad"):
        srv.create_object(cm(name))
    attempts: list[str] = []

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        attempts.append(wk.meta.name(obj))
        if wk.meta.name(obj) == "bad":
            raise RuntimeError("no")
        return wk.Action.requeue(25) if wk.meta.name(obj) == "a" else wk.Action.await_change()

    caplog.set_level(logging.INFO, logger="watchkeeper.controller")
    async with srv.client() as client:
        ctrl = wk.Controller(client.api("configmaps", namespace=NS),
                             config(summary_interval=60))
        task = asyncio.create_task(ctrl.run(reconcile))
        await asyncio.sleep(60 * 4 + 1)
        await stop(task)
    summaries = [r.getMessage() for r in caplog.records
                 if r.getMessage().startswith("controller configmaps:")]
    assert all(r.levelno == logging.INFO for r in caplog.records
               if r.getMessage().startswith("controller configmaps:"))
    # 0-60 s: a, b reconciled and a requeued at 25 and 50; bad failed at 0, 1, 3, 7, 15, 31
    assert summaries[0] == ("controller configmaps: 1 reconciled, 3 requeued, 6 failed in the "
                            "last 60 s; 1 objects failing, 2 requests pending")
    assert len(summaries) == 4
    assert not any("reconciled " in r.getMessage() for r in caplog.records
                   if r.levelno < logging.INFO)  # DEBUG lines off at INFO


@pytest.mark.realtime  # a hot loop would starve virtual time: real time fails in seconds
async def test_the_ready_write_does_not_reconcile_again(srv: ApiServer) -> None:
    """The controller's own status write is not a change to reconcile: a success's Ready
    True costs no second reconcile, and an error whose text changes each time (a request
    id) keeps to its backoff instead of write, reconcile at once, write... (before: a
    reconcile after every write, a hot loop on the API server)."""
    loop = asyncio.get_running_loop()
    attempts: dict[str, list[float]] = {"ok": [], "flaky": []}

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        name = wk.meta.name(obj)
        attempts[name].append(loop.time())
        if name == "flaky":
            raise RuntimeError(f"request {len(attempts[name])} failed")
        return wk.Action.await_change()

    async with srv.client() as client:
        await wk.install_crds(client, Gizmo)
        api = client.api("gizmos.ops.example.com", namespace=NS)
        for name in attempts:
            await api.create({"apiVersion": "ops.example.com/v1", "kind": "Gizmo",
                              "metadata": {"name": name}, "spec": {"size": 1}})
        task = asyncio.create_task(wk.Controller(api, config(ready_condition=True))
                                   .run(reconcile))
        await asyncio.sleep(5)
        flaky = wk.conditions.find_condition(await api.get("flaky"), "Ready")
        ok = await api.get("ok")
        await stop(task)
    assert wk.conditions.is_true(ok, "Ready")
    assert len(attempts["ok"]) == 1
    # 0, 1, 3 s (+ jitter; the next at 7 s): the backoff, each failure's message written
    assert len(attempts["flaky"]) == 3, attempts["flaky"]
    assert flaky["message"] == "RuntimeError: request 3 failed"


@pytest.mark.looptime
async def test_a_recorder_that_breaks_does_not_take_the_worker_down(
    srv: ApiServer, caplog: pytest.LogCaptureFixture,
) -> None:
    """A Recorder subclass whose publish raises (a bug, not an API error): logged, and the
    reconcile's own result stands (before: the worker crashed and was restarted)."""

    class Broken(wk.Recorder):
        async def publish(self, regarding: dict[str, Any], **kw: Any) -> None:
            raise KeyError("bug in my recorder")

    srv.create_object(cm("bad"))
    attempts: list[str] = []

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        attempts.append(wk.meta.name(obj))
        raise RuntimeError("no")

    caplog.set_level(logging.ERROR, logger="watchkeeper.controller")
    async with srv.client() as client:
        ctrl = wk.Controller(client.api("configmaps", namespace=NS), config(concurrency=1),
                             recorder=Broken(client, "ctl"))
        task = asyncio.create_task(ctrl.run(reconcile))
        await eventually(lambda: len(attempts) >= 3)
        assert ctrl.supervisor is not None
        workers = [t for t in ctrl.supervisor.statuses() if t.name == "worker 1"]
        await stop(task)
    assert [t.restarts for t in workers] == [0]
    assert ctrl.results["error"] == 3
    assert any("could not record the outcome of the reconcile of default/bad: KeyError"
               in r.getMessage() for r in caplog.records)
