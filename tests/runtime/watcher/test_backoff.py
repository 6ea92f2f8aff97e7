"""Backoff schedules: exact values with a seeded RNG and a fake clock."""

from __future__ import annotations

import random

import pytest

import watchkeeper as wk


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_default_backoff_delays_lie_in_client_go_windows() -> None:
    b = wk.DefaultBackoff(rng=random.Random(1), clock=FakeClock())
    for n in range(12):
        d = min(0.8 * 2**n, 30.0)
        delay = b.next()
        assert delay is not None
        assert d <= delay < 2 * d, (n, delay)


def test_default_backoff_allows_at_most_seven_attempts_in_sixty_seconds() -> None:
    # Worst case (jitter always 0): attempts at 0, 0.8, 2.4, 5.6, 12, 24.8, 50.4, 80.4 ...
    class NoJitter(random.Random):
        def random(self) -> float:
            return 0.0

    b = wk.DefaultBackoff(rng=NoJitter(), clock=FakeClock())
    t, attempts = 0.0, 1
    while True:
        delay = b.next()
        assert delay is not None
        t += delay
        if t > 60:
            break
        attempts += 1
    assert attempts == 7


def test_reset_timer_resets_after_quiet_period_only() -> None:
    clock = FakeClock()
    inner = wk.ExponentialBackoff(1, 100, 2, jitter=0)
    b = wk.ResetTimerBackoff(inner, reset_after=120, clock=clock)
    assert [b.next(), b.next(), b.next()] == [1, 2, 4]
    clock.now = 100  # 100 s since the last failure: not yet quiet long enough
    assert b.next() == 8
    clock.now = 220  # exactly 120 s since the last failure
    assert b.next() == 1


def test_explicit_reset_starts_over() -> None:
    b = wk.ExponentialBackoff(0.5, 10, 3, jitter=0)
    assert [b.next(), b.next(), b.next(), b.next()] == [0.5, 1.5, 4.5, 10]
    b.reset()
    assert b.next() == 0.5


def test_max_retries_gives_up_with_none() -> None:
    b = wk.ExponentialBackoff(1, 10, 2, jitter=0, max_retries=3)
    assert [b.next(), b.next(), b.next(), b.next()] == [1, 2, 4, None]
    c = wk.ConstantBackoff(2.0, max_retries=2)
    assert [c.next(), c.next(), c.next()] == [2.0, 2.0, None]


def test_capped_backoff_does_not_overflow() -> None:
    b = wk.ExponentialBackoff(1, 30, 2, jitter=0)
    for _ in range(5000):
        delay = b.next()
    assert delay == 30


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial": 0},
        {"initial": 5, "max_delay": 1},
        {"factor": 0.5},
        {"jitter": -1},
    ],
)
def test_bad_parameters_are_rejected_with_a_clear_error(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="need 0 < initial"):
        wk.ExponentialBackoff(**kwargs)  # type: ignore[arg-type]


def test_any_object_with_next_and_reset_is_a_backoff() -> None:
    class Mine:
        def next(self) -> float | None:
            return 1.0

        def reset(self) -> None:
            pass

    assert isinstance(Mine(), wk.Backoff)
