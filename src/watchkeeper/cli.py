"""The ``watchkeeper`` command: watch a resource, run controllers, show their status; ``sim``
and ``demo`` come with the simulator distribution (``pip install watchkeeper-sim``).

A mistake a user can fix (a missing kubeconfig, a busy port, a selector the server rejects)
ends the command with one ``error: ...`` line on stderr and an exit code from the table
below, never a traceback; docs/errors.md lists the same table.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import logging
import sys
from typing import Any, NoReturn

import click
import yaml

import watchkeeper as wk
from watchkeeper import meta
from watchkeeper._runner import RunOptions, caller_error, run_sync
from watchkeeper.client import _fast

EXIT_FAILED = 1
"""It ran and then stopped working: a watch or controller past max-unhealthy, leadership
lost, ``status`` of a controller that is not ready."""
EXIT_SETUP = 2
"""It could not start: bad flags, an unusable kubeconfig or context, a busy port, an
unwritable file, a target that does not load, a status URL that does not answer."""
EXIT_REJECTED = 3
"""The API server rejected the request as the caller's mistake (400 BadRequest, 422
Invalid: a malformed label selector): retrying cannot help, the command line must change."""
EXIT_INTERRUPTED = 130


def fail(message: str, code: int) -> NoReturn:
    """One ``error:`` line on stderr and exit ``code``: what a person can act on, no traceback."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def rejected(err: wk.ApiError) -> NoReturn:
    """Exit at once on an error no retry or administrator can fix."""
    fail(f"the API server rejected the request; fix it and run again: {err}", EXIT_REJECTED)


COMMANDS_GROUP = "watchkeeper.commands"
"""The entry-point group other distributions add commands to: watchkeeper-sim declares
``sim`` and ``demo`` there. The runtime finds them through it and never imports the
simulator by name, so its wheel works alone."""

SIM_COMMANDS = {
    "sim": "Run the embedded API simulator (comes with watchkeeper-sim).",
    "demo": "Simulator + watcher through a scripted sequence of faults (watchkeeper-sim).",
}
"""Commands that come with the simulator distribution: listed even when it is missing, so
``--help`` and the command itself can say how to get them."""


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in importlib.metadata.entry_points(group=COMMANDS_GROUP):
        found.setdefault(ep.name, ep)
    return found


def _not_installed(name: str) -> click.Command:
    """A stand-in for a simulator command that says how to get it: the runtime carries no
    test-only dependency, so the simulator is a separate install."""
    @click.command(name, help=SIM_COMMANDS[name], context_settings={
        "ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []})
    def missing() -> None:
        fail(f"`watchkeeper {name}` comes with the simulator: pip install watchkeeper-sim",
             EXIT_SETUP)

    return missing


def _plugin_command(name: str) -> click.Command | None:
    """The command an installed distribution declares as ``name`` in COMMANDS_GROUP."""
    ep = _entry_points().get(name)
    if ep is None:
        return _not_installed(name) if name in SIM_COMMANDS else None
    try:
        command = ep.load()
    except ModuleNotFoundError as exc:
        package = ep.module.split(".")[0]
        if name not in SIM_COMMANDS or exc.name is None or not (
                exc.name == package or exc.name.startswith(package + ".")):
            raise  # installed but broken: show why
        return _not_installed(name)  # declared, but its package is gone (a partial uninstall)
    if not isinstance(command, click.Command):
        raise TypeError(f"entry point {name} = {ep.value} in {COMMANDS_GROUP} is not a click "
                        f"command but {type(command).__name__}")
    return command


class _Main(click.Group):
    """The runtime's commands plus those of installed distributions (the simulator's),
    looked up only when asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *SIM_COMMANDS, *_entry_points()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        own = super().get_command(ctx, cmd_name)
        return own if own is not None else _plugin_command(cmd_name)


@click.group(cls=_Main)
@click.version_option(wk.__version__, prog_name="watchkeeper", message=(
    "%(prog)s %(version)s (the watch stream's C part: "
    + ("on)" if _fast.ACTIVE else "off: its Python runs)")))
def main() -> None:
    """Kubernetes watches and controllers that are kind to the API server."""


class EventPrinter:
    """One stdout line (or YAML document) per object event.

    ``-o name`` prints ``EXISTING``/``APPLIED``/``DELETED`` and the object's reference.
    ``-o json|yaml`` print watch events, ``{"type": "ADDED"|"MODIFIED"|"DELETED", "object":
    {...}}``, as ``kubectl get -w -o json --output-watch-events`` does (objects that exist
    at start are ADDED), so a delete is never mistaken for an update; with
    ``events=False`` they print the bare object, as kubectl does without that flag.
    """

    def __init__(self, output: str, events: bool = True) -> None:
        self.output, self.events = output, events
        self._known: set[tuple[str | None, str]] = set()

    def event_type(self, event: wk.InitApply | wk.Apply | wk.Delete) -> str:
        """ADDED the first time a key is seen, MODIFIED after, DELETED on a delete (the
        watcher's ``Apply`` does not say which, and kubectl prints the server's type)."""
        key = meta.key(event.obj)
        if isinstance(event, wk.Delete):
            self._known.discard(key)
            return "DELETED"
        if key in self._known:
            return "MODIFIED"
        self._known.add(key)
        return "ADDED"

    def format(
        self, event: wk.InitApply | wk.Apply | wk.Delete, type_meta: tuple[str, str] | None = None
    ) -> str:
        """``type_meta`` (apiVersion, kind) fills in what a LIST's items lack on the wire,
        as kubectl does from the list's kind; an object's own values are kept."""
        kind = self.event_type(event)
        obj = event.obj
        if self.output == "name":
            verb = {wk.InitApply: "EXISTING", wk.Apply: "APPLIED", wk.Delete: "DELETED"}[
                type(event)]
            return f"{verb:<9} {meta.ref(obj):<40} rv={meta.resource_version(obj)}"
        if type_meta is not None:
            obj = {"apiVersion": type_meta[0], "kind": type_meta[1], **obj}
        doc: Any = {"type": kind, "object": obj} if self.events else obj
        if self.output == "json":
            return json.dumps(doc, separators=(",", ":"))
        return "---\n" + yaml.safe_dump(doc, sort_keys=False).rstrip()


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
    watch_events: bool = True,
) -> int:
    async with await wk.Client.from_env(kubeconfig, context) as client:
        ns: str | None = None if all_namespaces else (namespace or client.default_namespace)
        api = client.api(resource, namespace=ns)
        w = wk.watcher(api, wk.WatchConfig(label_selector=selector, max_unhealthy=max_unhealthy))
        status = StatusLine(w.health)
        printer = EventPrinter(output, watch_events)
        type_meta: tuple[str, str] | None = None
        loop = asyncio.get_running_loop()
        async for event in w:
            if isinstance(event, wk.InitApply | wk.Apply | wk.Delete):
                obj = event.obj
                fill = output != "name" and ("kind" not in obj or "apiVersion" not in obj)
                if fill and type_meta is None:
                    res = await api.resource()  # resolved already: the watcher listed it
                    type_meta = (res.api_version, res.kind)
                click.echo(printer.format(event, type_meta if fill else None))
            status.on_event(event, loop.time())
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
    "--output-watch-events/--no-output-watch-events", default=True, show_default=True,
    help='With -o json|yaml, print each change as {"type": ADDED|MODIFIED|DELETED, '
         '"object": ...} like kubectl get -w --output-watch-events; --no-output-watch-events '
         "prints bare objects (as kubectl does by default: a delete then looks like an update).",
)
@click.option(
    "--max-unhealthy", type=float, default=300.0, show_default=True,
    help="Exit with status 1 after this many seconds without a working watch (0 = never).",
)
def watch(
    resource: str,
    namespace: str | None,
    all_namespaces: bool,
    selector: str | None,
    kubeconfig: str | None,
    context: str | None,
    output: str,
    output_watch_events: bool,
    max_unhealthy: float,
) -> None:
    """Print changes to RESOURCE as they happen, like kubectl get -w.

    Exit status: 1 when the watch has not worked for --max-unhealthy, 2 when it cannot
    start (kubeconfig, context), 3 when the server rejects the request itself (a malformed
    selector: 400 BadRequest, 422 Invalid), 130 on Ctrl-C."""
    if namespace and all_namespaces:
        raise click.UsageError("use either --namespace or --all-namespaces, not both")
    try:
        code = asyncio.run(
            _watch(resource, namespace, all_namespaces, selector, kubeconfig, context, output,
                   max_unhealthy or None, output_watch_events)
        )
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except Exception as exc:
        err = caller_error(exc)
        if err is not None:
            rejected(err)
        if isinstance(exc, wk.ConfigError | ValueError):
            fail(str(exc), EXIT_SETUP)
        if isinstance(exc, wk.WatcherUnhealthy | wk.WatchGaveUp | wk.ApiError):
            fail(str(exc), EXIT_FAILED)
        raise
    sys.exit(code)


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
@click.option("--loop", type=click.Choice(["asyncio", "uvloop"]), default="asyncio",
              show_default=True, envvar="WK_LOOP",
              help="The event loop; uvloop needs the fast extra (pip install "
                   "'watchkeeper[fast]').")
def run_command(
    target: str, kubeconfig: str | None, context: str | None, probe_host: str, probe_port: int,
    leader_election: bool, lease_name: str | None, lease_namespace: str | None,
    lease_duration: float, renew_deadline: float, retry_period: float,
    log_format: str, verbose: bool, loop: str,
) -> None:
    """Run an operator: TARGET is module:attr or file.py:attr, a function that takes a
    Client and returns a watchkeeper.Operator (or a list of them, run together by
    watchkeeper.run: one signal drains them all). A module is imported with the current
    directory first on sys.path, as ``python -m`` does; a file with its own directory
    first, as ``python file.py`` does (it may import the modules beside it).

    Exit status: 0 after SIGTERM, 1 when the controller stops working (max-unhealthy,
    leadership lost), 2 when it cannot start (target, kubeconfig, context, probe port), 3
    when the server rejects a request itself (400 BadRequest, 422 Invalid)."""
    from watchkeeper.ops.logs import setup_logging

    setup_logging(log_format, logging.DEBUG if verbose else logging.INFO)
    try:
        code = run_sync(RunOptions(
            target, kubeconfig, context, probe_host, None if probe_port < 0 else probe_port,
            leader_election, lease_name, lease_namespace, lease_duration, renew_deadline,
            retry_period, loop=loop,
        ))
    except Exception as exc:
        err = caller_error(exc)
        if err is not None:
            rejected(err)
        if isinstance(exc, wk.ApiError):
            fail(str(exc), EXIT_FAILED)
        raise
    sys.exit(code)


class _ManifestDumper(yaml.SafeDumper):
    """YAML as a person writes a manifest: multi-line descriptions as ``|`` blocks."""


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data,
                                   style="|" if "\n" in data else None)


_ManifestDumper.add_representer(str, _represent_str)


def manifests_yaml(manifests: list[dict[str, Any]]) -> str:
    """Documents separated by ``---``, keys in the order built, long lines kept whole."""
    return yaml.dump_all(manifests, Dumper=_ManifestDumper, sort_keys=False, width=100,
                         explicit_start=True)


def _load_named(target: str, what: str, attr: str = "attr") -> object:
    """The object ``module:attr`` or ``path/to/file.py:attr`` names; a target that names
    none, or does not load, is one ``error:`` line and exit 2."""
    from watchkeeper._runner import RunError, load_target

    if ":" not in target:
        fail(f"{target!r}: name the {what}, as module:{attr} or path/to/file.py:{attr}",
             EXIT_SETUP)
    try:
        return load_target(target)
    except RunError as exc:
        fail(str(exc), EXIT_SETUP)
    except Exception as exc:  # the user's module failed while importing: say how, in one line
        fail(f"cannot load {target}: {type(exc).__name__}: {exc}", EXIT_SETUP)


def _load_resource_class(target: str) -> type[wk.CustomResource]:
    """``module:Class`` or ``file.py:Class``, which must be a ``wk.CustomResource``."""
    obj = _load_named(target, "class", "Class")
    if not (isinstance(obj, type) and issubclass(obj, wk.CustomResource)):
        fail(f"{target} is {obj!r}, not a wk.CustomResource class", EXIT_SETUP)
    return obj


@main.command("crd")
@click.argument("targets", nargs=-1, required=True, metavar="MODULE:CLASS...")
def crd_command(targets: tuple[str, ...]) -> None:
    """Print the CustomResourceDefinition of each resource class as YAML, for
    ``kubectl apply -f -``. A target is module:Class or path/to/file.py:Class (a
    wk.CustomResource subclass); several versions of one resource make one CRD.

    Exit status: 2 when a target does not load or cannot become a CRD (the message names
    the class and field)."""
    classes = [_load_resource_class(t) for t in targets]
    try:
        manifests = wk.crds(*classes)
    except wk.SchemaError as exc:
        fail(str(exc), EXIT_SETUP)
    click.echo(manifests_yaml(manifests), nl=False)


@main.command("webhooks")
@click.argument("target", metavar="MODULE:ATTR")
@click.option("--name", default=None, help="Name of the webhook configurations (default: "
              "the names the server's WebhookCerts publishes the caBundle to, else the "
              "Service's name).")
@click.option("--service", default=None, help="The Service in front of the webhook server "
              "(default: the WebhookCerts' service).")
@click.option("--namespace", default=None, help="The Service's namespace (default: the "
              "WebhookCerts' namespace).")
@click.option("--port", default=443, show_default=True, type=click.IntRange(1, 65535),
              help="The Service's port.")
@click.option("--url", default=None, help="https://host:port instead of a Service (local "
              "development: the API server calls this machine).")
def webhooks_command(target: str, name: str | None, service: str | None,
                     namespace: str | None, port: int, url: str | None) -> None:
    """Print the Validating/MutatingWebhookConfiguration of a WebhookServer's admission
    handlers, and the CRD of each conversion handler with its webhook stanza, as YAML for
    ``kubectl apply -f -``. MODULE:ATTR (or path/to/file.py:ATTR) is a
    wk.webhooks.WebhookServer. No caBundle: its CertificateManager publishes it.

    Exit status: 2 when the target does not load, is no WebhookServer, or its handlers
    cannot be registered as declared (the message names the path)."""
    from watchkeeper.webhooks import WebhookServer
    from watchkeeper.webhooks.registration import (
        Endpoint,
        RegistrationError,
        registration_manifests,
    )

    server = _load_named(target, "server")
    if not isinstance(server, WebhookServer):
        fail(f"{target} is {server!r}, not a wk.webhooks.WebhookServer", EXIT_SETUP)
    certs = server.certificates.config if server.certificates is not None else None
    service = service or (certs.service if certs else None)
    namespace = namespace or (certs.namespace if certs else None)
    default = name or service or ""
    validating = name or (certs.validating[0] if certs and certs.validating else default)
    mutating = name or (certs.mutating[0] if certs and certs.mutating else default)
    try:
        endpoint = Endpoint(service, namespace, port, url)
        if not (validating and mutating):
            raise RegistrationError("name the webhook configurations: pass --name")
        manifests = registration_manifests(server, endpoint, validating=validating,
                                           mutating=mutating)
    except (RegistrationError, wk.SchemaError) as exc:
        fail(str(exc), EXIT_SETUP)
    click.echo(manifests_yaml(manifests), nl=False)


@main.command()
@click.argument("url")
def status(url: str) -> None:
    """Pretty-print a running controller's /readyz?verbose (URL like http://host:8080, or
    host:8080 for plain HTTP). Exit status: 0 ready, 1 not ready, 2 no answer."""
    from watchkeeper.ops.status import print_status

    sys.exit(asyncio.run(print_status(url)))


if __name__ == "__main__":
    main()
