"""Warning headers from the server reach the user: logged once per distinct text by default,
or handed to the user's handler; from plain requests, failed ones and watch streams alike."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper.client.server_warnings import LogOnce, parse_warnings
from watchkeeper_sim import ApiServer

FLOWCONTROL_V1BETA2 = wk.Resource(
    group="flowcontrol.apiserver.k8s.io", version="v1beta2",
    plural="prioritylevelconfigurations", kind="PriorityLevelConfiguration", namespaced=False,
)


def with_unknown_field(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"},
            "data": {"k": "v"}, "spec": {"replicas": 1}}


def test_parse_takes_the_servers_299_warnings_in_order() -> None:
    values = ['299 - "unknown field \\"spec\\""',
              '299 - "first", 299 - "second, with a comma" "Wed, 02 Dec 2026 10:00:00 GMT"',
              '199 proxy "not the API server\'s"', "garbage"]
    assert parse_warnings(values) == [
        'unknown field "spec"', "first", "second, with a comma"]


def test_log_once_forgets_the_oldest_beyond_its_memory(caplog: pytest.LogCaptureFixture
                                                        ) -> None:
    handler = LogOnce(memory=2)
    with caplog.at_level(logging.WARNING, logger="watchkeeper.client"):
        for text in ("a", "b", "a", "c", "a", "b"):
            handler(text)
    # "a" stays remembered (it keeps being seen); "b" was evicted by "c" and logs again.
    assert [r.getMessage() for r in caplog.records] == [
        "API server warning: a", "API server warning: b", "API server warning: c",
        "API server warning: b"]


async def test_unknown_field_warning_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with ApiServer() as srv, srv.client() as client:
        api = client.api("configmaps", namespace="default")
        with caplog.at_level(logging.WARNING, logger="watchkeeper.client"):
            for i in range(3):
                await api.create(with_unknown_field(f"w{i}"))
        lines = [r.getMessage() for r in caplog.records if r.name == "watchkeeper.client"]
        assert lines == ['API server warning: unknown field "spec"']
        assert "spec" not in await api.get("w0")  # the server dropped it, as it warned


async def test_users_handler_sees_every_warning_of_requests_errors_and_watches() -> None:
    seen: list[str] = []
    async with ApiServer() as srv, wk.Client(srv.client_config(),
                                             on_warning=seen.append) as client:
        cms = client.api("configmaps", namespace="default")
        await cms.create(with_unknown_field("a"))
        await cms.create(with_unknown_field("b"))
        assert seen == ['unknown field "spec"'] * 2
        seen.clear()

        old = client.api(FLOWCONTROL_V1BETA2)
        await old.list()
        with pytest.raises(wk.NotFound):
            await old.get("no-such-level")
        async with old.watch(timeout_seconds=1) as stream:
            async for _ in stream:
                pass
        assert len(seen) == 3
        assert all(s.startswith("flowcontrol.apiserver.k8s.io/v1beta2 "
                                "PriorityLevelConfiguration is deprecated") for s in seen)
