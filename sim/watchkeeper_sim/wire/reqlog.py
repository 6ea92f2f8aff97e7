"""The request log: one record per HTTP request the server accepted, for tests to count."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RequestRecord:
    """One request. ``status`` is None while it runs (or forever, for hung requests)."""

    time: float  # time.monotonic() when it arrived
    wall_time: float  # time.time() when it arrived
    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    user: str | None = None
    status: int | None = None
    is_watch: bool = False
    is_list: bool = False
    verb: str = ""
    fault: str | None = None  # the fault kind that answered it, if any


def count(
    records: list[RequestRecord],
    *,
    method: str | None = None,
    is_watch: bool | None = None,
    is_list: bool | None = None,
    since: float | None = None,
    path_prefix: str | None = None,
    status: int | None = None,
    user: str | None = None,
) -> int:
    """How many records match every given criterion (``since`` is a monotonic time)."""
    return sum(
        1
        for r in records
        if (method is None or r.method == method.upper())
        and (is_watch is None or r.is_watch == is_watch)
        and (is_list is None or r.is_list == is_list)
        and (since is None or r.time >= since)
        and (path_prefix is None or r.path.startswith(path_prefix))
        and (status is None or r.status == status)
        and (user is None or r.user == user)
    )
