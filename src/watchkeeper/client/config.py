"""Where the API server is and how to talk to it: kubeconfig, in-cluster, exec plugins.

CONTRACT (the transport and the simulator depend on this shape; loaders fill it in):
``ClientConfig`` is immutable; ``ssl_context()`` builds the TLS context (verification on
unless ``insecure_skip_tls_verify``); ``auth`` yields request headers.

The loaders follow kubectl (client-go's clientcmd), which is the reference: the same files,
the same merge order, the same relative-path rules. Where kubectl would prompt or guess
(a context without a server, a user name that is not defined) we stop with a ``ConfigError``
that names the file and the key instead. No message or repr ever contains a credential.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import logging
import os
import re
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import yaml

from watchkeeper.client.auth import (
    Auth,
    BasicAuth,
    NoAuth,
    StaticToken,
    TokenFile,
    describe_read_error,
    header_safe,
)
from watchkeeper.client.errors import ConfigError as ConfigError
from watchkeeper.client.exec_auth import ExecAuth

__all__ = [
    "SERVICE_ACCOUNT_DIR",
    "ClientConfig",
    "ConfigError",
    "load_config",
    "load_incluster",
    "load_kubeconfig",
]

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True)
class Impersonation:
    """Act as another user (kubeconfig's ``as``, ``as-uid``, ``as-groups``, ``as-user-extra``;
    kubectl's ``--as``): sent as the Impersonate-* headers, which the server authorizes as
    the ``impersonate`` verb for the real user."""

    user: str
    uid: str | None = None
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def headers(self) -> list[tuple[str, str]]:
        """One header per value (groups and extras repeat); extra keys percent-encoded as
        client-go does, since header names cannot carry every character a key may have."""
        out = [("Impersonate-User", self.user)]
        if self.uid:
            out.append(("Impersonate-Uid", self.uid))
        out += [("Impersonate-Group", g) for g in self.groups]
        for key, values in self.extra:
            name = "Impersonate-Extra-" + quote(key, safe="")
            out += [(name, v) for v in values]
        return out



@dataclass(frozen=True)
class ClientConfig:
    server: str  # "https://host:port" or "http://127.0.0.1:port", no trailing slash
    namespace: str = "default"
    ca_data: bytes | None = field(default=None, repr=False)  # PEM bundle to trust
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    # kubeconfig's cluster ``disable-compression`` (client-go's DisableCompression): ask the
    # server for uncompressed bodies. It gzips responses over 128 KiB by default, which costs
    # its CPU and ours; on a fast link (in-cluster) that buys nothing (docs/decisions.md).
    disable_compression: bool = False
    client_cert_data: bytes | None = field(default=None, repr=False)  # PEM
    client_key_data: bytes | None = field(default=None, repr=False)  # PEM
    auth: Auth = field(default_factory=NoAuth)
    impersonate: Impersonation | None = None
    context: str | None = None  # kubeconfig context name this came from, for messages

    @classmethod
    def from_kubeconfig(
        cls,
        path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
        context: str | None = None,
    ) -> ClientConfig:
        """A context of a kubeconfig, as kubectl reads it: ``path`` is one file or several
        merged (default: KUBECONFIG, else ~/.kube/config); ``context`` overrides the
        current-context, like ``kubectl --context``. Raises ``ConfigError``."""
        if path is None or isinstance(path, str | os.PathLike):
            return load_kubeconfig(None if path is None else [path], context)
        return load_kubeconfig(path, context)

    @classmethod
    def in_cluster(cls) -> ClientConfig:
        """The pod's service account (token re-read as it rotates). Raises ``ConfigError``
        outside a pod."""
        return load_incluster()

    @classmethod
    def from_env(cls, kubeconfig: str | None = None, context: str | None = None
                 ) -> ClientConfig:
        """What ``Client.from_env`` uses, to adjust before building a ``Client``: the file
        given, else KUBECONFIG, ~/.kube/config, then in-cluster. Raises ``ConfigError``."""
        return load_config(kubeconfig, context)

    def ssl_context(self) -> ssl.SSLContext | None:
        """None for plain HTTP; otherwise a verifying context unless told to skip."""
        if not self.server.startswith("https://"):
            return None
        ctx = ssl.create_default_context()
        if self.ca_data:
            ctx.load_verify_locations(cadata=self.ca_data.decode())
        if self.insecure_skip_tls_verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.client_cert_data and self.client_key_data:
            _load_cert_chain(ctx, self.client_cert_data, self.client_key_data)
        return ctx


def _load_cert_chain(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """ssl only loads a chain from files: write both to a private temp dir, load, remove."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory(prefix="watchkeeper-") as tmp:
        os.chmod(tmp, 0o700)
        cert_path = os.path.join(tmp, "client.crt")
        key_path = os.path.join(tmp, "client.key")
        for path, data in ((cert_path, cert), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        try:
            ctx.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as exc:
            raise ConfigError(f"client certificate or key is not valid PEM: {exc.reason}") from None


# --- kubeconfig -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Named:
    """One clusters/users/contexts entry and the file it came from (for paths and messages)."""

    kind: str  # "cluster", "user" or "context"
    name: str
    body: Mapping[str, Any]
    origin: Path

    @property
    def where(self) -> str:
        return f"{self.kind} {self.name!r} in {self.origin}"

    def text(self, key: str) -> str | None:
        """A string field; None when absent or empty (Go's zero value)."""
        value = self.body.get(key)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise ConfigError(f"{self.where}: {key} must be a string")
        return value

    def flag(self, key: str) -> bool:
        value = self.body.get(key, False)
        if not isinstance(value, bool):
            raise ConfigError(f"{self.where}: {key} must be true or false")
        return value

    def path(self, key: str) -> Path | None:
        """A file reference; relative paths are relative to the kubeconfig's directory."""
        value = self.text(key)
        return None if value is None else self.origin.parent / value

    def data(self, data_key: str, file_key: str) -> bytes | None:
        """Bytes given inline as base64 (``data_key``) or by file; both at once is an error."""
        raw, path = self.text(data_key), self.path(file_key)
        if raw is not None and path is not None:
            raise ConfigError(f"{self.where}: both {data_key} and {file_key} are set; keep one")
        if raw is not None:
            try:
                return base64.b64decode("".join(raw.split()), validate=True)
            except (binascii.Error, ValueError):
                raise ConfigError(f"{self.where}: {data_key} is not valid base64") from None
        if path is not None:
            try:
                return path.read_bytes()
            except OSError as exc:
                raise ConfigError(
                    f"{self.where}: cannot read {file_key} {path}: {describe_read_error(exc)}"
                ) from None
            except ValueError:  # open() refuses a path with a NUL ("embedded null byte")
                raise ConfigError(f"{self.where}: {file_key} holds a NUL character") from None
        return None


@dataclass
class _Merged:
    """Several kubeconfig files merged the way kubectl does: the first definition wins."""

    files: list[Path]
    current_context: str | None = None
    entries: dict[str, dict[str, _Named]] = field(
        default_factory=lambda: {"cluster": {}, "user": {}, "context": {}}
    )

    @property
    def where(self) -> str:
        return ", ".join(str(f) for f in self.files)

    def add_file(self, path: Path) -> None:
        doc = _read_yaml(path)
        if self.current_context is None:
            current = doc.get("current-context")
            if current is not None and not isinstance(current, str):
                raise ConfigError(f"kubeconfig {path}: current-context must be a string")
            self.current_context = current or None
        for kind in ("cluster", "user", "context"):
            seen: set[str] = set()
            for entry in _named_list(doc, kind, path):
                if entry.name in seen:
                    raise ConfigError(f"kubeconfig {path}: {kind} {entry.name!r} is defined twice")
                seen.add(entry.name)
                self.entries[kind].setdefault(entry.name, entry)

    def get(self, kind: str, name: str, referrer: _Named) -> _Named:
        try:
            return self.entries[kind][name]
        except KeyError:
            raise ConfigError(
                f"{referrer.where} names {kind} {name!r}, which is not defined in {self.where}"
            ) from None


def _read_yaml(path: Path) -> Mapping[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read kubeconfig {path}: {describe_read_error(exc)}") from None
    try:
        doc = yaml.load(text, Loader=_Loader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        # str(exc) quotes the offending line, which may hold a secret: use only the position
        # and the problem, with any value it quotes (a tag, an alias, a character) left out.
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = _QUOTED.sub(_unquote, getattr(exc, "problem", None) or "syntax error")
        raise ConfigError(f"kubeconfig {path} is not valid YAML{at}: {problem}") from None
    except RecursionError:
        raise ConfigError(f"kubeconfig {path} is not valid YAML: nested too deeply") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ConfigError(f"kubeconfig {path} must be a mapping (apiVersion, clusters, ...)")
    return doc


class _Loader(yaml.SafeLoader):
    """SafeLoader whose conversion failures (``!!int abc``, a timestamp that is no date,
    ``!!binary`` that is not base64) are YAML errors at the node's position, instead of a
    ValueError or TypeError quoting the value."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, AttributeError, OverflowError, binascii.Error):
            raise yaml.constructor.ConstructorError(
                None, None, f"a {node.tag.rpartition(':')[2] or 'value'} value cannot be read",
                node.start_mark,
            ) from None


# A value quoted in a YAML problem ("tag '!Passw0rd'", "alias 'x'"); a token name such as
# '<scalar>' and a lone punctuation or white-space character ('\t', ':') are harmless.
_QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")


def _unquote(m: re.Match[str]) -> str:
    inner = m.group(1) if m.group(1) is not None else m.group(2)
    harmless = (inner.startswith("<") and inner.endswith(">")) or (
        len(inner) <= 2 and not any(c.isalnum() for c in inner)
    )
    return m.group(0) if harmless else "(value not shown)"


def _named_list(doc: Mapping[str, Any], kind: str, path: Path) -> list[_Named]:
    key = f"{kind}s"
    items = doc.get(key) or []
    if not isinstance(items, list):
        raise ConfigError(f"kubeconfig {path}: {key} must be a list")
    out = []
    for i, item in enumerate(items):
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            raise ConfigError(f"kubeconfig {path}: {key}[{i}] has no name")
        body = item.get(kind) or {}
        if not isinstance(body, dict):
            raise ConfigError(f"kubeconfig {path}: {key}[{i}] ({name!r}).{kind} must be a mapping")
        out.append(_Named(kind, name, body, path))
    return out


def _split_env(value: str) -> list[Path]:
    """KUBECONFIG entries in order, empty entries and repeats dropped (as client-go does)."""
    seen: list[Path] = []
    for part in value.split(os.pathsep):
        if part and Path(part) not in seen:
            seen.append(Path(part))
    return seen


def _home_kubeconfig() -> Path:
    return Path(os.environ.get("HOME") or Path.home()) / ".kube" / "config"


def _kubeconfig_files(paths: Sequence[str | os.PathLike[str]] | None) -> list[Path]:
    """Explicit files (all must exist), else KUBECONFIG's (missing ones skipped), else ~."""
    listed = _split_env(os.environ.get("KUBECONFIG", ""))
    if paths is not None:
        files = [Path(p) for p in paths]
        missing = [f for f in files if not f.is_file()]
        if missing or not files:
            raise ConfigError(f"kubeconfig {missing[0] if missing else ''} does not exist")
    elif listed:
        files = [f for f in listed if f.exists()]
        if not files:
            names = ", ".join(str(f) for f in listed)
            raise ConfigError(f"none of the files in KUBECONFIG exists: {names}")
    else:
        files = [_home_kubeconfig()]
        if not files[0].is_file():
            raise ConfigError(f"kubeconfig {files[0]} does not exist and KUBECONFIG is not set")
    return [Path(os.path.abspath(f)) for f in files]


def load_kubeconfig(
    paths: Sequence[str | os.PathLike[str]] | None = None, context: str | None = None
) -> ClientConfig:
    """Resolve a context of the given kubeconfig files (default: KUBECONFIG or ~/.kube/config).

    ``context`` overrides the files' current-context, like ``kubectl --context``.
    """
    merged = _Merged(_kubeconfig_files(paths))
    for f in merged.files:
        merged.add_file(f)
    name = context or merged.current_context
    if not name:
        raise ConfigError(f"no current-context is set in {merged.where}; choose a context")
    ctx = merged.entries["context"].get(name)
    if ctx is None:
        known = ", ".join(sorted(merged.entries["context"])) or "none"
        raise ConfigError(f"context {name!r} is not defined in {merged.where} (defined: {known})")
    cluster_name = ctx.text("cluster")
    if cluster_name is None:
        raise ConfigError(f"{ctx.where}: cluster is not set")
    cluster = merged.get("cluster", cluster_name, ctx)
    user_name = ctx.text("user")
    user = merged.get("user", user_name, ctx) if user_name else None
    cfg = _cluster_config(cluster)
    auth, cert, key = _user_credentials(user, cluster, cfg) if user else (NoAuth(), None, None)
    log.debug("using context %r from %s", name, ctx.origin)
    return ClientConfig(
        server=cfg.server,
        namespace=ctx.text("namespace") or "default",
        ca_data=cfg.ca_data,
        insecure_skip_tls_verify=cfg.insecure_skip_tls_verify,
        tls_server_name=cfg.tls_server_name,
        disable_compression=cfg.disable_compression,
        client_cert_data=cert,
        client_key_data=key,
        auth=auth,
        impersonate=_impersonation(user) if user else None,
        context=name,
    )


def _cluster_config(cluster: _Named) -> ClientConfig:
    """Server and TLS settings of a cluster entry, checked the way client-go checks them."""
    server = cluster.text("server")
    if server is None:
        raise ConfigError(f"{cluster.where}: server is not set")
    ca = cluster.data("certificate-authority-data", "certificate-authority")
    insecure = cluster.flag("insecure-skip-tls-verify")
    if ca is not None and insecure:
        raise ConfigError(
            f"{cluster.where}: insecure-skip-tls-verify cannot be combined with a certificate "
            "authority; remove one"
        )
    if ca is not None:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=ca.decode())
        except (ssl.SSLError, ValueError):
            raise ConfigError(f"{cluster.where}: the certificate authority is not PEM") from None
    if "://" not in server:  # client-go: a bare host:port gets https when TLS is configured
        server = ("https://" if ca is not None or insecure else "http://") + server
    _check_server(server, cluster)
    return ClientConfig(
        server=server.rstrip("/"),
        ca_data=ca,
        insecure_skip_tls_verify=insecure,
        tls_server_name=cluster.text("tls-server-name"),
        disable_compression=cluster.flag("disable-compression"),
    )


def _check_server(server: str, cluster: _Named) -> None:
    """An http(s) URL with a host and a valid port, in ASCII (the watch stream writes its
    request as latin-1; an international domain name is given in its xn-- form): otherwise
    every request would fail with an untyped ValueError. The URL is not quoted (it may
    carry user:password)."""
    try:
        url = urlsplit(server)
        url.port  # noqa: B018  # raises ValueError: not a number, or out of range
    except ValueError:
        raise ConfigError(f"{cluster.where}: server is not a valid URL") from None
    host = url.hostname or ""
    if url.scheme not in ("http", "https") or not host or not server.isascii() or \
            not server.isprintable() or " " in server or \
            not all(c.isalnum() or c in "-._:%" for c in host):
        raise ConfigError(
            f"{cluster.where}: server must be an http:// or https:// URL with a host, in ASCII")


def _impersonation(user: _Named) -> Impersonation | None:
    """The user entry's ``as*`` fields; None when it impersonates nobody."""
    name, uid = user.text("as"), user.text("as-uid")
    groups = user.body.get("as-groups") or []
    extra = user.body.get("as-user-extra") or {}
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise ConfigError(f"{user.where}: as-groups must be a list of strings")
    if not isinstance(extra, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(i, str) for i in v)
        for k, v in extra.items()
    ):
        raise ConfigError(f"{user.where}: as-user-extra must map strings to lists of strings")
    values = [v for v in (name, uid) if v] + groups + [i for v in extra.values() for i in v]
    if not all(header_safe(v) for v in values):
        raise ConfigError(
            f"{user.where}: as, as-uid, as-groups and as-user-extra values must be text an "
            "HTTP header can carry (no CR, LF, NUL or characters beyond latin-1)")
    if name is None:
        if uid or groups or extra:  # the server would answer 400; say so before any request
            raise ConfigError(f"{user.where}: as-uid, as-groups and as-user-extra need as")
        return None
    return Impersonation(name, uid, tuple(groups),
                         tuple((k, tuple(v)) for k, v in sorted(extra.items())))


def _user_credentials(
    user: _Named, cluster: _Named, cfg: ClientConfig
) -> tuple[Auth, bytes | None, bytes | None]:
    """The Auth provider and static client certificate of a user entry."""
    if user.body.get("auth-provider"):
        raise ConfigError(f"{user.where}: auth-provider is not supported; use exec instead")
    token, token_file = user.text("token"), user.path("tokenFile")
    if token is not None and not header_safe(token):  # never quoted: it is the credential
        raise ConfigError(f"{user.where}: token holds characters an HTTP header cannot carry")
    username, password = user.text("username"), user.text("password")
    methods = [
        method
        for method, present in (
            ("token", token is not None or token_file is not None),
            ("basicAuth", username is not None or password is not None),
            ("exec", bool(user.body.get("exec"))),
        )
        if present
    ]
    if len(methods) > 1:
        raise ConfigError(f"{user.where}: more than one authentication method ({methods})")
    auth: Auth = NoAuth()
    if token_file is not None:
        try:
            auth = TokenFile(token_file, fallback=token)
        except (OSError, ValueError) as exc:
            why = describe_read_error(exc)
            raise ConfigError(f"{user.where}: cannot read tokenFile {token_file}: {why}") from None
    elif token is not None:
        auth = StaticToken(token)
    elif username is not None or password is not None:
        auth = BasicAuth(username or "", password or "")
    elif user.body.get("exec"):
        info = _exec_cluster_info(cluster, cfg)
        auth = ExecAuth.from_kubeconfig(
            user.body["exec"], where=user.where, base_dir=user.origin.parent, cluster=info
        )
    cert = user.data("client-certificate-data", "client-certificate")
    key = user.data("client-key-data", "client-key")
    if (cert is None) != (key is None):
        raise ConfigError(
            f"{user.where}: a client certificate needs both a certificate "
            "(client-certificate[-data]) and a key (client-key[-data])"
        )
    if cert is not None and key is not None:
        try:
            _load_cert_chain(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), cert, key)
        except ConfigError as exc:
            raise ConfigError(f"{user.where}: {exc}") from None
    return auth, cert, key


def _exec_cluster_info(cluster: _Named, cfg: ClientConfig) -> dict[str, Any]:
    """The ``spec.cluster`` an exec plugin gets with provideClusterInfo (client-go's shape)."""
    info: dict[str, Any] = {"server": cfg.server}
    if cfg.tls_server_name:
        info["tls-server-name"] = cfg.tls_server_name
    if cfg.insecure_skip_tls_verify:
        info["insecure-skip-tls-verify"] = True
    if cfg.ca_data:
        info["certificate-authority-data"] = base64.b64encode(cfg.ca_data).decode()
    extensions = cluster.body.get("extensions") or []
    if not isinstance(extensions, list):
        raise ConfigError(f"{cluster.where}: extensions must be a list")
    for i, ext in enumerate(extensions):
        if not isinstance(ext, dict) or not isinstance(ext.get("name"), str):
            raise ConfigError(f"{cluster.where}: extensions[{i}] must be a mapping with a name")
        if ext["name"] == "client.authentication.k8s.io/exec":
            # Passed to the plugin as JSON (KUBERNETES_EXEC_INFO): a YAML date becomes its
            # RFC 3339 text, as client-go's YAML-to-JSON conversion makes it; anything JSON
            # has no form for is refused here rather than when the plugin is run.
            try:
                info["config"] = json.loads(json.dumps(
                    ext.get("extension"), default=_json_scalar, allow_nan=False))
            except (TypeError, ValueError, RecursionError):
                raise ConfigError(
                    f"{cluster.where}: extensions[{i}].extension cannot be passed to the exec "
                    "plugin as JSON") from None
    return info


def _json_scalar(value: Any) -> str:
    if isinstance(value, datetime.date):  # datetime.datetime too
        return value.isoformat()
    raise TypeError(type(value).__name__)


# --- in-cluster and the default chain ---------------------------------------------------


def load_incluster(
    root: Path = SERVICE_ACCOUNT_DIR, environ: Mapping[str, str] = os.environ
) -> ClientConfig:
    """The pod's service account: API address from the environment, token re-read as it rotates."""
    host = environ.get("KUBERNETES_SERVICE_HOST", "")
    port = environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError(
            "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
            "must both be set"
        )
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    token_path = root / "token"
    try:
        auth = TokenFile(token_path)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"in-cluster: cannot read the service account token {token_path}: "
            f"{describe_read_error(exc)}"
        ) from None
    ca_path = root / "ca.crt"
    try:
        ca: bytes | None = ca_path.read_bytes()
    except OSError as exc:  # client-go logs this and goes on with the system roots
        log.error("in-cluster: cannot read %s (%s); using system CAs", ca_path, exc.strerror)
        ca = None
    namespace = environ.get("POD_NAMESPACE", "")
    if not namespace:
        try:
            namespace = (root / "namespace").read_text(encoding="utf-8").strip()
        except (OSError, ValueError):
            namespace = ""
    return ClientConfig(
        server=f"https://{host}:{port}", namespace=namespace or "default", ca_data=ca, auth=auth
    )


def load_config(kubeconfig: str | None = None, context: str | None = None) -> ClientConfig:
    """``Client.from_env()``: explicit file, KUBECONFIG, ~/.kube/config, then in-cluster."""
    if kubeconfig:
        return load_kubeconfig([kubeconfig], context)
    tried: list[str] = []
    listed = _split_env(os.environ.get("KUBECONFIG", ""))
    if listed:
        if any(f.exists() for f in listed):
            return load_kubeconfig(None, context)
        tried.append(f"KUBECONFIG: none of {', '.join(map(str, listed))} exists")
    else:
        home = _home_kubeconfig()
        if home.is_file():
            return load_kubeconfig(None, context)
        tried.append(f"{home}: does not exist (and KUBECONFIG is not set)")
    if context:
        tried.append(f"in-cluster: skipped, because context {context!r} was asked for")
    else:
        try:
            return load_incluster(SERVICE_ACCOUNT_DIR)
        except ConfigError as exc:
            tried.append(str(exc))
    raise ConfigError("no Kubernetes configuration found; tried:\n  - " + "\n  - ".join(tried))
