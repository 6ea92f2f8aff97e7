"""A tiny operator for the leader-election tests: every reconcile is logged with its
process identity and wall-clock times, and every object is requeued quickly, so there is
always work and any overlap between two replicas would show in the log."""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import watchkeeper as wk


def setup(client: wk.Client) -> wk.Operator:
    log_path = os.environ["WK_TEST_RECONCILE_LOG"]
    identity = os.environ["POD_NAME"]

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        start, finished = time.time(), False
        try:
            await asyncio.sleep(0.05)
            finished = True
        finally:  # a reconcile cancelled on losing the lease is recorded too, until its end
            line = json.dumps({"id": identity, "start": start, "end": time.time(),
                               "name": wk.meta.name(obj), "finished": finished})
            with open(log_path, "a") as fh:  # noqa: ASYNC230 (tiny O_APPEND write, never torn)
                fh.write(line + "\n")
        return wk.Action.requeue(0.2)

    api = client.api("configmaps", namespace="lead")
    return wk.Operator(wk.Controller(api, wk.ControllerConfig(shutdown_timeout=5)), reconcile)
