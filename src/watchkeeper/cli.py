"""The ``watchkeeper`` command: watch a resource, run the simulator, run the demo."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from typing import Any

import click
import yaml

import watchkeeper as wk
from watchkeeper import meta


@click.group()
@click.version_option(wk.__version__, prog_name="watchkeeper")
def main() -> None:
    """Kubernetes watches and controllers that are kind to the API server."""


def _format(event: wk.Event, output: str) -> str | None:
    if isinstance(event, wk.InitApply | wk.Apply | wk.Delete):
        obj = event.obj
        if output == "json":
            return json.dumps(obj, separators=(",", ":"))
        if output == "yaml":
            return "---\n" + yaml.safe_dump(obj, sort_keys=False).rstrip()
        verb = {wk.InitApply: "EXISTING", wk.Apply: "APPLIED", wk.Delete: "DELETED"}[type(event)]
        return f"{verb:<9} {meta.ref(obj):<40} rv={meta.resource_version(obj)}"
    return None


class StatusLine:
    """What the watcher is doing, on stderr, one line per change (never per event)."""

    def __init__(self, health: wk.WatchHealth, stream: Any = sys.stderr) -> None:
        self.health, self.stream = health, stream
        self._last = ""

    def show(self, text: str) -> None:
        if text != self._last:
            self._last = text
            click.echo(text, file=self.stream)

    def on_event(self, event: wk.Event, now: float) -> None:
        h = self.health
        if isinstance(event, wk.WatchError):
            wait = f"; next try in {event.retry_in:.1f} s" if event.retry_in else "; retrying now"
            self.show(
                f"[{h.state.value}] {type(event.error).__name__} "
                f"(attempt {h.consecutive_failures}{wait}): {event.error}"
            )
        elif isinstance(event, wk.InitStart):
            self.show(f"[{h.state.value}] listing {h.resource} ...")
        elif h.state is wk.WatchState.HEALTHY:
            self.show(f"[healthy] watching {h.resource}")


async def _watch(
    resource: str,
    namespace: str | None,
    all_namespaces: bool,
    selector: str | None,
    kubeconfig: str | None,
    context: str | None,
    output: str,
    max_unhealthy: float | None,
) -> int:
    async with await wk.Client.from_env(kubeconfig, context) as client:
        ns: str | None = None if all_namespaces else (namespace or client.default_namespace)
        api = client.api(resource, namespace=ns)
        w = wk.watcher(api, wk.WatchConfig(label_selector=selector, max_unhealthy=max_unhealthy))
        status = StatusLine(w.health)
        loop = asyncio.get_running_loop()
        try:
            async for event in w:
                line = _format(event, output)
                if line is not None:
                    click.echo(line)
                status.on_event(event, loop.time())
        except wk.WatcherUnhealthy as exc:
            click.echo(f"error: {exc}", err=True)
            return 2
    return 0


@main.command()
@click.argument("resource")
@click.option("-n", "--namespace", default=None, help="Namespace (default: the context's).")
@click.option("-A", "--all-namespaces", is_flag=True, help="Watch every namespace.")
@click.option("-l", "--selector", default=None, help="Label selector, e.g. app=web.")
@click.option("--kubeconfig", default=None, help="Path to a kubeconfig file.")
@click.option("--context", default=None, help="Kubeconfig context to use.")
@click.option(
    "-o", "--output", type=click.Choice(["name", "json", "yaml"]), default="name", show_default=True
)
@click.option(
    "--max-unhealthy", type=float, default=300.0, show_default=True,
    help="Exit with status 2 after this many seconds without a working watch (0 = never).",
)
def watch(
    resource: str,
    namespace: str | None,
    all_namespaces: bool,
    selector: str | None,
    kubeconfig: str | None,
    context: str | None,
    output: str,
    max_unhealthy: float,
) -> None:
    """Print changes to RESOURCE as they happen, like kubectl get -w."""
    if namespace and all_namespaces:
        raise click.UsageError("use either --namespace or --all-namespaces, not both")
    try:
        code = asyncio.run(
            _watch(resource, namespace, all_namespaces, selector, kubeconfig, context, output,
                   max_unhealthy or None)
        )
    except (wk.ConfigError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


@main.command()
@click.option("--port", type=int, default=8001, show_default=True)
@click.option("--kubeconfig-out", type=click.Path(dir_okay=False), default=None,
              help="Write a kubeconfig for kubectl that points at the simulator.")
@click.option("--empty", is_flag=True, help="Start without the sample objects.")
@click.option("--tls/--no-tls", default=True, show_default=True,
              help="Serve HTTPS with a throw-away CA (written into the kubeconfig). kubectl "
                   "sends no bearer token over plain HTTP, so --no-tls is for other clients.")
def sim(port: int, kubeconfig_out: str | None, empty: bool, tls: bool) -> None:
    """Run the embedded API simulator on 127.0.0.1 until interrupted."""
    from watchkeeper.testing.apiserver import run_simulator

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_simulator("127.0.0.1", port, kubeconfig_out, not empty, tls=tls))


@main.command("run")
@click.argument("target")
@click.option("--kubeconfig", default=None, help="Path to a kubeconfig file.")
@click.option("--context", default=None, help="Kubeconfig context to use.")
@click.option("--probe-host", default="0.0.0.0", show_default=True, envvar="WK_PROBE_HOST")
@click.option("--probe-port", type=int, default=8080, show_default=True, envvar="WK_PROBE_PORT",
              help="Port for /healthz /readyz /metrics (0 picks one; -1 disables).")
@click.option("--leader-election/--no-leader-election", default=False, envvar="WK_LEADER_ELECTION",
              help="Reconcile only while holding a Lease (for several replicas).")
@click.option("--lease-name", default=None, envvar="WK_LEASE_NAME")
@click.option("--lease-namespace", default=None, envvar="WK_LEASE_NAMESPACE")
@click.option("--lease-duration", type=float, default=15.0, show_default=True,
              help="Seconds a lease is valid without renewal (client-go's default).")
@click.option("--renew-deadline", type=float, default=10.0, show_default=True,
              help="A leader that cannot renew within this many seconds stops reconciling.")
@click.option("--retry-period", type=float, default=2.0, show_default=True)
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text",
              show_default=True, envvar="WK_LOG_FORMAT")
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
def run_command(
    target: str, kubeconfig: str | None, context: str | None, probe_host: str, probe_port: int,
    leader_election: bool, lease_name: str | None, lease_namespace: str | None,
    lease_duration: float, renew_deadline: float, retry_period: float,
    log_format: str, verbose: bool,
) -> None:
    """Run an operator: TARGET is module:attr or file.py:attr, a function that takes a
    Client and returns a watchkeeper.Operator."""
    from watchkeeper._runner import RunOptions, run_sync
    from watchkeeper.ops.logs import setup_logging

    setup_logging(log_format, logging.DEBUG if verbose else logging.INFO)
    sys.exit(run_sync(RunOptions(
        target, kubeconfig, context, probe_host, None if probe_port < 0 else probe_port,
        leader_election, lease_name, lease_namespace, lease_duration, renew_deadline,
        retry_period,
    )))


@main.command()
@click.argument("url")
def status(url: str) -> None:
    """Pretty-print a running controller's /readyz?verbose (URL like http://host:8080)."""
    from watchkeeper.ops.status import print_status

    sys.exit(asyncio.run(print_status(url)))


@main.command()
@click.option("--fast", is_flag=True, help="Shorter outage for a quick look.")
@click.option("--operator", default=None, metavar="FILE.py:setup",
              help="Also run this operator (like examples/widget_operator.py:setup) through "
                   "an outage and a CRD re-creation.")
def demo(fast: bool, operator: str | None) -> None:
    """Simulator + watcher through a scripted sequence of faults, with a summary."""
    from watchkeeper._demo import run_demo

    sys.exit(asyncio.run(run_demo(fast=fast, operator=operator)))


if __name__ == "__main__":
    main()
