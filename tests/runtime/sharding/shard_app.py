"""A tiny sharded operator for the sharding tests: every reconcile is logged with its
replica id and wall-clock start and end, and every object is requeued, so there is always
work and any overlap between two replicas would show in the log."""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import watchkeeper as wk


def setup(client: wk.Client) -> wk.Operator:
    log_path = os.environ["WK_TEST_RECONCILE_LOG"]
    replica = os.environ["WK_TEST_REPLICA"]
    lease, renew, retry = (float(x) for x in os.environ["WK_TEST_TIMINGS"].split(","))
    # Long reconciles, requeued soon: each object is mid-reconcile ~40 % of the time, so a
    # hand-over without the drain would overlap (the test sees it: see test_sharding.py).
    work = float(os.environ.get("WK_TEST_WORK", "0.2"))
    requeue = float(os.environ.get("WK_TEST_REQUEUE", "0.3"))
    sharding = wk.Sharding(ring="widgets", replica_id=replica, lease_namespace="shard",
                           lease_duration=lease, renew_deadline=renew, retry_period=retry)

    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        start, finished = time.time(), False
        try:
            await asyncio.sleep(work)
            finished = True
        finally:
            line = json.dumps({"id": replica, "start": start, "end": time.time(),
                               "name": wk.meta.name(obj), "finished": finished})
            with open(log_path, "a") as fh:  # noqa: ASYNC230 (tiny O_APPEND write, never torn)
                fh.write(line + "\n")
        return wk.Action.requeue(requeue)

    api = client.api("configmaps", namespace="shard")
    controller = wk.Controller(api, wk.ControllerConfig(concurrency=64, shutdown_timeout=5),
                               sharding=sharding)
    return wk.Operator(controller, reconcile)
