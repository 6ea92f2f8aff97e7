"""What a controller's reconciles and mappers are doing, for health, status and metrics:
counts, failing objects, durations, and the error logs of user callbacks.

A controller whose every reconcile fails (RBAC revoked for its children, a webhook
rejecting every write) used to look healthy: its watches were fine. ``ReconcileStats``
keeps, in constant memory per object, what readiness needs to say otherwise: the counts,
the last error, which objects keep failing, and when the last success was.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from watchkeeper.controller.action import ObjectRef

log = logging.getLogger("watchkeeper.controller")

_REMINDERS = (10, 100)  # then every 1,000th identical error


@dataclass
class ObjectFailure:
    """An object whose reconciles keep failing; times are event-loop time."""

    ref: ObjectRef
    failures: int  # in a row
    last_error: str
    first_failed: float
    last_failed: float


class ReconcileStats:
    """Counts, failing objects, and the readiness rule (``all_failing``).

    The rule: not ready when no reconcile succeeded for ``window`` seconds (counted from
    the last success, or from the first failure if none succeeded yet), while at least
    ``min_attempts`` reconciles failed since then, on at least two different objects (one,
    if the cache holds only one). A success ends it at once. It counts failures since the
    last success, not within a sliding window, so objects backing off for minutes do not
    make a controller whose every reconcile fails look ready again; and one broken object
    while the others are idle is shown under ``failing`` without failing readiness."""

    def __init__(self, window: float | None, min_attempts: int) -> None:
        self.window, self.min_attempts = window, min_attempts
        self.results: dict[str, int] = {"success": 0, "error": 0, "requeue": 0}
        self.last_error: str | None = None
        self.last_error_ref: ObjectRef | None = None
        self.last_error_at: float | None = None
        self.last_success_at: float | None = None
        self.failing: dict[ObjectRef, ObjectFailure] = {}
        # The current streak of failures (since the last success).
        self._streak = 0
        self._streak_start: float | None = None
        self._streak_refs: set[ObjectRef] = set()

    def success(self, ref: ObjectRef, now: float, outcome: str = "success") -> None:
        self.results[outcome] += 1
        self.last_success_at = now
        self._streak, self._streak_start = 0, None
        self._streak_refs.clear()
        self.failing.pop(ref, None)

    def failure(self, ref: ObjectRef, now: float, error: BaseException) -> None:
        self.results["error"] += 1
        text = f"{type(error).__name__}: {error}"
        self.last_error, self.last_error_ref, self.last_error_at = text, ref, now
        self._streak += 1
        if self._streak_start is None:
            self._streak_start = now
        self._streak_refs.add(ref)
        f = self.failing.get(ref)
        if f is None:
            self.failing[ref] = ObjectFailure(ref, 1, text, now, now)
        else:
            f.failures, f.last_error, f.last_failed = f.failures + 1, text, now

    def forget(self, ref: ObjectRef) -> None:
        """The object is gone: it is no longer failing."""
        self.failing.pop(ref, None)
        self._streak_refs.discard(ref)

    def all_failing(self, now: float, objects: int) -> str | None:
        """Why readiness fails by the reconcile rule, or None; ``objects``: cache size."""
        if self.window is None or self._streak < self.min_attempts:
            return None
        if len(self._streak_refs) < min(2, max(1, objects)):
            return None
        since = self.last_success_at if self.last_success_at is not None else self._streak_start
        assert since is not None
        if now - since < self.window:
            return None
        what = ("no reconcile succeeded for" if self.last_success_at is not None
                else "no reconcile succeeded since the first attempt,")
        return (
            f"every reconcile failed: {what} {now - since:.0f} s "
            f"(failure_window {self.window:g} s), {self._streak} failures on "
            f"{len(self._streak_refs)} objects; last error on {self.last_error_ref}: "
            f"{self.last_error}"
        )

    def worst(self, limit: int = 10) -> list[ObjectFailure]:
        """The objects failing longest, at most ``limit``."""
        return sorted(self.failing.values(), key=lambda f: f.first_failed)[:limit]


class DurationHistogram:
    """Cumulative-bucket histogram of reconcile durations, read by the metrics layer."""

    BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

    def __init__(self) -> None:
        self.counts = [0] * (len(self.BUCKETS) + 1)  # the last one is +Inf
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.total += seconds
        for i, bound in enumerate(self.BUCKETS):
            if seconds <= bound:
                self.counts[i] += 1
                return
        self.counts[-1] += 1


class ErrorLog:
    """Counts a user callback's errors and logs them without flooding: one line per new
    error message, then reminders at 10, 100 and every 1,000 repeats."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.count = 0
        self.last_error: str | None = None
        self._repeats = 0

    def record(self, error: BaseException, about: str) -> None:
        self.count += 1
        text = f"{type(error).__name__}: {error}"
        if text == self.last_error:
            self._repeats += 1
            if self._repeats in _REMINDERS or self._repeats % 1000 == 0:
                log.warning("%s failed again (%d times in a row): %s",
                            self.what, self._repeats, text)
            return
        self.last_error, self._repeats = text, 1
        log.warning("%s failed on %s (%d errors so far; the trigger goes on): %s",
                    self.what, about, self.count, text,
                    exc_info=(type(error), error, error.__traceback__))
