"""`watchkeeper watch` prints events like kubectl get -w and its state on stderr."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from watchkeeper_sim import ApiServer

pytestmark = pytest.mark.realtime


async def test_watch_prints_events_and_a_status_line_through_an_outage(tmp_path: Path) -> None:
    async with ApiServer() as srv:
        srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "first", "namespace": "default"}})
        kubeconfig = srv.kubeconfig(tmp_path / "kc")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "watchkeeper.cli", "watch", "configmaps", "-n", "default",
            "--kubeconfig", kubeconfig,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None and proc.stderr is not None
            async with asyncio.timeout(10):
                line = await proc.stdout.readline()
            assert line.startswith(b"EXISTING") and b"default/first" in line
            srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "second", "namespace": "default"}})
            async with asyncio.timeout(10):
                line = await proc.stdout.readline()
            assert line.startswith(b"APPLIED") and b"default/second" in line
            async with asyncio.timeout(10):
                while not srv.open_watches:
                    await asyncio.sleep(0.05)
            srv.faults.refuse(count_refused=True)
            srv.reset_watches()
            status = b""
            async with asyncio.timeout(10):
                while b"next try in" not in status:
                    status += await proc.stderr.readline()
            assert b"[degraded] ConnectionFailed" in status
            srv.faults.clear()
            srv.delete_object("v1", "ConfigMap", "first")
            async with asyncio.timeout(20):
                line = await proc.stdout.readline()
            assert line.startswith(b"DELETED") and b"default/first" in line
        finally:
            proc.terminate()
            await proc.wait()


def test_watch_rejects_namespace_with_all_namespaces() -> None:
    from click.testing import CliRunner

    from watchkeeper.cli import main

    result = CliRunner().invoke(main, ["watch", "configmaps", "-n", "x", "-A"])
    assert result.exit_code == 2 and "either --namespace or --all-namespaces" in result.output


async def _lines_until(stream: asyncio.StreamReader, done: Callable[[bytes], bool]) -> bytes:
    out = b""
    async with asyncio.timeout(15):
        while not done(out):
            line = await stream.readline()
            assert line, f"the watch ended early; it printed {out!r}"
            out += line
    return out


async def test_watch_json_marks_each_event_type_and_fills_kind_of_listed_objects(
    tmp_path: Path,
) -> None:
    """-o json prints kubectl's --output-watch-events lines: a delete is DELETED, not an
    update, and objects from the initial LIST carry kind/apiVersion (a LIST's items lack
    them on the wire)."""
    async with ApiServer() as srv:
        srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "first", "namespace": "default"}})
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "watchkeeper.cli", "watch", "configmaps", "-n", "default",
            "--kubeconfig", srv.kubeconfig(tmp_path / "kc"), "-o", "json",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None

            async def event() -> tuple[str, str, dict[str, Any]]:
                line = json.loads(await _lines_until(proc.stdout, lambda b: b.endswith(b"\n")))
                assert set(line) == {"type", "object"}, line
                obj = line["object"]
                return line["type"], obj["metadata"]["name"], obj

            kind, name, obj = await event()
            assert (kind, name) == ("ADDED", "first")
            assert (obj["apiVersion"], obj["kind"]) == ("v1", "ConfigMap")
            srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "second", "namespace": "default"}})
            assert (await event())[:2] == ("ADDED", "second")
            second = srv.get_object("v1", "ConfigMap", "second")
            srv.update_object({**second, "data": {"k": "v"}})
            kind, name, obj = await event()
            assert (kind, name, obj["data"]) == ("MODIFIED", "second", {"k": "v"})
            srv.delete_object("v1", "ConfigMap", "first")
            kind, name, obj = await event()
            assert (kind, name, obj["kind"]) == ("DELETED", "first", "ConfigMap")
        finally:
            proc.terminate()
            await proc.wait()


async def test_watch_yaml_documents_are_watch_events_unless_told_otherwise(
    tmp_path: Path,
) -> None:
    async with ApiServer() as srv:
        srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "first", "namespace": "default"}})
        kubeconfig = srv.kubeconfig(tmp_path / "kc")
        for flags, shape in (([], "event"), (["--no-output-watch-events"], "object")):
            srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": shape, "namespace": "default"}})
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "watchkeeper.cli", "watch", "configmaps", "-n",
                "default", "--kubeconfig", kubeconfig, "-o", "yaml", *flags,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )
            try:
                assert proc.stdout is not None
                # a document is complete when the next one starts: one more object (listed
                # second) and a delete each start one
                text = await _lines_until(proc.stdout, lambda b: b"---\n" in b)
                srv.delete_object("v1", "ConfigMap", shape)
                text += await _lines_until(proc.stdout, lambda b: b.count(b"---\n") >= 2)
                docs = [yaml.safe_load(d) for d in text.split(b"---\n")[1:3]]
                doc = docs[0]
                if shape == "event":
                    assert doc["type"] == "ADDED" and doc["object"]["kind"] == "ConfigMap", doc
                    assert docs[1]["type"] == "ADDED", docs
                else:  # bare objects, as kubectl prints without --output-watch-events
                    assert doc["kind"] == "ConfigMap" and "type" not in doc, doc
            finally:
                proc.terminate()
                await proc.wait()
