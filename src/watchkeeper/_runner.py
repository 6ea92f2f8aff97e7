"""What ``watchkeeper run module:attr`` does: load the user's operator (or several),
build the probe server and leader elector from the options, and hand everything to
``watchkeeper.runtime.run``; turn what goes wrong into messages and exit statuses.

The probe server runs supervised: if it stops listening it is restarted (1 s doubling to
30 s; /readyz shows it degraded meanwhile) and after 5 failed restarts the controllers are
drained and the run ends with ``TaskDied`` naming "probe server" (exit status 1)."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import logging
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import watchkeeper as wk
from watchkeeper import runtime
from watchkeeper.leader import LeaderElector
from watchkeeper.ops import HealthServer

log = logging.getLogger("watchkeeper.run")


class RunError(Exception):
    """The target could not be loaded or is not an operator; the message says why."""


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, its causes and contexts, and the members of exception groups, each once."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop(0)
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        if isinstance(e, BaseExceptionGroup):
            todo.extend(e.exceptions)
        todo.extend(x for x in (e.__cause__, e.__context__) if x is not None)


def caller_error(exc: BaseException) -> wk.ApiError | None:
    """The API error in ``exc``'s chain that only the caller can fix (a class whose
    ``retriable`` is False, such as BadRequest and Invalid), or None."""
    for e in _chain(exc):
        if isinstance(e, wk.ApiError) and not getattr(type(e), "retriable", True):
            return e
    return None


@dataclass(frozen=True)
class RunOptions:
    target: str
    kubeconfig: str | None = None
    context: str | None = None
    probe_host: str = "0.0.0.0"
    probe_port: int | None = 8080
    leader_election: bool = False
    lease_name: str | None = None
    lease_namespace: str | None = None
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    probe_check_interval: float = 5.0
    loop: str = "asyncio"  # or "uvloop" (the ``fast`` extra)


def load_target(target: str) -> Any:
    """``package.module:attr`` or ``path/to/file.py:attr`` (attr defaults to ``setup``)."""
    module_name, _, attr = target.partition(":")
    attr = attr or "setup"
    if module_name.endswith(".py") or "/" in module_name:
        path = Path(module_name)
        if not path.is_file():
            raise RunError(f"no such file: {path}")
        # As ``python path/to/file.py`` does: its directory first on sys.path, so the
        # operator imports the modules beside it (examples/website_operator.py, website.py).
        folder = str(path.resolve().parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise RunError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)
    else:
        # ``python -m`` and ``python -c`` import from the current directory; the installed
        # ``watchkeeper`` script has its own directory first instead, so put the cwd first.
        cwd = os.getcwd()
        if not sys.path or sys.path[0] != cwd:
            sys.path.insert(0, cwd)
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise RunError(f"cannot import {module_name!r}: {exc}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise RunError(f"{module_name!r} has no attribute {attr!r}") from None


def check_setup(setup: Any, target: str) -> None:
    """Refuse, before connecting, a target that cannot be called as ``setup(client)``: the
    user's mistake gets one line, not a TypeError traceback from deep inside ``run``."""
    usage = "a function that takes a Client and returns a watchkeeper.Operator"
    if isinstance(setup, wk.Operator):
        raise RunError(f"{target} is an Operator; TARGET must name {usage} (def setup(client))")
    if not callable(setup):
        raise RunError(f"{target} is a {type(setup).__name__}, not {usage}")
    try:
        signature = inspect.signature(setup)
    except (TypeError, ValueError):
        return  # a builtin or extension callable without one: let the call tell
    try:
        signature.bind(None)
    except TypeError:
        raise RunError(f"{target}{signature} cannot be called with one argument (the Client); "
                       f"TARGET must name {usage}") from None


async def run(options: RunOptions) -> int:
    setup = load_target(options.target)
    module_name, _, attr = options.target.partition(":")
    check_setup(setup, f"{module_name}:{attr or 'setup'}")
    async with await wk.Client.from_env(options.kubeconfig, options.context) as client:
        made = setup(client)
        made = await made if inspect.isawaitable(made) else made
        operators = list(made) if isinstance(made, list | tuple) else [made]
        for operator in operators:
            if not isinstance(operator, wk.Operator):
                raise RunError(
                    f"{options.target} must return a watchkeeper.Operator, "
                    f"not {type(operator).__name__}"
                )
        if not operators:
            raise RunError(f"{options.target} returned no watchkeeper.Operator")
        probes = None
        if options.probe_port is not None:
            probes = HealthServer(options.probe_host, options.probe_port)
            try:
                await probes.start()
            except OSError as exc:
                await probes.stop()
                where = f"{options.probe_host}:{options.probe_port}"
                why = os.strerror(exc.errno) if exc.errno else str(exc)
                raise RunError(
                    f"cannot serve probes and metrics on {where}: {why}; choose another port "
                    "with --probe-port or WK_PROBE_PORT (0 picks a free one, -1 disables them)"
                ) from None
            log.info("probes and metrics on %s", probes.url)
        elector = None
        if options.leader_election:
            lease = options.lease_name or f"{operators[0].controller.name}-leader"
            leases = client.api(
                "leases.coordination.k8s.io",
                namespace=options.lease_namespace or client.default_namespace,
            )
            elector = LeaderElector(
                leases, lease.replace(" ", "-").replace(".", "-"),
                lease_duration=options.lease_duration, renew_deadline=options.renew_deadline,
                retry_period=options.retry_period,
            )
        try:
            await runtime.run(*operators, probes=probes, leader_election=elector,
                              probe_check_interval=options.probe_check_interval)
        except wk.WatchkeeperError as exc:
            if caller_error(exc) is not None:
                raise  # a request only the caller can fix: the CLI exits with its own code
            log.error("%s", exc)
            return 1
        finally:
            if probes is not None:
                await probes.stop()
    return 0


async def run_operator(
    operator: wk.Operator,
    probes: HealthServer | None,
    elector: LeaderElector | None = None,
    *,
    probe_check_interval: float = 5.0,
) -> None:
    """One operator through ``watchkeeper.runtime.run``, handling signals only if its
    controller's config says so (the tests run it beside pytest with them off)."""
    await runtime.run(operator, probes=probes, leader_election=elector,
                      handle_signals=operator.controller.config.handle_signals,
                      probe_check_interval=probe_check_interval)


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop ``--loop`` names: asyncio's own (None), or uvloop's, which the
    ``watchkeeper[fast]`` extra installs (libuv: less CPU per wake-up, docs/decisions.md)."""
    if name == "asyncio":
        return None
    if name != "uvloop":
        raise RunError(f"unknown event loop {name!r}: asyncio or uvloop")
    try:
        import uvloop
    except ImportError:
        raise RunError("--loop uvloop needs uvloop: pip install 'watchkeeper[fast]'") from None
    return uvloop.new_event_loop


def run_sync(options: RunOptions) -> int:
    try:
        with asyncio.Runner(loop_factory=loop_factory(options.loop)) as runner:
            return runner.run(run(options))
    except (RunError, wk.ConfigError) as exc:  # a kubeconfig or context that does not work
        print(f"error: {exc}", file=sys.stderr)
        return 2
