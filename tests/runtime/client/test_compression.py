"""Response compression: the server gzips bodies over 128 KiB for a client that accepts it
(reference files 022-024); kubeconfig's disable-compression turns that off."""

from __future__ import annotations

import dataclasses

import pytest

import watchkeeper as wk
from watchkeeper_sim import ApiServer


@pytest.mark.parametrize("disable", [False, True])
async def test_large_list_is_gzipped_unless_compression_is_disabled(disable: bool) -> None:
    async with ApiServer() as srv:
        for i in range(60):  # ~3 KB each: a list of ~180 KB, over the server's 128 KiB
            srv.create_object({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": f"big-{i}", "namespace": "default"},
                               "data": {"payload": "x" * 3000}})
        config = dataclasses.replace(srv.client_config(), disable_compression=disable)
        async with wk.Client(config) as client:
            resp = await client.transport.request("GET", "/api/v1/namespaces/default/configmaps")
            listed = await client.api("configmaps", namespace="default").list()
        assert resp.headers.get("Content-Encoding") == (None if disable else "gzip")
        assert len(resp.body) > 128 * 1024  # handed on decompressed either way
        assert len(listed.items) == 60
