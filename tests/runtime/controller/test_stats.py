"""The reconcile readiness rule (pure: explicit times)."""

from __future__ import annotations

from watchkeeper.controller import ObjectRef
from watchkeeper.controller.stats import ReconcileStats

A, B, C = ObjectRef("ns", "a"), ObjectRef("ns", "b"), ObjectRef("ns", "c")
ERR = PermissionError("forbidden")


def test_not_ready_once_nothing_succeeded_for_the_window_with_enough_failures() -> None:
    s = ReconcileStats(window=300, min_attempts=5)
    s.success(A, 0.0)
    for t in range(10, 60, 10):  # 5 failures on 3 objects
        s.failure((A, B, C)[t // 10 % 3], float(t), ERR)
    assert s.all_failing(299.0, objects=3) is None  # a success within the window
    why = s.all_failing(301.0, objects=3)
    assert why is not None and "no reconcile succeeded for 301 s" in why
    assert "5 failures on 3 objects" in why and "PermissionError: forbidden" in why
    s.success(B, 302.0, "requeue")  # the first success ends it
    assert s.all_failing(302.0, objects=3) is None
    assert set(s.failing) == {A, C}


def test_long_backoff_does_not_make_an_all_failing_controller_ready_again() -> None:
    s = ReconcileStats(window=300, min_attempts=5)
    s.success(A, 0.0)
    t = 1.0
    for _ in range(20):  # each object fails once every 300 s: few failures per window
        for ref in (A, B, C):
            s.failure(ref, t, ERR)
        t += 300.0
    assert s.all_failing(t, objects=3) is not None


def test_one_broken_object_while_the_others_are_idle_is_not_unready() -> None:
    s = ReconcileStats(window=300, min_attempts=5)
    s.success(A, 0.0)
    s.success(B, 0.0)
    for i in range(30):
        s.failure(C, 1.0 + 60 * i, ERR)
    assert s.all_failing(2000.0, objects=3) is None
    assert s.failing[C].failures == 30  # shown, though
    assert s.all_failing(2000.0, objects=1) is not None  # unless it is the only object


def test_failing_from_the_start_counts_from_the_first_failure_and_none_disables() -> None:
    s = ReconcileStats(window=300, min_attempts=5)
    for i in range(6):
        s.failure((A, B)[i % 2], 10.0 + i, ERR)
    assert s.all_failing(309.0, objects=2) is None
    assert "since the first attempt" in (s.all_failing(311.0, objects=2) or "")
    off = ReconcileStats(window=None, min_attempts=1)
    for i in range(6):
        off.failure((A, B)[i % 2], float(i), ERR)
    assert off.all_failing(10_000.0, objects=2) is None


def test_fewer_than_min_attempts_is_not_enough() -> None:
    s = ReconcileStats(window=300, min_attempts=5)
    for i in range(4):
        s.failure((A, B)[i % 2], float(i), ERR)
    assert s.all_failing(1000.0, objects=2) is None
    s.forget(A)
    assert A not in s.failing
