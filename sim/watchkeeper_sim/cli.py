"""The simulator's commands, ``sim`` and ``demo``.

They come with this distribution: ``watchkeeper-sim sim|demo`` is its own console script, and
the runtime's ``watchkeeper sim|demo`` mounts these same commands through the
``watchkeeper.commands`` entry points this distribution declares (without them it says, in
one line, to ``pip install watchkeeper-sim``). Mistakes a
user can fix end with one ``error:`` line and the runtime CLI's exit codes (docs/errors.md).
"""

from __future__ import annotations

import asyncio
import errno
import functools
import os
import shlex
import signal
import sys
from typing import TYPE_CHECKING, NoReturn

import click

if TYPE_CHECKING:
    from watchkeeper_sim.server import ApiServer

EXIT_SETUP = 2
"""It could not start: a busy port, an unwritable kubeconfig (as ``watchkeeper.cli``)."""


def fail(message: str, code: int) -> NoReturn:
    """One ``error:`` line on stderr and exit ``code``: what a person can act on."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def announce(srv: ApiServer, command: str, port: int, kubeconfig_out: str | None) -> None:
    """What a first-time user needs on the screen: where it listens, how to reach it with
    kubectl, how to stop it."""
    click.echo(f"{command}: a Kubernetes v1.28 API simulator is serving at {srv.url}")
    if port == 0:
        click.echo(f"  (--port 0 chose port {srv.port})")
    if kubeconfig_out is not None:
        path = os.path.abspath(kubeconfig_out)
        click.echo(f"kubeconfig (user admin, cluster-admin rights): {path}")
        if srv.tls:
            click.echo(f"  try: kubectl --kubeconfig {shlex.quote(path)} get namespaces")
        else:
            click.echo("  plain HTTP (--no-tls): kubectl sends no token over it; other "
                       "clients can use this kubeconfig")
    else:
        click.echo("No kubeconfig written. For kubectl, stop this and start it with "
                   "--kubeconfig-out FILE:")
        click.echo(f"  {command} --port {port} --kubeconfig-out sim.kubeconfig")
    click.echo("Everything lives in memory and is gone when it stops. "
               f"Stop it with Ctrl-C (or kill -INT {os.getpid()}).")


async def serve(command: str, port: int, kubeconfig_out: str | None, empty: bool, tls: bool
                ) -> None:
    """Serve until SIGINT (Ctrl-C) or SIGTERM, then stop cleanly."""
    from watchkeeper_sim.server import run_simulator

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await run_simulator(
            "127.0.0.1", port, kubeconfig_out, not empty, tls=tls, stop=stop,
            ready=functools.partial(announce, command=command, port=port,
                                    kubeconfig_out=kubeconfig_out))
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    click.echo("Stopped.")


@click.command()
@click.option("--port", type=int, default=8001, show_default=True,
              help="Port on 127.0.0.1 (0 picks a free one and prints it).")
@click.option("--kubeconfig-out", type=click.Path(dir_okay=False), default=None,
              help="Write a kubeconfig for kubectl that points at the simulator.")
@click.option("--empty", is_flag=True, help="Start without the sample objects.")
@click.option("--tls/--no-tls", default=True, show_default=True,
              help="Serve HTTPS with a throw-away CA (written into the kubeconfig). kubectl "
                   "sends no bearer token over plain HTTP, so --no-tls is for other clients.")
@click.pass_context
def sim(ctx: click.Context, port: int, kubeconfig_out: str | None, empty: bool, tls: bool
        ) -> None:
    """Run the embedded API simulator on 127.0.0.1 until Ctrl-C (SIGINT) or SIGTERM. It
    prints where it listens, the kubeconfig it wrote and how to stop it."""
    try:
        asyncio.run(serve(ctx.command_path, port, kubeconfig_out, empty, tls))
    except OSError as exc:
        why = exc.strerror or str(exc)
        if kubeconfig_out is not None and exc.filename == kubeconfig_out:
            fail(f"cannot write the kubeconfig {kubeconfig_out}: {why} "
                 "(choose another path with --kubeconfig-out)", EXIT_SETUP)
        if exc.errno == errno.EADDRINUSE:
            fail(f"port {port} on 127.0.0.1 is already in use; stop what uses it or "
                 "choose another port with --port (0 picks a free one)", EXIT_SETUP)
        fail(f"cannot serve on 127.0.0.1:{port}: {why} (choose another port with --port)",
             EXIT_SETUP)


@click.command()
@click.option("--fast", is_flag=True, help="Shorter outage for a quick look.")
@click.option("--operator", default=None, metavar="FILE.py:setup",
              help="Also run this operator (like examples/widget_operator.py:setup) through "
                   "an outage and a CRD re-creation.")
def demo(fast: bool, operator: str | None) -> None:
    """Simulator + watcher through a scripted sequence of faults, with a summary."""
    from watchkeeper_sim.demo import run_demo

    sys.exit(asyncio.run(run_demo(fast=fast, operator=operator)))


COMMANDS: dict[str, click.Command] = {"sim": sim, "demo": demo}
"""What ``watchkeeper`` (the runtime's CLI) mounts when this package is installed."""


@click.group(commands=COMMANDS)
def main() -> None:
    """watchkeeper's API simulator: sim serves it, demo runs the tour of faults."""


if __name__ == "__main__":
    main()
