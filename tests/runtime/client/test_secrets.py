"""No credential ever shows up in an error, a repr or a log line, however a request fails.

Every test logs at DEBUG for the whole ``watchkeeper`` tree and aiohttp, makes requests fail
in a different way against the simulator (401, 403, refused, TLS, timeouts, 5xx, 429, a
broken exec plugin), and then searches everything a person or a log shipper could see.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import secrets
import socket
import sys
import traceback
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper.client import Timeouts
from watchkeeper.client.auth import BasicAuth, StaticToken
from watchkeeper.client.exec_auth import ExecAuth
from watchkeeper_sim import ApiServer

FAST = Timeouts(connect=2.0, request=0.3)


def distinctive(label: str) -> str:
    return f"wk-{label}-{secrets.token_hex(16)}"


@pytest.fixture(autouse=True)
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="watchkeeper")
    caplog.set_level(logging.DEBUG, logger="aiohttp")
    caplog.set_level(logging.DEBUG, logger="asyncio")
    return caplog


@pytest.fixture
async def srv() -> AsyncIterator[ApiServer]:
    async with ApiServer(bookmark_interval=0.3, bookmark_lead=0.2) as s:
        yield s


@pytest.fixture
async def tls_srv() -> AsyncIterator[ApiServer]:
    async with ApiServer(tls=True) as s:
        yield s


def fragments(secret: str | bytes) -> list[str]:
    """The secret, and for a PEM each line of its base64 body (a log could show one line)."""
    text = secret.decode() if isinstance(secret, bytes) else secret
    if "-----BEGIN" not in text:
        return [text]
    body = [ln for ln in text.splitlines() if ln and not ln.startswith("-----")]
    return [text, "".join(body), *[ln for ln in body if len(ln) >= 16]]


def exception_text(exc: BaseException) -> str:
    """str, repr, attributes and full traceback of ``exc`` and everything chained to it."""
    parts: list[str] = []
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        parts += [str(e), repr(e), repr(getattr(e, "__dict__", {})), repr(e.args)]
        todo += [e.__cause__, e.__context__]
    parts.append("".join(traceback.format_exception(exc)))
    return "\n".join(parts)


def log_text(caplog: pytest.LogCaptureFixture) -> str:
    fmt = logging.Formatter("%(name)s %(levelname)s %(message)s")
    return "\n".join(fmt.format(r) for r in caplog.records)


def assert_hidden(secret_values: Iterable[str | bytes], *texts: str) -> None:
    for secret in secret_values:
        for frag in fragments(secret):
            for text in texts:
                assert frag not in text, f"a credential leaked: {text[:300]!r}"


def visible(client: wk.Client, api: wk.Api | None = None) -> list[str]:
    cfg = client.config
    return [repr(client), str(client), repr(cfg), str(cfg), repr(cfg.auth), repr(api),
            repr(client.transport.__dict__)]


async def failing(coro: Any) -> wk.ApiError:
    try:
        await coro
    except wk.ApiError as exc:
        return exc
    raise AssertionError("the request was expected to fail")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- bearer tokens -----------------------------------------------------------------------------


async def test_rejected_token_401(srv: ApiServer, debug_logs: pytest.LogCaptureFixture) -> None:
    token = distinctive("bearer")
    config = wk.ClientConfig(server=srv.url, auth=StaticToken(token))
    async with wk.Client(config) as client:
        api = client.api("configmaps", namespace="default")
        err = await failing(api.list())
        assert isinstance(err, wk.Unauthorized) and err.code == 401
        watch_err = await failing(_open_watch(api))
        assert isinstance(watch_err, wk.Unauthorized)
        texts = [exception_text(err), exception_text(watch_err), *visible(client, api)]
    assert srv.count(status=401) == 4  # each request was retried once after a refresh
    assert_hidden([token], *texts, log_text(debug_logs))


async def _open_watch(api: wk.Api) -> None:
    async with api.watch(timeout_seconds=1) as stream:
        async for _ev in stream:
            pass


async def test_valid_token_without_rights_403(
    srv: ApiServer, debug_logs: pytest.LogCaptureFixture
) -> None:
    token = distinctive("bearer")
    srv.add_user("eve", token=token)
    config = wk.ClientConfig(server=srv.url, auth=StaticToken(token))
    async with wk.Client(config) as client:
        api = client.api("secrets", namespace="kube-system")
        errors = [
            await failing(api.list()),
            await failing(api.get("x")),
            await failing(api.create({"apiVersion": "v1", "kind": "Secret",
                                      "metadata": {"name": "s"}, "stringData": {"t": token}})),
            await failing(api.patch("x", {"data": {}})),
            await failing(api.delete("x")),
            await failing(_open_watch(api)),
        ]
        assert all(isinstance(e, wk.Forbidden) and e.user == "eve" for e in errors)
        texts = [exception_text(e) for e in errors] + visible(client, api)
    assert_hidden([token], *texts, log_text(debug_logs))


async def test_server_errors_and_throttling(
    srv: ApiServer, debug_logs: pytest.LogCaptureFixture
) -> None:
    token = srv.add_user("ops", token=distinctive("bearer"), groups=["system:masters"])
    config = wk.ClientConfig(server=srv.url, auth=StaticToken(token))
    async with wk.Client(config) as client:
        api = client.api("configmaps", namespace="default")
        srv.faults.error(503, count=1)
        e503 = await failing(api.list())
        srv.faults.throttle(retry_after=2, count=1)
        e429 = await failing(api.get("x"))
        srv.faults.error(500, count=1, watch=True)
        e500 = await failing(_open_watch(api))
        assert isinstance(e503, wk.ServerError) and isinstance(e429, wk.TooManyRequests)
        assert isinstance(e500, wk.ServerError) and e429.retry_after == 2
        texts = [exception_text(e) for e in (e503, e429, e500)] + visible(client, api)
    assert_hidden([token], *texts, log_text(debug_logs))


# -- basic auth ----------------------------------------------------------------------------------


async def test_basic_auth_password(srv: ApiServer, debug_logs: pytest.LogCaptureFixture) -> None:
    password = distinctive("password")
    header_value = base64.b64encode(f"bob:{password}".encode()).decode()
    config = wk.ClientConfig(server=srv.url, auth=BasicAuth("bob", password))
    assert "bob" in repr(config.auth)  # the user name is not secret, the password is
    async with wk.Client(config) as client:
        api = client.api("configmaps", namespace="default")
        err = await failing(api.list())
        assert isinstance(err, wk.Unauthorized)  # the simulator, like 1.28+, has no basic auth
        texts = [exception_text(err), *visible(client, api)]
    assert_hidden([password, header_value], *texts, log_text(debug_logs))


# -- transport failures: refused, TLS, timeouts --------------------------------------------------


async def test_connection_refused(debug_logs: pytest.LogCaptureFixture) -> None:
    token = distinctive("bearer")
    config = wk.ClientConfig(server=f"http://127.0.0.1:{closed_port()}", auth=StaticToken(token))
    async with wk.Client(config) as client:
        api = client.api("configmaps", namespace="default")
        errors = [await failing(api.list()), await failing(_open_watch(api))]
        assert all(isinstance(e, wk.ConnectionFailed) for e in errors)
        assert "cannot connect to 127.0.0.1" in str(errors[0])
        texts = [exception_text(e) for e in errors] + visible(client, api)
    assert_hidden([token], *texts, log_text(debug_logs))


async def test_refused_by_a_running_server(
    srv: ApiServer, debug_logs: pytest.LogCaptureFixture
) -> None:
    token = srv.add_user("u", token=distinctive("bearer"))
    srv.faults.refuse(count_refused=True)
    async with wk.Client(wk.ClientConfig(server=srv.url, auth=StaticToken(token))) as client:
        err = await failing(client.api("namespaces").list())
        assert isinstance(err, wk.ConnectionFailed)
        texts = [exception_text(err), *visible(client)]
    assert_hidden([token], *texts, log_text(debug_logs))


async def test_tls_verification_failure(
    tls_srv: ApiServer, debug_logs: pytest.LogCaptureFixture
) -> None:
    token = distinctive("bearer")
    cert, key = tls_srv.client_cert("frank")
    config = wk.ClientConfig(server=tls_srv.url, auth=StaticToken(token),
                             client_cert_data=cert, client_key_data=key)  # but no CA
    async with wk.Client(config) as client:
        err = await failing(client.api("namespaces").list())
        assert isinstance(err, wk.ConnectionFailed) and err.reason == "TLSError"
        texts = [exception_text(err), *visible(client)]
    assert_hidden([token, key], *texts, log_text(debug_logs))


async def test_request_timeout(srv: ApiServer, debug_logs: pytest.LogCaptureFixture) -> None:
    token = srv.add_user("slowpoke", token=distinctive("bearer"), groups=["system:masters"])
    config = wk.ClientConfig(server=srv.url, auth=StaticToken(token))
    async with wk.Client(config, timeouts=FAST) as client:
        api = client.api("configmaps", namespace="default")
        hang = srv.faults.hang(watch=False)
        err = await failing(api.list())
        srv.faults.remove(hang)
        assert isinstance(err, wk.Timeout) and err.is_transient
        # a watch that goes silent fails its read after read_timeout
        srv.faults.stall(watch=True)
        rv = (await api.list()).resource_version

        async def silent_watch() -> None:
            async with api.watch(resource_version=rv, read_timeout=0.3,
                                 allow_bookmarks=False) as stream:
                async for _ev in stream:
                    pass

        stalled = await failing(silent_watch())
        assert isinstance(stalled, wk.Timeout)
        texts = [exception_text(err), exception_text(stalled), *visible(client, api)]
    assert_hidden([token], *texts, log_text(debug_logs))


# -- client certificates -------------------------------------------------------------------------


async def test_client_key_never_shows(
    tls_srv: ApiServer, debug_logs: pytest.LogCaptureFixture
) -> None:
    config = tls_srv.client_config("grace", cert_groups=["nobody"])
    key = config.client_key_data
    assert key is not None and b"PRIVATE KEY" in key
    errors: list[wk.ApiError] = []
    async with wk.Client(config, timeouts=FAST) as client:
        api = client.api("configmaps", namespace="default")
        errors.append(await failing(api.list()))  # 403: the CN is authenticated, not allowed
        assert isinstance(errors[0], wk.Forbidden) and errors[0].user == "grace"
        tls_srv.faults.hang(user="grace")
        errors.append(await failing(api.get("x")))
        tls_srv.faults.clear()
        tls_srv.faults.refuse(count_refused=True)
        errors.append(await failing(api.get("x")))
        tls_srv.faults.clear()
        assert [type(e) for e in errors] == [wk.Forbidden, wk.Timeout, wk.ConnectionFailed]
        texts = [exception_text(e) for e in errors] + visible(client, api)
    # ... nor in a mis-configured key pair's error
    other_key = tls_srv.client_cert("h")[1]
    bad = dataclasses.replace(config, client_key_data=other_key)
    with pytest.raises(wk.ConfigError) as info:
        bad.ssl_context()
    texts.append(exception_text(info.value))
    assert_hidden([key, other_key], *texts, log_text(debug_logs))


# -- exec credential plugins ---------------------------------------------------------------------

PLUGIN = """
import json, os, sys
from pathlib import Path
state = Path(os.environ["WK_STATE"])
runs = int(state.read_text()) if state.exists() else 0
state.write_text(str(runs + 1))
token = os.environ["WK_TOKEN"]
if runs >= int(os.environ.get("WK_FAIL_AFTER", "99")):
    print(f"cannot refresh: the old token {token} was revoked", file=sys.stderr)
    sys.exit(3)
print(json.dumps({"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1",
                  "status": {"token": token}}))
"""


def exec_auth(tmp_path: Path, token: str, *, fail_after: int = 99,
              extra_secret: str = "") -> ExecAuth:
    script = tmp_path / "plugin.py"
    script.write_text(PLUGIN)
    env = {"WK_STATE": str(tmp_path / "runs"), "WK_TOKEN": token,
           "WK_FAIL_AFTER": str(fail_after), "WK_EXTRA": extra_secret}
    return ExecAuth(sys.executable, [str(script), extra_secret], env, name="user 'ci'")


async def test_exec_credential_rejected(
    srv: ApiServer, tmp_path: Path, debug_logs: pytest.LogCaptureFixture
) -> None:
    token, extra = distinctive("exec-token"), distinctive("exec-arg")
    config = wk.ClientConfig(server=srv.url, auth=exec_auth(tmp_path, token, extra_secret=extra))
    async with wk.Client(config) as client:
        err = await failing(client.api("configmaps", namespace="default").list())
        assert isinstance(err, wk.Unauthorized)
        assert (tmp_path / "runs").read_text() == "2"  # re-run after the 401
        texts = [exception_text(err), *visible(client)]
    assert_hidden([token, extra], *texts, log_text(debug_logs))


async def test_exec_credential_with_rights_then_forbidden(
    srv: ApiServer, tmp_path: Path, debug_logs: pytest.LogCaptureFixture
) -> None:
    token = srv.add_user("ci", token=distinctive("exec-token"))
    srv.rbac.grant("ci", verbs=["list"], resources=["configmaps"], namespaces=["default"])
    config = wk.ClientConfig(server=srv.url, auth=exec_auth(tmp_path, token))
    async with wk.Client(config) as client:
        assert (await client.api("configmaps", namespace="default").list()).items == []
        err = await failing(client.api("configmaps", namespace="kube-system").list())
        assert isinstance(err, wk.Forbidden) and err.user == "ci"
        texts = [exception_text(err), *visible(client)]
    assert_hidden([token], *texts, log_text(debug_logs))


async def test_exec_plugin_failing_after_a_401_redacts_its_stderr(
    srv: ApiServer, tmp_path: Path, debug_logs: pytest.LogCaptureFixture
) -> None:
    token = distinctive("exec-token")
    config = wk.ClientConfig(server=srv.url, auth=exec_auth(tmp_path, token, fail_after=1))
    async with wk.Client(config) as client:
        # A failing plugin is an Unauthorized (so watchers surface and retry it), caused by
        # the plugin's own error.
        with pytest.raises(wk.Unauthorized) as info:
            await client.api("configmaps", namespace="default").list()
        assert isinstance(info.value.__cause__, wk.ConfigError)
        assert info.value.reason == "CredentialsUnavailable"
        assert "exited with code 3" in str(info.value)
        assert "<redacted>" in str(info.value)
        texts = [exception_text(info.value), *visible(client)]
    assert_hidden([token], *texts, log_text(debug_logs))


# -- kubeconfig: the loaded config carries the secrets, its repr does not -----------------------


async def test_kubeconfig_loaded_config(
    tls_srv: ApiServer, tmp_path: Path, debug_logs: pytest.LogCaptureFixture
) -> None:
    cert, key = tls_srv.client_cert("ivy")
    token = distinctive("kubeconfig-token")
    assert tls_srv.ca_pem is not None
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "sim",
        "clusters": [{"name": "sim", "cluster": {
            "server": tls_srv.url,
            "certificate-authority-data": base64.b64encode(tls_srv.ca_pem).decode()}}],
        "users": [{"name": "ivy", "user": {
            "token": token,
            "client-certificate-data": base64.b64encode(cert).decode(),
            "client-key-data": base64.b64encode(key).decode()}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "ivy"}}],
    }
    path = tmp_path / "config"
    path.write_text(json.dumps(doc))  # JSON is YAML
    client = await wk.Client.from_env(str(path))
    async with client:
        err = await failing(client.api("secrets", namespace="default").list())
        assert isinstance(err, wk.Forbidden) and err.user == "ivy"  # the certificate wins
        texts = [exception_text(err), *visible(client)]
    b64_key = base64.b64encode(key).decode()
    assert_hidden([token, key, b64_key], *texts, log_text(debug_logs))


# -- the logs of the layer above: a watcher reports every failure --------------------------------


async def test_watcher_error_logs(srv: ApiServer, debug_logs: pytest.LogCaptureFixture) -> None:
    token = srv.add_user("watcher", token=distinctive("bearer"))
    bad = distinctive("bearer")
    seen: list[BaseException] = []
    for auth_token in (bad, token):  # 401 (unknown token), then 403 (no rights)
        config = wk.ClientConfig(server=srv.url, auth=StaticToken(auth_token))
        async with wk.Client(config) as client:
            api = client.api("configmaps", namespace="default")
            events = wk.watcher(api, wk.WatchConfig(max_unhealthy=None),
                                backoff=wk.ConstantBackoff(0.01))
            async for ev in events:
                if isinstance(ev, wk.WatchError):
                    seen.append(ev.error)
                    if len(seen) % 3 == 0:
                        break
    assert [type(e) for e in seen] == [wk.Unauthorized] * 3 + [wk.Forbidden] * 3
    logged = log_text(debug_logs)
    assert "watch" in logged  # the watcher did log its degraded state
    assert_hidden([token, bad], logged, *(exception_text(e) for e in seen))


def test_the_leak_check_itself_finds_secrets(debug_logs: pytest.LogCaptureFixture) -> None:
    key = b"-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49\nAwEHBG0wawIBAQQg\n" \
          b"-----END PRIVATE KEY-----\n"
    logging.getLogger("watchkeeper.client.transport").debug("one line: %s", "AwEHBG0wawIBAQQg")
    with pytest.raises(AssertionError, match="a credential leaked"):
        assert_hidden([key], log_text(debug_logs))
    try:
        raise wk.ConnectionFailed("failed") from ValueError("token wk-x-1")
    except wk.ApiError as exc:
        with pytest.raises(AssertionError, match="a credential leaked"):
            assert_hidden(["wk-x-1"], exception_text(exc))
