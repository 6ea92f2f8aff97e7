"""What the controller knows of a leader elector: the ``Elector`` protocol it runs, and
the rule that turns an elector's health into "not ready" and "fatal".

The leader module sits above the controller, so an elector is known here by protocol."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol


class Elector(Protocol):
    """What ``run(elector=...)`` needs (``watchkeeper.leader.LeaderElector`` is one)."""

    leading: asyncio.Event
    lost: asyncio.Event

    async def run(self) -> None: ...

    def reset(self) -> None: ...


class ElectorHealthView(Protocol):
    """What the health rules read of an elector's ``health`` (``watchkeeper.leader.
    ElectorHealth`` is one; duck-typed because the leader module sits above this one)."""

    @property
    def lease(self) -> str: ...

    @property
    def state(self) -> Any: ...  # an enum whose value is "degraded" while attempts fail

    @property
    def last_error(self) -> str | None: ...

    @property
    def consecutive_failures(self) -> int: ...

    def non_functioning_for(self, now: float) -> float: ...


def elector_health(elector: object) -> ElectorHealthView | None:
    """The elector's ``health`` if it has one (the Elector protocol does not require it)."""
    health = getattr(elector, "health", None)
    return health if callable(getattr(health, "non_functioning_for", None)) else None


def elector_problems(
    health: ElectorHealthView, now: float, unready_after: float | None,
    max_unhealthy: float | None,
) -> tuple[str | None, str | None]:
    """(why not ready, why fatal) for an elector, or None for each that does not apply.

    The rule: an elector whose attempts to reach its lease have failed without a success
    for longer than ``unready_after`` is not ready; longer than ``max_unhealthy``, fatal.
    A blip shorter than that (one 503, a reset) is retried and only shows as ``degraded``."""
    if getattr(health.state, "value", health.state) != "degraded":
        return None, None
    down = health.non_functioning_for(now)
    what = (f"lease {health.lease}: the leader elector has not reached its lease for "
            f"{down:.0f} s ({health.consecutive_failures} failed attempts in a row")
    unready = fatal = None
    if unready_after is not None and down > unready_after:
        unready = f"{what}, elector_unready_after {unready_after:g} s): {health.last_error}"
    if max_unhealthy is not None and down >= max_unhealthy:
        fatal = f"{what}, max_unhealthy {max_unhealthy:g} s): {health.last_error}"
    return unready, fatal
