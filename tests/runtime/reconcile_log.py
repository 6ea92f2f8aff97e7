"""The reconcile log of replica tests (leader election, sharding): each reconcile writes
its start and end with its replica's id; this checks no object was reconciled by two
replicas at once."""

from __future__ import annotations

from typing import Any


def assert_no_object_reconciled_twice_at_once(entries: list[dict[str, Any]]) -> None:
    """For each object: no two replicas ever reconciled it at the same moment."""
    by_name: dict[str, list[tuple[float, float, str]]] = {}
    for e in entries:
        by_name.setdefault(e["name"], []).append((e["start"], e["end"], e["id"]))
    for name, spans in by_name.items():
        spans.sort()
        latest_end: dict[str, float] = {}
        for start, end, rid in spans:
            for other, other_end in latest_end.items():
                assert other == rid or start >= other_end, (
                    f"{name} reconciled by {other} until {other_end} and by {rid} from {start}"
                )
            latest_end[rid] = max(end, latest_end.get(rid, end))
