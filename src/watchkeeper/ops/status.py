"""``watchkeeper status URL``: a running controller's /readyz, as a table."""

from __future__ import annotations

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
        console.print(f"[red]cannot read {target}: {exc}[/red]")
        return 2
    render(body, console)
    return 0 if body.get("ready") else 1
