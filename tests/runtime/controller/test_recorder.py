"""``Recorder`` against the simulator: the Event it posts (events.k8s.io/v1, every field),
and its de-duplication like client-go's ``tools/events`` recorder: the same (object, type,
reason, action, note) again bumps ``series.count`` (2 on the second occurrence) instead
of posting another Event; an Event gone from the server starts afresh; failures are
logged, never raised."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper_sim import ApiServer

NS = "default"
MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


@pytest.fixture
async def world() -> AsyncIterator[tuple[ApiServer, wk.Client]]:
    async with ApiServer() as srv, srv.client() as client:
        yield srv, client


async def events(client: wk.Client, namespace: str = NS) -> list[dict[str, Any]]:
    return (await client.api("events.k8s.io/v1/events", namespace=namespace).list()).items


def configmap(srv: ApiServer, name: str = "target") -> dict[str, Any]:
    return srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": name, "namespace": NS}})


async def test_publish_posts_an_event_with_every_field(
    world: tuple[ApiServer, wk.Client],
) -> None:
    srv, client = world
    target = configmap(srv)
    recorder = wk.Recorder(client, "widget-controller")
    assert re.fullmatch(r"widget-controller-[0-9a-f]{8}", recorder.instance)
    await recorder.publish(target, reason="Reconciled", note="all good")
    (listed,) = await events(client)
    event = await client.api("events.k8s.io/v1/events", namespace=NS).get(
        wk.meta.name(listed))  # as a GET has it (list items carry no apiVersion and kind)
    assert re.fullmatch(r"target\.[0-9a-f]{16}", event["metadata"]["name"])
    assert event["metadata"]["namespace"] == NS
    assert MICRO_TIME.fullmatch(event["eventTime"])
    assert {k: event[k] for k in ("apiVersion", "kind", "reportingController",
                                  "reportingInstance", "action", "reason", "note", "type")} == {
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "reportingController": "widget-controller", "reportingInstance": recorder.instance,
        "action": "Reconcile", "reason": "Reconciled", "note": "all good", "type": "Normal"}
    assert event["regarding"] == {
        "apiVersion": "v1", "kind": "ConfigMap", "name": "target", "namespace": NS,
        "uid": target["metadata"]["uid"],
        "resourceVersion": target["metadata"]["resourceVersion"]}
    assert "series" not in event  # a single occurrence has no series (as client-go)


async def test_the_same_event_again_counts_in_its_series(
    world: tuple[ApiServer, wk.Client],
) -> None:
    srv, client = world
    target = configmap(srv)
    recorder = wk.Recorder(client, "ctl", instance="ctl-1")
    for _ in range(3):
        await recorder.publish(target, reason="Failed", note="no quota", type="Warning")
    (event,) = await events(client)
    assert event["series"]["count"] == 3
    assert MICRO_TIME.fullmatch(event["series"]["lastObservedTime"])
    assert event["type"] == "Warning" and event["reportingInstance"] == "ctl-1"
    # any difference in type, reason, action or note, or another object: a new Event
    await recorder.publish(target, reason="Failed", note="no quota, again", type="Warning")
    await recorder.publish(target, reason="Failed", note="no quota", type="Normal")
    await recorder.publish(target, reason="Other", note="no quota", type="Warning")
    await recorder.publish(target, reason="Failed", note="no quota", type="Warning",
                           action="Delete")
    await recorder.publish(configmap(srv, "other"), reason="Failed", note="no quota",
                           type="Warning")
    listed = await events(client)
    assert len(listed) == 6
    assert sorted((e.get("series") or {}).get("count", 1) for e in listed) == [1] * 5 + [3]
    # another recorder (another process) does not know this one's series
    await wk.Recorder(client, "ctl").publish(target, reason="Failed", note="no quota",
                                             type="Warning")
    assert len(await events(client)) == 7


async def test_an_event_gone_from_the_server_starts_a_new_one(
    world: tuple[ApiServer, wk.Client],
) -> None:
    srv, client = world
    target = configmap(srv)
    recorder = wk.Recorder(client, "ctl")
    await recorder.publish(target, reason="Reconciled")
    await recorder.publish(target, reason="Reconciled")
    (first,) = await events(client)
    assert first["series"]["count"] == 2
    api = client.api("events.k8s.io/v1/events", namespace=NS)
    await api.delete(wk.meta.name(first))  # expired (kube-apiserver's event TTL)
    await recorder.publish(target, reason="Reconciled")
    (second,) = await events(client)
    assert wk.meta.name(second) != wk.meta.name(first) and "series" not in second
    await recorder.publish(target, reason="Reconciled")  # the new one's series goes on
    (second,) = await events(client)
    assert second["series"]["count"] == 2


async def test_a_cluster_scoped_object_and_a_long_note(
    world: tuple[ApiServer, wk.Client],
) -> None:
    srv, client = world
    node_ns = srv.create_object({"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": "team-a"}})
    await wk.Recorder(client, "ctl").publish(node_ns, reason="Seen", note="x" * 5000)
    (event,) = await events(client, "default")  # cluster-scoped: the default namespace
    assert event["regarding"]["name"] == "team-a" and event["regarding"]["namespace"] is None
    assert event["note"] == "x" * 1024  # the API's limit


async def test_failures_are_logged_not_raised(
    world: tuple[ApiServer, wk.Client], caplog: pytest.LogCaptureFixture,
) -> None:
    srv, client = world
    target = configmap(srv)
    recorder = wk.Recorder(client, "ctl")
    srv.faults.error(403, "events are forbidden", method="POST",
                     path_prefix="/apis/events.k8s.io/")
    caplog.set_level(logging.WARNING, logger="watchkeeper.recorder")
    await recorder.publish(target, reason="Reconciled")  # does not raise
    assert await events(client) == []
    (line,) = [r.getMessage() for r in caplog.records]
    assert "could not record event Reconciled for default/target" in line
    assert "403" in line or "Forbidden" in line
    srv.faults.clear()
    await recorder.publish(target, reason="Reconciled")  # not counted as seen: posted now
    (event,) = await events(client)
    assert "series" not in event


async def test_an_idle_series_is_finished_and_memory_is_bounded(
    world: tuple[ApiServer, wk.Client],
) -> None:
    """As client-go: a series idle for 6 min is finished (the next occurrence is a new
    Event), and at most ``max_series`` are remembered (before: every key for ever)."""
    srv, client = world
    target = configmap(srv)
    now = [1000.0]
    recorder = wk.Recorder(client, "ctl", clock=lambda: now[0])
    await recorder.publish(target, reason="Failed", type="Warning")
    now[0] += 300
    await recorder.publish(target, reason="Failed", type="Warning")  # within 6 min: counted
    assert [e["series"]["count"] for e in await events(client)] == [2]
    now[0] += 361
    await recorder.publish(target, reason="Failed", type="Warning")  # idle 6 min: a new one
    counts = sorted((e.get("series") or {}).get("count", 1) for e in await events(client))
    assert counts == [1, 2]
    recorder.max_series = 2
    for reason in ("A", "B", "C"):
        await recorder.publish(target, reason=reason)
    assert len(recorder._seen) == 2  # "Failed" and "A" forgotten, least recently used
    await recorder.publish(target, reason="C")
    await recorder.publish(target, reason="A")  # forgotten: a new Event, not a count
    by_reason = sorted((e["reason"], (e.get("series") or {}).get("count", 1))
                       for e in await events(client))
    assert by_reason == [("A", 1), ("A", 1), ("B", 1), ("C", 2),
                         ("Failed", 1), ("Failed", 2)]
