"""Operators under test, run in the background: ``start_operator`` and ``RunningOperator``.

The operator runs through ``watchkeeper.run``, as ``watchkeeper run`` runs it, with signals
left to pytest and a ``stop`` event for the end of the test. It must not die quietly while
the test waits for its effects: ``failure`` says why it stopped, ``wait_for`` gives up at
once when it did, and ``stop`` raises it, so the test fails with the operator's own error
rather than a timeout.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import watchkeeper as wk
from watchkeeper.supervisor import start_task

Setup: TypeAlias = Callable[[wk.Client], Any]
"""A function that takes a Client and returns an Operator, a list of them, or an awaitable
of either (what ``watchkeeper run TARGET`` calls)."""

STOP_TIMEOUT = 15.0
"""Seconds an operator may take to drain at the end of a test."""


class OperatorFailed(AssertionError):
    """The operator under test stopped with an error (the cause), or stopped by itself."""


class RunningOperator:
    """Operators started by ``start_operator``, running until ``stop``."""

    def __init__(self, operators: Sequence[wk.Operator], client: wk.Client | None,
                 name: str) -> None:
        self.operators, self.name = list(operators), name
        self._client = client  # the operator's own; closed at stop
        self.reported = False  # its failure was raised to the test already
        self._stop = asyncio.Event()
        self._task = start_task(self._run(), name=f"operator under test: {name}",
                                awaited=True)

    def __repr__(self) -> str:
        return f"<RunningOperator {self.name} {'done' if self._task.done() else 'running'}>"

    async def _run(self) -> None:
        await wk.run(*self.operators, stop=self._stop, handle_signals=False)

    @property
    def controllers(self) -> list[wk.Controller]:
        return [op.controller for op in self.operators]

    @property
    def done(self) -> bool:
        return self._task.done()

    @property
    def failure(self) -> OperatorFailed | None:
        """Why it stopped before ``stop`` was asked for, or None while it runs."""
        if not self._task.done():
            return None
        error = None if self._task.cancelled() else self._task.exception()
        if error is not None:
            failed = OperatorFailed(f"operator {self.name} failed: "
                                    f"{type(error).__name__}: {error}")
            failed.__cause__ = error
            return failed
        if not self._stop.is_set():
            return OperatorFailed(f"operator {self.name} stopped by itself")
        return None

    def describe(self) -> str:
        """Its reconcile counts and last error, for a failed wait's message."""
        parts = []
        for c in self.controllers:
            r = c.stats.results
            text = f"{c.name}: {r['success']} reconciles succeeded, {r['error']} failed"
            if c.stats.last_error is not None:
                text += f" (last error, on {c.stats.last_error_ref}: {c.stats.last_error})"
            parts.append(text)
        return "; ".join(parts)

    async def wait_failed(self) -> OperatorFailed:
        """Return once the operator stopped by itself or with an error."""
        await asyncio.wait([self._task])
        failure = self.failure
        if failure is None:  # stopped as asked: it cannot fail any more
            await asyncio.Event().wait()
        assert failure is not None
        return failure

    async def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Drain it (as SIGTERM does) and close its client; raise ``OperatorFailed`` if it
        failed, now or before."""
        failure = self.failure
        self._stop.set()
        try:
            async with asyncio.timeout(timeout):
                await asyncio.wait([self._task])
        except TimeoutError:
            self._task.cancel()
            await asyncio.wait([self._task])
            failure = failure or OperatorFailed(
                f"operator {self.name} did not stop within {timeout} s of being asked to")
        finally:
            if self._client is not None:
                await self._client.close()
        failure = failure or self.failure
        if failure is not None:
            raise failure


async def start_operator(target: wk.Operator | Sequence[wk.Operator] | Setup,
                         client: wk.Client | None = None) -> RunningOperator:
    """Start ``target`` in the background: an ``Operator``, a list of them, or a setup
    function called with ``client`` (which the operator then owns: it is closed at
    ``stop``)."""
    try:
        made = await _operators(target, client)
    except BaseException:
        if client is not None:
            await client.close()
        raise
    return RunningOperator(made, client, ", ".join(op.controller.name for op in made))


async def _operators(target: wk.Operator | Sequence[wk.Operator] | Setup,
                     client: wk.Client | None) -> list[wk.Operator]:
    made: Any
    if isinstance(target, wk.Operator):
        made = [target]
    elif callable(target):
        if client is None:
            raise TypeError("a setup function needs a client to be called with")
        made = target(client)
        if inspect.isawaitable(made):
            made = await made
        made = list(made) if isinstance(made, list | tuple) else [made]
    else:
        made = list(target)
    for op in made:
        if not isinstance(op, wk.Operator):
            raise TypeError(f"expected watchkeeper.Operator values, got {type(op).__name__}")
    return list(made)
