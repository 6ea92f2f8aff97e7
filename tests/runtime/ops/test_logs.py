"""JSON logs: structured fields from the watcher, and never a credential."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

import watchkeeper as wk
from watchkeeper.ops.logs import JsonFormatter
from watchkeeper_sim import ApiServer

SECRET = "tok-3f9c1b7e-never-print-me"


@pytest.mark.looptime
async def test_watch_state_changes_are_json_with_fields_and_no_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with ApiServer() as srv:
        srv.add_user("nobody", token=SECRET)
        async with srv.client("nobody") as client:
            w = wk.watcher(client.api("configmaps", namespace="default"),
                           wk.WatchConfig(max_unhealthy=None))
            errors = 0
            async for ev in w:
                if isinstance(ev, wk.WatchError):
                    errors += 1
                    if errors == 3:
                        srv.rbac.grant("nobody", verbs=["list", "watch"], resources=["configmaps"])
                if isinstance(ev, wk.InitDone):  # recovered once the watch is accepted
                    srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"name": "x", "namespace": "default"}})
                if isinstance(ev, wk.Apply):
                    break
            await asyncio.sleep(0)
    lines = [JsonFormatter().format(r) for r in caplog.records]
    assert all(SECRET not in line for line in lines)
    assert all(SECRET not in r.getMessage() for r in caplog.records)
    watch_lines = [json.loads(line) for line in lines if '"logger": "watchkeeper.watcher"' in line]
    degraded = next(d for d in watch_lines if d["state"] == "degraded")
    assert degraded["resource"] == "configmaps in default"
    assert degraded["error_class"] == "Forbidden" and degraded["error_code"] == 403
    assert degraded["level"] == "warning"
    recovered = next(d for d in watch_lines if "recovered" in d["message"])
    assert recovered["state"] == "healthy" and recovered["outage_seconds"] > 0
    # One line per state change, not one per retry.
    assert sum(1 for d in watch_lines if d["level"] == "warning") == 1
