"""``watchkeeper status URL``: a running controller's /readyz, as a table."""

from __future__ import annotations

import sys
import time
from typing import Any

import aiohttp
from rich.console import Console
from rich.table import Table


def _age(since: float | None) -> str:
    if since is None:
        return "-"
    secs = max(0, int(time.time() - since))
    return f"{secs // 3600}h{secs % 3600 // 60}m" if secs >= 3600 else f"{secs // 60}m{secs % 60}s"


def render(body: dict[str, Any], console: Console) -> None:
    table = Table(title="ready" if body.get("ready") else "NOT READY")
    for col in ("resource", "state", "for", "failures", "objects", "last error"):
        table.add_column(col)
    for w in body.get("watches", []):
        table.add_row(
            str(w.get("resource")), str(w.get("state", "-")), _age(w.get("since")),
            str(w.get("consecutive_failures", "-")), str(w.get("objects", "-")),
            str(w.get("last_error") or ""),
        )
    console.print(table)
    for c in body.get("controllers", []):
        _render_controller(c, console)
    for s in body.get("supervisors", []):
        _render_tasks(str(s.get("resource")), s, console)
    _render_electors(body.get("electors") or [], console)
    _render_webhooks(body.get("webhooks") or [], console)


def _render_webhooks(servers: list[dict[str, Any]], console: Console) -> None:
    """Each webhook server: listening or not, reviews in flight, counts per handler."""
    for w in servers:
        table = Table(title=f"{w.get('resource')}: {w.get('state')}, "
                            f"{w.get('in_flight', 0)} in flight")
        for col in ("path", "requests", "denials", "errors"):
            table.add_column(col)
        for path, n in (w.get("handlers") or {}).items():
            table.add_row(str(path), str(n.get("requests")), str(n.get("denials")),
                          str(n.get("errors")))
        console.print(table)


def _render_electors(electors: list[dict[str, Any]], console: Console) -> None:
    """Leader election: who holds each lease, this replica's state and since when, the
    last error and how many attempts failed in a row; why it is not ready, if so."""
    if not electors:
        return
    table = Table(title="leader election")
    for col in ("lease", "identity", "holder", "state", "for", "failures", "last error"):
        table.add_column(col)
    for e in electors:
        table.add_row(
            str(e.get("lease")), str(e.get("identity")), str(e.get("holder") or "-"),
            str(e.get("state", "-")), _age(e.get("since")),
            f"{e.get('consecutive_failures', 0)} in a row, {e.get('failures', 0)} in total",
            str(e.get("last_error") or ""),
        )
    console.print(table)
    for e in electors:
        if not e.get("ready", True):
            console.print(f"[red]not ready[/red] leader election: {e.get('problem')}")


def _render_controller(c: dict[str, Any], console: Console) -> None:
    """Reconcile counts, why it is not ready, the last error, failing and stuck objects."""
    counts = c.get("reconciles") or {}
    table = Table(title=f"controller {c.get('controller')}: {c.get('state', '-')}")
    for col in ("succeeded", "requeued", "failed", "failing objects", "last error", "when"):
        table.add_column(col)
    last = c.get("last_error")
    if last and c.get("last_error_object"):
        last = f"{c['last_error_object']}: {last}"
    table.add_row(
        str(counts.get("success", 0)), str(counts.get("requeue", 0)),
        str(counts.get("error", 0)), str(c.get("failing_objects", 0)), str(last or ""),
        f"{_age(c.get('last_error_at'))} ago" if c.get("last_error_at") else "",
    )
    console.print(table)
    for part, why in (c.get("problems") or {}).items():
        console.print(f"[red]not ready[/red] {part}: {why}")
    failing = c.get("failing") or []
    if failing:
        ft = Table(title="failing objects (longest first)")
        for col in ("object", "failures", "for", "last error"):
            ft.add_column(col)
        for f in failing:
            ft.add_row(str(f.get("object")), str(f.get("failures")), _age(f.get("since")),
                       str(f.get("last_error") or ""))
        console.print(ft)
    for st in c.get("stuck") or []:
        console.print(f"[red]stuck[/red] reconcile of {st.get('object')} running for "
                      f"{st.get('running_for')} s")
    for trigger, n in (c.get("mapper_errors") or {}).items():
        if n:
            console.print(f"[yellow]mapper errors[/yellow] {trigger}: {n}")
    _render_tasks(f"controller {c.get('controller')}", c, console, only_problems=True)


def _render_tasks(
    owner: str, body: dict[str, Any], console: Console, only_problems: bool = False
) -> None:
    tasks = [t for t in body.get("tasks") or []
             if not only_problems or t.get("state") in ("degraded", "failed")]
    if not tasks:
        return
    table = Table(title=f"{owner}: tasks")
    for col in ("task", "state", "for", "restarts", "last error"):
        table.add_column(col)
    for t in tasks:
        table.add_row(str(t.get("task")), str(t.get("state")), _age(t.get("since")),
                      str(t.get("restarts", 0)), str(t.get("last_error") or ""))
    console.print(table)


def readyz_url(url: str) -> str:
    """The verbose readiness URL; ``host:port`` without a scheme means plain HTTP, as the
    probe server speaks (``urlparse`` would take ``localhost:8080``'s host for a scheme)."""
    if "://" not in url:
        url = "http://" + url
    return url.rstrip("/") + "/readyz?verbose"


async def print_status(url: str) -> int:
    console = Console()
    target = readyz_url(url)
    try:
        async with aiohttp.ClientSession() as session, session.get(
            target, timeout=aiohttp.ClientTimeout(total=10)
        ) as resp:
            body = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        print(f"error: cannot read {target}: {exc or type(exc).__name__}", file=sys.stderr)
        return 2
    if not isinstance(body, dict):
        print(f"error: {target} did not answer with a watchkeeper status (a JSON object)",
              file=sys.stderr)
        return 2
    render(body, console)
    return 0 if body.get("ready") else 1
