"""The controller's health rules (controller/health.py), the one place they are computed,
as pure functions of exact times: the stuck-reconcile rule and ``assess``."""

from __future__ import annotations

from watchkeeper.controller import ControllerConfig, ObjectRef
from watchkeeper.controller.health import assess, stuck_problems, stuck_reconciles
from watchkeeper.controller.stats import ReconcileStats
from watchkeeper.watcher import WatchState

A, B, C = ObjectRef("ns", "a"), ObjectRef("ns", "b"), ObjectRef(None, "c")


def test_stuck_is_running_past_reconcile_timeout_longest_first() -> None:
    inflight = {A: 100.0, B: 40.0, C: 110.0}
    assert stuck_reconciles(inflight, 130.0, 30.0) == [(B, 90.0)]
    assert stuck_reconciles(inflight, 130.0, 30.0 - 1e-9) == [(B, 90.0), (A, 30.0)]
    assert stuck_reconciles(inflight, 130.0, None) == []  # no timeout: never stuck
    assert stuck_reconciles({}, 130.0, 1.0) == []


def test_stuck_is_unready_at_once_and_fatal_past_timeout_plus_max_unhealthy() -> None:
    assert stuck_problems([], 30.0, 60.0) == (None, None)
    unready, fatal = stuck_problems([(B, 90.0), (A, 31.0)], 30.0, 60.0)
    assert unready == "reconcile of ns/b has been running for 90 s" and fatal is None
    unready, fatal = stuck_problems([(B, 90.5)], 30.0, 60.0)
    assert fatal == ("reconcile of ns/b has been running for 90 s "
                     "(reconcile_timeout 30 s + max_unhealthy 60 s)")
    assert stuck_problems([(B, 1e6)], 30.0, None)[1] is None  # no max_unhealthy: never fatal


def test_assess_reports_the_stuck_rule_under_reconcile() -> None:
    config = ControllerConfig(reconcile_timeout=30.0, max_unhealthy=60.0)
    stats = ReconcileStats(config.failure_window, config.failure_min_attempts)
    healthy = assess(10.0, config, [], {A: 0.0}, stats, 1, [], None)
    assert healthy.state is WatchState.HEALTHY and healthy.problems == {}
    stuck = assess(50.0, config, [], {A: 0.0}, stats, 1, [], None)
    assert stuck.state is WatchState.DEGRADED and stuck.stuck == [(A, 50.0)]
    assert list(stuck.problems) == ["reconcile"] and stuck.fatal == {}
    dead = assess(91.0, config, [], {A: 0.0}, stats, 1, [], None)
    assert list(dead.fatal) == ["reconcile"] and "max_unhealthy 60 s" in dead.fatal["reconcile"]
