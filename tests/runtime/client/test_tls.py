"""TLS against the simulator: verification, CA, skip-verify, server name, client certificates."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import pytest
import trustme

import watchkeeper as wk
from watchkeeper.client.auth import StaticToken
from watchkeeper_sim import ApiServer


@pytest.fixture
async def srv() -> AsyncIterator[ApiServer]:
    async with ApiServer(tls=True) as s:
        yield s


async def namespaces(config: wk.ClientConfig) -> list[str]:
    async with wk.Client(config) as client:
        listed = await client.api("namespaces").list()
        return sorted(i["metadata"]["name"] for i in listed.items)


def admin_token(srv: ApiServer) -> StaticToken:
    return StaticToken(srv.token("admin"))


async def test_server_url_is_https(srv: ApiServer) -> None:
    assert srv.url.startswith("https://127.0.0.1:")
    assert srv.ca_pem is not None and b"BEGIN CERTIFICATE" in srv.ca_pem


async def test_verification_is_on_by_default(srv: ApiServer) -> None:
    config = wk.ClientConfig(server=srv.url, auth=admin_token(srv))  # no CA: system roots only
    with pytest.raises(wk.ConnectionFailed) as info:
        await namespaces(config)
    err = info.value
    assert err.reason == "TLSError" and err.code is None
    assert "TLS certificate verification failed" in str(err)
    assert "certificate" in str(err).lower() and err.is_transient
    assert not srv.requests  # nothing was sent over the untrusted connection


async def test_a_foreign_ca_is_not_trusted(srv: ApiServer) -> None:
    other = trustme.CA().cert_pem.bytes()
    config = wk.ClientConfig(server=srv.url, ca_data=other, auth=admin_token(srv))
    with pytest.raises(wk.ConnectionFailed) as info:
        await namespaces(config)
    assert info.value.reason == "TLSError"


async def test_with_the_ca_it_works(srv: ApiServer) -> None:
    config = wk.ClientConfig(server=srv.url, ca_data=srv.ca_pem, auth=admin_token(srv))
    assert "default" in await namespaces(config)
    assert srv.requests[-1].user == "admin"
    # the server's own helper builds the same thing
    assert "default" in await namespaces(srv.client_config("admin"))


async def test_insecure_skip_tls_verify(srv: ApiServer) -> None:
    config = wk.ClientConfig(server=srv.url, insecure_skip_tls_verify=True,
                             auth=admin_token(srv))
    assert "kube-system" in await namespaces(config)


async def test_tls_server_name_is_honoured(srv: ApiServer) -> None:
    # The serving certificate names 127.0.0.1, localhost and ::1 (see testing/_tls.py): we
    # connect to 127.0.0.1 and ask for the name to be checked against something else.
    base = srv.client_config("admin")
    assert "default" in await namespaces(dataclasses.replace(base, tls_server_name="localhost"))
    wrong = dataclasses.replace(base, tls_server_name="api.elsewhere.example")
    with pytest.raises(wk.ConnectionFailed) as info:
        await namespaces(wrong)
    assert info.value.reason == "TLSError"
    assert "api.elsewhere.example" in str(info.value) or "hostname" in str(info.value).lower()


async def test_insecure_skip_verify_ignores_the_server_name(srv: ApiServer) -> None:
    config = wk.ClientConfig(server=srv.url, insecure_skip_tls_verify=True,
                             tls_server_name="api.elsewhere.example", auth=admin_token(srv))
    assert "default" in await namespaces(config)


async def test_client_certificate_user_is_the_cn(srv: ApiServer) -> None:
    config = srv.client_config("carol", cert_groups=["devs"])
    assert isinstance(config.auth, wk.client.auth.NoAuth)  # no token: the certificate only
    async with wk.Client(config) as client:
        cms = client.api("configmaps", namespace="default")
        with pytest.raises(wk.Forbidden) as info:
            await cms.list()
        err = info.value
        assert err.user == "carol"
        assert 'User "carol" cannot list resource "configmaps"' in str(err)
        assert 'Grant user "carol" a Role rule in namespace "default"' in err.hint()
        assert srv.requests[-1].user == "carol"

        # RBAC applies to the certificate's groups (one O per group) ...
        srv.rbac.grant("devs", verbs=["get", "list", "create"], resources=["configmaps"],
                       namespaces=["default"])
        await cms.create({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "from-carol"}, "data": {"k": "v"}})
        assert [i["metadata"]["name"] for i in (await cms.list()).items] == ["from-carol"]
        # ... and only to what was granted
        with pytest.raises(wk.Forbidden):
            await cms.delete("from-carol")
        with pytest.raises(wk.Forbidden):
            await client.api("configmaps", namespace="kube-system").list()
        with pytest.raises(wk.Forbidden):
            await client.api("secrets", namespace="default").list()
        obj = await cms.get("from-carol")
        assert obj["metadata"]["managedFields"][0]["manager"] == "watchkeeper"


async def test_client_certificate_in_system_masters_is_admin(srv: ApiServer) -> None:
    config = srv.client_config("root", cert_groups=["system:masters"])
    async with wk.Client(config) as client:
        await client.api("secrets", namespace="kube-system").list()
        await client.api("namespaces").create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "by-cert"}})
    assert {r.user for r in srv.requests} == {"root"}


async def test_grant_to_the_certificate_user_by_name(srv: ApiServer) -> None:
    srv.rbac.grant("dave", verbs=["get"], resources=["namespaces"])
    async with wk.Client(srv.client_config("dave", cert_groups=[])) as client:
        ns = await client.api("namespaces").get("default")
        assert ns["metadata"]["name"] == "default"
        with pytest.raises(wk.Forbidden) as info:
            await client.api("namespaces").list()
        assert "at the cluster scope" in str(info.value)


async def test_certificate_from_an_untrusted_ca_is_rejected(srv: ApiServer) -> None:
    rogue = trustme.CA().issue_cert("mallory")
    config = dataclasses.replace(
        srv.client_config("admin"),
        auth=wk.client.auth.NoAuth(),
        client_cert_data=rogue.cert_chain_pems[0].bytes(),
        client_key_data=rogue.private_key_pem.bytes(),
    )
    # Go's TLS server (VerifyClientCertIfGiven) fails the handshake; under TLS 1.3 the client
    # learns it only when the server closes the connection instead of answering.
    with pytest.raises(wk.ConnectionFailed) as info:
        await namespaces(config)
    assert "closed the connection" in str(info.value) or info.value.reason == "TLSError"
    assert "mallory" not in {r.user for r in srv.requests}


async def test_token_and_certificate_together_the_certificate_wins(srv: ApiServer) -> None:
    # Kubernetes' union authenticator tries x509 first; the simulator does the same.
    cert_config = srv.client_config("erin", cert_groups=["system:masters"])
    config = dataclasses.replace(cert_config, auth=StaticToken(srv.token("limited")))
    assert "default" in await namespaces(config)
    assert srv.requests[-1].user == "erin"
