"""``wk.conditions`` (issue 23 item 5): metav1.Condition's rules on a dict object and on a
typed custom resource: one entry per type, lastTransitionTime moved only when the status
changes, observedGeneration from metadata.generation, "changed?" answered so a caller
writes only then."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
import pytest

import watchkeeper as wk

T0 = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(minutes=5)


def obj(generation: int = 3) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Gizmo",
            "metadata": {"name": "g", "generation": generation}}


class Status(wk.Schema, kw_only=True):
    phase: str = ""
    conditions: wk.Conditions = []


class Spec(wk.Schema):
    size: int = 1


@wk.custom_resource(group="example.com", version="v1")
class Gizmo(wk.CustomResource):
    spec: Spec
    status: Status = msgspec.field(default_factory=Status)


def test_a_dict_object_gets_a_condition_with_every_field() -> None:
    o = obj()
    assert wk.conditions.find_condition(o, "Ready") is None
    assert not wk.conditions.is_true(o, "Ready")
    assert wk.conditions.set_condition(o, "Ready", "True", "Reconciled", now=T0) is True
    assert o["status"]["conditions"] == [{
        "type": "Ready", "status": "True", "observedGeneration": 3,
        "lastTransitionTime": "2026-01-01T12:00:00Z", "reason": "Reconciled", "message": ""}]
    assert wk.conditions.is_true(o, "Ready")


def test_the_transition_time_moves_only_when_the_status_changes() -> None:
    o = obj()
    wk.conditions.set_condition(o, "Ready", "False", "Pending", "waiting", now=T0)
    # the same again: nothing changed, so nothing to write
    assert wk.conditions.set_condition(o, "Ready", "False", "Pending", "waiting", now=T1) is False
    # another reason or message, same status: changed, but no transition
    assert wk.conditions.set_condition(o, "Ready", "False", "Blocked", "quota", now=T1) is True
    (cond,) = o["status"]["conditions"]
    assert (cond["reason"], cond["lastTransitionTime"]) == ("Blocked", "2026-01-01T12:00:00Z")
    # a new generation is a change too
    o["metadata"]["generation"] = 4
    assert wk.conditions.set_condition(o, "Ready", "False", "Blocked", "quota", now=T1) is True
    assert o["status"]["conditions"][0]["observedGeneration"] == 4
    # the status flips: the transition time moves
    assert wk.conditions.set_condition(o, "Ready", "True", "Reconciled", now=T1) is True
    assert o["status"]["conditions"][0]["lastTransitionTime"] == "2026-01-01T12:05:00Z"


def test_other_conditions_are_kept_in_place() -> None:
    o = obj()
    wk.conditions.set_condition(o, "Available", "True", "Up", now=T0)
    wk.conditions.set_condition(o, "Ready", "Unknown", "Checking", now=T0)
    wk.conditions.set_condition(o, "Available", "False", "Down", now=T1)
    assert [c["type"] for c in o["status"]["conditions"]] == ["Available", "Ready"]
    assert not wk.conditions.is_true(o, "Ready")  # Unknown is not True


def test_a_typed_resource_gets_wk_condition_values() -> None:
    g = Gizmo(metadata={"name": "g", "generation": 2}, spec=Spec())
    assert wk.conditions.set_condition(g, "Ready", "True", "Reconciled", "ok", now=T0)
    (cond,) = g.status.conditions
    assert cond == wk.Condition(type="Ready", status="True", last_transition_time=T0,
                                reason="Reconciled", message="ok", observed_generation=2)
    assert not wk.conditions.set_condition(g, "Ready", "True", "Reconciled", "ok", now=T1)
    assert wk.conditions.set_condition(g, "Ready", "True", "Reconciled", "still ok", now=T1)
    assert g.status.conditions[0].last_transition_time == T0
    assert wk.conditions.set_condition(g, "Ready", "False", "Broken", now=T1)
    assert g.status.conditions[0].last_transition_time == T1
    assert not wk.conditions.is_true(g, "Ready")
    assert wk.conditions.find_condition(g, "Ready").reason == "Broken"
    # it encodes as the API wants it
    encoded = msgspec.to_builtins(g)["status"]["conditions"][0]
    assert encoded["lastTransitionTime"] == "2026-01-01T12:05:00Z"
    assert encoded["observedGeneration"] == 2


def test_a_typed_resource_read_from_the_server_gets_its_generation() -> None:
    """An object as a TypedApi or TypedController gives it: metadata is a wk.ObjectMeta,
    not a dict (before: observedGeneration was left out of every typed condition)."""
    g = wk.from_dict(Gizmo, {**obj(generation=7), "spec": {}})
    assert isinstance(g.metadata, wk.ObjectMeta)
    assert wk.conditions.set_condition(g, "Ready", "True", "Reconciled", now=T0)
    assert g.status.conditions[0].observed_generation == 7
    g.metadata.generation = 8  # a new generation is a change
    assert wk.conditions.set_condition(g, "Ready", "True", "Reconciled", now=T1)
    assert g.status.conditions[0].observed_generation == 8


@pytest.mark.parametrize(("status", "reason"), [
    ("true", "Reconciled"), ("True", ""), ("True", "reconcile failed"), ("True", "1Bad")])
def test_what_the_api_server_would_refuse_is_refused_here(status: Any, reason: str) -> None:
    with pytest.raises(ValueError, match="condition"):
        wk.conditions.set_condition(obj(), "Ready", status, reason)
