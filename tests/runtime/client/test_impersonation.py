"""Impersonation from the kubeconfig (``as``, ``as-uid``, ``as-groups``, ``as-user-extra``), as
kubectl does it: the simulator (which authorizes the Impersonate-* headers like
kube-apiserver) must see the same user our client acts as and kubectl acts as."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

import watchkeeper as wk
from watchkeeper.client.config import load_config
from watchkeeper_sim import ApiServer

KUBECTL = os.environ.get("WATCHKEEPER_KUBECTL", "/usr/bin/kubectl")
WHOAMI = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


def kubeconfig_acting_as(srv: ApiServer, path: Path, real_user: str, **as_fields: Any) -> str:
    config = srv.kubeconfig(path, real_user)
    doc = yaml.safe_load(Path(config).read_text())
    doc["users"][0]["user"].update(as_fields)
    Path(config).write_text(yaml.safe_dump(doc))
    return config


async def whoami(client: wk.Client) -> dict[str, Any]:
    resp = await client.transport.request(
        "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        body=json.dumps(WHOAMI).encode(), content_type="application/json")
    info: dict[str, Any] = json.loads(resp.body)["status"]["userInfo"]
    return info


async def kubectl_whoami(config: str, tmp: Path) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", config, "--cache-dir", str(tmp / "cache"), "auth", "whoami",
        "-o", "json", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": str(tmp)})
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    info: dict[str, Any] = json.loads(out)["status"]["userInfo"]
    return info


async def test_admin_acting_as_limited_gets_limiteds_403(tmp_path: Path) -> None:
    async with ApiServer() as srv:
        config = load_config(kubeconfig_acting_as(srv, tmp_path / "kc", "admin", **{
            "as": "limited", "as-groups": ["system:authenticated"]}))
        assert config.impersonate == wk.Impersonation("limited",
                                                      groups=("system:authenticated",))
        async with wk.Client(config) as client:
            with pytest.raises(wk.Forbidden, match='User "limited" cannot list'):
                await client.api("configmaps", namespace="default").list()
            assert (await whoami(client))["username"] == "limited"


async def test_impersonating_without_the_right_is_forbidden(tmp_path: Path) -> None:
    async with ApiServer() as srv:
        config = load_config(kubeconfig_acting_as(srv, tmp_path / "kc", "limited", **{
            "as": "admin"}))
        async with wk.Client(config) as client:
            with pytest.raises(wk.Forbidden, match='cannot impersonate resource "users"'):
                await client.api("configmaps", namespace="default").list()


def test_groups_without_a_user_are_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "kc"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t", "as-groups": ["g"]}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }))
    with pytest.raises(wk.ConfigError, match="need as"):
        load_config(str(path))


def test_extra_keys_are_percent_encoded_in_header_names() -> None:
    imp = wk.Impersonation("u", uid="1", groups=("a", "b"),
                           extra=(("example.com/team name", ("x", "y")),))
    assert imp.headers() == [
        ("Impersonate-User", "u"), ("Impersonate-Uid", "1"),
        ("Impersonate-Group", "a"), ("Impersonate-Group", "b"),
        ("Impersonate-Extra-example.com%2Fteam%20name", "x"),
        ("Impersonate-Extra-example.com%2Fteam%20name", "y"),
    ]


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which(KUBECTL) is None, reason=f"{KUBECTL} not installed")
async def test_we_act_as_the_same_user_as_kubectl(tmp_path: Path) -> None:
    async with ApiServer(tls=True) as srv:
        config = kubeconfig_acting_as(srv, tmp_path / "kc", "admin", **{
            "as": "jane", "as-uid": "jane-1", "as-groups": ["devs", "system:authenticated"]})
        async with wk.Client(load_config(config)) as client:
            ours = await whoami(client)
        theirs = await kubectl_whoami(config, tmp_path)
        assert ours == theirs
        assert ours["username"] == "jane" and ours["uid"] == "jane-1"
        assert ours["groups"] == ["devs", "system:authenticated"]
