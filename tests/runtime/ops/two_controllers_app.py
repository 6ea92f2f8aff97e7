"""Two controllers in one process, for the signal tests: a ConfigMap controller and a
Secret controller whose reconciles are slow and log their start and end (also when they
are cancelled), so a test can see which of them drained.

    python two_controllers_app.py runtime|standalone KUBECONFIG LOG SLOW_SECONDS
    watchkeeper run two_controllers_app.py:setup   (WK_TEST_RECONCILE_LOG, WK_TEST_SLOW)

``runtime``: both through ``watchkeeper.run``; ``standalone``: two ``Controller.run`` in
one ``asyncio.gather`` (a simple script with no runtime); ``setup``: both through the
CLI."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from typing import Any

import watchkeeper as wk


def log_line(path: str, **fields: Any) -> None:
    with open(path, "a") as fh:
        fh.write(json.dumps(fields) + "\n")


def operator(api: wk.Api, kind: str, log_path: str, slow: float) -> wk.Operator:
    async def reconcile(obj: dict[str, Any], ctx: Any) -> wk.Action:
        log_line(log_path, kind=kind, name=wk.meta.name(obj), event="start", at=time.time())
        finished = False
        try:
            await asyncio.sleep(slow)
            finished = True
        finally:
            log_line(log_path, kind=kind, name=wk.meta.name(obj),
                     event="done" if finished else "cancelled", at=time.time())
        return wk.Action.await_change()

    config = wk.ControllerConfig(shutdown_timeout=30, max_unhealthy=None)
    return wk.Operator(wk.Controller(api, config), reconcile)


def setup(client: wk.Client) -> list[wk.Operator]:
    log_path, slow = os.environ["WK_TEST_RECONCILE_LOG"], float(os.environ["WK_TEST_SLOW"])
    return [operator(client.api("configmaps", namespace="two"), "configmap", log_path, slow),
            operator(client.api("secrets", namespace="two"), "secret", log_path, slow)]


async def main(mode: str, kubeconfig: str, log_path: str, slow: float) -> None:
    async with await wk.Client.from_env(kubeconfig) as client:
        ops = [operator(client.api("configmaps", namespace="two"), "configmap", log_path, slow),
               operator(client.api("secrets", namespace="two"), "secret", log_path, slow)]
        if mode == "runtime":
            await wk.run(*ops)
        else:
            await asyncio.gather(*(op.controller.run(op.reconcile) for op in ops))
    log_line(log_path, event="exit", at=time.time())


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])))
