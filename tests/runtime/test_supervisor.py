"""The supervisor: every task's death is visible (virtual time, exact delays)."""

from __future__ import annotations

import asyncio
import gc
import logging
import weakref

import pytest

import watchkeeper as wk
from watchkeeper.backoff import ConstantBackoff
from watchkeeper.supervisor import Supervisor, TaskDied, TaskState

pytestmark = pytest.mark.looptime


class Boom(Exception):
    pass


async def test_a_crash_with_restart_never_fails_the_supervisor_naming_the_task() -> None:
    async def task() -> None:
        await asyncio.sleep(5)
        raise Boom("bad thing")

    with pytest.raises(TaskDied) as info:
        async with Supervisor("ctl") as sup:
            sup.spawn("janitor", task)
            failure = await sup.failed()
            assert asyncio.get_running_loop().time() == pytest.approx(5)
            raise failure
    died = info.value
    assert isinstance(died, wk.TaskDied) and isinstance(died, wk.WatchkeeperError)
    assert died.task == "janitor" and died.supervisor == "ctl"
    assert "janitor" in str(died) and "Boom: bad thing" in str(died)
    assert isinstance(died.__cause__, Boom)
    status = sup.status("janitor")
    assert status is not None and status.state is TaskState.FAILED
    assert status.last_error == "Boom: bad thing" and status.error_type == "Boom"
    assert sup.get("janitor") is None  # the ended Task itself is not kept


async def test_leaving_the_block_raises_a_failure_nobody_awaited() -> None:
    async def task() -> None:
        raise Boom("unnoticed")

    with pytest.raises(TaskDied, match="unnoticed"):
        async with Supervisor("s") as sup:
            sup.spawn("t", task)
            await asyncio.sleep(1)


async def test_a_forever_task_that_returns_is_a_failure_and_a_oneshot_is_not() -> None:
    async def quick() -> None:
        await asyncio.sleep(1)

    sup = Supervisor("s")
    sup.spawn("oneshot", quick, forever=False)
    sup.spawn("loop", quick)
    failure = await sup.failed()
    await sup.aclose()
    assert isinstance(failure, TaskDied) and failure.task == "loop"
    assert "should run until stopped" in str(failure) and failure.__cause__ is None
    states = {s.name: s.state for s in sup.statuses()}
    assert states == {"oneshot": TaskState.DONE, "loop": TaskState.FAILED}


async def test_restart_with_backoff_shows_degraded_then_recovers_and_resets_the_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop = asyncio.get_running_loop()
    starts: list[float] = []
    crashes = {"left": 3}

    async def flaky() -> None:
        starts.append(loop.time())
        if crashes["left"]:
            crashes["left"] -= 1
            raise Boom("flaky")
        await asyncio.Event().wait()

    class Recording(ConstantBackoff):
        resets = 0

        def reset(self) -> None:
            Recording.resets += 1
            super().reset()

    caplog.set_level(logging.INFO, "watchkeeper.supervisor")
    async with Supervisor("s", stable_after=10) as sup:
        h = sup.spawn("w", flaky, restart="backoff", backoff=Recording(2.0))
        await asyncio.sleep(1)
        assert h.status.state is TaskState.DEGRADED and h.status.restarts == 0
        assert "Boom: flaky" in sup.problems()["w"]
        await asyncio.sleep(6)  # restarted at 2, 4, 6: the third start runs
        assert starts == pytest.approx([0, 2, 4, 6])
        assert h.status.state is TaskState.DEGRADED and h.status.restarts == 3
        await asyncio.sleep(10)  # stable for 10 s: recovered
        assert h.status.state is TaskState.RUNNING and sup.problems() == {}
        assert Recording.resets == 1
        assert sup.failure is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    # one line when it became degraded; the same error twice more is not repeated
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "restarting in 2.0 s" in warnings[0].getMessage()
    assert any("recovered after 3 restarts" in r.getMessage() for r in caplog.records)


async def test_a_crash_loop_is_summarised_not_flooded(caplog: pytest.LogCaptureFixture) -> None:
    async def crash() -> None:
        raise Boom("again")

    caplog.set_level(logging.DEBUG, "watchkeeper.supervisor")
    async with Supervisor("s") as sup:
        h = sup.spawn("w", crash, restart="backoff", backoff=ConstantBackoff(1.0))
        await asyncio.sleep(150.5)
        assert h.status.restarts == 150
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 3, lines  # the first crash, then reminders at 10 and 100
    assert "still crashing (10 times" in lines[1] and "(100 times" in lines[2]


async def test_when_the_backoff_gives_up_the_task_dies() -> None:
    async def crash() -> None:
        raise Boom("hopeless")

    sup = Supervisor("s")
    sup.spawn("w", crash, restart="backoff", backoff=ConstantBackoff(1.0, max_retries=3))
    failure = await sup.failed()
    await sup.aclose()
    assert asyncio.get_running_loop().time() == pytest.approx(3)
    assert isinstance(failure, TaskDied) and "gave up after 3 restarts" in str(failure)
    assert isinstance(failure.__cause__, Boom)


async def test_a_non_critical_death_shows_failed_but_does_not_fail_the_supervisor() -> None:
    async def crash() -> None:
        raise Boom("minor")

    async with Supervisor("s") as sup:
        sup.spawn("extra", crash, critical=False)
        await asyncio.sleep(1)
        assert sup.failure is None
        assert "died: Boom: minor" in sup.problems()["extra"]


async def test_a_cancellation_nobody_asked_for_is_a_crash() -> None:
    async def victim() -> None:
        inner = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(1, inner.cancel)
        await inner  # raises CancelledError, but the task itself was not cancelled

    sup = Supervisor("s")
    sup.spawn("v", victim)
    failure = await sup.failed()
    await sup.aclose()
    assert isinstance(failure, TaskDied) and isinstance(failure.__cause__, asyncio.CancelledError)


async def test_cancel_and_close_are_not_failures_and_names_are_unique() -> None:
    async def forever() -> None:
        await asyncio.Event().wait()

    async with Supervisor("s") as sup:
        h = sup.spawn("a", forever)
        with pytest.raises(ValueError, match="already runs"):
            sup.spawn("a", forever)
        await sup.cancel("a")
        assert h.status.state is TaskState.DONE and h.done()
        sup.spawn("a", forever)  # a finished name may be reused
        sup.begin_close()
        with pytest.raises(RuntimeError, match="closing"):
            sup.spawn("b", forever)
    assert sup.failure is None
    assert all(s.state is TaskState.DONE for s in sup.statuses())


async def test_an_ended_or_crashed_task_leaves_a_summary_not_its_task_or_frames(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 21 item 5: a shared watch per key made the table keep every ended Task, whose
    CancelledError's traceback kept the frames and their locals (a 2 MiB stream buffer)."""
    # pytest's log capture keeps each record, and the crash's record its traceback.
    monkeypatch.setattr(logging.getLogger("watchkeeper.supervisor"), "disabled", True)

    class Payload:  # what a frame's locals hold: a stream buffer, a cache
        pass

    payloads: dict[str, weakref.ref[Payload]] = {}

    async def crash() -> None:
        payload = Payload()
        payloads["crash"] = weakref.ref(payload)
        raise Boom("with a payload in its frame")

    async def block() -> None:
        payload = Payload()
        payloads["block"] = weakref.ref(payload)
        await asyncio.Event().wait()

    sup = Supervisor("s")
    crashing = sup.spawn("crashing", crash, restart="backoff", backoff=ConstantBackoff(5.0))
    blocked = sup.spawn("blocked", block)
    tasks = [weakref.ref(crashing.task), weakref.ref(blocked.task)]
    await asyncio.sleep(1)  # "crashing" waits to restart; its crash is summarised
    gc.collect()
    assert payloads["crash"]() is None, "a degraded task's status keeps its crash's frames"
    assert crashing.status.last_error == "Boom: with a payload in its frame"
    assert crashing.status.error_type == "Boom"
    assert "Boom: with a payload" in sup.problems()["crashing"]
    sup.forget("blocked")  # running: not forgotten
    await sup.cancel("crashing", "blocked")  # "blocked" is cancelled inside its frame
    del crashing, blocked
    await asyncio.sleep(1)  # (the loop's own references to the ended tasks go)
    gc.collect()
    assert payloads["block"]() is None and [t() for t in tasks] == [None, None]
    assert sup.get("crashing") is None and sup.get("blocked") is None
    assert [(st.name, st.state) for st in sup.statuses()] == [
        ("crashing", TaskState.DONE), ("blocked", TaskState.DONE)]
    sup.forget("crashing")
    assert [st.name for st in sup.statuses()] == ["blocked"] and sup.status("crashing") is None


async def test_fail_records_the_first_failure_only() -> None:
    sup = Supervisor("s")
    first, second = Boom("first"), Boom("second")
    sup.fail(first)
    sup.fail(second)
    assert await sup.failed() is first and sup.failure is first


async def test_start_task_logs_a_fire_and_forget_crash_and_hands_an_awaited_one_over(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from watchkeeper.supervisor import start_task

    async def crash(text: str) -> None:
        await asyncio.sleep(1)
        raise Boom(text)

    caplog.set_level(logging.DEBUG, "watchkeeper.supervisor")
    loose = start_task(crash("nobody awaits me"), name="gc worker")
    awaited = start_task(crash("my awaiter sees me"), name="exec plugin", awaited=True)
    with pytest.raises(Boom, match="my awaiter"):
        await awaited
    await asyncio.sleep(1)
    assert loose.done()
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == ["task 'gc worker' crashed: Boom: nobody awaits me"]
    cancelled = start_task(asyncio.sleep(10), name="cancelled")
    cancelled.cancel()
    await asyncio.gather(cancelled, return_exceptions=True)
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 1
