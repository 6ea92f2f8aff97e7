"""What a scenario is made of: a name, an area, and steps that are plain data.

A step is one thing a client does: an HTTP request through ``watchkeeper.Client``
(``Http``), a kubectl invocation (``Kubectl``), a watch replayed from an earlier step's
resourceVersion (``Watch``), or a bounded wait for what a cluster's controllers do in their
own time (``Poll``: garbage collection, namespace deletion, a new CRD being served).

Text in paths, bodies, queries, kubectl arguments and stdin may hold placeholders that the
runner fills in: ``{ns}`` (the scenario's namespace), ``{group}`` (its CRD group), and
``{uid:STEP}`` / ``{rv:STEP}`` / ``{name:STEP}`` (the uid, resourceVersion or name of the
object the step named STEP answered). The normalized transcripts put ``{ns}`` and
``{group}`` back, so the recorded fixtures do not depend on the prefix they were recorded
with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

JSON_TYPE = "application/json"
PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


class _Present:
    def __repr__(self) -> str:
        return "PRESENT"


ABSENT: Any = _Absent()
"""``Poll(field=..., value=ABSENT)``: until the field is not there."""
PRESENT: Any = _Present()
"""``Poll(field=..., value=PRESENT)``: until the field is there, whatever its value."""


@dataclass(frozen=True)
class Http:
    """One request. ``body``: JSON-able data, or ``str`` sent as is (YAML for apply).
    ``pick``: record only these dotted paths of the answer (``spec.template.spec``), so a
    scenario about patching is not also about every default of the kind. ``name``: how
    later steps refer to this one (``{uid:NAME}``, ``Watch(since=NAME)``). ``record=False``:
    a setup step whose answer may differ from run to run on a cluster (an object a
    controller may have made already); only its request is recorded."""

    method: str
    path: str
    body: Any = None
    query: Mapping[str, str] = field(default_factory=dict)
    content_type: str = JSON_TYPE
    accept: str = JSON_TYPE
    pick: tuple[str, ...] = ()
    name: str = ""
    record: bool = True


@dataclass(frozen=True)
class Kubectl:
    """``kubectl --namespace {ns} ARGS`` with ``stdin`` (YAML) if given; its exit code,
    stdout and stderr are recorded (``-o json``/``-o yaml`` output as data)."""

    args: tuple[str, ...]
    stdin: str | None = None


@dataclass(frozen=True)
class Watch:
    """A watch of ``path`` from the resourceVersion of the step named ``since``: the
    ``count`` events after it (replayed from history, so deterministic), then any extra one
    that comes within a short grace period (an extra event is a difference too)."""

    path: str
    since: str
    count: int
    query: Mapping[str, str] = field(default_factory=dict)
    pick: tuple[str, ...] = ()


@dataclass(frozen=True)
class Poll:
    """GET ``path`` until it answers ``status`` (and, if ``field`` is given, that dotted
    field equals ``value``; ``ABSENT``: is missing, ``PRESENT``: is there); the last answer
    is recorded unless ``record=False``. A cluster garbage-collects and removes namespaces
    in seconds: this waits, bounded (the target's patience: minutes on a cluster, seconds on
    the simulator, whose controllers act within milliseconds), where a sleep would be too
    short on a loaded machine and too long everywhere else."""

    path: str
    status: int = 200
    field: str = ""
    value: Any = None
    pick: tuple[str, ...] = ()
    record: bool = True


Step: TypeAlias = Http | Kubectl | Watch | Poll


@dataclass(frozen=True)
class Scenario:
    """A named list of steps run in a fresh namespace. ``differs``: why the simulator does
    not answer as the cluster yet (an expected difference: a strict xfail in the offline
    test, a row of the table in docs/simulator.md); empty when it must match."""

    name: str
    area: str
    steps: tuple[Step, ...]
    differs: str = ""
    managed_fields: bool = False
    """Compare metadata.managedFields (server-side apply scenarios); elsewhere they are
    dropped, so that one known simplification does not hide every other difference."""


# ---- shorthands for scenario files ------------------------------------------------------


def get(path: str, *, pick: tuple[str, ...] = (), name: str = "", accept: str = JSON_TYPE,
        **query: str) -> Http:
    return Http("GET", path, query=query, pick=pick, name=name, accept=accept)


def post(path: str, body: Any, *, pick: tuple[str, ...] = (), name: str = "",
         record: bool = True, **query: str) -> Http:
    return Http("POST", path, body, query=query, pick=pick, name=name, record=record)


def put(path: str, body: Any, *, pick: tuple[str, ...] = (), name: str = "",
        **query: str) -> Http:
    return Http("PUT", path, body, query=query, pick=pick, name=name)


def patch(path: str, body: Any, kind: str = "merge", *, pick: tuple[str, ...] = (),
          name: str = "", record: bool = True, **query: str) -> Http:
    return Http("PATCH", path, body, query=query, content_type=PATCH_TYPES[kind], pick=pick,
                name=name, record=record)


def apply(path: str, body: Any, manager: str, *, force: bool = False,
          pick: tuple[str, ...] = (), name: str = "", record: bool = True,
          **query: str) -> Http:
    """Server-side apply as ``manager``."""
    q = {"fieldManager": manager, **({"force": "true"} if force else {}), **query}
    return Http("PATCH", path, body, query=q, content_type=PATCH_TYPES["apply"], pick=pick,
                name=name, record=record)


def delete(path: str, body: Any = None, *, pick: tuple[str, ...] = (), name: str = "",
           **query: str) -> Http:
    return Http("DELETE", path, body, query=query, pick=pick, name=name)


def kubectl(*args: str, stdin: str | None = None) -> Kubectl:
    return Kubectl(tuple(args), stdin)


def gone(path: str, *, record: bool = True) -> Poll:
    """Until ``path`` answers 404 (garbage collected, finalized, namespace removed)."""
    return Poll(path, status=404, record=record)


def ns_path(resource: str, name: str = "", *, group: str = "", version: str = "v1") -> str:
    """The path of a namespaced resource in the scenario's namespace."""
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    return f"{base}/namespaces/{{ns}}/{resource}" + (f"/{name}" if name else "")
