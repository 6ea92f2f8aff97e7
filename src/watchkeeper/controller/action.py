"""What a reconcile asks for next: run again after a delay, or wait for a change."""

from __future__ import annotations

from dataclasses import dataclass

from watchkeeper.meta import ObjectRef

__all__ = ["Action", "ObjectRef"]


@dataclass(frozen=True, slots=True)
class Action:
    """``requeue_after`` seconds until the next reconcile of this object, or None to wait
    for the next change to it (or to anything that maps to it)."""

    requeue_after: float | None = None

    @staticmethod
    def requeue(seconds: float) -> Action:
        if seconds < 0:
            raise ValueError(f"requeue delay must be >= 0 seconds, got {seconds}")
        return Action(seconds)

    @staticmethod
    def await_change() -> Action:
        return Action(None)
