"""The simulator's commands, ``sim`` and ``demo``.

They come with this distribution: ``watchkeeper-sim sim|demo`` is its own console script, and
the runtime's ``watchkeeper sim|demo`` mounts these same commands when ``watchkeeper_sim`` is
importable (and otherwise says, in one line, to ``pip install watchkeeper-sim``). Mistakes a
user can fix end with one ``error:`` line and the runtime CLI's exit codes (docs/errors.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import sys
from typing import NoReturn

import click

EXIT_SETUP = 2
"""It could not start: a busy port, an unwritable kubeconfig (as ``watchkeeper.cli``)."""


def fail(message: str, code: int) -> NoReturn:
    """One ``error:`` line on stderr and exit ``code``: what a person can act on."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


@click.command()
@click.option("--port", type=int, default=8001, show_default=True)
@click.option("--kubeconfig-out", type=click.Path(dir_okay=False), default=None,
              help="Write a kubeconfig for kubectl that points at the simulator.")
@click.option("--empty", is_flag=True, help="Start without the sample objects.")
@click.option("--tls/--no-tls", default=True, show_default=True,
              help="Serve HTTPS with a throw-away CA (written into the kubeconfig). kubectl "
                   "sends no bearer token over plain HTTP, so --no-tls is for other clients.")
def sim(port: int, kubeconfig_out: str | None, empty: bool, tls: bool) -> None:
    """Run the embedded API simulator on 127.0.0.1 until interrupted."""
    from watchkeeper_sim.server import run_simulator

    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(run_simulator("127.0.0.1", port, kubeconfig_out, not empty, tls=tls))
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
