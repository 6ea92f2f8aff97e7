"""kubeconfig, in-cluster and default-chain loading; kubectl is the reference for resolution."""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml

from watchkeeper.client import config as config_mod
from watchkeeper.client.auth import NoAuth, TokenFile
from watchkeeper.client.config import (
    ClientConfig,
    ConfigError,
    Impersonation,
    load_config,
    load_incluster,
    load_kubeconfig,
)

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
needs_kubectl = pytest.mark.skipif(not os.path.exists(KUBECTL), reason="kubectl not installed")

TOKEN = "tok-SECRET-4b1d9e2a"
TOKEN_B = "tok-SECRET-b-77e0c3"
PASSWORD = "pw-SECRET-c0ffee11"
KEY_MARK = "keymaterialSECRET9d2f"


@dataclass(frozen=True)
class Pki:
    ca: bytes
    cert: bytes
    key: bytes

    @property
    def secrets(self) -> list[str]:
        body = "".join(self.key.decode().splitlines()[1:-1])
        return [b64(self.key), body[10:50]]


@pytest.fixture(scope="module")
def pki() -> Pki:
    ca = trustme.CA()
    leaf = ca.issue_cert("admin")
    return Pki(ca.cert_pem.bytes(), leaf.cert_chain_pems[0].bytes(), leaf.private_key_pem.bytes())


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty HOME, no KUBECONFIG, no in-cluster environment: each test sets what it needs."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.setattr(config_mod, "SERVICE_ACCOUNT_DIR", tmp_path / "no-service-account")
    return home


@pytest.fixture(autouse=True)
def no_secret_in_logs(caplog: pytest.LogCaptureFixture, pki: Pki) -> Iterator[None]:
    caplog.set_level(logging.DEBUG, logger="watchkeeper")
    yield
    for secret in [TOKEN, TOKEN_B, PASSWORD, KEY_MARK, *pki.secrets]:
        assert secret not in caplog.text


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write(path: Path, doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return path


def kubeconfig(
    clusters: dict[str, dict[str, Any]],
    users: dict[str, dict[str, Any]],
    contexts: dict[str, dict[str, Any]],
    current: str | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in clusters.items()],
        "users": [{"name": n, "user": u} for n, u in users.items()],
        "contexts": [{"name": n, "context": c} for n, c in contexts.items()],
    }
    if current is not None:
        doc["current-context"] = current
    return doc


def base_doc(pki: Pki) -> dict[str, Any]:
    """A valid kubeconfig holding every kind of secret; error cases break one thing in it."""
    return kubeconfig(
        clusters={
            "c": {"server": "https://k.example:6443", "certificate-authority-data": b64(pki.ca)}
        },
        users={
            "tok": {"token": TOKEN},
            "basic": {"username": "admin", "password": PASSWORD},
            "cert": {"client-certificate-data": b64(pki.cert), "client-key-data": b64(pki.key)},
        },
        contexts={
            "main": {"cluster": "c", "user": "tok", "namespace": "team-a"},
            "basic": {"cluster": "c", "user": "basic"},
            "cert": {"cluster": "c", "user": "cert"},
        },
        current="main",
    )


def kubectl_view(
    home: Path, env_value: str | None, context: str | None, cwd: Path
) -> dict[str, Any]:
    """What kubectl resolves: the minified, flattened (files inlined) config of one context."""
    cmd = [KUBECTL, "config", "view", "--minify", "--raw", "--flatten", "-o", "json"]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home)}
    if env_value is not None:
        env["KUBECONFIG"] = env_value
    out = subprocess.run(
        [*cmd, *(["--context", context] if context else [])],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
    ).stdout
    view: dict[str, Any] = json.loads(out)
    return view


def _decoded(value: str | None) -> bytes | None:
    return base64.b64decode(value) if value is not None else None


async def assert_same_as_kubectl(cfg: ClientConfig, view: dict[str, Any]) -> None:
    assert cfg.context == view["current-context"]
    (ctx,) = view["contexts"]
    (cluster,) = view["clusters"]
    assert cfg.context == ctx["name"]
    c = cluster["cluster"]
    assert cfg.server == c["server"].rstrip("/")
    assert cfg.ca_data == _decoded(c.get("certificate-authority-data"))
    assert cfg.insecure_skip_tls_verify == c.get("insecure-skip-tls-verify", False)
    assert cfg.tls_server_name == c.get("tls-server-name")
    assert cfg.disable_compression == c.get("disable-compression", False)
    assert cfg.namespace == ctx["context"].get("namespace", "default")
    user: dict[str, Any] = view["users"][0]["user"] if view.get("users") else {}
    assert cfg.client_cert_data == _decoded(user.get("client-certificate-data"))
    assert cfg.client_key_data == _decoded(user.get("client-key-data"))
    extra = user.get("as-user-extra") or {}
    assert cfg.impersonate == (Impersonation(
        user["as"], user.get("as-uid"), tuple(user.get("as-groups") or ()),
        tuple((k, tuple(v)) for k, v in sorted(extra.items()))) if user.get("as") else None)
    headers = await cfg.auth.headers()
    if "token" in user:
        assert headers == {"Authorization": f"Bearer {user['token']}"}
    elif "username" in user:
        pair = f"{user['username']}:{user.get('password', '')}".encode()
        assert headers == {"Authorization": f"Basic {b64(pair)}"}
    else:
        assert headers == {}


# Each scenario writes files under tmp_path and returns (KUBECONFIG value or None, context).
Scenario = Callable[[Path, Path, Pki], tuple[str | None, str | None]]


def single_file(tmp: Path, home: Path, pki: Pki) -> tuple[str | None, str | None]:
    doc = base_doc(pki)
    doc["clusters"][0]["cluster"]["tls-server-name"] = "api.internal"
    doc["clusters"][0]["cluster"]["disable-compression"] = True
    doc["users"][0]["user"].update({"as": "jane", "as-uid": "j-1", "as-groups": ["devs", "qa"],
                                    "as-user-extra": {"team": ["a", "b"], "env": ["x"]}})
    return str(write(tmp / "one.yaml", doc)), None


def explicit_context_basic_insecure(tmp: Path, home: Path, pki: Pki) -> tuple[str | None, str]:
    doc = base_doc(pki)
    doc["clusters"].append({"name": "lab", "cluster": {"server": "https://lab:443/", **INSECURE}})
    doc["contexts"].append({"name": "lab", "context": {"cluster": "lab", "user": "basic"}})
    return str(write(tmp / "one.yaml", doc)), "lab"


INSECURE = {"insecure-skip-tls-verify": True}


def _two_files(tmp: Path, pki: Pki) -> str:
    """a.yaml and b.yaml define the same names differently; a has no current-context."""
    a = kubeconfig(
        clusters={"c": {"server": "https://a.example", "certificate-authority-data": b64(pki.ca)}},
        users={"u": {"token": TOKEN}},
        contexts={"shared": {"cluster": "c", "user": "u", "namespace": "from-a"}},
    )
    b = kubeconfig(
        clusters={
            "c": {"server": "https://b.example", **INSECURE},
            "b-only": {"server": "https://b-only.example", "tls-server-name": "bee"},
        },
        users={"u": {"token": TOKEN_B}, "u2": {"username": "bob", "password": PASSWORD}},
        contexts={
            "shared": {"cluster": "b-only", "user": "u2", "namespace": "from-b"},
            "b-ctx": {"cluster": "c", "user": "u2", "namespace": "bns"},
            "b-ctx2": {"cluster": "b-only", "user": "u"},
        },
        current="shared",
    )
    files = [tmp / "missing.yaml", write(tmp / "a.yaml", a), write(tmp / "b.yaml", b)]
    return os.pathsep.join(["", str(files[0]), str(files[1]), "", str(files[2])])


def merged(tmp: Path, home: Path, pki: Pki) -> tuple[str | None, str | None]:
    return _two_files(tmp, pki), None


def merged_context_from_second(tmp: Path, home: Path, pki: Pki) -> tuple[str | None, str]:
    return _two_files(tmp, pki), "b-ctx"


def merged_other_context(tmp: Path, home: Path, pki: Pki) -> tuple[str | None, str]:
    return _two_files(tmp, pki), "b-ctx2"


def relative_paths(tmp: Path, home: Path, pki: Pki) -> tuple[str | None, str | None]:
    """File references relative to the kubeconfig's own directory, not the working one."""
    write(tmp / "cfg" / "pki" / "ca.pem", pki.ca.decode())
    write(tmp / "cfg" / "sub" / "certs" / "client.crt", pki.cert.decode())
    write(tmp / "cfg" / "sub" / "certs" / "client.key", pki.key.decode())
    doc = kubeconfig(
        clusters={"c": {"server": "https://rel.example", "certificate-authority": "../pki/ca.pem"}},
        users={"u": {"client-certificate": "certs/client.crt", "client-key": "certs/client.key"}},
        contexts={"rel": {"cluster": "c", "user": "u"}},
        current="rel",
    )
    write(tmp / "cfg" / "sub" / "config", doc)
    return "cfg/sub/config", None  # relative to the working directory, like a user might


def data_fields(tmp: Path, home: Path, pki: Pki) -> tuple[str | None, str | None]:
    return str(write(tmp / "data.yaml", base_doc(pki))), "cert"


def home_default(tmp: Path, home: Path, pki: Pki) -> tuple[str | None, str | None]:
    doc = base_doc(pki)
    doc["contexts"].append({"name": "nouser", "context": {"cluster": "c"}})
    write(home / ".kube" / "config", doc)
    return None, "nouser"


@needs_kubectl
@pytest.mark.parametrize(
    "scenario",
    [
        single_file,
        explicit_context_basic_insecure,
        merged,
        merged_context_from_second,
        merged_other_context,
        relative_paths,
        data_fields,
        home_default,
    ],
)
async def test_resolution_agrees_with_kubectl(
    scenario: Scenario, tmp_path: Path, home: Path, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(tmp_path)
    env_value, context = scenario(tmp_path, home, pki)
    if env_value is not None:
        monkeypatch.setenv("KUBECONFIG", env_value)
    cfg = load_kubeconfig(context=context)
    view = kubectl_view(home, env_value, context, cwd=tmp_path)
    monkeypatch.chdir(elsewhere)  # what we loaded must not depend on the working directory
    await assert_same_as_kubectl(cfg, view)


async def test_merge_details(tmp_path: Path, pki: Pki, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", _two_files(tmp_path, pki))
    cfg = load_kubeconfig()
    # current-context from b (a sets none), the entry itself from a (first definition wins)
    assert (cfg.context, cfg.server, cfg.namespace) == ("shared", "https://a.example", "from-a")
    assert await cfg.auth.headers() == {"Authorization": f"Bearer {TOKEN}"}
    other = load_kubeconfig(context="b-ctx")
    assert (other.server, other.ca_data, other.insecure_skip_tls_verify) == (
        "https://a.example",
        pki.ca,
        False,
    )


def test_explicit_paths_and_ssl_context(tmp_path: Path, pki: Pki) -> None:
    path = write(tmp_path / "x" / "config", base_doc(pki))
    cfg = load_kubeconfig([path], context="cert")
    assert (cfg.client_cert_data, cfg.client_key_data, cfg.ca_data) == (pki.cert, pki.key, pki.ca)
    assert cfg.ssl_context() is not None


async def test_token_file_relative_and_bare_server(tmp_path: Path) -> None:
    write(tmp_path / "k" / "tok", f"  {TOKEN}\n")
    doc = kubeconfig(
        clusters={"c": {"server": "127.0.0.1:8080"}, "s": {"server": "h:6443", **INSECURE}},
        users={"u": {"tokenFile": "tok"}},
        contexts={"a": {"cluster": "c", "user": "u"}, "b": {"cluster": "s"}},
        current="a",
    )
    path = write(tmp_path / "k" / "config", doc)
    cfg = load_kubeconfig([path])
    assert cfg.server == "http://127.0.0.1:8080"  # client-go: no TLS settings, plain http
    assert isinstance(cfg.auth, TokenFile)
    assert await cfg.auth.headers() == {"Authorization": f"Bearer {TOKEN}"}
    other = load_kubeconfig([path], context="b")
    assert other.server == "https://h:6443"
    assert isinstance(other.auth, NoAuth)


async def test_token_file_wins_over_inline_token_like_client_go(tmp_path: Path) -> None:
    doc = kubeconfig(
        clusters={"c": {"server": "https://x"}},
        users={"u": {"token": TOKEN, "tokenFile": "tok"}},
        contexts={"a": {"cluster": "c", "user": "u"}},
        current="a",
    )
    path = write(tmp_path / "config", doc)
    cfg = load_kubeconfig([path])  # the file is missing: the inline token is used
    assert await cfg.auth.headers() == {"Authorization": f"Bearer {TOKEN}"}
    write(tmp_path / "tok", TOKEN_B)
    await cfg.auth.refresh()
    assert await cfg.auth.headers() == {"Authorization": f"Bearer {TOKEN_B}"}


def test_repr_never_shows_secrets(tmp_path: Path, pki: Pki) -> None:
    path = write(tmp_path / "config", base_doc(pki))
    for context in ("main", "basic", "cert"):
        text = repr(load_kubeconfig([path], context=context))
        assert "k.example" in text
        for secret in [TOKEN, PASSWORD, *pki.secrets]:
            assert secret not in text


# --- malformed input: clear messages, naming file and key, never a secret ---------------


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        target: Any = doc
        for key in path[:-1]:
            target = target[key]
        if value is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return change


_DELETE = object()
CLUSTER = ["clusters", 0, "cluster"]
TOK_USER = ["users", 0, "user"]
CERT_USER = ["users", 2, "user"]
MAIN = ["contexts", 0, "context"]
BAD_KEY_PEM = f"-----BEGIN PRIVATE KEY-----\n{KEY_MARK}\n-----END PRIVATE KEY-----\n".encode()

ERROR_CASES: list[tuple[str, Callable[[dict[str, Any]], None], str | None, list[str]]] = [
    ("no current", _set(["current-context"], _DELETE), None, ["no current-context"]),
    ("unknown context", lambda d: None, "nope", ["context 'nope' is not defined", "main"]),
    ("unknown cluster", _set([*MAIN, "cluster"], "ghost"), None, ["names cluster 'ghost'"]),
    ("unknown user", _set([*MAIN, "user"], "ghost"), None, ["context 'main'", "user 'ghost'"]),
    ("no cluster", _set([*MAIN, "cluster"], _DELETE), None, ["context 'main'", "cluster"]),
    ("no server", _set([*CLUSTER, "server"], _DELETE), None, ["cluster 'c'", "server"]),
    (
        "bad ca base64",
        _set([*CLUSTER, "certificate-authority-data"], "%%not base64%%"),
        None,
        ["cluster 'c'", "certificate-authority-data is not valid base64"],
    ),
    (
        "bad key base64",
        _set([*CERT_USER, "client-key-data"], f"!!{KEY_MARK}"),
        "cert",
        ["user 'cert'", "client-key-data is not valid base64"],
    ),
    (
        "ca data and file",
        _set([*CLUSTER, "certificate-authority"], "nowhere/ca.pem"),
        None,
        ["cluster 'c'", "both certificate-authority-data and certificate-authority"],
    ),
    (
        "ca not pem",
        _set([*CLUSTER, "certificate-authority-data"], b64(b"not a certificate")),
        None,
        ["cluster 'c'", "not PEM"],
    ),
    (
        "insecure with ca",
        _set([*CLUSTER, "insecure-skip-tls-verify"], True),
        None,
        ["insecure-skip-tls-verify cannot be combined"],
    ),
    (
        "insecure not bool",
        _set([*CLUSTER, "insecure-skip-tls-verify"], "yes"),
        None,
        ["insecure-skip-tls-verify must be true or false"],
    ),
    (
        "cert without key",
        _set([*CERT_USER, "client-key-data"], _DELETE),
        "cert",
        ["user 'cert'", "client-key"],
    ),
    (
        "key not pem",
        _set([*CERT_USER, "client-key-data"], b64(BAD_KEY_PEM)),
        "cert",
        ["user 'cert'", "not valid PEM"],
    ),
    (
        "two methods",
        _set([*TOK_USER, "password"], PASSWORD),
        None,
        ["user 'tok'", "more than one authentication method"],
    ),
    ("token not string", _set([*TOK_USER, "token"], 12345), None, ["token must be a string"]),
    (
        "missing token file",
        _set([*TOK_USER], {"tokenFile": "gone/token"}),
        None,
        ["user 'tok'", "tokenFile", "gone/token", "No such file"],
    ),
    (
        "auth provider",
        _set([*TOK_USER, "auth-provider"], {"name": "gcp"}),
        None,
        ["auth-provider is not supported"],
    ),
    (
        "duplicate",
        lambda d: d["users"].append({"name": "tok", "user": {"token": TOKEN_B}}),
        None,
        ["user 'tok' is defined twice"],
    ),
    (
        "nameless",
        lambda d: d["clusters"].append({"cluster": {}}),
        None,
        ["clusters[1] has no name"],
    ),
    ("clusters not list", _set(["clusters"], {"c": 1}), None, ["clusters must be a list"]),
]


@pytest.mark.parametrize(
    ("change", "context", "expected"),
    [case[1:] for case in ERROR_CASES],
    ids=[case[0] for case in ERROR_CASES],
)
def test_malformed_kubeconfig(
    change: Callable[[dict[str, Any]], None],
    context: str | None,
    expected: list[str],
    tmp_path: Path,
    pki: Pki,
) -> None:
    doc = base_doc(pki)
    change(doc)
    path = write(tmp_path / "cfg" / "config", doc)
    with pytest.raises(ConfigError) as info:
        load_kubeconfig([path], context=context)
    message = str(info.value)
    assert str(path) in message
    for fragment in expected:
        assert fragment in message
    for secret in [TOKEN, TOKEN_B, PASSWORD, KEY_MARK, *pki.secrets]:
        assert secret not in message
        assert secret not in repr(info.value)


def test_unreadable_ca_file(tmp_path: Path) -> None:
    doc = kubeconfig(
        clusters={"c": {"server": "https://x", "certificate-authority": "nowhere/ca.pem"}},
        users={},
        contexts={"a": {"cluster": "c"}},
        current="a",
    )
    path = write(tmp_path / "config", doc)
    with pytest.raises(ConfigError, match="cannot read certificate-authority") as info:
        load_kubeconfig([path])
    assert str(tmp_path / "nowhere" / "ca.pem") in str(info.value)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"users:\n- name: u\n  user: {{token: {TOKEN}\n", "not valid YAML at line"),
        (f"- {TOKEN}\n", "must be a mapping"),
        (b"\xff\xfe" + TOKEN.encode(), "not UTF-8"),
    ],
)
def test_unparsable_file(tmp_path: Path, text: str | bytes, expected: str) -> None:
    path = tmp_path / "config"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError, match=expected) as info:
        load_kubeconfig([path])
    assert str(path) in str(info.value)
    assert TOKEN not in str(info.value)


def test_missing_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="does not exist") as info:
        load_kubeconfig([tmp_path / "nope"])
    assert str(tmp_path / "nope") in str(info.value)
    with pytest.raises(ConfigError, match=r"\.kube/config does not exist"):
        load_kubeconfig()
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}")
    with pytest.raises(ConfigError, match="none of the files in KUBECONFIG exists") as info:
        load_kubeconfig()
    assert str(tmp_path / "b") in str(info.value)


def test_empty_kubeconfig_env_means_home(
    home: Path, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(home / ".kube" / "config", base_doc(pki))
    monkeypatch.setenv("KUBECONFIG", os.pathsep)
    assert load_kubeconfig().context == "main"


# --- in-cluster ---------------------------------------------------------------------------

CLUSTER_ENV = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


@pytest.fixture
def sa_root(tmp_path: Path, pki: Pki) -> Path:
    root = tmp_path / "sa"
    write(root / "token", TOKEN + "\n")
    write(root / "ca.crt", pki.ca.decode())
    write(root / "namespace", "apps\n")
    return root


async def test_incluster(sa_root: Path, pki: Pki) -> None:
    cfg = load_incluster(sa_root, CLUSTER_ENV)
    assert (cfg.server, cfg.namespace, cfg.ca_data) == ("https://10.96.0.1:443", "apps", pki.ca)
    assert await cfg.auth.headers() == {"Authorization": f"Bearer {TOKEN}"}
    assert TOKEN not in repr(cfg)
    assert cfg.ssl_context() is not None


def test_incluster_ipv6_and_pod_namespace(sa_root: Path) -> None:
    environ = {**CLUSTER_ENV, "KUBERNETES_SERVICE_HOST": "fd00:10:96::1", "POD_NAMESPACE": "mine"}
    cfg = load_incluster(sa_root, environ)
    assert (cfg.server, cfg.namespace) == ("https://[fd00:10:96::1]:443", "mine")


def test_incluster_defaults(sa_root: Path, caplog: pytest.LogCaptureFixture) -> None:
    (sa_root / "namespace").unlink()
    (sa_root / "ca.crt").unlink()
    cfg = load_incluster(sa_root, CLUSTER_ENV)
    assert (cfg.namespace, cfg.ca_data) == ("default", None)
    assert "ca.crt" in caplog.text


def test_incluster_errors(sa_root: Path) -> None:
    with pytest.raises(ConfigError, match="not running in a cluster"):
        load_incluster(sa_root, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    (sa_root / "token").unlink()
    with pytest.raises(ConfigError, match="service account token") as info:
        load_incluster(sa_root, CLUSTER_ENV)
    assert str(sa_root / "token") in str(info.value)


async def test_incluster_token_rotation(sa_root: Path) -> None:
    cfg = load_incluster(sa_root, CLUSTER_ENV)
    assert await cfg.auth.headers() == {"Authorization": f"Bearer {TOKEN}"}
    write(sa_root / "token", TOKEN_B)
    assert await cfg.auth.headers() == {"Authorization": f"Bearer {TOKEN}"}  # within 60 s
    await cfg.auth.refresh()  # as after a 401
    assert await cfg.auth.headers() == {"Authorization": f"Bearer {TOKEN_B}"}


# --- TokenFile ----------------------------------------------------------------------------


async def test_token_file_rereads_after_max_age(tmp_path: Path) -> None:
    now = [1000.0]
    path = write(tmp_path / "token", TOKEN)
    auth = TokenFile(path, clock=lambda: now[0])
    write(path, TOKEN_B)
    now[0] += 59
    assert await auth.headers() == {"Authorization": f"Bearer {TOKEN}"}
    now[0] += 2
    assert await auth.headers() == {"Authorization": f"Bearer {TOKEN_B}"}


async def test_token_file_keeps_last_good_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path / "token", TOKEN)
    auth = TokenFile(path)
    path.unlink()
    await auth.refresh()
    assert await auth.headers() == {"Authorization": f"Bearer {TOKEN}"}
    assert "cannot re-read token file" in caplog.text
    write(path, "\n")
    await auth.refresh()
    assert await auth.headers() == {"Authorization": f"Bearer {TOKEN}"}
    assert "empty" in caplog.text
    assert repr(auth) == f"TokenFile({str(path)!r})"


def test_token_file_must_exist_and_not_be_empty(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        TokenFile(tmp_path / "none")
    with pytest.raises(ValueError, match="empty"):
        TokenFile(write(tmp_path / "empty", " \n"))


# --- load_config: the Client.from_env() chain ------------------------------------------


def test_load_config_order(
    tmp_path: Path, home: Path, pki: Pki, sa_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = base_doc(pki)
    explicit = write(tmp_path / "explicit", doc)
    doc["current-context"] = "basic"
    from_env = write(tmp_path / "env", doc)
    doc["current-context"] = "cert"
    write(home / ".kube" / "config", doc)
    monkeypatch.setattr(config_mod, "SERVICE_ACCOUNT_DIR", sa_root)
    for key, value in CLUSTER_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("KUBECONFIG", str(from_env))
    assert load_config(str(explicit)).context == "main"
    assert load_config().context == "basic"
    assert load_config(context="cert").context == "cert"
    monkeypatch.delenv("KUBECONFIG")
    assert load_config().context == "cert"
    (home / ".kube" / "config").unlink()
    assert load_config().server == "https://10.96.0.1:443"
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    assert load_config().server == "https://10.96.0.1:443"  # like client-go: empty -> in-cluster


def test_load_config_nothing_found(home: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config()
    message = str(info.value)
    assert "no Kubernetes configuration found" in message
    assert str(home / ".kube" / "config") in message
    assert "KUBERNETES_SERVICE_HOST" in message
    with pytest.raises(ConfigError, match="skipped, because context 'x'"):
        load_config(context="x")
