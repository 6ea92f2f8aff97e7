"""``ServerThread``: an ``ApiServer`` on a thread and event loop of its own.

A test's event loop comes and goes with the test (pytest-asyncio gives each test a new one
by default), but a server shared by a whole session must keep serving between tests and
while no test runs. On its own thread it does, whatever loop each test or fixture runs in:
clients in any loop reach it over loopback HTTP, as they would reach a cluster. Everything
that touches the server itself (faults, users, objects) is handed to its loop with ``call``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from watchkeeper.client.config import ClientConfig
from watchkeeper_sim.server import ApiServer

T = TypeVar("T")

CALL_TIMEOUT = 30.0
"""Seconds a call into the server's loop may take before the caller gives up."""


class ServerThread:
    """Start it, ``call`` into it, stop it; ``options`` are ``ApiServer``'s."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self._server: ApiServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self, timeout: float = CALL_TIMEOUT) -> None:
        """Start the server and return once it listens (its port is known)."""
        if self._thread is not None:
            raise RuntimeError("this ServerThread was started already")
        self._thread = threading.Thread(target=self._main, name="watchkeeper-sim server",
                                        daemon=True)  # a test run that forgets stop() still ends
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"the simulator did not start within {timeout} s")
        self._raise_if_dead()

    def stop(self, timeout: float = CALL_TIMEOUT) -> None:
        """Stop serving and end the thread; raises what ended it, if it failed."""
        thread, loop, stop = self._thread, self._loop, self._stop
        if thread is None:
            return
        if loop is not None and stop is not None and thread.is_alive():
            loop.call_soon_threadsafe(stop.set)
        thread.join(timeout)
        if thread.is_alive():
            raise TimeoutError(f"the simulator did not stop within {timeout} s")
        self._raise_if_dead()

    def __enter__(self) -> ServerThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # kept for the next call: a thread has nobody to raise to
            self._error = exc
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with ApiServer(**self.options) as srv:
            self._server = srv
            self._ready.set()
            await self._stop.wait()

    def _raise_if_dead(self) -> None:
        if self._error is not None:
            raise RuntimeError("the simulator's thread failed") from self._error

    # ---- calls into the server's loop ------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self._server is not None

    def _target(self) -> tuple[ApiServer, asyncio.AbstractEventLoop]:
        self._raise_if_dead()
        if self._server is None or self._loop is None or not self.running:
            raise RuntimeError("the simulator is not running")
        return self._server, self._loop

    def call(self, fn: Callable[[ApiServer], T], timeout: float = CALL_TIMEOUT) -> T:
        """``fn(server)`` run on the server's loop; its result, or its exception, here."""
        srv, loop = self._target()
        if threading.current_thread() is self._thread:
            return fn(srv)
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(fn(srv))
            except BaseException as exc:
                done.set_exception(exc)

        loop.call_soon_threadsafe(run)
        return done.result(timeout)

    async def call_async(self, fn: Callable[[ApiServer], Awaitable[T]]) -> T:
        """``await fn(server)`` on the server's loop, awaited from the caller's loop."""
        srv, loop = self._target()

        async def run() -> T:
            return await fn(srv)

        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run(), loop))

    # ---- what does not need the loop -------------------------------------------------------

    @property
    def url(self) -> str:
        return self._target()[0].url

    def client_config(self, user: str = "admin", namespace: str = "default") -> ClientConfig:
        """A ClientConfig for ``user`` (its bearer token) whose default namespace is
        ``namespace``."""
        config = self.call(lambda srv: srv.client_config(user))
        return ClientConfig(server=config.server, namespace=namespace, ca_data=config.ca_data,
                            auth=config.auth)
