"""Exec credential plugins: a real subprocess (a small Python script) plays the plugin."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
import trustme
import yaml

from watchkeeper.client.config import ConfigError, load_kubeconfig
from watchkeeper.client.exec_auth import API_VERSIONS, ExecAuth, ExecPluginError

V1, V1BETA1 = API_VERSIONS
TOKEN = "exec-SECRET-token-5e6f"
KEY = "-----BEGIN EC PRIVATE KEY-----\nexecSECRETkey0a1b\n-----END EC PRIVATE KEY-----\n"
CERT = "-----BEGIN CERTIFICATE-----\nZmFrZQ==\n-----END CERTIFICATE-----\n"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"

# The plugin counts its runs, records what it was given, then acts as behavior.json says.
PLUGIN = """#!__PYTHON__
import json, os, pathlib, sys, time
state = pathlib.Path(__STATE__)
count = state / "count"
n = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(n))
info = os.environ.get("KUBERNETES_EXEC_INFO")
seen = {"argv": sys.argv[1:], "info": info, "env": dict(os.environ)}
(state / f"call-{n}.json").write_text(json.dumps(seen))
behavior = json.loads((state / "behavior.json").read_text())
time.sleep(behavior.get("sleep", 0))
sys.stderr.write(behavior.get("stderr", ""))
sys.stdout.write(behavior["stdout"].replace("@N@", str(n)))
sys.exit(behavior.get("exit", 0))
"""


class Plugin:
    def __init__(self, directory: Path) -> None:
        self.state = directory / "state"
        self.state.mkdir(parents=True)
        self.path = directory / "bin" / "fake-auth-plugin"
        self.path.parent.mkdir()
        source = PLUGIN.replace("__PYTHON__", sys.executable)
        self.path.write_text(source.replace("__STATE__", repr(str(self.state))))
        self.path.chmod(0o755)
        self.answer(credential())

    def answer(self, stdout: str, *, exit: int = 0, stderr: str = "", sleep: float = 0) -> None:
        behavior = {"stdout": stdout, "exit": exit, "stderr": stderr, "sleep": sleep}
        (self.state / "behavior.json").write_text(json.dumps(behavior))

    @property
    def runs(self) -> int:
        count = self.state / "count"
        return int(count.read_text()) if count.exists() else 0

    def seen(self, run: int) -> dict[str, Any]:
        seen: dict[str, Any] = json.loads((self.state / f"call-{run}.json").read_text())
        return seen


def credential(
    api_version: str = V1, token: str | None = "tok-@N@", expires: str | None = None, **extra: Any
) -> str:
    status: dict[str, Any] = dict(extra)
    if token is not None:
        status["token"] = token
    if expires is not None:
        status["expirationTimestamp"] = expires
    return json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "status": status})


@pytest.fixture
def plugin(tmp_path: Path) -> Plugin:
    return Plugin(tmp_path / "plugin")


@pytest.fixture(autouse=True)
def no_secret_in_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG, logger="watchkeeper")
    yield
    for secret in (TOKEN, "execSECRETkey0a1b"):
        assert secret not in caplog.text


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("api_version", API_VERSIONS)
async def test_token_cached_until_refresh(plugin: Plugin, api_version: str) -> None:
    plugin.answer(credential(api_version))
    auth = ExecAuth(str(plugin.path), api_version=api_version)
    for _ in range(3):
        assert await auth.headers() == bearer("tok-1")
    assert plugin.runs == 1
    await auth.refresh()  # as after a 401
    assert await auth.headers() == bearer("tok-2")
    assert plugin.runs == 2
    assert await auth.client_certificate() is None


async def test_cached_until_shortly_before_expiry(plugin: Plugin) -> None:
    stamp = "2030-01-01T00:00:00Z"
    expiry = datetime.fromisoformat(stamp).timestamp()
    now = [expiry - 3600]
    plugin.answer(credential(expires=stamp))
    auth = ExecAuth(str(plugin.path), clock=lambda: now[0])
    assert await auth.headers() == bearer("tok-1")
    now[0] = expiry - 11
    assert await auth.headers() == bearer("tok-1")
    now[0] = expiry - 9  # inside the 10 s margin: run again
    assert await auth.headers() == bearer("tok-2")
    assert plugin.runs == 2


async def test_expiry_formats(plugin: Plugin) -> None:
    plugin.answer(credential(expires="2030-01-01T02:00:00.123456789+02:00"))
    now = [datetime.fromisoformat("2030-01-01T00:00:00Z").timestamp() - 20]
    auth = ExecAuth(str(plugin.path), clock=lambda: now[0])
    await auth.headers()
    await auth.headers()
    assert plugin.runs == 1
    now[0] += 15
    await auth.headers()
    assert plugin.runs == 2


async def test_concurrent_callers_share_one_run(plugin: Plugin) -> None:
    plugin.answer(credential(), sleep=0.3)
    auth = ExecAuth(str(plugin.path))
    results = await asyncio.gather(*(auth.headers() for _ in range(10)))
    assert results == [bearer("tok-1")] * 10
    assert plugin.runs == 1
    await auth.refresh()
    plugin.answer("", exit=1, stderr="denied", sleep=0.3)
    failures = await asyncio.gather(*(auth.headers() for _ in range(5)), return_exceptions=True)
    assert all(isinstance(f, ExecPluginError) for f in failures)
    assert plugin.runs == 2


async def test_cancelled_caller_does_not_cancel_the_run(plugin: Plugin) -> None:
    plugin.answer(credential(), sleep=0.3)
    auth = ExecAuth(str(plugin.path))
    first = asyncio.create_task(auth.headers())
    await asyncio.sleep(0.1)
    first.cancel()
    assert await auth.headers() == bearer("tok-1")
    assert plugin.runs == 1


async def test_client_certificate(plugin: Plugin) -> None:
    plugin.answer(credential(token=None, clientCertificateData=CERT, clientKeyData=KEY))
    auth = ExecAuth(str(plugin.path))
    assert await auth.client_certificate() == (CERT.encode(), KEY.encode())
    assert await auth.headers() == {}
    assert plugin.runs == 1


async def test_missing_binary_shows_install_hint(tmp_path: Path) -> None:
    hint = "Install it with: brew install fake-auth-plugin"
    for command in (str(tmp_path / "nope"), "watchkeeper-no-such-plugin"):
        auth = ExecAuth(command, install_hint=hint, name="user 'u' in /k/config")
        with pytest.raises(ExecPluginError) as info:
            await auth.headers()
        assert isinstance(info.value, ConfigError)
        message = str(info.value)
        assert "not found" in message
        assert hint in message
        assert command in message
        assert "user 'u' in /k/config" in message


async def test_not_executable(tmp_path: Path) -> None:
    path = tmp_path / "plain"
    path.write_text("#!/bin/sh\n")
    with pytest.raises(ExecPluginError, match="cannot run it"):
        await ExecAuth(str(path)).headers()


async def test_nonzero_exit_shows_stderr_but_never_the_token(plugin: Plugin) -> None:
    stderr = "x" * 3000 + f"\nerror: login expired (got {TOKEN})\n"
    plugin.answer(credential(token=TOKEN), exit=3, stderr=stderr)
    with pytest.raises(ExecPluginError) as info:
        await ExecAuth(str(plugin.path)).headers()
    message = str(info.value)
    assert "exited with code 3" in message
    assert "error: login expired (got <redacted>)" in message
    assert len(message) < 1000
    assert TOKEN not in message
    assert TOKEN not in repr(info.value)


async def test_stderr_redacts_previous_token(plugin: Plugin) -> None:
    plugin.answer(credential(token=TOKEN))
    auth = ExecAuth(str(plugin.path))
    assert await auth.headers() == bearer(TOKEN)
    await auth.refresh()
    plugin.answer("garbage", exit=1, stderr=f"refresh failed for {TOKEN}")
    with pytest.raises(ExecPluginError) as info:
        await auth.headers()
    assert "refresh failed for <redacted>" in str(info.value)


@pytest.mark.parametrize(
    ("stdout", "expected"),
    [
        (f"token={TOKEN}", "not JSON"),
        (json.dumps([TOKEN]), "not an ExecCredential"),
        (credential(V1BETA1, token=TOKEN), f"expected apiVersion {V1}, got {V1BETA1}"),
        (credential(TOKEN, token=TOKEN), "got another version"),
        (json.dumps({"apiVersion": V1, "kind": "ExecCredential"}), "has no status"),
        (credential(token=None), "neither a token nor a certificate"),
        (credential(token=None, clientCertificateData=CERT), "only one of a certificate"),
        (credential(token=TOKEN, expires="tomorrow"), "expirationTimestamp is not RFC 3339"),
        (credential(token=TOKEN, expires="2030-01-01T00:00:00"), "not RFC 3339"),
        (credential(token=None, clientKeyData=KEY, clientCertificateData=3), "must be a string"),
    ],
)
async def test_unusable_answers(plugin: Plugin, stdout: str, expected: str) -> None:
    plugin.answer(stdout)
    with pytest.raises(ExecPluginError, match=expected) as info:
        await ExecAuth(str(plugin.path)).headers()
    assert TOKEN not in str(info.value)
    assert "execSECRETkey0a1b" not in str(info.value)


async def test_timeout_kills_the_plugin(plugin: Plugin) -> None:
    plugin.answer(credential(), sleep=30)
    with pytest.raises(ExecPluginError, match=r"no answer within 0\.5 s"):
        await ExecAuth(str(plugin.path), timeout=0.5).headers()


async def test_exec_info_without_cluster(plugin: Plugin) -> None:
    await ExecAuth(str(plugin.path), ["--flag", "x"], {"FOO": "bar"}).headers()
    seen = plugin.seen(1)
    assert seen["argv"] == ["--flag", "x"]
    assert seen["env"]["FOO"] == "bar"
    assert json.loads(seen["info"]) == {
        "kind": "ExecCredential",
        "apiVersion": V1,
        "spec": {"interactive": False},
    }


async def test_repr_hides_args_and_env(plugin: Plugin) -> None:
    auth = ExecAuth(str(plugin.path), [f"--token={TOKEN}"], {"SECRET": TOKEN})
    assert TOKEN not in repr(auth)
    assert "fake-auth-plugin" in repr(auth)


# --- from a kubeconfig ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca_pem() -> bytes:
    pem: bytes = trustme.CA().cert_pem.bytes()
    return pem


def exec_kubeconfig(tmp_path: Path, exec_spec: dict[str, Any], ca: bytes | None = None) -> Path:
    cluster: dict[str, Any] = {
        "server": "https://127.0.0.1:1",
        "tls-server-name": "api.internal",
        "extensions": [
            {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "aud-1"}}
        ],
    }
    if ca is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "clusters": [{"name": "cl", "cluster": cluster}],
        "contexts": [{"name": "c", "context": {"cluster": "cl", "user": "u"}}],
        "users": [{"name": "u", "user": {"exec": exec_spec}}],
    }
    path = tmp_path / "plugin" / "config"  # beside bin/, so "./bin/..." is file-relative
    path.write_text(yaml.safe_dump(doc))
    return path


def kubeconfig_exec(api_version: str = V1, **more: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "apiVersion": api_version,
        "command": "./bin/fake-auth-plugin",
        "args": ["get-token", "--cluster=lab"],
        "env": [{"name": "FOO", "value": "bar"}, {"name": "EMPTY"}],
        "interactiveMode": "Never",
        "provideClusterInfo": True,
        "installHint": "install the fake plugin",
    }
    spec.update(more)
    return spec


async def test_kubeconfig_exec_resolves_relative_command(
    tmp_path: Path, plugin: Plugin, ca_pem: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = load_kubeconfig([exec_kubeconfig(tmp_path, kubeconfig_exec(), ca_pem)])
    assert await cfg.auth.headers() == bearer("tok-1")
    seen = plugin.seen(1)
    assert seen["argv"] == ["get-token", "--cluster=lab"]
    assert (seen["env"]["FOO"], seen["env"]["EMPTY"]) == ("bar", "")
    assert json.loads(seen["info"])["spec"] == {
        "cluster": {
            "server": "https://127.0.0.1:1",
            "tls-server-name": "api.internal",
            "certificate-authority-data": base64.b64encode(ca_pem).decode(),
            "config": {"audience": "aud-1"},
        },
        "interactive": False,
    }


@pytest.mark.skipif(not os.path.exists(KUBECTL), reason="kubectl not installed")
@pytest.mark.parametrize("api_version", API_VERSIONS)
async def test_exec_environment_agrees_with_kubectl(
    tmp_path: Path, plugin: Plugin, ca_pem: bytes, api_version: str
) -> None:
    plugin.answer(credential(api_version))
    path = exec_kubeconfig(tmp_path, kubeconfig_exec(api_version), ca_pem)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "KUBECONFIG": str(path)}
    kubectl = await asyncio.create_subprocess_exec(
        *[KUBECTL, "get", "--raw", "/version", "--request-timeout=2s"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    await asyncio.wait_for(kubectl.wait(), 60)  # fails to connect, after running the plugin
    assert plugin.runs >= 1, "kubectl did not run the plugin"
    theirs = plugin.seen(1)
    await load_kubeconfig([path]).auth.headers()
    ours = plugin.seen(plugin.runs)
    assert json.loads(ours["info"]) == json.loads(theirs["info"])
    assert ours["argv"] == theirs["argv"]
    assert (ours["env"]["FOO"], ours["env"]["EMPTY"]) == (theirs["env"]["FOO"], "")


async def test_provide_cluster_info_off(tmp_path: Path, plugin: Plugin) -> None:
    path = exec_kubeconfig(tmp_path, kubeconfig_exec(provideClusterInfo=False))
    await load_kubeconfig([path]).auth.headers()
    assert json.loads(plugin.seen(1)["info"])["spec"] == {"interactive": False}


async def test_kubeconfig_exec_missing_binary(tmp_path: Path, plugin: Plugin) -> None:
    path = exec_kubeconfig(tmp_path, kubeconfig_exec(command="no-such-auth-plugin"))
    with pytest.raises(ExecPluginError) as info:
        await load_kubeconfig([path]).auth.headers()
    assert "install the fake plugin" in str(info.value)
    assert f"user 'u' in {path}" in str(info.value)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"interactiveMode": None}, "interactiveMode must be one of"),
        ({"interactiveMode": "Always"}, "without a terminal"),
        ({"apiVersion": "client.authentication.k8s.io/v1alpha1"}, "apiVersion must be one of"),
        ({"command": ""}, "exec.command is not set"),
        ({"args": "--one"}, "exec.args must be a list"),
        ({"env": [{"value": "x"}]}, r"exec.env\[0\] needs a name"),
    ],
)
def test_kubeconfig_exec_errors(
    tmp_path: Path, plugin: Plugin, change: dict[str, Any], expected: str
) -> None:
    spec = {k: v for k, v in {**kubeconfig_exec(), **change}.items() if v is not None}
    path = exec_kubeconfig(tmp_path, spec)
    with pytest.raises(ConfigError, match=expected) as info:
        load_kubeconfig([path])
    assert f"user 'u' in {path}" in str(info.value)
    assert plugin.runs == 0


async def test_v1beta1_defaults_interactive_mode(tmp_path: Path, plugin: Plugin) -> None:
    plugin.answer(credential(V1BETA1))
    spec = {k: v for k, v in kubeconfig_exec(V1BETA1).items() if k != "interactiveMode"}
    cfg = load_kubeconfig([exec_kubeconfig(tmp_path, spec)])
    assert await cfg.auth.headers() == bearer("tok-1")


def test_exec_with_token_is_two_methods(tmp_path: Path) -> None:
    doc = {
        "current-context": "c",
        "clusters": [{"name": "cl", "cluster": {"server": "https://x"}}],
        "contexts": [{"name": "c", "context": {"cluster": "cl", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": TOKEN, "exec": kubeconfig_exec()}}],
    }
    config = tmp_path / "config"
    config.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match="more than one authentication method") as info:
        load_kubeconfig([config])
    assert TOKEN not in str(info.value)


# -- stderr redaction whatever the encoding ------------------------------------------------------


def _real_key() -> str:
    return trustme.CA().issue_cert("plugin.example").private_key_pem.bytes().decode()


def _key_lines(key: str) -> list[str]:
    return [ln for ln in key.splitlines() if ln and not ln.startswith("-----")]


STDERR_FORMS = {
    # the credential the plugin printed on stdout, dumped again on stderr as JSON: "\n" escapes
    "json-escaped": lambda cred, key, tok: f"debug: sending {cred}\nerror: cache write failed",
    # the same, escaped twice (a JSON log line quoting it)
    "json-in-json": lambda cred, key, tok: json.dumps({"msg": "sending", "body": cred}),
    # the key as is (real newlines) and the token in a header dump
    "unescaped": lambda cred, key, tok: f"loaded key:\n{key}\nAuthorization: Bearer {tok}\n",
    # a YAML-ish dump, and a key cut off before its END line
    "yaml-cut": lambda cred, key, tok: f"token: {tok}\nclientKeyData: |\n  {key[:200]}",
}


@pytest.mark.parametrize("exit_code, stdout_kind", [(1, "credential"), (2, "garbage")])
@pytest.mark.parametrize("form", list(STDERR_FORMS))
async def test_stderr_redacts_keys_and_tokens_in_any_encoding(
    plugin: Plugin, form: str, exit_code: int, stdout_kind: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Whether or not stdout still parses (so the secrets are known or not), no line of a
    private key and no token from stderr reaches the error (and so the logs and /readyz)."""
    key, token = _real_key(), "exec-SECRET-token-7a8b9c"
    cred = credential(token=token, clientCertificateData=CERT, clientKeyData=key)
    stdout = cred if stdout_kind == "credential" else "not json"
    plugin.answer(stdout, exit=exit_code,
                  stderr="first words: hi\n" + STDERR_FORMS[form](cred, key, token)
                  + "\nlast words: bye")
    with pytest.raises(ExecPluginError) as info:
        await ExecAuth(str(plugin.path)).headers()
    message = str(info.value)
    assert f"exited with code {exit_code}" in message and "first words: hi" in message
    if form != "yaml-cut":  # a key cut off before its END line may be blanked to the end
        assert "last words: bye" in message
    assert "<redacted>" in message
    for secret in (token, *_key_lines(key)):
        assert secret not in message, (form, message)
        assert json.dumps(secret)[1:-1] not in message


async def test_stderr_redaction_reaches_watcher_logs(
    plugin: Plugin, caplog: pytest.LogCaptureFixture
) -> None:
    """The plugin's failure surfaces as a watcher's Unauthorized and a WARNING log line:
    neither holds the key or the token, in either encoding."""
    import watchkeeper as wk
    from watchkeeper_sim import ApiServer

    key, token = _real_key(), "exec-SECRET-token-7a8b9c"
    cred = credential(token=token, clientCertificateData=CERT, clientKeyData=key)
    plugin.answer(cred, exit=1, stderr=f"{cred}\n{key}\nfailed")
    caplog.set_level(logging.DEBUG, logger="watchkeeper")
    async with ApiServer() as srv:
        config = wk.ClientConfig(server=srv.url, auth=ExecAuth(str(plugin.path)))
        async with wk.Client(config) as client:
            api = client.api("configmaps", namespace="default")
            async for ev in wk.watcher(api, wk.WatchConfig(max_unhealthy=None),
                                       backoff=wk.ConstantBackoff(0.01)):
                assert isinstance(ev, wk.WatchError | wk.InitStart), ev
                if isinstance(ev, wk.WatchError):
                    err = ev.error
                    break
    assert isinstance(err, wk.Unauthorized) and "<redacted>" in str(err)
    warnings = "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
    assert "failed" in warnings
    for secret in (token, *_key_lines(key)):
        for text in (str(err), warnings, caplog.text):
            assert secret not in text and json.dumps(secret)[1:-1] not in text


@pytest.mark.parametrize("form", ["url-encoded", "returned-two-runs-ago"])
async def test_stderr_hides_the_tokens_it_returned_in_any_encoding(
    plugin: Plugin, form: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Opaque tokens (with ``+``, ``/`` and ``=``) the plugin returned on earlier runs, then
    a failing run (with bad output) whose stderr quotes one: URL-encoded in a URL it logs,
    or the one from two runs ago as is (still valid, maybe): the ExecPluginError holds none
    of them, in no form."""
    old, new = "ex3c+OLD/opaque==1a2b3c", "ex3c+NEW/opaque==4d5e6f"
    auth = ExecAuth(str(plugin.path))
    for token in (old, new):
        plugin.answer(credential(token=token))
        assert await auth.headers() == bearer(token)
        await auth.refresh()
    quoted = quote(new, safe="") if form == "url-encoded" else old
    plugin.answer(f"no credential: {quoted}", exit=1,
                  stderr=f"GET https://idp.example/renew?t={quoted}: 401\n")
    with pytest.raises(ExecPluginError) as info:
        await auth.headers()
    message = str(info.value)
    for token in (old, new):
        for shown in (token, quote(token, safe=""), quote_plus(token), json.dumps(token)):
            assert shown not in message and shown not in repr(info.value)
            assert shown not in caplog.text
    assert "exited with code 1" in message and "idp.example/renew?t=<redacted>" in message


# -- the exec plugin's time limit is a client setting --------------------------------------------


async def test_hung_plugin_fails_after_the_clients_exec_timeout(
    tmp_path: Path, plugin: Plugin
) -> None:
    """A plugin from the kubeconfig that never answers: with Timeouts(exec_plugin=0.5) the
    request fails as Unauthorized caused by ExecPluginError after 0.5 s, not after 60 s."""
    import time

    import watchkeeper as wk
    from watchkeeper.client import Timeouts

    plugin.answer(credential(), sleep=30)
    path = exec_kubeconfig(tmp_path, kubeconfig_exec(command=str(plugin.path)))
    config = load_kubeconfig([path])
    assert isinstance(config.auth, ExecAuth) and config.auth.timeout == 60.0  # the default
    async with wk.Client(config, timeouts=Timeouts(exec_plugin=0.5)) as client:
        assert config.auth.timeout == 0.5
        started = time.monotonic()
        with pytest.raises(wk.Unauthorized) as info:
            await client.api("configmaps", namespace="default").list()
        took = time.monotonic() - started
    assert isinstance(info.value.__cause__, ExecPluginError)
    assert "no answer within 0.5 s" in str(info.value)
    assert 0.4 < took < 5.0, took


async def test_explicit_plugin_timeout_wins_over_the_clients(plugin: Plugin) -> None:
    import watchkeeper as wk
    from watchkeeper.client import Timeouts

    auth = ExecAuth(str(plugin.path), timeout=0.3)
    wk.Client(wk.ClientConfig(server="http://127.0.0.1:1", auth=auth),
              timeouts=Timeouts(exec_plugin=7))
    assert auth.timeout == 0.3
    with pytest.raises(ValueError, match="exec_plugin"):
        Timeouts(exec_plugin=0)
