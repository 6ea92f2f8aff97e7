"""What ``watchkeeper run module:attr`` does: load the user's operator, serve probes and
metrics, optionally elect a leader, run until a signal, exit non-zero on failure.

The probe server runs supervised: if it stops listening it is restarted (1 s doubling to
30 s; /readyz shows it degraded meanwhile) and after 5 failed restarts the controller is
drained and the run ends with ``TaskDied`` naming "probe server" (exit status 1)."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import watchkeeper as wk
from watchkeeper.backoff import ExponentialBackoff
from watchkeeper.leader import LeaderElector
from watchkeeper.ops import HealthServer
from watchkeeper.supervisor import Supervisor

log = logging.getLogger("watchkeeper.run")


class RunError(Exception):
    """The target could not be loaded or is not an operator; the message says why."""


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


def load_target(target: str) -> Any:
    """``package.module:attr`` or ``path/to/file.py:attr`` (attr defaults to ``setup``)."""
    module_name, _, attr = target.partition(":")
    attr = attr or "setup"
    if module_name.endswith(".py") or "/" in module_name:
        path = Path(module_name)
        if not path.is_file():
            raise RunError(f"no such file: {path}")
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


async def run(options: RunOptions) -> int:
    setup = load_target(options.target)
    async with await wk.Client.from_env(options.kubeconfig, options.context) as client:
        made = setup(client)
        operator = await made if inspect.isawaitable(made) else made
        if not isinstance(operator, wk.Operator):
            raise RunError(
                f"{options.target} must return a watchkeeper.Operator, "
                f"not {type(operator).__name__}"
            )
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
            lease = options.lease_name or f"{operator.controller.triggers[0].name}-leader"
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
            await run_operator(operator, probes, elector,
                               probe_check_interval=options.probe_check_interval)
        except wk.WatchkeeperError as exc:
            from watchkeeper.cli import caller_error

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
    """Run the operator's controller with its probe server supervised beside it; raise a
    ``WatchkeeperError`` (ControllerUnhealthy, LeadershipLost, TaskDied) on failure."""
    sup = Supervisor("watchkeeper run")
    stop = asyncio.Event()
    if probes is not None:
        probes.add_controller(operator.controller).add_supervisor(sup)
        if elector is not None:
            probes.add_elector(elector)
    async with sup:
        if probes is not None:
            sup.spawn("probe server", lambda: probes.serve(probe_check_interval),
                      restart="backoff",
                      backoff=ExponentialBackoff(1.0, 30.0, 2.0, 0.0, max_retries=5))
        # A dead probe server drains the controller, then the run ends with its TaskDied.
        sup.failed_future.add_done_callback(lambda _f: stop.set())
        await operator.controller.run(
            operator.reconcile, operator.error_policy, operator.context,
            elector=elector, stop=stop,
        )
        failure = sup.failure
        if failure is not None:
            raise failure


def run_sync(options: RunOptions) -> int:
    try:
        return asyncio.run(run(options))
    except (RunError, wk.ConfigError) as exc:  # a kubeconfig or context that does not work
        print(f"error: {exc}", file=sys.stderr)
        return 2
