"""Runs scenarios against one API server and returns their normalized transcripts.

A ``Target`` is a kubeconfig (the server's URL and credentials) and a context: the
simulator's (``simulator()``) or a real cluster's. Each scenario gets a fresh namespace
``{prefix}-{scenario}`` and the CRD group ``{prefix}-{scenario}.example.com``: fixed names,
so a transcript needs no renaming beyond putting the placeholders back; whatever an earlier,
interrupted run left under them is removed first, and everything is removed afterwards
(bounded polls, as a cluster deletes namespaces and CRDs in seconds). Cluster-scoped things
carry the label ``watchkeeper.dev/conformance=yes``: after a run killed hard,
``kubectl delete ns,crd -l watchkeeper.dev/conformance=yes`` removes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import tempfile
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

import watchkeeper as wk
from conformance.normalize import Normalizer
from conformance.steps import ABSENT, PRESENT, Http, Kubectl, Poll, Scenario, Step, Watch
from watchkeeper.client.config import load_kubeconfig
from watchkeeper.client.stream import open_stream
from watchkeeper_sim import ApiServer

KUBECTL = os.environ.get("WATCHKEEPER_KUBECTL", "kubectl")
LABEL = "watchkeeper.dev/conformance"
PATIENCE = 120.0  # seconds a Poll, a Watch or a cleanup waits for a cluster's controllers
# The simulator's controllers act within milliseconds: an expected difference where they do
# nothing (a default on read, a CEL rule) must not cost the offline test two minutes.
SIM_PATIENCE = 3.0
_PLACEHOLDER = re.compile(r"\{(uid|rv|name):([A-Za-z0-9_-]+)\}")
_KLOG = re.compile(r"^[IWE]\d{4} ")
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@dataclass(frozen=True)
class Target:
    """Where scenarios run."""

    name: str
    kubeconfig: str
    context: str | None = None
    patience: float = PATIENCE
    """Seconds a Poll waits for the server's controllers: a cluster's take seconds."""
    grace: float = 0.5
    """Seconds a Watch waits for an extra event after the ones it expects."""


@contextlib.asynccontextmanager
async def simulator(workdir: Path) -> AsyncIterator[Target]:
    """A fresh simulator as ``watchkeeper sim`` serves it (TLS, kube-root-ca.crt)."""
    async with ApiServer(tls=True, root_ca_configmaps=True) as srv:
        yield Target("simulator", srv.kubeconfig(workdir / "kubeconfig"),
                     patience=SIM_PATIENCE, grace=0.2)


class StepFailed(Exception):
    """A step could not be run at all (a placeholder names no earlier answer)."""


async def run_scenario(target: Target, scenario: Scenario, *, prefix: str = "diff",
                       workdir: Path | None = None) -> list[dict[str, Any]]:
    """The normalized transcript of ``scenario`` on ``target``."""
    namespace = f"{prefix}-{scenario.name}"
    group = f"{prefix}-{scenario.name}.example.com"
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        warnings: list[str] = []
        config = load_kubeconfig([target.kubeconfig], target.context)
        async with wk.Client(config, on_warning=warnings.append) as client:
            run = _Run(client, target, namespace, group, Path(tmp), warnings)
            await run.clean()
            await run.setup()
            try:
                for step in scenario.steps:
                    run.records.append(await run.step(step))
            finally:
                await run.clean()
    normalizer = Normalizer(namespace, group, managed_fields=scenario.managed_fields)
    return normalizer.transcript(run.records)


async def server_version(target: Target) -> str:
    config = load_kubeconfig([target.kubeconfig], target.context)
    async with wk.Client(config) as client:
        resp = await client.transport.request("GET", "/version")
    return str(json.loads(resp.body).get("gitVersion", "?"))


class _Run:
    """One scenario on one target: its client, its answers so far, its records."""

    def __init__(self, client: wk.Client, target: Target, namespace: str, group: str,
                 tmp: Path, warnings: list[str]) -> None:
        self.client = client
        self.target = target
        self.namespace = namespace
        self.group = group
        self.tmp = tmp
        self.warnings = warnings
        self.answers: dict[str, Any] = {}
        self.records: list[dict[str, Any]] = []

    # -- placeholders -------------------------------------------------------------------

    def fill(self, value: Any) -> Any:
        if isinstance(value, str):
            value = value.replace("{ns}", self.namespace).replace("{group}", self.group)
            return _PLACEHOLDER.sub(self._answer, value)
        if isinstance(value, dict):
            return {self.fill(k): self.fill(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.fill(v) for v in value]
        return value

    def _answer(self, match: re.Match[str]) -> str:
        what, step = match.groups()
        answer = self.answers.get(step)
        meta = answer.get("metadata") if isinstance(answer, dict) else None
        key = {"uid": "uid", "rv": "resourceVersion", "name": "name"}[what]
        if not isinstance(meta, dict) or not isinstance(meta.get(key), str):
            raise StepFailed(f"{match.group(0)}: step {step!r} answered no metadata.{key}")
        return str(meta[key])

    # -- requests -----------------------------------------------------------------------

    async def request(self, method: str, path: str, *, query: dict[str, str] | None = None,
                      body: Any = None, content_type: str = "application/json",
                      accept: str = "application/json") -> tuple[int, Any]:
        """(status, decoded body) of one request through the client's transport; an error
        status is an answer here, not an exception."""
        payload = None if body is None else (
            body.encode() if isinstance(body, str) else json.dumps(body).encode())
        try:
            resp = await self.client.transport.request(
                method, path, params=query or None, body=payload,
                content_type=content_type if payload is not None else None, accept=accept)
        except wk.ApiError as exc:
            if exc.code is None:
                raise  # no answer at all: the run is broken, not the scenario
            if exc.status is not None:
                return exc.code, exc.status
            # a body that is no Status ("404 page not found"): the client's reading of it
            return exc.code, {"not_a_status": exc.message}
        text = resp.body.decode(errors="replace")
        if "json" in resp.headers.get("Content-Type", ""):
            return resp.status, json.loads(text) if text else None
        return resp.status, text

    # -- steps --------------------------------------------------------------------------

    async def step(self, step: Step) -> dict[str, Any]:
        del self.warnings[:]
        match step:
            case Http():
                record = await self.http(step)
            case Kubectl():
                record = await self.kubectl(step)
            case Watch():
                record = await self.watch(step)
            case Poll():
                record = await self.poll(step)
        if self.warnings:
            record["warnings"] = list(self.warnings)
        return record

    async def http(self, step: Http) -> dict[str, Any]:
        path, query, body = self.fill(step.path), self.fill(dict(step.query)), self.fill(step.body)
        status, answer = await self.request(step.method, path, query=query, body=body,
                                            content_type=step.content_type, accept=step.accept)
        if step.name:
            self.answers[step.name] = answer
        record: dict[str, Any] = {"request": f"{step.method} {path}"}
        if query:
            record["query"] = query
        if step.content_type != "application/json":
            record["content_type"] = step.content_type
        if step.accept != "application/json":
            record["accept"] = step.accept
        if body is not None:
            record["body"] = body
        if step.record:
            record["status"] = status
            record["response"] = pick(answer, step.pick) if status < 400 else answer
        else:
            record["setup"] = "answer not recorded"
        return record

    async def kubectl(self, step: Kubectl) -> dict[str, Any]:
        args = [str(a) for a in self.fill(list(step.args))]
        stdin = self.fill(step.stdin) if step.stdin is not None else None
        argv = [KUBECTL, "--kubeconfig", self.target.kubeconfig, "--cache-dir",
                str(self.tmp / "kube-cache"), "--namespace", self.namespace]
        if self.target.context:
            argv += ["--context", self.target.context]
        proc = await asyncio.create_subprocess_exec(
            *argv, *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        async with asyncio.timeout(120):
            out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
        record: dict[str, Any] = {"kubectl": " ".join(args)}
        if stdin is not None:
            record["stdin"] = stdin.splitlines()
        record["rc"] = proc.returncode
        record.update(_stdout(args, out.decode(errors="replace")))
        record["stderr"] = [line for line in err.decode(errors="replace").splitlines()
                            if not _KLOG.match(line)]
        return record

    async def watch(self, step: Watch) -> dict[str, Any]:
        since = self.answers.get(step.since)
        rv = ((since or {}).get("metadata") or {}).get("resourceVersion")
        if not isinstance(rv, str):
            raise StepFailed(f"watch since {step.since!r}: that step answered no resourceVersion")
        path, query = self.fill(step.path), self.fill(dict(step.query))
        params = {**query, "watch": "true", "resourceVersion": rv}
        events: list[dict[str, Any]] = []
        record: dict[str, Any] = {"watch": path, "since": step.since}
        if query:
            record["query"] = query
        async with open_stream(self.client.transport, path, params=params) as stream:
            events_in = aiter(stream)
            deadline = time.monotonic() + min(self.target.patience, 30.0)
            while True:
                wait = (deadline - time.monotonic() if len(events) < step.count
                        else self.target.grace)
                try:
                    async with asyncio.timeout(max(wait, 0)):
                        event = await anext(events_in)
                except (TimeoutError, StopAsyncIteration):
                    break
                if event.type == "BOOKMARK":
                    continue
                events.append({"type": event.type, "object": pick(event.obj, step.pick)})
        record["events"] = events
        if len(events) < step.count:
            record["incomplete"] = f"{len(events)} of {step.count} events"
        return record

    async def poll(self, step: Poll) -> dict[str, Any]:
        path = self.fill(step.path)
        until = f"status {step.status}"
        if step.field:
            until += f", {step.field} " + (
                "absent" if step.value is ABSENT else "present" if step.value is PRESENT
                else f"== {json.dumps(step.value)}")
        deadline, pause = time.monotonic() + self.target.patience, 0.02
        while True:
            status, answer = await self.request("GET", path)
            met = status == step.status and (not step.field or _matches(
                _at(answer, step.field), step.value))
            if met or time.monotonic() > deadline:
                break
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)
        record: dict[str, Any] = {"poll": path, "until": until}
        if not met:
            record["timed_out"] = True
        if step.record or not met:
            record["status"] = status
            record["response"] = pick(answer, step.pick) if status < 400 else answer
        return record

    # -- the namespace and the CRD group --------------------------------------------------

    async def setup(self) -> None:
        status, answer = await self.request("POST", "/api/v1/namespaces", body={
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": self.namespace, "labels": {LABEL: "yes"}}})
        if status != 201:
            raise StepFailed(f"creating namespace {self.namespace}: {status} {answer}")

    async def clean(self) -> None:
        """Remove the namespace and the group's CRDs, finalizers first, and wait till gone."""
        crds = await self._crds()
        for crd in crds:
            for plural in _served_plurals(crd):
                await self._unfinalize(f"/apis/{self.group}/{plural}")
        await self._unfinalize(f"/api/v1/namespaces/{self.namespace}/configmaps")
        paths = [f"{CRDS}/{crd['metadata']['name']}" for crd in crds]
        paths.append(f"/api/v1/namespaces/{self.namespace}")
        for path in paths:
            await self.request("DELETE", path)
        deadline, pause = time.monotonic() + PATIENCE, 0.02
        for path in paths:
            while (await self.request("GET", path))[0] != 404:
                if time.monotonic() > deadline:
                    raise StepFailed(f"{path} still there after {PATIENCE:.0f} s")
                await self._unfinalize(f"/api/v1/namespaces/{self.namespace}/configmaps")
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)

    async def _crds(self) -> list[dict[str, Any]]:
        status, answer = await self.request("GET", CRDS)
        if status != 200:
            return []
        return [c for c in answer.get("items", [])
                if (c.get("spec") or {}).get("group") == self.group]

    async def _unfinalize(self, list_path: str) -> None:
        status, answer = await self.request("GET", list_path)
        if status != 200 or not isinstance(answer, dict):
            return
        for item in answer.get("items") or []:
            meta = item.get("metadata") or {}
            if not meta.get("finalizers"):
                continue
            namespace = meta.get("namespace")
            base = _namespaced(list_path, namespace) if namespace else list_path
            await self.request("PATCH", f"{base}/{meta['name']}",
                               body={"metadata": {"finalizers": None}},
                               content_type="application/merge-patch+json")


def _namespaced(list_path: str, namespace: str) -> str:
    """``/apis/G/V/P`` or ``/api/v1/namespaces/N/P`` -> the collection in ``namespace``."""
    head, plural = list_path.rsplit("/", 1)
    if "/namespaces/" in head:
        return list_path
    return f"{head}/namespaces/{namespace}/{plural}"


def _served_plurals(crd: dict[str, Any]) -> list[str]:
    spec = crd.get("spec") or {}
    plural = (spec.get("names") or {}).get("plural")
    return [f"{v['name']}/{plural}" for v in spec.get("versions") or []
            if isinstance(v, dict) and v.get("served") and plural][:1]


def _matches(value: Any, wanted: Any) -> bool:
    if wanted is PRESENT:
        return value is not ABSENT
    return bool(value is wanted if wanted is ABSENT else value == wanted)


def _at(value: Any, dotted: str) -> Any:
    """The value at a dotted path; a ``*`` part maps the rest over a list's items."""
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if part == "*" and isinstance(value, list):
            rest = ".".join(parts[i + 1:])
            items = [_at(v, rest) if rest else v for v in value]
            return ["<absent>" if v is ABSENT else v for v in items]
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return ABSENT
    return value


def pick(answer: Any, paths: Iterable[str]) -> Any:
    """Only these dotted paths of ``answer`` (``<absent>`` for a missing one)."""
    paths = list(paths)
    if not paths:
        return answer
    out = {}
    for path in paths:
        value = _at(answer, path)
        out[path] = "<absent>" if value is ABSENT else value
    return out


def _stdout(args: list[str], text: str) -> dict[str, Any]:
    """kubectl's stdout as data (``-o json|yaml``), as table cells (``get``), or as lines."""
    output = _output_format(args)
    if output in ("json", "yaml") and text.strip():
        try:
            data = json.loads(text) if output == "json" else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError):
            return {"stdout": text.splitlines()}
        return {"stdout_data": data}
    if args and args[0] == "get" and output in ("", "wide"):
        return {"stdout_table": [re.split(r"\s{2,}", line.strip())
                                 for line in text.splitlines() if line.strip()]}
    return {"stdout": text.splitlines()}


def _output_format(args: list[str]) -> str:
    for i, arg in enumerate(args):
        if arg in ("-o", "--output") and i + 1 < len(args):
            return args[i + 1]
        for flag in ("-o", "--output="):
            if arg.startswith(flag) and len(arg) > len(flag):
                return arg[len(flag):].lstrip("=")
    return ""
