"""Waiting in a test for an object to reach a state: ``wait_for`` and ``wait_for_deletion``.

A test of an operator acts, then waits for the operator's effect. A fixed sleep is slow
when the operator is quick and flaky when it is not; polling adds requests and latency.
These watch the one object (a field selector on its name), so they return as soon as the
change is served, ride out the faults a test injects (they retry), and when time runs out
fail with what they saw last, not a bare timeout. Given the operators under test, they fail
at once when one of them dies, with its error.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

import watchkeeper as wk
from watchkeeper.client.objects import Bookmark
from watchkeeper.supervisor import start_task
from watchkeeper_sim.model import JSON
from watchkeeper_sim.testing.operators import OperatorFailed, RunningOperator

DEFAULT_TIMEOUT = 10.0
RETRY_DELAY = 0.05  # after a failed request: faults a test injects end within its own steps
NOT_YET = (KeyError, IndexError, TypeError, AssertionError)
"""What a predicate may raise on an object that is not there yet: it counts as false."""
_SHOWN = 600  # characters of an object's status shown in a failed wait's message


class WaitTimeout(AssertionError):
    """The object did not reach the state in time; the message says what it was."""


class _Seen:
    """What a wait saw last, for its failure message."""

    def __init__(self) -> None:
        self.obj: JSON | None = None
        self.exists: bool | None = None  # None: never read
        self.error: BaseException | None = None
        self.predicate_error: BaseException | None = None

    def check(self, check: Callable[[JSON | None], bool], obj: JSON | None) -> bool:
        """``check(obj)``, remembering ``obj``; a predicate that fails on an object not yet
        filled in (``obj["status"]["phase"]`` before there is a status) means "not yet"."""
        self.obj, self.exists = obj, obj is not None
        try:
            result = check(obj)
        except NOT_YET as exc:
            self.predicate_error = exc
            return False
        self.predicate_error = None
        return result

    def describe(self) -> str:
        if self.exists is None:
            return "never read it"
        if self.obj is None:
            return "it does not exist"
        meta = self.obj.get("metadata") or {}
        shown = {k: meta[k] for k in ("resourceVersion", "generation", "deletionTimestamp",
                                      "finalizers") if k in meta}
        # the status, never data or spec: a Secret's values stay out of test reports
        text = f"last seen: metadata {json.dumps(shown)}"
        status = json.dumps(self.obj.get("status"), sort_keys=True)
        return text + f", status {status[:_SHOWN]}{'...' if len(status) > _SHOWN else ''}"


async def _watch_until(api: wk.Api, name: str, check: Callable[[JSON | None], bool],
                       seen: _Seen) -> JSON | None:
    """Read, then watch, until ``check`` holds; retry after any failed request."""
    selector = f"metadata.name={name}"
    while True:
        try:
            try:
                obj: JSON | None = await api.get(name)
            except wk.NotFound:  # the object, or its whole type (a CRD not there yet)
                obj = None
            if seen.check(check, obj):
                return obj
            if obj is not None:
                rv = obj["metadata"]["resourceVersion"]
            else:
                page = await api.list(field_selector=selector)
                obj = page.items[0] if page.items else None
                if seen.check(check, obj):
                    return obj
                rv = page.resource_version
            async with api.watch(resource_version=rv, field_selector=selector,
                                 timeout_seconds=300) as stream:
                async for event in stream:
                    if isinstance(event, Bookmark):
                        continue
                    obj = None if event.type == "DELETED" else event.obj
                    if seen.check(check, obj):
                        return obj
        except wk.ApiError as exc:  # an injected fault, a 410, a type not served yet
            seen.error = exc
            await asyncio.sleep(RETRY_DELAY)


async def _wait(api: wk.Api, name: str, check: Callable[[JSON | None], bool], what: str,
                timeout: float, operators: Sequence[RunningOperator]) -> JSON | None:
    for op in operators:
        if op.failure is not None:
            op.reported = True
            raise op.failure
    seen = _Seen()
    waiter = start_task(_watch_until(api, name, check, seen), name=f"wait for {name}",
                        awaited=True)
    watchers = [start_task(op.wait_failed(), name=f"watch {op.name}", awaited=True)
                for op in operators]
    try:
        done, _ = await asyncio.wait([waiter, *watchers], timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (waiter, *watchers):
            task.cancel()
        await asyncio.wait([waiter, *watchers])
    if waiter in done:
        return waiter.result()
    for task in watchers:
        if task in done:
            failure: OperatorFailed = task.result()
            operators[watchers.index(task)].reported = True
            raise failure
    where = f"{api.resource_name} {api.namespace + '/' if api.namespace else ''}{name}"
    lines = [f"{where}: {what} not true after {timeout} s; {seen.describe()}"]
    if seen.predicate_error is not None:
        err = seen.predicate_error
        lines.append(f"{what} last raised {type(err).__name__}: {err}")
    if seen.error is not None:
        lines.append(f"last request error: {type(seen.error).__name__}: {seen.error}")
    lines.extend(f"operator {op.describe()}" for op in operators)
    raise WaitTimeout("\n".join(lines))


def _name_of(predicate: Callable[..., Any]) -> str:
    name = getattr(predicate, "__name__", "") or repr(predicate)
    return "the predicate" if name == "<lambda>" else name


async def wait_for(api: wk.Api, name: str, predicate: Callable[[JSON], Any] | None = None,
                   timeout: float = DEFAULT_TIMEOUT, *,
                   operators: Sequence[RunningOperator] = ()) -> JSON:
    """The object ``name`` of ``api`` once ``predicate(obj)`` is true (without a predicate:
    once it exists). Raises ``WaitTimeout`` after ``timeout`` seconds, saying what it saw,
    or the ``OperatorFailed`` of any of ``operators`` that stops meanwhile."""
    what = _name_of(predicate) if predicate is not None else "existence"
    obj = await _wait(api, name, lambda o: o is not None and (
        predicate is None or bool(predicate(o))), what, timeout, operators)
    assert obj is not None
    return obj


async def wait_for_deletion(api: wk.Api, name: str, timeout: float = DEFAULT_TIMEOUT, *,
                            operators: Sequence[RunningOperator] = ()) -> None:
    """Return once the object ``name`` of ``api`` is gone (finalizers done). Raises like
    ``wait_for``."""
    await _wait(api, name, lambda o: o is None, "deletion", timeout, operators)
