"""Fixtures for watcher tests: a simulator, clients, and a recorder of watcher events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper_sim import ApiServer


@pytest.fixture
async def srv() -> AsyncIterator[ApiServer]:
    async with ApiServer(bookmark_interval=30.0) as server:
        yield server


@pytest.fixture
async def client(srv: ApiServer) -> AsyncIterator[wk.Client]:
    async with srv.client() as c:
        yield c


def configmap(name: str, ns: str = "default", **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns}, "data": data}


@dataclass
class Recorder:
    """Runs a watcher in a task and keeps every event with its (loop) time."""

    watch: wk.Watcher
    events: list[tuple[float, wk.Event]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    exception: BaseException | None = None
    ended_at: float | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            async for ev in self.watch:
                self.events.append((loop.time(), ev))
        except Exception as exc:  # recorded for the test to assert on
            self.exception = exc
            self.ended_at = loop.time()

    def start(self) -> Recorder:
        self.task = asyncio.create_task(self._run())
        return self

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)

    def of(self, *types: type) -> list[Any]:
        return [ev for _, ev in self.events if isinstance(ev, types)]

    def errors(self) -> list[wk.ApiError]:
        return [ev.error for ev in self.of(wk.WatchError)]

    def state(self) -> dict[str, dict[str, Any]]:
        """Objects as reconstructed from the events (name -> object)."""
        known: dict[str, dict[str, Any]] = {}
        pending: dict[str, dict[str, Any]] | None = None
        for _, ev in self.events:
            match ev:
                case wk.InitStart():
                    pending = {}
                case wk.InitApply(obj):
                    assert pending is not None
                    pending[wk.meta.name(obj)] = obj
                case wk.InitDone():
                    known, pending = pending or {}, None
                case wk.Apply(obj):
                    known[wk.meta.name(obj)] = obj
                case wk.Delete(obj):
                    known.pop(wk.meta.name(obj), None)
        return known

    async def wait_for(self, predicate: Any, timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate(self):
                if self.task is not None and self.task.done():
                    raise AssertionError(f"watcher ended: {self.exception!r}")
                await asyncio.sleep(0.1)


def record(api: wk.Api, config: wk.WatchConfig | None = None, **kw: Any) -> Recorder:
    return Recorder(wk.watcher(api, config, **kw)).start()
